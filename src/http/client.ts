/**
 * The pooled HTTP client of the Destination and the follower (discovery, documents, resources, packages, WebSub
 * discovery): a kept-alive undici `Agent` (one pool per origin), not a `fetch` per resource. It adds what a harvester needs on top: timeouts (connect, headers, idle body), retries with
 * exponential backoff, jitter and `Retry-After`, redirects with a limit, a per-host connection limit and an
 * optional politeness delay, custom headers and a bearer token on every request, a User-Agent, decoding of
 * `Content-Encoding` (gzip, deflate, br), a size bound, abort signals and counters.
 *
 * Retries happen only before a response body starts: once the caller is reading a body, a failure (reset,
 * idle timeout) rejects the caller's iteration, and the caller retries the whole download with
 * {@link retryWhole} (see `install.ts`).
 *
 * @module
 */
import type { Agent, Dispatcher, EnvHttpProxyAgent, ProxyAgent } from 'undici';
import { backoffDelay, sleep } from './backoff.js';
import { loadAgents, loadClient, loadPool } from './undici.js';
import { OriginWindow } from './window.js';
import { setMaxListeners } from 'node:events';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import type { Readable, Transform } from 'node:stream';
import { ResourceSyncError } from '../core/errors.js';

/** Version string used in the default User-Agent. */
export const CLIENT_VERSION = '0.1';
/** Default User-Agent: `resourcesync/0.1 (+https://github.com/resourcesync/resourcesync)`. */
export const DEFAULT_USER_AGENT = `resourcesync/${CLIENT_VERSION} (+https://github.com/resourcesync/resourcesync)`;

/** Options of {@link HttpClient}. Every field has a safe default. */
export interface HttpClientOptions {
  /** Extra headers sent on every request (discovery included). */
  readonly headers?: Readonly<Record<string, string>>;
  /** Sent as `Authorization: Bearer <token>` on every request (dropped on a redirect to another origin). */
  readonly bearerToken?: string;
  /**
   * Where `headers` and `bearerToken` go (credentials): origins (`https://example.org:8443`), `host:port`, or host
   * names (any port). Other origins get neither. Default: every origin. The Destination passes the origin of the
   * Source's URL plus the hosts its caller names (`--token-host`), so that a mirror (`rel="duplicate"`) or a
   * resource on another origin never sees them.
   */
  readonly credentialHosts?: readonly string[];
  readonly userAgent?: string;
  /** TCP (and TLS) connect timeout (default 10 s). */
  readonly connectTimeoutMs?: number;
  /** Time from sending a request to receiving all response headers (default 30 s). */
  readonly headersTimeoutMs?: number;
  /** Longest pause between two chunks of a body (default 30 s). */
  readonly bodyIdleTimeoutMs?: number;
  /** Redirects followed per request (default 5). */
  readonly maxRedirects?: number;
  /** Retries of one request before its body starts (default 3). */
  readonly retries?: number;
  /** First backoff delay; doubles each retry, with jitter (default 250 ms). */
  readonly retryBaseDelayMs?: number;
  /** Cap of any backoff delay and of `Retry-After` (default 30 s). */
  readonly maxRetryDelayMs?: number;
  /**
   * A fixed number of connections, hence requests in flight, per origin. Default: adaptive (see window.ts): 8 at
   * first, grown while the rate of completed requests grows with it (long round trips), up to
   * {@link MAX_WINDOW} or `maxConnections`; halved on 429/503.
   */
  readonly connectionsPerHost?: number;
  /**
   * Politeness cap: most connections, hence requests in flight, to one origin, whatever else is set (it wins
   * over `connectionsPerHost` and the adaptive window). Default: none beyond the window's ceiling.
   */
  readonly maxConnections?: number;
  /** Politeness: least time between the starts of two requests to one origin (default 0). */
  readonly politenessDelayMs?: number;
  /**
   * Use HTTP/2 with an `https:` origin that offers it (ALPN): one connection carries the window's requests as
   * streams. Default true. (Cleartext h2c is not used: see `docs` of issue 14 in BENCHMARKS.md.)
   */
  readonly http2?: boolean;
  /** Extra trusted CA certificates (PEM) for `https:` origins (default: Node's). */
  readonly ca?: string | Buffer;
  /** Size bound of documents read through {@link HttpClient.get} with `maxBytes: 'document'` (default 50 MiB x 4). */
  readonly maxDocumentBytes?: number;
  /** Keep-alive time of idle connections (default 10 s). */
  readonly keepAliveTimeoutMs?: number;
  /** Default deadline of a whole request, body included (see {@link RequestInit.timeoutMs}; default none). */
  readonly requestTimeoutMs?: number;
  /**
   * An HTTP proxy: its URL (`http://proxy:3128`; requests are tunnelled with CONNECT), or `'env'` to follow
   * `HTTP_PROXY` / `HTTPS_PROXY` / `NO_PROXY`. Default: no proxy.
   */
  readonly proxy?: string;
}

