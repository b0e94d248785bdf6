/**
 * The Source's HTTP server (ANSI/NISO Z39.99-2017 §6.3), built on `node:http` with keep-alive: it serves the
 * Source Description at `/.well-known/resourcesync`, every generated document and dump, `/robots.txt`, and the
 * resources of the collection, with the discovery `Link` header (§6.3.3, Example 10) and optionally the HTML
 * `<link rel="resourcesync">` (Example 9).
 *
 * HTTP semantics (RFC 9110):
 * - Only GET and HEAD (405 with `Allow: GET, HEAD` otherwise). HEAD sends the same headers as GET, no body.
 * - `ETag` comes from the Source (`SiteFile.etag`, the stored hash); a response is never hashed. Derived
 *   representations get derived tags: `"<tag>-gzip"` when compressed, `"<tag>-rsl<hash of the link URL>"`
 *   when an HTML link was injected.
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
 * - Request targets are checked before the Source maps them (400 for dot segments, encoded `/` `\` NUL,
 *   malformed percent-encoding, raw non-ASCII); hidden (dot) segments are 404 without asking the Source. The
 *   Source (`SourceSite.resource`) remains the authority on what is inside the collection.
 * - Routing: `/robots.txt`, then the Source's documents (so a collection file cannot shadow
 *   `/.well-known/resourcesync` or `/robots.txt`), then resources (optionally `/dir/` -> `/dir/index.html`).
 *   503 + Retry-After while the Source is opening, or when a file no longer has its recorded length (the
 *   watcher is about to record the change). A 500 (a Source that throws) carries a small text body only.
 * - Timeouts: headers, whole request, idle keep-alive, and an idle-socket timeout that drops clients that stop
 *   reading (slow-client protection); a socket whose request waits for the Source (a lookup, a document being
 *   generated) is spared until its response starts.
 *   Graceful {@link SourceServer.close}: stop accepting, let in-flight responses finish until a deadline, then
 *   destroy the remaining connections.
 *
 * Memory per response: files up to 64 KiB are read whole (one read, one write); larger ones are streamed with
 * backpressure through one 64 KiB buffer (plus the socket's and zlib's buffers, bounded by their
 * highWaterMarks); HTML link injection reads the first 64 KiB. A 304 opens no file itself (a Source may hand
 * over the bytes of a small file it read while checking it, {@link SiteFile.data}: those are sent as they are).
 *
 * Cost: a GET of a small resource of the directory Source is a few synchronous system calls (open, fstat,
 * readlink of the descriptor, read, close; no thread-pool round trip), an inventory record mostly from a cache,
 * and one write (`bench/source-get.ts`).
 *
 * @module
 */
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { open } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { constants as zlibConstants, createGzip } from 'node:zlib';
import { ResourceSyncError } from '../core/errors.js';
import { type Segment, segmentsLength, sliceSegments, streamSegments } from './http/body.js';
import { evaluatePreconditions, formatHttpDate, ifRangeAllows, type Validators } from './http/conditional.js';
import { acceptsGzip, isCompressibleXml } from './http/encoding.js';
import type { GzipCache } from './http/gzip-cache.js';
import {
  deriveEtag,
  findHeadInsertion,
  HTML_PREFIX_BYTES,
  isHtml,
  resourceSyncLinkElement,
  shortTag,
} from './http/html-link.js';
import { evaluateRange, formatContentRange, formatUnsatisfiedRange } from './http/range.js';
import { checkRequestTarget, hasHiddenSegment } from './http/request-target.js';
import type { SiteFile, SourceSite } from './index.js';

