/**
 * The validator: every rule of ResourceSync 1.1 (ANSI/NISO Z39.99-2017) and of the Notification draft 0.8 that
 * can be checked on one document, reported as a list of issues (it never stops at the first). The rules, their
 * codes, severities and sections are listed in {@link RULES} (`rules.ts`).
 *
 * Streaming: {@link createValidator} takes the document header, then the entries one at a time, and keeps only
 * bounded state: counters, the previous datetime (chronological order), the first package type, the set of
 * capabilities of a Capability List (at most 1,000), and the set of `<loc>` values for the duplicate check, which
 * is kept for the first `maxTrackedLocs` (default 50,000) distinct values only; a later entry is checked against
 * those but not remembered (with a 128 KiB filter in front of that set). Issues are kept up to `maxIssues` (default
 * 1,000); later ones are only counted. Memory is therefore O(maxTrackedLocs × loc length + maxIssues), whatever the
 * size of the document. Note that a `loc` from the XML reader may be a slice of the decoded text it came from, so
 * the set can keep that text alive too: about the size of the document part that holds the tracked entries.
 *
 * @example
 * ```ts
 * const stream = await openDocument(fileSource('changelist.xml'));
 * const result = await validateStream(stream);
 * for (const i of result.issues) console.log(`${i.line}: ${i.severity} ${i.code} ${i.message} (${i.section})`);
 * ```
 *
 * @module
 */
import {
  CAPABILITIES,
  CHANGE_FREQUENCIES,
  CHANGE_TYPES,
  FRAMEWORK_CHANGE_TYPES,
  frameworkChangeTypes,
  MAX_DOCUMENT_BYTES,
  MAX_ENTRIES,
  RELATIONS,
  RS_NS,
  SITEMAP_NS,
  ZIP_MEDIA_TYPE,
} from './constants.js';
import { parseDatetime } from './datetime.js';
import { ResourceSyncError } from './errors.js';
import type {
  DocumentHeader,
  DocumentKind,
  Entry,
  ExtensionAttribute,
  ExtensionElement,
  Link,
  Metadata,
  ResourceSyncDocument,
} from './model.js';
import { notificationKind } from './model.js';
import { RULES_BY_CODE, type RuleCode, type Severity } from './rules.js';
import {
  checkHashAttribute,
  hasInvalidUriChars,
  hasMalformedPercent,
  isAbsoluteUri,
  isKnownRelation,
  isMediaType,
  isPlainAbsoluteUri,
  isSafePath,
  clip,
  quote,
} from './validate-values.js';

/** One problem found in a document. */
export interface ValidationIssue {
  /** A rule code of {@link RULES}, or the `ResourceSyncError` code of a document that could not be read. */
  readonly code: string;
  readonly severity: Severity;
  readonly message: string;
  /** Section of the standard the issue enforces, e.g. `§12.1`, `App. A`, `N-§4`. */
  readonly section: string;
  /** 1-based number of the entry (`<url>` / `<sitemap>`) the issue is about; absent for document-level issues. */
  readonly entry?: number;
  /** 1-based line, when the reader recorded it. */
  readonly line?: number;
  /** Element the issue is about, e.g. `rs:md`, `rs:ln`, `loc`, `urlset`. */
  readonly element?: string;
  /** Attribute the issue is about, e.g. `at`, `hash`. */
  readonly attribute?: string;
}

/** Options of {@link createValidator}. */
export interface ValidateOptions {
  /** The kind the caller expects (e.g. from where it found the link); a different kind is an error. */
  readonly expectedKind?: DocumentKind;
  /** Maximum number of entries in one document (§7: 50,000). */
  readonly maxEntries?: number;
  /** Maximum size of one document in bytes, uncompressed (§7: 52,428,800). */
  readonly maxBytes?: number;
  /** Size of the document in bytes, uncompressed, when known (checked against {@link maxBytes}). */
  readonly documentBytes?: number;
  /** Issues kept in the result (default 1,000); later ones are counted in `suppressed`. */
  readonly maxIssues?: number;
  /** Entries whose `<loc>` is remembered for the duplicate check (default 50,000). */
  readonly maxTrackedLocs?: number;
}

/** The outcome of validating one document. */
export interface ValidationResult {
  /** The kind of the document (a notification payload is recognised from its entries). */
  readonly kind: DocumentKind;
  /** Number of entries seen. */
  readonly entries: number;
  /** Issues in document order (document-level ones first), at most `maxIssues`. */
  readonly issues: ValidationIssue[];
  /** Numbers of errors and warnings found, including those not kept. */
  readonly errors: number;
  readonly warnings: number;
  /** Issues found but not kept because of `maxIssues`. */
  readonly suppressed: number;
  /** True when no error was found (warnings allowed). */
  readonly valid: boolean;
}

/**
 * Something the reader noticed that is well-formed but has no place in the model (the shape of `ReadIssue` of
 * `xml/parser.ts`, restated here so core/ does not depend on xml/).
 */
export interface ReaderNote {
  /** `late-element`, `unexpected-text`, `unexpected-child`, `unexpected-attribute` (others are ignored). */
  readonly code: string;
  readonly message: string;
  readonly line?: number;
  readonly entry?: number;
  readonly element?: string;
  /** The element concerned, for `late-element`. */
  readonly node?: { readonly ns: string; readonly local: string };
}

/** A streaming validator: feed the entries in order, then call `finish`. */
export interface DocumentValidator {
  /** Checks one entry; `index` is its 0-based position (defaults to the number of entries seen so far). */
  entry(entry: Entry, index?: number): void;
  /** Reports an issue found outside the model, e.g. a read error in the middle of the document. */
  report(issue: ValidationIssue): void;
  /** The size of the document in bytes, uncompressed, once known (the `size-limit` rule; before `finish`). */
  bytes(n: number): void;
  /** Turns a reader's note into the issue of the rule it breaks. */
  note(note: ReaderNote): void;
  /** Document-level checks that need every entry, and the result. Call once. */
  finish(): ValidationResult;
}

