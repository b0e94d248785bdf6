/**
 * Verified installation of one resource: the bytes go to a temporary file next to the target (same directory,
 * hence same file system), md5 and sha-256 (and sha-1 when the Source declares it) are computed in the same
 * pass, the length and any declared hash are checked, and only then is the temporary file renamed over the
 * target. On any failure the temporary file is removed and the old file is left as it was.
 *
 * @module
 */
import { randomBytes } from 'node:crypto';
import { closeSync, fsync as fsyncCallback, openSync, writeSync } from 'node:fs';
import { mkdir, open, unlink } from 'node:fs/promises';
import { promisify } from 'node:util';
import { basename, dirname, join } from 'node:path';
import type { HashAlgorithm } from '../core/constants.js';
import { ResourceSyncError } from '../core/errors.js';
import type { Hashes } from '../core/hash.js';
import type { Entry } from '../core/model.js';
import { createMultiHasher } from '../io/hashing.js';
import { syncDir } from '../io/atomic.js';
import { type HttpClient, isRetriable, retryWhole } from '../http/client.js';
import { ensureParentDirectory, forgetVerifiedDirectories, placeFile, placeFileSync, tempStem } from './paths.js';

/** What the Source declares about a resource: checked after the download. */
export interface Expected {
  readonly length?: number;
  readonly hashes?: Hashes;
}

/** Result of a verified install. */
export interface InstallResult {
  readonly length: number;
  /** md5 and sha-256 always, sha-1 when it was declared. */
  readonly hashes: Hashes;
}

/** Options of {@link installFromStream} and {@link downloadAndInstall}. */
export interface InstallOptions {
  readonly signal?: AbortSignal;
  /** fsync the file before the rename (default true: a file the state records is on disk). */
  readonly fsync?: boolean;
  /**
   * The Destination's root: parent directories are created one by one under it, refusing symbolic links
   * (`RS_UNSAFE_PATH`). Without it, parents are created with `mkdir -p`.
   */
  readonly root?: string;
  /** Install even when a declared hash or length does not match (the result says what was found). */
  readonly skipVerify?: boolean;
}

/** Options of {@link downloadAndInstall}. */
export interface DownloadOptions extends InstallOptions {
  /** URLs to try before the resource's own (e.g. `rel="duplicate"` mirrors by `pri`, see {@link mirrorsOf}). */
  readonly mirrors?: readonly string[];
  /** Whole-download retries per URL after network errors, timeouts and 5xx (default 2). */
  readonly retries?: number;
  /** Request headers (e.g. conditional GET). */
  readonly headers?: Readonly<Record<string, string>>;
  /**
   * No attempt (URL, retry, the client's own retry) starts at or after this time (epoch ms): the time bound of
   * one resource, all attempts together (see `DestinationOptions.resourceTimeoutMs`).
   */
  readonly retryUntil?: number;
}

const ALWAYS: readonly HashAlgorithm[] = ['md5', 'sha-256'];
/** Files up to this size are gathered in memory and written in one go (memory per install in flight). */
const SMALL_FILE_BYTES = 64 * 1024;
/** Resources declaring at least this length are fetched with {@link downloadResumable}. */
const RESUMABLE_MIN_BYTES = 8 * 1024 * 1024;
/** Directories known to exist (mkdir -p skipped); bounded. */
const knownDirs = new Set<string>();

/** Directories that got a rename since the last {@link syncInstalledDirectories}. */
const dirtyDirs = new Set<string>();

/** The temporary path used for `target`: `.<name>.<random>.tmp` in the same directory. */
export function installTempPath(target: string): string {
  return join(dirname(target), `.${tempStem(basename(target))}.${randomBytes(6).toString('hex')}.tmp`);
}

/** True for names of temporary files left by an interrupted install (to clean up or to skip in audits). */
export function isInstallTempName(name: string): boolean {
  return /^\..*\.[0-9a-f]{12}\.tmp$/.test(name);
}

/**
 * The URLs to fetch a resource from, best first: its `rel="duplicate"` links by ascending `pri` (links
 * without `pri` after those with, in document order), then its `loc` (§12 Mirroring, Example 24).
 */
