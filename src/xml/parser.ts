/**
 * A namespace-aware XML parser specialised for Sitemap / ResourceSync documents. It is fed decoded text one
 * chunk at a time and builds the model directly: a {@link DocumentHeader} from the root element and the
 * root-level children before the first entry, then one {@link Entry} per `<url>` / `<sitemap>`.
 *
 * Why not a general SAX parser: on a typical Resource List a namespace-aware saxes loop runs at about half the
 * speed needed (see `bench/xml-read.ts`). This parser scans with `indexOf` / `charCodeAt`, keeps attribute
 * names and values in reused arrays, resolves element names through a per-scope cache, and only touches the
 * namespace machinery when a declaration appears.
 *
 * What it checks (XML 1.0 + Namespaces 1.0 well-formedness, minus the few checks listed below): tag nesting
 * and names, attribute syntax and uniqueness (by literal and by expanded name), bound prefixes, reference
 * syntax (only the five predefined entities and character references), one root element, nothing but
 * comments, PIs and white space around it, the XML declaration at the very start only. DTDs are refused.
 * `]]>` in text and characters XML forbids (C0 controls, U+FFFE/FFFF; checked once per chunk) are refused.
 * Not checked (by design, for speed): the Unicode ranges of non-ASCII name characters (any non-ASCII
 * character is accepted in a name), and the syntax of processing-instruction targets.
 *
 * Hostile input: work is linear in the input however it is chunked (a long token cut by chunk boundaries is
 * parsed again only once the input behind it has doubled; attribute uniqueness uses a set past 16
 * attributes), and the first error in document order is reported whatever the chunking.
 *
 * Memory: the unconsumed tail of the input (at most one token, bounded by `maxEntryBytes`), the element stack
 * (bounded by `maxDepth`), the entry being built (bounded by `maxEntryBytes`) and the batch of entries
 * completed in the current chunk, which the caller drains after each {@link DocumentParser.feed}.
 *
 * @module
 */
import { RS_NS, SITEMAP_NS, XML_NS, XMLNS_NS } from '../core/constants.js';
import { type ErrorCode, ResourceSyncError } from '../core/errors.js';
import {
  type DocumentHeader,
  documentKind,
  type Entry,
  type ExtensionAttribute,
  type ExtensionElement,
  type Link,
  type Metadata,
  type RootElement,
} from '../core/model.js';
import { decodeReferences, isXmlSpace, normalizeAttribute, normalizeNewlines } from './text.js';

/**
 * Something the reader noticed that is well-formed XML but cannot be placed in the model where it stands.
 * The validator turns these into issues; the reader carries on.
 */
export interface ReadIssue {
  /**
   * - `late-element`: a root-level `rs:md`, `rs:ln` or other element after the first entry (the header had
   *   already been returned); the element is in `node`.
   * - `unexpected-text`: non-white-space text where only elements belong (in `<urlset>`, `<url>`, `rs:md`...).
   * - `unexpected-child`: an element inside `<loc>`, `<lastmod>`, `<changefreq>`, `<priority>`, `rs:md` or
   *   `rs:ln` (dropped).
   * - `unexpected-attribute`: an attribute on `<url>`, `<sitemap>`, `<loc>`, `<lastmod>`, `<changefreq>` or
   *   `<priority>` (the model has no place for it: dropped).
   * - `too-many-issues`: the reader stopped recording issues (see {@link MAX_ISSUES}).
   */
  readonly code: 'late-element' | 'unexpected-text' | 'unexpected-child' | 'unexpected-attribute' | 'too-many-issues';
  readonly message: string;
  readonly line: number;
  readonly column: number;
  /** Qualified name of the element concerned (the container, for `unexpected-text`). */
  readonly element?: string;
  /** 1-based number of the entry concerned, when inside one. */
  readonly entry?: number;
  /** The late element, whole (for `late-element`). */
  readonly node?: ExtensionElement;
}

/** Most root-level elements (`rs:md`, `rs:ln`, others) before the first entry: the header stays small. */
export const MAX_HEADER_ELEMENTS = 1000;

/** Issues recorded per document; later ones are counted in one `too-many-issues` issue. */
export const MAX_ISSUES = 100;

/** Limits and context of one parse. */
export interface ParserOptions {
  readonly url?: string | undefined;
  readonly maxDepth: number;
  readonly maxEntryBytes: number;
  /** Encoding the bytes were decoded with; the XML declaration must agree. */
  readonly encoding: 'utf-8' | 'utf-16le' | 'utf-16be';
}

// Element name codes.
const N_OTHER = 0;
const N_URLSET = 1;
const N_SITEMAPINDEX = 2;
const N_URL = 3;
const N_SITEMAP = 4;
const N_LOC = 5;
const N_LASTMOD = 6;
const N_CHANGEFREQ = 7;
const N_PRIORITY = 8;
const N_MD = 9;
const N_LN = 10;

/** Null prototype: element names come from the document (`<constructor>` must not find Object's). */
const SITEMAP_CODES: Record<string, number> = Object.assign(Object.create(null) as Record<string, number>, {
  urlset: N_URLSET,
  sitemapindex: N_SITEMAPINDEX,
  url: N_URL,
  sitemap: N_SITEMAP,
  loc: N_LOC,
  lastmod: N_LASTMOD,
  changefreq: N_CHANGEFREQ,
  priority: N_PRIORITY,
});

// Frame kinds (what the open element is to the model).
const K_ROOT = 0;
const K_ENTRY = 1;
const K_LOC = 2;
const K_LASTMOD = 3;
const K_CHANGEFREQ = 4;
const K_PRIORITY = 5;
const K_MD = 6;
const K_LN = 7;
const K_EXT = 8;
const K_SKIP = 9;

// Bits of `seen` in the current entry.
const S_LOC = 1;
const S_LASTMOD = 2;
const S_CHANGEFREQ = 4;
const S_PRIORITY = 8;
const S_MD = 16;

/** A resolved element name. */
interface QName {
  readonly qname: string;
  readonly ns: string;
  readonly prefix: string;
  readonly local: string;
  readonly code: number;
}

/** Namespace bindings in effect, with a cache of element names resolved under them. */
class Scope {
  readonly names = new Map<string, QName>();
  /** Direct-mapped cache by {@link nameSlot}: a hit costs a few character compares and no allocation. */
  readonly slots: (QName | undefined)[] = new Array<QName | undefined>(64).fill(undefined);
  constructor(readonly bindings: Map<string, string>) {}
}

/**
 * True when `s` has `word` at `pos` (the caller has checked that it fits). For the short names compared here a
 * loop the compiler inlines beats a `startsWith` call.
 */
function matchAt(s: string, pos: number, word: string): boolean {
  for (let k = 0; k < word.length; k++) if (s.charCodeAt(pos + k) !== word.charCodeAt(k)) return false;
  return true;
}

