/**
 * Atomic file writes: the data goes to a temporary file in the same directory, is flushed to disk, and is
 * renamed over the target, so readers see the old file or the new one, never half of one.
 *
 * @module
 */
import { randomBytes } from 'node:crypto';
import { mkdir, open, rename, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { ResourceSyncError } from '../core/errors.js';

/** Options of {@link writeFileAtomic}. */
export interface AtomicWriteOptions {
  /** fsync the file before the rename and the directory after it (default true). */
  readonly fsync?: boolean;
  /** File mode of the new file (default 0o644). */
  readonly mode?: number;
  /** Create missing parent directories (default true). */
  readonly mkdirs?: boolean;
  readonly signal?: AbortSignal;
}

/** A temporary path next to `path` (same directory, hence same file system), unique per call. */
export function tempPathFor(path: string): string {
  return join(dirname(path), `.${basename(path)}.${randomBytes(6).toString('hex')}.tmp`);
}

/**
 * Writes `data` to `path` atomically and returns the number of bytes written.
 * Memory: one chunk of `data` at a time when it is an async iterable.
 * On failure the temporary file is removed and the target is left as it was.
 *
 * @throws ResourceSyncError `RS_IO` naming the path.
 */
export async function writeFileAtomic(
  path: string,
  data: string | Uint8Array | Iterable<Uint8Array> | AsyncIterable<Uint8Array>,
  options: AtomicWriteOptions = {},
): Promise<number> {
  const sync = options.fsync ?? true;
  const dir = dirname(path);
  if (options.mkdirs ?? true) await mkdir(dir, { recursive: true });
  const tmp = tempPathFor(path);
  let bytes = 0;
  let fh: Awaited<ReturnType<typeof open>> | undefined;
  try {
    fh = await open(tmp, 'wx', options.mode ?? 0o644);
    if (typeof data === 'string' || data instanceof Uint8Array) {
      const buf = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
      await fh.write(buf, 0, buf.byteLength);
      bytes = buf.byteLength;
    } else {
      for await (const chunk of data as AsyncIterable<Uint8Array>) {
        options.signal?.throwIfAborted();
        let off = 0;
        while (off < chunk.byteLength) {
          const { bytesWritten } = await fh.write(chunk, off, chunk.byteLength - off);
          off += bytesWritten;
        }
        bytes += chunk.byteLength;
      }
    }
    if (sync) await fh.sync();
    await fh.close();
    fh = undefined;
    await rename(tmp, path);
  } catch (e) {
    await fh?.close().catch(() => undefined);
    await unlink(tmp).catch(() => undefined);
    if (e instanceof ResourceSyncError) throw e;
    if ((e as Error).name === 'AbortError') throw e;
    throw new ResourceSyncError('RS_IO', `cannot write ${path}: ${(e as Error).message}`, { cause: e });
  }
  if (sync) await syncDir(dir);
  return bytes;
}

/** fsync a directory so a rename in it is durable (best effort: some file systems refuse). */
export async function syncDir(dir: string): Promise<void> {
  let fh: Awaited<ReturnType<typeof open>> | undefined;
  try {
    fh = await open(dir, 'r');
    await fh.sync();
  } catch {
    // Directories cannot be fsynced on every platform; the rename is still atomic.
  } finally {
    await fh?.close().catch(() => undefined);
  }
}
