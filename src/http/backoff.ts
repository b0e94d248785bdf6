/**
 * The one backoff of the HTTP stack: exponential delays with jitter, and an abortable sleep. Used by the pooled
 * client's retries ({@link HttpClient}), whole-download retries, WebSocket reconnections, WebSub subscriptions and
 * the hub's deliveries.
 *
 * @module
 */
import { ResourceSyncError } from '../core/errors.js';

/**
 * Delay before retry `attempt` (0-based): `base * 2^attempt`, capped at `max`, with jitter in [50%, 100%] (so
 * clients that failed together do not retry together).
 *
 * @example
 * ```ts
 * backoffDelay(0, 250, 30_000); // 125..250
 * backoffDelay(3, 250, 30_000); // 1000..2000
 * ```
 */
export function backoffDelay(
  attempt: number,
  baseMs: number,
  maxMs: number,
  random: () => number = Math.random,
): number {
  const exp = Math.min(maxMs, baseMs * 2 ** Math.min(attempt, 30));
  return Math.round(exp / 2 + (exp / 2) * random());
}

/**
 * Resolves after `ms`; rejects when `signal` aborts first, with the signal's reason when it is a
 * `ResourceSyncError` (a deadline's `RS_TIMEOUT`, say), else with `RS_ABORTED`. With `unref`, the timer does not
 * keep the process alive.
 */
export function sleep(ms: number, signal?: AbortSignal, unref = false): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted === true) {
      reject(abortReason(signal));
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(abortReason(signal as AbortSignal));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    if (unref) timer.unref();
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** The error an aborted `signal` stands for: its reason when that is a `ResourceSyncError`, else `RS_ABORTED`. */
export function abortReason(signal: AbortSignal): ResourceSyncError {
  const reason: unknown = signal.reason;
  if (reason instanceof ResourceSyncError) return reason;
  return new ResourceSyncError('RS_ABORTED', 'aborted', { cause: reason });
}