/** Per-request options. */
export interface RequestInit {
  readonly headers?: Readonly<Record<string, string>>;
  readonly signal?: AbortSignal;
  /** Non-2xx statuses returned to the caller instead of thrown (e.g. `[304, 404]`). */
  readonly accept?: readonly number[];
  /** Bound of the decoded body in bytes: iteration rejects with `RS_LIMIT` past it. `'document'` = `maxDocumentBytes`. */
  readonly maxBytes?: number | 'document';
  /** Ask for and decode `Content-Encoding` gzip/deflate/br (default true). */
  readonly decompress?: boolean;
  /**
   * Deadline of the whole request, body included (default: the client's `requestTimeoutMs`, none unless set):
   * past it the request or the body iteration rejects with `RS_TIMEOUT`. Guards against a server trickling
   * bytes just fast enough to beat the idle timeout.
   */
  readonly timeoutMs?: number;
  /**
   * No retry starts at or after this time (epoch ms): a retry that would is replaced by a wait until then and the
   * failure thrown (so the caller can tell the deadline was reached). A caller
   * that retries too (whole downloads, mirrors) passes one deadline to every layer, so that retries nested inside
   * retries cannot multiply the time spent on one resource.
   */
  readonly retryUntil?: number;
}

/** A response whose body is being received. */
export interface HttpResponse {
  /** Final URL after redirects. */
  readonly url: string;
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  /**
   * The body, Content-Encoding decoded. Memory: one network chunk (or one decoded chunk) at a time. The idle
   * timeout applies between chunks (rejecting with `RS_TIMEOUT`), a reset rejects with `RS_HTTP`, more than
   * `maxBytes` with `RS_LIMIT`. Iterate it once; it must be consumed or discarded to free the connection.
   */
  readonly body: AsyncIterable<Uint8Array>;
  /** Drops the body (a small rest is drained so the connection is reused; a large one closes the connection). */
  discard(): Promise<void>;
}

/** Counters of one client. */
export interface HttpStats {
  /** Requests sent (each attempt and each redirect hop counts). */
  requests: number;
  /** Attempts repeated after a retriable failure. */
  retries: number;
  /** Body bytes received (decoded). */
  bytes: number;
  /** Redirects followed. */
  redirects: number;
  /** Requests that ended in an error thrown to the caller. */
  errors: number;
}

/** Requests in flight to one origin the adaptive window starts with. */
export const INITIAL_WINDOW = 8;
/** Ceiling of the adaptive window (requests in flight, hence HTTP/1.1 connections, to one origin). */
export const MAX_WINDOW = 64;

const REDIRECTS = new Set([301, 302, 303, 307, 308]);
/** Statuses worth another try: timeouts, rate limits and server errors (not 501 Not Implemented, 505 Version). */
function isRetryStatus(status: number): boolean {
  return status === 408 || status === 429 || (status >= 500 && status <= 599 && status !== 501 && status !== 505);
}
const RETRY_ERRORS = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'EPIPE',
  'ETIMEDOUT',
  'EAI_AGAIN',
  'ENETUNREACH',
  'EHOSTUNREACH',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_CLOSED',
]);
const TIMEOUT_ERRORS = new Set([
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'ETIMEDOUT',
]);
/** Bytes of a discarded body drained to keep its connection; past this the connection is closed instead. */
const DISCARD_DRAIN_LIMIT = 64 * 1024;

/** Caller signals whose listener limit was lifted. */
const unboundedSignals = new WeakSet<AbortSignal>();

/** HTTP status of errors thrown for a status (RS_HTTP), kept out of the message text. */
const statusOfError = new WeakMap<ResourceSyncError, number>();
/** Errors that a whole-download retry may cure (network trouble, timeouts, 5xx). */
const retriableErrors = new WeakSet<ResourceSyncError>();

/** The HTTP status of an `RS_HTTP` error thrown for a status code, else undefined. */
export function httpStatusOf(e: unknown): number | undefined {
  return e instanceof ResourceSyncError ? statusOfError.get(e) : undefined;
}

/** True when retrying the whole operation may succeed: network errors, timeouts, 408/429/5xx. */
export function isRetriable(e: unknown): boolean {
  return e instanceof ResourceSyncError && retriableErrors.has(e);
}

/** Politeness state of one origin: when the last request was let through, and the queue of those waiting. */
interface HostGate {
  last: number;
  queue: Promise<void>;
}

/**
 * A pooled HTTP client for harvesting.
 *
 * @example
 * ```ts
 * const client = new HttpClient({ bearerToken: 'secret', connectionsPerHost: 16 });
 * const res = await client.get('https://example.org/resourcelist.xml', { maxBytes: 'document' });
 * for await (const chunk of res.body) process(chunk);
 * await client.close();
 * ```
 */
