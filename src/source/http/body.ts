/**
 * The bytes of a file the Source hands over ({@link SiteFile}): opened only when a response needs them, a
 * small one read whole, a larger one read range by range as the body is pulled.
 *
 * Memory: a small file (at most {@link SMALL_BODY_BYTES}) whole; {@link readRange} one 64 KiB chunk at a time.
 *
 * @module
 */
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { type FileHandle, open } from 'node:fs/promises';
import { ResourceSyncError } from '../../core/errors.js';
import type { SiteFile } from '../source.js';

/** Files up to this size are read whole (synchronously), not streamed. */
export const SMALL_BODY_BYTES = 64 * 1024;

/** An opened file: a small one read whole, or a handle to stream from. */
export type Opened = { readonly data: Buffer } | { readonly handle: FileHandle };

/**
 * Opens the file (a small one is read whole, synchronously: microseconds on a local disk, far less than four
 * round trips through the thread pool); 'gone' when it no longer exists, 'changed' when it no longer has the
 * recorded length (it would not match its ETag).
 */
export async function openFile(file: SiteFile): Promise<Opened | 'gone' | 'changed'> {
  // Read by the Source from the descriptor it checked.
  if (file.data !== undefined && file.data.length === file.length) return { data: file.data };
  let handle: FileHandle;
  try {
    if (file.length <= SMALL_BODY_BYTES) {
      const data = readSmallFile(file.path, file.length);
      return data === undefined ? 'changed' : { data };
    }
    handle = await open(file.path, 'r');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return 'gone';
    throw e;
  }
  if ((await handle.stat()).size !== file.length) {
    await handle.close();
    return 'changed';
  }
  return { handle };
}

/** Reads a small file whole, synchronously; undefined when its length is no longer `length`. */
function readSmallFile(path: string, length: number): Buffer | undefined {
  const fd = openSync(path, 'r');
  try {
    if (fstatSync(fd).size !== length) return undefined;
    const data = Buffer.allocUnsafe(length);
    let at = 0;
    while (at < length) {
      const n = readSync(fd, data, at, length - at, at);
      if (n === 0) return undefined;
      at += n;
    }
    return data;
  } finally {
    closeSync(fd);
  }
}

/**
 * Bytes `[start, end)` of an open file, chunk by chunk: pulling drives reading, so a slow consumer stops the
 * reads. Throws RS_IO when the file ends early (it shrank after its length was recorded): the adapter then
 * destroys the connection rather than send a short body under a Content-Length. Memory: one 64 KiB chunk.
 */
export async function* readRange(
  file: FileHandle,
  start: number,
  end: number,
  chunkSize = 64 * 1024,
): AsyncGenerator<Uint8Array, void, undefined> {
  let pos = start;
  while (pos < end) {
    const want = Math.min(chunkSize, end - pos);
    const buf = Buffer.allocUnsafe(want);
    const { bytesRead } = await file.read(buf, 0, want, pos);
    if (bytesRead === 0) throw new ResourceSyncError('RS_IO', `file ended at byte ${pos}, expected ${end}`);
    pos += bytesRead;
    yield bytesRead === want ? buf : buf.subarray(0, bytesRead);
  }
}
