/**
 * The push API: a route of the Source's request handler that takes changes POSTed by a repository's event
 * hook, so it publishes without a scan (`serve --ingest-token T` mounts it at {@link INGEST_PATH}).
 *
 * - Authentication: `Authorization: Bearer <token>` (compared in constant time); anything else is 401 with
 *   `WWW-Authenticate`. Only POST (405 otherwise, from the handler).
 * - Bodies: a Change List (`Content-Type: application/xml` or `text/xml`; §12: each `<url>` with `<loc>`,
 *   `rs:md change`, optional `lastmod`, `length`, `hash`, `type`, and `rs:ln` links, §14), or JSON lines
 *   (`application/x-ndjson`, `application/jsonl`; one object a line: `{"uri", "change", "length", "hashes" |
 *   "hash", "type", "lastmod", "links", "setName"}`). Other media types: 415.
 * - Bounds: the body (default 16 MiB: 413 beyond it, detected while reading), the changes per request (default
 *   50,000), a JSON line (1 MiB). XML with a DTD or entities is refused by the reader.
 * - Bad input is 400 with a message naming the line (JSON lines) or the entry's line and element (XML), and
 *   nothing of the request is recorded: a request is all or nothing.
 * - A relative `uri` of a JSON line must be a resource path under the base URL (no leading `/`, no empty, `.`,
 *   `..` or hidden segments): 400 otherwise, naming the line. Values are checked as the XML's are: a `hash` /
 *   `hashes` digest must be hex of its algorithm's length (md5, sha-1, sha-256), `type` a media type,
 *   `setName` a safe path segment (it names a directory of the Source's documents), `lastmod` a W3C Datetime or
 *   epoch ms up to year 9999.
 * - Fixity is optional: a change without `length` / `hash` is published with what the bytes say (the directory
 *   Source re-reads the file; a repository Source reads them through `open` / `origin`). When `apply` refuses a
 *   change (`RS_INVALID_VALUE`, e.g. no fixity and no bytes to learn it from; a fixity mismatch) the answer is
 *   400 naming the line that named the change (the error's `url`); when the repository behind it cannot be read
 *   (`RS_HTTP`, `RS_TIMEOUT`, `RS_IO`) it is 502. Only a bug is a 500.
 * - Success: 200 with `{"recorded": n, ...}` as JSON (what the `apply` callback returns).
 *
 * A `<loc>` / `uri` under the Source's base URL becomes the relative key of the resource; another absolute
 * http(s) URI is kept as it is (see `ResourceRecord.uri`).
 *
 * Memory: the changes of one request (bounded by `maxChanges`) plus one entry or line being parsed.
 *
 * @module
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { ChangeType } from '../core/constants.js';
import { datetimeMs } from '../core/datetime.js';
import { isResourceSyncError, ResourceSyncError } from '../core/errors.js';
import { type Hashes, isHexDigest, isKnownHashAlgorithm, knownHashes, parseHashes } from '../core/hash.js';
import type { Entry, Link } from '../core/model.js';
import { isMediaType } from '../core/validate-values.js';
import { openDocument } from '../xml/index.js';
import type { RepositoryChange } from './adapter.js';
import type { RouteHandler, RouteRequest, SourceResponse } from './http/handler.js';
import { isSafeRelativePath, requestRelativePath } from './paths.js';
import type { ResourceLink } from './store.js';

/** The route's path: `serve` mounts it under the base URL's path (`<base>resourcesync/ingest`). */
export const INGEST_PATH = '/resourcesync/ingest';

/** Options of {@link createIngestRoute}. */
export interface IngestOptions {
  /** The bearer token a request must carry (at least 16 characters). */
  readonly token: string;
  /** The Source's base URL: locations under it become relative keys. */
  readonly baseUrl: URL;
  /** Records the changes of one request (all or nothing); what it returns is sent back as JSON. */
  readonly apply: (changes: readonly RepositoryChange[]) => Promise<Record<string, unknown>>;
  /** Largest body in bytes (default 16 MiB). */
  readonly maxBodyBytes?: number;
  /** Most changes in one request (default 50,000). */
  readonly maxChanges?: number;
}

const CHANGES: ReadonlySet<string> = new Set(['created', 'updated', 'deleted']);
const MAX_LINE_BYTES = 1 << 20;

/** A 400 naming where the input is wrong. */
class BadInput extends Error {}