export class HttpClient {
  readonly stats: HttpStats = { requests: 0, retries: 0, bytes: 0, redirects: 0, errors: 0 };
  readonly options: HttpClientOptions;
  readonly #agent: Agent | ProxyAgent | EnvHttpProxyAgent;
  /** What requests go through: the agent, behind the windows' gate when they are adaptive. */
  readonly #dispatcher: Dispatcher;
  readonly #baseHeaders: Record<string, string>;
  readonly #decodingHeaders: Record<string, string>;
  /** The same without credentials, for origins outside `credentialHosts`. */
  readonly #plainHeaders: Record<string, string>;
  readonly #plainDecodingHeaders: Record<string, string>;
  readonly #credentialHosts: ReadonlySet<string> | undefined;
  readonly #gates = new Map<string, HostGate>();
  /** Adaptive windows per origin; undefined with a fixed `connectionsPerHost`. */
  readonly #windows: Map<string, OriginWindow> | undefined;
  readonly #initialWindow: number;
  readonly #maxWindow: number;
  readonly #retries: number;
  readonly #baseDelay: number;
  readonly #maxDelay: number;
  readonly #maxRedirects: number;
  readonly #politeness: number;
  readonly #maxDocumentBytes: number;

  constructor(options: HttpClientOptions = {}) {
    this.options = options;
    const cap = Math.max(1, Math.floor(options.maxConnections ?? Number.POSITIVE_INFINITY));
    const fixed = options.connectionsPerHost;
    this.#windows = fixed === undefined ? new Map() : undefined;
    this.#maxWindow = Math.max(1, Math.min(fixed ?? MAX_WINDOW, cap));
    this.#initialWindow = Math.min(fixed ?? INITIAL_WINDOW, this.#maxWindow);
    const agentOptions = {
      connections: this.#maxWindow,
      pipelining: 1,
      allowH2: options.http2 ?? true,
      keepAliveTimeout: options.keepAliveTimeoutMs ?? 10_000,
      connect: {
        timeout: options.connectTimeoutMs ?? 10_000,
        ...(options.ca === undefined ? {} : { ca: options.ca }),
      },
      headersTimeout: options.headersTimeoutMs ?? 30_000,
      bodyTimeout: options.bodyIdleTimeoutMs ?? 30_000,
    };
    const undici = loadAgents();
    if (options.proxy === undefined || options.proxy === '')
      this.#agent = new undici.Agent(
        this.#windows === undefined ? agentOptions : { ...agentOptions, factory: this.#pool },
      );
    else if (options.proxy === 'env') this.#agent = new undici.EnvHttpProxyAgent(agentOptions);
    else {
      try {
        this.#agent = new undici.ProxyAgent({ ...agentOptions, uri: new URL(options.proxy).href, proxyTunnel: true });
      } catch (e) {
        throw new ResourceSyncError('RS_CONFIG', `bad proxy URL ${JSON.stringify(options.proxy)}`, { cause: e });
      }
    }
    this.#dispatcher = this.#windows === undefined ? this.#agent : gated(this.#agent, (o) => this.#windowOf(o));
    const plain: Record<string, string> = { 'user-agent': options.userAgent ?? DEFAULT_USER_AGENT };
    const headers: Record<string, string> = { ...plain };
    for (const [k, v] of Object.entries(options.headers ?? {})) headers[k.toLowerCase()] = v;
    if (options.bearerToken !== undefined) headers.authorization = `Bearer ${options.bearerToken}`;
    this.#baseHeaders = headers;
    this.#decodingHeaders = { ...headers, 'accept-encoding': 'gzip, deflate, br' };
    this.#plainHeaders = plain;
    this.#plainDecodingHeaders = { ...plain, 'accept-encoding': 'gzip, deflate, br' };
    this.#credentialHosts =
      options.credentialHosts === undefined
        ? undefined
        : new Set(options.credentialHosts.map((h) => h.trim().toLowerCase().replace(/\/+$/, '')));
    this.#retries = Math.max(0, options.retries ?? 3);
    this.#baseDelay = options.retryBaseDelayMs ?? 250;
    this.#maxDelay = options.maxRetryDelayMs ?? 30_000;
    this.#maxRedirects = options.maxRedirects ?? 5;
    this.#politeness = options.politenessDelayMs ?? 0;
    this.#maxDocumentBytes = options.maxDocumentBytes ?? 4 * 52_428_800;
  }

  /** Whether `url` may be sent the credentials (`headers`, `bearerToken`): see `credentialHosts`. */
  mayHaveCredentials(url: URL): boolean {
    const hosts = this.#credentialHosts;
    if (hosts === undefined) return true;
    return hosts.has(url.origin) || hosts.has(url.host) || hosts.has(url.hostname);
  }

  /**
   * How many callers should make requests at once to keep the windows full: twice the largest window of an
   * origin (so that while one request's body is processed, another waits for its slot). Read it again as the
   * run goes: it follows the adaptive window (see window.ts).
   */
  get concurrency(): number {
    if (this.#windows === undefined || this.#windows.size === 0) return 2 * this.#initialWindow;
    let max = 1;
    for (const w of this.#windows.values()) if (w.limit > max) max = w.limit;
    return 2 * max;
  }

  /** The adaptive window of `origin`. */
  #windowOf(origin: string): OriginWindow {
    const windows = this.#windows as Map<string, OriginWindow>;
    let w = windows.get(origin);
    if (w === undefined) {
      w = new OriginWindow({ initial: this.#initialWindow, ceiling: this.#maxWindow });
      windows.set(origin, w);
    }
    return w;
  }

  /**
   * The connection pool of one origin, sized to its window as the window moves: a request let through the gate
   * while every connection is busy then waits for one to free (as with a fixed pool) rather than opening another.
   * An `https:` origin gets one connection until ALPN has told whether it speaks HTTP/2: if so, that connection
   * carries the window as streams; if not, the pool grows to the window.
   */
  readonly #pool = (origin: string | URL, opts: object): Dispatcher => {
    const Pool = loadPool();
    const poolOptions = opts as NonNullable<ConstructorParameters<typeof Pool>[1]> & { allowH2?: boolean };
    const url = typeof origin === 'string' ? new URL(origin) : origin;
    const window = this.#windowOf(url.origin);
    let protocol: 'h1' | 'h2' | undefined =
      url.protocol === 'https:' && poolOptions.allowH2 === true ? undefined : 'h1';
    const pool = new Pool(origin, {
      ...poolOptions,
      factory: h2Clients(poolOptions, (h2) => {
        protocol = h2 ? 'h2' : 'h1';
        size();
      }),
    });
    const connections = Object.getOwnPropertySymbols(pool).find((k) => k.description === 'connections');
    const size = (): void => {
      if (connections !== undefined)
        (pool as unknown as Record<symbol, number>)[connections] = protocol === 'h1' ? window.limit : 1;
    };
    size();
    window.onLimit = size;
    return pool;
  };

  /** Size bound for documents (`maxDocumentBytes`). */
  get maxDocumentBytes(): number {
    return this.#maxDocumentBytes;
  }

  /**
   * GET with redirects; retries network errors, 429/503 (Retry-After honoured) and other 5xx with backoff,
   * before the body starts. A non-2xx status not in `accept` throws `RS_HTTP` naming the URL and status
   * (see {@link httpStatusOf}); timeouts throw `RS_TIMEOUT`; an abort `RS_ABORTED`.
   */
  get(url: string, init: RequestInit = {}): Promise<HttpResponse> {
    return this.#request('GET', url, init);
  }

  /** HEAD, as {@link HttpClient.get} (the body is empty). */
  head(url: string, init: RequestInit = {}): Promise<HttpResponse> {
    return this.#request('HEAD', url, init);
  }

  /** Closes every pooled connection. */
  async close(): Promise<void> {
    await this.#agent.close();
  }

  /** Closes every connection at once, failing requests in flight. */
  async destroy(): Promise<void> {
    await this.#agent.destroy();
  }

  async #request(method: 'GET' | 'HEAD', url: string, init: RequestInit): Promise<HttpResponse> {
    // One signal typically guards a whole run of concurrent requests, each adding an abort listener: that is
    // expected, not a leak, so Node's "possible memory leak" warning is turned off for it.
    if (init.signal !== undefined && !unboundedSignals.has(init.signal)) {
      unboundedSignals.add(init.signal);
      setMaxListeners(0, init.signal);
    }
    const timeoutMs = init.timeoutMs ?? this.options.requestTimeoutMs;
    if (timeoutMs === undefined) return this.#requestOnce(method, url, init, undefined);
    // A deadline: our own controller, aborted by the timer or by the caller's signal.
    const ctrl = new AbortController();
    const reason = new ResourceSyncError('RS_TIMEOUT', `no complete response within ${timeoutMs} ms`, { url });
    retriableErrors.add(reason);
    const timer = setTimeout(() => ctrl.abort(reason), timeoutMs);
    const outer = init.signal;
    const forward = (): void => ctrl.abort(outer?.reason);
    if (outer?.aborted === true) forward();
    else outer?.addEventListener('abort', forward, { once: true });
    const cleanup = (): void => {
      clearTimeout(timer);
      outer?.removeEventListener('abort', forward);
    };
    try {
      return await this.#requestOnce(method, url, { ...init, signal: ctrl.signal }, cleanup);
    } catch (e) {
      cleanup();
      throw e;
    }
  }

  async #requestOnce(
    method: 'GET' | 'HEAD',
    url: string,
    init: RequestInit,
    onDone: (() => void) | undefined,
  ): Promise<HttpResponse> {
    let current = parseHttpUrl(url);
    const decompress = init.decompress ?? true;
    // The shared default headers are used as they are unless this request adds some (or a redirect changes them).
    const headersFor = (u: URL): Record<string, string> => {
      const credentials = this.mayHaveCredentials(u);
      let h = decompress
        ? credentials
          ? this.#decodingHeaders
          : this.#plainDecodingHeaders
        : credentials
          ? this.#baseHeaders
          : this.#plainHeaders;
      if (init.headers !== undefined) {
        h = { ...h };
        for (const [k, v] of Object.entries(init.headers)) h[k.toLowerCase()] = v;
      }
      return h;
    };
    let headers = headersFor(current);
    let seen: Set<string> | undefined;
    const origin = current.origin;
    const authorization = headers.authorization;
    for (let hop = 0; ; hop++) {
      const res = await this.#attempt(method, current, headers, init);
      const location = res.headers.location;
      if (REDIRECTS.has(res.statusCode) && typeof location === 'string' && !init.accept?.includes(res.statusCode)) {
        await discardBody(res.body);
        seen ??= new Set();
        seen.add(current.href);
        let next: URL;
        try {
          next = parseHttpUrl(new URL(location, current).href);
        } catch (e) {
          throw this.#fail(
            new ResourceSyncError('RS_HTTP', `bad redirect Location ${JSON.stringify(location)}`, {
              url: current.href,
              cause: e,
            }),
          );
        }
        if (hop >= this.#maxRedirects)
          throw this.#fail(new ResourceSyncError('RS_HTTP', `more than ${this.#maxRedirects} redirects`, { url }));
        if (seen.has(next.href))
          throw this.#fail(new ResourceSyncError('RS_HTTP', `redirect loop at ${next.href}`, { url }));
        // Credentials go only to the hosts they are for (`credentialHosts`), and the Authorization header only to
        // the origin it was given for (as fetch and curl do).
        headers = { ...headersFor(next) };
        if (next.origin === origin && authorization !== undefined) headers.authorization = authorization;
        else if (next.origin !== origin) delete headers.authorization;
        this.stats.redirects++;
        current = next;
        continue;
      }
      const ok = (res.statusCode >= 200 && res.statusCode < 300) || init.accept?.includes(res.statusCode) === true;
      if (!ok) {
        await discardBody(res.body);
        const err = new ResourceSyncError('RS_HTTP', `HTTP ${res.statusCode} for ${method}`, { url: current.href });
        statusOfError.set(err, res.statusCode);
        if (isRetryStatus(res.statusCode)) retriableErrors.add(err);
        throw this.#fail(err);
      }
      return this.#wrap(current.href, res, init, decompress, onDone);
    }
  }

  /** One request with retries (before the body), politeness and timeouts. */
  async #attempt(
    method: 'GET' | 'HEAD',
    url: URL,
    headers: Record<string, string>,
    init: RequestInit,
  ): Promise<Dispatcher.ResponseData> {
    for (let attempt = 0; ; attempt++) {
      if (init.signal?.aborted === true) throw this.#fail(abortError(url.href, init.signal.reason));
      if (this.#politeness > 0)
        await this.#politely(url.origin, init.signal).catch((e: unknown) => {
          throw this.#fail(abortError(url.href, init.signal?.reason ?? e));
        });
      this.stats.requests++;
      let retryAfter: number | undefined;
      let failure: ResourceSyncError;
      try {
        const res = await this.#dispatcher.request({
          origin: url.origin,
          path: url.pathname + url.search,
          method,
          headers,
          signal: init.signal,
        });
        const status = res.statusCode;
        if (isRetryStatus(status)) retryAfter = parseRetryAfter(res.headers['retry-after'], Date.now());
        if ((status === 429 || status === 503) && this.#windows !== undefined)
          this.#windowOf(url.origin).overloaded(Math.min(this.#maxDelay, retryAfter ?? 0));
        if (!isRetryStatus(status) || attempt >= this.#retries || init.accept?.includes(status)) return res;
        await discardBody(res.body);
        failure = new ResourceSyncError('RS_HTTP', `HTTP ${res.statusCode} for ${method}`, { url: url.href });
      } catch (e) {
        failure = toResourceSyncError(e, url.href, init.signal);
        if (!retriableErrors.has(failure) || attempt >= this.#retries) throw this.#fail(failure);
      }
      const backoff = backoffDelay(attempt, this.#baseDelay, this.#maxDelay);
      const delay = retryAfter === undefined ? backoff : Math.min(this.#maxDelay, Math.max(retryAfter, 0));
      // Past the deadline: wait for it (the caller sees the time bound reached), then give up.
      const late = init.retryUntil !== undefined && Date.now() + delay >= init.retryUntil;
      if (!late) this.stats.retries++;
      await sleep(late ? Math.max(0, (init.retryUntil as number) - Date.now()) : delay, init.signal).catch(
        (e: unknown) => {
          throw this.#fail(abortError(url.href, init.signal?.reason ?? e));
        },
      );
      if (late) throw this.#fail(failure);
    }
  }

  /**
   * Waits until `politenessDelayMs` has passed since the previous request to `origin` was let through, one
   * request at a time per origin (a request let through late, e.g. after an event-loop stall, moves the next one
   * back too, so two requests never go out together).
   */
  async #politely(origin: string, signal: AbortSignal | undefined): Promise<void> {
    if (this.#politeness <= 0) return;
    let gate = this.#gates.get(origin);
    if (gate === undefined) {
      gate = { last: Number.NEGATIVE_INFINITY, queue: Promise.resolve() };
      this.#gates.set(origin, gate);
    }
    const previous = gate.queue;
    let release = (): void => undefined;
    gate.queue = new Promise<void>((r) => {
      release = r;
    });
    try {
      await previous; // it waits at most one delay
      signal?.throwIfAborted();
      const wait = gate.last + this.#politeness - Date.now();
      if (wait > 0) await sleep(wait, signal);
      gate.last = Date.now();
    } finally {
      release();
    }
  }

  #fail(e: ResourceSyncError): ResourceSyncError {
    this.stats.errors++;
    return e;
  }

  #wrap(
    url: string,
    res: Dispatcher.ResponseData,
    init: RequestInit,
    decompress: boolean,
    onDone: (() => void) | undefined,
  ): HttpResponse {
    const maxBytes =
      init.maxBytes === 'document' ? this.#maxDocumentBytes : (init.maxBytes ?? Number.POSITIVE_INFINITY);
    const encoding = String(res.headers['content-encoding'] ?? '')
      .trim()
      .toLowerCase();
    const decoder = decompress ? decoderFor(encoding) : undefined;
    const stats = this.stats;
    const signal = init.signal;
    let started = false;
    let iterator: AsyncIterator<Uint8Array> | undefined;
    const raw = res.body;
    /**
     * The body iterator, written by hand rather than as an async generator: it sits on every chunk of every
     * response, and this saves a layer of promise resumption per chunk.
     */
    function iterate(): AsyncIterator<Uint8Array> {
      let total = 0;
      let finished = false;
      let source: Readable = raw;
      if (decoder !== undefined) {
        raw.on('error', (e) => decoder.destroy(e));
        source = raw.pipe(decoder);
      }
      const inner = (source as AsyncIterable<Buffer>)[Symbol.asyncIterator]();
      const finish = (): void => {
        if (finished) return;
        finished = true;
        if (!raw.destroyed && !raw.readableEnded) raw.destroy();
        decoder?.destroy();
        onDone?.();
      };
      const fail = (e: unknown): ResourceSyncError => {
        finish();
        if (e instanceof ResourceSyncError) return e;
        return toResourceSyncError(e, url, signal, decoder !== undefined && !isNetworkError(e) ? encoding : undefined);
      };
      return {
        async next(): Promise<IteratorResult<Uint8Array>> {
          if (finished) return { done: true, value: undefined };
          let r: IteratorResult<Buffer>;
          try {
            r = await inner.next();
          } catch (e) {
            throw fail(e);
          }
          if (r.done === true) {
            finish();
            return { done: true, value: undefined };
          }
          const n = r.value.byteLength;
          total += n;
          stats.bytes += n;
          if (total > maxBytes) {
            await inner.return?.().catch(() => undefined);
            throw fail(new ResourceSyncError('RS_LIMIT', `response body larger than ${maxBytes} bytes`, { url }));
          }
          return r;
        },
        async return(): Promise<IteratorResult<Uint8Array>> {
          if (!finished) {
            finish();
            await inner.return?.().catch(() => undefined);
          }
          return { done: true, value: undefined };
        },
      };
    }
    return {
      url,
      status: res.statusCode,
      headers: res.headers,
      body: {
        [Symbol.asyncIterator]() {
          if (started) throw new ResourceSyncError('RS_HTTP', 'response body iterated twice', { url });
          started = true;
          iterator = iterate();
          return iterator;
        },
      },
      async discard() {
        if (!started) {
          started = true;
          await discardBody(raw);
          onDone?.();
          return;
        }
        await iterator?.return?.();
        if (!raw.destroyed && !raw.readableEnded) raw.destroy();
      },
    };
  }
}