/** Slot of a name in a 64-entry cache, from its length and first and last characters. */
function nameSlot(len: number, first: number, last: number): number {
  return (len + (first << 2) + (last << 1)) & 63;
}

/**
 * Character classes of ASCII characters in names: 0 name character (letters, digits, `.`, `-`, `_`; every
 * non-ASCII character is accepted too), 1 ends the name (white space, '>', '/', '='), 2 colon, 3 not allowed
 * in a name (XML 1.0 §2.3 NameChar).
 */
const NAME_CLASS = new Uint8Array(128).fill(3);
for (let c = 0; c < 128; c++) if (/[A-Za-z0-9._-]/.test(String.fromCharCode(c))) NAME_CLASS[c] = 0;
for (const ch of ' \t\n\r>/=') NAME_CLASS[ch.charCodeAt(0)] = 1;
NAME_CLASS[58] = 2;

/** The attribute names of `rs:md` and `rs:ln` (and `xmlns`), by {@link nameSlot}: no collisions among them. */
const ATTR_SLOTS: (string | undefined)[] = new Array<string | undefined>(64).fill(undefined);
for (const a of [
  'capability',
  'at',
  'completed',
  'from',
  'until',
  'change',
  'datetime',
  'hash',
  'length',
  'path',
  'type',
  'encoding',
  'rel',
  'href',
  'modified',
  'pri',
  'xmlns',
]) {
  const k = nameSlot(a.length, a.charCodeAt(0), a.charCodeAt(a.length - 1));
  if (ATTR_SLOTS[k] !== undefined) throw new Error(`attribute slot collision: ${a}`);
  ATTR_SLOTS[k] = a;
}

function internNs(uri: string): string {
  // Identity of the two namespaces we compare against makes every later comparison a pointer check.
  return uri === SITEMAP_NS ? SITEMAP_NS : uri === RS_NS ? RS_NS : uri;
}

const INITIAL_BINDINGS = new Map<string, string>([
  ['xml', XML_NS],
  ['xmlns', XMLNS_NS],
]);

const PHASE_PROLOG = 0;
const PHASE_BODY = 1;
const PHASE_EPILOG = 2;

/** C0 controls other than tab, LF, CR, and the non-characters U+FFFE, U+FFFF (XML 1.0 §2.2). */
const FORBIDDEN_CHARS = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]/;
const FORBIDDEN_CHARS_G = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]/g;

/** Tokens cut by a chunk boundary longer than this are parsed again only when their input doubled. */
const RETRY_THRESHOLD = 4096;

/** Signals "this token is cut by the end of the chunk: keep it for the next one". */
const MORE = -1;

/**
 * The parser. Call {@link feed} with each decoded chunk, then {@link end}; after each call take the completed
 * entries from {@link batch} (and clear it). {@link header} is set once the root-level elements before the
 * first entry are known ({@link headerDone}).
 */
export class DocumentParser {
  header: DocumentHeader | undefined;
  headerDone = false;
  /** Entries completed since the caller last emptied it. */
  batch: Entry[] = [];
  readonly issues: ReadIssue[] = [];
  /** Number of entries started so far. */
  entryCount = 0;

  private readonly opts: ParserOptions;
  private buf = '';
  /** Absolute offset (in UTF-16 units) of `buf[0]` in the whole decoded document. */
  private base = 0;
  private final = false;
  private phase = PHASE_PROLOG;
  private sawRoot = false;
  private hasAmp = false;
  private hasCR = false;
  private hasTab = false;
  /** Position of the next `]]>` at or after the last text checked (-1: none; -2: not searched yet). */
  private nextCdEnd = -2;

  // Line tracking: lines are counted lazily up to the positions asked for.
  private line = 1;
  /** Position in `buf` of the first character of the current line (may be negative). */
  private lineStart = 0;
  /** Position in `buf` of the next LF not yet counted, or Infinity. */
  private nextNl = 0;

  // Element stack.
  private depth = 0;
  private readonly stackName: string[] = [];
  private readonly stackKind: number[] = [];
  private readonly stackScope: Scope[] = [];
  private readonly stackExt: (ExtensionElement | undefined)[] = [];
  private scope = new Scope(INITIAL_BINDINGS);

  // Attributes of the tag being parsed.
  private ac = 0;
  private readonly an: string[] = [];
  private readonly av: string[] = [];
  private readonly acolon: number[] = [];
  /** Attribute names of the current tag, once it has many. */
  private readonly seenNames = new Set<string>();
  /** Position of the first '<' after the current tag's '<' (-1: none in the buffer; -2: not computed). */
  private nextLt = -2;

  // Model being built.
  private entry: Entry | undefined;
  private seen = 0;
  private field = '';
  /** Absolute offset of the start of the current root-level child (entry or other), for the size limit. */
  private unitStart = 0;
  private issueOverflow = 0;
  private headerElements = 0;
  /** Where the current root-level child starts. */
  private unitLine = 0;
  private unitColumn = 0;

  constructor(options: ParserOptions) {
    this.opts = options;
  }

  /** Parses as much of `text` (appended to the kept tail) as possible. */
  feed(text: string): void {
    const pending = this.buf.length - this.pos;
    if (this.retryAt > 0) {
      // A long token is cut: parse again only once the input behind it has doubled, so that a token arriving
      // in many small chunks costs linear, not quadratic, time.
      if (pending + this.deferred.length + text.length < this.retryAt) {
        this.deferred += text;
        return;
      }
      text = this.deferred + text;
      this.deferred = '';
      this.retryAt = 0;
    }
    this.parseChunk(text);
    const left = this.buf.length - this.pos;
    if (left > RETRY_THRESHOLD) this.retryAt = 2 * left;
  }

  /** Text held back by {@link feed} while a long token waits for more input. */
  private deferred = '';
  /** Pending length at which to parse again (0: parse every chunk). */
  private retryAt = 0;

  private parseChunk(text: string): void {
    if (this.pos < this.buf.length) {
      // A token is cut by the chunk boundary. Rather than copying the whole chunk behind it, finish it in a
      // small buffer (the tail plus the chunk up to its first '<', where the next token starts), then go on in
      // the chunk itself.
      const m = text.indexOf('<');
      if (m >= 0) {
        this.shift(text.slice(0, m));
        this.textComplete = true;
        try {
          this.run();
        } finally {
          this.textComplete = false;
        }
        if (this.pos === this.buf.length) {
          this.switchTo(text, m);
          this.run();
          return;
        }
        this.shift(text.slice(m));
        this.run();
        return;
      }
    }
    this.shift(text);
    this.run();
  }

  /** True while the buffer is known to end where a '<' follows: text at its end is complete. */
  private textComplete = false;

