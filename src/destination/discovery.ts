/**
 * Discovery of a Source's Capability List from whatever URL a user gives (§8, §6.3, Examples 9–11): a Source
 * root (`/.well-known/resourcesync` under the given path, then at the host root), a Source Description (or a
 * Source Description Index: the set is chosen among the Capability Lists of all its Source Descriptions), a
 * Capability List, a Resource List / Index or any other capability document (its `up` link is followed to
 * the Capability List), a `robots.txt` with `Sitemap:` lines, an HTML page with
 * `<link rel="resourcesync" href>`, or any resource answering with a `Link: <...>; rel="resourcesync"` header.
 *
 * Only what is needed is fetched: a document's header is read and the rest of its body dropped (only Source
 * Descriptions and Capability Lists are read whole); an HTML page is read up to the end of its `<head>`
 * (bounded); other resources are not read past their headers. Every URL is fetched at most once.
 *
 * @module
 */
import { REL_RESOURCESYNC, WELL_KNOWN_PATH } from '../core/constants.js';
import { isResourceSyncError, ResourceSyncError } from '../core/errors.js';
import type { DocumentHeader, DocumentKind, Entry } from '../core/model.js';
import { type DocumentStream, openDocument, type ReadOptions } from '../xml/index.js';
import { type HttpClient, type HttpResponse, httpStatusOf } from '../http/client.js';
import { parseLinkHeader } from '../http/link.js';

/** A Capability List: the capabilities of one set of resources. */
export interface CapabilitySet {
  readonly url: string;
  readonly name?: string;
  /** Capability -> document URLs, e.g. `resourcelist` -> [url]. */
  readonly capabilities: ReadonlyMap<string, readonly string[]>;
  readonly header: DocumentHeader;
}

/** What {@link discover} found. */
export interface DiscoveryResult {
  /**
   * URL of the Source Description, when found (or named by the Capability List's `up` link); of the Source
   * Description Index when the Source publishes one (§8): the Source's entry point, whichever of its Source
   * Descriptions lists the chosen set.
   */
  readonly sourceDescription?: string;
  /** URL of the Source Description Index, when discovery read one (§8); its Source Descriptions were read too. */
  readonly sourceDescriptionIndex?: string;
  /**
   * Other URLs the documents read name as the same Source (see {@link sourceAliasesOf}): the Source
   * Descriptions an Index lists, the Index a Source Description names by its `index` (or `up`) link. Present
   * when discovery read the Source Description or Index (possibly empty); absent when it only knows the Source
   * Description's URL (from a Capability List's `up` link) or none.
   */
  readonly sourceAliases?: readonly string[];
  /** Every Capability List the Source Description lists (all of them, for an Index), or the one found. */
  readonly sets: readonly { readonly url: string; readonly name?: string }[];
  /** The chosen Capability List: the only one, or the one `set` selected. Absent when several and none chosen. */
  readonly set?: CapabilitySet;
  /** The URL was itself a list, index or dump, and no Capability List could be reached from it. */
  readonly direct?: { readonly url: string; readonly kind: DocumentKind };
  /** What was fetched, in order, with what it turned out to be (for `--verbose` and error messages). */
  readonly tried: readonly string[];
  /** What the URL given turned out to be, when it was a document (absent: not a ResourceSync / Sitemap document). */
  readonly start?: { readonly url: string; readonly kind: DocumentKind };
  /** Choices a user should know of, e.g. a plain Sitemap passed over for a ResourceSync document. */
  readonly warnings?: readonly string[];
}

/** Options of {@link discover}. */
export interface DiscoverOptions {
  /** Capability List to choose: a name (URL directory or file name), a URL, a describedby match or a 1-based position. */
  readonly set?: string;
  readonly signal?: AbortSignal;
  /** Most URLs fetched (default 16). */
  readonly maxFetches?: number;
  /** Most bytes of an HTML page read looking for the link (default 512 KiB). */
  readonly maxHtmlBytes?: number;
}

/** Most entries read from a Source Description or Capability List. */
const MAX_SMALL_DOCUMENT_ENTRIES = 100_000;
/** Most Source Descriptions read from a Source Description Index (more are left out, with a warning). */
const MAX_INDEXED_SOURCE_DESCRIPTIONS = 64;
/** Most Capability Lists gathered from the Source Descriptions of an Index. */
const MAX_INDEXED_SETS = 1_000_000;
/** Bytes looked at to tell XML from HTML from text. */
const SNIFF_BYTES = 1024;

/**
 * GETs a document and opens it for streaming (see `openDocument`): the header is read, the entries are pulled
 * by the caller. Errors name the URL. The body's size is bounded by `maxBytes` (default the client's
 * `maxDocumentBytes`). Iterate `entries` to the end or call `entries.return()` to free the connection.
 * Memory: that of `openDocument` (one chunk plus one entry).
 */
