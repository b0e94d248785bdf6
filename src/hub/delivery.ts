/**
 * Content distribution of the WebSub hub (WebSub §7): one queue per subscription, so a callback that hangs or
 * fails never delays the others; a bounded number of requests in flight across all queues; a timeout per
 * request; retries with exponential backoff and jitter up to a bound, then the delivery is dropped; after
 * `dropSubscriptionAfter` deliveries dropped in a row (or a `410 Gone`, WebSub §7) the subscription is removed.
 *
 * Memory bound: per subscription at most `maxQueued` deliveries and `maxQueuedBytes` bytes of bodies (bodies are
 * shared between the queues of one publish); the oldest delivery is dropped when a queue is full.
 *
 * @module
 */
import type { Dispatcher } from 'undici';
import { isResourceSyncError } from '../core/errors.js';
import { backoffDelay, sleep } from '../http/backoff.js';
import { sendRequest } from '../http/outbound.js';
import { signBody } from '../notify/http-util.js';
import type { Subscription } from './store.js';

export interface DeliveryOptions {
  /** Timeout of one delivery request (default 10 s). */
  readonly timeoutMs?: number;
  /** Attempts per delivery, the first included (default 5). */
  readonly maxAttempts?: number;
  /** First retry delay (default 1 s), doubled each attempt, capped by `retryMaxMs` (default 60 s). */
  readonly retryBaseMs?: number;
  readonly retryMaxMs?: number;
  /** Requests in flight across all subscriptions (default 128). */
  readonly maxConcurrent?: number;
  /** Deliveries waiting per subscription (default 1,000) and their bytes (default 16 MiB). */
  readonly maxQueued?: number;
  readonly maxQueuedBytes?: number;
  /** Remove a subscription after this many deliveries dropped in a row (default 3; 0 = never). */
  readonly dropSubscriptionAfter?: number;
}

/** What happened to a delivery (for logs, tests and statistics). */
export type DeliveryEvent =
  | {
      readonly type: 'delivered';
      readonly topic: string;
      readonly callback: string;
      readonly attempts: number;
      readonly ms: number;
    }
  | {
      readonly type: 'retry';
      readonly topic: string;
      readonly callback: string;
      readonly attempt: number;
      readonly error: string;
      readonly delayMs: number;
    }
  | { readonly type: 'dropped'; readonly topic: string; readonly callback: string; readonly reason: string }
  | {
      readonly type: 'subscription-dropped';
      readonly topic: string;
      readonly callback: string;
      readonly reason: string;
    };

interface Delivery {
  readonly body: Buffer;
  readonly contentType: string;
  readonly link: string;
  readonly enqueuedAt: number;
}

interface Queue {
  sub: Subscription;
  readonly items: Delivery[];
  bytes: number;
  running: boolean;
  cancelled: boolean;
  droppedInARow: number;
}

/** A counting semaphore (FIFO). */
class Semaphore {
  #free: number;
  readonly #waiters: (() => void)[] = [];
  constructor(n: number) {
    this.#free = n;
  }
  acquire(): Promise<void> {
    if (this.#free > 0) {
      this.#free--;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.#waiters.push(resolve));
  }
  release(): void {
    const next = this.#waiters.shift();
    if (next !== undefined) next();
    else this.#free++;
  }
}

export class Deliverer {
  readonly #queues = new Map<string, Queue>();
  readonly #dispatcher: Dispatcher;
  readonly #semaphore: Semaphore;
  readonly #timeoutMs: number;
  readonly #maxAttempts: number;
  readonly #retryBaseMs: number;
  readonly #retryMaxMs: number;
  readonly #maxQueued: number;
  readonly #maxQueuedBytes: number;
  readonly #dropAfter: number;
  readonly #onEvent: (e: DeliveryEvent) => void;
  readonly #removeSubscription: (topic: string, callback: string) => void;
  readonly #abort = new AbortController();
  readonly stats = { delivered: 0, retries: 0, dropped: 0, subscriptionsDropped: 0 };

  constructor(
    dispatcher: Dispatcher,
    options: DeliveryOptions,
    onEvent: (e: DeliveryEvent) => void,
    removeSubscription: (topic: string, callback: string) => void,
  ) {
    this.#dispatcher = dispatcher;
    this.#timeoutMs = options.timeoutMs ?? 10_000;
    this.#maxAttempts = Math.max(1, options.maxAttempts ?? 5);
    this.#retryBaseMs = options.retryBaseMs ?? 1000;
    this.#retryMaxMs = options.retryMaxMs ?? 60_000;
    this.#semaphore = new Semaphore(Math.max(1, options.maxConcurrent ?? 128));
    this.#maxQueued = Math.max(1, options.maxQueued ?? 1000);
    this.#maxQueuedBytes = options.maxQueuedBytes ?? 16 * 1024 * 1024;
    this.#dropAfter = options.dropSubscriptionAfter ?? 3;
    this.#onEvent = onEvent;
    this.#removeSubscription = removeSubscription;
  }

