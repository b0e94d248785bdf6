/**
 * The Destination's side of a WebSocket notification channel (N-§6): connect to the `ws://`/`wss://` URL
 * advertised in the Capability List, parse each text frame as a notification payload, and reconnect with
 * exponential backoff and jitter whenever the connection is lost (server restart, network, closed as too slow).
 *
 * Every (re)connection yields a `connected` event: notifications sent while the client was away are not sent
 * again, so the consumer catches up from the Change Lists since its watermark. A frame that is not a valid
 * payload yields a `refused` (`malformed`) event (and is logged): the consumer catches up as well.
 *
 * Backpressure: when the consumer lets events pile up (half of `maxQueued`), the socket is paused, so the
 * server sees this client as slow and, past its bound, closes it with code 4000; the client then reconnects and
 * the consumer catches up.
 *
 * @module
 */
import { createRequire } from 'node:module';
import type WebSocket from 'ws';
import { ResourceSyncError } from '../core/errors.js';
import { EventQueue, type NotificationEvent } from './events.js';
import { backoffDelay } from '../http/backoff.js';
import { readNotification } from './payloads.js';

/**
 * `ws`, loaded on the first connection: it costs 35-80 ms to load, which every `sync` paid although only
 * `--follow` with a WebSocket channel uses it (measured cold: an import of this module went from ~80 ms to ~1 ms).
 */
let wsClass: typeof WebSocket | undefined;
function loadWebSocket(): typeof WebSocket {
  wsClass ??= createRequire(import.meta.url)('ws') as typeof WebSocket;
  return wsClass;
}
/** `WebSocket.readyState` values (RFC 6455 API, as `ws` defines them). */
const CONNECTING = 0;
const OPEN = 1;
const CLOSED = 3;

export interface ChannelClientOptions {
  /** The channel URL (`ws:` or `wss:`). */
  readonly url: string;
  /** First reconnection delay (default 250 ms), doubled per failed attempt up to `maxDelayMs` (default 30 s), jittered. */
  readonly minDelayMs?: number;
  readonly maxDelayMs?: number;
  /** Opening handshake timeout (default 10 s). */
  readonly handshakeTimeoutMs?: number;
  /** With no frame and no ping for this long, the connection is deemed dead and replaced (default 90 s; 0 = never). */
  readonly idleTimeoutMs?: number;
  /** Largest frame accepted (default 16 MiB); a larger one closes the connection (1009). */
  readonly maxPayloadBytes?: number;
  /** Events held for a slow consumer (default 10,000). */
  readonly maxQueued?: number;
  readonly headers?: Readonly<Record<string, string>>;
  readonly onLog?: (message: string) => void;
}

/**
 * A self-reconnecting channel client. Memory bound: `maxQueued` events plus one frame (`maxPayloadBytes`).
 *
 * @example
 * ```ts
 * const client = new ChannelClient({ url: 'ws://localhost:8080/resourcesync/default/change-notification' });
 * for await (const e of client.events()) {
 *   if (e.type === 'connected') await catchUp();
 *   else if (e.type === 'notification') await apply(e.notification);
 * }
 * ```
 */
export class ChannelClient {
  readonly url: string;
  readonly #options: ChannelClientOptions;
  readonly #queue: EventQueue;
  readonly #log: (message: string) => void;
  #ws: WebSocket | undefined;
  #attempt = 0;
  #everConnected = false;
  #closed = false;
  #retryTimer: NodeJS.Timeout | undefined;
  #idleTimer: NodeJS.Timeout | undefined;
  #parse: Promise<void> = Promise.resolve();
  #paused = false;
  /** Frames received and not parsed yet; past the bound the socket is paused (memory bound). */
  #parsing = 0;
  readonly #maxParsing = 64;
  readonly stats = { connects: 0, received: 0, refused: 0 };