export async function openRemoteDocument(
  url: string,
  client: HttpClient,
  options: ReadOptions = {},
): Promise<DocumentStream> {
  const res = await client.get(url, {
    ...(options.signal === undefined ? {} : { signal: options.signal }),
    maxBytes: options.maxBytes ?? client.maxDocumentBytes,
  });
  const body = res.body[Symbol.asyncIterator]();
  const source: AsyncIterable<Uint8Array> = { [Symbol.asyncIterator]: () => body };
  try {
    const doc = await openDocument(source, {
      ...options,
      url: res.url,
      maxBytes: options.maxBytes ?? client.maxDocumentBytes,
    });
    return withClosingEntries(doc, async () => {
      await body.return?.();
    });
  } catch (e) {
    await body.return?.();
    throw e;
  }
}

/**
 * The same document stream, whose `entries.return()` (or the end, or an error) always closes the network
 * body, even when no entry was pulled (a generator that never started would not run its cleanup).
 */
export function withClosingEntries(doc: DocumentStream, close: () => Promise<void>): DocumentStream {
  const inner = doc.entries;
  let closed = false;
  const finish = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    await close();
  };
  const entries: AsyncGenerator<Entry, void, undefined> = {
    async next(): Promise<IteratorResult<Entry, void>> {
      try {
        const r = await inner.next();
        if (r.done === true) await finish();
        return r;
      } catch (e) {
        await finish();
        throw e;
      }
    },
    async return(): Promise<IteratorResult<Entry, void>> {
      try {
        return await inner.return(undefined);
      } finally {
        await finish();
      }
    },
    async throw(e: unknown): Promise<IteratorResult<Entry, void>> {
      try {
        return await inner.throw(e);
      } finally {
        await finish();
      }
    },
    [Symbol.asyncIterator]() {
      return entries;
    },
  };
  return { header: doc.header, issues: doc.issues, entries };
}

const TAG_OPEN = /<(\/?)([A-Za-z][A-Za-z0-9-]*)/y;
const ATTR_NAME = /[^\s/>=]+/y;
const ATTR_BARE_VALUE = /[^\s>]*/y;

/** Matches a sticky regular expression at `at` without copying the rest of the text (linear scans). */
function matchAt(re: RegExp, text: string, at: number): RegExpExecArray | null {
  re.lastIndex = at;
  return re.exec(text);
}

/**
 * Finds `<link rel="... resourcesync ..." href="...">` targets in the `<head>` of an HTML page (Example 9),
 * honouring `<base href>`. A small tokenizer: comments, `<script>`/`<style>` contents and other tags are
 * skipped; it stops at `</head>` or `<body>`. Memory: the text given.
 */
export function findHtmlLinks(html: string, baseUrl: string, rel: string = REL_RESOURCESYNC): string[] {
  const out: string[] = [];
  let lowerHtml: string | undefined;
  let base = baseUrl;
  let i = 0;
  const n = html.length;
  const want = rel.toLowerCase();
  while (i < n) {
    const lt = html.indexOf('<', i);
    if (lt < 0) break;
    if (html.startsWith('<!--', lt)) {
      const end = html.indexOf('-->', lt + 4);
      i = end < 0 ? n : end + 3;
      continue;
    }
    if (html[lt + 1] === '!' || html[lt + 1] === '?') {
      const end = html.indexOf('>', lt);
      i = end < 0 ? n : end + 1;
      continue;
    }
    const m = matchAt(TAG_OPEN, html, lt);
    if (m === null) {
      i = lt + 1;
      continue;
    }
    const closing = m[1] === '/';
    const name = (m[2] as string).toLowerCase();
    const [attrs, after] = readAttributes(html, lt + m[0].length);
    i = after;
    if (closing) {
      if (name === 'head') break;
      continue;
    }
    if (name === 'body') break;
    if (name === 'script' || name === 'style' || name === 'title' || name === 'textarea') {
      lowerHtml ??= html.toLowerCase();
      const end = lowerHtml.indexOf(`</${name}`, i);
      i = end < 0 ? n : end;
      continue;
    }
    if (name === 'base' && attrs.href !== undefined) {
      try {
        base = new URL(attrs.href, baseUrl).href;
      } catch {
        // A bad base is ignored.
      }
    }
    if (name === 'link' && attrs.href !== undefined && attrs.rel !== undefined) {
      const rels = attrs.rel.toLowerCase().split(/\s+/);
      if (rels.includes(want)) {
        try {
          out.push(new URL(attrs.href.trim(), base).href);
        } catch {
          // A bad href is skipped.
        }
      }
    }
  }
  return out;
}