/** What each document kind requires; see §8–§13, Appendix A (Table 4) and the Notification draft. */
interface Profile {
  readonly name: string;
  /** Section of the document kind. */
  readonly section: string;
  /** Mandatory root time attribute (App. A): `at` for snapshots, `from` for changes. */
  readonly rootTime: 'at' | 'from' | 'none';
  /** Child time attributes (App. A): which may be used on entries. */
  readonly childTime: 'at' | 'from' | 'none';
  /** App. A: child `from` recommended. */
  readonly childFromRecommended: boolean;
  readonly up: 'mandatory' | 'unexpected';
  readonly rootDescribedby: boolean;
  readonly entryMd: 'mandatory' | 'optional';
  /** Entries carry change (mandatory) and datetime. */
  readonly changes: boolean;
  readonly path: 'mandatory' | 'unless-deleted' | 'not-used';
  readonly capability: 'description' | 'description-index' | 'capabilitylist' | 'framework' | 'not-used';
  readonly order: 'datetime' | 'from' | 'from-should' | 'none';
  readonly duplicateLoc: boolean;
  readonly packages: boolean;
  readonly typeRecommended: boolean;
  readonly noRootMd: boolean;
}

const BASE: Profile = {
  name: '',
  section: '§7',
  rootTime: 'none',
  childTime: 'none',
  childFromRecommended: false,
  up: 'mandatory',
  rootDescribedby: false,
  entryMd: 'optional',
  changes: false,
  path: 'not-used',
  capability: 'not-used',
  order: 'none',
  duplicateLoc: false,
  packages: false,
  typeRecommended: false,
  noRootMd: false,
};

function profile(name: string, section: string, p: Partial<Profile>): Profile {
  return { ...BASE, name, section, ...p };
}

const PROFILES: Readonly<Record<string, Profile>> = {
  'source-description': profile('Source Description', '§8', {
    up: 'unexpected',
    rootDescribedby: true,
    capability: 'description',
    duplicateLoc: true,
  }),
  // §8 (last paragraph): several Source Descriptions are grouped by a Source Description Index; §6.1: a
  // <sitemapindex> with the capability of what it lists ("description"); it is the top of the hierarchy (no up).
  'source-description-index': profile('Source Description Index', '§8, §6.1', {
    up: 'unexpected',
    duplicateLoc: true,
    capability: 'description-index',
  }),
  'capability-list': profile('Capability List', '§9', {
    rootDescribedby: true,
    entryMd: 'mandatory',
    capability: 'capabilitylist',
  }),
  'capability-list-index': profile('Capability List Index', '§9', {}),
  'resource-list': profile('Resource List', '§10.1', { rootTime: 'at', duplicateLoc: true }),
  'resource-list-index': profile('Resource List Index', '§10.2', {
    rootTime: 'at',
    childTime: 'at',
    duplicateLoc: true,
  }),
  'resource-dump': profile('Resource Dump', '§11.1', { rootTime: 'at', childTime: 'at', packages: true }),
  'resource-dump-index': profile('Resource Dump Index', '§11.1', { rootTime: 'at', childTime: 'at' }),
  'resource-dump-manifest': profile('Resource Dump Manifest', '§11.2', {
    rootTime: 'at',
    entryMd: 'mandatory',
    path: 'mandatory',
    typeRecommended: true,
    duplicateLoc: true,
  }),
  'change-list': profile('Change List', '§12.1', {
    rootTime: 'from',
    entryMd: 'mandatory',
    changes: true,
    order: 'datetime',
  }),
  'change-list-index': profile('Change List Index', '§12.2', {
    rootTime: 'from',
    childTime: 'from',
    childFromRecommended: true,
    order: 'from',
  }),
  'change-dump': profile('Change Dump', '§13.1', {
    rootTime: 'from',
    childTime: 'from',
    childFromRecommended: true,
    order: 'from-should',
    packages: true,
  }),
  'change-dump-index': profile('Change Dump Index', '§13.1', {
    rootTime: 'from',
    childTime: 'from',
    childFromRecommended: true,
    order: 'from-should',
  }),
  'change-dump-manifest': profile('Change Dump Manifest', '§13.2', {
    rootTime: 'from',
    entryMd: 'mandatory',
    changes: true,
    path: 'unless-deleted',
    typeRecommended: true,
    order: 'datetime',
  }),
  'change-notification': profile('change notification', 'N-§4', {
    entryMd: 'mandatory',
    changes: true,
    noRootMd: true,
  }),
  'framework-notification': profile('framework notification', 'N-§5', {
    entryMd: 'mandatory',
    changes: true,
    capability: 'framework',
    noRootMd: true,
  }),
};

/** Capabilities a Capability List may advertise (§9; N-§3 adds the notification channels). */
const CAPABILITY_LIST_ENTRIES = new Set([
  'resourcelist',
  'resourcedump',
  'changelist',
  'changedump',
  'change-notification',
  'framework-notification',
]);
/** Capabilities never advertised in a Capability List: documents above it or inside packages. */
const NOT_IN_CAPABILITY_LIST = new Set([
  'description',
  'capabilitylist',
  'resourcedump-manifest',
  'changedump-manifest',
]);
/** Root capabilities without an index form (§7: only the four capability documents have indexes; §8, §9). */
const NO_INDEX = new Set([
  'resourcedump-manifest',
  'changedump-manifest',
  'change-notification',
  'framework-notification',
]);

const CHANGE_SET: ReadonlySet<string> = new Set(CHANGE_TYPES);
const CAPABILITY_SET: ReadonlySet<string> = new Set(CAPABILITIES);
const CHANGEFREQ_SET: ReadonlySet<string> = new Set(CHANGE_FREQUENCIES);
const PRIORITY = /^(?:0(?:\.\d+)?|1(?:\.0+)?|\.\d+)$/;
const MAX_LOC_CHARS = 2048;
const MAX_TRACKED_CAPABILITIES = 1000;
const ROOT_MD_ATTRIBUTES = new Set(['capability', 'at', 'completed', 'from', 'until']);
const TIME_ATTRIBUTES = ['at', 'completed', 'from', 'until'] as const;
/** The metadata of an entry without <rs:md> (read only). */
const NO_METADATA: Metadata = Object.freeze({});
const SINGLE_ENTRY_CHILDREN = new Set(['loc', 'lastmod', 'changefreq', 'priority']);

/** Where an issue is, inside one document. */
interface Where {
  readonly entry?: number | undefined;
  readonly line?: number | undefined;
  readonly element?: string | undefined;
  readonly attribute?: string | undefined;
}

/**
 * Starts validating a document from its header. The returned validator takes the entries one by one (see the
 * module comment for its memory bound).
 *
 * @example
 * ```ts
 * const v = createValidator(stream.header, { expectedKind: 'change-list' });
 * for await (const e of stream.entries) v.entry(e);
 * const { valid, issues } = v.finish();
 * ```
 */
