/**
 * The writer: a {@link DocumentHeader} and entries in, deterministic XML out.
 *
 * Output: `<?xml version="1.0" encoding="UTF-8"?>`, the root with the header's namespace declarations (plus the
 * Sitemap namespace as default and `rs` when missing), 2-space indentation, the root `rs:md`, `rs:ln`s and
 * unknown root-level elements, then one `<url>`/`<sitemap>` per entry with its children in a fixed order
 * (`loc`, `lastmod`, `changefreq`, `priority`, `rs:md`, `rs:ln`..., unknown elements) and attributes in a
 * fixed order. Values are written as the model holds them (datetimes are not reformatted).
 *
 * @module
 */
import { RS_NS, SITEMAP_NS, XML_NS } from '../core/constants.js';
import { ResourceSyncError } from '../core/errors.js';
import type {
  DocumentHeader,
  Entry,
  ExtensionAttribute,
  ExtensionElement,
  Link,
  Metadata,
  ResourceSyncDocument,
} from '../core/model.js';
import { writeFileAtomic } from '../io/atomic.js';
import { escapeAttribute, escapeText, IllegalCharacterError } from './text.js';

/** Options of {@link writeDocument} and {@link writeDocumentFile}. */
export interface WriteOptions {
  /** Characters per emitted chunk (default 65,536; a chunk is emitted once it reaches this size). */
  readonly chunkSize?: number;
  /** Stops writing: the next chunk throws `RS_ABORTED`. */
  readonly signal?: AbortSignal;
  /** {@link writeDocumentFile}: fsync the file and its directory (default true). */
  readonly fsync?: boolean;
}

/** Default of {@link WriteOptions.chunkSize}. */
export const DEFAULT_CHUNK_SIZE = 65_536;
/** Default chunk size of {@link writeDocumentFile}: fewer, larger writes. */
const FILE_CHUNK_CHARS = 262_144;

/** Attribute order of `rs:md` (Table 3), then `invalid` leftovers, then extensions. */
const MD_ORDER = [
  'capability',
  'change',
  'at',
  'completed',
  'from',
  'until',
  'datetime',
  'hash',
  'length',
  'type',
  'encoding',
  'path',
] as const;
/** Attribute order of `rs:ln` after `rel` and `href`. */
const LN_ORDER = ['pri', 'modified', 'hash', 'length', 'type', 'encoding', 'path'] as const;

const NAME = /^[A-Za-z_\u00c0-\uffff][\w.\-\u00b7\u00c0-\uffff]*$/;

type Scope = ReadonlyMap<string, string>;

/** What went wrong where: turned into RS_INVALID_VALUE with the entry number. */
function invalid(message: string, entry?: number, cause?: unknown): ResourceSyncError {
  return new ResourceSyncError('RS_INVALID_VALUE', message, {
    ...(entry === undefined ? {} : { entry }),
    ...(cause === undefined ? {} : { cause }),
  });
}

/**
 * Serialises one document piece by piece: {@link head}, {@link entry} per entry, {@link tail}. Used by the
 * streaming writer and the splitter (which needs each entry's size before deciding where it goes).
 */
export class DocumentSerializer {
  /** Entries serialised so far. */
  count = 0;
  private readonly scope: Map<string, string>;
  private readonly decls: [string, string][];
  private readonly sm: string;
  private readonly rs: string;
  private readonly header: DocumentHeader;
  private readonly urlOpen: string;
  private readonly urlClose: string;
  private readonly sitemapOpen: string;
  private readonly sitemapClose: string;
  private readonly locOpen: string;
  private readonly locClose: string;
  private readonly mdOpen: string;
  private readonly lnOpen: string;