/**
 * Runs `fn` (a whole download: request and body) again after retriable failures (network errors, timeouts,
 * 408/429/5xx; see {@link isRetriable}), with exponential backoff and jitter. Other errors are thrown at once.
 *
 * @example
 * ```ts
 * const bytes = await retryWhole(async () => { const r = await client.get(url); let n = 0; for await (const c of r.body) n += c.length; return n; });
 * ```
 */
export async function retryWhole<T>(
  fn: (attempt: number) => Promise<T>,
  options: {
    readonly retries?: number;
    readonly baseDelayMs?: number;
    readonly maxDelayMs?: number;
    readonly signal?: AbortSignal;
    /** No attempt starts at or after this time (epoch ms; see {@link RequestInit.retryUntil}). */
    readonly until?: number;
  } = {},
): Promise<T> {
  const retries = options.retries ?? 3;
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn(attempt);
    } catch (e) {
      if (attempt >= retries || !isRetriable(e) || options.signal?.aborted === true) throw e;
      const delay = backoffDelay(attempt, options.baseDelayMs ?? 250, options.maxDelayMs ?? 30_000);
      // Past the deadline: wait for it (the caller sees the time bound reached), then give up.
      const late = options.until !== undefined && Date.now() + delay >= options.until;
      await sleep(late ? Math.max(0, (options.until as number) - Date.now()) : delay, options.signal);
      if (late) throw e;
    }
  }
}