export function createValidator(header: DocumentHeader, options: ValidateOptions = {}): DocumentValidator {
  return new Validator(header, options);
}

/**
 * Validates a whole document held in memory.
 *
 * @example
 * ```ts
 * const result = validateDocument(await readDocument(bytes), { expectedKind: 'resource-list' });
 * if (!result.valid) for (const i of result.issues) console.error(i.code, i.message, i.section);
 * ```
 */
export function validateDocument(doc: ResourceSyncDocument, options: ValidateOptions = {}): ValidationResult {
  const v = createValidator(doc, options);
  for (let i = 0; i < doc.entries.length; i++) v.entry(doc.entries[i] as Entry, i);
  return v.finish();
}

/** Short name of {@link validateDocument} (`import { validate } from 'resourcesync'`). */
export const validate: (doc: ResourceSyncDocument, options?: ValidateOptions) => ValidationResult = validateDocument;

/**
 * Validates a document as it streams. A `ResourceSyncError` raised while reading the entries (malformed XML,
 * a limit) ends the document and becomes an error issue with the error's code; other errors are rethrown.
 * Memory: that of {@link createValidator}, plus what the stream itself holds.
 */
export async function validateStream(
  stream: {
    readonly header: DocumentHeader;
    readonly entries: AsyncIterable<Entry>;
    /** The same entries in batches (taken instead of `entries` when given: one await per batch). */
    readonly batches?: AsyncIterable<readonly Entry[]> | undefined;
    readonly issues?: readonly ReaderNote[];
    /** Bytes of the document read (uncompressed), complete once the entries are: checked by `size-limit`. */
    readonly bytesRead?: number | undefined;
  },
  options: ValidateStreamOptions = {},
): Promise<ValidationResult> {
  const v = createValidator(stream.header, options);
  const notes = stream.issues;
  let seen = 0;
  const drain = (): void => {
    if (notes === undefined) return;
    while (seen < notes.length) v.note(notes[seen++] as ReaderNote);
  };
  try {
    if (stream.batches !== undefined) {
      for await (const batch of stream.batches) {
        for (let i = 0; i < batch.length; i++) {
          if (notes !== undefined && seen < notes.length) drain();
          v.entry(batch[i] as Entry);
        }
      }
    } else {
      for await (const e of stream.entries) {
        drain();
        v.entry(e);
      }
    }
  } catch (e) {
    if (!(e instanceof ResourceSyncError) || options.rethrow?.(e) === true) throw e;
    drain();
    v.report(issueFromError(e));
  }
  drain();
  if (stream.bytesRead !== undefined) v.bytes(stream.bytesRead);
  return v.finish();
}

/** Options of {@link validateStream}. */
export interface ValidateStreamOptions extends ValidateOptions {
  /** Errors to rethrow rather than report as an issue (e.g. a network error: the input, not the document). */
  readonly rethrow?: (e: ResourceSyncError) => boolean;
}

/**
 * An issue of a rule of {@link RULES}, with the rule's severity and section (or a narrower `section`), for
 * checks made outside the validator (between documents, against a package).
 */
export function createIssue(
  code: RuleCode,
  message: string,
  where: {
    readonly entry?: number;
    readonly line?: number;
    readonly element?: string;
    readonly attribute?: string;
  } = {},
  section?: string,
): ValidationIssue {
  const rule = RULES_BY_CODE.get(code);
  if (rule === undefined) throw new Error(`unknown rule ${code}`);
  return withWhere({ code, severity: rule.severity, message, section: section ?? rule.section }, where);
}

/** The issue for a document that could not be read (or read to its end): the error's code, as an error. */
export function issueFromError(e: ResourceSyncError): ValidationIssue {
  const section = RULES_BY_CODE.get(e.code)?.section ?? '§7';
  return withWhere(
    { code: e.code, severity: 'error', message: e.message, section },
    { entry: e.entry, line: e.line, element: e.element },
  );
}

/** A 32-bit hash of at most 32 characters of `s` (for the filter of seenLoc). */
function sampleHash(s: string): number {
  const n = s.length;
  let h = Math.imul(n, 0x9e3779b1);
  const tail = n > 16 ? n - 16 : 0;
  for (let i = n - 1; i >= tail; i--) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  const step = (tail >> 4) + 1;
  for (let i = 0; i < tail; i += step) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  h ^= h >>> 15;
  h = Math.imul(h, 0x2c1b3c6d);
  return h ^ (h >>> 12);
}

/** A location inside an entry (or at the root when `base` is empty). */
function place(base: Where, element: string, attribute?: string): Where {
  return { entry: base.entry, line: base.line, element, attribute };
}

function withWhere(base: Omit<ValidationIssue, 'entry' | 'line' | 'element' | 'attribute'>, w: Where): ValidationIssue {
  const issue: { -readonly [K in keyof ValidationIssue]: ValidationIssue[K] } = { ...base };
  if (w.entry !== undefined) issue.entry = w.entry;
  if (w.line !== undefined) issue.line = w.line;
  if (w.element !== undefined) issue.element = w.element;
  if (w.attribute !== undefined) issue.attribute = w.attribute;
  return issue;
}

class Validator implements DocumentValidator {
  private readonly header: DocumentHeader;
  private readonly maxEntries: number;
  private readonly maxBytes: number;
  private documentBytes: number | undefined;
  private readonly maxIssues: number;
  private readonly maxTrackedLocs: number;
  private readonly expected: DocumentKind | undefined;
  private readonly issues: ValidationIssue[] = [];
  private errors = 0;
  private warnings = 0;
  private suppressed = 0;
  private count = 0;
  /** Kind reported in the result. */
  private kind: DocumentKind;
  /** Rules of the kind; undefined when the kind is not known. */
  private profile: Profile | undefined;
  /** Header checks wait for the first entry when only it can tell the kind (notification payloads). */
  private headerDone = false;
  private rootFrom: number | undefined;
  private rootUntil: number | undefined;
  private lastOrder: number | undefined;
  private firstPackageType: string | undefined;
  private packageTypeMixed = false;
  private readonly locs = new Set<string>();
  /** Bloom filter of `locs` (see seenLoc), allocated on first use. */
  private locFilter: Int32Array | undefined;
  private readonly capabilities = new Set<string>();
  private finished = false;
  /** Instant of the current entry's datetime, set by checkMdValues. */
  private datetimeMs: number | undefined;
  /** Media types already checked (bounded): most documents repeat a few. */
  private readonly mediaTypes = new Map<string, boolean>();
  private lastMediaType: string | undefined;
  /** The last datetime that raised no issue, and its instant: many lists repeat one (a string comparison). */
  private lastDatetime: string | undefined;
  private lastDatetimeMs = 0;
  private lastMediaTypeOk = false;