  constructor(header: DocumentHeader) {
    this.header = header;
    const decls: [string, string][] = Object.entries(header.namespaces);
    const bound = new Map(decls);
    const free = (base: string): string => {
      let p = base;
      for (let i = 1; bound.has(p); i++) p = `${base}${i}`;
      return p;
    };
    let sm = bound.get('') === SITEMAP_NS ? '' : decls.find(([, u]) => u === SITEMAP_NS)?.[0];
    if (sm === undefined) {
      sm = bound.has('') ? free('sm') : '';
      decls.push([sm, SITEMAP_NS]);
      bound.set(sm, SITEMAP_NS);
    }
    let rs = bound.get('rs') === RS_NS ? 'rs' : decls.find(([, u]) => u === RS_NS)?.[0];
    if (rs === undefined) {
      rs = free('rs');
      decls.push([rs, RS_NS]);
      bound.set(rs, RS_NS);
    }
    for (const [p, u] of decls) {
      if (p !== '' && !NAME.test(p)) throw invalid(`namespace prefix "${p}" is not a valid XML name`);
      if (p !== '' && u === '') throw invalid(`namespace prefix "${p}" is bound to no namespace`);
    }
    bound.set('xml', XML_NS);
    this.scope = bound;
    this.decls = decls;
    this.sm = sm === '' ? '' : `${sm}:`;
    this.rs = rs === '' ? '' : `${rs}:`;
    const s = this.sm;
    this.urlOpen = `  <${s}url>\n`;
    this.urlClose = `  </${s}url>\n`;
    this.sitemapOpen = `  <${s}sitemap>\n`;
    this.sitemapClose = `  </${s}sitemap>\n`;
    this.locOpen = `    <${s}loc>`;
    this.locClose = `</${s}loc>\n`;
    this.mdOpen = `<${this.rs}md`;
    this.lnOpen = `<${this.rs}ln`;
  }

  /** The XML declaration, the root start tag and the root-level elements. */
  head(): string {
    const h = this.header;
    const root = this.sm + h.root;
    let out = `<?xml version="1.0" encoding="UTF-8"?>\n<${root}`;
    for (const [p, u] of this.decls) out += ` ${p === '' ? 'xmlns' : `xmlns:${p}`}="${this.attr(u)}"`;
    if (h.attributes !== undefined && h.attributes.length > 0) {
      const extra = new Map<string, string>();
      out += this.extAttrs(h.attributes, this.scope, extra, this.sm.slice(0, -1));
      for (const [p, u] of extra) out += ` xmlns:${p}="${this.attr(u)}"`;
    }
    out += '>\n';
    if (h.md !== undefined) out += `  ${this.md(h.md)}\n`;
    for (const l of h.links) out += `  ${this.ln(l)}\n`;
    if (h.extensions !== undefined) for (const x of h.extensions) out += this.ext(x, '  ', this.scope) + '\n';
    return out;
  }

  /** The root end tag. */
  tail(): string {
    return `</${this.sm}${this.header.root}>\n`;
  }

  /**
   * One entry, indented.
   * @throws ResourceSyncError `RS_INVALID_VALUE` for a value XML 1.0 cannot carry (a control character...).
   */
  entry(e: Entry): string {
    const n = ++this.count;
    try {
      const s = this.sm;
      const isUrl = e.element !== 'sitemap';
      let out =
        e.lastmod === undefined
          ? `${isUrl ? this.urlOpen : this.sitemapOpen}${this.locOpen}${escapeText(e.loc)}${this.locClose}`
          : `${isUrl ? this.urlOpen : this.sitemapOpen}${this.locOpen}${escapeText(e.loc)}${this.locClose}    <${s}lastmod>${escapeText(e.lastmod)}</${s}lastmod>\n`;
      if (e.changefreq !== undefined) out += `    <${s}changefreq>${escapeText(e.changefreq)}</${s}changefreq>\n`;
      if (e.priority !== undefined) out += `    <${s}priority>${escapeText(e.priority)}</${s}priority>\n`;
      if (e.md !== undefined) out += `    ${this.md(e.md)}\n`;
      const links = e.links;
      for (let i = 0; i < links.length; i++) out += `    ${this.ln(links[i]!)}\n`;
      if (e.extensions !== undefined) for (const x of e.extensions) out += this.ext(x, '    ', this.scope) + '\n';
      return out + (isUrl ? this.urlClose : this.sitemapClose);
    } catch (err) {
      if (err instanceof IllegalCharacterError) throw invalid(`${err.message} (entry ${e.loc})`, n, err);
      if (err instanceof ResourceSyncError && err.entry === undefined)
        throw new ResourceSyncError(err.code, `${err.message} (entry ${n})`, { entry: n, cause: err });
      throw err;
    }
  }

  private attr(v: string): string {
    return escapeAttribute(v);
  }