/** Reads the attributes of a tag from `i` (just after its name) to its `>`; returns them and the index after `>`. */
function readAttributes(html: string, i: number): [Record<string, string>, number] {
  const attrs: Record<string, string> = {};
  const n = html.length;
  for (;;) {
    while (i < n && /[\s/]/.test(html[i] as string)) i++;
    if (i >= n) return [attrs, n];
    if (html[i] === '>') return [attrs, i + 1];
    const m = matchAt(ATTR_NAME, html, i);
    if (m === null) {
      i++;
      continue;
    }
    const name = m[0].toLowerCase();
    i += m[0].length;
    while (i < n && /\s/.test(html[i] as string)) i++;
    let value = '';
    if (html[i] === '=') {
      i++;
      while (i < n && /\s/.test(html[i] as string)) i++;
      const q = html[i];
      if (q === '"' || q === "'") {
        const end = html.indexOf(q, i + 1);
        value = html.slice(i + 1, end < 0 ? n : end);
        i = end < 0 ? n : end + 1;
      } else {
        const t = matchAt(ATTR_BARE_VALUE, html, i);
        value = t?.[0] ?? '';
        i += value.length;
      }
    }
    if (!(name in attrs)) attrs[name] = decodeHtmlEntities(value);
  }
}

const NAMED_ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: '\u00a0' };

function decodeHtmlEntities(s: string): string {
  if (!s.includes('&')) return s;
  return s.replace(/&(#x[0-9a-fA-F]+|#[0-9]+|[A-Za-z]+);/g, (all, body: string) => {
    if (body.startsWith('#x') || body.startsWith('#X')) return safeCodePoint(Number.parseInt(body.slice(2), 16), all);
    if (body.startsWith('#')) return safeCodePoint(Number.parseInt(body.slice(1), 10), all);
    const name = body.toLowerCase();
    return Object.hasOwn(NAMED_ENTITIES, name) ? (NAMED_ENTITIES[name] as string) : all;
  });
}

function safeCodePoint(cp: number, fallback: string): string {
  return Number.isFinite(cp) && cp > 0 && cp <= 0x10ffff ? String.fromCodePoint(cp) : fallback;
}

/** `Sitemap:` URLs of a robots.txt (Example 11), resolved against its URL. */
export function findRobotsSitemaps(text: string, baseUrl: string): string[] {
  const out: string[] = [];
  for (const line of text.split(/\r?\n|\r/)) {
    const m = /^\s*sitemap\s*:\s*(\S+)/i.exec(line);
    if (m === null) continue;
    try {
      out.push(new URL(m[1] as string, baseUrl).href);
    } catch {
      // A bad URL is skipped.
    }
  }
  return out;
}

/** A display name for a Capability List: its directory (`dataset1` of `/dataset1/capabilitylist.xml`) or file stem. */
export function capabilityListName(url: string): string | undefined {
  try {
    const segments = new URL(url).pathname.split('/').filter((s) => s !== '');
    if (segments.length >= 2) return decodeURIComponent(segments[segments.length - 2] as string);
    const last = segments[0];
    return last === undefined ? undefined : decodeURIComponent(last.replace(/\.[^.]*$/, ''));
  } catch {
    return undefined;
  }
}

/** What one fetched URL turned out to be. */
type Probe =
  | { readonly type: 'document'; readonly url: string; readonly doc: DocumentStream; readonly links: readonly string[] }
  | {
      readonly type: 'links';
      readonly url: string;
      readonly links: readonly string[];
      readonly sitemaps: readonly string[];
    }
  | { readonly type: 'failed'; readonly url: string; readonly error: ResourceSyncError };

/** Peeks at the first bytes of a body without losing them. */
async function peek(
  body: AsyncIterable<Uint8Array>,
  want: number,
): Promise<{ head: Buffer; rest: AsyncIterable<Uint8Array> }> {
  const it = body[Symbol.asyncIterator]();
  const chunks: Uint8Array[] = [];
  let size = 0;
  let done = false;
  while (size < want) {
    const r = await it.next();
    if (r.done === true) {
      done = true;
      break;
    }
    chunks.push(r.value);
    size += r.value.byteLength;
  }
  const head = Buffer.concat(chunks);
  const rest: AsyncIterable<Uint8Array> = {
    [Symbol.asyncIterator](): AsyncIterator<Uint8Array> {
      let first = head.byteLength > 0;
      return {
        async next(): Promise<IteratorResult<Uint8Array>> {
          if (first) {
            first = false;
            return { done: false, value: head };
          }
          if (done) return { done: true, value: undefined };
          return it.next();
        },
        async return(): Promise<IteratorResult<Uint8Array>> {
          done = true;
          await it.return?.();
          return { done: true, value: undefined };
        },
      };
    },
  };
  return { head, rest };
}

type Sniffed = 'xml' | 'html' | 'text' | 'other';