  constructor(header: DocumentHeader, options: ValidateOptions) {
    this.header = header;
    this.maxEntries = options.maxEntries ?? MAX_ENTRIES;
    this.maxBytes = options.maxBytes ?? MAX_DOCUMENT_BYTES;
    this.documentBytes = options.documentBytes;
    this.maxIssues = options.maxIssues ?? 1000;
    this.maxTrackedLocs = options.maxTrackedLocs ?? MAX_ENTRIES;
    this.expected = options.expectedKind;
    this.kind = header.kind;
    const canBeNotification = header.md === undefined && header.root === 'urlset';
    const expectsNotification = this.expected === 'change-notification' || this.expected === 'framework-notification';
    if (!canBeNotification || expectsNotification) this.resolveHeader(undefined);
  }

  bytes(n: number): void {
    this.documentBytes = n;
  }

  report(issue: ValidationIssue): void {
    if (issue.severity === 'error') this.errors++;
    else this.warnings++;
    if (this.issues.length < this.maxIssues) this.issues.push(issue);
    else this.suppressed++;
  }

  note(n: ReaderNote): void {
    const where: Where = { entry: n.entry, line: n.line, element: n.element };
    if (n.code === 'late-element') {
      const rs = n.node?.ns === RS_NS && (n.node.local === 'md' || n.node.local === 'ln');
      if (rs) this.add('header-after-entries', n.message, where);
      else this.add('element-misplaced', n.message, where);
    } else if (n.code === 'unexpected-child') this.add('content-unexpected', n.message, where);
    else if (n.code === 'unexpected-attribute') this.add('attribute-unexpected', n.message, where);
    else if (n.code === 'unexpected-text') this.add('text-unexpected', n.message, where);
  }

  private add(code: RuleCode, message: string, where: Where = {}, section?: string): void {
    const rule = RULES_BY_CODE.get(code);
    if (rule === undefined) throw new Error(`unknown rule ${code}`); // a bug in this file, not in the input
    this.report(withWhere({ code, severity: rule.severity, message, section: section ?? rule.section }, where));
  }

  // ---------------------------------------------------------------- document level

  /** Decides the kind (from the header, the first entry, or the expected kind) and checks the header. */
  private resolveHeader(first: Entry | undefined): void {
    this.headerDone = true;
    const h = this.header;
    const md = h.md;
    const capability = md?.capability;
    const rootEl = h.root;
    let key: string | undefined;
    if (md === undefined) {
      const notification =
        rootEl === 'urlset' &&
        (this.expected === 'change-notification' ||
          this.expected === 'framework-notification' ||
          (first !== undefined && (first.md?.change !== undefined || first.md?.capability !== undefined)));
      if (notification) {
        key =
          this.expected === 'change-notification' || this.expected === 'framework-notification'
            ? this.expected
            : notificationKind(first as Entry);
        this.kind = key as DocumentKind;
      } else {
        this.add('root-md-missing', `<${rootEl}> has no <rs:md> child: not a ResourceSync document`, {
          element: rootEl,
        });
      }
    } else if (capability === undefined) {
      this.add('capability-missing', 'the document-level <rs:md> has no capability attribute', {
        element: 'rs:md',
        attribute: 'capability',
      });
    } else if (!CAPABILITY_SET.has(capability)) {
      this.add('capability-unknown', `capability ${quote(capability)} is not defined by the standard`, {
        element: 'rs:md',
        attribute: 'capability',
      });
    } else if (rootEl === 'sitemapindex' && NO_INDEX.has(capability)) {
      this.add('index-not-allowed', `a ${capability} document cannot be a <sitemapindex>`, { element: rootEl });
    } else if (rootEl === 'sitemapindex' && capability === 'capabilitylist') {
      this.add('capabilitylist-index', 'a Capability List should not be split into a <sitemapindex>', {
        element: rootEl,
      });
      key = 'capability-list-index';
    } else {
      key = h.kind;
    }
    if (this.expected !== undefined && this.expected !== this.kind) {
      this.add('kind-unexpected', `expected a ${this.expected}, found a ${this.kind}`, { element: rootEl });
      if (key === undefined) {
        key = this.expected;
        this.kind = this.expected;
      }
    }
    this.profile = key === undefined || !Object.hasOwn(PROFILES, key) ? undefined : PROFILES[key];
    this.checkHeader();
  }

  private checkHeader(): void {
    const h = this.header;
    const p = this.profile;
    const md = h.md;
    if (md !== undefined) {
      this.checkMdValues(md, {});
      for (const name of Object.keys(md) as (keyof Metadata)[]) {
        if (name === 'extensions' || name === 'invalid' || md[name] === undefined) continue;
        if (!ROOT_MD_ATTRIBUTES.has(name))
          this.add('attribute-not-used', `${name} is not used on the document-level <rs:md>`, {
            element: 'rs:md',
            attribute: name,
          });
      }
      if (p !== undefined) this.checkRootTimes(md, p);
      this.rootFrom = parseDatetime(md.from ?? '')?.ms;
      this.rootUntil = parseDatetime(md.until ?? '')?.ms;
    }
    let up = 0;
    let describedby = false;
    for (const link of h.links) {
      this.checkLink(link, {});
      if (link.rel === RELATIONS.up) up++;
      if (link.rel === RELATIONS.describedby) describedby = true;
    }
    if (p !== undefined) {
      if (p.up === 'mandatory' && up === 0) {
        const target = p.section === '§9' ? 'the Source Description' : 'the Capability List';
        this.add(
          'up-missing',
          `a ${p.name} must link to ${target} with <rs:ln rel="up">`,
          { element: 'rs:ln' },
          p.section,
        );
      }
      if (p.up === 'unexpected' && up > 0)
        this.add('up-unexpected', `a ${p.name} is the top of the hierarchy: it has no up link`, { element: 'rs:ln' });
      if (p.rootDescribedby && !describedby)
        this.add(
          'describedby-recommended',
          `a ${p.name} should link to a description with <rs:ln rel="describedby">`,
          { element: 'rs:ln' },
          p.section,
        );
    }
    this.checkExtensionElements(h.extensions, {});
  }