  private md(md: Metadata): string {
    if (md.invalid !== undefined) return this.mdGeneric(md, md.invalid);
    // Unrolled MD_ORDER: this is the hot path of every list.
    let out = this.mdOpen;
    if (md.capability !== undefined) out += ` capability="${escapeAttribute(md.capability)}"`;
    if (md.change !== undefined) out += ` change="${escapeAttribute(md.change)}"`;
    if (md.at !== undefined) out += ` at="${escapeAttribute(md.at)}"`;
    if (md.completed !== undefined) out += ` completed="${escapeAttribute(md.completed)}"`;
    if (md.from !== undefined) out += ` from="${escapeAttribute(md.from)}"`;
    if (md.until !== undefined) out += ` until="${escapeAttribute(md.until)}"`;
    if (md.datetime !== undefined) out += ` datetime="${escapeAttribute(md.datetime)}"`;
    if (md.hash !== undefined) out += ` hash="${escapeAttribute(md.hash)}"`;
    if (md.length !== undefined) out += ` length="${formatNumber(md.length)}"`;
    if (md.type !== undefined) out += ` type="${escapeAttribute(md.type)}"`;
    if (md.encoding !== undefined) out += ` encoding="${escapeAttribute(md.encoding)}"`;
    if (md.path !== undefined) out += ` path="${escapeAttribute(md.path)}"`;
    if (md.extensions !== undefined && md.extensions.length > 0) out += this.attrsWithDecls(md.extensions);
    return out + '/>';
  }

  private mdGeneric(md: Metadata, inv: Readonly<Record<string, string>>): string {
    let out = this.mdOpen;
    for (const k of MD_ORDER) {
      const v = md[k];
      if (v !== undefined) out += ` ${k}="${typeof v === 'number' ? formatNumber(v) : escapeAttribute(v)}"`;
      else {
        const raw = inv[k];
        if (raw !== undefined) out += ` ${k}="${escapeAttribute(raw)}"`;
      }
    }
    out += this.leftovers(inv, MD_ORDER);
    if (md.extensions !== undefined && md.extensions.length > 0) out += this.attrsWithDecls(md.extensions);
    return out + '/>';
  }

  private ln(l: Link): string {
    let out = `${this.lnOpen} rel="${escapeAttribute(l.rel)}" href="${escapeAttribute(l.href)}"`;
    const inv = l.invalid;
    for (const k of LN_ORDER) {
      const v = l[k];
      if (v !== undefined) out += ` ${k}="${typeof v === 'number' ? formatNumber(v) : escapeAttribute(v)}"`;
      else if (inv !== undefined) {
        const raw = inv[k];
        if (raw !== undefined) out += ` ${k}="${escapeAttribute(raw)}"`;
      }
    }
    if (inv !== undefined) out += this.leftovers(inv, ['rel', 'href', ...LN_ORDER]);
    if (l.extensions !== undefined && l.extensions.length > 0) out += this.attrsWithDecls(l.extensions);
    return out + '/>';
  }

  /** `invalid` values whose name is not one of the known attributes (written after them). */
  private leftovers(inv: Readonly<Record<string, string>>, known: readonly string[]): string {
    let out = '';
    for (const [k, v] of Object.entries(inv)) {
      if (known.includes(k)) continue;
      if (!NAME.test(k) || k.includes(':')) throw invalid(`"${k}" is not an attribute name`);
      out += ` ${k}="${escapeAttribute(v)}"`;
    }
    return out;
  }

  /** Extension attributes on an `rs:md` / `rs:ln`, with the namespace declarations they need. */
  private attrsWithDecls(attrs: readonly ExtensionAttribute[]): string {
    const extra = new Map<string, string>();
    let out = this.extAttrs(attrs, this.scope, extra, this.rs.slice(0, -1));
    for (const [p, u] of extra) out = ` xmlns:${p}="${escapeAttribute(u)}"` + out;
    return out;
  }

