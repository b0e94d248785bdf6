/**
 * Bounded concurrency over a pulled stream: at most `concurrency` tasks run at once, and the source is only
 * advanced when a slot is free, so a million-entry list is never held (backpressure by pulling).
 *
 * @module
 */

/**
 * Runs `worker` over every item of `source` with at most `concurrency` in flight. Resolves when the source is
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
  concurrency: number,
  worker: (item: T) => Promise<void>,
  signal?: AbortSignal,
): Promise<void> {
  const limit = Math.max(1, Math.floor(concurrency));
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
      if (running.size >= limit) {
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