export function mirrorsOf(entry: Entry): string[] {
  const dups = entry.links
    .map((l, i) => ({ l, i }))
    .filter(({ l }) => l.rel === 'duplicate' && l.href !== '' && l.href !== entry.loc)
    .sort((a, b) => (a.l.pri ?? Number.MAX_SAFE_INTEGER) - (b.l.pri ?? Number.MAX_SAFE_INTEGER) || a.i - b.i);
  return dups.map(({ l }) => l.href);
}

function algorithmsFor(expected: Expected): HashAlgorithm[] {
  return expected.hashes?.['sha-1'] !== undefined ? [...ALWAYS, 'sha-1'] : [...ALWAYS];
}

/** Throws RS_LENGTH_MISMATCH / RS_HASH_MISMATCH when `got` contradicts `expected`. */
export function verify(expected: Expected, got: InstallResult, url?: string): void {
  const where = url === undefined ? {} : { url };
  if (expected.length !== undefined && expected.length !== got.length)
    throw new ResourceSyncError('RS_LENGTH_MISMATCH', `length ${got.length}, expected ${expected.length}`, where);
  for (const [alg, hex] of Object.entries(expected.hashes ?? {}) as [HashAlgorithm, string | undefined][]) {
    const mine = got.hashes[alg];
    if (hex === undefined || mine === undefined) continue;
    if (mine !== hex.toLowerCase())
      throw new ResourceSyncError('RS_HASH_MISMATCH', `${alg} ${mine}, expected ${hex.toLowerCase()}`, where);
  }
}

/**
 * Streams `source` to a temporary file next to `target`, hashes it in the same pass, verifies it against
 * `expected`, and renames it over `target`. Memory: up to 64 KiB gathered (a small file is verified before it
 * touches the disk, then written with synchronous calls, about 30 µs of event-loop time), then one chunk at a time.
 * @throws ResourceSyncError RS_LENGTH_MISMATCH / RS_HASH_MISMATCH (old file untouched), RS_IO, RS_UNSAFE_PATH,
 *   or whatever the source throws (RS_HTTP, RS_TIMEOUT...).
 */