/**
 * Reads a whole (small) body into one buffer. Memory: the body, bounded by `maxBytes` (RS_LIMIT past it).
 */
export async function readBody(res: HttpResponse, maxBytes = Number.POSITIVE_INFINITY): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  let total = 0;
  for await (const chunk of res.body) {
    total += chunk.byteLength;
    if (total > maxBytes)
      throw new ResourceSyncError('RS_LIMIT', `response body larger than ${maxBytes} bytes`, { url: res.url });
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, total);
}

/** Parses `Retry-After` (delay-seconds or HTTP-date) into milliseconds from `now`; undefined when absent or bad. */
export function parseRetryAfter(value: string | string[] | undefined, now: number): number | undefined {
  const text = (Array.isArray(value) ? value[0] : value)?.trim();
  if (text === undefined || text === '') return undefined;
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const date = Date.parse(text);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, date - now);
}

/**
 * A factory of undici clients that carry many requests at once (as HTTP/2 streams) once their connection turned
 * out to speak HTTP/2, and one at a time over HTTP/1.1 (no pipelining): undici's `pipelining` is one setting for
 * both, so it is raised per connection when ALPN chose `h2`. The window's gate bounds the streams.
 */
function h2Clients(
  options: object,
  onProtocol: (h2: boolean) => void,
): (origin: string | URL, opts: object) => Dispatcher {
  const o = options as { connect?: Record<string, unknown>; allowH2?: boolean };
  if (o.allowH2 !== true) return (origin, opts) => new (loadClient().Client)(origin, opts);
  const { Client, buildConnector } = loadClient();
  const connect = buildConnector({ ...(o.connect ?? {}), allowH2: true } as Parameters<typeof buildConnector>[0]);
  return (origin, opts) => {
    const client = new Client(origin, {
      ...opts,
      connect: (connectOptions, callback) =>
        connect(connectOptions, (err, socket) => {
          if (err === null) {
            const h2 = (socket as { alpnProtocol?: string | false }).alpnProtocol === 'h2';
            if (h2) client.pipelining = H2_STREAMS;
            onProtocol(h2);
          }
          // biome-ignore lint/suspicious/noExplicitAny: undici's callback type is a union of two signatures
          (callback as any)(err, socket);
        }),
    });
    return client;
  };
}

