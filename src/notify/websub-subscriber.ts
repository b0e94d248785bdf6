/**
 * The subscriber side of WebSub for a ResourceSync Destination (Change Notification 1.0.1 §4.2–§4.4; W3C WebSub
 * §5, §7, §8): a callback listener of its own, a subscription to one topic at one hub, verification of intent
 * answered only for what this subscriber asked, `X-Hub-Signature` checked in constant time, payloads parsed with
 * the reader, leases renewed before they expire.
 *
 * Refusals follow WebSub §8: a delivery with a bad or missing signature is acknowledged with 2xx but its content
 * is ignored (and reported as a `refused` event); so is a payload that does not parse (retrying it would not
 * help). Each refusal is a signal for the consumer to catch up from the Change List.
 *
 * Every (re)subscription verified by the hub, renewals included, yields a `connected` event: changes made while
 * the subscription was not in place are not pushed again, so the consumer catches up from its watermark.
 *
 * @module
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Dispatcher } from 'undici';
import { isResourceSyncError, ResourceSyncError } from '../core/errors.js';
import { EventQueue, type NotificationEvent } from './events.js';
import { backoffDelay, sleep } from '../http/backoff.js';
import { findLink } from '../http/link.js';
import { createOutboundAgent, sendRequest } from '../http/outbound.js';
import { isHttpUrl, readBody, verifySignature } from './http-util.js';
import { readNotification } from './payloads.js';

export interface WebSubSubscriberOptions {
  readonly hubUrl: string;
  readonly topicUrl: string;
  /** Port of the callback listener (default 0: any free port) and its address (default 127.0.0.1). */
  readonly port?: number;
  readonly host?: string;
  /**
   * Public callback URL given to the hub (when behind a proxy or NAT). Default: `http://<host>:<port><path>`.
   * Its path must be `path`.
   */
  readonly callbackUrl?: string;
  /** Path of the callback (default `/websub/<random>`: an unguessable path, WebSub §5.1 advice). */
  readonly path?: string;
  /** `hub.secret` for signed deliveries (default: 32 random bytes, hex); `false` for none (not advised). */
  readonly secret?: string | false;
  /** Lease to ask for (default: the hub's choice). */
  readonly leaseSeconds?: number;
  /** Renew after this fraction of the granted lease (default 0.8). */
  readonly renewAt?: number;
  /** How long `subscribe()` waits for the hub's verification of intent (default 30 s). */
  readonly verifyTimeoutMs?: number;
  /** Largest payload accepted (default 16 MiB): larger deliveries are answered 413. */
  readonly maxPayloadBytes?: number;
  /** Events held for a slow consumer (default 10,000; see `EventQueue`). */
  readonly maxQueued?: number;
  /**
   * Delay between answering the hub's verification and reporting the subscription (`connected`, `subscribe()`
   * resolving), so the hub has stored it (default 50 ms).
   */
  readonly settleMs?: number;
  /** Retries of a subscription request that fails with a network error or 5xx (default 5). */
  readonly retries?: number;
  /** Where refusals and renewal failures are logged (default: nowhere). */
  readonly onLog?: (message: string) => void;
  readonly dispatcher?: Dispatcher;
}

interface Pending {
  readonly mode: 'subscribe' | 'unsubscribe';
  readonly resolve: (leaseSeconds: number) => void;
  readonly reject: (e: Error) => void;
}

/**
 * A WebSub subscriber to one topic. `events()` yields {@link NotificationEvent}s; memory bound: `maxQueued`
 * events plus one payload being read (at most `maxPayloadBytes`).
 *
 * @example
 * ```ts
 * const sub = await WebSubSubscriber.start({ hubUrl, topicUrl, port: 8099 });
 * for await (const e of sub.events()) if (e.type === 'notification') apply(e.notification);
 * ```
 */
export class WebSubSubscriber {
  readonly hubUrl: string;
  readonly topicUrl: string;
  readonly #options: WebSubSubscriberOptions;
  readonly #secret: string | undefined;
  readonly #path: string;
  readonly #queue: EventQueue;
  readonly #dispatcher: Dispatcher;
  readonly #ownDispatcher: boolean;
  readonly #log: (message: string) => void;
  #server: Server | undefined;
  #callbackUrl: string | undefined;
  #want: 'subscribe' | 'unsubscribe' | undefined;
  #pending: Pending | undefined;
  #renewTimer: NodeJS.Timeout | undefined;
  #verifiedCount = 0;
  #closed = false;
  readonly stats = { received: 0, refused: 0, verified: 0 };