export async function installFromStream(
  source: AsyncIterable<Uint8Array>,
  target: string,
  expected: Expected,
  options: InstallOptions & { readonly url?: string } = {},
): Promise<InstallResult> {
  const dir = dirname(target);
  const prepareDir = async (): Promise<void> => {
    if (options.root !== undefined) await ensureParentDirectory(options.root, target);
    else await mkdirp(dir);
  };
  /** The directory was removed since it was verified (e.g. emptied by a deletion): verify and create it again. */
  const forgetDir = async (): Promise<void> => {
    if (options.root !== undefined) forgetVerifiedDirectories(options.root);
    knownDirs.delete(dir);
    await prepareDir();
  };
  await prepareDir();
  const tmp = installTempPath(target);
  const hasher = createMultiHasher(algorithmsFor(expected));
  const limit = options.skipVerify === true ? undefined : expected.length;
  const fsync = options.fsync ?? true;
  const it = source[Symbol.asyncIterator]();
  let fh: Awaited<ReturnType<typeof open>> | undefined;
  let fd: number | undefined;
  let created = false;
  const take = (chunk: Uint8Array): void => {
    if (options.signal?.aborted === true)
      throw new ResourceSyncError('RS_ABORTED', 'install aborted', {
        ...urlOf(options.url),
        cause: options.signal.reason,
      });
    hasher.update(chunk);
    if (limit !== undefined && hasher.length > limit)
      throw new ResourceSyncError('RS_LENGTH_MISMATCH', `more than the ${limit} bytes declared`, urlOf(options.url));
  };
  try {
    // Small files (the common case) are gathered in memory first: a mismatch never touches the disk, and the
    // file is written with a few synchronous calls instead of as many thread-pool round trips.
    const buffered: Uint8Array[] = [];
    let size = 0;
    let ended = false;
    while (size <= SMALL_FILE_BYTES) {
      const r = await it.next();
      if (r.done === true) {
        ended = true;
        break;
      }
      take(r.value);
      buffered.push(r.value);
      size += r.value.byteLength;
    }
    if (ended) {
      const result: InstallResult = { length: hasher.length, hashes: hasher.digest() };
      if (options.skipVerify !== true) verify(expected, result, options.url);
      try {
        try {
          fd = openSync(tmp, 'wx', 0o644);
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
          await forgetDir();
          fd = openSync(tmp, 'wx', 0o644);
        }
        created = true;
        for (const b of buffered) writeAllSync(fd, b);
        if (fsync) await fsyncAsync(fd);
        closeSync(fd);
        fd = undefined;
        placeFileSync(tmp, target);
      } catch (e) {
        throw ioError(`cannot install ${target}`, e);
      }
      dirtyDirs.add(dir);
      return result;
    }
    try {
      fh = await open(tmp, 'wx', 0o644).catch(async (e: unknown) => {
        if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
        await forgetDir();
        return open(tmp, 'wx', 0o644);
      });
      created = true;
    } catch (e) {
      throw ioError(`cannot create ${tmp}`, e);
    }
    for (const b of buffered) await writeAll(fh, b);
    buffered.length = 0;
    for (;;) {
      const r = await it.next();
      if (r.done === true) break;
      take(r.value);
      await writeAll(fh, r.value);
    }
    const result: InstallResult = { length: hasher.length, hashes: hasher.digest() };
    if (options.skipVerify !== true) verify(expected, result, options.url);
    if (fsync) await fh.sync();
    await fh.close();
    fh = undefined;
    try {
      await placeFile(tmp, target);
    } catch (e) {
      throw ioError(`cannot install ${target}`, e);
    }
    dirtyDirs.add(dir);
    return result;
  } catch (e) {
    await it.return?.()?.catch(() => undefined);
    if (fd !== undefined) closeQuietly(fd);
    await fh?.close().catch(() => undefined);
    if (created) await unlink(tmp).catch(() => undefined);
    if (e instanceof ResourceSyncError) throw e;
    if (options.signal?.aborted === true)
      throw new ResourceSyncError('RS_ABORTED', 'install aborted', { ...urlOf(options.url), cause: e });
    throw ioError(`cannot write ${target}`, e);
  }
}

async function writeAll(fh: Awaited<ReturnType<typeof open>>, chunk: Uint8Array): Promise<void> {
  let off = 0;
  while (off < chunk.byteLength) {
    const { bytesWritten } = await fh.write(chunk, off, chunk.byteLength - off);
    off += bytesWritten;
  }
}

function writeAllSync(fd: number, chunk: Uint8Array): void {
  let off = 0;
  while (off < chunk.byteLength) off += writeSync(fd, chunk, off, chunk.byteLength - off);
}

function closeQuietly(fd: number): void {
  try {
    closeSync(fd);
  } catch {
    // Already closed or never valid: nothing to do.
  }
}

const fsyncAsync = promisify(fsyncCallback);

/**
 * Downloads a resource and installs it at `target` after verification (see {@link installFromStream}).
 * Tries each of `mirrors` in order, then `url`; each URL is retried as a whole download after network errors,
 * timeouts and 5xx (resources declaring 8 MiB or more resume where they stopped: {@link downloadResumable}). A mismatch on one URL moves on to the next. Memory: one network chunk at a time.
 *
 * @returns the length, hashes and the URL the content came from.
 * @throws the error of the last URL tried (the resource's own): RS_HTTP, RS_TIMEOUT, RS_HASH_MISMATCH,
 *   RS_LENGTH_MISMATCH, RS_IO, RS_UNSAFE_PATH, RS_ABORTED. The old file is untouched on failure.
 */