/** Options of {@link createSourceServer}. All times in milliseconds. */
export interface SourceServerOptions {
  /** Inject `<link rel="resourcesync" href="<capability list>"/>` into the head of HTML resources. Default false. */
  readonly htmlLinks?: boolean;
  /**
   * File name served for a path ending in `/` (e.g. `index.html`: `/docs/` serves the resource
   * `/docs/index.html`). Default none: such paths are 404.
   */
  readonly directoryIndex?: string;
  /** `Cache-Control: public, max-age=N` on resources. Default 60; 0 gives `no-cache`. */
  readonly resourceMaxAgeSeconds?: number;
  /** Time to receive the request headers. Default 10 s. */
  readonly headersTimeoutMs?: number;
  /** Time to receive the whole request. Default 30 s. */
  readonly requestTimeoutMs?: number;
  /** How long an idle keep-alive connection is kept. Default 5 s. */
  readonly keepAliveTimeoutMs?: number;
  /** A socket with no activity (e.g. a client that stopped reading a response) for this long is destroyed. Default 60 s. */
  readonly idleTimeoutMs?: number;
  /** Connections beyond this many are refused (closed at once), so that file descriptors last. Default 1,000. */
  readonly maxConnections?: number;
  /** How long {@link SourceServer.close} waits for in-flight responses before destroying them. Default 5 s. */
  readonly closeTimeoutMs?: number;
  /** gzip level for XML documents compressed per request (1-9). Default 6. */
  readonly gzipLevel?: number;
  /**
   * Keep compressed copies of documents (see {@link GzipCache}): repeated gzip requests are then served from
   * disk with a Content-Length. Without it every gzip response is compressed on the fly.
   */
  readonly gzipCache?: GzipCache;
  /** Called once per finished (or aborted) request. */
  readonly onRequest?: (entry: RequestLogEntry) => void;
  /** Called with unexpected errors (a Source that throws, a file that vanished mid-response). */
  readonly onError?: (error: unknown, request: { readonly method: string; readonly target: string }) => void;
}

/** One line of the request log. */
export interface RequestLogEntry {
  readonly method: string;
  readonly target: string;
  readonly status: number;
  /** Bytes written to the socket for this response, headers included. */
  readonly bytes: number;
  readonly ms: number;
  /** True when the client went away (or the server destroyed the connection) before the response ended. */
  readonly aborted: boolean;
}

/** The address the server listens on. */
export interface ListeningAddress {
  readonly host: string;
  readonly port: number;
  /** `http://host:port/` (IPv6 hosts in brackets). */
  readonly url: string;
}

/** A running (or not yet listening) Source server. */
export interface SourceServer {
  /** The underlying `node:http` server (e.g. to attach WebSocket upgrades). */
  readonly httpServer: Server;
  /** Starts listening; port 0 picks a free port. Rejects with RS_CONFIG naming the port when it is in use. */
  listen(port?: number, host?: string): Promise<ListeningAddress>;
  /**
   * Stops accepting connections, closes idle keep-alive connections, lets in-flight responses finish until
   * `closeTimeoutMs`, then destroys what remains. Does not close the Source.
   */
  close(): Promise<void>;
}

const ALLOW = 'GET, HEAD';
/** Files up to this size are read whole (synchronously) and written at once, not streamed. */
const SMALL_BODY_BYTES = 64 * 1024;

/**
 * Creates the HTTP server of a Source.
 *
 * `site` may be a promise (the server can listen before the Source is open, e.g. to learn the port for the
 * base URL); requests get 503 with `Retry-After` until it resolves.
 *
 * @example
 * ```ts
 * const site = await openDirectorySource({ dir: './collection', baseUrl: 'http://localhost:8080/' });
 * const server = createSourceServer(site, { htmlLinks: true });
 * const { url } = await server.listen(8080, '127.0.0.1');
 * // ... later
 * await server.close();
 * await site.close();
 * ```
 */