function sniff(head: Buffer, contentType: string): Sniffed {
  if (head[0] === 0x1f && head[1] === 0x8b) return 'xml';
  const text = head
    .toString('utf8')
    .replace(/^\uFEFF/, '')
    .trimStart()
    .toLowerCase();
  if (contentType.includes('html') || text.startsWith('<!doctype html') || text.startsWith('<html')) return 'html';
  if (text.startsWith('<')) {
    if (text.includes('<html') && !text.includes('urlset') && !text.includes('sitemapindex')) return 'html';
    return 'xml';
  }
  if (head[0] === 0xfe || head[0] === 0xff) return 'xml'; // UTF-16 with a byte order mark
  if (contentType.includes('xml')) return 'xml';
  if (contentType === '' || contentType.startsWith('text/')) return 'text';
  return 'other';
}

/**
 * Discovers a Source's Capability List (and Source Description) from `url` (see the module comment).
 * Memory: the entries of one Source Description and one Capability List (at most 100,000 each; for a Source
 * Description Index, those of its Source Descriptions, at most 64, and at most 1,000,000 sets), one HTML
 * `<head>` or robots.txt (at most `maxHtmlBytes`); other documents are not read past their header.
 * At most `maxFetches` URLs are fetched, each once.
 *
 * @throws ResourceSyncError `RS_DISCOVERY` saying what was tried when nothing leads to ResourceSync documents,
 *   or when `set` matches no Capability List (or several); `RS_ABORTED`.
 * @example
 * ```ts
 * const found = await discover('http://example.org/', client, { set: 'dataset1' });
 * const lists = found.set?.capabilities.get('resourcelist');
 * ```
 */