/** Most streams on one HTTP/2 connection (the window bounds them first). */
const H2_STREAMS = 128;

/**
 * `agent` behind a gate: each request waits for a slot of its origin's window before it is dispatched, and gives
 * it back when its response is complete (all of it received) or failed, which is when its connection is free.
 */
function gated(agent: Dispatcher, windowOf: (origin: string) => OriginWindow): Dispatcher {
  const inner = agent.dispatch.bind(agent);
  const gate = Object.create(agent) as Dispatcher;
  gate.dispatch = (opts, handler) => {
    const window = windowOf(String(opts.origin));
    window.enqueue((slot) => inner(opts, new SlotHandler(handler as LegacyHandler, window, slot)));
    return true;
  };
  return gate;
}

/** The callbacks of undici's request handler (its legacy handler interface). */
interface LegacyHandler {
  onConnect?(abort: (err?: Error) => void, context?: object): void;
  onHeaders?(statusCode: number, headers: Buffer[], resume: () => void, statusText: string): boolean;
  onData?(chunk: Buffer): boolean;
  onComplete?(trailers: string[] | null): void;
  onError?(err: Error): void;
  onUpgrade?(statusCode: number, headers: Buffer[] | string[] | null, socket: unknown): void;
  onResponseStarted?(): void;
  onBodySent?(chunk: unknown): void;
}