  /** Deliveries waiting or in flight, over all subscriptions. */
  get pending(): number {
    let n = 0;
    for (const q of this.#queues.values()) n += q.items.length;
    return n;
  }

  /** Queues one delivery for a subscription; returns at once. */
  enqueue(sub: Subscription, body: Buffer, contentType: string, link: string): void {
    if (this.#abort.signal.aborted) return;
    const key = `${sub.topic}\n${sub.callback}`;
    let q = this.#queues.get(key);
    if (q === undefined) {
      q = { sub, items: [], bytes: 0, running: false, cancelled: false, droppedInARow: 0 };
      this.#queues.set(key, q);
    } else {
      q.sub = sub; // a renewed subscription may have a new secret
    }
    q.items.push({ body, contentType, link, enqueuedAt: Date.now() });
    q.bytes += body.length;
    // Bound the queue: drop the oldest waiting delivery (never the one in flight, at index 0 while running).
    while ((q.items.length > this.#maxQueued || q.bytes > this.#maxQueuedBytes) && q.items.length > 1) {
      const dropped = q.items.splice(q.running ? 1 : 0, 1)[0]!;
      q.bytes -= dropped.body.length;
      this.stats.dropped++;
      this.#onEvent({ type: 'dropped', topic: sub.topic, callback: sub.callback, reason: 'queue full' });
    }
    if (!q.running) {
      q.running = true;
      void this.#run(key, q);
    }
  }

  /** Forgets the queue of a subscription (unsubscribed or expired); a delivery in flight completes. */
  cancel(topic: string, callback: string): void {
    const key = `${topic}\n${callback}`;
    const q = this.#queues.get(key);
    if (q === undefined) return;
    q.cancelled = true;
    q.items.length = q.running ? Math.min(q.items.length, 1) : 0;
    this.#queues.delete(key);
  }

  /** Stops every queue: waiting deliveries are abandoned, requests in flight are aborted. */
  close(): void {
    this.#abort.abort();
    for (const q of this.#queues.values()) {
      q.cancelled = true;
      q.items.length = 0;
    }
    this.#queues.clear();
  }

  async #run(key: string, q: Queue): Promise<void> {
    try {
      while (!q.cancelled && q.items.length > 0) {
        const d = q.items[0]!;
        const outcome = await this.#deliver(q, d);
        q.items.shift();
        q.bytes -= d.body.length;
        if (outcome === 'gone') {
          this.#dropSubscription(key, q, 'callback answered 410 Gone');
          return;
        }
        if (outcome === 'ok') q.droppedInARow = 0;
        else if (outcome === 'failed') {
          q.droppedInARow++;
          if (this.#dropAfter > 0 && q.droppedInARow >= this.#dropAfter) {
            this.#dropSubscription(key, q, `${q.droppedInARow} deliveries dropped in a row`);
            return;
          }
        }
      }
    } finally {
      q.running = false;
      if (!q.cancelled && q.items.length === 0 && this.#queues.get(key) === q) this.#queues.delete(key);
      else if (!q.cancelled && q.items.length > 0) {
        q.running = true;
        void this.#run(key, q);
      }
    }
  }

  #dropSubscription(key: string, q: Queue, reason: string): void {
    q.cancelled = true;
    this.stats.dropped += q.items.length;
    q.items.length = 0;
    if (this.#queues.get(key) === q) this.#queues.delete(key);
    this.stats.subscriptionsDropped++;
    this.#removeSubscription(q.sub.topic, q.sub.callback);
    this.#onEvent({ type: 'subscription-dropped', topic: q.sub.topic, callback: q.sub.callback, reason });
  }

  async #deliver(q: Queue, d: Delivery): Promise<'ok' | 'gone' | 'failed' | 'cancelled'> {
    const started = Date.now();
    for (let attempt = 0; attempt < this.#maxAttempts; attempt++) {
      if (q.cancelled || this.#abort.signal.aborted) return 'cancelled';
      const sub = q.sub;
      let error: string;
      await this.#semaphore.acquire();
      try {
        const headers: Record<string, string> = { 'content-type': d.contentType, link: d.link };
        if (sub.secret !== undefined) headers['x-hub-signature'] = signBody(sub.secret, d.body);
        const res = await sendRequest(this.#dispatcher, sub.callback, {
          method: 'POST',
          headers,
          body: d.body,
          timeoutMs: this.#timeoutMs,
          maxResponseBytes: 4096,
          signal: this.#abort.signal,
        });
        if (res.status >= 200 && res.status < 300) {
          this.stats.delivered++;
          this.#onEvent({
            type: 'delivered',
            topic: sub.topic,
            callback: sub.callback,
            attempts: attempt + 1,
            ms: Date.now() - started,
          });
          return 'ok';
        }
        if (res.status === 410) return 'gone';
        error = `HTTP ${res.status}`;
      } catch (e) {
        if (isResourceSyncError(e, 'RS_ABORTED')) return 'cancelled';
        error = isResourceSyncError(e) ? `${e.code}: ${e.message}` : String(e);
      } finally {
        this.#semaphore.release();
      }
      if (attempt + 1 >= this.#maxAttempts) {
        this.stats.dropped++;
        this.#onEvent({
          type: 'dropped',
          topic: sub.topic,
          callback: sub.callback,
          reason: `${this.#maxAttempts} attempts failed, last: ${error}`,
        });
        return 'failed';
      }
      const delayMs = backoffDelay(attempt, this.#retryBaseMs, this.#retryMaxMs);
      this.stats.retries++;
      this.#onEvent({ type: 'retry', topic: sub.topic, callback: sub.callback, attempt: attempt + 1, error, delayMs });
      try {
        await sleep(delayMs, this.#abort.signal, true);
      } catch {
        return 'cancelled';
      }
    }
    return 'failed';
  }
}