export async function discover(
  url: string,
  client: HttpClient,
  options: DiscoverOptions = {},
): Promise<DiscoveryResult> {
  const tried: string[] = [];
  const warnings: string[] = [];
  /** What the URL given turned out to be (set by the first probe). */
  let startKind: { url: string; kind: DocumentKind } | undefined;
  const visited = new Set<string>();
  /** Origins that failed at the network level: not tried again. */
  const deadOrigins = new Set<string>();
  /** Raised by the Source Descriptions of an Index, which are read on top of the URLs discovery tries. */
  let maxFetches = options.maxFetches ?? 16;
  const maxHtmlBytes = options.maxHtmlBytes ?? 512 * 1024;
  const signal = options.signal;

  const fetchProbe = async (target: string): Promise<Probe | undefined> => {
    const key = target.replace(/#.*$/, '');
    if (visited.has(key)) return undefined;
    if (visited.size >= maxFetches) {
      tried.push(`${target}: not fetched (more than ${maxFetches} URLs)`);
      return undefined;
    }
    visited.add(key);
    if (signal?.aborted === true)
      throw new ResourceSyncError('RS_ABORTED', 'discovery aborted', { url: target, cause: signal.reason });
    const origin = originOf(target);
    if (origin !== undefined && deadOrigins.has(origin)) {
      tried.push(`${target}: not fetched (${origin} unreachable)`);
      return undefined;
    }
    let res: HttpResponse;
    try {
      res = await client.get(target, {
        ...(signal === undefined ? {} : { signal }),
        maxBytes: client.maxDocumentBytes,
      });
    } catch (e) {
      if (isResourceSyncError(e, 'RS_ABORTED')) throw e;
      const err = e instanceof ResourceSyncError ? e : new ResourceSyncError('RS_HTTP', String(e), { url: target });
      const status = httpStatusOf(err);
      if (status === undefined && origin !== undefined && (err.code === 'RS_HTTP' || err.code === 'RS_TIMEOUT'))
        deadOrigins.add(origin);
      tried.push(`${target}: ${status === undefined ? err.message : `HTTP ${status}`}`);
      return { type: 'failed', url: target, error: err };
    }
    visited.add(res.url);
    const headerLinks = parseLinkHeader(res.headers.link, res.url)
      .filter((l) => l.rel.includes(REL_RESOURCESYNC))
      .map((l) => l.href);
    const contentType = String(res.headers['content-type'] ?? '').toLowerCase();
    try {
      const { head, rest } = await peek(res.body, SNIFF_BYTES);
      const kind = sniff(head, contentType);
      if (kind === 'xml') {
        try {
          const doc = withClosingEntries(
            await openDocument(rest, {
              url: res.url,
              maxBytes: client.maxDocumentBytes,
              ...(signal === undefined ? {} : { signal }),
            }),
            async () => {
              await rest[Symbol.asyncIterator]().return?.();
            },
          );
          tried.push(`${res.url}: ${doc.header.kind}`);
          return { type: 'document', url: res.url, doc, links: headerLinks };
        } catch (e) {
          if (isResourceSyncError(e, 'RS_ABORTED')) throw e;
          await rest[Symbol.asyncIterator]().return?.();
          tried.push(`${res.url}: not a ResourceSync document (${(e as Error).message})`);
          if (headerLinks.length > 0) return { type: 'links', url: res.url, links: headerLinks, sitemaps: [] };
          return {
            type: 'failed',
            url: res.url,
            error: e instanceof ResourceSyncError ? e : new ResourceSyncError('RS_DISCOVERY', String(e)),
          };
        }
      }
      if (kind === 'html') {
        const text = await readText(rest, maxHtmlBytes, /<\/head\s*>|<body[\s>]/i);
        const links = [...headerLinks, ...findHtmlLinks(text, res.url)];
        tried.push(`${res.url}: HTML page with ${links.length} resourcesync link(s)`);
        return { type: 'links', url: res.url, links, sitemaps: [] };
      }
      if (kind === 'text') {
        const text = await readText(rest, maxHtmlBytes);
        const sitemaps = findRobotsSitemaps(text, res.url);
        tried.push(
          `${res.url}: text with ${sitemaps.length} Sitemap line(s)${headerLinks.length > 0 ? `, ${headerLinks.length} Link header(s)` : ''}`,
        );
        return { type: 'links', url: res.url, links: headerLinks, sitemaps };
      }
      await rest[Symbol.asyncIterator]().return?.();
      tried.push(
        `${res.url}: ${contentType || 'unknown'} resource with ${headerLinks.length} resourcesync Link header(s)`,
      );
      return { type: 'links', url: res.url, links: headerLinks, sitemaps: [] };
    } catch (e) {
      await res.discard();
      if (isResourceSyncError(e, 'RS_ABORTED')) throw e;
      const err = e instanceof ResourceSyncError ? e : new ResourceSyncError('RS_HTTP', String(e), { url: res.url });
      tried.push(`${res.url}: ${err.message}`);
      return { type: 'failed', url: res.url, error: err };
    }
  };

  /**
   * Resolves one URL to a result, following links, `up` links, Sitemap lines. `depth` bounds the chain.
   * Returns undefined when this URL leads nowhere.
   */
  const resolveUrl = async (target: string, depth: number): Promise<DiscoveryResult | undefined> => {
    if (depth > 8) return undefined;
    const probe = await fetchProbe(target);
    if (probe === undefined || probe.type === 'failed') return undefined;
    if (probe.type === 'links') {
      // A robots.txt or page may name plain Sitemaps (no rs:md) before the ResourceSync documents: those are
      // preferred; a plain Sitemap is used only when nothing else leads to ResourceSync.
      let plain: DiscoveryResult | undefined;
      for (const next of [...probe.links, ...probe.sitemaps]) {
        const r = await resolveUrl(next, depth + 1);
        if (r === undefined) continue;
        if (!isPlainSitemap(r)) {
          if (plain?.direct !== undefined)
            warnings.push(`${probe.url}: passed over the plain Sitemap ${plain.direct.url} (no rs:md) for ${next}`);
          return r;
        }
        plain ??= r;
      }
      if (plain?.direct !== undefined)
        warnings.push(
          `${probe.url}: no ResourceSync document found; using the plain Sitemap ${plain.direct.url} as a Resource List`,
        );
      return plain;
    }
    if (depth === 0 && startKind === undefined) startKind = { url: probe.url, kind: probe.doc.header.kind };
    return fromDocument(probe.url, probe.doc, depth);
  };

  const fromDocument = async (
    docUrl: string,
    doc: DocumentStream,
    depth: number,
  ): Promise<DiscoveryResult | undefined> => {
    const { header } = doc;
    switch (header.kind) {
      case 'source-description': {
        const entries = await readEntries(doc, docUrl);
        const sets = entries
          .filter((e) => e.loc !== '' && (e.md?.capability === undefined || e.md.capability === 'capabilitylist'))
          .map((e) => ({ url: absolute(e.loc, docUrl), name: capabilityListName(absolute(e.loc, docUrl)), entry: e }));
        const listed = sets.map((s) => (s.name === undefined ? { url: s.url } : { url: s.url, name: s.name }));
        if (sets.length === 0)
          throw new ResourceSyncError('RS_DISCOVERY', 'the Source Description lists no Capability List', {
            url: docUrl,
          });
        const chosen = chooseSet(sets, options.set, docUrl, tried, url);
        const sourceAliases = descriptionAliases(header, docUrl);
        if (chosen === undefined) return { sourceDescription: docUrl, sourceAliases, sets: listed, tried };
        const set = await loadCapabilityList(chosen.url, chosen.name);
        if (set === undefined)
          throw new ResourceSyncError(
            'RS_DISCOVERY',
            `the Capability List ${chosen.url} listed by the Source Description could not be read; tried: ${tried.join('; ')}`,
            { url: docUrl },
          );
        return { sourceDescription: docUrl, sourceAliases, sets: listed, set, tried };
      }
      case 'source-description-index':
        return fromSourceDescriptionIndex(docUrl, doc);
      case 'capability-list': {
        const set = await capabilitySetOf(docUrl, doc, capabilityListName(docUrl));
        const up = upLink(header, docUrl);
        return {
          ...(up === undefined ? {} : { sourceDescription: up }),
          sets: [set.name === undefined ? { url: set.url } : { url: set.url, name: set.name }],
          set,
          tried,
        };
      }
      default: {
        await doc.entries.return();
        if (
          header.kind === 'unknown' ||
          header.kind === 'change-notification' ||
          header.kind === 'framework-notification'
        ) {
          tried.push(`${docUrl}: a ${header.kind} document cannot be synchronized`);
          return undefined;
        }
        // A list, index, dump or manifest: climb its `up` link(s) to the Capability List.
        let up = upLink(header, docUrl) ?? relLink(header, docUrl, 'index');
        for (let hops = 0; up !== undefined && hops < 4; hops++) {
          const probe = await fetchProbe(up);
          if (probe === undefined || probe.type !== 'document') break;
          if (probe.doc.header.kind === 'source-description') return fromDocument(probe.url, probe.doc, depth + 1);
          if (probe.doc.header.kind === 'capability-list') {
            const set = await capabilitySetOf(probe.url, probe.doc, capabilityListName(probe.url));
            const sd = upLink(probe.doc.header, probe.url);
            return {
              ...(sd === undefined ? {} : { sourceDescription: sd }),
              sets: [set.name === undefined ? { url: set.url } : { url: set.url, name: set.name }],
              set,
              tried,
            };
          }
          await probe.doc.entries.return();
          up = upLink(probe.doc.header, probe.url) ?? relLink(probe.doc.header, probe.url, 'index');
        }
        return { sets: [], direct: { url: docUrl, kind: header.kind }, tried };
      }
    }
  };

  /**
   * A Source Description Index (§8): every Source Description it lists is read (at most
   * {@link MAX_INDEXED_SOURCE_DESCRIPTIONS}; one that cannot be read is passed over with a warning) and the
   * set is chosen among the Capability Lists of them all, as from one Source Description.
   */
  const fromSourceDescriptionIndex = async (indexUrl: string, doc: DocumentStream): Promise<DiscoveryResult> => {
    const listed = await indexedDescriptions(doc, indexUrl);
    if (listed.length === 0)
      throw new ResourceSyncError('RS_DISCOVERY', 'the Source Description Index lists no Source Description', {
        url: indexUrl,
      });
    if (listed.length > MAX_INDEXED_SOURCE_DESCRIPTIONS)
      warnings.push(
        `${indexUrl}: lists ${listed.length} Source Descriptions; only the first ${MAX_INDEXED_SOURCE_DESCRIPTIONS} were read`,
      );
    const descriptions = listed.slice(0, MAX_INDEXED_SOURCE_DESCRIPTIONS);
    maxFetches += descriptions.length;
    const sets: SetCandidate[] = [];
    for (const sdUrl of descriptions) {
      const probe = await fetchProbe(sdUrl);
      if (probe === undefined || probe.type !== 'document') {
        warnings.push(`${indexUrl}: the Source Description ${sdUrl} could not be read`);
        continue;
      }
      if (probe.doc.header.kind !== 'source-description') {
        await probe.doc.entries.return();
        warnings.push(`${indexUrl}: ${sdUrl} is a ${probe.doc.header.kind}, not a Source Description`);
        continue;
      }
      for (const e of await readEntries(probe.doc, probe.url)) {
        if (e.loc === '' || (e.md?.capability !== undefined && e.md.capability !== 'capabilitylist')) continue;
        if (sets.length >= MAX_INDEXED_SETS)
          throw new ResourceSyncError('RS_LIMIT', `more than ${MAX_INDEXED_SETS} Capability Lists`, { url: indexUrl });
        const capUrl = absolute(e.loc, probe.url);
        sets.push({ url: capUrl, name: capabilityListName(capUrl), entry: e });
      }
    }
    if (sets.length === 0)
      throw new ResourceSyncError(
        'RS_DISCOVERY',
        `no Capability List in the Source Descriptions of the Source Description Index; tried: ${tried.join('; ')}`,
        { url: indexUrl },
      );
    const found = {
      sourceDescription: indexUrl,
      sourceDescriptionIndex: indexUrl,
      sourceAliases: sameOrigin(listed, indexUrl),
    };
    const names = sets.map((c) => (c.name === undefined ? { url: c.url } : { url: c.url, name: c.name }));
    const chosen = chooseSet(sets, options.set, indexUrl, tried, url);
    if (chosen === undefined) return { ...found, sets: names, tried };
    const set = await loadCapabilityList(chosen.url, chosen.name);
    if (set === undefined)
      throw new ResourceSyncError(
        'RS_DISCOVERY',
        `the Capability List ${chosen.url} listed under the Source Description Index could not be read; tried: ${tried.join('; ')}`,
        { url: indexUrl },
      );
    return { ...found, sets: names, set, tried };
  };

  const loadCapabilityList = async (capUrl: string, name: string | undefined): Promise<CapabilitySet | undefined> => {
    const probe = await fetchProbe(capUrl);
    if (probe === undefined || probe.type !== 'document') return undefined;
    if (probe.doc.header.kind !== 'capability-list') {
      await probe.doc.entries.return();
      tried.push(`${probe.url}: expected a Capability List, found ${probe.doc.header.kind}`);
      return undefined;
    }
    return capabilitySetOf(probe.url, probe.doc, name);
  };

  const capabilitySetOf = async (
    capUrl: string,
    doc: DocumentStream,
    name: string | undefined,
  ): Promise<CapabilitySet> => {
    const entries = await readEntries(doc, capUrl);
    const capabilities = new Map<string, string[]>();
    for (const e of entries) {
      const cap = e.md?.capability;
      if (cap === undefined || e.loc === '') continue;
      const list = capabilities.get(cap) ?? [];
      list.push(absolute(e.loc, capUrl));
      capabilities.set(cap, list);
    }
    return name === undefined
      ? { url: capUrl, capabilities, header: doc.header }
      : { url: capUrl, name, capabilities, header: doc.header };
  };

  /** The result with what the URL was and the warnings. */
  const finish = (r: DiscoveryResult): DiscoveryResult => ({
    ...r,
    tried,
    ...(startKind === undefined ? {} : { start: startKind }),
    ...(warnings.length === 0 ? {} : { warnings }),
  });
  // 1. The URL itself (a plain Sitemap given as such is used; one reached from a page only when nothing better).
  const start = await resolveUrl(url, 0);
  if (start !== undefined && !(isPlainSitemap(start) && startKind === undefined)) return finish(start);
  // 2. Well-known URIs under the path, then at the host root; 3. robots.txt at the host root.
  let u: URL;
  try {
    u = new URL(url);
  } catch (e) {
    throw new ResourceSyncError('RS_DISCOVERY', `not a URL: ${JSON.stringify(url)}`, { cause: e });
  }
  const dirPath = u.pathname.endsWith('/') ? u.pathname : u.pathname.replace(/[^/]*$/, '');
  const fallbacks: string[] = [];
  if (dirPath !== '/') fallbacks.push(new URL(`${dirPath.replace(/\/$/, '')}${WELL_KNOWN_PATH}`, u.origin).href);
  fallbacks.push(new URL(WELL_KNOWN_PATH, u.origin).href, new URL('/robots.txt', u.origin).href);
  let plain = start;
  for (const f of fallbacks) {
    const r = await resolveUrl(f, 1);
    if (r === undefined) continue;
    if (!isPlainSitemap(r)) return finish(r);
    plain ??= r;
  }
  if (plain !== undefined) return finish(plain);
  throw new ResourceSyncError('RS_DISCOVERY', `no ResourceSync document found; tried: ${tried.join('; ')}`, { url });
}

/** A result that is a Sitemap without ResourceSync metadata (used only when nothing better is found). */
function isPlainSitemap(r: DiscoveryResult): boolean {
  return r.set === undefined && (r.direct?.kind === 'sitemap' || r.direct?.kind === 'sitemap-index');
}

async function readEntries(doc: DocumentStream, url: string): Promise<Entry[]> {
  const out: Entry[] = [];
  for await (const e of doc.entries) {
    out.push(e);
    if (out.length > MAX_SMALL_DOCUMENT_ENTRIES) {
      await doc.entries.return();
      throw new ResourceSyncError('RS_LIMIT', `more than ${MAX_SMALL_DOCUMENT_ENTRIES} entries`, { url });
    }
  }
  return out;
}

async function readText(rest: AsyncIterable<Uint8Array>, max: number, stop?: RegExp): Promise<string> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  const it = rest[Symbol.asyncIterator]();
  try {
    for (;;) {
      const r = await it.next();
      if (r.done === true) break;
      chunks.push(r.value);
      size += r.value.byteLength;
      if (size >= max) break;
      if (stop?.test(Buffer.from(r.value).toString('latin1')) === true) break;
    }
  } finally {
    await it.return?.();
  }
  return Buffer.concat(chunks).subarray(0, max).toString('utf8');
}

