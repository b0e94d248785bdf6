/**
 * One writer per state directory: a lock file holding the writer's process id, created exclusively. A second
 * process is refused with a message naming it (pid) and the lock file; so is a second holder in the same
 * process (two Sources opened on one state). A lock left by a process that no longer exists (killed with -9),
 * or by an earlier process that had this very pid (a container restarted), is taken over.
 *
 * Used by the Destination (one writer per local copy) and the Source (one `serve` or `publish` per state).
 *
 * @module
 */
import { closeSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { ResourceSyncError } from '../core/errors.js';

/** A held lock; `release()` removes the file (idempotent). */
export interface FileLock {
  readonly path: string;
  release(): void;
}

/** Options of {@link lockFile}. */
export interface LockOptions {
  /** What the lock protects, for messages (e.g. `the state directory /srv/state`). */
  readonly what: string;
}

/** Lock files held by this process (a pid in a lock file cannot tell two holders in one process apart). */
const held = new Set<string>();

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Takes the lock file `path` (its directory must exist).
 * @throws ResourceSyncError `RS_CONFIG` when another live process, or another holder in this process, has it;
 *   `RS_IO` when it cannot be written.
 * @example
 * ```ts
 * const lock = lockFile(join(stateDir, 'lock'), { what: `the state directory ${stateDir}` });
 * try { ... } finally { lock.release(); }
 * ```
 */
export function lockFile(path: string, options: LockOptions): FileLock {
  if (held.has(path))
    throw new ResourceSyncError('RS_CONFIG', `this process is already working on ${options.what} (lock ${path})`);
  for (let attempt = 0; attempt < 3; attempt++) {
    let fd: number;
    try {
      fd = openSync(path, 'wx', 0o644);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST')
        throw new ResourceSyncError('RS_IO', `cannot create ${path}: ${(e as Error).message}`, { cause: e });
      let holder = Number.NaN;
      try {
        holder = Number.parseInt(readFileSync(path, 'utf8'), 10);
      } catch {
        // vanished or unreadable: try again
      }
      if (Number.isInteger(holder) && holder > 0 && holder !== process.pid && alive(holder))
        throw new ResourceSyncError(
          'RS_CONFIG',
          `another resourcesync process (pid ${holder}) is working on ${options.what}; remove ${path} if that is not so`,
        );
      try {
        unlinkSync(path); // stale: its process is gone
      } catch {
        // someone else took it over first: try again
      }
      continue;
    }
    try {
      writeSync(fd, `${process.pid}\n`);
    } finally {
      closeSync(fd);
    }
    held.add(path);
    let released = false;
    return {
      path,
      release(): void {
        if (released) return;
        released = true;
        held.delete(path);
        try {
          unlinkSync(path);
        } catch {
          // already gone
        }
      },
    };
  }
  throw new ResourceSyncError('RS_IO', `cannot take the lock ${path}`);
}
