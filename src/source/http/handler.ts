/**
 * The Source's HTTP semantics as a pure request handler: a {@link SourceRequest} in, a {@link SourceResponse}
 * out. Routing, discovery (§6.3), conditional requests, Range and gzip negotiation live here; no socket, no
 * server. The Node adapter (`node.ts`, used by `createSourceServer`) writes responses to `node:http`; an HTTP/2
 * adapter writes the same responses to `node:http2`; {@link SourceHandler.request} and
 * {@link SourceHandler.fetch} answer web `Request`s in process (tests, other runtimes), as hono's
 * `app.request()` does.
 *
 * HTTP semantics (RFC 9110):
 * - Only GET and HEAD for the Source's own routes (405 with `Allow: GET, HEAD` otherwise); a mounted route
 *   ({@link SourceHandler.mount}) names its methods. HEAD sends the same headers as GET, no body.
 * - `ETag` comes from the Source (`SiteFile.etag`, the stored hash); a response is never hashed. Derived
 *   representations get derived tags: `"<tag>-gzip"` when compressed.
 * - Conditional requests in the order of RFC 9110 §13.2.2: If-Match / If-Unmodified-Since (412),
 *   If-None-Match (weak comparison, lists, `*`; 304), If-Modified-Since (304).
 * - Range (single range) for every file (resources, documents, dump packages): 206 with `Content-Range`, 416
 *   with `Content-Range: bytes *\/len`, If-Range (strong ETag or exact date). Several ranges in one request are
 *   answered with the whole representation (200), as RFC 9110 §14.2 allows: no multipart/byteranges.
 * - XML documents are gzip-compressed when the client sends `Accept-Encoding: gzip` and no Range: on the fly
 *   (zlib stream, no Content-Length), or from a {@link GzipCache} of compressed copies when one is given
 *   (filled in the background after the first request; then with Content-Length). `Vary: Accept-Encoding`
 *   on every document response. A Range request is always served from the identity encoding.
 * - `Cache-Control`: documents `no-cache` (they change whenever the change log moves; revalidation by ETag is
 *   cheap); resources `public, max-age=<resourceMaxAgeSeconds>` (default 60, 0 gives `no-cache`).
 * - Discovery (§6.3.3): every resource response carries `Link: <capability list>; rel="resourcesync"`. The
 *   bytes of a resource are always served as they are, so they match the length and hash its Resource List,
 *   Change List and dumps give.
 * - Request targets are checked before anything is routed (400 for dot segments, encoded `/` `\` NUL,
 *   malformed percent-encoding, raw non-ASCII); hidden (dot) segments are 404 without asking the Source. The
 *   Source (`SourceSite.resource`) remains the authority on what is inside the collection.
 * - Routing: mounted routes, `/robots.txt`, then the Source's documents (so a collection file cannot shadow
 *   `/.well-known/resourcesync` or `/robots.txt`), then resources (optionally `/dir/` -> `/dir/index.html`),
 *   then `<base>changelist.xml` redirected to the Change List (where the reference Python client looks).
 *   503 + Retry-After while the Source is opening, or when a file no longer has its recorded length (the
 *   watcher is about to record the change). A 500 (a Source or route that throws) carries a small text body.
 *
 * Memory per response: files up to 64 KiB are read whole (one read); larger ones are streamed with
 * backpressure (the body is pulled by the adapter; one 64 KiB chunk at a time, plus zlib's buffers when
 * compressing). A 304 opens no file (a Source may hand over the bytes of a small file it read while checking it,
 * {@link SiteFile.data}: those are sent as they are).
 *
 * @module
 */
import { open } from 'node:fs/promises';
import { pipeline, Readable } from 'node:stream';
import { constants as zlibConstants, createGzip } from 'node:zlib';
import { ResourceSyncError } from '../../core/errors.js';
import type { SiteFile } from '../source.js';
import type { SourceSite } from '../index.js';
import { type Opened, openFile, readRange } from './body.js';
import { deriveEtag, evaluatePreconditions, formatHttpDate, ifRangeAllows, type Validators } from './conditional.js';
import { acceptsGzip, isCompressibleXml } from './encoding.js';
import type { GzipCache } from './gzip-cache.js';
import { evaluateRange, formatContentRange, formatUnsatisfiedRange } from './range.js';
import { checkRequestTarget, hasHiddenSegment } from './request-target.js';

