/**
 * What a notification receiver (WebSocket client, WebSub subscriber) yields to its consumer, and the bounded
 * queue between them.
 *
 * A follower reacts to three things: a parsed notification (apply it), a (re)connection or (re)subscription
 * (catch up from the Change Lists since its watermark: changes made while it was away are not pushed again),
 * and a refused or lost notification (catch up as well).
 *
 * @module
 */
import type { ResourceSyncError } from '../core/errors.js';
import type { Notification } from './payloads.js';

/** A notification received and parsed. */
export interface NotificationReceived {
  readonly type: 'notification';
  readonly notification: Notification;
  /** The channel URL (WebSocket) or topic URL (WebSub) it came on. */
  readonly channel: string;
  /** `Date.now()` when it arrived. */
  readonly receivedAt: number;
}

/** Connected (WebSocket) or subscription verified (WebSub): the consumer should catch up from the Change Lists. */
export interface ChannelConnected {
  readonly type: 'connected';
  readonly channel: string;
  /** False for the first connection, true after a loss. */
  readonly reconnect: boolean;
  /** WebSub: the lease granted by the hub, in seconds. */
  readonly leaseSeconds?: number;
}

/** The connection was lost (a reconnection follows unless the receiver was closed). */
export interface ChannelDisconnected {
  readonly type: 'disconnected';
  readonly channel: string;
  readonly code?: number;
  readonly reason: string;
  /** Milliseconds until the next attempt, when one is scheduled. */
  readonly retryInMs?: number;
}

/**
 * A delivery that was refused (bad or missing signature, malformed payload), or notifications dropped because
 * the consumer fell behind (`overflow`). The consumer should catch up from the Change Lists.
 */
export interface NotificationRefused {
  readonly type: 'refused';
  readonly channel: string;
  readonly reason: 'signature' | 'unsigned' | 'malformed' | 'overflow';
  readonly error?: ResourceSyncError;
}

export type NotificationEvent = NotificationReceived | ChannelConnected | ChannelDisconnected | NotificationRefused;

/**
 * A single-consumer async queue with a bound. Memory bound: `maxItems` events. When full, the oldest
 * notification is dropped and one `refused`/`overflow` event is queued in its place (the consumer catches up).
 * `onDrain` is called when the queue falls to half its bound after having been above it (used to resume a
 * paused socket).
 */
export class EventQueue {
  readonly #items: NotificationEvent[] = [];
  readonly #maxItems: number;
  readonly #channel: string;
  #waiter: ((r: IteratorResult<NotificationEvent>) => void) | undefined;
  #closed = false;
  #overflowQueued = false;
  #high = false;
  onHigh: (() => void) | undefined;
  onDrain: (() => void) | undefined;

  constructor(channel: string, maxItems = 10_000) {
    this.#channel = channel;
    this.#maxItems = Math.max(2, maxItems);
  }

  get size(): number {
    return this.#items.length;
  }

  push(event: NotificationEvent): void {
    if (this.#closed) return;
    const waiter = this.#waiter;
    if (waiter !== undefined) {
      this.#waiter = undefined;
      waiter({ value: event, done: false });
      return;
    }
    if (this.#items.length >= this.#maxItems) {
      // Room for the event and, the first time, for the overflow marker: drop the oldest notifications.
      const room = this.#overflowQueued ? 1 : 2;
      while (this.#items.length + room > this.#maxItems) {
        const i = this.#items.findIndex((e) => e.type === 'notification');
        if (i >= 0) this.#items.splice(i, 1);
        else this.#items.shift();
      }
      if (!this.#overflowQueued) {
        this.#overflowQueued = true;
        this.#items.push({ type: 'refused', channel: this.#channel, reason: 'overflow' });
      }
    }
    this.#items.push(event);
    if (!this.#high && this.#items.length >= this.#maxItems / 2) {
      this.#high = true;
      this.onHigh?.();
    }
  }

  /** Ends the iteration once the queued events are consumed. */
  close(): void {
    this.#closed = true;
    const waiter = this.#waiter;
    this.#waiter = undefined;
    waiter?.({ value: undefined, done: true });
  }

  next(): Promise<IteratorResult<NotificationEvent>> {
    const item = this.#items.shift();
    if (item !== undefined) {
      if (item.type === 'refused' && item.reason === 'overflow') this.#overflowQueued = false;
      if (this.#high && this.#items.length < this.#maxItems / 4) {
        this.#high = false;
        this.onDrain?.();
      }
      return Promise.resolve({ value: item, done: false });
    }
    if (this.#closed) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve) => {
      this.#waiter = resolve;
    });
  }

  /**
   * The queue as an async iterator, for the `events()` of the channel client and the WebSub subscriber.
   * Leaving a `for await` early (`return()`) does not close the queue: the owner's `close()` does.
   */
  iterator(): AsyncIterableIterator<NotificationEvent> {
    const it: AsyncIterableIterator<NotificationEvent> = {
      next: () => this.next(),
      return: async () => ({ value: undefined, done: true }),
      [Symbol.asyncIterator]: () => it,
    };
    return it;
  }
}

/**
 * Several receivers' events as one iteration (e.g. a follower's change and framework channels): each receiver's
 * own order is kept, events of different receivers interleave in arrival order, and the iteration ends once every
 * source ended (their owners' `close()`). Memory bound: about half of `maxItems` events here; while this queue is
 * above half its bound the pumps stop pulling, so the receivers' own bounded queues (and their socket pausing) take
 * over. A source that throws simply ends.
 */
export function mergeEvents(
  sources: readonly AsyncIterable<NotificationEvent>[],
  maxItems = 10_000,
): AsyncIterableIterator<NotificationEvent> {
  const queue = new EventQueue('merged', maxItems);
  let gate: Promise<void> | undefined;
  let open: (() => void) | undefined;
  queue.onHigh = () => {
    gate = new Promise((resolve) => (open = resolve));
  };
  queue.onDrain = () => {
    open?.();
    gate = undefined;
    open = undefined;
  };
  let live = sources.length;
  if (live === 0) queue.close();
  for (const source of sources) {
    void (async () => {
      try {
        for await (const e of source) {
          queue.push(e);
          if (gate !== undefined) await gate;
        }
      } catch {
        // a receiver's iterator does not throw; one that does simply ends
      } finally {
        if (--live === 0) queue.close();
      }
    })();
  }
  return queue.iterator();
}
