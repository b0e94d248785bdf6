/**
 * One writer per local copy: a lock file `<dir>/.resourcesync/lock` holding the writer's process id. A second
 * run on the same copy (two cron jobs overlapping) is refused; a lock left by a process that no longer exists
 * (killed with -9) is taken over.
 *
 * @module
 */
import { closeSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { ResourceSyncError } from '../core/errors.js';
import { STATE_DIR_NAME } from './paths.js';

/** A held lock; `release()` removes the file (idempotent). */
export interface CopyLock {
  readonly path: string;
  release(): void;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Takes the lock of the copy at `dir` (whose state directory must exist).
 * @throws ResourceSyncError `RS_CONFIG` when another live process holds it, `RS_IO` when it cannot be written.
 */
export function lockCopy(dir: string): CopyLock {
  const path = join(dir, STATE_DIR_NAME, 'lock');
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
          `another resourcesync process (pid ${holder}) is working on ${dir}; remove ${path} if that is not so`,
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
    let released = false;
    return {
      path,
      release(): void {
        if (released) return;
        released = true;
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