/** Header fields of a request: lower-case names (Node's `IncomingHttpHeaders` is one). */
export type RequestHeaders = Readonly<Record<string, string | readonly string[] | undefined>>;

/** A request, as an adapter hands it to {@link SourceHandler.handle}. */
export interface SourceRequest {
  readonly method: string;
  /** The request-target as received: origin-form (`/a%20b?x`) or absolute-form; still percent-encoded. */
  readonly target: string;
  readonly headers: RequestHeaders;
  /** The request body (for routes that take one, e.g. a POST); read it with a bound. */
  readonly body?: AsyncIterable<Uint8Array> | undefined;
  /**
   * Aborted when the client goes away or the server closes (a long-lived response, e.g. server-sent events,
   * ends its body then).
   */
  readonly signal?: AbortSignal | undefined;
}

/** A request a mounted route receives: the checked target split up. */
export interface RouteRequest extends SourceRequest {
  /** Raw (percent-encoded) path, checked (no dot segments, no encoded `/`). */
  readonly pathname: string;
  /** The query without `?` (undefined when there is none). */
  readonly query: string | undefined;
  /** `pathname` after the mount path (`''` for the mount path itself). */
  readonly subpath: string;
}

/** Header fields of a response: lower-case names; an array gives a field repeated (e.g. several `Link`s). */
export type ResponseHeaders = Record<string, string | number | readonly string[]>;

/** A response. An adapter sends `headers` as they are (it adds framing only). */
export interface SourceResponse {
  readonly status: number;
  readonly headers: ResponseHeaders;
  /**
   * No body (HEAD, 304, ...), the bytes, or chunks pulled one at a time with backpressure. A stream's length
   * is in `content-length` when known (else the adapter uses chunked encoding).
   */
  readonly body?: Uint8Array | AsyncIterable<Uint8Array>;
  /**
   * Releases what the body holds (an open file); the adapter calls it once, after the response ended or was
   * aborted (whether or not the body was read).
   */
  readonly dispose?: () => Promise<void>;
}

/** A mounted route: answers the requests under its path (see {@link SourceHandler.mount}). */
export type RouteHandler = (request: RouteRequest) => Promise<SourceResponse | undefined> | SourceResponse | undefined;

/** Options of {@link SourceHandler.mount}. */
export interface MountOptions {
  /** Methods the route answers (default `GET`, `HEAD`); others get 405 with `Allow`. HEAD follows GET. */
  readonly methods?: readonly string[];
}

/** Options of {@link createSourceHandler}. */
export interface SourceHandlerOptions {
  /**
   * File name served for a path ending in `/` (e.g. `index.html`: `/docs/` serves the resource
   * `/docs/index.html`). Default none: such paths are 404.
   */
  readonly directoryIndex?: string;
  /** `Cache-Control: public, max-age=N` on resources. Default 60; 0 gives `no-cache`. */
  readonly resourceMaxAgeSeconds?: number;
  /** gzip level for XML documents compressed per request (1-9). Default 6. */
  readonly gzipLevel?: number;
  /**
   * Keep compressed copies of documents (see {@link GzipCache}): repeated gzip requests are then served from
   * disk with a Content-Length. Without it every gzip response is compressed on the fly.
   */
  readonly gzipCache?: GzipCache;
  /** Called with unexpected errors (a Source or route that throws, a file that vanished mid-response). */
  readonly onError?: (error: unknown, request: { readonly method: string; readonly target: string }) => void;
}

/** The Source's request handler (see the module comment). */
export interface SourceHandler {
  /**
   * Answers a request. Never rejects: a failure is a 500 (reported to `onError`). The caller must send or
   * drop the response and then call its `dispose`.
   */
  handle(request: SourceRequest): Promise<SourceResponse>;
  /**
   * Mounts a route: `path` ending in `/` takes every path under it (`/explorer/` takes `/explorer/`,
   * `/explorer/app.js`; `/explorer` is redirected there), any other path only itself. Routes are tried before
   * the Source's own (most specific path first); a route returning undefined passes the request on. Returns a
   * function that unmounts it.
   *
   * @example
   * ```ts
   * handler.mount('/explorer/', (req) => serveStatic(assets, req.subpath));
   * handler.mount('/resourcesync/ingest', ingest, { methods: ['POST'] });
   * ```
   */
  mount(path: string, route: RouteHandler, options?: MountOptions): () => void;
  /** Answers a web `Request` with a web `Response` (any runtime; the body is released when read or cancelled). */
  fetch(request: Request): Promise<Response>;
  /**
   * In process, like hono's `app.request()`: `target` is a path (`/hello.txt`) or URL, `init` as for `fetch`.
   *
   * @example
   * ```ts
   * const res = await handler.request('/hello.txt', { headers: { range: 'bytes=0-4' } });
   * res.status; // 206
   * await res.text(); // 'Hello'
   * ```
   */
  request(target: string, init?: RequestInit): Promise<Response>;
}

