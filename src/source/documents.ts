/**
 * Generation of the Source's documents from a store snapshot: Source Description (§8; its Index past 50,000
 * sets), Capability List (§9),
 * Resource List and Index (§10), Change List and Index (§12). Dumps are in `dumps.ts`.
 *
 * Every file is written atomically (temporary file + rename), parts before the index that lists them, so a
 * document is never advertised before it exists and is complete. Memory: one entry plus one output chunk per
 * document being written (entries stream from the snapshot's cursor).
 *
 * @module
 */
import { unlink } from 'node:fs/promises';
import { basename } from 'node:path';
import { formatDatetime } from '../core/datetime.js';
import { formatHashes } from '../core/hash.js';
import {
  createHeader,
  type DocumentHeader,
  type DocumentKind,
  type Entry,
  type Link,
  type Metadata,
} from '../core/model.js';
import { writeDocumentFile, writeSplitDocuments } from '../xml/index.js';
import { partName, type SiteLayout } from './layout.js';
import { resourceUrl } from './paths.js';
import type { ChangeListPart, ChangeRecord, ResourceLink, ResourceRecord, StoreSnapshot } from './store.js';

/** The capabilities a set can offer (§9). */
export type SetCapability = 'resourcelist' | 'resourcedump' | 'changelist' | 'changedump';
/** All of them, in Capability List order. */
export const SET_CAPABILITIES: readonly SetCapability[] = ['resourcelist', 'resourcedump', 'changelist', 'changedump'];

/** Configuration of a set of resources (one Capability List). */
export interface SetInfo {
  readonly name: string;
  /** `describedby` link of the set (in the Source Description entry and the Capability List). */
  readonly describedBy?: string;
  /** More Capability List entries, e.g. the notification channels (N-§3, Example 3.1). */
  readonly extraEntries?: readonly Entry[];
  /** Capabilities the set offers (default: all four). */
  readonly capabilities?: readonly SetCapability[];
  /** A WebSub hub for the set's notifications: `<rs:ln rel="hub">` on the Capability List and its `changelist` entry. */
  readonly hubUrl?: string;
  /**
   * The Source Description listing the set, when the Source publishes a Source Description Index (§8): the
   * Capability List's `up` points there (default: the Source Description at the well-known URI).
   */
  readonly sourceDescriptionUrl?: string;
}

/** Limits of generated documents. */
export interface DocumentLimits {
  /** Entries per document before splitting into an index and parts (default 50,000, §4.2). */
  readonly maxEntriesPerDocument: number;
  /** Bytes per document before splitting (default 52,428,800, §4.2). */
  readonly maxBytesPerDocument?: number;
}

/** Everything generation needs besides the snapshot. */
export interface GenerationContext {
  readonly layout: SiteLayout;
  readonly limits: DocumentLimits;
  /** fsync each written file (default true; tests may turn it off). */
  readonly fsync?: boolean;
}

/** The files a generation wrote (absolute paths). */
export type WrittenFiles = string[];

function link(rel: string, href: string, extra: Partial<Link> = {}): Link {
  return { rel, href, ...extra };
}

function header(kind: DocumentKind, md: Metadata, links: Link[]): DocumentHeader {
  return createHeader(kind, md, links);
}

const DAY_MS = 86_400_000;
/** `YYYY-MM-DDT` of recent days (bounded: cleared past 4,096 days). */
const dayPrefixes = new Map<number, string>();
const two = (n: number): string => (n < 10 ? `0${n}` : `${n}`);

/**
 * {@link formatDatetime} for the hot path of a list: the same text, the date part cached per day, the time
 * of day from arithmetic (no Date object a call). Falls back to formatDatetime outside 1970–9999.
 */
export function formatDatetimeFast(ms: number): string {
  if (!Number.isSafeInteger(ms) || ms < 0 || ms >= 253_402_300_800_000) return formatDatetime(ms);
  const day = Math.floor(ms / DAY_MS);
  let prefix = dayPrefixes.get(day);
  if (prefix === undefined) {
    if (dayPrefixes.size >= 4096) dayPrefixes.clear();
    prefix = new Date(day * DAY_MS).toISOString().slice(0, 11);
    dayPrefixes.set(day, prefix);
  }
  let rest = ms - day * DAY_MS;
  const frac = rest % 1000;
  rest = (rest - frac) / 1000;
  const sec = rest % 60;
  rest = (rest - sec) / 60;
  const min = rest % 60;
  const text = `${prefix}${two((rest - min) / 60)}:${two(min)}:${two(sec)}`;
  return frac === 0 ? `${text}Z` : `${text}.${frac < 10 ? '00' : frac < 100 ? '0' : ''}${frac}Z`;
}