  constructor(options: WebSubSubscriberOptions) {
    if (!isHttpUrl(options.hubUrl))
      throw new ResourceSyncError('RS_CONFIG', `the hub must be an absolute http(s) URL: ${options.hubUrl}`);
    if (!isHttpUrl(options.topicUrl))
      throw new ResourceSyncError('RS_CONFIG', `the topic must be an absolute http(s) URL: ${options.topicUrl}`);
    this.hubUrl = options.hubUrl;
    this.topicUrl = options.topicUrl;
    this.#options = options;
    this.#secret = options.secret === false ? undefined : (options.secret ?? randomBytes(32).toString('hex'));
    if (this.#secret !== undefined && Buffer.byteLength(this.#secret) >= 200) {
      throw new ResourceSyncError('RS_CONFIG', 'hub.secret must be less than 200 bytes (WebSub §5.1)');
    }
    this.#path = options.path ?? `/websub/${randomBytes(12).toString('base64url')}`;
    if (!this.#path.startsWith('/')) throw new ResourceSyncError('RS_CONFIG', 'the callback path must start with /');
    this.#queue = new EventQueue(options.topicUrl, options.maxQueued ?? 10_000);
    this.#ownDispatcher = options.dispatcher === undefined;
    this.#dispatcher = options.dispatcher ?? createOutboundAgent(4);
    this.#log = options.onLog ?? ((): void => {});
  }

  /** Listens, then subscribes; resolves once the hub verified the subscription. */
  static async start(options: WebSubSubscriberOptions): Promise<WebSubSubscriber> {
    const sub = new WebSubSubscriber(options);
    try {
      await sub.listen();
      await sub.subscribe();
    } catch (e) {
      await sub.close();
      throw e;
    }
    return sub;
  }

  /** The callback URL given to the hub (after `listen`). */
  get callbackUrl(): string | undefined {
    return this.#callbackUrl;
  }

  /** Starts the callback listener; resolves with the callback URL. */
  async listen(): Promise<string> {
    if (this.#callbackUrl !== undefined) return this.#callbackUrl;
    const server = createServer((req, res) => {
      void this.#handle(req, res);
    });
    server.headersTimeout = 10_000;
    server.requestTimeout = 30_000;
    this.#server = server;
    const host = this.#options.host ?? '127.0.0.1';
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.#options.port ?? 0, host, () => resolve());
    });
    const addr = server.address() as AddressInfo;
    const h = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
    this.#callbackUrl = this.#options.callbackUrl ?? `http://${h}:${addr.port}${this.#path}`;
    return this.#callbackUrl;
  }

  /**
   * Asks the hub for the subscription and waits for its verification of intent. Resolves with the granted
   * lease in seconds; throws `RS_HTTP` when the hub refuses, `RS_TIMEOUT` when no verification came.
   */
  subscribe(): Promise<number> {
    return this.#request('subscribe');
  }

