/**
 * One writer per local copy: a lock file `<dir>/.resourcesync/lock` holding the writer's process id (see
 * `io/lock.ts`). A second run on the same copy (two cron jobs overlapping) is refused; a lock left by a process
 * that no longer exists (killed with -9) is taken over.
 *
 * @module
 */
import { join } from 'node:path';
import { type FileLock, lockFile } from '../io/lock.js';
import { STATE_DIR_NAME } from './paths.js';

/** A held lock; `release()` removes the file (idempotent). */
export type CopyLock = FileLock;

/**
 * Takes the lock of the copy at `dir` (whose state directory must exist).
 * @throws ResourceSyncError `RS_CONFIG` when another live process (or another run in this process) holds it,
 *   `RS_IO` when it cannot be written.
 */
export function lockCopy(dir: string): CopyLock {
  return lockFile(join(dir, STATE_DIR_NAME, 'lock'), { what: dir });
}