/** A relative path that percent-encoding leaves as it is (what `encodeURIComponent` keeps, and `/`). */
const PLAIN_PATH = /^[A-Za-z0-9\-_.!~*'()/]*$/;

/** The entry of a resource in a Resource List (§10.1) or a dump manifest (§11.2: with `path`). */
export function resourceEntry(base: URL, r: ResourceRecord, path?: string): Entry {
  const md: Metadata = { length: r.length };
  const hash = formatHashes(r.hashes);
  if (hash !== '') md.hash = hash;
  if (r.type !== undefined) md.type = r.type;
  if (path !== undefined) md.path = path;
  const loc = PLAIN_PATH.test(r.uri) ? base.href + r.uri : resourceUrl(base, r.uri);
  return {
    element: 'url',
    loc,
    lastmod: formatDatetimeFast(r.lastmodMs),
    md,
    links: r.links === undefined ? [] : entryLinks(base, r.links),
  };
}

/** An absolute URI: a scheme (RFC 3986 §3.1) and `:`. */
const ABSOLUTE_URI = /^[A-Za-z][A-Za-z0-9+.-]*:/;

/**
 * The `<rs:ln>` elements of a resource's links (§14): a relative `href` is resolved against the base URL and
 * percent-encoded like a resource key; an absolute one is written as it is.
 */
export function entryLinks(base: URL, links: readonly ResourceLink[]): Link[] {
  return links.map((l) => {
    const out: Link = { rel: l.rel, href: ABSOLUTE_URI.test(l.href) ? l.href : resourceUrl(base, l.href) };
    if (l.hashes !== undefined) {
      const hash = formatHashes(l.hashes);
      if (hash !== '') out.hash = hash;
    }
    if (l.length !== undefined) out.length = l.length;
    if (l.modifiedMs !== undefined) out.modified = formatDatetime(l.modifiedMs);
    if (l.path !== undefined) out.path = l.path;
    if (l.pri !== undefined) out.pri = l.pri;
    if (l.type !== undefined) out.type = l.type;
    if (l.encoding !== undefined) out.encoding = l.encoding;
    return out;
  });
}

/** The entry of a change in a Change List (§12.1) or a Change Dump Manifest (§13.2: with `path`). */
export function changeEntry(base: URL, c: ChangeRecord, path?: string): Entry {
  const md: Metadata = { change: c.change, datetime: formatDatetime(c.datetimeMs) };
  const entry: Entry = { element: 'url', loc: resourceUrl(base, c.uri), md, links: [] };
  if (c.change !== 'deleted') {
    const hash = formatHashes(c.hashes);
    if (hash !== '') md.hash = hash;
    if (c.length !== undefined) md.length = c.length;
    if (c.type !== undefined) md.type = c.type;
    if (path !== undefined) md.path = path;
    if (c.lastmodMs !== undefined) entry.lastmod = formatDatetime(c.lastmodMs);
    if (c.links !== undefined) entry.links = entryLinks(base, c.links);
  }
  return entry;
}

/**
 * Which Source Description lists the set at `position` (0-based, in the Source Description's order) of
 * `count` sets: 0 when one Source Description holds them all (at the well-known URI), else the 1-based number
 * of the Source Description of the Source Description Index (§8) that lists it.
 */
export function sourceDescriptionPart(position: number, count: number, limits: DocumentLimits): number {
  const max = limits.maxEntriesPerDocument;
  return count <= max ? 0 : Math.floor(position / max) + 1;
}

/**
 * Writes the Source Description (§8): one entry per set's Capability List. Past `maxEntriesPerDocument` sets
 * (§6.1: 50,000 entries a document) it writes several Source Descriptions (`description-0001.xml` ... beside
 * the sets' directories, each with `rs:ln rel="index"`, §6.2) and then the Source Description Index that
 * groups them (§8: a `<sitemapindex>` with `rs:md capability="description"`) at the well-known URI; each
 * Capability List's `up` then names the Source Description that lists it ({@link sourceDescriptionPart}).
 * Only the entry limit splits (a Source Description entry is a few hundred bytes at most, far from 50 MB).
 * Memory: the sets given (the entries are built one document at a time).
 */
export async function writeSourceDescription(
  ctx: GenerationContext,
  sets: readonly SetInfo[],
  describedBy?: string,
): Promise<WrittenFiles> {
  const l = ctx.layout;
  const links = describedBy === undefined ? [] : [link('describedby', describedBy)];
  const entryOf = (s: SetInfo): Entry => ({
    element: 'url',
    loc: l.capabilityListUrl(s.name),
    md: { capability: 'capabilitylist' },
    links: s.describedBy === undefined ? [] : [link('describedby', s.describedBy)],
  });
  const path = l.sourceDescriptionPath;
  const max = ctx.limits.maxEntriesPerDocument;
  if (sets.length <= max) {
    await writeDocumentFile(path, header('source-description', {}, links), sets.map(entryOf), fsyncOpt(ctx));
    return [path];
  }
  // The Source Descriptions first, then the Index that lists them (nothing advertised before it exists).
  const files: string[] = [];
  const index: Entry[] = [];
  for (let n = 1; (n - 1) * max < sets.length; n++) {
    const part = l.sourceDescriptionPartPath(n);
    const partLinks = [...links, link('index', l.sourceDescriptionUrl)];
    const entries = sets.slice((n - 1) * max, n * max).map(entryOf);
    await writeDocumentFile(part, header('source-description', {}, partLinks), entries, fsyncOpt(ctx));
    files.push(part);
    index.push({ element: 'sitemap', loc: l.sourceDescriptionPartUrl(n), links: [] });
  }
  await writeDocumentFile(path, header('source-description-index', {}, links), index, fsyncOpt(ctx));
  files.push(path);
  return files;
}

/** Writes a set's Capability List (§9): `up` to the Source Description, `describedby` when configured. */
export async function writeCapabilityList(ctx: GenerationContext, set: SetInfo): Promise<WrittenFiles> {
  const l = ctx.layout;
  const links: Link[] = [];
  if (set.describedBy !== undefined) links.push(link('describedby', set.describedBy));
  links.push(link('up', set.sourceDescriptionUrl ?? l.sourceDescriptionUrl));
  if (set.hubUrl !== undefined) links.push(link('hub', set.hubUrl));
  const offered = set.capabilities ?? SET_CAPABILITIES;
  const entries: Entry[] = SET_CAPABILITIES.filter((cap) => offered.includes(cap)).map((cap) => ({
    element: 'url',
    loc: l.url(set.name, `${cap}.xml`),
    md: { capability: cap },
    links: cap === 'changelist' && set.hubUrl !== undefined ? [link('hub', set.hubUrl)] : [],
  }));
  if (set.extraEntries !== undefined) entries.push(...set.extraEntries);
  const path = l.path(set.name, 'capabilitylist.xml');
  await writeDocumentFile(path, header('capability-list', {}, links), entries, fsyncOpt(ctx));
  return [path];
}

function fsyncOpt(ctx: GenerationContext): { fsync?: boolean } {
  return ctx.fsync === undefined ? {} : { fsync: ctx.fsync };
}

/** What {@link writeListOrIndex} writes. */
interface ListSpec {
  readonly kind: 'resource-list' | 'resource-dump' | 'change-dump';
  readonly indexKind: 'resource-list-index' | 'resource-dump-index' | 'change-dump-index';
  /** Number of entries (known up front from the snapshot). */
  readonly count: number;
  readonly entries: AsyncIterator<Entry> | Iterable<Entry> | AsyncIterable<Entry>;
  /** Root `rs:md` of the list (and of each part) without capability. */
  readonly md: Metadata;
  /** Root `rs:md` of the index, when different. */
  readonly indexMd?: Metadata;
  readonly setName: string;
  /** Base file name: `resourcelist` -> resourcelist.xml, resourcelist-0001.xml. */
  readonly name: string;
}

/**
 * Writes one list, or (past the entry limit) parts then the index listing them (§10.2, §4.2); each part has
 * `up` and `index` links. Returns the files written.
 */
async function writeListOrIndex(ctx: GenerationContext, spec: ListSpec): Promise<WrittenFiles> {
  const l = ctx.layout;
  const up = link('up', l.capabilityListUrl(spec.setName));
  const result = await writeSplitDocuments({
    header: header(spec.kind, spec.md, [up]),
    ...(spec.indexMd === undefined ? {} : { indexHeader: header(spec.indexKind, spec.indexMd, [up]) }),
    entries: isIterable(spec.entries) ? spec.entries : iterate(spec.entries as AsyncIterator<Entry>),
    dir: l.setDir(spec.setName),
    baseUrl: l.url(spec.setName, ''),
    name: (n) => `${spec.name}-${partName(n)}.xml`,
    indexName: `${spec.name}.xml`,
    maxEntries: ctx.limits.maxEntriesPerDocument,
    ...(ctx.limits.maxBytesPerDocument === undefined ? {} : { maxBytes: ctx.limits.maxBytesPerDocument }),
    ...fsyncOpt(ctx),
  });
  const files = result.documents.map((d) => d.path);
  if (result.index !== undefined) files.push(result.index.path);
  return files;
}

function isIterable<T>(x: AsyncIterator<T> | Iterable<T> | AsyncIterable<T>): x is Iterable<T> | AsyncIterable<T> {
  return (
    typeof (x as Iterable<T>)[Symbol.iterator] === 'function' ||
    // An iterator (which callers may go on using after this list) is wrapped; a plain iterable is not.
    (typeof (x as AsyncIterator<T>).next !== 'function' &&
      typeof (x as AsyncIterable<T>)[Symbol.asyncIterator] === 'function')
  );
}

async function* iterate<T>(it: AsyncIterator<T>): AsyncGenerator<T, void, undefined> {
  for (;;) {
    const r = await it.next();
    if (r.done === true) return;
    yield r.value;
  }
}

export { writeListOrIndex };

/**
 * Writes a set's Resource List (§10), split into a Resource List Index and parts past the limit. `at` is the
 * start of the snapshot (no change recorded after it is in the list), `completed` the moment it was taken.
 */
export async function writeResourceList(
  ctx: GenerationContext,
  snap: StoreSnapshot,
  setName: string,
): Promise<WrittenFiles> {
  const count = await snap.countResources(setName);
  const at = formatDatetime(snap.atMs);
  const completed = formatDatetime(Math.max(snap.atMs, Date.now()));
  const base = ctx.layout.baseUrl;
  const fast = snap.resourcesSync?.(setName);
  const it =
    fast === undefined
      ? (async function* () {
          for await (const r of snap.resources(setName)) yield resourceEntry(base, r);
        })()
      : undefined;
  try {
    return await writeListOrIndex(ctx, {
      kind: 'resource-list',
      indexKind: 'resource-list-index',
      count,
      // The synchronous path spares a promise per entry (3 async layers): ~2x faster for large lists.
      entries:
        fast === undefined ? it! : { [Symbol.asyncIterator]: () => mapYielding(fast, (r) => resourceEntry(base, r)) },
      md: { at, completed },
      setName,
      name: 'resourcelist',
    });
  } finally {
    await it?.return(undefined);
  }
}

/** Entries between two turns of the event loop while a list is generated (~1 ms of work). */
const YIELD_EVERY = 256;

/**
 * `source` mapped by `f`, with a real turn of the event loop (`setImmediate`) every {@link YIELD_EVERY}
 * items, so requests served by the same thread (e.g. the previous copy of this very list) keep flowing while
 * a big list is generated (~7% more CPU than a plain loop).
 */
async function* mapYielding<T, U>(source: Iterable<T>, f: (t: T) => U): AsyncGenerator<U, void, undefined> {
  let n = 0;
  for (const t of source) {
    yield f(t);
    if (++n % YIELD_EVERY === 0) await new Promise<void>((r) => setImmediate(r));
  }
}

/**
 * A Change List document of a closed part of the change log, as written (never rewritten): its file name in
 * the set's directory and its entry in the Change List Index.
 */
export interface ChangeListDoc {
  readonly file: string;
  readonly from: string;
  readonly until?: string;
  /** Datetime of its latest change (the index entry's `<lastmod>`), when it has one. */
  readonly lastmod?: string;
}

/** The documents of closed parts of the change log already written, by part number (never rewritten). */
export type ClosedParts = ReadonlyMap<number, readonly ChangeListDoc[]>;

/** What {@link writeChangeLists} wrote. */
export interface ChangeListsWritten {
  readonly files: WrittenFiles;
  /** Documents of the closed parts, written now or before, by part number. */
  readonly closed: Map<number, ChangeListDoc[]>;
  readonly parts: ChangeListPart[];
  /** True when `changelist.xml` is a plain Change List (no index). */
  readonly plain: boolean;
}

/**
 * Writes a set's Change Lists (§12). While the change log of the set is one open part that fits one document,
 * `changelist.xml` is that Change List itself (clients that cannot read a Change List Index, like the reference
 * Python client, then work); once the part rotates (entries, period) or outgrows the document size limit,
 * `changelist.xml` is the Change List Index (§12.2) of `changelist-<part>.xml`, each part split by bytes into
 * `changelist-<part>-<k>.xml` when its changes exceed `maxBytesPerDocument` (long URIs: 50,000 changes can take
 * more than 50 MB). Documents of closed parts are written once (those in `closed` are not written again), the
 * open part's every time. Entries in forward chronological order.
 *
 * Memory: one entry plus the write buffer of one document, and one index entry per document.
 */
export async function writeChangeLists(
  ctx: GenerationContext,
  snap: StoreSnapshot,
  setName: string,
  closed: ClosedParts,
): Promise<ChangeListsWritten> {
  const l = ctx.layout;
  const base = l.baseUrl;
  const parts = await snap.changeListParts(setName);
  const up = link('up', l.capabilityListUrl(setName));
  const indexLink = link('index', l.url(setName, 'changelist.xml'));
  const mainPath = l.path(setName, 'changelist.xml');
  const files: string[] = [];
  const nowClosed = new Map<number, ChangeListDoc[]>();
  if (parts.length === 0) {
    // No change log for the set yet: an empty Change List from now.
    const md: Metadata = { from: formatDatetime(snap.atMs) };
    await writeDocumentFile(mainPath, header('change-list', md, [up]), [], fsyncOpt(ctx));
    return { files: [mainPath], closed: nowClosed, parts, plain: true };
  }
  // One open part: a plain Change List at changelist.xml, unless it must be split.
  const single = parts.length === 1 && parts[0]!.untilMs === undefined;
  const docs: ChangeListDoc[] = [];
  let after = 0;
  for (const p of parts) {
    const isClosed = p.untilMs !== undefined;
    const reuse = isClosed ? closed.get(p.number) : undefined;
    if (reuse !== undefined && reuse.length > 0) {
      docs.push(...reuse);
      nowClosed.set(p.number, [...reuse]);
    } else {
      const md: Metadata = { from: formatDatetime(p.fromMs) };
      if (p.untilMs !== undefined) md.until = formatDatetime(p.untilMs);
      const afterSeq = after;
      const throughSeq = isClosed ? p.lastSeq : snap.head.seq;
      /** Datetime of the part's latest change, undefined while it has none. */
      let lastMs: number | undefined;
      const entries = (async function* () {
        if (p.count === 0 && isClosed) return;
        for await (const c of snap.changes({ setName, afterSeq, throughSeq })) {
          lastMs = c.datetimeMs;
          yield changeEntry(base, c);
        }
      })();
      const first = `changelist-${partName(p.number)}.xml`;
      const r = await writeSplitDocuments({
        header: header('change-list', md, single ? [up] : [up, indexLink]),
        entries,
        dir: l.setDir(setName),
        baseUrl: l.url(setName, ''),
        name: (k) => (k === 1 ? first : `changelist-${partName(p.number)}-${partName(k)}.xml`),
        indexName: 'changelist.xml',
        singleName: single ? 'changelist.xml' : first,
        writeIndex: false,
        maxEntries: ctx.limits.maxEntriesPerDocument,
        ...(ctx.limits.maxBytesPerDocument === undefined ? {} : { maxBytes: ctx.limits.maxBytesPerDocument }),
        ...fsyncOpt(ctx),
      });
      files.push(...r.documents.map((d) => d.path));
      if (single && !r.split) return { files, closed: nowClosed, parts, plain: true };
      const written = r.documents.map((d, i): ChangeListDoc => {
        // §7: <lastmod> of an index entry, here the latest change the list holds: a Destination that is past
        // it can skip reading the list (an open list is rewritten on every change, so its file time says
        // nothing). A split part's interval ends at its last change.
        const lastmod =
          i < r.documents.length - 1 ? d.md?.until : lastMs === undefined ? undefined : formatDatetime(lastMs);
        const doc: { -readonly [K in keyof ChangeListDoc]: ChangeListDoc[K] } = {
          file: basename(d.path),
          from: d.md?.from ?? md.from!,
        };
        if (d.md?.until !== undefined) doc.until = d.md.until;
        if (lastmod !== undefined) doc.lastmod = lastmod;
        return doc;
      });
      docs.push(...written);
      if (isClosed) nowClosed.set(p.number, written);
    }
    if (p.lastSeq > after) after = p.lastSeq;
  }
  const indexEntries: Entry[] = docs.map((d) => {
    const md: Metadata = { from: d.from };
    if (d.until !== undefined) md.until = d.until;
    const e: Entry = { element: 'sitemap', loc: l.url(setName, d.file), md, links: [] };
    if (d.lastmod !== undefined) e.lastmod = d.lastmod;
    return e;
  });
  const indexMd: Metadata = { from: docs[0]!.from };
  await writeDocumentFile(mainPath, header('change-list-index', indexMd, [up]), indexEntries, fsyncOpt(ctx));
  files.push(mainPath);
  return { files, closed: nowClosed, parts, plain: false };
}

/** Removes files of a group that the new generation no longer lists (after the new index is in place). */
export async function removeFiles(paths: Iterable<string>): Promise<void> {
  for (const p of paths) await unlink(p).catch(() => undefined);
}