  /** Continues in `text` at `m`, the buffer being fully consumed and ending with `text[0, m)`. */
  private switchTo(text: string, m: number): void {
    const old = this.buf.length;
    this.countLines(old);
    const shiftBy = old - m;
    this.lineStart -= shiftBy;
    this.base += shiftBy;
    this.buf = text;
    this.pos = m;
    const nl = text.indexOf('\n', Math.max(m, this.lineStart));
    this.nextNl = nl < 0 ? Number.POSITIVE_INFINITY : nl;
    FORBIDDEN_CHARS_G.lastIndex = m;
    const f = FORBIDDEN_CHARS_G.exec(text);
    if (f !== null) this.forbidden(f[0].charCodeAt(0), f.index);
    if (this.badChar >= 0) this.nextBad = this.badChar - this.base;
    this.hasAmp = text.indexOf('&', m) >= 0;
    this.hasCR = text.indexOf('\r', m) >= 0;
    this.hasTab = text.indexOf('\t', m) >= 0;
    this.nextCdEnd = -2;
    this.nextLt = -2;
  }

  /**
   * Notes a character XML forbids at `p`. It is reported when the parser gets there, or instead of any
   * later error, so that the first error in document order is the one reported, however the input is cut.
   */
  private forbidden(cp: number, p: number): void {
    if (this.badChar >= 0) return;
    this.badChar = this.base + p;
    this.badCode = cp;
  }

  /** Absolute offset of the first forbidden character seen, or -1. */
  private badChar = -1;
  private badCode = 0;
  /** `badChar` relative to the buffer (Infinity when none). */
  private nextBad = Number.POSITIVE_INFINITY;

  private reportBadChar(): never {
    const cp = this.badCode;
    this.badChar = -1;
    return this.fail(
      'RS_XML_SYNTAX',
      `character U+${cp.toString(16).toUpperCase().padStart(4, '0')} is not allowed in XML 1.0`,
      this.nextBad,
    );
  }

  /** Parses the rest and checks that the document is complete. */
  end(text = ''): void {
    this.final = true;
    this.shift(this.deferred + text);
    this.deferred = '';
    this.run();
    if (!this.sawRoot) this.fail('RS_XML_SYNTAX', 'no root element: the document is empty or not XML', this.buf.length);
    if (this.depth > 0) {
      const name = this.stackName[this.depth - 1]!;
      this.fail('RS_XML_SYNTAX', `unexpected end of document: <${name}> is not closed`, this.buf.length, name);
    }
    this.finishHeader();
    if (this.issueOverflow > 0) {
      this.issues.push({
        code: 'too-many-issues',
        message: `${this.issueOverflow} more issue(s) not recorded`,
        line: this.line,
        column: 1,
      });
    }
  }

  /** Line and column (1-based) of a position in the current buffer. */
  position(p: number): { line: number; column: number } {
    if (p >= this.lineStart) {
      this.countLines(p);
      return { line: this.line, column: p - this.lineStart + 1 };
    }
    // Before the line counted up to: count back.
    let line = this.line;
    let j = this.lineStart - 1;
    while (j >= p) {
      line--;
      j = j > 0 ? this.buf.lastIndexOf('\n', j - 1) : -1;
    }
    return { line, column: p - j };
  }

  /** Line and column of the first character not yet consumed (for errors raised outside the parser). */
  currentPosition(): { line: number; column: number } {
    return this.position(this.buf.length);
  }

  // -------------------------------------------------------------------------------------------------------
  // Buffer management

  private shift(text: string): void {
    const s = this.buf;
    if (this.pos > 0) {
      // Count the consumed part's lines before forgetting it.
      this.countLines(this.pos);
      this.lineStart -= this.pos;
      this.base += this.pos;
      this.buf = this.pos >= s.length ? text : s.slice(this.pos) + text;
    } else {
      this.buf = s.length === 0 ? text : s + text;
    }
    this.pos = 0;
    const b = this.buf;
    const nl = b.indexOf('\n', Math.max(0, this.lineStart));
    this.nextNl = nl < 0 ? Number.POSITIVE_INFINITY : nl;
    const m = FORBIDDEN_CHARS.exec(text);
    if (m !== null) this.forbidden(m[0].charCodeAt(0), b.length - text.length + m.index);
    if (this.badChar >= 0) this.nextBad = this.badChar - this.base;
    this.hasAmp = b.indexOf('&') >= 0;
    this.hasCR = b.indexOf('\r') >= 0;
    this.hasTab = b.indexOf('\t') >= 0;
    this.nextCdEnd = -2;
    this.nextLt = -2;
  }

  private pos = 0;

  private countLines(p: number): void {
    while (this.nextNl < p) {
      this.line++;
      this.lineStart = this.nextNl + 1;
      const j = this.buf.indexOf('\n', this.lineStart);
      this.nextNl = j < 0 ? Number.POSITIVE_INFINITY : j;
    }
  }

  // -------------------------------------------------------------------------------------------------------
  // Errors and issues

  fail(code: ErrorCode, message: string, p: number, element?: string): never {
    if (this.badChar >= 0 && p >= this.nextBad) this.reportBadChar();
    const { line, column } = this.position(Math.min(p, this.buf.length));
    throw new ResourceSyncError(code, message, {
      ...(this.opts.url === undefined ? {} : { url: this.opts.url }),
      line,
      column,
      ...(element === undefined ? {} : { element }),
      ...(this.entry === undefined ? {} : { entry: this.entryCount }),
    });
  }

  private syntax(message: string, p: number): never {
    return this.fail('RS_XML_SYNTAX', message, p);
  }

  private issue(
    code: ReadIssue['code'],
    message: string,
    p: number | { line: number; column: number },
    element: string,
    node?: ExtensionElement,
  ): void {
    if (this.issues.length >= MAX_ISSUES) {
      this.issueOverflow++;
      return;
    }
    const { line, column } = typeof p === 'number' ? this.position(p) : p;
    const issue: { -readonly [K in keyof ReadIssue]: ReadIssue[K] } = { code, message, line, column, element };
    if (this.entry !== undefined) issue.entry = this.entryCount;
    if (node !== undefined) issue.node = node;
    this.issues.push(issue);
  }

  /** The tag at `start` is cut by the end of the buffer: ask for more input, or fail at the end. */
  private more(start: number, what: string): number {
    if (this.final) this.syntax(`unexpected end of document inside ${what}`, start);
    if (this.buf.length - start > this.opts.maxEntryBytes)
      this.fail('RS_LIMIT', `${what} longer than ${this.opts.maxEntryBytes} characters`, start);
    return MORE;
  }

  // -------------------------------------------------------------------------------------------------------
  // The scanner