function json(status: number, value: unknown, extra: Record<string, string> = {}): SourceResponse {
  const body = Buffer.from(`${JSON.stringify(value)}\n`);
  return {
    status,
    headers: {
      'content-type': 'application/json',
      'content-length': body.length,
      'cache-control': 'no-store',
      ...extra,
    },
    body,
  };
}

function digest(s: string): Buffer {
  return createHash('sha256').update(s).digest();
}

/** The body, failing with 413 past `max` bytes (counted while read, whatever Content-Length says). */
async function* bounded(body: AsyncIterable<Uint8Array>, max: number): AsyncGenerator<Uint8Array, void, undefined> {
  let n = 0;
  for await (const chunk of body) {
    n += chunk.byteLength;
    if (n > max) throw new ResourceSyncError('RS_LIMIT', `the body is larger than ${max} bytes`);
    yield chunk;
  }
}

/**
 * Creates the ingest route (mount it with `handler.mount(INGEST_PATH, route, { methods: ['POST'] })`).
 * @throws ResourceSyncError `RS_CONFIG` for a token shorter than 16 characters.
 * @example
 * ```ts
 * const site = await openRepositorySource({ repository, baseUrl, stateDir });
 * const server = createSourceServer(site);
 * server.handler.mount(INGEST_PATH, createIngestRoute({ token, baseUrl: site.baseUrl, apply: (c) => site.record(c) }), { methods: ['POST'] });
 * // curl -H "Authorization: Bearer $T" -H 'Content-Type: application/x-ndjson' --data-binary @changes.jsonl .../resourcesync/ingest
 * ```
 */
export function createIngestRoute(options: IngestOptions): RouteHandler {
  if (typeof options.token !== 'string' || options.token.length < 16)
    throw new ResourceSyncError('RS_CONFIG', 'the ingest token must have at least 16 characters');
  const want = digest(`Bearer ${options.token}`);
  const maxBody = options.maxBodyBytes ?? 16 << 20;
  const maxChanges = options.maxChanges ?? 50_000;
  return async (req: RouteRequest): Promise<SourceResponse> => {
    const auth = req.headers['authorization'];
    if (typeof auth !== 'string' || !timingSafeEqual(digest(auth), want))
      return json(
        401,
        { error: 'a valid "Authorization: Bearer <token>" is required' },
        {
          'www-authenticate': 'Bearer realm="resourcesync-ingest"',
        },
      );
    const length = Number(req.headers['content-length'] ?? '0');
    if (length > maxBody) return json(413, { error: `the body is larger than ${maxBody} bytes` });
    const ct = String(req.headers['content-type'] ?? '')
      .split(';')[0]!
      .trim()
      .toLowerCase();
    const body = bounded(req.body ?? (async function* () {})(), maxBody);
    let changes: RepositoryChange[];
    /** Where each change's URI was first named (`line 3`), to name it in an error of `apply`. */
    const where = new Map<string, string>();
    try {
      if (ct === 'application/xml' || ct === 'text/xml')
        changes = await fromChangeList(body, options.baseUrl, maxChanges, where);
      else if (ct === 'application/x-ndjson' || ct === 'application/jsonl' || ct === 'application/json-lines')
        changes = await fromJsonLines(body, options.baseUrl, maxChanges, where);
      else
        return json(415, {
          error: `Content-Type must be application/xml (a Change List) or application/x-ndjson (JSON lines), not ${ct || 'none'}`,
        });
    } catch (e) {
      if (isResourceSyncError(e, 'RS_LIMIT') && /larger than \d+ bytes/.test((e as Error).message))
        return json(413, { error: (e as Error).message });
      if (e instanceof BadInput || e instanceof ResourceSyncError) return json(400, { error: (e as Error).message });
      throw e;
    }
    if (changes.length === 0) return json(400, { error: 'no changes in the body' });
    try {
      return json(200, await options.apply(changes));
    } catch (e) {
      if (!(e instanceof ResourceSyncError)) throw e;
      const at = e.url === undefined ? undefined : where.get(e.url);
      const error = at === undefined ? e.message : `${at}: ${e.message}`;
      // The request cannot be honoured as sent (a value, or a change without fixity whose bytes are nowhere).
      if (e.code === 'RS_INVALID_VALUE' || e.code === 'RS_HASH_MISMATCH' || e.code === 'RS_LENGTH_MISMATCH')
        return json(400, { error });
      // The repository behind the Source could not be read (its origin failed or timed out): not the client's
      // fault, nor a bug of ours.
      if (e.code === 'RS_HTTP' || e.code === 'RS_TIMEOUT' || e.code === 'RS_IO') return json(502, { error });
      throw e;
    }
  };
}