  /** Appendix A (Table 4) at the top level, and the at/completed, from/until intervals. */
  private checkRootTimes(md: Metadata, p: Profile): void {
    if (p.rootTime === 'at' && md.at === undefined)
      this.add(
        'at-missing',
        `the <rs:md> of a ${p.name} must have an at attribute`,
        place({}, 'rs:md', 'at'),
        `App. A, ${p.section}`,
      );
    if (p.rootTime === 'from' && md.from === undefined)
      this.add(
        'from-missing',
        `the <rs:md> of a ${p.name} must have a from attribute`,
        place({}, 'rs:md', 'from'),
        `App. A, ${p.section}`,
      );
    for (const name of TIME_ATTRIBUTES) {
      if (md[name] === undefined) continue;
      const snapshot = name === 'at' || name === 'completed';
      const used = p.rootTime === (snapshot ? 'at' : 'from');
      if (!used)
        this.add('attribute-not-used', `${name} is not used in a ${p.name}`, place({}, 'rs:md', name), 'App. A');
    }
  }

  // ---------------------------------------------------------------- entries

  entry(e: Entry, index?: number): void {
    if (!this.headerDone) this.resolveHeader(e);
    const n = (index ?? this.count) + 1;
    this.count++;
    const p = this.profile;
    const base: Where = { entry: n, line: e.line };
    if (this.count === this.maxEntries + 1)
      this.add('entry-limit', `more than ${this.maxEntries} entries in one document`, place(base, e.element));

    const expectedElement = this.header.root === 'urlset' ? 'url' : 'sitemap';
    if (e.element !== expectedElement)
      this.add(
        'element-mismatch',
        `<${e.element}> in a <${this.header.root}>: expected <${expectedElement}>`,
        place(base, e.element),
      );

    // <loc>
    if (e.loc === '') this.add('loc-missing', 'entry without <loc>', place(base, 'loc'));
    else {
      // One regex for the common case; the two checks apart only when it fails.
      if (!isPlainAbsoluteUri(e.loc)) {
        if (!isAbsoluteUri(e.loc))
          this.add('loc-not-absolute', `<loc> ${quote(e.loc)} is not an absolute URI`, place(base, 'loc'));
        if (hasInvalidUriChars(e.loc))
          this.add(
            'uri-invalid-chars',
            `<loc> ${quote(e.loc)} has characters that must be escaped`,
            place(base, 'loc'),
          );
      }
      if (hasMalformedPercent(e.loc))
        this.add(
          'uri-percent-invalid',
          `<loc> ${quote(e.loc)} has a "%" not followed by two hexadecimal digits (write a literal "%" as %25)`,
          place(base, 'loc'),
        );
      if (e.loc.length >= MAX_LOC_CHARS)
        this.add(
          'loc-too-long',
          `<loc> has ${e.loc.length} characters (limit: less than ${MAX_LOC_CHARS})`,
          place(base, 'loc'),
        );
      if (p?.duplicateLoc === true && this.seenLoc(e.loc))
        this.add('loc-duplicate', `${quote(e.loc)} is listed more than once`, place(base, 'loc'), p.section);
    }
    if (e.lastmod !== undefined) this.checkDatetime(e.lastmod, base, 'lastmod');
    if (e.changefreq !== undefined && !CHANGEFREQ_SET.has(e.changefreq))
      this.add(
        'changefreq-invalid',
        `<changefreq> ${quote(e.changefreq)} is not a defined value`,
        place(base, 'changefreq'),
      );
    if (e.priority !== undefined && !PRIORITY.test(e.priority))
      this.add(
        'priority-invalid',
        `<priority> ${quote(e.priority)} is not a number from 0.0 to 1.0`,
        place(base, 'priority'),
      );

    const md = e.md;
    if (md !== undefined) this.checkMdValues(md, base);
    if (p !== undefined) this.checkEntryForKind(e, p, base);
    for (const link of e.links) this.checkLink(link, base);
    this.checkExtensionElements(e.extensions, base);
  }

  /** True when `loc` was seen before (among the first `maxTrackedLocs`); else remembers it while there is room. */
  /**
   * True when `loc` was seen before (among the first `maxTrackedLocs`); else remembers it while there is room.
   * A one-hash Bloom filter of 2^20 bits (128 KiB) in front of the set answers most "never seen" without the
   * set's native hashing and probing (a few cache misses per lookup once it holds 50,000 strings): 3-5% of the
   * whole validate command on a 500,000-entry list. The set alone decides "seen". The filter hashes at most 32
   * characters (the length, the last 16, 16 spread over the rest): URLs that differ only elsewhere make it
   * answer "maybe" more often, which then costs what the set alone costs.
   */
  private seenLoc(loc: string): boolean {
    const filter = (this.locFilter ??= new Int32Array(1 << 15));
    const h = sampleHash(loc);
    const word = (h >>> 5) & 0x7fff;
    const bit = 1 << (h & 31);
    if (((filter[word] as number) & bit) !== 0 && this.locs.has(loc)) return true;
    if (this.locs.size < this.maxTrackedLocs) {
      this.locs.add(loc);
      filter[word] = (filter[word] as number) | bit;
    }
    return false;
  }