export async function downloadAndInstall(
  client: HttpClient,
  url: string,
  target: string,
  expected: Expected,
  options: DownloadOptions = {},
): Promise<InstallResult & { readonly url: string }> {
  const candidates = [...(options.mirrors ?? []).filter((m) => m !== url), url];
  const until = options.retryUntil;
  let lastError: unknown;
  for (const candidate of candidates) {
    if (lastError !== undefined && until !== undefined && Date.now() >= until) break;
    try {
      if ((expected.length ?? 0) >= RESUMABLE_MIN_BYTES) {
        const r = await downloadResumable(client, candidate, target, expected, {
          ...options,
          retries: Math.max(options.retries ?? 2, 5),
        });
        return { ...r, url: candidate };
      }
      const result = await retryWhole(
        async () => {
          const res = await client.get(candidate, {
            ...(options.signal === undefined ? {} : { signal: options.signal }),
            ...(options.headers === undefined ? {} : { headers: options.headers }),
            ...(until === undefined ? {} : { retryUntil: until }),
          });
          return installFromStream(res.body, target, expected, { ...options, url: res.url });
        },
        {
          retries: options.retries ?? 2,
          ...(options.signal === undefined ? {} : { signal: options.signal }),
          ...(until === undefined ? {} : { until }),
        },
      );
      return { ...result, url: candidate };
    } catch (e) {
      lastError = e;
      if (options.signal?.aborted === true) throw e;
      if (e instanceof ResourceSyncError && (e.code === 'RS_IO' || e.code === 'RS_UNSAFE_PATH')) throw e;
      if (!(e instanceof ResourceSyncError) && !isRetriable(e)) throw e;
    }
  }
  throw lastError;
}

/** Options of {@link downloadResumable}. */
export interface ResumableOptions extends InstallOptions {
  /** Attempts after the first, each resuming where the last one stopped (default 5). */
  readonly retries?: number;
  /** Largest body accepted (RS_LIMIT past it). */
  readonly maxBytes?: number;
  readonly headers?: Readonly<Record<string, string>>;
  /** See {@link DownloadOptions.retryUntil}. */
  readonly retryUntil?: number;
}

/**
 * Downloads a (large) resource to `target` through a temporary file next to it, resuming after a failure
 * mid-body with `Range: bytes=N-` and `If-Range` (the first response's strong ETag, else its Last-Modified)
 * instead of starting over; a server that answers the resumed request with the whole body (200) is read from
 * the start again. The bytes are hashed as they arrive, verified against `expected`, then renamed into place.
 * Content-Encoding is not requested (ranges count the bytes as sent). Memory: one network chunk.
 *
 * @example
 * ```ts
 * const { length, hashes } = await downloadResumable(client, packageUrl, '/tmp/dump.zip', { length: 5e9 });
 * ```
 * @throws as {@link downloadAndInstall}, and RS_LIMIT past `maxBytes`. The old file is untouched on failure.
 */