  private run(): void {
    const s = this.buf;
    const n = s.length;
    let p = this.pos;
    while (p < n) {
      let lt = this.nextLt;
      if (lt < p) lt = s.indexOf('<', p);
      this.nextLt = -2;
      if (lt < 0) {
        if (!this.final && !this.textComplete) {
          if (n - p > this.opts.maxEntryBytes)
            this.fail('RS_LIMIT', `text longer than ${this.opts.maxEntryBytes} characters`, p);
          break;
        }
        this.text(p, n);
        p = n;
        break;
      }
      if (lt > p) this.text(p, lt);
      p = lt;
      if (lt + 1 >= n) {
        if (this.more(lt, 'a tag') === MORE) break;
      }
      const c = s.charCodeAt(lt + 1);
      let next: number;
      if (c === 47 /* / */) next = this.endTag(lt);
      else if (c === 33 /* ! */) next = this.bang(lt);
      else if (c === 63 /* ? */) next = this.pi(lt);
      else next = this.startTag(lt);
      if (next === MORE) break;
      p = next;
    }
    this.pos = p;
    if (p > this.nextBad) this.reportBadChar();
    if (this.depth > 1 && this.base + p - this.unitStart > this.opts.maxEntryBytes) this.entryTooLarge(p);
  }

  private entryTooLarge(p: number): never {
    const name = this.stackName[1] ?? '';
    return this.fail(
      'RS_LIMIT',
      `<${name}> is larger than the limit of ${this.opts.maxEntryBytes} characters (maxEntryBytes)`,
      p,
      name,
    );
  }

  /** Text between markup, `buf[a, b)`. */
  private text(a: number, b: number): void {
    if (this.nextCdEnd !== -1) {
      // `]]>` may not appear in text (XML 1.0 §2.4); one search per occurrence in the buffer.
      if (this.nextCdEnd < a) this.nextCdEnd = this.buf.indexOf(']]>', a);
      if (this.nextCdEnd >= 0 && this.nextCdEnd < b) this.syntax("']]>' is not allowed in text", this.nextCdEnd);
    }
    const k = this.depth === 0 ? -1 : this.stackKind[this.depth - 1]!;
    if (k >= K_LOC && k <= K_PRIORITY) {
      const t = this.decodeText(a, b);
      this.field = this.field === '' ? t : this.field + t;
      return;
    }
    if (k === K_EXT) {
      this.extText(this.decodeText(a, b));
      return;
    }
    const s = this.buf;
    for (let i = a; i < b; i++) {
      if (!isXmlSpace(s.charCodeAt(i))) {
        this.unexpectedText(i, k);
        return;
      }
    }
  }

  private unexpectedText(i: number, k: number): void {
    if (this.phase === PHASE_PROLOG) this.syntax('text before the root element', i);
    if (this.phase === PHASE_EPILOG) this.syntax('text after the end of the root element', i);
    if (k === K_SKIP) return;
    const name = this.stackName[this.depth - 1]!;
    this.issue('unexpected-text', `text is not allowed directly inside <${name}>`, i, name);
  }

  private decodeText(a: number, b: number): string {
    let t = this.buf.slice(a, b);
    if (this.hasCR) t = normalizeNewlines(t);
    if (this.hasAmp && t.indexOf('&') >= 0) t = decodeReferences(t, (m, o) => this.syntax(m, a + o));
    return t;
  }

  private extText(t: string): void {
    const el = this.stackExt[this.depth - 1]!;
    const children = el.children as (ExtensionElement | string)[];
    const last = children.length - 1;
    if (last >= 0 && typeof children[last] === 'string') children[last] += t;
    else children.push(t);
  }

  /** `<!--`, `<![CDATA[`, `<!DOCTYPE` ... */
  private bang(lt: number): number {
    const s = this.buf;
    const n = s.length;
    if (n - lt < 4) return this.more(lt, 'markup');
    if (s.charCodeAt(lt + 2) === 45 && s.charCodeAt(lt + 3) === 45) {
      const end = s.indexOf('-->', lt + 4);
      if (end < 0) return this.more(lt, 'a comment');
      const dd = s.indexOf('--', lt + 4);
      if (dd < end) this.syntax("'--' is not allowed inside a comment", dd);
      return end + 3;
    }
    if (n - lt < 10) {
      if (!this.final && '<![CDATA['.startsWith(s.slice(lt, n))) return MORE;
      if (!this.final && /^<!([A-Z]*)$/.test(s.slice(lt, n))) return MORE;
    }
    if (s.startsWith('<![CDATA[', lt)) {
      const end = s.indexOf(']]>', lt + 9);
      if (end < 0) return this.more(lt, 'a CDATA section');
      if (this.depth === 0) this.syntax('CDATA section outside the root element', lt);
      const k = this.stackKind[this.depth - 1]!;
      let t = s.slice(lt + 9, end);
      if (this.hasCR) t = normalizeNewlines(t);
      if (k >= K_LOC && k <= K_PRIORITY) this.field += t;
      else if (k === K_EXT) this.extText(t);
      else {
        for (let i = 0; i < t.length; i++) {
          if (!isXmlSpace(t.charCodeAt(i))) {
            this.unexpectedText(lt, k);
            break;
          }
        }
      }
      return end + 3;
    }
    const m = /^<!([A-Z]+)/.exec(s.slice(lt, lt + 12));
    const word = m?.[1];
    if (word === 'DOCTYPE' || word === 'ENTITY' || word === 'ELEMENT' || word === 'ATTLIST' || word === 'NOTATION')
      this.fail('RS_XML_DTD', `<!${word}> is refused: DTDs and entity declarations are not allowed`, lt);
    return this.syntax("'<!' must start a comment or a CDATA section", lt);
  }

  /** `<?target ...?>`: the XML declaration (only at the very start) or a processing instruction (ignored). */
  private pi(lt: number): number {
    const s = this.buf;
    const end = s.indexOf('?>', lt + 2);
    if (end < 0) return this.more(lt, 'a processing instruction');
    const body = s.slice(lt + 2, end);
    const m = /^([^\s?]+)/.exec(body);
    const target = m?.[1] ?? '';
    if (target === '') this.syntax('processing instruction without a target', lt);
    if (target.toLowerCase() === 'xml') {
      if (this.base + lt !== 0 || target !== 'xml')
        this.syntax('the XML declaration is only allowed at the very start of the document', lt);
      this.xmlDeclaration(s.slice(lt, end + 2), lt);
    }
    return end + 2;
  }