  private checkEntryForKind(e: Entry, p: Profile, base: Where): void {
    const md = e.md;
    if (md === undefined) {
      if (p.entryMd === 'mandatory')
        this.add('entry-md-missing', `an entry of a ${p.name} must have an <rs:md>`, place(base, e.element), p.section);
    }
    const m: Metadata = md ?? NO_METADATA;
    // capability
    if (m.capability !== undefined) {
      const c = m.capability;
      if (p.capability === 'not-used')
        this.add(
          'attribute-not-used',
          `capability is not used on entries of a ${p.name}`,
          place(base, 'rs:md', 'capability'),
        );
      else if (p.capability === 'description-index' && c !== 'description')
        this.add(
          'capability-entry-invalid',
          `a Source Description Index lists Source Descriptions: capability must be "description", not ${quote(c)}`,
          place(base, 'rs:md', 'capability'),
          '§6.1, §8',
        );
      else if (p.capability === 'description' && c !== 'capabilitylist')
        this.add(
          'capability-entry-invalid',
          `a Source Description lists Capability Lists: capability must be "capabilitylist", not ${quote(c)}`,
          place(base, 'rs:md', 'capability'),
          '§8',
        );
      else if (p.capability === 'capabilitylist') {
        if (NOT_IN_CAPABILITY_LIST.has(c))
          this.add(
            'capability-entry-invalid',
            `a Capability List cannot advertise ${quote(c)}`,
            place(base, 'rs:md', 'capability'),
            '§9',
          );
        else if (!CAPABILITY_LIST_ENTRIES.has(c))
          this.add(
            'capability-entry-unknown',
            `capability ${quote(c)} is not defined by this standard`,
            place(base, 'rs:md', 'capability'),
          );
        if (this.capabilities.has(c))
          this.add(
            'capability-duplicate',
            `a Capability List has one entry per capability: ${quote(c)} repeated`,
            place(base, 'rs:md', 'capability'),
          );
        else if (this.capabilities.size < MAX_TRACKED_CAPABILITIES) this.capabilities.add(c);
      } else if (p.capability === 'framework') {
        const allowed = frameworkChangeTypes(c);
        if (allowed === undefined)
          this.add(
            'capability-entry-invalid',
            `a framework notification is about ${Object.keys(FRAMEWORK_CHANGE_TYPES).join(', ')}, not ${quote(c)}`,
            place(base, 'rs:md', 'capability'),
            'N-§5',
          );
        else if (
          m.change !== undefined &&
          CHANGE_SET.has(m.change) &&
          !(allowed as readonly string[]).includes(m.change)
        )
          this.add(
            'framework-change-unexpected',
            `Table 2.1 lists no ${m.change} notification for ${c}`,
            place(base, 'rs:md', 'change'),
          );
      }
    } else if (md !== undefined && (p.capability === 'capabilitylist' || p.capability === 'description')) {
      this.add(
        'capability-entry-missing',
        `the <rs:md> of a ${p.name} entry must have a capability attribute`,
        place(base, 'rs:md', 'capability'),
        p.section,
      );
    } else if (md !== undefined && p.capability === 'framework') {
      this.add(
        'capability-entry-missing',
        'a framework notification entry must have a capability',
        place(base, 'rs:md', 'capability'),
        'N-§5',
      );
    }
    if (p.capability === 'description' && !e.links.some((l) => l.rel === RELATIONS.describedby))
      this.add(
        'describedby-recommended',
        'a Source Description entry should link to a description of its set of resources (rel="describedby")',
        place(base, 'rs:ln'),
        '§8',
      );

    // change and datetime
    if (p.changes) {
      if (md !== undefined && m.change === undefined)
        this.add(
          'change-missing',
          `an entry of a ${p.name} must have a change attribute`,
          place(base, 'rs:md', 'change'),
          p.section,
        );
      const dt = md === undefined ? undefined : this.datetimeMs;
      if (dt !== undefined && !p.noRootMd) {
        if (this.rootFrom !== undefined && dt < this.rootFrom)
          this.add(
            'datetime-outside-interval',
            `datetime ${quote(m.datetime ?? '')} is before the document's from`,
            place(base, 'rs:md', 'datetime'),
          );
        if (this.rootUntil !== undefined && dt > this.rootUntil)
          this.add(
            'datetime-outside-interval',
            `datetime ${quote(m.datetime ?? '')} is after the document's until`,
            place(base, 'rs:md', 'datetime'),
          );
      }
      if (p.order === 'datetime' && dt !== undefined) this.checkOrder(dt, m.datetime as string, base, p);
    } else {
      if (m.change !== undefined)
        this.add('attribute-not-used', `change is not used in a ${p.name}`, place(base, 'rs:md', 'change'), '§7');
      if (m.datetime !== undefined)
        this.add('attribute-not-used', `datetime is not used in a ${p.name}`, place(base, 'rs:md', 'datetime'), '§7');
    }

    // Appendix A: time attributes of entries
    if (m.at !== undefined || m.completed !== undefined || m.from !== undefined || m.until !== undefined)
      this.checkEntryTimes(m, p, base);
    if (p.childFromRecommended && m.from === undefined)
      this.add(
        'child-from-recommended',
        `an entry of a ${p.name} should have <rs:md from> (and until when closed)`,
        place(base, 'rs:md', 'from'),
        `App. A, ${p.section}`,
      );
    if (p.order === 'from' || p.order === 'from-should') {
      const key = parseDatetime(m.from ?? (p.order === 'from-should' ? (e.lastmod ?? '') : ''))?.ms;
      if (key !== undefined) this.checkOrder(key, m.from ?? e.lastmod ?? '', base, p);
    }

    // path
    if (p.path === 'not-used') {
      if (m.path !== undefined)
        this.add(
          'attribute-not-used',
          `path is only used in manifests, not in a ${p.name}`,
          place(base, 'rs:md', 'path'),
          '§7',
        );
    } else if (md !== undefined && m.path === undefined && (p.path === 'mandatory' || m.change !== 'deleted')) {
      this.add(
        'path-missing',
        p.path === 'mandatory'
          ? 'a Resource Dump Manifest entry must have a path'
          : 'a Change Dump Manifest entry must have a path (unless change="deleted")',
        place(base, 'rs:md', 'path'),
        p.section,
      );
    }
    if (p.typeRecommended && md !== undefined && m.type === undefined && m.change !== 'deleted')
      this.add(
        'type-recommended',
        `an entry of a ${p.name} should have a type`,
        place(base, 'rs:md', 'type'),
        p.section,
      );

    // packages
    if (p.packages) {
      if (m.type === undefined || m.length === undefined)
        this.add(
          'package-metadata-recommended',
          `an entry of a ${p.name} should give the package's type and length in <rs:md>`,
          place(base, 'rs:md'),
          p.section,
        );
      if (m.type !== undefined) {
        const t = m.type.split(';')[0]?.trim().toLowerCase() ?? '';
        if (t !== ZIP_MEDIA_TYPE && t !== 'application/x-zip-compressed' && isMediaType(m.type))
          this.add(
            'package-not-zip',
            `a ${p.name} package of type ${quote(t)}: the standard packages in ZIP (${ZIP_MEDIA_TYPE})`,
            place(base, 'rs:md', 'type'),
            p.section,
          );
        if (this.firstPackageType === undefined) this.firstPackageType = t.slice(0, 200);
        else if (t !== this.firstPackageType && !this.packageTypeMixed) {
          this.packageTypeMixed = true;
          this.add(
            'package-type-mixed',
            `a ${p.name} should point to packages of one format: ${quote(t)} after ${quote(this.firstPackageType)}`,
            place(base, 'rs:md', 'type'),
            p.section,
          );
        }
      }
    }

    // links that depend on the document kind (§14.4)
    for (const link of e.links) {
      if (link.rel !== RELATIONS.patch) continue;
      if (!p.changes || p.capability === 'framework')
        this.add(
          'patch-not-applicable',
          `patch links only apply to Change Lists and Change Dumps, not to a ${p.name}`,
          place(base, 'rs:ln', 'rel'),
        );
      else if (p.path === 'unless-deleted' && link.path === undefined)
        this.add(
          'patch-path-missing',
          'a patch link in a Change Dump Manifest must have a path',
          place(base, 'rs:ln', 'path'),
        );
    }
  }

