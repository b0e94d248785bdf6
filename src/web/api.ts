/**
 * The explorer's JSON API: what the page asks about a Source, answered by fetching through our own client
 * (discovery, the streaming reader, the validator, the hashers). Every answer is bounded: a page of entries,
 * a bounded number of issues, a search that stops after a number of matches or entries scanned and says
 * where to go on, a change histogram with a bounded number of buckets. Nothing sends a whole list.
 *
 * Each function takes the query parameters and returns a JSON-serialisable value (or throws a
 * `ResourceSyncError`, which the route turns into a JSON error with its code).
 *
 * Memory: one document stream at a time per request (one chunk plus one entry), plus what is returned
 * (a page of entries, at most {@link MAX_ISSUES_RETURNED} issues, at most {@link MAX_BUCKETS} buckets).
 *
 * @module
 */
import { parseDatetime } from '../core/datetime.js';
import { isResourceSyncError, ResourceSyncError } from '../core/errors.js';
import { knownHashes, hashesMatch } from '../core/hash.js';
import type { HashAlgorithm } from '../core/constants.js';
import type { DocumentHeader, DocumentKind, Entry } from '../core/model.js';
import { createValidator, issueFromError, type ValidationIssue } from '../core/validate.js';
import { type ChildLink, checkLinkedDocument, childLinks, type LinkContext } from '../core/validate-links.js';
import { discover, withClosingEntries } from '../destination/discovery.js';
import type { HttpClient } from '../http/client.js';
import { createMultiHasher } from '../io/hashing.js';
import { type DocumentStream, openDocument } from '../xml/index.js';

/** Largest page of entries (`limit`). */
export const MAX_PAGE = 1000;
/** Issues returned per document (the counts include the rest). */
export const MAX_ISSUES_RETURNED = 500;
/** Buckets of a change histogram. */
export const MAX_BUCKETS = 2000;
/** Entries a search scans before it returns a cursor to go on from. */
export const SEARCH_SCAN_LIMIT = 250_000;
/** Index members a search or a change histogram reads. */
export const MAX_PARTS = 2000;

/** What the API needs. */
export interface ExplorerContext {
  readonly client: HttpClient;
  /** The URL explored when the page gives none. */
  readonly start: string;
  /** Decides whether a URL may be fetched (throws RS_CONFIG naming it otherwise). */
  readonly allowUrl: (url: string) => boolean;
  readonly signal?: AbortSignal;
}

/** A document header as JSON. */
export interface HeaderJson {
  readonly kind: DocumentKind;
  readonly root: string;
  readonly md: DocumentHeader['md'];
  readonly links: DocumentHeader['links'];
}

/** An entry as JSON, with the ResourceSync documents it points to (for the tree). */
export interface EntryJson extends Entry {
  readonly children?: readonly ChildLink[];
}

function headerJson(h: DocumentHeader): HeaderJson {
  return { kind: h.kind, root: h.root, md: h.md, links: h.links };
}

function param(q: URLSearchParams, name: string): string | undefined {
  const v = q.get(name);
  return v === null || v === '' ? undefined : v;
}

function intParam(q: URLSearchParams, name: string, def: number, min: number, max: number): number {
  const v = param(q, name);
  if (v === undefined) return def;
  if (!/^\d+$/.test(v))
    throw new ResourceSyncError('RS_CONFIG', `${name} must be a whole number, not ${JSON.stringify(v)}`);
  return Math.min(max, Math.max(min, Number(v)));
}

/** The `url` parameter, checked: absolute http(s) and allowed. */
function urlParam(ctx: ExplorerContext, q: URLSearchParams, name = 'url'): string {
  const v = param(q, name);
  if (v === undefined) throw new ResourceSyncError('RS_CONFIG', `missing parameter ${name}`);
  return checkUrl(ctx, v);
}