  /** Asks the hub to end the subscription and waits for its verification. Renewals stop. */
  async unsubscribe(): Promise<void> {
    clearTimeout(this.#renewTimer);
    await this.#request('unsubscribe');
  }

  /** Notifications, (re)subscriptions and refusals, in arrival order, until `close()`. */
  events(): AsyncIterableIterator<NotificationEvent> {
    return this.#queue.iterator();
  }

  /** Stops renewing and listening (the subscription at the hub lapses with its lease). */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#renewTimer);
    this.#pending?.reject(new ResourceSyncError('RS_ABORTED', 'subscriber closed'));
    this.#pending = undefined;
    this.#queue.close();
    const server = this.#server;
    if (server !== undefined) {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
    if (this.#ownDispatcher) await this.#dispatcher.destroy().catch(() => undefined);
  }

  async #request(mode: 'subscribe' | 'unsubscribe'): Promise<number> {
    const callback = this.#callbackUrl ?? (await this.listen());
    if (this.#closed) throw new ResourceSyncError('RS_ABORTED', 'subscriber closed');
    this.#pending?.reject(new ResourceSyncError('RS_ABORTED', `superseded by ${mode}`));
    this.#want = mode;
    const form = new URLSearchParams({ 'hub.mode': mode, 'hub.topic': this.topicUrl, 'hub.callback': callback });
    if (mode === 'subscribe') {
      if (this.#options.leaseSeconds !== undefined) form.set('hub.lease_seconds', String(this.#options.leaseSeconds));
      if (this.#secret !== undefined) form.set('hub.secret', this.#secret);
    }
    const timeoutMs = this.#options.verifyTimeoutMs ?? 30_000;
    const verified = new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => {
        if (this.#pending === pending) this.#pending = undefined;
        reject(
          new ResourceSyncError('RS_TIMEOUT', `no verification of ${mode} from the hub within ${timeoutMs} ms`, {
            url: this.hubUrl,
          }),
        );
      }, timeoutMs);
      const pending: Pending = {
        mode,
        resolve: (lease) => {
          clearTimeout(timer);
          resolve(lease);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      };
      this.#pending = pending;
    });
    verified.catch(() => undefined); // observed below; avoid an unhandled rejection while the POST runs
    const retries = this.#options.retries ?? 5;
    let last: unknown;
    let accepted = false;
    for (let attempt = 0; attempt <= retries && !accepted; attempt++) {
      if (attempt > 0) await sleep(backoffDelay(attempt - 1, 250, 10_000));
      if (this.#closed) throw new ResourceSyncError('RS_ABORTED', 'subscriber closed');
      let res: Awaited<ReturnType<typeof sendRequest>>;
      try {
        res = await sendRequest(this.#dispatcher, this.hubUrl, {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: form.toString(),
          timeoutMs: 10_000,
          maxResponseBytes: 4096,
        });
      } catch (e) {
        last = e; // network error or timeout: retry
        continue;
      }
      if (res.status >= 200 && res.status < 300) accepted = true;
      else {
        last = new ResourceSyncError(
          'RS_HTTP',
          `hub refused ${mode}: ${res.status} ${res.body.toString('utf8').trim().slice(0, 200)}`,
          {
            url: this.hubUrl,
          },
        );
        if (res.status < 500 && res.status !== 429) break; // a refusal: retrying will not change it
      }
    }
    if (!accepted) {
      this.#pending?.reject(new ResourceSyncError('RS_ABORTED', `${mode} request failed`));
      this.#pending = undefined;
      throw last instanceof Error ? last : new ResourceSyncError('RS_HTTP', `${mode} failed`, { url: this.hubUrl });
    }
    return await verified;
  }

  #scheduleRenewal(leaseSeconds: number): void {
    clearTimeout(this.#renewTimer);
    if (this.#closed || this.#want !== 'subscribe') return;
    const delay = Math.max(500, leaseSeconds * 1000 * Math.min(0.95, Math.max(0.1, this.#options.renewAt ?? 0.8)));
    this.#renewTimer = setTimeout(() => void this.#renew(0), delay);
    this.#renewTimer.unref();
  }

  async #renew(failures: number): Promise<void> {
    if (this.#closed || this.#want !== 'subscribe') return;
    try {
      await this.subscribe();
    } catch (e) {
      if (this.#closed) return;
      const retryInMs = backoffDelay(failures, 1000, 60_000);
      const reason = e instanceof Error ? e.message : String(e);
      this.#log(`lease renewal failed: ${reason}; retrying in ${retryInMs} ms`);
      this.#queue.push({
        type: 'disconnected',
        channel: this.topicUrl,
        reason: `renewal failed: ${reason}`,
        retryInMs,
      });
      this.#renewTimer = setTimeout(() => void this.#renew(failures + 1), retryInMs);
      this.#renewTimer.unref();
    }
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      const url = new URL(req.url ?? '/', 'http://callback.invalid');
      if (url.pathname !== this.#path) return end(res, 404, 'not found');
      if (req.method === 'GET') return this.#verify(url.searchParams, res);
      if (req.method === 'POST') return await this.#deliver(req, res);
      return end(res, 405, 'method not allowed');
    } catch (e) {
      if (isResourceSyncError(e, 'RS_LIMIT')) {
        this.#refuse('malformed', e);
        return end(res, 413, 'payload too large', true);
      }
      end(res, 500, 'error', true);
    }
  }

  #verify(params: URLSearchParams, res: ServerResponse): void {
    const mode = params.get('hub.mode');
    const topic = params.get('hub.topic');
    const challenge = params.get('hub.challenge');
    if (topic !== this.topicUrl) {
      end(res, 404, 'unknown topic');
      return;
    }
    if (mode === 'denied') {
      const reason = params.get('hub.reason') ?? 'denied by the hub';
      this.#log(`subscription denied: ${reason}`);
      this.#pending?.reject(new ResourceSyncError('RS_HTTP', `subscription denied: ${reason}`, { url: this.hubUrl }));
      this.#pending = undefined;
      this.#queue.push({ type: 'disconnected', channel: this.topicUrl, reason: `denied: ${reason}` });
      end(res, 200, '');
      return;
    }
    if (
      (mode !== 'subscribe' && mode !== 'unsubscribe') ||
      mode !== this.#want ||
      challenge === null ||
      challenge.length > 1024
    ) {
      end(res, 404, 'not wanted');
      return;
    }
    const lease = Number(params.get('hub.lease_seconds') ?? '0');
    end(res, 200, challenge);
    this.stats.verified++;
    const pending = this.#pending;
    this.#pending = undefined;
    // The hub stores the subscription only once it has read this answer: wait a moment before telling the
    // consumer to catch up, so that no change falls between its catch-up and the first delivery.
    const settle = (): void => {
      if (this.#closed) return;
      if (mode === 'subscribe') {
        this.#queue.push({
          type: 'connected',
          channel: this.topicUrl,
          reconnect: this.#verifiedCount++ > 0,
          ...(Number.isFinite(lease) && lease > 0 ? { leaseSeconds: lease } : {}),
        });
        if (Number.isFinite(lease) && lease > 0) this.#scheduleRenewal(lease);
      }
      if (pending?.mode === mode) pending.resolve(lease);
    };
    const settleMs = this.#options.settleMs ?? 50;
    if (settleMs > 0) setTimeout(settle, settleMs);
    else settle();
  }

  async #deliver(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readBody(req, this.#options.maxPayloadBytes ?? 16 * 1024 * 1024);
    const self = findLink(req.headers.link, 'self');
    if (self !== undefined && self !== this.topicUrl) {
      this.#refuse(
        'malformed',
        new ResourceSyncError('RS_NOTIFICATION', `delivery for another topic: ${self}`, { url: this.topicUrl }),
      );
      return end(res, 202, '');
    }
    if (this.#secret !== undefined) {
      const header = req.headers['x-hub-signature'];
      const signature = Array.isArray(header) ? header[0] : header;
      if (signature === undefined) {
        // WebSub §8: a subscriber that gave a secret MUST ignore an unsigned delivery.
        this.#refuse(
          'unsigned',
          new ResourceSyncError('RS_NOTIFICATION', 'unsigned delivery ignored', { url: this.topicUrl }),
        );
        return end(res, 202, '');
      }
      if (!verifySignature(this.#secret, body, signature)) {
        // WebSub §8: ignore the content, but still acknowledge with 2xx.
        this.#refuse(
          'signature',
          new ResourceSyncError('RS_NOTIFICATION', 'delivery with a bad X-Hub-Signature ignored', {
            url: this.topicUrl,
          }),
        );
        return end(res, 202, '');
      }
    }
    try {
      const notification = await readNotification(body, { url: this.topicUrl });
      this.stats.received++;
      this.#queue.push({ type: 'notification', notification, channel: this.topicUrl, receivedAt: Date.now() });
    } catch (e) {
      if (!isResourceSyncError(e)) throw e;
      this.#refuse('malformed', e);
    }
    end(res, 202, '');
  }

  #refuse(reason: 'signature' | 'unsigned' | 'malformed', error: ResourceSyncError): void {
    this.stats.refused++;
    this.#log(`refused a delivery (${reason}): ${error.message}`);
    this.#queue.push({ type: 'refused', channel: this.topicUrl, reason, error });
  }
}

function end(res: ServerResponse, status: number, text: string, close = false): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  const headers: Record<string, string | number> = {
    'content-type': 'text/plain; charset=utf-8',
    'content-length': Buffer.byteLength(text),
  };
  if (close) headers.connection = 'close';
  res.writeHead(status, headers);
  res.end(text);
}