  /**
   * Attributes from other namespaces. Prefixes not bound (to the same URI) in `scope` are added to
   * `extra` (prefix -> URI) for the caller to declare on the same element.
   */
  private extAttrs(
    attrs: readonly ExtensionAttribute[],
    scope: Scope,
    extra: Map<string, string>,
    reserved: string,
  ): string {
    let out = '';
    for (const a of attrs) {
      let p = a.prefix;
      if (a.ns === '') {
        if (p !== '') throw invalid(`attribute ${p}:${a.local} has a prefix but no namespace`);
      } else if (a.ns === XML_NS) {
        p = 'xml';
      } else {
        if (p === '' || p === 'xml' || p === 'xmlns') p = this.prefixFor(a.ns, scope, extra);
        const inScope = extra.get(p) ?? scope.get(p);
        if (inScope !== a.ns) {
          if (extra.has(p) || p === reserved) p = this.prefixFor(a.ns, scope, extra);
          else extra.set(p, a.ns);
        }
      }
      if (!NAME.test(a.local) || a.local.includes(':') || (p !== '' && !NAME.test(p)))
        throw invalid(`"${a.local}" is not a valid attribute name`);
      out += ` ${p === '' ? '' : `${p}:`}${a.local}="${escapeAttribute(a.value)}"`;
    }
    return out;
  }

  /** A prefix bound to `ns` in scope, or a fresh one added to `extra`. */
  private prefixFor(ns: string, scope: Scope, extra: Map<string, string>): string {
    for (const [p, u] of extra) if (u === ns && p !== '') return p;
    for (const [p, u] of scope) if (u === ns && p !== '' && extra.get(p) === undefined) return p;
    let i = 1;
    while (scope.has(`ns${i}`) || extra.has(`ns${i}`)) i++;
    const p = `ns${i}`;
    extra.set(p, ns);
    return p;
  }

  /** An unknown element, whole, at `indent`; declares what its names need. */
  private ext(x: ExtensionElement, indent: string, scope: Scope): string {
    const extra = new Map<string, string>();
    let p = x.prefix;
    if (p !== '' && (x.ns === '' || !NAME.test(p) || p === 'xmlns'))
      throw invalid(`element ${p}:${x.local} has an invalid prefix or no namespace`);
    if (!NAME.test(x.local) || x.local.includes(':')) throw invalid(`"${x.local}" is not a valid element name`);
    if (p === 'xml') p = x.ns === XML_NS ? p : '';
    if ((scope.get(p) ?? '') !== x.ns) extra.set(p, x.ns);
    const attrs = this.extAttrs(x.attributes, scope, extra, p);
    const name = p === '' ? x.local : `${p}:${x.local}`;
    let decls = '';
    let inner: Map<string, string> | undefined;
    for (const [dp, u] of extra) {
      decls += dp === '' ? ` xmlns="${escapeAttribute(u)}"` : ` xmlns:${dp}="${escapeAttribute(u)}"`;
      (inner ??= new Map(scope)).set(dp, u);
    }
    const childScope = inner ?? scope;
    let out = `${indent}<${name}${decls}${attrs}`;
    const ch = x.children;
    if (ch.length === 0) return out + '/>';
    out += '>';
    const mixed = ch.some((c) => typeof c === 'string');
    for (const c of ch) {
      if (typeof c === 'string') out += escapeText(c);
      else out += mixed ? this.ext(c, '', childScope) : '\n' + this.ext(c, indent + '  ', childScope);
    }
    return out + (mixed ? '' : `\n${indent}`) + `</${name}>`;
  }
}

function formatNumber(n: number): string {
  return Number.isFinite(n) ? String(n) : 'NaN';
}

function isSyncIterable<T>(x: Iterable<T> | AsyncIterable<T>): x is Iterable<T> {
  return typeof (x as Iterable<T>)[Symbol.iterator] === 'function';
}

/**
 * Writes a document as a stream of UTF-8 chunks of about `chunkSize` characters. Pull-based: nothing is
 * serialised ahead of the consumer, so a slow consumer (a file, a socket) is never overrun.
 * Memory: one chunk plus one entry. On failure the generator throws and stops.
 *
 * @throws ResourceSyncError `RS_INVALID_VALUE` (a value XML 1.0 cannot represent, with the entry number),
 *   `RS_ABORTED`.
 * @example
 * ```ts
 * await pipeline(Readable.from(writeDocument(header, entries)), createWriteStream('resourcelist.xml'));
 * ```
 */
