/**
 * Watching a tree: `fs.watch(root, { recursive: true })` (inotify on Linux, Node >= 20), debounced per path,
 * handed on in the order paths settled, plus a periodic full rescan as a safety net (events can be lost when
 * the kernel queue overflows, or on file systems without notifications).
 *
 * Memory: one timer and one map entry per path with a pending event.
 *
 * @module
 */
import { type FSWatcher, watch } from 'node:fs';
import { join, sep } from 'node:path';

/** Options of {@link startWatching}. */
export interface WatchOptions {
  readonly root: string;
  /** Absolute directories whose events are ignored. */
  readonly exclude: readonly string[];
  /** Quiet time per path before it is handed on (default 100 ms). */
  readonly debounceMs?: number;
  /** Full rescan period (0: none). */
  readonly rescanIntervalMs?: number;
  /** Called with settled relative paths, in the order they settled; calls never overlap. */
  readonly onPaths: (relPaths: string[]) => Promise<void>;
  /** Called for a full rescan (watch error, unknown file name, period); never overlaps with onPaths. */
  readonly onRescan: () => Promise<void>;
  readonly onWarning: (message: string) => void;
}

/** A running watcher. */
export interface WatchHandle {
  /** Resolves when every event seen so far has been handed on and processed. */
  settled(): Promise<void>;
  close(): Promise<void>;
}

/** Starts watching. */
export async function startWatching(options: WatchOptions): Promise<WatchHandle> {
  const debounceMs = options.debounceMs ?? 100;
  const timers = new Map<string, NodeJS.Timeout>();
  const ready: string[] = [];
  const readySet = new Set<string>();
  let rescanWanted = false;
  let working: Promise<void> | undefined;
  let closed = false;
  let watcher: FSWatcher | undefined;
  const idleWaiters: (() => void)[] = [];

  const excluded = (abs: string): boolean =>
    options.exclude.some((x) => abs === x || abs.startsWith(x.endsWith(sep) ? x : x + sep));

  const checkIdle = (): void => {
    if (timers.size === 0 && ready.length === 0 && !rescanWanted && working === undefined)
      for (const w of idleWaiters.splice(0)) w();
  };

  const pump = (): void => {
    if (working !== undefined || closed) return;
    if (!rescanWanted && ready.length === 0) {
      checkIdle();
      return;
    }
    working = (async () => {
      try {
        if (rescanWanted) {
          rescanWanted = false;
          ready.length = 0;
          readySet.clear();
          await options.onRescan();
        } else {
          const batch = ready.splice(0, 5000);
          for (const p of batch) readySet.delete(p);
          await options.onPaths(batch);
        }
      } catch (e) {
        options.onWarning(`recording watched changes failed: ${(e as Error).message}`);
      } finally {
        working = undefined;
        // Let more events settle into the next batch.
        setImmediate(pump);
      }
    })();
  };

  const onEvent = (rel: string): void => {
    if (closed) return;
    const segs = rel.split(sep);
    if (segs.some((s) => s.startsWith('.') || s === '')) {
      // Hidden paths are not resources; but a hidden temp file renamed to a visible name shows up on its own.
      return;
    }
    if (excluded(join(options.root, rel))) return;
    const key = segs.join('/');
    const old = timers.get(key);
    if (old !== undefined) clearTimeout(old);
    timers.set(
      key,
      setTimeout(() => {
        timers.delete(key);
        if (!readySet.has(key)) {
          readySet.add(key);
          ready.push(key);
        }
        pump();
      }, debounceMs),
    );
  };

  const start = (): void => {
    try {
      watcher = watch(options.root, { recursive: true, persistent: false }, (_type, filename) => {
        if (filename === null || filename === undefined) {
          rescanWanted = true;
          pump();
          return;
        }
        onEvent(filename.toString());
      });
      watcher.on('error', (e) => {
        options.onWarning(`watching ${options.root} failed (${e.message}); rescanning and watching again`);
        watcher?.close();
        watcher = undefined;
        rescanWanted = true;
        pump();
        if (!closed) setTimeout(start, 1000).unref();
      });
    } catch (e) {
      options.onWarning(`cannot watch ${options.root}: ${(e as Error).message}; relying on periodic rescans`);
    }
  };
  start();

  const interval =
    (options.rescanIntervalMs ?? 0) > 0
      ? setInterval(() => {
          rescanWanted = true;
          pump();
        }, options.rescanIntervalMs)
      : undefined;
  interval?.unref();

  return {
    settled: () =>
      new Promise<void>((resolve) => {
        idleWaiters.push(resolve);
        checkIdle();
      }),
    close: async () => {
      closed = true;
      watcher?.close();
      if (interval !== undefined) clearInterval(interval);
      for (const t of timers.values()) clearTimeout(t);
      timers.clear();
      await working;
      for (const w of idleWaiters.splice(0)) w();
    },
  };
}