/** A request's handler that gives its window slot back when the response completes or fails. */
class SlotHandler implements LegacyHandler {
  readonly #handler: LegacyHandler;
  readonly #window: OriginWindow;
  readonly #slot: number;
  /** When the request went out on a connected socket. */
  #sent: number | undefined;
  #released = false;

  constructor(handler: LegacyHandler, window: OriginWindow, slot: number) {
    this.#handler = handler;
    this.#window = window;
    this.#slot = slot;
  }

  #release(): void {
    if (this.#released) return;
    this.#released = true;
    this.#window.release(this.#slot, this.#sent);
  }

  onConnect(abort: (err?: Error) => void, context?: object): void {
    this.#sent = Date.now();
    this.#handler.onConnect?.(abort, context);
  }

  onHeaders(statusCode: number, headers: Buffer[], resume: () => void, statusText: string): boolean {
    return this.#handler.onHeaders?.(statusCode, headers, resume, statusText) ?? true;
  }

  onData(chunk: Buffer): boolean {
    return this.#handler.onData?.(chunk) ?? true;
  }

  onComplete(trailers: string[] | null): void {
    try {
      this.#handler.onComplete?.(trailers);
    } finally {
      this.#release();
    }
  }

  onError(err: Error): void {
    this.#release();
    this.#handler.onError?.(err);
  }