export function createSourceServer(
  site: SourceSite | Promise<SourceSite>,
  options: SourceServerOptions = {},
): SourceServer {
  // A Source still opening (e.g. the server listens first so that port 0 can give the base URL) is answered
  // with 503 + Retry-After until it is ready.
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
  const closeTimeoutMs = options.closeTimeoutMs ?? 5_000;
  const maxAge = options.resourceMaxAgeSeconds ?? 60;
  const resourceCacheControl = maxAge > 0 ? `public, max-age=${Math.floor(maxAge)}` : 'public, no-cache';
  const gzipLevel = options.gzipLevel ?? 6;
  let closing = false;
  let closePromise: Promise<void> | undefined;
  const inFlight = new Set<ServerResponse>();
  /** The response being produced on each socket (from the request until it ends). */
  const responses = new WeakMap<Socket, ServerResponse>();
  /** `Link` header values by Capability List URL (one per set). */
  const linkValues = new Map<string, string>();

  const server = createServer(
    {
      headersTimeout: options.headersTimeoutMs ?? 10_000,
      requestTimeout: options.requestTimeoutMs ?? 30_000,
      keepAlive: true,
      // How often Node checks headers/request timeouts; must not exceed them.
      connectionsCheckingInterval: Math.min(1_000, options.headersTimeoutMs ?? 10_000),
    },
    (req, res) => {
      void handle(req, res);
    },
  );
  server.keepAliveTimeout = options.keepAliveTimeoutMs ?? 5_000;
  server.maxConnections = options.maxConnections ?? 1_000;
  // Node arms this idle timeout on every socket and re-arms it for every request and on every read and write.
  server.setTimeout(options.idleTimeoutMs ?? 60_000);
  server.on('timeout', (socket: Socket) => {
    // While the Source looks up or generates (a cold Resource List of a million entries takes a while), the
    // socket is quiet through no fault of the client: spared. The timer starts again with the response's first
    // write. Any other idle socket (a client that stopped reading, an idle keep-alive connection) is destroyed,
    // as Node does without this listener.
    const res = responses.get(socket);
    if (res !== undefined && !res.headersSent && !res.destroyed) return;
    socket.destroy();
  });
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    // A response is being written on this socket (e.g. junk after a `Connection: close` request): let it finish;
    // the parser will not read another request from this socket, so it closes after that response.
    if (responses.has(socket)) return;
    if (!socket.writable || err.code === 'ECONNRESET' || err.code === 'HPE_CLOSED_CONNECTION') {
      socket.destroy();
      return;
    }
    const status = err.code === 'HPE_HEADER_OVERFLOW' ? 431 : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
    const text =
      status === 431 ? 'Request Header Fields Too Large' : status === 408 ? 'Request Timeout' : 'Bad Request';
    const body = `${status} ${text}\n`;
    socket.end(
      `HTTP/1.1 ${status} ${text}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const onRequest = options.onRequest;
    const started = onRequest === undefined ? 0 : performance.now();
    const method = req.method ?? 'GET';
    const target = req.url ?? '/';
    const socket = req.socket;
    const writtenBefore = socket.bytesWritten;
    inFlight.add(res);
    responses.set(socket, res);
    res.on('close', () => {
      inFlight.delete(res);
      if (responses.get(socket) === res) responses.delete(socket);
      onRequest?.({
        method,
        target,
        status: res.statusCode,
        bytes: socket.bytesWritten - writtenBefore,
        ms: Math.round(performance.now() - started),
        aborted: !res.writableFinished,
      });
      // A response that ends during close() leaves an idle keep-alive socket: close it now.
      if (closing) setImmediate(() => server.closeIdleConnections());
    });
    if (closing) res.setHeader('Connection', 'close');
    res.setHeader('X-Content-Type-Options', 'nosniff');
    try {
      await route(req, res, method, target);
    } catch (e) {
      options.onError?.(e, { method, target });
      if (!res.headersSent) {
        // Drop what was set for the response that failed (ETag, Link, ...).
        for (const h of res.getHeaderNames()) res.removeHeader(h);
        if (closing) res.setHeader('Connection', 'close');
        res.setHeader('X-Content-Type-Options', 'nosniff');
        sendText(res, method, 500, 'Internal Server Error');
      } else res.destroy();
    }
  }

  async function route(req: IncomingMessage, res: ServerResponse, method: string, target: string): Promise<void> {
    if (method !== 'GET' && method !== 'HEAD') {
      res.setHeader('Allow', ALLOW);
      sendText(res, method, 405, `Method Not Allowed: ${method} (allowed: ${ALLOW})`);
      return;
    }
    const checked = checkRequestTarget(target);
    if (!checked.ok) {
      sendText(res, method, 400, `Bad Request: ${checked.reason}`);
      return;
    }
    const { pathname } = checked;
    const site = current;
    if (site === undefined) {
      res.setHeader('Retry-After', '2');
      sendText(res, method, 503, `Service Unavailable: the Source ${startFailed ? 'failed to start' : 'is starting'}`);
      return;
    }
    if (pathname === '/robots.txt') {
      const body = await site.robotsTxt();
      res.setHeader('Cache-Control', 'no-cache');
      sendText(res, method, 200, body, false);
      return;
    }
    // A generated file can be replaced by a newer generation (and a collection file deleted) between the
    // lookup and the open: then the Source is asked once more.
    for (let attempt = 1; ; attempt++) {
      const selected = await select(site, pathname);
      if (selected === undefined) {
        sendText(res, method, 404, `Not Found: ${pathname}`);
        return;
      }
      const { file, kind } = selected;
      const capabilityList = kind === 'resource' ? site.capabilityListUrl(resourcePathOf(pathname)) : undefined;
      const sent = await sendFile(req, res, method, file, kind, capabilityList);
      if (sent !== 'gone') return;
      if (attempt >= 2) {
        options.onError?.(new ResourceSyncError('RS_IO', `cannot open ${file.path}: it vanished`), { method, target });
        sendText(res, method, 404, `Not Found: ${pathname}`);
        return;
      }
    }
  }

  /** The resource a pathname names: with `directoryIndex`, `/dir/` names `/dir/<index>`. */
  function resourcePathOf(pathname: string): string {
    return options.directoryIndex !== undefined && pathname.endsWith('/')
      ? `${pathname}${encodeURIComponent(options.directoryIndex)}`
      : pathname;
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
   * Answers with `file`. The file is opened only when bytes are needed (not for a 304 or 412, unless an HTML
   * link must be placed first). Returns 'gone' when it vanished before anything was sent (the caller looks
   * it up again).
   */
  async function sendFile(
    req: IncomingMessage,
    res: ServerResponse,
    method: string,
    file: SiteFile,
    kind: 'document' | 'resource',
    capabilityList: string | undefined,
  ): Promise<'sent' | 'gone'> {
    let handle: FileHandle | undefined;
    let opened: Opened | undefined;
    const linkBefore = res.getHeader('Link');
    /**
     * Opens the file once (a small one is read whole, synchronously: microseconds on a local disk, far less
     * than four round trips through the thread pool); 'gone' when it no longer exists, 'changed' when it no
     * longer has the recorded length (it would not match its ETag).
     */
    const openFile = async (): Promise<Opened | 'gone' | 'changed'> => {
      if (opened !== undefined) return opened;
      if (file.data !== undefined && file.data.length === file.length) {
        // Read by the Source from the descriptor it checked.
        opened = { data: file.data };
        return opened;
      }
      try {
        if (file.length <= SMALL_BODY_BYTES) {
          const data = readSmallFile(file.path, file.length);
          if (data === undefined) return 'changed';
          opened = { data };
          return opened;
        }
        handle = await open(file.path, 'r');
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'ENOENT') return 'gone';
        throw e;
      }
      if ((await handle.stat()).size !== file.length) return 'changed';
      opened = { handle };
      return opened;
    };
    const changing = () => {
      // The watcher records the change shortly; ask the client to come back.
      res.setHeader('Retry-After', '1');
      sendText(res, method, 503, `Service Unavailable: ${req.url ?? ''} is changing, retry shortly`);
    };
    try {
      let plan: Segment[] = [{ kind: 'file', start: 0, end: file.length }];
      let etag = file.etag;
      const alsoMatches: string[] = [];
      if (kind === 'resource' && capabilityList !== undefined) {
        if (options.htmlLinks === true && isHtml(file.contentType)) {
          const h = await openFile();
          if (h === 'gone') return 'gone';
          if (h === 'changed') {
            changing();
            return 'sent';
          }
          const prefixLength = Math.min(HTML_PREFIX_BYTES, file.length);
          let prefix: Buffer;
          if ('data' in h) prefix = h.data.subarray(0, prefixLength);
          else {
            prefix = Buffer.alloc(prefixLength);
            const { bytesRead } = await h.handle.read(prefix, 0, prefixLength, 0);
            prefix = prefix.subarray(0, bytesRead);
          }
          const at = findHeadInsertion(prefix);
          if (at !== undefined) {
            const link = Buffer.from(resourceSyncLinkElement(capabilityList), 'utf8');
            plan = [
              { kind: 'file', start: 0, end: at },
              { kind: 'bytes', data: link },
              { kind: 'file', start: at, end: file.length },
            ];
            etag = deriveEtag(file.etag, `rsl${shortTag(capabilityList)}`);
          }
        }
        // Appended: a request handler mounted before this one (notifications) may have set Link values too.
        let link = linkValues.get(capabilityList);
        if (link === undefined) {
          link = `<${capabilityList}>; rel="resourcesync"`;
          if (linkValues.size >= 1000) linkValues.clear();
          linkValues.set(capabilityList, link);
        }
        res.appendHeader('Link', link);
      }
      const length = segmentsLength(plan);
      const rangeHeader = req.headers.range;
      const gzip =
        kind === 'document' &&
        isCompressibleXml(file.contentType) &&
        rangeHeader === undefined &&
        acceptsGzip(req.headers['accept-encoding']);
      if (gzip) {
        alsoMatches.push(etag);
        etag = deriveEtag(etag, 'gzip');
      }
      const validators: Validators = { etag, alsoMatches, lastModified: file.lastModified.getTime() };

      res.setHeader('Content-Type', file.contentType);
      res.setHeader('ETag', etag);
      res.setHeader('Last-Modified', formatHttpDate(file.lastModified));
      res.setHeader('Cache-Control', kind === 'document' ? 'no-cache' : resourceCacheControl);
      if (kind === 'document' && isCompressibleXml(file.contentType)) res.setHeader('Vary', 'Accept-Encoding');
      res.setHeader('Accept-Ranges', 'bytes');

      const outcome = evaluatePreconditions(
        {
          method,
          ifMatch: req.headers['if-match'],
          ifNoneMatch: req.headers['if-none-match'],
          ifModifiedSince: req.headers['if-modified-since'],
          ifUnmodifiedSince: req.headers['if-unmodified-since'],
        },
        validators,
      );
      if (outcome === 'not-modified') {
        res.removeHeader('Content-Type');
        res.removeHeader('Accept-Ranges');
        res.writeHead(304);
        res.end();
        return 'sent';
      }
      if (outcome === 'precondition-failed') {
        res.removeHeader('Accept-Ranges');
        sendText(res, method, 412, `Precondition Failed: ${req.url ?? ''}`);
        return 'sent';
      }

      const h = await openFile();
      if (h === 'gone') {
        // Undo this attempt's headers (a handler mounted before ours may have set a Link value: keep that).
        for (const name of ['content-type', 'etag', 'last-modified', 'cache-control', 'vary', 'accept-ranges']) {
          res.removeHeader(name);
        }
        if (linkBefore === undefined) res.removeHeader('Link');
        else res.setHeader('Link', linkBefore);
        return 'gone';
      }
      if (h === 'changed') {
        for (const name of ['etag', 'last-modified', 'accept-ranges', 'content-type', 'vary']) res.removeHeader(name);
        changing();
        return 'sent';
      }

      let status = 200;
      if (rangeHeader !== undefined && ifRangeAllows(headerValue(req, 'if-range'), validators)) {
        const r = evaluateRange(rangeHeader, length);
        if (r.kind === 'unsatisfiable') {
          res.setHeader('Content-Range', formatUnsatisfiedRange(length));
          for (const name of ['ETag', 'Last-Modified', 'Accept-Ranges', 'Content-Type']) res.removeHeader(name);
          sendText(res, method, 416, `Range Not Satisfiable: ${rangeHeader} (length ${length})`);
          return 'sent';
        }
        if (r.kind === 'single') {
          status = 206;
          plan = sliceSegments(plan, r.range.start, r.range.end + 1);
          res.setHeader('Content-Range', formatContentRange(r.range, length));
        }
      }

      if (gzip) {
        await sendGzip(res, method, status, file, h);
        return 'sent';
      }
      const bodyLength = segmentsLength(plan);
      res.setHeader('Content-Length', bodyLength);
      if (method === 'HEAD' || bodyLength === 0) {
        res.writeHead(status);
        res.end();
        return 'sent';
      }
      if ('data' in h) {
        // A small file: one write (memory: SMALL_BODY_BYTES plus an injected link).
        res.writeHead(status);
        const only = plan.length === 1 ? plan[0] : undefined;
        const whole = only?.kind === 'file' && only.start === 0 && only.end === h.data.length;
        res.end(whole ? h.data : materialize(plan, h.data));
        return 'sent';
      }
      res.writeHead(status);
      const only = plan.length === 1 ? plan[0] : undefined;
      if (only?.kind === 'file') {
        await pipeline(h.handle.createReadStream({ start: only.start, end: only.end - 1, autoClose: false }), res);
      } else {
        await pipeline(streamSegments(h.handle, plan), res);
      }
      return 'sent';
    } catch (e) {
      if (isClientGone(e, res)) return 'sent';
      throw e;
    } finally {
      await handle?.close();
    }
  }

  /** A gzip-encoded XML document: from the cache of compressed copies when there is one, else on the fly. */
  async function sendGzip(
    res: ServerResponse,
    method: string,
    status: number,
    file: SiteFile,
    source: Opened,
  ): Promise<void> {
    res.setHeader('Content-Encoding', 'gzip');
    const cached = options.gzipCache?.lookup(file);
    // Evicted between lookup and open: compress on the fly instead.
    const cachedHandle = cached && (await open(cached.path, 'r').catch(() => undefined));
    if (cached && cachedHandle) {
      try {
        res.setHeader('Content-Length', cached.length);
        res.writeHead(status);
        if (method === 'HEAD') res.end();
        else await pipeline(cachedHandle.createReadStream({ autoClose: false }), res);
      } finally {
        await cachedHandle.close();
      }
      return;
    }
    res.writeHead(status);
    if (method === 'HEAD') {
      res.end();
      return;
    }
    const stream =
      'data' in source
        ? Readable.from([source.data])
        : source.handle.createReadStream({ start: 0, end: Math.max(0, file.length - 1), autoClose: false });
    await pipeline(stream, createGzip({ level: gzipLevel, flush: zlibConstants.Z_NO_FLUSH }), res);
  }

  function listen(port = 0, host = '127.0.0.1'): Promise<ListeningAddress> {
    return new Promise((resolve, reject) => {
      const onError = (e: NodeJS.ErrnoException) => {
        server.off('listening', onListening);
        if (e.code === 'EADDRINUSE') {
          reject(new ResourceSyncError('RS_CONFIG', `port ${port} on ${host} is already in use`, { cause: e }));
        } else if (e.code === 'EACCES') {
          reject(
            new ResourceSyncError('RS_CONFIG', `no permission to listen on port ${port} on ${host}`, { cause: e }),
          );
        } else if (e.code === 'EADDRNOTAVAIL' || e.code === 'ENOTFOUND') {
          reject(new ResourceSyncError('RS_CONFIG', `cannot listen on host ${host}: ${e.code}`, { cause: e }));
        } else reject(new ResourceSyncError('RS_IO', `cannot listen on ${host}:${port}: ${e.message}`, { cause: e }));
      };
      const onListening = () => {
        server.off('error', onError);
        const a = server.address() as AddressInfo;
        const h = a.family === 'IPv6' ? `[${a.address}]` : a.address;
        resolve({ host: a.address, port: a.port, url: `http://${h}:${a.port}/` });
      };
      server.once('error', onError);
      server.once('listening', onListening);
      server.listen(port, host);
    });
  }

  function close(): Promise<void> {
    if (closePromise) return closePromise;
    closing = true;
    closePromise = new Promise<void>((resolve) => {
      if (!server.listening) {
        server.closeAllConnections();
        resolve();
        return;
      }
      let timer: NodeJS.Timeout | undefined;
      server.close(() => {
        if (timer) clearTimeout(timer);
        resolve();
      });
      server.closeIdleConnections();
      timer = setTimeout(() => {
        for (const res of inFlight) res.destroy();
        server.closeAllConnections();
      }, closeTimeoutMs);
    });
    return closePromise;
  }

  return { httpServer: server, listen, close };
}

