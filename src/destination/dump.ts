/**
 * Resource Dump and Change Dump packages (§11.2, §13.2): a ZIP file with `manifest.xml` at its top and the
 * bitstreams at the `path` the manifest gives each resource.
 *
 * A package is received into memory when it is small (at most {@link DEFAULT_MEMORY_PACKAGE_BYTES} by
 * default, see {@link fetchPackage}), else streamed to a temporary file (its size bounded), then read by random
 * access with our own reader (`io/zip-reader.ts`): the central directory is read in one piece and every name
 * checked (zip-slip: absolute paths, `..` segments, backslashes, drive letters and NUL bytes refuse the whole
 * package), then `manifest.xml` is opened, then each bitstream on demand. Nothing is ever written at a path
 * taken from the package: the install target comes from the resource's URI through the path mapper; package
 * paths only locate bitstreams inside the ZIP.
 *
 * @module
 */
import { mkdir, open, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { type HashAlgorithm, DUMP_MANIFEST_NAME, HASH_ALGORITHMS } from '../core/constants.js';
import { ResourceSyncError } from '../core/errors.js';
import { type Hashes, hashesMatch } from '../core/hash.js';
import { tempPathFor } from '../io/atomic.js';
import { createMultiHasher } from '../io/hashing.js';
import { type LocalEntry, LocalEntryParser } from '../io/zip-stream.js';
import { DEFAULT_MAX_ZIP_ENTRIES, ZipReader, type ZipReaderOptions, checkEntryName } from '../io/zip-reader.js';
import { type DocumentStream, openDocument } from '../xml/index.js';
import type { HttpClient } from '../http/client.js';

/** Default bound on a downloaded package: 8 GiB. */
export const DEFAULT_MAX_PACKAGE_BYTES = 8 * 1024 ** 3;
/** Default bound on the number of files in a package. */
export const DEFAULT_MAX_PACKAGE_ENTRIES = DEFAULT_MAX_ZIP_ENTRIES;
/** Default bound on the size of `manifest.xml`, uncompressed: 256 MiB (a manifest is a Sitemap, ≤ 50 MB, §4.2). */
export const DEFAULT_MAX_MANIFEST_BYTES = 256 * 1024 ** 2;
/**
 * Default bound on a package received into memory by {@link fetchPackage}: 8 MiB. Measured
 * (`BENCH_ONLY=dump node dist/bench/destination-sync.js 10000 5 real`, two runs each): the 10,000-file
 * baseline package (~22 MB) installed at 13,218-13,479 resources/s through a temporary file, against
 * 11,824-12,396 from memory under a 32 MiB bound. For a package of 1,000 small files, download + open took
 * 2.4 ms into memory against 4.3 ms through a file (`bench/package-open.ts`); whole incremental runs from such
 * a package showed no difference beyond their noise (15 rounds each way: medians 159 ms from memory, 161 ms
 * through a file). So the bound is a judgement: small packages skip a temporary file, large ones stay off the
 * heap.
 */
export const DEFAULT_MEMORY_PACKAGE_BYTES = 8 * 1024 ** 2;

/** Options of {@link downloadPackage}. */
export interface DownloadPackageOptions {
  /** Directory for the temporary file (created when missing). */
  readonly tmpDir: string;
  /** Refuse a package larger than this (default {@link DEFAULT_MAX_PACKAGE_BYTES}). */
  readonly maxBytes?: number;
  /** Length the dump document declares for the package (`rs:md length`). */
  readonly length?: number;
  /** Hashes the dump document declares for the package. */
  readonly hashes?: Hashes;
  readonly signal?: AbortSignal;
  /** Called with each chunk: bytes received so far, and the total when declared or announced (progress display). */
  readonly onBytes?: (received: number, total: number | undefined) => void;
  /** Called with each chunk of the body, in order, after it was counted and checked (see {@link startPackage}). */
  readonly onChunk?: (chunk: Uint8Array) => void;
}

/** Options of {@link fetchPackage}. */
export interface FetchPackageOptions extends DownloadPackageOptions {
  /**
   * The memory bound: a package up to this many bytes is received into memory (default
   * {@link DEFAULT_MEMORY_PACKAGE_BYTES}; 0: always a temporary file). A larger declared length or
   * `Content-Length` goes to a file at once; a body of unknown length is held in memory up to this bound and
   * spills to a file past it.
   */
  readonly memoryBytes?: number;
}

/** Options of {@link startPackage}. */
export interface StartPackageOptions extends FetchPackageOptions {
  /**
   * Also hand out the package's files as they arrive ({@link PendingPackage.arriving}), read from their local
   * headers (see `io/zip-stream.ts`); default false.
   */
  readonly arriving?: boolean;
}

/** Largest bitstream handed out as it arrives (larger ones are read from the whole package): 256 KiB. */
export const ARRIVING_MAX_FILE_BYTES = 256 * 1024;
/** Largest first file (the manifest) handed out as it arrives: 16 MiB. */
export const ARRIVING_MAX_MANIFEST_BYTES = 16 * 1024 ** 2;
/** Bound on the bytes of arriving files not yet taken (see {@link LocalEntryParserOptions.maxQueuedBytes}). */
export const ARRIVING_MAX_QUEUED_BYTES = 32 * 1024 ** 2;

/**
 * GETs a package into a new temporary file under `tmpDir` and returns its path; the caller removes it (see
 * {@link DumpPackage.close}). The declared length and hash of the package, when given, are checked.
 * Memory: one body chunk at a time. On any failure the temporary file is removed.
 *
 * @throws ResourceSyncError `RS_HTTP`/`RS_TIMEOUT` (from the client), `RS_LIMIT` past `maxBytes`,
 *   `RS_LENGTH_MISMATCH`/`RS_HASH_MISMATCH` against the dump's declaration, `RS_IO`.
 */
export async function downloadPackage(
  client: HttpClient,
  url: string,
  options: DownloadPackageOptions,
): Promise<string> {
  return (await receivePackage(client, url, options, 0)) as string;
}

/**
 * GETs a package for {@link DumpPackage.open}: its bytes when it fits in `memoryBytes` (see
 * {@link FetchPackageOptions.memoryBytes}), else the path of a new temporary file under `tmpDir` (removed by
 * {@link DumpPackage.close}, or by the caller). The declared length and hashes, when given, are checked.
 * Memory: at most `memoryBytes` (once: a known length is received into one buffer of that length; an unknown
 * one as chunks joined at the end, so twice that for a moment), else one body chunk at a time.
 * On any failure the temporary file is removed.
 *
 * @example
 * ```ts
 * const pkg = await DumpPackage.open(await fetchPackage(client, url, { tmpDir }), { url });
 * ```
 * @throws ResourceSyncError like {@link downloadPackage}.
 */
export async function fetchPackage(
  client: HttpClient,
  url: string,
  options: FetchPackageOptions,
): Promise<string | Uint8Array> {
  return receivePackage(client, url, options, options.memoryBytes ?? DEFAULT_MEMORY_PACKAGE_BYTES);
}

/**
 * A package being received (see {@link startPackage}): its bytes or temporary file once {@link received}
 * settles, or {@link discard}ed unused.
 */
export interface PendingPackage {
  readonly url: string;
  /** {@link fetchPackage}'s result; a failure is only reported here (never unhandled). */
  readonly received: Promise<string | Uint8Array>;
  /**
   * With {@link StartPackageOptions.arriving}: the package's files as they arrive, each checked against its
   * local header only. Nothing read here is verified against the package as a whole (its declared length and
   * hash, its central directory) before {@link received} settles: a consumer that acts on them must be able
   * to take back or re-check what it did when `received` rejects (see `baseline.ts`, `incremental.ts`).
   */
  readonly arriving?: LocalEntryParser;
  /** Stops the download if it is still running and removes its temporary file, if any. Never throws. */
  discard(): Promise<void>;
}

/**
 * Starts receiving a package now (see {@link fetchPackage}), so it can arrive while the caller is still busy
 * with the previous one: a dump's packages are then downloaded while the one before is being applied.
 * Memory: what {@link fetchPackage} holds for one package.
 *
 * @example
 * ```ts
 * const next = startPackage(client, url, { tmpDir });
 * // ... apply the current package ...
 * const pkg = await DumpPackage.open(await next.received, { url });
 * ```
 */
export function startPackage(client: HttpClient, url: string, options: StartPackageOptions): PendingPackage {
  const stop = new AbortController();
  const signal = options.signal === undefined ? stop.signal : AbortSignal.any([options.signal, stop.signal]);
  const arriving =
    options.arriving === true
      ? new LocalEntryParser({
          maxEntryBytes: ARRIVING_MAX_FILE_BYTES,
          maxFirstEntryBytes: ARRIVING_MAX_MANIFEST_BYTES,
          maxQueuedBytes: ARRIVING_MAX_QUEUED_BYTES,
        })
      : undefined;
  const fetchOptions: FetchPackageOptions =
    arriving === undefined ? { ...options, signal } : { ...options, signal, onChunk: (c) => arriving.push(c) };
  const received = fetchPackage(client, url, fetchOptions);
  received.then(
    () => arriving?.end(),
    (e: unknown) => arriving?.end(`the package failed: ${(e as Error).message}`),
  );
  let discarded = false;
  const pending: PendingPackage = {
    url,
    received,
    discard: async () => {
      if (discarded) return;
      discarded = true;
      arriving?.stop('discarded');
      stop.abort(new ResourceSyncError('RS_ABORTED', 'package no longer needed', { url }));
      const r = await received.catch(() => undefined);
      if (typeof r === 'string') await rm(r, { force: true }).catch(() => undefined);
    },
  };
  return arriving === undefined ? pending : { ...pending, arriving };
}

/**
 * A file of a package applied as it arrived: what its local header said (checked against the central directory
 * once the package is in: {@link DumpPackage.describes}) and the resource it was applied to.
 */
export interface ArrivedFile {
  readonly offset: number;
  readonly crc32: number;
  readonly size: number;
  readonly uri: string;
}

/** The {@link ArrivedFile} of a file read as it arrived and applied to `uri`. */
export function arrivedFile(file: LocalEntry, uri: string): ArrivedFile {
  return { offset: file.offset, crc32: file.crc32, size: file.size, uri };
}

/** The manifest of a package being received and the files after it, as they arrive (see {@link arrivingManifest}). */
export interface ArrivingManifest {
  /** `manifest.xml` as read from its local header (compare with the central directory: {@link DumpPackage.describes}). */
  readonly file: LocalEntry;
  readonly doc: DocumentStream;
  /** The package's files after the manifest, in the order they arrive. */
  readonly files: AsyncIterator<LocalEntry>;
}

/**
 * The manifest of a package started with {@link StartPackageOptions.arriving}, when `manifest.xml` is the
 * package's first file and a readable document of `kind`; else undefined, and the package's files are no longer
 * read as they arrive (the whole package, once in, says what is wrong). Memory: the manifest's bytes (at most
 * {@link ARRIVING_MAX_MANIFEST_BYTES}).
 */
export async function arrivingManifest(
  pending: PendingPackage,
  kind: 'resource-dump-manifest' | 'change-dump-manifest',
): Promise<ArrivingManifest | undefined> {
  const arriving = pending.arriving;
  if (arriving === undefined) return undefined;
  const files = arriving[Symbol.asyncIterator]();
  const first = await files.next();
  if (first.done === true || first.value.name !== DUMP_MANIFEST_NAME) {
    arriving.stop(`the package does not start with ${DUMP_MANIFEST_NAME}`);
    return undefined;
  }
  try {
    const doc = await openDocument(first.value.data, { url: `${pending.url}#${DUMP_MANIFEST_NAME}` });
    if (doc.header.kind === kind) return { file: first.value, doc, files };
  } catch {
    // Reported when read from the whole package.
  }
  arriving.stop(`${DUMP_MANIFEST_NAME} is not a readable ${kind}`);
  return undefined;
}

/** The body length a response announces, unless it is content-encoded (then it is not the length we get). */
function contentLengthOf(headers: Readonly<Record<string, string | string[] | undefined>>): number | undefined {
  const encoding = headers['content-encoding'];
  if (encoding !== undefined && String(encoding).trim().toLowerCase() !== 'identity') return undefined;
  const v = headers['content-length'];
  return typeof v === 'string' && /^\d{1,15}$/.test(v.trim()) ? Number(v.trim()) : undefined;
}

async function receivePackage(
  client: HttpClient,
  url: string,
  options: DownloadPackageOptions,
  memoryBytes: number,
): Promise<string | Buffer> {
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_PACKAGE_BYTES;
  const signal = options.signal;
  const init: { signal?: AbortSignal } = {};
  if (signal !== undefined) init.signal = signal;
  if (options.length !== undefined && options.length > maxBytes)
    throw new ResourceSyncError('RS_LIMIT', `package declared ${options.length} bytes, more than ${maxBytes}`, { url });
  const res = await client.get(url, init);
  // Only the algorithms the dump declares (hashesMatch compares those alone).
  const algs = Object.keys(options.hashes ?? {}).filter((a): a is HashAlgorithm => a in HASH_ALGORITHMS);
  const hasher = algs.length > 0 ? createMultiHasher(algs) : undefined;
  const announced = options.length ?? contentLengthOf(res.headers);
  let bytes = 0;
  // Made on first use: an iterator made and then returned unused destroys the body with no listener (an
  // uncaught 'Request aborted'); a body never iterated is drained or dropped by discard() instead.
  let body: AsyncIterator<Uint8Array> | undefined;
  /** The next chunk, counted, bounded and hashed; undefined at the end. */
  const take = async (): Promise<Uint8Array | undefined> => {
    body ??= res.body[Symbol.asyncIterator]();
    const r = await body.next();
    if (r.done === true) return undefined;
    bytes += r.value.byteLength;
    if (bytes > maxBytes) throw new ResourceSyncError('RS_LIMIT', `package larger than ${maxBytes} bytes`, { url });
    if (options.length !== undefined && bytes > options.length)
      throw new ResourceSyncError(
        'RS_LENGTH_MISMATCH',
        `package is more than the ${options.length} bytes the dump declares`,
        { url },
      );
    if (signal?.aborted === true) throw new ResourceSyncError('RS_ABORTED', 'aborted', { url, cause: signal.reason });
    hasher?.update(r.value);
    options.onBytes?.(bytes, announced);
    options.onChunk?.(r.value);
    return r.value;
  };
  const verify = (): void => {
    if (options.length !== undefined && bytes !== options.length)
      throw new ResourceSyncError(
        'RS_LENGTH_MISMATCH',
        `package is ${bytes} bytes, the dump declares ${options.length}`,
        { url },
      );
    if (hasher !== undefined && options.hashes !== undefined && hashesMatch(options.hashes, hasher.digest()) === false)
      throw new ResourceSyncError('RS_HASH_MISMATCH', 'package does not match the hash the dump declares', { url });
  };
  let tmp: string | undefined;
  try {
    if (announced !== undefined && announced > maxBytes)
      throw new ResourceSyncError('RS_LIMIT', `package is ${announced} bytes, more than ${maxBytes}`, { url });
    const held: Uint8Array[] = [];
    if (memoryBytes > 0 && (announced === undefined || announced <= memoryBytes)) {
      // Into one buffer of the announced length (chunks, if the body turns out longer or has no length).
      let buf: Buffer | undefined = announced === undefined ? undefined : Buffer.allocUnsafe(announced);
      let filled = 0;
      for (;;) {
        const chunk = await take();
        if (chunk === undefined) {
          verify();
          return buf !== undefined ? buf.subarray(0, filled) : Buffer.concat(held, bytes);
        }
        if (buf !== undefined && filled + chunk.byteLength <= buf.length) {
          buf.set(chunk, filled);
          filled += chunk.byteLength;
          continue;
        }
        if (buf !== undefined) {
          held.push(buf.subarray(0, filled));
          buf = undefined;
        }
        held.push(chunk);
        if (bytes > memoryBytes) break; // past the memory bound: the rest goes to a file
      }
    }
    await mkdir(options.tmpDir, { recursive: true });
    const path = tempPathFor(join(options.tmpDir, 'package.zip'));
    async function* all(): AsyncGenerator<Uint8Array> {
      for (let c = held.shift(); c !== undefined; c = held.shift()) yield c;
      for (let c = await take(); c !== undefined; c = await take()) yield c;
    }
    const pipelineOptions: { signal?: AbortSignal } = {};
    if (signal !== undefined) pipelineOptions.signal = signal;
    // Opened here, not by the stream: a stream's own open can still be pending when the pipeline fails, and
    // would then create the file after the clean-up below removed it (seen in CI as a left-over .tmp).
    // The stream closes the handle when the pipeline ends, either way.
    const file = await open(path, 'wx', 0o600);
    tmp = path;
    await pipeline(all(), file.createWriteStream(), pipelineOptions);
    verify();
    return tmp;
  } catch (e) {
    if (tmp !== undefined) await rm(tmp, { force: true }).catch(() => undefined);
    await res.discard().catch(() => undefined);
    if (e instanceof ResourceSyncError) throw e;
    if ((e as Error).name === 'AbortError') throw new ResourceSyncError('RS_ABORTED', 'aborted', { url, cause: e });
    throw new ResourceSyncError('RS_IO', `cannot store package: ${(e as Error).message}`, { url, cause: e });
  }
}

/** Checks the name of a file inside a package and returns it: `checkEntryName` of `io/zip-reader.ts`. */
export const checkPackageName: (name: string, url?: string) => string = checkEntryName;

/**
 * The package entry a manifest `path` attribute names (§11.2: a path relative to the package root, with a
 * leading `/`), checked like {@link checkEntryName}.
 *
 * @throws ResourceSyncError `RS_ZIP` for a missing or unsafe path.
 */
export function manifestPathToName(path: string | undefined, url?: string): string {
  const where = url === undefined ? {} : { url };
  if (path === undefined || path === '') throw new ResourceSyncError('RS_ZIP', 'manifest entry has no path', where);
  return checkEntryName(path.startsWith('/') ? path.slice(1) : path, url);
}

/** Options of {@link DumpPackage.open}. */
export interface OpenPackageOptions {
  /** The package's URL, for messages. */
  readonly url?: string;
  readonly maxEntries?: number;
  readonly maxManifestBytes?: number;
  /** Remove the file on {@link DumpPackage.close}, or when it cannot be opened (default true). */
  readonly removeOnClose?: boolean;
}

/**
 * A dump package opened for random access, from a file or from memory.
 * Memory: one small record per file in the package (from the central directory, read whole while opening),
 * plus one open stream at a time per caller (~100 KiB each), plus for a file the read cache (8 blocks of
 * 256 KiB); an in-memory package holds its bytes (never copied).
 *
 * @example
 * ```ts
 * const pkg = await DumpPackage.open(await fetchPackage(client, url, { tmpDir }), { url });
 * try {
 *   const manifest = await pkg.openManifest();
 *   for await (const entry of manifest.entries) {
 *     const bytes = await pkg.openBitstream(entry.md?.path);
 *     ...
 *   }
 * } finally { await pkg.close(); }
 * ```
 */
export class DumpPackage {
  private constructor(
    private readonly zip: ZipReader,
    /** The package's file, or undefined for a package in memory. */
    readonly file: string | undefined,
    readonly url: string | undefined,
    private readonly options: OpenPackageOptions,
  ) {}

  /**
   * Opens a package, from a file (its path) or from memory (its bytes, see {@link fromBytes}): reads its
   * central directory and checks every file name.
   * @throws ResourceSyncError `RS_ZIP` for a missing, truncated or corrupt ZIP, an unsafe or duplicate name, a
   *   missing `manifest.xml`, encrypted entries; `RS_LIMIT` past `maxEntries` or the central directory bound.
   */
  static async open(source: string | Uint8Array, options: OpenPackageOptions = {}): Promise<DumpPackage> {
    if (typeof source !== 'string') return DumpPackage.fromBytes(source, options);
    let zip: ZipReader;
    try {
      zip = await ZipReader.open(source, readerOptions(options));
    } catch (e) {
      if (options.removeOnClose ?? true) await rm(source, { force: true }).catch(() => undefined);
      throw asPackageError(e, options.url);
    }
    const pkg = new DumpPackage(zip, source, options.url, options);
    try {
      pkg.checkManifest();
    } catch (e) {
      await pkg.close();
      throw e;
    }
    return pkg;
  }

  /**
   * Opens a package held in memory (not copied: do not change the bytes while it is open). Synchronous.
   * @throws ResourceSyncError like {@link open}.
   */
  static fromBytes(bytes: Uint8Array, options: OpenPackageOptions = {}): DumpPackage {
    let zip: ZipReader;
    try {
      zip = ZipReader.fromBuffer(bytes, readerOptions(options));
    } catch (e) {
      throw asPackageError(e, options.url);
    }
    const pkg = new DumpPackage(zip, undefined, options.url, options);
    pkg.checkManifest();
    return pkg;
  }

  private checkManifest(): void {
    if (!this.zip.entries.has(DUMP_MANIFEST_NAME))
      throw new ResourceSyncError(
        'RS_ZIP',
        `package has no ${DUMP_MANIFEST_NAME} at its top`,
        this.url === undefined ? {} : { url: this.url },
      );
  }

  /** Number of files in the package (manifest included). */
  get size(): number {
    return this.zip.entries.size;
  }

  /** True when the package is held in memory. */
  get inMemory(): boolean {
    return this.zip.inMemory;
  }

  /** Names of the files in the package. */
  names(): IterableIterator<string> {
    return this.zip.entries.keys();
  }

  /**
   * Opens `manifest.xml` as a streaming document. The caller checks its kind (`resource-dump-manifest` or
   * `change-dump-manifest`).
   */
  async openManifest(): Promise<DocumentStream> {
    const where = this.url === undefined ? {} : { url: `${this.url}#${DUMP_MANIFEST_NAME}` };
    const maxBytes = this.options.maxManifestBytes ?? DEFAULT_MAX_MANIFEST_BYTES;
    const stream = await this.openName(DUMP_MANIFEST_NAME);
    return openDocument(stream, { ...where, maxBytes });
  }

  /**
   * The bytes of the file a manifest `path` names, streamed and decompressed, checked against the ZIP's size
   * and CRC-32 (the iteration rejects at the end on a mismatch); the caller checks length and hash against
   * the manifest. Memory: one 64 KiB chunk and zlib's buffers.
   * @throws ResourceSyncError `RS_ZIP` for an unsafe path, one the package does not hold, a corrupt header.
   */
  async openBitstream(path: string | undefined): Promise<AsyncIterable<Uint8Array>> {
    return this.openName(manifestPathToName(path, this.url));
  }

  /** True when the package holds the file a manifest `path` names. */
  has(path: string | undefined): boolean {
    try {
      return this.zip.entries.has(manifestPathToName(path, this.url));
    } catch {
      return false;
    }
  }

  private entryOf(name: string): NonNullable<ReturnType<ZipReader['get']>> {
    const entry = this.zip.get(name);
    if (entry === undefined)
      throw new ResourceSyncError(
        'RS_ZIP',
        `package has no file ${JSON.stringify(name)}`,
        this.url === undefined ? {} : { url: this.url },
      );
    return entry;
  }

  private openName(name: string): Promise<AsyncIterable<Uint8Array>> {
    return this.zip.openStream(this.entryOf(name));
  }

  /**
   * The bytes of a small file (both sizes at most `limit`) a manifest `path` names, read whole (one
   * positioned read through a block cache, or a slice of the package in memory) and inflated in one call,
   * checked against the ZIP's sizes and CRC-32; undefined when the file is larger or not stored/deflated
   * (use {@link openBitstream}). Much cheaper than a stream per file for packages of many small resources.
   * Memory: the file, twice at most (compressed and inflated). The bytes may be a view into the package.
   * @throws ResourceSyncError `RS_ZIP` for an unsafe or missing path, a corrupt header, data or CRC.
   */
  async readSmallBitstream(path: string | undefined, limit = 256 * 1024): Promise<Uint8Array | undefined> {
    const entry = this.entryOf(manifestPathToName(path, this.url));
    if (entry.compressedSize > limit || entry.size > limit) return undefined;
    if (entry.method !== 0 && entry.method !== 8) return undefined;
    return this.zip.readSmall(entry);
  }

  /**
   * True when the central directory describes the file `name` as read from a local header: same offset,
   * CRC-32 and size (see `io/zip-stream.ts`: a file read while the package arrived is the one it holds).
   */
  describes(name: string, local: Pick<LocalEntry, 'offset' | 'crc32' | 'size'>): boolean {
    const e = this.zip.get(name);
    return e !== undefined && e.localHeaderOffset === local.offset && e.crc32 === local.crc32 && e.size === local.size;
  }

  /** Closes the ZIP and (by default) removes the temporary file. */
  async close(): Promise<void> {
    await this.zip.close();
    if (this.file !== undefined && (this.options.removeOnClose ?? true))
      await rm(this.file, { force: true }).catch(() => undefined);
  }
}

function readerOptions(options: OpenPackageOptions): ZipReaderOptions {
  const o: { url?: string; maxEntries: number } = { maxEntries: options.maxEntries ?? DEFAULT_MAX_PACKAGE_ENTRIES };
  if (options.url !== undefined) o.url = options.url;
  return o;
}

/** A reader's refusal as it is, anything else (a file that cannot be opened or read) as `RS_ZIP`. */
function asPackageError(e: unknown, url: string | undefined): ResourceSyncError {
  if (e instanceof ResourceSyncError && (e.code === 'RS_ZIP' || e.code === 'RS_LIMIT')) return e;
  const where = url === undefined ? {} : { url };
  const inner = e instanceof ResourceSyncError && e.cause instanceof Error ? e.cause : (e as Error);
  return new ResourceSyncError('RS_ZIP', `not a readable ZIP package: ${inner.message}`, { ...where, cause: e });
}