  /** Appendix A: the time attributes an entry of this kind does not use. */
  private checkEntryTimes(m: Metadata, p: Profile, base: Where): void {
    for (const name of TIME_ATTRIBUTES) {
      if (m[name] === undefined) continue;
      const snapshot = name === 'at' || name === 'completed';
      if (p.childTime !== (snapshot ? 'at' : 'from'))
        this.add(
          'attribute-not-used',
          `${name} is not used on entries of a ${p.name}`,
          place(base, 'rs:md', name),
          'App. A',
        );
    }
  }

  private checkOrder(ms: number, text: string, base: Where, p: Profile): void {
    if (this.lastOrder !== undefined && ms < this.lastOrder) {
      const attribute = p.order === 'datetime' ? 'datetime' : 'from';
      const message = `${quote(text)} is earlier than a previous entry: entries must be in forward chronological order`;
      if (p.order === 'from-should')
        this.add(
          'changedump-order',
          message.replace('must', 'should'),
          { ...base, element: 'rs:md', attribute },
          p.section,
        );
      else this.add('order-not-chronological', message, { ...base, element: 'rs:md', attribute }, p.section);
    }
    if (this.lastOrder === undefined || ms > this.lastOrder) this.lastOrder = ms;
  }

  // ---------------------------------------------------------------- values

  /** Values of an <rs:md>, whatever the document kind. */
  private checkMdValues(md: Metadata, base: Where): void {
    if (md.at !== undefined) this.checkDatetime(md.at, base, 'rs:md', 'at');
    if (md.completed !== undefined) this.checkDatetime(md.completed, base, 'rs:md', 'completed');
    if (md.from !== undefined) this.checkDatetime(md.from, base, 'rs:md', 'from');
    if (md.until !== undefined) this.checkDatetime(md.until, base, 'rs:md', 'until');
    this.datetimeMs =
      md.datetime === undefined ? undefined : this.checkDatetime(md.datetime, base, 'rs:md', 'datetime');
    this.checkInterval(md.at, md.completed, 'completed', 'at', base);
    this.checkInterval(md.from, md.until, 'until', 'from', base);
    if (md.change !== undefined && !CHANGE_SET.has(md.change))
      this.add(
        'change-invalid',
        `change ${quote(md.change)} is not created, updated or deleted`,
        place(base, 'rs:md', 'change'),
      );
    this.checkCommonValues(md, base, 'rs:md');
  }

  /** hash, length, type, path, extension attributes and unparsed values: shared by <rs:md> and <rs:ln>. */
  private checkCommonValues(v: Metadata | Link, base: Where, element: 'rs:md' | 'rs:ln'): void {
    if (v.hash !== undefined)
      for (const problem of checkHashAttribute(v.hash))
        this.add(problem.code, problem.message, place(base, element, 'hash'));
    if (v.length !== undefined && (!Number.isSafeInteger(v.length) || v.length < 0))
      this.add('length-invalid', `length ${v.length} is not a non-negative integer`, place(base, element, 'length'));
    if (v.type !== undefined && !this.isMediaType(v.type))
      this.add('type-invalid', `type ${quote(v.type)} is not a media type`, place(base, element, 'type'));
    if (v.path !== undefined) {
      if (!v.path.startsWith('/'))
        this.add('path-not-absolute', `path ${quote(v.path)} must start with "/"`, place(base, element, 'path'));
      else if (!isSafePath(v.path))
        this.add('path-unsafe', `path ${quote(v.path)} cannot be unpacked safely`, place(base, element, 'path'));
    }
    if (v.extensions !== undefined) this.checkExtensionAttributes(v.extensions, base, element);
    if (v.invalid !== undefined) {
      for (const [key, value] of Object.entries(v.invalid)) {
        const name = clip(key);
        const w = place(base, element, name);
        if (name === 'length') this.add('length-invalid', `length ${quote(value)} is not a non-negative integer`, w);
        else if (name === 'pri') this.add('pri-invalid', `pri ${quote(value)} is not an integer from 1 to 999,999`, w);
        else if (/^(at|completed|from|until|datetime|modified)$/.test(name))
          this.add('datetime-invalid', `${name} ${quote(value)} is not a W3C Datetime`, w);
        else if (name === 'hash') this.add('hash-invalid', `hash ${quote(value)} is not a hash list`, w);
        else if (name === 'type') this.add('type-invalid', `type ${quote(value)} is not a media type`, w);
        else if (name === 'change') this.add('change-invalid', `change ${quote(value)} is not a change type`, w);
        else this.add('attribute-unknown', `attribute ${name}=${quote(value)} is not understood`, w);
      }
    }
  }

  private isMediaType(type: string): boolean {
    // Most lists repeat one type: a string comparison is cheaper than hashing it for the map.
    if (type === this.lastMediaType) return this.lastMediaTypeOk;
    let ok = this.mediaTypes.get(type);
    if (ok === undefined) {
      ok = isMediaType(type);
      if (this.mediaTypes.size < 256) this.mediaTypes.set(type, ok);
    }
    this.lastMediaType = type;
    this.lastMediaTypeOk = ok;
    return ok;
  }