function originOf(url: string): string | undefined {
  try {
    return new URL(url).origin;
  } catch {
    return undefined;
  }
}

function absolute(href: string, base: string): string {
  try {
    return new URL(href, base).href;
  } catch {
    return href;
  }
}

function relLink(header: DocumentHeader, base: string, rel: string): string | undefined {
  const link = header.links.find((l) => l.rel.split(/\s+/).includes(rel) && l.href !== '');
  return link === undefined ? undefined : absolute(link.href, base);
}

function upLink(header: DocumentHeader, base: string): string | undefined {
  return relLink(header, base, 'up');
}

/** The URLs of `urls` on the origin of `of` (a document vouches only for its own origin's Source). */
function sameOrigin(urls: readonly string[], of: string): string[] {
  const origin = originOf(of);
  return origin === undefined ? [] : urls.filter((u) => u !== of && originOf(u) === origin);
}

/** The Source Description Index a Source Description names (`index`, else `up` link), on its own origin. */
function descriptionAliases(header: DocumentHeader, url: string): string[] {
  const index = relLink(header, url, 'index') ?? upLink(header, url);
  return index === undefined ? [] : sameOrigin([index], url);
}

/**
 * Most URLs {@link sourceAliasesOf} returns: the Source Descriptions of an Index past this many are left out
 * (its Source Descriptions still name it by their `index` link).
 */
