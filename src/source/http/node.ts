/**
 * The Node adapter of the Source's request handler ({@link SourceHandler}): a `node:http` server with
 * keep-alive, timeouts, a connection limit, a request log and a graceful close. All HTTP semantics are the
 * handler's; this module only moves requests in and responses out ({@link writeNodeResponse}, which also
 * takes a `node:http2` compatibility response, so an HTTP/2 adapter is the server set-up alone).
 *
 * - Timeouts: headers, whole request, idle keep-alive, and an idle-socket timeout that drops clients that stop
 *   reading (slow-client protection); a socket whose request waits for the handler (a lookup, a document being
 *   generated) is spared until its response starts.
 * - Malformed requests the parser refuses get 400 (431 for oversized headers, 408 for a request that timed
 *   out) with `Connection: close`.
 * - Graceful {@link SourceServer.close}: stop accepting, let in-flight responses finish until a deadline, then
 *   destroy the remaining connections.
 *
 * Memory per response: what the handler's body holds (see `handler.ts`) plus the socket's buffers; a body is
 * pulled with backpressure (`stream.pipeline`), never buffered here.
 *
 * @module
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createSecureServer, type Http2ServerRequest, type Http2ServerResponse } from 'node:http2';
import type { AddressInfo, Socket } from 'node:net';
import { pipeline } from 'node:stream/promises';
import { ResourceSyncError } from '../../core/errors.js';
import type { SourceHandler, SourceRequest, SourceResponse } from './handler.js';

/** Options of {@link createNodeServer}. All times in milliseconds. */
export interface NodeServerOptions {
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
  /**
   * Serve over TLS with this certificate and key (PEM), offering HTTP/2 and HTTP/1.1 by ALPN: a `node:http2`
   * secure server with `allowHTTP1`, the same handler behind both. The idle-socket timeout and the 400/408/431
   * answers to malformed requests are those of `node:http2` then. Default: plain HTTP/1.1.
   */
  readonly tls?: { readonly cert: string | Buffer; readonly key: string | Buffer };
  /** Called once per finished (or aborted) request. */
  readonly onRequest?: (entry: RequestLogEntry) => void;
  /** Called with errors while a response body is sent (a file that vanished or shrank mid-response). */
  readonly onError?: (error: unknown, request: { readonly method: string; readonly target: string }) => void;
}

/** One line of the request log. */
export interface RequestLogEntry {
  readonly method: string;
  readonly target: string;
  readonly status: number;
  /** Bytes written to the socket for this response, headers included (0 over HTTP/2: not counted per stream). */
  readonly bytes: number;
  readonly ms: number;
  /** True when the client went away (or the server destroyed the connection) before the response ended. */
  readonly aborted: boolean;
  /** The request's HTTP version: `1.1`, or `2.0` (over TLS, see {@link NodeServerOptions.tls}). */
  readonly version?: string;
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
  /** The request handler it serves: mount routes on it ({@link SourceHandler.mount}), or call it in process. */
  readonly handler: SourceHandler;
  /**
   * The underlying `node:http` server (e.g. to attach WebSocket upgrades); with `tls`, the `node:http2` secure
   * server (its HTTP/1.1 connections emit `upgrade` as a `node:http` server does).
   */
  readonly httpServer: Server;
  /** Starts listening; port 0 picks a free port. Rejects with RS_CONFIG naming the port when it is in use. */
  listen(port?: number, host?: string): Promise<ListeningAddress>;
  /**
   * Stops accepting connections, closes idle keep-alive connections, lets in-flight responses finish until
   * `closeTimeoutMs`, then destroys what remains. Does not close the Source.
   */
  close(): Promise<void>;
}

/**
 * Serves `handler` over `node:http`.
 *
 * @example
 * ```ts
 * const server = createNodeServer(createSourceHandler(site), { idleTimeoutMs: 30_000 });
 * const { url } = await server.listen(8080, '127.0.0.1');
 * ```
 */