  private xmlDeclaration(decl: string, at: number): void {
    const m =
      /^<\?xml\s+version\s*=\s*(["'])1\.[0-9]+\1(?:\s+encoding\s*=\s*(["'])([A-Za-z][A-Za-z0-9._-]*)\2)?(?:\s+standalone\s*=\s*(["'])(?:yes|no)\4)?\s*\?>$/.exec(
        decl,
      );
    if (m === null) this.syntax('malformed XML declaration', at);
    const declared = m[3]?.toLowerCase();
    if (declared === undefined) return;
    const enc = this.opts.encoding;
    const ok =
      enc === 'utf-8'
        ? declared === 'utf-8' || declared === 'utf8' || declared === 'us-ascii' || declared === 'ascii'
        : declared === 'utf-16' || declared === enc;
    if (!ok)
      this.syntax(
        enc === 'utf-8'
          ? `unsupported encoding "${m[3]}": documents must be UTF-8 (Sitemap protocol), or UTF-16 with a byte order mark`
          : `the document declares encoding "${m[3]}" but starts with a UTF-16 byte order mark`,
        at,
      );
  }

  /** `</name>` */
  private endTag(lt: number): number {
    const s = this.buf;
    const gt = s.indexOf('>', lt + 2);
    const nextLt = s.indexOf('<', lt + 2);
    if (gt < 0 || (nextLt >= 0 && nextLt < gt)) {
      if (gt < 0 && nextLt < 0) return this.more(lt, 'an end tag');
      this.syntax("end tag not closed by '>'", lt);
    }
    this.nextLt = nextLt; // the scanner's next '<': no second search
    if (this.depth === 0) this.syntax(`end tag </${s.slice(lt + 2, gt).trim()}> without a start tag`, lt);
    const name = this.stackName[this.depth - 1]!;
    let i = lt + 2 + name.length;
    if (i > gt || !matchAt(s, lt + 2, name)) this.mismatch(lt, gt, name);
    while (i < gt && isXmlSpace(s.charCodeAt(i))) i++;
    if (i !== gt) this.mismatch(lt, gt, name);
    this.close(lt);
    return gt + 1;
  }

  private mismatch(lt: number, gt: number, name: string): never {
    const got = this.buf.slice(lt + 2, gt).trim();
    return this.fail('RS_XML_SYNTAX', `end tag </${got}> does not match the open element <${name}>`, lt, name);
  }

  /** `<name attr="v" ...>` or `<name .../>` */
  private startTag(lt: number): number {
    const s = this.buf;
    const n = s.length;
    let i = lt + 1;
    let colon = -1;
    let c = 0;
    for (; i < n; i++) {
      c = s.charCodeAt(i);
      if (c < 128) {
        const k = NAME_CLASS[c]!;
        if (k === 0) continue;
        if (k === 1) break;
        if (k === 3) this.syntax(`character '${String.fromCharCode(c)}' is not allowed in an element name`, i);
        if (colon >= 0) this.syntax('element name with more than one colon', lt);
        colon = i;
      }
    }
    if (i >= n) return this.more(lt, 'a start tag');
    if (i === lt + 1) this.syntax("'<' must start a tag (write &lt; in text)", lt);
    if (c === 61) this.syntax("character '=' is not allowed in an element name", i);
    const nameEnd = i;

    // Attributes.
    let ac = 0;
    let nl = -1;
    let xmlns = false;
    let selfClose = false;
    const an = this.an;
    const av = this.av;
    const acolon = this.acolon;
    for (;;) {
      let ws = false;
      for (; i < n; i++) {
        c = s.charCodeAt(i);
        if (c === 32 || c === 10 || c === 9 || c === 13) ws = true;
        else break;
      }
      if (i >= n) return this.more(lt, 'a start tag');
      if (c === 62) {
        i++;
        break;
      }
      if (c === 47) {
        if (i + 1 >= n) return this.more(lt, 'a start tag');
        if (s.charCodeAt(i + 1) !== 62) this.syntax("expected '>' after '/' in a start tag", i);
        i += 2;
        selfClose = true;
        break;
      }
      if (!ws) this.syntax('white space is required before an attribute', i);
      const a0 = i;
      let acol = -1;
      for (; i < n; i++) {
        c = s.charCodeAt(i);
        if (c < 128) {
          const k = NAME_CLASS[c]!;
          if (k === 0) continue;
          if (k === 1) break;
          if (k === 3) this.syntax(`character '${String.fromCharCode(c)}' is not allowed in an attribute name`, i);
          if (acol >= 0) this.syntax('attribute name with more than one colon', a0);
          acol = i - a0;
        }
      }
      if (i >= n) return this.more(lt, 'a start tag');
      if (i === a0) this.syntax('attribute name expected', i);
      const ac0 = s.charCodeAt(a0);
      const alen = i - a0;
      // Known attribute names come from a table (interned strings, no allocation); others are sliced.
      const known = acol < 0 ? ATTR_SLOTS[nameSlot(alen, ac0, s.charCodeAt(i - 1))] : undefined;
      let aname: string;
      if (known !== undefined && known.length === alen && matchAt(s, a0, known)) aname = known;
      else {
        if (ac0 < 65 ? true : ac0 > 122 ? ac0 < 0xc0 : ac0 > 90 && ac0 < 97 && ac0 !== 95)
          this.syntax(`invalid attribute name starting with '${String.fromCharCode(ac0)}'`, a0);
        if (acol === 0 || acol === alen - 1) this.syntax('attribute name with an empty prefix or local name', a0);
        aname = s.slice(a0, i);
      }
      for (; i < n; i++) {
        c = s.charCodeAt(i);
        if (!(c === 32 || c === 10 || c === 9 || c === 13)) break;
      }
      if (i >= n) return this.more(lt, 'a start tag');
      if (c !== 61) this.syntax(`attribute ${aname} has no value (expected '=')`, i);
      for (i++; i < n; i++) {
        c = s.charCodeAt(i);
        if (!(c === 32 || c === 10 || c === 9 || c === 13)) break;
      }
      if (i >= n) return this.more(lt, 'a start tag');
      if (c !== 34 && c !== 39) this.syntax(`value of attribute ${aname} must be quoted`, i);
      const v0 = i + 1;
      const v1 = s.indexOf(c === 34 ? '"' : "'", v0);
      let nextLt = this.nextLt;
      if (nextLt === -2) this.nextLt = nextLt = s.indexOf('<', lt + 1);
      if (v1 < 0) {
        if (nextLt >= 0) this.syntax(`'<' is not allowed in an attribute value (attribute ${aname})`, nextLt);
        return this.more(lt, 'a start tag');
      }
      if (nextLt >= 0 && nextLt < v1)
        this.syntax(`'<' is not allowed in an attribute value (attribute ${aname})`, nextLt);
      let value = s.slice(v0, v1);
      // The next LF at or after the value: one search serves every attribute of the tag.
      if (nl < v0) {
        nl = s.indexOf('\n', v0);
        if (nl < 0) nl = n;
      }
      if (
        nl < v1 ||
        (this.hasAmp && value.indexOf('&') >= 0) ||
        (this.hasCR && value.indexOf('\r') >= 0) ||
        (this.hasTab && value.indexOf('\t') >= 0)
      ) {
        value = normalizeAttribute(value, (m, o) => this.syntax(m, v0 + o));
      }
      if (ac < 16) {
        for (let j = 0; j < ac; j++) if (an[j] === aname) this.syntax(`duplicate attribute ${aname}`, a0);
      } else {
        // Many attributes: a set, so that a hostile tag cannot make this quadratic.
        if (ac === 16) {
          this.seenNames.clear();
          for (let j = 0; j < ac; j++) this.seenNames.add(an[j]!);
        }
        if (this.seenNames.has(aname)) this.syntax(`duplicate attribute ${aname}`, a0);
        this.seenNames.add(aname);
      }
      an[ac] = aname;
      av[ac] = value;
      acolon[ac] = acol;
      ac++;
      if (!xmlns && ac0 === 120 && aname.startsWith('xmlns') && (aname.length === 5 || acol === 5)) xmlns = true;
      i = v1 + 1;
    }
    this.ac = ac;
    if (xmlns) this.declare(lt);
    this.open(this.elementName(lt, nameEnd, colon), lt);
    if (selfClose) this.close(i);
    return i;
  }

  /** Applies the namespace declarations among the current attributes: a new scope for this element. */
  private declare(lt: number): void {
    const bindings = new Map(this.scope.bindings);
    for (let j = 0; j < this.ac; j++) {
      const name = this.an[j]!;
      const col = this.acolon[j]!;
      if (name === 'xmlns') {
        const uri = this.av[j]!;
        if (uri === XML_NS || uri === XMLNS_NS) this.syntax(`the namespace ${uri} cannot be the default namespace`, lt);
        bindings.set('', internNs(uri));
      } else if (col === 5 && name.startsWith('xmlns:')) {
        const prefix = name.slice(6);
        const uri = this.av[j]!;
        if (uri === '') this.syntax(`namespace prefix ${prefix} cannot be undeclared (xmlns:${prefix}="")`, lt);
        if (prefix === 'xmlns') this.syntax('the xmlns prefix cannot be declared', lt);
        if ((prefix === 'xml') !== (uri === XML_NS))
          this.syntax('the xml prefix is bound to its own namespace only', lt);
        if (uri === XMLNS_NS) this.syntax(`the namespace ${uri} cannot be bound to a prefix`, lt);
        bindings.set(prefix, internNs(uri));
      }
    }
    this.scope = new Scope(bindings);
  }

  /** The resolved name of the element whose name is `buf[lt + 1, end)`, from the scope's caches when possible. */
  private elementName(lt: number, end: number, colon: number): QName {
    const s = this.buf;
    const len = end - lt - 1;
    const scope = this.scope;
    const slot = nameSlot(len, s.charCodeAt(lt + 1), s.charCodeAt(end - 1));
    const hit = scope.slots[slot];
    if (hit !== undefined && hit.qname.length === len && matchAt(s, lt + 1, hit.qname)) return hit;
    const qname = s.slice(lt + 1, end);
    let q = scope.names.get(qname);
    if (q === undefined) {
      const c0 = s.charCodeAt(lt + 1);
      if (c0 < 65 ? true : c0 > 122 ? c0 < 0xc0 : c0 > 90 && c0 < 97 && c0 !== 95)
        this.syntax(`invalid element name starting with '${String.fromCharCode(c0)}'`, lt);
      if (colon === end - 1) this.syntax('element name ends with a colon', lt);
      q = this.resolveElement(qname, colon < 0 ? -1 : colon - lt - 1, lt);
      scope.names.set(qname, q);
    }
    scope.slots[slot] = q;
    return q;
  }

  private resolveElement(qname: string, colon: number, lt: number): QName {
    const prefix = colon < 0 ? '' : qname.slice(0, colon);
    const local = colon < 0 ? qname : qname.slice(colon + 1);
    let ns = this.scope.bindings.get(prefix);
    if (ns === undefined) {
      if (prefix !== '') this.syntax(`namespace prefix ${prefix} is not declared (element <${qname}>)`, lt);
      ns = '';
    }
    if (prefix === 'xmlns') this.syntax('elements cannot have the xmlns prefix', lt);
    let code = N_OTHER;
    if (ns === SITEMAP_NS) code = SITEMAP_CODES[local] ?? N_OTHER;
    else if (ns === RS_NS) code = local === 'md' ? N_MD : local === 'ln' ? N_LN : N_OTHER;
    return { qname, ns, prefix, local, code };
  }

  /** Attributes of the current tag from other namespaces (or none), namespace declarations left out. */
  private attrAt(j: number, lt: number): ExtensionAttribute | undefined {
    const name = this.an[j]!;
    const col = this.acolon[j]!;
    if (col < 0) return name === 'xmlns' ? undefined : { ns: '', prefix: '', local: name, value: this.av[j]! };
    const prefix = name.slice(0, col);
    if (prefix === 'xmlns') return undefined;
    const ns = this.scope.bindings.get(prefix);
    if (ns === undefined) this.syntax(`namespace prefix ${prefix} is not declared (attribute ${name})`, lt);
    return { ns, prefix, local: name.slice(col + 1), value: this.av[j]! };
  }

  /** Checks that no two prefixed attributes have the same expanded name. */
  private checkExpandedNames(attrs: readonly ExtensionAttribute[], lt: number): void {
    if (attrs.length > 16) {
      const seen = new Map<string, ExtensionAttribute>();
      for (const y of attrs) {
        const key = `${y.ns}\u0000${y.local}`;
        const x = seen.get(key);
        if (x !== undefined)
          this.syntax(`attributes ${x.prefix}:${x.local} and ${y.prefix}:${y.local} have the same expanded name`, lt);
        seen.set(key, y);
      }
      return;
    }
    for (let a = 0; a < attrs.length; a++) {
      for (let b = a + 1; b < attrs.length; b++) {
        const x = attrs[a]!;
        const y = attrs[b]!;
        if (x.ns === y.ns && x.local === y.local)
          this.syntax(`attributes ${x.prefix}:${x.local} and ${y.prefix}:${y.local} have the same expanded name`, lt);
      }
    }
  }

  private extensionAttributes(lt: number): ExtensionAttribute[] {
    const out: ExtensionAttribute[] = [];
    let prefixed = 0;
    for (let j = 0; j < this.ac; j++) {
      const a = this.attrAt(j, lt);
      if (a !== undefined) {
        out.push(a);
        if (a.prefix !== '') prefixed++;
      }
    }
    if (prefixed > 1) this.checkExpandedNames(out, lt);
    return out;
  }

  private readMetadata(lt: number): Metadata {
    const md: Metadata = {};
    let ext: ExtensionAttribute[] | undefined;
    for (let j = 0; j < this.ac; j++) {
      const value = this.av[j]!;
      if (this.acolon[j]! < 0) {
        const name = this.an[j]!;
        switch (name) {
          case 'hash':
            md.hash = value;
            continue;
          case 'length': {
            const v = parseNonNegativeInteger(value);
            if (v === undefined) (md.invalid ??= {}).length = value;
            else md.length = v;
            continue;
          }
          case 'type':
            md.type = value;
            continue;
          case 'change':
            md.change = value;
            continue;
          case 'datetime':
            md.datetime = value;
            continue;
          case 'capability':
            md.capability = value;
            continue;
          case 'at':
            md.at = value;
            continue;
          case 'completed':
            md.completed = value;
            continue;
          case 'from':
            md.from = value;
            continue;
          case 'until':
            md.until = value;
            continue;
          case 'path':
            md.path = value;
            continue;
          case 'encoding':
            md.encoding = value;
            continue;
          default:
        }
      }
      const a = this.attrAt(j, lt);
      if (a !== undefined) (ext ??= []).push(a);
    }
    if (ext !== undefined) {
      if (ext.length > 1) this.checkExpandedNames(ext, lt);
      md.extensions = ext;
    }
    return md;
  }

  private readLink(lt: number): Link {
    let rel: string | undefined;
    let href: string | undefined;
    const rest: Omit<Link, 'rel' | 'href'> = {};
    let ext: ExtensionAttribute[] | undefined;
    for (let j = 0; j < this.ac; j++) {
      const value = this.av[j]!;
      if (this.acolon[j]! < 0) {
        switch (this.an[j]) {
          case 'rel':
            rel = value;
            continue;
          case 'href':
            href = value;
            continue;
          case 'hash':
            rest.hash = value;
            continue;
          case 'length': {
            const v = parseNonNegativeInteger(value);
            if (v === undefined) (rest.invalid ??= {}).length = value;
            else rest.length = v;
            continue;
          }
          case 'modified':
            rest.modified = value;
            continue;
          case 'path':
            rest.path = value;
            continue;
          case 'pri': {
            const v = parseNonNegativeInteger(value);
            if (v === undefined) (rest.invalid ??= {}).pri = value;
            else rest.pri = v;
            continue;
          }
          case 'type':
            rest.type = value;
            continue;
          case 'encoding':
            rest.encoding = value;
            continue;
          default:
        }
      }
      const a = this.attrAt(j, lt);
      if (a !== undefined) (ext ??= []).push(a);
    }
    // rel and href are mandatory; '' marks a missing one for the validator (the model has no other way).
    const link: Link = { rel: rel ?? '', href: href ?? '', ...rest };
    if (ext !== undefined) {
      if (ext.length > 1) this.checkExpandedNames(ext, lt);
      link.extensions = ext;
    }
    return link;
  }

  // -------------------------------------------------------------------------------------------------------
  // Building the model

  private push(qname: string, kind: number, ext: ExtensionElement | undefined, scope: Scope, lt: number): void {
    const d = this.depth;
    if (d >= this.opts.maxDepth)
      this.fail('RS_LIMIT', `elements nested deeper than ${this.opts.maxDepth} (maxDepth)`, lt, qname);
    this.stackName[d] = qname;
    this.stackKind[d] = kind;
    this.stackScope[d] = scope;
    this.stackExt[d] = ext;
    this.depth = d + 1;
  }

  private open(q: QName, lt: number): void {
    const scope = this.scope;
    const qname = q.qname;
    if (this.depth === 0) {
      this.openRoot(qname, q, scope, lt);
      return;
    }
    const parent = this.stackKind[this.depth - 1]!;
    if (parent === K_ENTRY) {
      if (this.base + lt - this.unitStart > this.opts.maxEntryBytes) this.entryTooLarge(lt);
      const e = this.entry!;
      const code = q.code;
      let kind = K_EXT;
      if (code === N_LOC) {
        if ((this.seen & S_LOC) === 0) kind = K_LOC;
      } else if (code === N_MD) {
        if ((this.seen & S_MD) === 0) {
          this.seen |= S_MD;
          e.md = this.readMetadata(lt);
          kind = K_MD;
        }
      } else if (code === N_LN) {
        e.links.push(this.readLink(lt));
        kind = K_LN;
      } else if (code === N_LASTMOD) {
        if ((this.seen & S_LASTMOD) === 0) kind = K_LASTMOD;
      } else if (code === N_CHANGEFREQ) {
        if ((this.seen & S_CHANGEFREQ) === 0) kind = K_CHANGEFREQ;
      } else if (code === N_PRIORITY) {
        if ((this.seen & S_PRIORITY) === 0) kind = K_PRIORITY;
      }
      if (kind === K_EXT) this.push(qname, K_EXT, this.newExt(q, lt), scope, lt);
      else {
        if (kind !== K_MD && kind !== K_LN) {
          this.field = '';
          if (this.ac > 0) this.dropAttributes(qname, lt);
        }
        this.push(qname, kind, undefined, scope, lt);
      }
      return;
    }
    if (parent === K_ROOT) {
      this.unitStart = this.base + lt;
      const at = this.position(lt);
      this.unitLine = at.line;
      this.unitColumn = at.column;
      const code = q.code;
      if (code === N_URL || code === N_SITEMAP) {
        if (!this.headerDone) this.finishHeader();
        this.entryCount++;
        this.seen = 0;
        const entry: Entry = { element: code === N_URL ? 'url' : 'sitemap', loc: '', links: [] };
        this.entry = entry;
        entry.line = at.line;
        if (this.ac > 0) this.dropAttributes(qname, lt);
        this.push(qname, K_ENTRY, undefined, scope, lt);
        return;
      }
      const h = this.header!;
      if (!this.headerDone && ++this.headerElements > MAX_HEADER_ELEMENTS)
        this.fail('RS_LIMIT', `more than ${MAX_HEADER_ELEMENTS} root-level elements before the first entry`, lt, qname);
      if (!this.headerDone && code === N_MD && h.md === undefined) {
        h.md = this.readMetadata(lt);
        this.push(qname, K_MD, undefined, scope, lt);
        return;
      }
      if (!this.headerDone && code === N_LN) {
        h.links.push(this.readLink(lt));
        this.push(qname, K_LN, undefined, scope, lt);
        return;
      }
      this.push(qname, K_EXT, this.newExt(q, lt), scope, lt);
      return;
    }
    if (parent === K_EXT) {
      const el = this.newExt(q, lt);
      (this.stackExt[this.depth - 1]!.children as (ExtensionElement | string)[]).push(el);
      this.push(qname, K_EXT, el, scope, lt);
      return;
    }
    if (parent !== K_SKIP) {
      const container = this.stackName[this.depth - 1]!;
      this.issue('unexpected-child', `<${qname}> is not allowed inside <${container}> and is ignored`, lt, container);
    }
    this.push(qname, K_SKIP, undefined, scope, lt);
  }

  /** Attributes on an element whose model has no place for them (`<url>`, `<loc>` ...): an issue each. */
  private dropAttributes(qname: string, lt: number): void {
    for (let j = 0; j < this.ac; j++) {
      const a = this.attrAt(j, lt);
      if (a === undefined) continue;
      const name = a.prefix === '' ? a.local : `${a.prefix}:${a.local}`;
      this.issue('unexpected-attribute', `attribute ${name} on <${qname}> is not allowed and is dropped`, lt, qname);
    }
  }

  private newExt(q: QName, lt: number): ExtensionElement {
    return { ns: q.ns, prefix: q.prefix, local: q.local, attributes: this.extensionAttributes(lt), children: [] };
  }

  private openRoot(qname: string, q: QName, scope: Scope, lt: number): void {
    if (this.phase === PHASE_EPILOG) this.syntax(`<${qname}> after the end of the root element`, lt);
    if (q.ns !== SITEMAP_NS || (q.code !== N_URLSET && q.code !== N_SITEMAPINDEX)) {
      const what = q.ns === '' ? `<${qname}> (no namespace)` : `<${qname}> in namespace ${q.ns}`;
      this.fail(
        'RS_NOT_RESOURCESYNC',
        `the root element is ${what}: expected <urlset> or <sitemapindex> in namespace ${SITEMAP_NS}`,
        lt,
        qname,
      );
    }
    const root: RootElement = q.code === N_URLSET ? 'urlset' : 'sitemapindex';
    const namespaces: Record<string, string> = {};
    const attributes: ExtensionAttribute[] = [];
    for (let j = 0; j < this.ac; j++) {
      const name = this.an[j]!;
      const col = this.acolon[j]!;
      if (name === 'xmlns') setOwn(namespaces, '', this.av[j]!);
      else if (col === 5 && name.startsWith('xmlns:')) setOwn(namespaces, name.slice(6), this.av[j]!);
      else attributes.push(this.attrAt(j, lt)!);
    }
    if (attributes.length > 1) this.checkExpandedNames(attributes, lt);
    const header: DocumentHeader = { root, kind: 'unknown', links: [], namespaces };
    if (attributes.length > 0) header.attributes = attributes;
    this.header = header;
    this.sawRoot = true;
    this.phase = PHASE_BODY;
    this.push(qname, K_ROOT, undefined, scope, lt);
  }

  private finishHeader(): void {
    if (this.headerDone || this.header === undefined) return;
    this.headerDone = true;
    const h = this.header;
    h.kind = documentKind(h.root, h.md?.capability);
  }

  private close(p: number): void {
    const d = this.depth - 1;
    const kind = this.stackKind[d]!;
    this.depth = d;
    this.scope = d === 0 ? this.rootScope() : this.stackScope[d - 1]!;
    switch (kind) {
      case K_LOC:
        this.entry!.loc = trimField(this.field);
        this.seen |= S_LOC;
        return;
      case K_LASTMOD:
        this.entry!.lastmod = trimField(this.field);
        this.seen |= S_LASTMOD;
        return;
      case K_CHANGEFREQ:
        this.entry!.changefreq = trimField(this.field);
        this.seen |= S_CHANGEFREQ;
        return;
      case K_PRIORITY:
        this.entry!.priority = trimField(this.field);
        this.seen |= S_PRIORITY;
        return;
      case K_ENTRY:
        if (this.base + p - this.unitStart > this.opts.maxEntryBytes) this.entryTooLarge(p);
        this.batch.push(this.entry!);
        this.entry = undefined;
        return;
      case K_EXT:
        if (d >= 1) this.closeExt(d, p);
        return;
      case K_ROOT:
        this.finishHeader();
        this.phase = PHASE_EPILOG;
        return;
      default:
    }
  }

  private closeExt(d: number, p: number): void {
    const el = this.stackExt[d]!;
    dropMixedWhitespace(el);
    const parent = this.stackKind[d - 1]!;
    if (parent === K_ENTRY) {
      const e = this.entry!;
      (e.extensions ??= []).push(el);
    } else if (parent === K_ROOT) {
      if (this.base + p - this.unitStart > this.opts.maxEntryBytes) this.entryTooLarge(p);
      if (!this.headerDone) {
        const h = this.header!;
        (h.extensions ??= []).push(el);
      } else {
        const name = this.stackName[d]!;
        this.issue(
          'late-element',
          `<${name}> after the first entry: root-level elements must come before the entries`,
          { line: this.unitLine, column: this.unitColumn },
          name,
          el,
        );
      }
    }
  }

  private rootScope(): Scope {
    // After the root closes, the initial bindings apply again (for a second root element's error message).
    return new Scope(INITIAL_BINDINGS);
  }
}