export const MAX_SOURCE_ALIASES = 1000;

/**
 * What one Source Description or Source Description Index says of its Source, with one GET of `url`: for a
 * Source Description, the Index its `index` (else `up`) link names; for an Index, the Source Descriptions it
 * lists (at most {@link MAX_SOURCE_ALIASES}). Only URLs on `url`'s origin count (a document vouches for its
 * own Source, not another site's). Used by the Destination to tell whether a Source Description named by a
 * Capability List's `up` link belongs to the Source a copy was made of.
 * Memory: one document's header, or the entries of one Index (at most 100,000).
 * @throws ResourceSyncError `RS_HTTP`, `RS_TIMEOUT`, `RS_XML` ... naming the URL; `RS_ABORTED`.
 */
export async function sourceAliasesOf(
  url: string,
  client: HttpClient,
  options: { readonly signal?: AbortSignal } = {},
): Promise<string[]> {
  const doc = await openRemoteDocument(url, client, options.signal === undefined ? {} : { signal: options.signal });
  if (doc.header.kind !== 'source-description-index') {
    await doc.entries.return();
    return doc.header.kind === 'source-description' ? descriptionAliases(doc.header, url) : [];
  }
  return sameOrigin(await indexedDescriptions(doc, url), url).slice(0, MAX_SOURCE_ALIASES);
}