export function createNodeServer(handler: SourceHandler, options: NodeServerOptions = {}): SourceServer {
  const closeTimeoutMs = options.closeTimeoutMs ?? 5_000;
  let closing = false;
  let closePromise: Promise<void> | undefined;
  const inFlight = new Set<ServerResponse>();
  /** The response being produced on each socket (from the request until it ends). */
  const responses = new WeakMap<Socket, ServerResponse>();
  /** Abort signals handed to routes, of requests in flight: aborted by close() (long-lived streams end). */
  const signals = new Set<AbortController>();

  const tls = options.tls;
  /** Connections of the TLS server (no closeAllConnections there). */
  const tlsSockets = new Set<Socket>();
  const server: Server =
    tls === undefined
      ? createServer(
          {
            headersTimeout: options.headersTimeoutMs ?? 10_000,
            requestTimeout: options.requestTimeoutMs ?? 30_000,
            keepAlive: true,
            // How often Node checks headers/request timeouts; must not exceed them.
            connectionsCheckingInterval: Math.min(1_000, options.headersTimeoutMs ?? 10_000),
          },
          (req, res) => {
            void serve(req, res);
          },
        )
      : (createSecureServer({ cert: tls.cert, key: tls.key, allowHTTP1: true }, (req, res) => {
          void serve(req as unknown as IncomingMessage, res as unknown as ServerResponse);
        }) as unknown as Server);
  server.keepAliveTimeout = options.keepAliveTimeoutMs ?? 5_000;
  server.maxConnections = options.maxConnections ?? 1_000;
  if (tls !== undefined)
    server.on('secureConnection', (socket: Socket) => {
      tlsSockets.add(socket);
      socket.once('close', () => tlsSockets.delete(socket));
    });
  // Node arms this idle timeout on every socket and re-arms it for every request and on every read and write.
  else server.setTimeout(options.idleTimeoutMs ?? 60_000);
  server.on('timeout', (socket: Socket | undefined) => {
    if (socket === undefined) return;
    // While the handler looks up or generates (a cold Resource List of a million entries takes a while), the
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

  async function serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const onRequest = options.onRequest;
    const started = onRequest === undefined ? 0 : performance.now();
    const method = req.method ?? 'GET';
    const target = req.url ?? '/';
    const socket = req.socket;
    // Over HTTP/2 the socket is the session's, whose count is not the stream's: 0 then.
    const written = (): number => (typeof socket.bytesWritten === 'number' ? socket.bytesWritten : 0);
    const writtenBefore = written();
    inFlight.add(res);
    responses.set(socket, res);
    res.on('close', () => {
      inFlight.delete(res);
      if (responses.get(socket) === res) responses.delete(socket);
      onRequest?.({
        method,
        target,
        status: res.statusCode,
        bytes: written() - writtenBefore,
        ms: Math.round(performance.now() - started),
        aborted: !res.writableFinished,
        version: req.httpVersion,
      });
      // A response that ends during close() leaves an idle keep-alive socket: close it now.
      if (closing && tls === undefined) setImmediate(() => server.closeIdleConnections());
      else if (closing && inFlight.size === 0) for (const s of tlsSockets) s.destroy();
    });
    const response = await handler.handle(nodeRequest(req, res, method, target, signals));
    if (closing) res.setHeader('Connection', 'close');
    await writeNodeResponse(res, method, response, (e) => options.onError?.(e, { method, target }));
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
        resolve({ host: a.address, port: a.port, url: `${tls === undefined ? 'http' : 'https'}://${h}:${a.port}/` });
      };
      server.once('error', onError);
      server.once('listening', onListening);
      server.listen(port, host);
    });
  }

  function close(): Promise<void> {
    if (closePromise) return closePromise;
    closing = true;
    for (const c of signals) c.abort();
    closePromise = new Promise<void>((resolve) => {
      const closeAll = (): void => {
        if (tls === undefined) server.closeAllConnections();
        else for (const s of tlsSockets) s.destroy();
      };
      if (!server.listening) {
        closeAll();
        resolve();
        return;
      }
      let timer: NodeJS.Timeout | undefined;
      server.close(() => {
        if (timer) clearTimeout(timer);
        resolve();
      });
      if (tls === undefined) server.closeIdleConnections();
      // HTTP/2 sessions and idle TLS connections: nothing to wait for but responses in flight.
      else if (inFlight.size === 0) closeAll();
      timer = setTimeout(() => {
        for (const res of inFlight) res.destroy();
        closeAll();
      }, closeTimeoutMs);
    });
    return closePromise;
  }

  return { handler, httpServer: server, listen, close };
}

/**
 * The {@link SourceRequest} of a Node request (also a `node:http2` compatibility request). The abort signal
 * is made only when a route asks for it (most requests never do): aborted when the response closes (the
 * client went away, or it ended), or by the server's close() while it is in `live`.
 */
export function nodeRequest(
  req: IncomingMessage | Http2ServerRequest,
  res: ServerResponse | Http2ServerResponse,
  method: string,
  target: string,
  live?: Set<AbortController>,
): SourceRequest {
  let controller: AbortController | undefined;
  return {
    method,
    target,
    headers: req.headers,
    body: req,
    get signal(): AbortSignal {
      if (controller === undefined) {
        const c = new AbortController();
        controller = c;
        if (res.destroyed || res.writableFinished) c.abort();
        else {
          live?.add(c);
          res.once('close', () => {
            live?.delete(c);
            c.abort();
          });
        }
      }
      return controller.signal;
    },
  };
}

/**
 * Writes a {@link SourceResponse}: its headers (a `Link` value set earlier on `res`, e.g. by a request listener
 * mounted before the handler, is kept and ours appended), then its body with backpressure; calls the
 * response's `dispose` whatever happens. An error while the body is sent (other than the client going away)
 * goes to `onError` and destroys the response (a short body under a Content-Length is never sent as complete).
 */
export async function writeNodeResponse(
  res: ServerResponse | Http2ServerResponse,
  method: string,
  response: SourceResponse,
  onError: (error: unknown) => void,
): Promise<void> {
  try {
    for (const [name, value] of Object.entries(response.headers)) {
      const before = name === 'link' ? res.getHeader('link') : undefined;
      if (before === undefined) res.setHeader(name, value);
      else res.setHeader(name, [...asList(before), ...asList(value)]);
    }
    res.writeHead(response.status);
    const body = response.body;
    if (body === undefined || method === 'HEAD') res.end();
    else if (body instanceof Uint8Array) res.end(body);
    else await pipeline(body, res as NodeJS.WritableStream);
  } catch (e) {
    if (!isClientGone(e, res)) {
      onError(e);
      res.destroy();
    }
  } finally {
    await response.dispose?.();
  }
}

function asList(v: string | number | readonly string[]): string[] {
  return typeof v === 'object' ? [...v] : [String(v)];
}

/** True for the errors a pipeline ends with when the client went away or the socket was destroyed. */
function isClientGone(e: unknown, res: ServerResponse | Http2ServerResponse): boolean {
  const code = (e as NodeJS.ErrnoException | undefined)?.code;
  return (
    res.destroyed ||
    code === 'ERR_STREAM_PREMATURE_CLOSE' ||
    code === 'ECONNRESET' ||
    code === 'EPIPE' ||
    code === 'ERR_STREAM_DESTROYED'
  );
}
