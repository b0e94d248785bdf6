/**
 * Bounded concurrency over a pulled stream: at most `concurrency` tasks run at once, and the source is only
 * advanced when a slot is free, so a million-entry list is never held (backpressure by pulling).
 *
 * @module
 */

/**
 * How many tasks may run at once: a number, or a function read again each time a task is to start (the HTTP
 * client's `HttpClient.concurrency`, which follows its adaptive window).
 */
export type Concurrency = number | (() => number);

/**
 * Runs `worker` over every item of `source` with at most `concurrency` in flight (a function is asked again before
 * each start, so the bound may move during the run; tasks running above a lowered bound finish normally). Resolves when the source is
 * exhausted and every task has settled. A worker that throws stops the run: no new items are pulled, the
 * running tasks are awaited, and the first error is rethrown (workers are expected to catch per-item failures
 * themselves and only throw for fatal ones). Memory: `concurrency` items plus whatever the workers hold.
 *
 * @example
 * ```ts
 * await forEachConcurrent(entries, 16, async (entry) => { await fetchOne(entry) });
 * ```
 */
export async function forEachConcurrent<T>(
  source: AsyncIterable<T> | Iterable<T>,
  concurrency: Concurrency,
  worker: (item: T) => Promise<void>,
  signal?: AbortSignal,
): Promise<void> {
  const fixed = typeof concurrency === 'number' ? Math.max(1, Math.floor(concurrency)) : undefined;
  const bound = concurrency as () => number;
  const running = new Set<Promise<void>>();
  let failure: { error: unknown } | undefined;
  const iterator =
    Symbol.asyncIterator in source
      ? (source as AsyncIterable<T>)[Symbol.asyncIterator]()
      : toAsync((source as Iterable<T>)[Symbol.iterator]());
  try {
    for (;;) {
      if (failure !== undefined) break;
      signal?.throwIfAborted();
      if (running.size >= (fixed ?? Math.max(1, bound()))) {
        await Promise.race(running);
        continue;
      }
      const next = await iterator.next();
      if (next.done === true) break;
      const task: Promise<void> = worker(next.value).then(
        () => {
          running.delete(task);
        },
        (error: unknown) => {
          running.delete(task);
          failure ??= { error };
        },
      );
      running.add(task);
    }
  } catch (e) {
    failure ??= { error: e };
  } finally {
    await Promise.allSettled(running);
    if (failure !== undefined) await iterator.return?.().catch(() => undefined);
  }
  if (failure !== undefined) throw failure.error;
}

function toAsync<T>(it: Iterator<T>): AsyncIterator<T> {
  return {
    next: async () => it.next(),
    return: async () => it.return?.() ?? { done: true, value: undefined },
  };
}