export async function downloadResumable(
  client: HttpClient,
  url: string,
  target: string,
  expected: Expected,
  options: ResumableOptions = {},
): Promise<InstallResult & { readonly url: string }> {
  const dir = dirname(target);
  if (options.root !== undefined) await ensureParentDirectory(options.root, target);
  else await mkdirp(dir);
  const tmp = installTempPath(target);
  const algs = algorithmsFor(expected);
  const limit =
    options.skipVerify === true
      ? options.maxBytes
      : Math.min(expected.length ?? Infinity, options.maxBytes ?? Infinity);
  let fh: Awaited<ReturnType<typeof open>> | undefined;
  let hasher = createMultiHasher(algs);
  let written = 0;
  let validator: string | undefined;
  let finalUrl = url;
  try {
    fh = await open(tmp, 'wx', 0o644).catch((e: unknown) => {
      throw ioError(`cannot create ${tmp}`, e);
    });
    const file = fh;
    await retryWhole(
      async () => {
        const resuming = written > 0 && validator !== undefined;
        const headers: Record<string, string> = { ...options.headers };
        if (resuming) {
          headers.range = `bytes=${written}-`;
          headers['if-range'] = validator as string;
        }
        const res = await client.get(url, {
          headers,
          decompress: false,
          ...(options.signal === undefined ? {} : { signal: options.signal }),
          ...(options.retryUntil === undefined ? {} : { retryUntil: options.retryUntil }),
        });
        finalUrl = res.url;
        const resumed = resuming && res.status === 206 && contentRangeStart(res.headers['content-range']) === written;
        if (!resumed) {
          if (res.status === 206) {
            await res.discard();
            throw new ResourceSyncError(
              'RS_HTTP',
              `unexpected partial content (${String(res.headers['content-range'])})`,
              {
                url: res.url,
              },
            );
          }
          // A fresh start (first attempt, no validator, or the server sent the whole body again).
          if (written > 0) await file.truncate(0);
          written = 0;
          hasher = createMultiHasher(algs);
          validator = strongValidator(res.headers);
        }
        for await (const chunk of res.body) {
          if (options.signal?.aborted === true)
            throw new ResourceSyncError('RS_ABORTED', 'download aborted', { url, cause: options.signal.reason });
          hasher.update(chunk);
          if (limit !== undefined && hasher.length > limit) {
            const declared = expected.length !== undefined && limit === expected.length && options.skipVerify !== true;
            throw new ResourceSyncError(
              declared ? 'RS_LENGTH_MISMATCH' : 'RS_LIMIT',
              declared ? `more than the ${limit} bytes declared` : `larger than ${limit} bytes`,
              { url: res.url },
            );
          }
          let off = 0;
          while (off < chunk.byteLength) {
            const { bytesWritten } = await file.write(chunk, off, chunk.byteLength - off, written + off);
            off += bytesWritten;
          }
          written += chunk.byteLength;
        }
      },
      {
        retries: options.retries ?? 5,
        ...(options.signal === undefined ? {} : { signal: options.signal }),
        ...(options.retryUntil === undefined ? {} : { until: options.retryUntil }),
      },
    );
    const result: InstallResult = { length: hasher.length, hashes: hasher.digest() };
    if (options.skipVerify !== true) verify(expected, result, finalUrl);
    if (options.fsync ?? true) await file.sync();
    await file.close();
    fh = undefined;
    await placeFile(tmp, target).catch((e: unknown) => {
      throw ioError(`cannot install ${target}`, e);
    });
    dirtyDirs.add(dir);
    return { ...result, url: finalUrl };
  } catch (e) {
    await fh?.close().catch(() => undefined);
    await unlink(tmp).catch(() => undefined);
    if (e instanceof ResourceSyncError) throw e;
    throw ioError(`cannot write ${target}`, e);
  }
}

/** The first byte position of a `Content-Range: bytes a-b/n` header, or undefined. */
function contentRangeStart(value: string | string[] | undefined): number | undefined {
  const m = /^\s*bytes\s+(\d+)-\d+\/(\d+|\*)\s*$/i.exec(Array.isArray(value) ? (value[0] ?? '') : (value ?? ''));
  return m === null ? undefined : Number(m[1]);
}

/** A validator safe for `If-Range`: a strong ETag, else Last-Modified (RFC 9110 §13.1.5). */
function strongValidator(headers: Readonly<Record<string, string | string[] | undefined>>): string | undefined {
  const etag = headers.etag;
  if (typeof etag === 'string' && etag !== '' && !etag.startsWith('W/')) return etag;
  const lm = headers['last-modified'];
  return typeof lm === 'string' && lm !== '' ? lm : undefined;
}

/**
 * fsyncs every directory that received a file since the last call, so the renames are durable. Call it before
 * recording a watermark. Memory: the set of directories touched.
 */
export async function syncInstalledDirectories(): Promise<number> {
  const dirs = [...dirtyDirs];
  dirtyDirs.clear();
  for (const d of dirs) await syncDir(d);
  return dirs.length;
}

async function mkdirp(dir: string): Promise<void> {
  if (knownDirs.has(dir)) return;
  try {
    await mkdir(dir, { recursive: true });
  } catch (e) {
    throw ioError(`cannot create ${dir}`, e);
  }
  if (knownDirs.size > 10_000) knownDirs.clear();
  knownDirs.add(dir);
}

function urlOf(url: string | undefined): { url?: string } {
  return url === undefined ? {} : { url };
}

function ioError(what: string, e: unknown): ResourceSyncError {
  if (e instanceof ResourceSyncError) return e;
  return new ResourceSyncError('RS_IO', `${what}: ${(e as Error).message}`, { cause: e });
}