const ALLOW = 'GET, HEAD';

interface Mounted {
  readonly path: string;
  readonly prefix: boolean;
  readonly route: RouteHandler;
  readonly methods: readonly string[];
}

/**
 * Creates the request handler of a Source.
 *
 * `site` may be a promise (a server can listen before the Source is open, e.g. to learn the port for the
 * base URL); requests get 503 with `Retry-After` until it resolves.
 *
 * @example
 * ```ts
 * const site = await openDirectorySource({ dir: './collection', baseUrl: 'http://localhost:8080/' });
 * const handler = createSourceHandler(site);
 * const res = await handler.request('/.well-known/resourcesync');
 * ```
 */
export function createSourceHandler(
  site: SourceSite | Promise<SourceSite>,
  options: SourceHandlerOptions = {},
): SourceHandler {
  let current: SourceSite | undefined;
  let startFailed = false;
  if (site instanceof Promise) {
    void site.then(
      (s) => {
        current = s;
      },
      () => {
        startFailed = true;
      },
    );
  } else current = site;
  const maxAge = options.resourceMaxAgeSeconds ?? 60;
  const resourceCacheControl = maxAge > 0 ? `public, max-age=${Math.floor(maxAge)}` : 'public, no-cache';
  const gzipLevel = options.gzipLevel ?? 6;
  /** `Link` header values by Capability List URL (one per set). */
  const linkValues = new Map<string, string>();
  let mounts: Mounted[] = [];

  async function handle(request: SourceRequest): Promise<SourceResponse> {
    let response: SourceResponse;
    try {
      response = await route(request);
    } catch (e) {
      options.onError?.(e, { method: request.method, target: request.target });
      response = text(request.method, 500, 'Internal Server Error');
    }
    response.headers['x-content-type-options'] = 'nosniff';
    return response;
  }

  async function route(request: SourceRequest): Promise<SourceResponse> {
    const { method, target } = request;
    const checked = checkRequestTarget(target);
    if (!checked.ok) return text(method, 400, `Bad Request: ${checked.reason}`);
    const { pathname } = checked;
    if (mounts.length > 0) {
      const answered = await routeMounted(request, pathname, checked.query);
      if (answered !== undefined) return answered;
    }
    if (method !== 'GET' && method !== 'HEAD') {
      const r = text(method, 405, `Method Not Allowed: ${method} (allowed: ${ALLOW})`);
      r.headers['allow'] = ALLOW;
      return r;
    }
    const site = current;
    if (site === undefined) {
      const r = text(method, 503, `Service Unavailable: the Source ${startFailed ? 'failed to start' : 'is starting'}`);
      r.headers['retry-after'] = '2';
      return r;
    }
    if (pathname === '/robots.txt') {
      const r = text(method, 200, await site.robotsTxt(), false);
      r.headers['cache-control'] = 'no-cache';
      return r;
    }
    // A generated file can be replaced by a newer generation (and a collection file deleted) between the
    // lookup and the open: then the Source is asked once more.
    for (let attempt = 1; ; attempt++) {
      const selected = await select(site, pathname);
      if (selected === undefined) {
        const alias = attempt === 1 ? await changeListAlias(site, pathname) : undefined;
        if (alias === undefined) return text(method, 404, `Not Found: ${pathname}`);
        const r = text(method, 302, `Found: ${alias}`);
        r.headers['location'] = alias;
        r.headers['cache-control'] = 'no-cache';
        return r;
      }
      const { file, kind } = selected;
      const capabilityList = kind === 'resource' ? site.capabilityListUrl(resourcePathOf(pathname)) : undefined;
      const answered = await answerFile(request, file, kind, capabilityList);
      if (answered !== 'gone') return answered;
      if (attempt >= 2) {
        options.onError?.(new ResourceSyncError('RS_IO', `cannot open ${file.path}: it vanished`), {
          method,
          target,
        });
        return text(method, 404, `Not Found: ${pathname}`);
      }
    }
  }

  async function routeMounted(
    request: SourceRequest,
    pathname: string,
    query: string | undefined,
  ): Promise<SourceResponse | undefined> {
    const { method } = request;
    for (const m of mounts) {
      if (m.prefix && pathname === m.path.slice(0, -1)) {
        // `/explorer` -> `/explorer/` (relative links inside the route resolve under it).
        const location = query === undefined ? m.path : `${m.path}?${query}`;
        const r = text(method, 308, `Permanent Redirect: ${location}`);
        r.headers['location'] = location;
        return r;
      }
      if (m.prefix ? !pathname.startsWith(m.path) : pathname !== m.path) continue;
      const allowed = m.methods.includes(method) || (method === 'HEAD' && m.methods.includes('GET'));
      if (!allowed) {
        const allow = m.methods.includes('GET') && !m.methods.includes('HEAD') ? [...m.methods, 'HEAD'] : m.methods;
        const r = text(method, 405, `Method Not Allowed: ${method} (allowed: ${allow.join(', ')})`);
        r.headers['allow'] = allow.join(', ');
        return r;
      }
      const subpath = pathname.slice(m.prefix ? m.path.length : pathname.length);
      const answered = await m.route({
        method,
        target: request.target,
        headers: request.headers,
        // Getters: an adapter may make these lazily (the abort signal).
        get body() {
          return request.body;
        },
        get signal() {
          return request.signal;
        },
        pathname,
        query,
        subpath,
      });
      if (answered === undefined) continue;
      if (method === 'HEAD' && answered.body !== undefined) {
        // HEAD answered by a GET route: the same headers, no body.
        await answered.dispose?.();
        const { body: _body, dispose: _dispose, ...rest } = answered;
        return rest;
      }
      return answered;
    }
    return undefined;
  }

  /** The resource a pathname names: with `directoryIndex`, `/dir/` names `/dir/<index>`. */
  function resourcePathOf(pathname: string): string {
    return options.directoryIndex !== undefined && pathname.endsWith('/')
      ? `${pathname}${encodeURIComponent(options.directoryIndex)}`
      : pathname;
  }

  /**
   * `<base>changelist.xml`, when no resource has that name: where the reference Python client (resync) looks
   * for the Change List when it is not told (`--changelist-uri`), a name the standard does not define. It is
   * redirected (302) to the Change List of the set a resource of that name would belong to (the Capability
   * List's, §6.3 discovery being the way to it).
   */
  async function changeListAlias(site: SourceSite, pathname: string): Promise<string | undefined> {
    if (pathname !== `${site.baseUrl.pathname}changelist.xml`) return undefined;
    const capabilityList = site.capabilityListUrl(pathname);
    if (capabilityList === undefined || !capabilityList.endsWith('/capabilitylist.xml')) return undefined;
    const changeList = `${capabilityList.slice(0, -'capabilitylist.xml'.length)}changelist.xml`;
    return (await site.document(new URL(changeList).pathname)) === undefined ? undefined : changeList;
  }

  /** The document, else the resource, a pathname names. */
  async function select(
    site: SourceSite,
    pathname: string,
  ): Promise<{ file: SiteFile; kind: 'document' | 'resource' } | undefined> {
    const doc = await site.document(pathname);
    if (doc !== undefined) return { file: doc, kind: 'document' };
    // Hidden segments are never resources (documents such as /.well-known/resourcesync were looked up first).
    if (hasHiddenSegment(pathname)) return undefined;
    const resource = await site.resource(resourcePathOf(pathname));
    return resource === undefined ? undefined : { file: resource, kind: 'resource' };
  }

  /**
   * The response for `file`. The file is opened only when bytes are needed (not for a 304 or 412). 'gone'
   * when it vanished before anything was decided (the caller looks it up again).
   */
  async function answerFile(
    request: SourceRequest,
    file: SiteFile,
    kind: 'document' | 'resource',
    capabilityList: string | undefined,
  ): Promise<SourceResponse | 'gone'> {
    const { method, headers: h } = request;
    const headers: ResponseHeaders = {};
    if (capabilityList !== undefined) {
      let link = linkValues.get(capabilityList);
      if (link === undefined) {
        link = `<${capabilityList}>; rel="resourcesync"`;
        if (linkValues.size >= 1000) linkValues.clear();
        linkValues.set(capabilityList, link);
      }
      headers['link'] = link;
    }
    const length = file.length;
    const rangeHeader = single(h['range']);
    const compressible = kind === 'document' && isCompressibleXml(file.contentType);
    const gzip = compressible && rangeHeader === undefined && acceptsGzip(single(h['accept-encoding']));
    const validators: Validators = gzip
      ? { etag: deriveEtag(file.etag, 'gzip'), alsoMatches: [file.etag], lastModified: file.lastModified.getTime() }
      : { etag: file.etag, alsoMatches: [], lastModified: file.lastModified.getTime() };

    headers['content-type'] = file.contentType;
    headers['etag'] = validators.etag;
    headers['last-modified'] = formatHttpDate(file.lastModified);
    headers['cache-control'] = kind === 'document' ? 'no-cache' : resourceCacheControl;
    if (compressible) headers['vary'] = 'Accept-Encoding';
    headers['accept-ranges'] = 'bytes';

    const outcome = evaluatePreconditions(
      {
        method,
        ifMatch: single(h['if-match']),
        ifNoneMatch: single(h['if-none-match']),
        ifModifiedSince: single(h['if-modified-since']),
        ifUnmodifiedSince: single(h['if-unmodified-since']),
      },
      validators,
    );
    if (outcome === 'not-modified') {
      delete headers['content-type'];
      delete headers['accept-ranges'];
      return { status: 304, headers };
    }
    if (outcome === 'precondition-failed') {
      delete headers['accept-ranges'];
      return withHeaders(text(method, 412, `Precondition Failed: ${request.target}`), headers);
    }

    const opened = await openFile(file);
    if (opened === 'gone') return 'gone';
    if (opened === 'changed') {
      // The watcher records the change shortly; ask the client to come back.
      const r = text(method, 503, `Service Unavailable: ${request.target} is changing, retry shortly`);
      r.headers['retry-after'] = '1';
      if (headers['link'] !== undefined) r.headers['link'] = headers['link'];
      return r;
    }
    const dispose = 'handle' in opened ? () => opened.handle.close() : undefined;
    try {
      let status = 200;
      let start = 0;
      let end = length;
      if (rangeHeader !== undefined && ifRangeAllows(single(h['if-range']), validators)) {
        const r = evaluateRange(rangeHeader, length);
        if (r.kind === 'unsatisfiable') {
          await dispose?.();
          const out = text(method, 416, `Range Not Satisfiable: ${rangeHeader} (length ${length})`);
          out.headers['content-range'] = formatUnsatisfiedRange(length);
          if (headers['link'] !== undefined) out.headers['link'] = headers['link'];
          if (headers['vary'] !== undefined) out.headers['vary'] = headers['vary'];
          return out;
        }
        if (r.kind === 'single') {
          status = 206;
          start = r.range.start;
          end = r.range.end + 1;
          headers['content-range'] = formatContentRange(r.range, length);
        }
      }
      if (gzip) return await gzipResponse(method, status, headers, file, opened, dispose);
      headers['content-length'] = end - start;
      if (method === 'HEAD' || end === start) {
        await dispose?.();
        return { status, headers };
      }
      if ('data' in opened) {
        // A small file: one buffer (memory: `SMALL_BODY_BYTES` at most).
        const body = start === 0 && end === opened.data.length ? opened.data : opened.data.subarray(start, end);
        return { status, headers, body };
      }
      return {
        status,
        headers,
        body: readRange(opened.handle, start, end),
        dispose: dispose!,
      };
    } catch (e) {
      await dispose?.();
      throw e;
    }
  }

  /** A gzip-encoded XML document: from the cache of compressed copies when there is one, else on the fly. */
  async function gzipResponse(
    method: string,
    status: number,
    headers: ResponseHeaders,
    file: SiteFile,
    source: Opened,
    disposeSource: (() => Promise<void>) | undefined,
  ): Promise<SourceResponse> {
    headers['content-encoding'] = 'gzip';
    const cached = options.gzipCache?.lookup(file);
    // Evicted between lookup and open: compress on the fly instead.
    const cachedHandle = cached && (await open(cached.path, 'r').catch(() => undefined));
    if (cached && cachedHandle) {
      await disposeSource?.();
      headers['content-length'] = cached.length;
      if (method === 'HEAD') {
        await cachedHandle.close();
        return { status, headers };
      }
      return {
        status,
        headers,
        body: cachedHandle.createReadStream({ autoClose: false }),
        dispose: () => cachedHandle.close(),
      };
    }
    if (method === 'HEAD') {
      await disposeSource?.();
      return { status, headers };
    }
    const stream =
      'data' in source
        ? Readable.from([source.data])
        : source.handle.createReadStream({ start: 0, end: Math.max(0, file.length - 1), autoClose: false });
    // The callback form returns the last stream: pulled by the adapter, it pulls the file through zlib.
    const gzip = pipeline(stream, createGzip({ level: gzipLevel, flush: zlibConstants.Z_NO_FLUSH }), () => {});
    return {
      status,
      headers,
      body: gzip,
      dispose: async () => {
        gzip.destroy();
        await disposeSource?.();
      },
    };
  }

  function mount(path: string, handler: RouteHandler, mountOptions: MountOptions = {}): () => void {
    const checked = checkRequestTarget(path);
    if (!checked.ok || checked.query !== undefined || checked.pathname !== path)
      throw new ResourceSyncError('RS_CONFIG', `cannot mount a route at ${JSON.stringify(path)}: not a plain path`);
    if (path === '/') throw new ResourceSyncError('RS_CONFIG', 'cannot mount a route at / (it would take every path)');
    if (mounts.some((m) => m.path === path))
      throw new ResourceSyncError('RS_CONFIG', `a route is already mounted at ${path}`);
    const entry: Mounted = {
      path,
      prefix: path.endsWith('/'),
      route: handler,
      methods: (mountOptions.methods ?? ['GET', 'HEAD']).map((m) => m.toUpperCase()),
    };
    // Most specific first: the longest path wins.
    mounts = [...mounts, entry].sort((a, b) => b.path.length - a.path.length);
    return () => {
      mounts = mounts.filter((m) => m !== entry);
    };
  }

  async function fetchWeb(request: Request): Promise<Response> {
    const url = new URL(request.url);
    const headers: Record<string, string> = {};
    request.headers.forEach((value, name) => {
      headers[name] = value;
    });
    const response = await handle({
      method: request.method,
      target: `${url.pathname}${url.search}`,
      headers,
      ...(request.body === null ? {} : { body: request.body as unknown as AsyncIterable<Uint8Array> }),
      signal: request.signal,
    });
    return toWebResponse(response);
  }

  return {
    handle,
    mount,
    fetch: fetchWeb,
    request: (target, init) => fetchWeb(new Request(new URL(target, 'http://localhost/'), init)),
  };
}