/** Notes where a change's URI was named first (for errors of `apply`, which know the URI only). */
function remember(where: Map<string, string>, change: RepositoryChange, at: string): RepositoryChange {
  if (!where.has(change.uri)) where.set(change.uri, at);
  return change;
}

/**
 * The store key of a relative `uri` of a JSON line: a safe `/`-separated path under the base URL (no leading
 * `/`, no empty, `.` or `..` segments, no hidden segment, no backslash or NUL), as the served URLs give it.
 */
function relativeKey(uri: string, where: string): string {
  if (!isSafeRelativePath(uri))
    throw new BadInput(
      `${where}: ${JSON.stringify(uri)} is not a resource path under the base URL (a relative path without a leading "/", empty, ".", ".." or hidden segments)`,
    );
  return uri;
}

/** The store key of a location: relative under the base URL, else the absolute http(s) URI. */
function keyOf(loc: string, base: URL, where: string): string {
  let url: URL;
  try {
    url = new URL(loc);
  } catch {
    throw new BadInput(`${where}: ${JSON.stringify(loc)} is not an absolute URI`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new BadInput(`${where}: ${JSON.stringify(loc)} is not an http(s) URI`);
  if (url.origin === base.origin && url.search === '' && url.hash === '') {
    const rel = requestRelativePath(base, url.pathname);
    if (rel !== undefined) return rel;
    if (url.pathname.startsWith(base.pathname))
      throw new BadInput(
        `${where}: ${JSON.stringify(loc)} names no resource path (dot or hidden segments, bad escapes)`,
      );
  }
  return url.href;
}

function fromLink(l: Link, where: string): ResourceLink {
  const out: { -readonly [K in keyof ResourceLink]: ResourceLink[K] } = { rel: l.rel, href: l.href };
  if (l.type !== undefined) out.type = l.type;
  if (l.length !== undefined) out.length = l.length;
  if (l.hash !== undefined) out.hashes = knownHashes(l.hash);
  if (l.pri !== undefined) out.pri = l.pri;
  if (l.encoding !== undefined) out.encoding = l.encoding;
  if (l.path !== undefined) out.path = l.path;
  if (l.modified !== undefined) out.modifiedMs = parseTime(l.modified, `${where}: rs:ln modified`);
  if (l.invalid !== undefined) throw new BadInput(`${where}: rs:ln has invalid ${Object.keys(l.invalid).join(', ')}`);
  return out;
}

/** The known digests of a hash attribute; 400 for one that does not parse or names none of md5, sha-1, sha-256. */
function hashesOf(attr: string, where: string): Hashes {
  try {
    parseHashes(attr);
  } catch (e) {
    throw new BadInput(`${where}: ${(e as Error).message}`);
  }
  const h = knownHashes(attr);
  if (Object.keys(h).length === 0)
    throw new BadInput(`${where}: no md5, sha-1 or sha-256 digest in ${JSON.stringify(attr)}`);
  return h;
}

function mediaType(type: string, where: string): string {
  if (!isMediaType(type)) throw new BadInput(`${where}: ${JSON.stringify(type)} is not a media type`);
  return type;
}

/** Latest instant a W3C Datetime can say (9999-12-31T23:59:59.999Z). */
const MAX_DATETIME_MS = 253_402_300_799_999;

function parseTime(text: string, where: string): number {
  try {
    return datetimeMs(text);
  } catch {
    throw new BadInput(`${where}: ${JSON.stringify(text)} is not a W3C Datetime`);
  }
}

function fromEntry(e: Entry, base: URL): RepositoryChange {
  const where = `line ${e.line ?? '?'}: <url>`;
  if (e.element !== 'url') throw new BadInput(`line ${e.line ?? '?'}: <${e.element}> where a <url> was expected`);
  if (e.loc === '') throw new BadInput(`${where} has no <loc>`);
  const change = e.md?.change;
  if (change === undefined || !CHANGES.has(change))
    throw new BadInput(
      `${where} <rs:md change>: ${change === undefined ? 'missing' : JSON.stringify(change)} (created, updated or deleted)`,
    );
  if (e.md?.invalid !== undefined)
    throw new BadInput(`${where} <rs:md> has invalid ${Object.keys(e.md.invalid).join(', ')}`);
  const out: { -readonly [K in keyof RepositoryChange]: RepositoryChange[K] } = {
    uri: keyOf(e.loc, base, `${where} <loc>`),
    change: change as ChangeType,
  };
  if (e.md?.length !== undefined) out.length = e.md.length;
  if (e.md?.hash !== undefined) out.hashes = hashesOf(e.md.hash, `${where} <rs:md hash>`);
  if (e.md?.type !== undefined) out.type = mediaType(e.md.type, `${where} <rs:md type>`);
  if (e.lastmod !== undefined) out.lastmod = parseTime(e.lastmod, `${where} <lastmod>`);
  if (e.links.length > 0) out.links = e.links.map((l) => fromLink(l, where));
  return out;
}

async function fromChangeList(
  body: AsyncIterable<Uint8Array>,
  base: URL,
  max: number,
  where: Map<string, string>,
): Promise<RepositoryChange[]> {
  const { header, entries } = await openDocument(body, { url: 'the request body' });
  if (header.kind !== 'change-list' && header.kind !== 'sitemap' && header.kind !== 'change-notification')
    throw new BadInput(
      `the body is a ${header.kind}; a Change List (<urlset> with <rs:md capability="changelist">) is expected`,
    );
  const out: RepositoryChange[] = [];
  for await (const e of entries) {
    if (out.length >= max) throw new BadInput(`more than ${max} changes in one request`);
    out.push(remember(where, fromEntry(e, base), `line ${e.line ?? '?'}`));
  }
  return out;
}

/** Lines of a byte stream (UTF-8), each at most {@link MAX_LINE_BYTES}. */
async function* lines(body: AsyncIterable<Uint8Array>): AsyncGenerator<string, void, undefined> {
  let pending = Buffer.alloc(0);
  let lineNo = 0;
  const decoder = new TextDecoder('utf-8', { fatal: true });
  const decode = (b: Buffer): string => {
    try {
      return decoder.decode(b);
    } catch {
      throw new BadInput(`line ${lineNo}: not UTF-8`);
    }
  };
  for await (const chunk of body) {
    pending = pending.length === 0 ? Buffer.from(chunk) : Buffer.concat([pending, chunk]);
    for (let nl = pending.indexOf(10); nl >= 0; nl = pending.indexOf(10)) {
      lineNo++;
      yield decode(pending.subarray(0, nl));
      pending = pending.subarray(nl + 1);
    }
    if (pending.length > MAX_LINE_BYTES) throw new BadInput(`line ${lineNo + 1}: longer than ${MAX_LINE_BYTES} bytes`);
  }
  if (pending.length > 0) {
    lineNo++;
    yield decode(pending);
  }
}

function fromJson(v: unknown, base: URL, where: string): RepositoryChange {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new BadInput(`${where}: not a JSON object`);
  const o = v as Record<string, unknown>;
  const str = (k: string): string | undefined => {
    const x = o[k];
    if (x === undefined) return undefined;
    if (typeof x !== 'string') throw new BadInput(`${where}: "${k}" must be a string`);
    return x;
  };
  const uri = str('uri');
  if (uri === undefined || uri === '') throw new BadInput(`${where}: "uri" is missing`);
  const change = str('change');
  if (change === undefined || !CHANGES.has(change))
    throw new BadInput(`${where}: "change" must be created, updated or deleted, not ${JSON.stringify(o['change'])}`);
  const out: { -readonly [K in keyof RepositoryChange]: RepositoryChange[K] } = {
    uri: /^[a-z][a-z0-9+.-]*:/i.test(uri) ? keyOf(uri, base, `${where}: "uri"`) : relativeKey(uri, `${where}: "uri"`),
    change: change as ChangeType,
  };
  const setName = str('setName');
  if (setName !== undefined) {
    // A set name becomes a path segment of the Source's documents (resourcesync/<set>/...).
    if (setName.includes('/') || !isSafeRelativePath(setName))
      throw new BadInput(`${where}: "setName" ${JSON.stringify(setName)} is not a safe path segment`);
    out.setName = setName;
  }
  if (o['length'] !== undefined) {
    const n = o['length'];
    if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0)
      throw new BadInput(`${where}: "length" must be an integer >= 0`);
    out.length = n;
  }
  const hash = str('hash');
  if (hash !== undefined) out.hashes = hashesOf(hash, `${where}: "hash"`);
  if (o['hashes'] !== undefined) {
    const h = o['hashes'];
    if (h === null || typeof h !== 'object' || Array.isArray(h))
      throw new BadInput(`${where}: "hashes" must be an object`);
    const hashes: { -readonly [K in keyof Hashes]: Hashes[K] } = { ...(out.hashes ?? {}) };
    for (const [alg, hex] of Object.entries(h as Record<string, unknown>)) {
      if (!isKnownHashAlgorithm(alg))
        throw new BadInput(`${where}: "hashes": ${JSON.stringify(alg)} is not md5, sha-1 or sha-256`);
      if (typeof hex !== 'string' || !isHexDigest(alg, hex))
        throw new BadInput(`${where}: "hashes": ${JSON.stringify(hex)} is not a ${alg} hex digest`);
      hashes[alg] = hex.toLowerCase();
    }
    out.hashes = hashes;
  }
  const type = str('type');
  if (type !== undefined) out.type = mediaType(type, `${where}: "type"`);
  if (o['lastmod'] !== undefined) {
    const lm = o['lastmod'];
    if (typeof lm === 'number') {
      if (!Number.isSafeInteger(lm) || lm < 0 || lm > MAX_DATETIME_MS)
        throw new BadInput(`${where}: "lastmod" ${lm} is not epoch ms between 1970 and 9999`);
      out.lastmod = lm;
    } else if (typeof lm === 'string') out.lastmod = parseTime(lm, `${where}: "lastmod"`);
    else throw new BadInput(`${where}: "lastmod" must be a W3C Datetime or epoch ms`);
  }
  if (o['links'] !== undefined) {
    if (!Array.isArray(o['links'])) throw new BadInput(`${where}: "links" must be an array`);
    out.links = (o['links'] as Record<string, unknown>[]).map((l, i) => {
      if (l === null || typeof l !== 'object') throw new BadInput(`${where}: link ${i + 1} is not an object`);
      const { modified, hash: lh, ...rest } = l as Record<string, unknown>;
      const link = { ...rest } as { -readonly [K in keyof ResourceLink]: ResourceLink[K] };
      if (typeof modified === 'string') link.modifiedMs = parseTime(modified, `${where}: link ${i + 1} "modified"`);
      if (typeof lh === 'string') link.hashes = knownHashes(lh);
      return link;
    });
  }
  return out;
}

async function fromJsonLines(
  body: AsyncIterable<Uint8Array>,
  base: URL,
  max: number,
  where: Map<string, string>,
): Promise<RepositoryChange[]> {
  const out: RepositoryChange[] = [];
  let n = 0;
  for await (const line of lines(body)) {
    n++;
    if (line.trim() === '') continue;
    if (out.length >= max) throw new BadInput(`line ${n}: more than ${max} changes in one request`);
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch (e) {
      throw new BadInput(`line ${n}: not JSON (${(e as Error).message})`);
    }
    out.push(remember(where, fromJson(v, base, `line ${n}`), `line ${n}`));
  }
  return out;
}

/**
 * The `apply` of a directory Source (what `serve <dir> --ingest-token` mounts): the directory stays the
 * truth, so a pushed change names the paths to re-check now (no full scan, no wait for the watcher); the
 * metadata recorded is what the files have. A URI outside the base URL is refused (`RS_INVALID_VALUE`: 400).
 */
export function directoryIngest(site: {
  scanPaths(relPaths: readonly string[]): Promise<{ created: number; updated: number; deleted: number }>;
}): (changes: readonly RepositoryChange[]) => Promise<Record<string, unknown>> {
  return async (changes) => {
    const paths = [...new Set(changes.map((c) => c.uri))];
    const outside = paths.find((p) => /^https?:\/\//i.test(p));
    if (outside !== undefined)
      throw new ResourceSyncError('RS_INVALID_VALUE', "not under the Source's base URL", {
        url: outside,
      });
    const stats = await site.scanPaths(paths);
    return { checked: paths.length, created: stats.created, updated: stats.updated, deleted: stats.deleted };
  };
}
