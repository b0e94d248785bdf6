/**
 * Watching a tree: one `fs.watch` (inotify) per directory, new directories watched as they appear, events
 * debounced per path and handed on in the order paths settled, plus a periodic full rescan as a safety net
 * (events can be lost when the kernel queue overflows, past the inotify watch limit, or on file systems
 * without notifications).
 *
 * Not `fs.watch(root, { recursive: true })`: on Linux, Node 20 implements it in JavaScript with one watcher per
 * file and synchronous directory reads on every event, which is quadratic in a burst of creations and runs
 * out of inotify watches on large trees.
 *
 * Memory: one watcher per directory; one timer and one map entry per path with a pending event.
 *
 * @module
 */
import { type FSWatcher, watch } from 'node:fs';
import { lstat, readdir } from 'node:fs/promises';
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
          await addDir('', true);
          await options.onRescan();
        } else {
          const batch = ready.splice(0, 5000);
          for (const p of batch) readySet.delete(p);
          await updateWatchers(batch);
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

  const watchers = new Map<string, FSWatcher>();
  let limitWarned = false;

  /** Watches a directory (relative; '' for the root) and the directories under it. */
  const addDir = async (relDir: string, descendWatched = false): Promise<void> => {
    if (closed || (watchers.has(relDir) && !descendWatched)) return;
    const abs = relDir === '' ? options.root : join(options.root, relDir);
    if (excluded(abs)) return;
    if (!watchers.has(relDir))
      try {
        const w = watch(abs, { persistent: false }, (_type, filename) => {
          if (filename === null || filename === undefined) {
            rescanWanted = true;
            pump();
            return;
          }
          const name = filename.toString();
          onEvent(relDir === '' ? name : `${relDir}/${name}`);
        });
        w.on('error', (e) => {
          // The directory went away (or the watch broke): drop it; its parent's event or a rescan follows.
          w.close();
          if (watchers.get(relDir) === w) watchers.delete(relDir);
          if ((e as NodeJS.ErrnoException).code !== 'ENOENT') {
            options.onWarning(`watching ${abs} failed (${e.message}); rescanning`);
            rescanWanted = true;
            pump();
          }
        });
        watchers.set(relDir, w);
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        if (code === 'ENOENT' || code === 'ENOTDIR') return;
        if (!limitWarned) {
          limitWarned = true;
          options.onWarning(
            `cannot watch ${abs}: ${(e as Error).message}` +
              (code === 'ENOSPC' ? ' (inotify watch limit: raise fs.inotify.max_user_watches)' : '') +
              '; relying on periodic rescans there',
          );
        }
        return;
      }
    const entries = await readdir(abs, { withFileTypes: true }).catch(() => []);
    for (const d of entries)
      if (d.isDirectory() && !d.name.startsWith('.'))
        await addDir(relDir === '' ? d.name : `${relDir}/${d.name}`, descendWatched);
  };

  /** Before paths are handed on: watch directories that appeared, drop watchers of those that went away. */
  const updateWatchers = async (rels: readonly string[]): Promise<void> => {
    for (const rel of rels) {
      const st = await lstat(join(options.root, rel)).catch(() => undefined);
      if (st?.isDirectory() === true) await addDir(rel);
      else
        for (const [d, w] of watchers)
          if (d === rel || d.startsWith(`${rel}/`)) {
            w.close();
            watchers.delete(d);
          }
    }
  };
  await addDir('');

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
      for (const w of watchers.values()) w.close();
      watchers.clear();
      if (interval !== undefined) clearInterval(interval);
      for (const t of timers.values()) clearTimeout(t);
      timers.clear();
      await working;
      for (const w of idleWaiters.splice(0)) w();
    },
  };
}