/** The Source Descriptions a Source Description Index lists (absolute URLs). */
async function indexedDescriptions(doc: DocumentStream, url: string): Promise<string[]> {
  return (await readEntries(doc, url))
    .filter((e) => e.loc !== '' && (e.md?.capability === undefined || e.md.capability === 'description'))
    .map((e) => absolute(e.loc, url));
}

interface SetCandidate {
  readonly url: string;
  readonly name: string | undefined;
  readonly entry: Entry;
}

function chooseSet(
  sets: readonly SetCandidate[],
  wanted: string | undefined,
  docUrl: string,
  tried: string[],
  startUrl: string,
): SetCandidate | undefined {
  if (wanted === undefined) {
    if (sets.length <= 1) return sets[0];
    // The user's URL points into one set's directory (e.g. http://example.com/dataset1/): that set.
    let prefix: string | undefined;
    try {
      const u = new URL(startUrl);
      const dir = u.pathname.endsWith('/') ? u.pathname : u.pathname.replace(/[^/]*$/, '');
      if (dir !== '/' && !dir.endsWith('/.well-known/')) prefix = u.origin + dir;
    } catch {
      prefix = undefined;
    }
    const inside = prefix === undefined ? [] : sets.filter((s) => s.url.startsWith(prefix as string));
    if (inside.length === 1) {
      tried.push(`${docUrl}: chose ${inside[0]?.url} under ${prefix}`);
      return inside[0];
    }
    return undefined;
  }
  const w = wanted.trim();
  const lower = w.toLowerCase();
  const tiers: ((s: SetCandidate, i: number) => boolean)[] = [
    (s) => s.url === w || s.name?.toLowerCase() === lower,
    (s) => {
      const path = new URL(s.url).pathname.toLowerCase();
      return path.includes(`/${lower}/`) || path.replace(/\.[^./]*$/, '').endsWith(`/${lower}`);
    },
    (s) => s.entry.links.some((l) => l.rel === 'describedby' && l.href.toLowerCase().includes(lower)),
    (_s, i) => /^\d+$/.test(w) && Number(w) === i + 1,
  ];
  for (const tier of tiers) {
    const matches = sets.filter((s, i) => tier(s, i));
    if (matches.length === 1) return matches[0];
    if (matches.length > 1)
      throw new ResourceSyncError(
        'RS_DISCOVERY',
        `--set ${w} matches several Capability Lists: ${matches.map((m) => m.url).join(', ')}`,
        { url: docUrl },
      );
  }
  tried.push(`${docUrl}: no Capability List matches --set ${w}`);
  throw new ResourceSyncError(
    'RS_DISCOVERY',
    `no Capability List matches --set ${w}; the Source offers: ${sets.map((s) => `${s.name ?? '?'} (${s.url})`).join(', ')}`,
    { url: docUrl },
  );
}