/** A web `Response` for a {@link SourceResponse}; the body is released once read whole or cancelled. */
export function toWebResponse(response: SourceResponse): Response {
  const headers = new Headers();
  for (const [name, value] of Object.entries(response.headers)) {
    if (typeof value === 'object') for (const v of value) headers.append(name, v);
    else headers.set(name, String(value));
  }
  const { body, dispose } = response;
  let stream: ReadableStream<Uint8Array> | null = null;
  if (body !== undefined) {
    const b = body;
    async function* chunks(): AsyncGenerator<Uint8Array> {
      try {
        if (b instanceof Uint8Array) yield b;
        else yield* b;
      } finally {
        await dispose?.();
      }
    }
    stream = ReadableStream.from(chunks());
  } else void dispose?.();
  return new Response(stream, { status: response.status, headers });
}

/** A header value as one string (repeated fields joined with ", "). */
function single(v: string | readonly string[] | undefined): string | undefined {
  return typeof v === 'object' ? v.join(', ') : v;
}

/** A small text/plain response (errors, robots.txt); HEAD gets the headers only. */
export function text(
  method: string,
  status: number,
  body: string,
  newline = true,
): SourceResponse & {
  headers: ResponseHeaders;
} {
  const full = newline && !body.endsWith('\n') ? `${body}\n` : body;
  const bytes = Buffer.from(full, 'utf8');
  const headers: ResponseHeaders = { 'content-type': 'text/plain; charset=utf-8', 'content-length': bytes.length };
  if (status >= 400) headers['cache-control'] = 'no-store';
  return method === 'HEAD' ? { status, headers } : { status, headers, body: bytes };
}

/** `r` with `extra` headers under its own (its own win). */
function withHeaders(r: SourceResponse, extra: ResponseHeaders): SourceResponse {
  return { ...r, headers: { ...extra, ...r.headers } };
}