function checkUrl(ctx: ExplorerContext, v: string): string {
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    throw new ResourceSyncError('RS_CONFIG', `not a URL: ${JSON.stringify(v)}`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:')
    throw new ResourceSyncError('RS_CONFIG', `only http and https URLs can be explored: ${JSON.stringify(v)}`);
  if (!ctx.allowUrl(u.href)) throw new ResourceSyncError('RS_CONFIG', `this explorer does not fetch ${u.href}`);
  return u.href;
}

/** A document opened through the client, counting the (decoded) bytes read. */
interface CountedDocument extends DocumentStream {
  readonly url: string;
  bytes(): number;
  readonly contentLength: number | undefined;
}

async function openCounted(ctx: ExplorerContext, url: string): Promise<CountedDocument> {
  const res = await ctx.client.get(url, {
    ...(ctx.signal === undefined ? {} : { signal: ctx.signal }),
    maxBytes: 'document',
  });
  let bytes = 0;
  const inner = res.body[Symbol.asyncIterator]();
  const counted: AsyncIterable<Uint8Array> = {
    [Symbol.asyncIterator]: () => ({
      async next() {
        const r = await inner.next();
        if (r.done !== true) bytes += r.value.byteLength;
        return r;
      },
      async return() {
        await inner.return?.();
        return { done: true, value: undefined };
      },
    }),
  };
  try {
    const doc = withClosingEntries(
      await openDocument(counted, {
        url: res.url,
        maxBytes: ctx.client.maxDocumentBytes,
        ...(ctx.signal === undefined ? {} : { signal: ctx.signal }),
      }),
      async () => {
        await inner.return?.();
      },
    );
    const length = Number(res.headers['content-length']);
    return {
      ...doc,
      url: res.url,
      bytes: () => bytes,
      contentLength: res.headers['content-encoding'] === undefined && Number.isFinite(length) ? length : undefined,
    };
  } catch (e) {
    await inner.return?.();
    throw e;
  }
}

/** `api/discover?url=`: discovery from `url` (default the start URL): the path taken and the sets found. */
export async function apiDiscover(ctx: ExplorerContext, q: URLSearchParams): Promise<unknown> {
  const url = param(q, 'url') === undefined ? checkUrl(ctx, ctx.start) : urlParam(ctx, q);
  const set = param(q, 'set');
  try {
    const found = await discover(url, ctx.client, {
      ...(set === undefined ? {} : { set }),
      ...(ctx.signal === undefined ? {} : { signal: ctx.signal }),
    });
    const sets = found.sets.map((s) => ({ url: s.url, ...(s.name === undefined ? {} : { name: s.name }) }));
    return {
      start: url,
      sourceDescription: found.sourceDescription,
      sourceDescriptionIndex: found.sourceDescriptionIndex,
      sets,
      set:
        found.set === undefined
          ? undefined
          : {
              url: found.set.url,
              name: found.set.name,
              header: headerJson(found.set.header),
              capabilities: Object.fromEntries(found.set.capabilities),
            },
      direct: found.direct,
      path: found.tried,
    };
  } catch (e) {
    if (isResourceSyncError(e, 'RS_DISCOVERY')) return { start: url, sets: [], path: [], error: errorJson(e) };
    throw e;
  }
}

/**
 * `api/document?url=&offset=&limit=&context=`: the header and one page of entries (default 100 from 0), each
 * with the ResourceSync documents it points to; `more` tells whether entries follow. Reads the document up to
 * the end of the page only.
 */
export async function apiDocument(ctx: ExplorerContext, q: URLSearchParams): Promise<unknown> {
  const url = urlParam(ctx, q);
  const offset = intParam(q, 'offset', 0, 0, Number.MAX_SAFE_INTEGER);
  const limit = intParam(q, 'limit', 100, 0, MAX_PAGE);
  const context = contextParam(q);
  const doc = await openCounted(ctx, url);
  const entries: EntryJson[] = [];
  let index = 0;
  let more = false;
  let error: unknown;
  try {
    for await (const e of doc.entries) {
      if (index >= offset + limit) {
        more = true;
        break;
      }
      if (index >= offset) {
        const children = childLinks({ header: doc.header, url: doc.url, kind: doc.header.kind }, e, context);
        entries.push(children.length === 0 ? e : { ...e, children });
      }
      index++;
    }
  } catch (e) {
    if (!(e instanceof ResourceSyncError) || e.code === 'RS_ABORTED') throw e;
    error = errorJson(e);
  } finally {
    await doc.entries.return();
  }
  return {
    url: doc.url,
    header: headerJson(doc.header),
    offset,
    limit,
    entries,
    more,
    ...(error === undefined ? {} : { error }),
  };
}

/**
 * `api/summary?url=&context=`: the whole document read once: entries, bytes, every validator issue (and the
 * rules between it and the document that listed it, given as `context`), changes by type, time ranges.
 */
export async function apiSummary(ctx: ExplorerContext, q: URLSearchParams): Promise<unknown> {
  const url = urlParam(ctx, q);
  const context = contextParam(q);
  let doc: CountedDocument;
  try {
    doc = await openCounted(ctx, url);
  } catch (e) {
    if (!(e instanceof ResourceSyncError) || e.code === 'RS_ABORTED') throw e;
    // A document that cannot be read at all is one issue (the reader's code).
    return {
      url,
      entries: 0,
      errors: 1,
      warnings: 0,
      valid: false,
      issues: [issueFromError(e)],
      unreadable: errorJson(e),
    };
  }
  const v = createValidator(doc.header, { maxIssues: MAX_ISSUES_RETURNED });
  const linkIssues: ValidationIssue[] = context === undefined ? [] : checkLinkedDocument(doc.header, context);
  const changes: Record<string, number> = {};
  const lastmod = new Range();
  const datetime = new Range();
  let seen = 0;
  const notes = doc.issues;
  try {
    for await (const e of doc.entries) {
      while (seen < notes.length) v.note(notes[seen++] as (typeof notes)[number]);
      v.entry(e);
      lastmod.add(e.lastmod);
      datetime.add(e.md?.datetime);
      const c = e.md?.change;
      if (c !== undefined)
        changes[c in changes || Object.keys(changes).length < 20 ? c : '(other)'] = (changes[c] ?? 0) + 1;
    }
  } catch (e) {
    if (!(e instanceof ResourceSyncError) || e.code === 'RS_ABORTED') throw e;
    v.report(issueFromError(e));
  }
  while (seen < notes.length) v.note(notes[seen++] as (typeof notes)[number]);
  const result = v.finish();
  const errors = result.errors + linkIssues.filter((i) => i.severity === 'error').length;
  const warnings = result.warnings + linkIssues.filter((i) => i.severity === 'warning').length;
  return {
    url: doc.url,
    header: headerJson(doc.header),
    entries: result.entries,
    bytes: doc.bytes(),
    contentLength: doc.contentLength,
    errors,
    warnings,
    valid: errors === 0,
    suppressed: result.suppressed,
    issues: [...linkIssues, ...result.issues].slice(0, MAX_ISSUES_RETURNED),
    changes,
    lastmod: lastmod.json(),
    datetime: datetime.json(),
  };
}

/** Earliest and latest valid datetime seen, as written. */
class Range {
  #min: { ms: number; text: string } | undefined;
  #max: { ms: number; text: string } | undefined;
  add(text: string | undefined): void {
    if (text === undefined) return;
    const dt = parseDatetime(text);
    if (dt === undefined) return;
    if (this.#min === undefined || dt.ms < this.#min.ms) this.#min = { ms: dt.ms, text };
    if (this.#max === undefined || dt.ms > this.#max.ms) this.#max = { ms: dt.ms, text };
  }
  json(): { min: string; max: string } | undefined {
    return this.#min === undefined || this.#max === undefined
      ? undefined
      : { min: this.#min.text, max: this.#max.text };
  }
}

const INDEX_KINDS: ReadonlySet<DocumentKind> = new Set<DocumentKind>([
  'source-description-index',
  'resource-list-index',
  'resource-dump-index',
  'change-list-index',
  'change-dump-index',
  'sitemap-index',
]);

/**
 * Every entry of a document, or of the members of an index (in index order, one level deep), from
 * `start` (member number, entry number in it). Calls `visit` for each; `visit` returning false stops.
 * Returns where it stopped (undefined at the end).
 */
async function walkEntries(
  ctx: ExplorerContext,
  url: string,
  start: { part: number; entry: number },
  visit: (e: Entry, where: { doc: string; part: number; entry: number }) => boolean,
): Promise<{ part: number; entry: number } | undefined> {
  const top = await openCounted(ctx, url);
  if (!INDEX_KINDS.has(top.header.kind)) {
    return walkOne(top, 0, start.entry, visit);
  }
  // An index: its members, in order (at most MAX_PARTS), each read in turn.
  const parts: string[] = [];
  try {
    for await (const e of top.entries) {
      if (e.loc !== '') parts.push(new URL(e.loc, top.url).href);
      if (parts.length >= MAX_PARTS) break;
    }
  } finally {
    await top.entries.return();
  }
  for (let p = start.part; p < parts.length; p++) {
    const partUrl = parts[p] as string;
    if (!ctx.allowUrl(partUrl)) continue;
    const doc = await openCounted(ctx, partUrl);
    const stopped = await walkOne(doc, p, p === start.part ? start.entry : 0, visit);
    if (stopped !== undefined) return stopped;
  }
  return undefined;
}

async function walkOne(
  doc: CountedDocument,
  part: number,
  from: number,
  visit: (e: Entry, where: { doc: string; part: number; entry: number }) => boolean,
): Promise<{ part: number; entry: number } | undefined> {
  let i = 0;
  try {
    for await (const e of doc.entries) {
      if (i >= from && !visit(e, { doc: doc.url, part, entry: i })) return { part, entry: i + 1 };
      i++;
    }
  } finally {
    await doc.entries.return();
  }
  return undefined;
}

/**
 * `api/search?url=&q=&limit=&cursor=`: entries of a list (or of every member of an index) whose `<loc>`
 * contains `q` (case-insensitive), at most `limit` (default 50); stops after {@link SEARCH_SCAN_LIMIT}
 * entries. `cursor` (from the previous answer) goes on where it stopped.
 */
export async function apiSearch(ctx: ExplorerContext, q: URLSearchParams): Promise<unknown> {
  const url = urlParam(ctx, q);
  const needle = (param(q, 'q') ?? '').toLowerCase();
  const limit = intParam(q, 'limit', 50, 1, MAX_PAGE);
  const cursorText = param(q, 'cursor');
  let start = { part: 0, entry: 0 };
  if (cursorText !== undefined) {
    const m = /^(\d+)\.(\d+)$/.exec(cursorText);
    if (m === null) throw new ResourceSyncError('RS_CONFIG', `bad cursor ${JSON.stringify(cursorText)}`);
    start = { part: Number(m[1]), entry: Number(m[2]) };
  }
  const matches: { doc: string; entry: number; value: Entry }[] = [];
  let scanned = 0;
  const stopped = await walkEntries(ctx, url, start, (e, where) => {
    scanned++;
    if (e.loc.toLowerCase().includes(needle)) matches.push({ doc: where.doc, entry: where.entry, value: e });
    return matches.length < limit && scanned < SEARCH_SCAN_LIMIT;
  });
  return {
    url,
    q: needle,
    matches,
    scanned,
    ...(stopped === undefined ? {} : { cursor: `${stopped.part}.${stopped.entry}` }),
  };
}

/** Bucket widths of a change histogram, finest first. */
const UNITS: readonly { readonly name: string; readonly ms: number }[] = [
  { name: 'minute', ms: 60_000 },
  { name: '10 minutes', ms: 600_000 },
  { name: 'hour', ms: 3_600_000 },
  { name: 'day', ms: 86_400_000 },
];
/** Buckets an `auto` histogram aims at, at most, between its first and last change. */
const AUTO_BUCKETS = 240;

/** Counts by change type, keyed by bucket start. */
type Histogram = Map<number, Record<string, number>>;

function regroup(counts: Histogram, width: number): Histogram {
  const out: Histogram = new Map();
  for (const [t, c] of counts) {
    const k = Math.floor(t / width) * width;
    const into = out.get(k) ?? {};
    for (const [name, n] of Object.entries(c)) into[name] = (into[name] ?? 0) + n;
    out.set(k, into);
  }
  return out;
}

/**
 * `api/changes?url=&bucket=minute|hour|day|auto`: the changes of a Change List (or of every list of a Change
 * List Index) counted per bucket (UTC) and change type. `auto` (the default) takes the finest of minute, 10
 * minutes, hour and day that gives at most 240 buckets between the first and the last change. Memory: at most
 * {@link MAX_BUCKETS} buckets while counting (past that, the next width up; past days, widths double).
 */
export async function apiChanges(ctx: ExplorerContext, q: URLSearchParams): Promise<unknown> {
  const url = urlParam(ctx, q);
  const bucketParam = param(q, 'bucket') ?? 'auto';
  const fixed = UNITS.findIndex((u) => u.name === bucketParam);
  if (fixed < 0 && bucketParam !== 'auto')
    throw new ResourceSyncError(
      'RS_CONFIG',
      `bucket must be minute, hour, day or auto, not ${JSON.stringify(bucketParam)}`,
    );
  let unit = Math.max(fixed, 0);
  let width = (UNITS[unit] as { ms: number }).ms;
  let counts: Histogram = new Map();
  let undated = 0;
  let total = 0;
  let min = Number.POSITIVE_INFINITY;
  let max = Number.NEGATIVE_INFINITY;
  const coarsen = (): void => {
    if (unit < UNITS.length - 1) {
      unit++;
      width = (UNITS[unit] as { ms: number }).ms;
    } else width *= 2;
    counts = regroup(counts, width);
  };
  await walkEntries(ctx, url, { part: 0, entry: 0 }, (e) => {
    total++;
    const dt = e.md?.datetime === undefined ? undefined : parseDatetime(e.md.datetime);
    if (dt === undefined) {
      undated++;
      return true;
    }
    min = Math.min(min, dt.ms);
    max = Math.max(max, dt.ms);
    let c = counts.get(Math.floor(dt.ms / width) * width);
    if (c === undefined) {
      while (counts.size >= MAX_BUCKETS) coarsen();
      const k = Math.floor(dt.ms / width) * width;
      c = counts.get(k);
      if (c === undefined) {
        c = {};
        counts.set(k, c);
      }
    }
    const kind = e.md?.change;
    const key = kind === 'created' || kind === 'updated' || kind === 'deleted' ? kind : 'other';
    c[key] = (c[key] ?? 0) + 1;
    return true;
  });
  if (bucketParam === 'auto') while (counts.size > 0 && (max - min) / width > AUTO_BUCKETS) coarsen();
  const rows = [...counts.entries()].sort((a, b) => a[0] - b[0]);
  const named = UNITS.find((u) => u.ms === width);
  return {
    url,
    bucketMs: width,
    bucket: named?.name ?? `${width / 3_600_000} hours`,
    total,
    undated,
    buckets: rows.map(([t, c]) => ({
      start: new Date(t).toISOString(),
      created: c.created ?? 0,
      updated: c.updated ?? 0,
      deleted: c.deleted ?? 0,
      other: c.other ?? 0,
    })),
  };
}

/**
 * `api/fixity?url=&length=&hash=`: fetches a resource (streamed, hashed as it arrives) and compares its length
 * and digests with those its list gives.
 */
export async function apiFixity(ctx: ExplorerContext, q: URLSearchParams): Promise<unknown> {
  const url = urlParam(ctx, q);
  const lengthText = param(q, 'length');
  const expectedLength = lengthText !== undefined && /^\d+$/.test(lengthText) ? Number(lengthText) : undefined;
  const hashText = param(q, 'hash');
  const expected = knownHashes(hashText);
  const algs = Object.keys(expected) as HashAlgorithm[];
  const hasher = createMultiHasher(algs.length === 0 ? ['sha-256'] : algs);
  const started = Date.now();
  const res = await ctx.client.get(url, ctx.signal === undefined ? {} : { signal: ctx.signal });
  for await (const chunk of res.body) hasher.update(chunk);
  const actual = hasher.digest();
  const lengthMatch = expectedLength === undefined ? undefined : expectedLength === hasher.length;
  const hashMatch = algs.length === 0 ? undefined : hashesMatch(expected, actual);
  return {
    url: res.url,
    status: res.status,
    contentType: res.headers['content-type'],
    ms: Date.now() - started,
    length: hasher.length,
    hashes: actual,
    expected: { length: expectedLength, hashes: expected },
    lengthMatch,
    hashMatch,
    ok: lengthMatch !== false && hashMatch !== false,
  };
}

/** A `context` parameter: the JSON of a {@link LinkContext} the page got from a parent's entry. */
function contextParam(q: URLSearchParams): LinkContext | undefined {
  const text = param(q, 'context');
  if (text === undefined) return undefined;
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    throw new ResourceSyncError('RS_CONFIG', 'context is not JSON');
  }
  if (typeof v !== 'object' || v === null) throw new ResourceSyncError('RS_CONFIG', 'context is not an object');
  const o = v as Record<string, unknown>;
  const str = (k: string): string | undefined => (typeof o[k] === 'string' ? (o[k] as string) : undefined);
  const parentUrl = str('parentUrl');
  const parentKind = str('parentKind');
  const capability = str('capability');
  if (parentUrl === undefined || parentKind === undefined || capability === undefined)
    throw new ResourceSyncError('RS_CONFIG', 'context needs parentUrl, parentKind and capability');
  const upUrl = str('upUrl');
  const indexUrl = str('indexUrl');
  return {
    parentUrl,
    parentKind: parentKind as DocumentKind,
    capability,
    ...(upUrl === undefined ? {} : { upUrl }),
    ...(indexUrl === undefined ? {} : { indexUrl }),
  };
}

/** An error as JSON: code, message, where. */
export function errorJson(e: unknown): { code: string; message: string; url?: string; line?: number } {
  if (e instanceof ResourceSyncError)
    return {
      code: e.code,
      message: e.message,
      ...(e.url === undefined ? {} : { url: e.url }),
      ...(e.line === undefined ? {} : { line: e.line }),
    };
  return { code: 'RS_INTERNAL', message: String((e as Error)?.message ?? e) };
}