/** An opened file: a small one read whole, or a handle to stream from. */
type Opened = { readonly data: Buffer } | { readonly handle: FileHandle };

/** Reads a small file whole, synchronously; undefined when its length is no longer `length`. */
function readSmallFile(path: string, length: number): Buffer | undefined {
  const fd = openSync(path, 'r');
  try {
    if (fstatSync(fd).size !== length) return undefined;
    const data = Buffer.allocUnsafe(length);
    let at = 0;
    while (at < length) {
      const n = readSync(fd, data, at, length - at, at);
      if (n === 0) return undefined;
      at += n;
    }
    return data;
  } finally {
    closeSync(fd);
  }
}

/** The bytes a body plan stands for, with file segments taken from `data` (the whole file). */
function materialize(plan: readonly Segment[], data: Buffer): Buffer {
  return Buffer.concat(plan.map((seg) => (seg.kind === 'file' ? data.subarray(seg.start, seg.end) : seg.data)));
}

/** A request header as one string (repeated fields joined with ", "). */
function headerValue(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v.join(', ') : v;
}

/** A small text/plain response (errors, robots.txt). */
function sendText(res: ServerResponse, method: string, status: number, text: string, newline = true): void {
  const body = newline && !text.endsWith('\n') ? `${text}\n` : text;
  res.statusCode = status;
  res.setHeader('Content-Type', 'text/plain; charset=utf-8');
  res.setHeader('Content-Length', Buffer.byteLength(body));
  if (status >= 400) res.setHeader('Cache-Control', 'no-store');
  res.end(method === 'HEAD' ? undefined : body);
}

/** True for the errors a pipeline ends with when the client went away or the socket was destroyed. */
function isClientGone(e: unknown, res: ServerResponse): boolean {
  const code = (e as NodeJS.ErrnoException | undefined)?.code;
  return (
    res.destroyed ||
    code === 'ERR_STREAM_PREMATURE_CLOSE' ||
    code === 'ECONNRESET' ||
    code === 'EPIPE' ||
    code === 'ERR_STREAM_DESTROYED'
  );
}