/** Drops white-space-only text children of an element that also has element children (indentation). */
function dropMixedWhitespace(el: ExtensionElement): void {
  const ch = el.children as (ExtensionElement | string)[];
  if (ch.length < 2) return;
  let hasElement = false;
  for (const c of ch) if (typeof c !== 'string') hasElement = true;
  if (!hasElement) return;
  let w = 0;
  for (const c of ch) {
    if (typeof c === 'string' && isBlank(c)) continue;
    ch[w++] = c;
  }
  ch.length = w;
}

function isBlank(s: string): boolean {
  for (let i = 0; i < s.length; i++) if (!isXmlSpace(s.charCodeAt(i))) return false;
  return true;
}

function trimField(s: string): string {
  const n = s.length;
  if (n === 0) return s;
  if (!isXmlSpace(s.charCodeAt(0)) && !isXmlSpace(s.charCodeAt(n - 1))) return s;
  let a = 0;
  let b = n;
  while (a < b && isXmlSpace(s.charCodeAt(a))) a++;
  while (b > a && isXmlSpace(s.charCodeAt(b - 1))) b--;
  return s.slice(a, b);
}

/** A `length` / `pri` value: decimal digits only (surrounding XML white space allowed), at most 2^53 - 1. */
export function parseNonNegativeInteger(v: string): number | undefined {
  let n = v.length;
  let i = 0;
  if (n === 0) return undefined;
  if (isXmlSpace(v.charCodeAt(0)) || isXmlSpace(v.charCodeAt(n - 1))) {
    while (i < n && isXmlSpace(v.charCodeAt(i))) i++;
    while (n > i && isXmlSpace(v.charCodeAt(n - 1))) n--;
  }
  if (n === i || n - i > 16) return undefined;
  let x = 0;
  for (; i < n; i++) {
    const c = v.charCodeAt(i) - 48;
    if (c < 0 || c > 9) return undefined;
    x = x * 10 + c;
  }
  return x <= Number.MAX_SAFE_INTEGER ? x : undefined;
}

function setOwn(rec: Record<string, string>, key: string, value: string): void {
  if (key === '__proto__')
    Object.defineProperty(rec, key, { value, enumerable: true, writable: true, configurable: true });
  else rec[key] = value;
}
