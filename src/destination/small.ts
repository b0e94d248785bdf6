/**
 * A fast path for small resources (most of a typical collection): the body is received into memory (its
 * declared length bounds it), hashed and verified, then written to a temporary file and renamed over the
 * target with synchronous calls (see {@link writeSmallFile}) instead of the streaming path's file handle and
 * per-chunk writes. The guarantees are those of the streaming path: nothing is installed unless verified,
 * readers see the old file or the new one, the temporary file is removed on failure, parents are created
 * without following symbolic links.
 *
 * @module
 */
import { randomBytes } from 'node:crypto';
import {
  close,
  closeSync,
  existsSync,
  fdatasync,
  fsyncSync,
  open,
  openSync,
  unlink,
  unlinkSync,
  write,
  writeSync,
} from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type { HashAlgorithm } from '../core/constants.js';
import { ResourceSyncError } from '../core/errors.js';
import type { Hashes } from '../core/hash.js';
import { createMultiHasher } from '../io/hashing.js';
import { sharedFileWriter } from './file-writer.js';
import { type HttpClient, retryWhole } from '../http/client.js';
import { type Expected, verify } from './install.js';
import { ensureParentDirectory, placeFile, placeFileSync, tempStem } from './paths.js';

/** Per-process random prefix + counter: unique temporary names without a random draw per file. */
const TEMP_PREFIX = randomBytes(3).toString('hex');
let tempCounter = 0;

/** A temporary name next to `target` in the form install.ts uses (`.<name>.<12 hex>.tmp`, see isInstallTempName). */
export function smallTempPath(target: string): string {
  tempCounter = (tempCounter + 1) % 0x1000000;
  return join(
    dirname(target),
    `.${tempStem(basename(target))}.${TEMP_PREFIX}${tempCounter.toString(16).padStart(6, '0')}.tmp`,
  );
}

/** Resources declaring at most this length take the in-memory path (256 KiB). */
export const SMALL_RESOURCE_BYTES = 256 * 1024;

/** Options of {@link downloadSmall}. */
export interface SmallDownloadOptions {
  /** The Destination's root (parents created under it, symlinks refused). */
  readonly root: string;
  readonly signal?: AbortSignal;
  /** Whole-download retries after network errors, timeouts and 5xx (default 2). */
  readonly retries?: number;
  /** No attempt starts at or after this time (epoch ms; see `DownloadOptions.retryUntil`). */
  readonly retryUntil?: number;
  /**
   * Places the verified body at `target` (parents exist): {@link writeSmallFile}, or in the Destination's
   * `batch` durability a staged temporary file ({@link stageSmallFile}).
   */
  readonly place: (target: string, body: Uint8Array) => Promise<void> | void;
}

/**
 * GETs a resource whose declared length is at most {@link SMALL_RESOURCE_BYTES} and installs it at `target`
 * after checking length and hashes. Memory: the body (bounded by the declared length; a longer body is
 * refused as soon as it exceeds it).
 *
 * @throws ResourceSyncError RS_LENGTH_MISMATCH, RS_HASH_MISMATCH (old file untouched), RS_HTTP, RS_TIMEOUT,
 *   RS_IO, RS_UNSAFE_PATH.
 */
export async function downloadSmall(
  client: HttpClient,
  url: string,
  target: string,
  expected: Expected & { readonly length: number },
  options: SmallDownloadOptions,
): Promise<{ length: number; hashes: Hashes }> {
  const algs: HashAlgorithm[] = ['md5', 'sha-256'];
  if (expected.hashes?.['sha-1'] !== undefined) algs.push('sha-1');
  const retryOptions: { retries: number; signal?: AbortSignal; until?: number } = { retries: options.retries ?? 2 };
  if (options.signal !== undefined) retryOptions.signal = options.signal;
  if (options.retryUntil !== undefined) retryOptions.until = options.retryUntil;
  const init: { signal?: AbortSignal; retryUntil?: number } = {};
  if (options.signal !== undefined) init.signal = options.signal;
  if (options.retryUntil !== undefined) init.retryUntil = options.retryUntil;
  return retryWhole(async () => {
    const res = await client.get(url, init);
    const chunks: Uint8Array[] = [];
    let n = 0;
    for await (const chunk of res.body) {
      n += chunk.byteLength;
      if (n > expected.length)
        throw new ResourceSyncError('RS_LENGTH_MISMATCH', `more than the ${expected.length} bytes declared`, {
          url: res.url,
        });
      chunks.push(chunk);
    }
    const body = chunks.length === 1 ? (chunks[0] as Uint8Array) : Buffer.concat(chunks);
    const hasher = createMultiHasher(algs);
    hasher.update(body);
    const result = { length: n, hashes: hasher.digest() };
    verify(expected, result, res.url);
    await ensureParentDirectory(options.root, target);
    await options.place(target, body);
    return result;
  }, retryOptions);
}

/** Creates `tmp` and writes all of `body` to it; returns the open descriptor. */
function createAndWriteSync(tmp: string, body: Uint8Array): number {
  const fd = openSync(tmp, 'wx', 0o644);
  try {
    let off = 0;
    while (off < body.byteLength) off += writeSync(fd, body, off, body.byteLength - off);
  } catch (e) {
    closeQuietly(fd);
    throw e;
  }
  return fd;
}

function closeQuietly(fd: number): void {
  try {
    closeSync(fd);
  } catch {
    // already failing
  }
}