  private checkExtensionAttributes(attrs: readonly ExtensionAttribute[], base: Where, element: string): void {
    for (const a of attrs) {
      const name = clip(a.prefix === '' ? a.local : `${a.prefix}:${a.local}`);
      const w: Where = { ...base, element, attribute: name };
      if (a.ns === RS_NS)
        this.add(
          'attribute-prefixed',
          `attribute ${name}: ResourceSync attributes must not have a namespace prefix`,
          w,
        );
      else if (a.ns === '')
        this.add(
          'attribute-unknown',
          `attribute ${name} is not defined by ResourceSync; extensions must use their own namespace`,
          w,
        );
    }
  }

  private checkExtensionElements(elements: readonly ExtensionElement[] | undefined, base: Where): void {
    if (elements === undefined) return;
    for (const x of elements) {
      if (x.ns === SITEMAP_NS) {
        const w: Where = { ...base, element: clip(x.local) };
        if (base.entry !== undefined && SINGLE_ENTRY_CHILDREN.has(x.local))
          this.add('element-repeated', `a second <${clip(x.local)}> in one entry`, w);
        else this.add('element-unknown', `<${clip(x.local)}> is not a Sitemap element here`, w);
        continue;
      }
      if (x.ns !== RS_NS) continue;
      const w: Where = { ...base, element: `rs:${clip(x.local)}` };
      if (x.local === 'md') this.add('md-duplicate', '<rs:md> is not repeatable: a second one was found', w);
      else if (x.local === 'ln') this.add('rs-element-unknown', 'an <rs:ln> the reader could not take as a link', w);
      else this.add('rs-element-unknown', `<rs:${clip(x.local)}> is not a ResourceSync element`, w);
    }
  }

  private checkLink(link: Link, base: Where): void {
    if (link.rel === '') this.add('ln-rel-missing', '<rs:ln> without rel', place(base, 'rs:ln', 'rel'));
    else if (!isKnownRelation(link.rel))
      this.add(
        'rel-unregistered',
        `rel ${quote(link.rel)} is neither an IANA relation type nor a URI`,
        place(base, 'rs:ln', 'rel'),
      );
    if (link.href === '') this.add('ln-href-missing', '<rs:ln> without href', place(base, 'rs:ln', 'href'));
    else {
      if (!isAbsoluteUri(link.href))
        this.add('href-not-absolute', `href ${quote(link.href)} is not an absolute URI`, place(base, 'rs:ln', 'href'));
      if (hasInvalidUriChars(link.href))
        this.add(
          'uri-invalid-chars',
          `href ${quote(link.href)} has characters that must be escaped`,
          place(base, 'rs:ln', 'href'),
        );
      if (hasMalformedPercent(link.href))
        this.add(
          'uri-percent-invalid',
          `href ${quote(link.href)} has a "%" not followed by two hexadecimal digits (write a literal "%" as %25)`,
          place(base, 'rs:ln', 'href'),
        );
    }
    if (link.pri !== undefined && (!Number.isInteger(link.pri) || link.pri < 1 || link.pri > 999_999))
      this.add('pri-invalid', `pri ${link.pri} is not an integer from 1 to 999,999`, place(base, 'rs:ln', 'pri'));
    if (link.modified !== undefined) this.checkDatetime(link.modified, base, 'rs:ln', 'modified');
    this.checkCommonValues(link, base, 'rs:ln');
    switch (link.rel) {
      case RELATIONS.patch:
        if (link.type === undefined)
          this.add('patch-type-missing', 'a patch link must have a type', place(base, 'rs:ln', 'type'));
        break;
      case RELATIONS.timegate:
        for (const name of ['hash', 'length', 'type', 'modified', 'path', 'encoding'] as const)
          if (link[name] !== undefined)
            this.add('timegate-attributes', `${name} is meaningless on a timegate link`, place(base, 'rs:ln', name));
        break;
      case RELATIONS.duplicate:
        for (const name of ['hash', 'length', 'type'] as const)
          if (link[name] !== undefined)
            this.add(
              'duplicate-link-metadata',
              `${name} of a mirror copy should be omitted from its link`,
              place(base, 'rs:ln', name),
            );
        break;
      case RELATIONS.alternate:
        if (link.type === undefined)
          this.add('alternate-type-recommended', 'an alternate link should have a type', place(base, 'rs:ln', 'type'));
        break;
    }
  }

  /** A W3C Datetime (§7); returns its instant, or undefined when invalid. The location is built only on an issue. */
  private checkDatetime(text: string, base: Where, element: string, attribute?: string): number | undefined {
    if (text === this.lastDatetime) return this.lastDatetimeMs;
    const dt = parseDatetime(text);
    if (dt === undefined) {
      this.add(
        'datetime-invalid',
        `${attribute ?? element} ${quote(text)} is not a W3C Datetime`,
        place(base, element, attribute),
      );
      return undefined;
    }
    if (!dt.utc || (dt.precision !== 'second' && dt.precision !== 'fraction'))
      this.add(
        'datetime-not-utc',
        `${attribute ?? element} ${quote(text)}: a complete UTC YYYY-MM-DDThh:mm:ssZ is recommended`,
        place(base, element, attribute),
      );
    else {
      this.lastDatetime = text;
      this.lastDatetimeMs = dt.ms;
    }
    return dt.ms;
  }

  private checkInterval(
    start: string | undefined,
    end: string | undefined,
    endName: string,
    startName: string,
    base: Where,
  ): void {
    if (start === undefined || end === undefined) return;
    const a = parseDatetime(start);
    const b = parseDatetime(end);
    if (a !== undefined && b !== undefined && b.ms < a.ms)
      this.add('interval-reversed', `${endName} ${quote(end)} is before ${startName} ${quote(start)}`, {
        ...base,
        element: 'rs:md',
        attribute: endName,
      });
  }

  // ---------------------------------------------------------------- end

  finish(): ValidationResult {
    if (this.finished) throw new ResourceSyncError('RS_CONFIG', 'finish() called twice on a validator');
    this.finished = true;
    if (!this.headerDone) this.resolveHeader(undefined);
    if (this.documentBytes !== undefined && this.documentBytes > this.maxBytes)
      this.add(
        'size-limit',
        `the document has ${this.documentBytes} bytes, more than ${this.maxBytes} (split it: an index and its parts)`,
      );
    // Document order: reader notes can arrive a little before the entry they precede (stable sort).
    this.issues.sort((a, b) => (a.line ?? 0) - (b.line ?? 0));
    return {
      kind: this.kind,
      entries: this.count,
      issues: this.issues,
      errors: this.errors,
      warnings: this.warnings,
      suppressed: this.suppressed,
      valid: this.errors === 0,
    };
  }
}