export async function* writeDocument(
  header: DocumentHeader,
  entries: Iterable<Entry> | AsyncIterable<Entry>,
  options: WriteOptions = {},
): AsyncGenerator<Uint8Array, void, undefined> {
  const ser = new DocumentSerializer(header);
  const size = options.chunkSize ?? DEFAULT_CHUNK_SIZE;
  const signal = options.signal;
  // Entry strings are collected and joined once per chunk: one flat string, then one UTF-8 encoding.
  let parts: string[] = [ser.head()];
  let chars = 0;
  const check = (): void => {
    if (signal?.aborted === true) throw new ResourceSyncError('RS_ABORTED', 'writing was aborted');
  };
  if (isSyncIterable(entries)) {
    for (const e of entries) {
      const x = ser.entry(e);
      parts.push(x);
      chars += x.length;
      if (chars >= size) {
        check();
        yield Buffer.from(parts.join(''), 'utf8');
        parts = [];
        chars = 0;
      }
    }
  } else {
    for await (const e of entries) {
      const x = ser.entry(e);
      parts.push(x);
      chars += x.length;
      if (chars >= size) {
        check();
        yield Buffer.from(parts.join(''), 'utf8');
        parts = [];
        chars = 0;
      }
    }
  }
  check();
  parts.push(ser.tail());
  yield Buffer.from(parts.join(''), 'utf8');
}

/**
 * A whole document as one string (small documents and tests).
 * @example
 * ```ts
 * const xml = serializeDocument({ ...createHeader('capability-list'), entries: [] });
 * ```
 */
export function serializeDocument(doc: ResourceSyncDocument): string {
  const ser = new DocumentSerializer(doc);
  let out = ser.head();
  for (const e of doc.entries) out += ser.entry(e);
  return out + ser.tail();
}

/**
 * Writes a document to `path` atomically (temporary file, fsync, rename): readers see the old file or the
 * new one. Memory: one chunk plus one entry.
 *
 * @returns the number of entries and bytes written.
 * @throws ResourceSyncError `RS_IO`, `RS_INVALID_VALUE`, `RS_ABORTED` (the target is then left as it was).
 * @example
 * ```ts
 * const header = createHeader('change-list', { from: formatDatetime(since) }, [{ rel: 'up', href: capUrl }]);
 * const { entries, bytes } = await writeDocumentFile('site/changelist.xml', header, store.changesSince(since));
 * ```
 */
export async function writeDocumentFile(
  path: string,
  header: DocumentHeader,
  entries: Iterable<Entry> | AsyncIterable<Entry>,
  options: WriteOptions = {},
): Promise<{ entries: number; bytes: number }> {
  let count = 0;
  const tick = (): void => {
    count++;
  };
  const src = isSyncIterable(entries) ? countSync(entries, tick) : countAsync(entries, tick);
  const chunks = writeDocument(header, src, { chunkSize: FILE_CHUNK_CHARS, ...options });
  const bytes = await writeFileAtomic(path, readAhead(chunks), {
    ...(options.fsync === undefined ? {} : { fsync: options.fsync }),
  });
  return { entries: count, bytes };
}

function* countSync<T>(it: Iterable<T>, tick: () => void): Generator<T, void, undefined> {
  for (const x of it) {
    tick();
    yield x;
  }
}

async function* countAsync<T>(it: AsyncIterable<T>, tick: () => void): AsyncGenerator<T, void, undefined> {
  for await (const x of it) {
    tick();
    yield x;
  }
}

/**
 * Produces the next item while the consumer handles the current one (e.g. serialises chunk k+1 while chunk k
 * is being written by the thread pool). Memory: two items.
 */
export async function* readAhead<T>(source: AsyncIterable<T>): AsyncGenerator<T, void, undefined> {
  const it = source[Symbol.asyncIterator]();
  const later = (): Promise<IteratorResult<T>> =>
    new Promise<void>((resolve) => setImmediate(resolve)).then(() => it.next());
  let next: Promise<IteratorResult<T>> | undefined = it.next();
  let finished = false;
  try {
    for (;;) {
      const r: IteratorResult<T> = await next;
      if (r.done === true) {
        finished = true;
        return;
      }
      next = later();
      // Handled when awaited; this keeps a failure while nobody waits from being "unhandled".
      next.catch(() => undefined);
      yield r.value;
    }
  } catch (e) {
    finished = true;
    throw e;
  } finally {
    if (!finished) {
      await next?.catch(() => undefined);
      await it.return?.();
    }
  }
}