/** Undoes a failed temp-file write (closes `fd` if still open, removes `tmp`) and throws RS_IO naming `target`. */
function failSmallWrite(target: string, tmp: string, fd: number | undefined, e: unknown): never {
  if (fd !== undefined) closeQuietly(fd);
  try {
    unlinkSync(tmp);
  } catch {
    // not created, or already renamed
  }
  throw new ResourceSyncError('RS_IO', `cannot write ${target}: ${(e as Error).message}`, { cause: e });
}

/** Writes `body` to a temporary file next to `target` and renames it over `target` (synchronously). */
export function writeFileAtomicSync(target: string, body: Uint8Array, fsync: boolean): void {
  const tmp = smallTempPath(target);
  let fd: number | undefined;
  try {
    fd = createAndWriteSync(tmp, body);
    if (fsync) fsyncSync(fd);
    closeSync(fd);
    fd = undefined;
    placeFileSync(tmp, target);
  } catch (e) {
    failSmallWrite(target, tmp, fd, e);
  }
}

/**
 * Writes `body` to a new temporary file next to `target` (synchronously, no fsync) and returns its path; the
 * caller renames it over `target` once it is durable (see the Destination's `batch` durability). The
 * temporary file is removed on failure.
 */
export function writeSmallTemp(target: string, body: Uint8Array): string {
  const tmp = smallTempPath(target);
  let fd: number | undefined;
  try {
    fd = createAndWriteSync(tmp, body);
    closeSync(fd);
    fd = undefined;
  } catch (e) {
    failSmallWrite(target, tmp, fd, e);
  }
  return tmp;
}

/**
 * Stages `body` for `target` (see {@link writeSmallTemp}) the way {@link writeSmallFile} writes: synchronously
 * when `target` does not exist yet, on the file writer thread ({@link sharedFileWriter}) when it replaces a
 * file, so that the loop goes on with the downloads; that thread also renames it over the old file when its
 * batch commits (the costly part here: 80-104 µs per file, see spares.ts). `replacing`, when the caller knows,
 * spares the check (a stat: ~19 µs of the event loop per file in a busy directory here).
 */
export async function stageSmallFile(target: string, body: Uint8Array, replacing?: boolean): Promise<string> {
  if (!(replacing ?? existsSync(target))) return writeSmallTemp(target, body);
  const tmp = smallTempPath(target);
  await sharedFileWriter().create(tmp, body, target);
  return tmp;
}

/**
 * Writes `body` next to `target` and renames it over `target`. A new file is written with synchronous open,
 * write, close and rename on the event loop; with `fsync`, only the fdatasync goes to the thread pool (so
 * several files are flushed at once) and the loop moves on meanwhile. A file replacing an existing one is
 * written by the file writer thread, or with `fsync` on the thread pool ({@link writeSmallFileOnPool}); `replacing`,
 * when the caller knows, spares the check. Measured here (2 cores, loopback, 2 KB files): each trip to
 * the thread pool costs a thread wake-up and a completion on the loop, and four of them per file (the
 * asynchronous writeFile + rename) cost more than the four system calls themselves: a dump baseline went from
 * ~7,000 to ~10,000 files/s and from ~140 to ~95 µs CPU per file. The temporary file is removed on failure.
 */
export async function writeSmallFile(
  target: string,
  body: Uint8Array,
  fsync: boolean,
  replacing?: boolean,
): Promise<void> {
  // Replacing a file is left to another thread: a rename over an existing file frees the old file's blocks
  // (80-104 µs per file here, see spares.ts) and makes ext4 start the new file's writeback (auto_da_alloc),
  // which would hold the loop. Without fsync, one job of the file writer thread does it all; with fsync, the
  // thread pool flushes several files at once.
  if (replacing ?? existsSync(target)) {
    if (!fsync) return sharedFileWriter().install(smallTempPath(target), target, body);
    return writeSmallFileOnPool(target, body);
  }
  if (!fsync) {
    writeFileAtomicSync(target, body, false);
    return;
  }
  const tmp = smallTempPath(target);
  let fd: number | undefined;
  try {
    fd = createAndWriteSync(tmp, body);
    const synced = fd;
    await new Promise<void>((resolve, reject) => fdatasync(synced, (e) => (e === null ? resolve() : reject(e))));
    closeSync(fd);
    fd = undefined;
    placeFileSync(tmp, target);
  } catch (e) {
    failSmallWrite(target, tmp, fd, e);
  }
}

/**
 * {@link writeSmallFile} with fsync on the thread pool (open / write / fdatasync / close / rename, so several
 * files are flushed at once), for files that replace existing ones.
 */
async function writeSmallFileOnPool(target: string, body: Uint8Array): Promise<void> {
  const tmp = smallTempPath(target);
  try {
    const fd = await new Promise<number>((resolve, reject) =>
      open(tmp, 'wx', 0o644, (e, fd) => (e === null ? resolve(fd) : reject(e))),
    );
    try {
      let off = 0;
      while (off < body.byteLength) {
        off += await new Promise<number>((resolve, reject) =>
          write(fd, body, off, body.byteLength - off, null, (e, n) => (e === null ? resolve(n) : reject(e))),
        );
      }
      await new Promise<void>((resolve, reject) => fdatasync(fd, (e) => (e === null ? resolve() : reject(e))));
    } finally {
      await new Promise<void>((resolve) => close(fd, () => resolve()));
    }
    await placeFile(tmp, target);
  } catch (e) {
    await new Promise<void>((resolve) => unlink(tmp, () => resolve()));
    throw new ResourceSyncError('RS_IO', `cannot write ${target}: ${(e as Error).message}`, { cause: e });
  }
}