  onUpgrade(statusCode: number, headers: Buffer[] | string[] | null, socket: unknown): void {
    this.#release();
    this.#handler.onUpgrade?.(statusCode, headers, socket);
  }

  onResponseStarted(): void {
    this.#handler.onResponseStarted?.();
  }

  onBodySent(chunk: unknown): void {
    this.#handler.onBodySent?.(chunk);
  }
}

function parseHttpUrl(url: string): URL {
  let u: URL;
  try {
    u = new URL(url);
  } catch (e) {
    throw new ResourceSyncError('RS_HTTP', `not a URL: ${JSON.stringify(url)}`, { cause: e });
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:')
    throw new ResourceSyncError('RS_HTTP', `unsupported URL scheme ${u.protocol}`, { url });
  if (u.hash !== '') u.hash = '';
  return u;
}

function decoderFor(encoding: string): Transform | undefined {
  switch (encoding) {
    case 'gzip':
    case 'x-gzip':
      return createGunzip();
    case 'deflate':
      return createInflate();
    case 'br':
      return createBrotliDecompress();
    default:
      return undefined;
  }
}

async function discardBody(body: Readable & { dump?: (o: { limit: number }) => Promise<void> }): Promise<void> {
  try {
    if (typeof body.dump === 'function') await body.dump({ limit: DISCARD_DRAIN_LIMIT });
    else body.destroy();
  } catch {
    // A body that fails while being discarded does not matter.
  }
}

function errorCode(e: unknown): string | undefined {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

function isNetworkError(e: unknown): boolean {
  const code = errorCode(e);
  return code !== undefined && (code.startsWith('UND_ERR') || code.startsWith('E'));
}

function abortError(url: string, reason: unknown): ResourceSyncError {
  // A deadline of our own aborts with its RS_TIMEOUT error as the reason.
  if (reason instanceof ResourceSyncError && reason.code === 'RS_TIMEOUT') return reason;
  return new ResourceSyncError('RS_ABORTED', 'request aborted', { url, cause: reason });
}

/** Maps undici / node / zlib errors to ResourceSyncError codes, marking the retriable ones. */
function toResourceSyncError(
  e: unknown,
  url: string,
  signal: AbortSignal | undefined,
  decodingEncoding?: string,
): ResourceSyncError {
  if (e instanceof ResourceSyncError) return e;
  if (signal?.aborted === true) return abortError(url, signal.reason ?? e);
  const code = errorCode(e);
  const message = (e as Error | undefined)?.message ?? String(e);
  if (decodingEncoding !== undefined && decodingEncoding !== '' && code?.startsWith('Z_') === true)
    return new ResourceSyncError('RS_HTTP', `cannot decode ${decodingEncoding} body: ${message}`, { url, cause: e });
  let err: ResourceSyncError;
  if (code !== undefined && TIMEOUT_ERRORS.has(code)) {
    const what =
      code === 'UND_ERR_CONNECT_TIMEOUT' ? 'connect' : code === 'UND_ERR_HEADERS_TIMEOUT' ? 'headers' : 'body idle';
    err = new ResourceSyncError('RS_TIMEOUT', `${what} timeout`, { url, cause: e });
  } else if ((e as Error | undefined)?.name === 'AbortError' || code === 'UND_ERR_ABORTED' || code === 'ABORT_ERR') {
    err = abortError(url, e);
    return err;
  } else {
    err = new ResourceSyncError('RS_HTTP', `network error: ${code ?? ''}${code === undefined ? '' : ' '}${message}`, {
      url,
      cause: e,
    });
  }
  if (
    code !== undefined &&
    (RETRY_ERRORS.has(code) || TIMEOUT_ERRORS.has(code) || code === 'UND_ERR_RES_CONTENT_LENGTH_MISMATCH')
  )
    retriableErrors.add(err);
  return err;
}