  constructor(options: ChannelClientOptions) {
    const u = new URL(options.url);
    if (u.protocol !== 'ws:' && u.protocol !== 'wss:') {
      throw new ResourceSyncError('RS_CONFIG', `a channel URL must be ws: or wss:, not ${options.url}`);
    }
    this.url = options.url;
    this.#options = options;
    this.#log = options.onLog ?? ((): void => {});
    this.#queue = new EventQueue(options.url, options.maxQueued ?? 10_000);
    this.#queue.onHigh = () => {
      this.#paused = true;
      this.#ws?.pause();
    };
    this.#queue.onDrain = () => {
      this.#paused = false;
      this.#ws?.resume();
    };
    this.#connect();
  }

  /** True while a connection is open. */
  get connected(): boolean {
    return this.#ws?.readyState === OPEN;
  }

  /** Connections, notifications, disconnections and refusals, in order, until `close()`. */
  events(): AsyncIterableIterator<NotificationEvent> {
    return this.#queue.iterator();
  }

  /** Closes the connection (1000) and stops reconnecting; the event iteration ends. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#retryTimer);
    clearTimeout(this.#idleTimer);
    const ws = this.#ws;
    if (ws !== undefined && ws.readyState !== CLOSED) {
      const done = new Promise<void>((resolve) => ws.once('close', () => resolve()));
      if (ws.readyState === CONNECTING) ws.terminate();
      else ws.close(1000, 'client closing');
      const t = setTimeout(() => ws.terminate(), 2000);
      await done;
      clearTimeout(t);
    }
    await this.#parse;
    this.#queue.close();
  }

  #connect(): void {
    if (this.#closed) return;
    const ws = new (loadWebSocket())(this.url, {
      handshakeTimeout: this.#options.handshakeTimeoutMs ?? 10_000,
      maxPayload: this.#options.maxPayloadBytes ?? 16 * 1024 * 1024,
      perMessageDeflate: false,
      followRedirects: false,
      ...(this.#options.headers === undefined ? {} : { headers: { ...this.#options.headers } }),
    });
    this.#ws = ws;
    let opened = false;
    ws.on('open', () => {
      opened = true;
      this.#attempt = 0;
      this.stats.connects++;
      if (this.#paused) ws.pause();
      this.#touch(ws);
      const reconnect = this.#everConnected;
      this.#everConnected = true;
      this.#enqueue(() => this.#queue.push({ type: 'connected', channel: this.url, reconnect }));
    });
    ws.on('ping', () => this.#touch(ws));
    ws.on('message', (data, isBinary) => {
      this.#touch(ws);
      const bytes: Uint8Array = Array.isArray(data)
        ? Buffer.concat(data)
        : data instanceof ArrayBuffer
          ? new Uint8Array(data)
          : data;
      if (isBinary) this.#log('binary frame on a notification channel: parsing it as XML');
      this.#enqueue(async () => {
        try {
          const notification = await readNotification(bytes, { url: this.url });
          this.stats.received++;
          this.#queue.push({ type: 'notification', notification, channel: this.url, receivedAt: Date.now() });
        } catch (e) {
          const error =
            e instanceof ResourceSyncError
              ? e
              : new ResourceSyncError('RS_NOTIFICATION', String(e), { url: this.url, cause: e });
          this.stats.refused++;
          this.#log(`refused a notification: ${error.message}`);
          this.#queue.push({ type: 'refused', channel: this.url, reason: 'malformed', error });
        }
      });
    });
    ws.on('error', (e) => {
      this.#log(`channel error: ${e.message}`);
    });
    ws.on('close', (code, reasonBuf) => {
      clearTimeout(this.#idleTimer);
      if (this.#ws === ws) this.#ws = undefined;
      const reason = reasonBuf.toString('utf8') || (opened ? 'connection closed' : 'connection failed');
      if (this.#closed) return;
      const retryInMs = backoffDelay(
        this.#attempt++,
        this.#options.minDelayMs ?? 250,
        this.#options.maxDelayMs ?? 30_000,
      );
      this.#log(`channel ${opened ? 'closed' : 'unreachable'} (${code} ${reason}); reconnecting in ${retryInMs} ms`);
      if (opened) {
        this.#enqueue(() => this.#queue.push({ type: 'disconnected', channel: this.url, code, reason, retryInMs }));
      }
      this.#retryTimer = setTimeout(() => this.#connect(), retryInMs);
    });
  }

  /** Keeps events in arrival order although parsing is asynchronous. */
  #enqueue(fn: () => void | Promise<void>): void {
    this.#parsing++;
    if (this.#parsing > this.#maxParsing && !this.#paused) this.#ws?.pause();
    this.#parse = this.#parse
      .then(fn)
      .catch(() => undefined)
      .finally(() => {
        this.#parsing--;
        if (this.#parsing <= this.#maxParsing / 2 && !this.#paused) this.#ws?.resume();
      });
  }

  #touch(ws: WebSocket): void {
    const idle = this.#options.idleTimeoutMs ?? 90_000;
    if (idle <= 0) return;
    clearTimeout(this.#idleTimer);
    this.#idleTimer = setTimeout(() => {
      this.#log(`no frame or ping for ${idle} ms: replacing the connection`);
      ws.terminate();
    }, idle);
    this.#idleTimer.unref();
  }
}

/** Starts a {@link ChannelClient} (it connects at once and keeps reconnecting until closed). */
export function connectChannel(options: ChannelClientOptions): ChannelClient {
  return new ChannelClient(options);
}
