/**
 * Resource Dump and Change Dump packages (§11.2, §13.2): a ZIP file with `manifest.xml` at its top and the
 * bitstreams at the `path` the manifest gives each resource.
 *
 * A package is first streamed to a temporary file (its size bounded), then read by random access (yauzl):
 * the central directory is read and every name checked (zip-slip: absolute paths, `..` segments, backslashes,
 * drive letters and NUL bytes refuse the whole package), then `manifest.xml` is opened, then each bitstream
 * on demand. Nothing is ever written at a path taken from the package: the install target comes from the
 * resource's URI through the path mapper; package paths only locate bitstreams inside the ZIP.
 *
 * @module
 */
import { createWriteStream, close as fsClose, read as fsRead, fstat, open } from 'node:fs';
import { Readable } from 'node:stream';
import { mkdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import zlib from 'node:zlib';
import yauzl from 'yauzl';
import { DUMP_MANIFEST_NAME } from '../core/constants.js';
import { ResourceSyncError, isResourceSyncError } from '../core/errors.js';
import { type Hashes, hashesMatch } from '../core/hash.js';
import { createMultiHasher } from '../io/hashing.js';
import { tempPathFor } from '../io/atomic.js';
import { type DocumentStream, openDocument } from '../xml/index.js';
import type { HttpClient } from './http.js';

/** Default bound on a downloaded package: 8 GiB. */
export const DEFAULT_MAX_PACKAGE_BYTES = 8 * 1024 ** 3;
/** Default bound on the number of files in a package. */
export const DEFAULT_MAX_PACKAGE_ENTRIES = 1_000_000;
/** Default bound on the size of `manifest.xml`, uncompressed: 256 MiB (a manifest is a Sitemap, ≤ 50 MB, §4.2). */
export const DEFAULT_MAX_MANIFEST_BYTES = 256 * 1024 ** 2;

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
}

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
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_PACKAGE_BYTES;
  await mkdir(options.tmpDir, { recursive: true });
  const tmp = tempPathFor(join(options.tmpDir, 'package.zip'));
  const init: { signal?: AbortSignal } = {};
  if (options.signal !== undefined) init.signal = options.signal;
  const res = await client.get(url, init);
  const wantHashes = options.hashes !== undefined && Object.keys(options.hashes).length > 0;
  const hasher = wantHashes ? createMultiHasher(['md5', 'sha-1', 'sha-256']) : undefined;
  let bytes = 0;
  async function* limited(): AsyncGenerator<Uint8Array> {
    for await (const chunk of res.body) {
      bytes += chunk.byteLength;
      if (bytes > maxBytes) throw new ResourceSyncError('RS_LIMIT', `package larger than ${maxBytes} bytes`, { url });
      hasher?.update(chunk);
      yield chunk;
    }
  }
  try {
    const pipelineOptions: { signal?: AbortSignal } = {};
    if (options.signal !== undefined) pipelineOptions.signal = options.signal;
    await pipeline(limited(), createWriteStream(tmp, { flags: 'wx', mode: 0o600 }), pipelineOptions);
    if (options.length !== undefined && bytes !== options.length)
      throw new ResourceSyncError(
        'RS_LENGTH_MISMATCH',
        `package is ${bytes} bytes, the dump declares ${options.length}`,
        { url },
      );
    if (hasher !== undefined && options.hashes !== undefined && hashesMatch(options.hashes, hasher.digest()) === false)
      throw new ResourceSyncError('RS_HASH_MISMATCH', 'package does not match the hash the dump declares', { url });
    return tmp;
  } catch (e) {
    await rm(tmp, { force: true }).catch(() => undefined);
    await res.discard().catch(() => undefined);
    if (e instanceof ResourceSyncError) throw e;
    if ((e as Error).name === 'AbortError') throw new ResourceSyncError('RS_ABORTED', 'aborted', { url, cause: e });
    throw new ResourceSyncError('RS_IO', `cannot store package: ${(e as Error).message}`, { url, cause: e });
  }
}

/**
 * Checks the name of a file inside a package and returns it. Refused: empty names, absolute paths (`/x`),
 * drive letters (`C:`), backslashes, NUL, and any `.` or `..` segment.
 *
 * @throws ResourceSyncError `RS_ZIP` naming the entry.
 */
export function checkPackageName(name: string, url?: string): string {
  const where = url === undefined ? {} : { url };
  const bad = (why: string): never => {
    throw new ResourceSyncError('RS_ZIP', `unsafe file name ${JSON.stringify(name)} in package: ${why}`, where);
  };
  if (name.length === 0) bad('empty');
  if (name.includes('\\')) bad('backslash');
  if (name.includes('\0')) bad('NUL byte');
  if (name.startsWith('/')) bad('absolute path');
  if (/^[a-zA-Z]:/.test(name)) bad('drive letter');
  const segments = name.split('/');
  for (let i = 0; i < segments.length; i++) {
    const s = segments[i];
    if (s === '..' || s === '.') bad(`"${s}" segment`);
    if (s === '' && i !== segments.length - 1) bad('empty segment');
  }
  return name;
}

/**
 * The package entry a manifest `path` attribute names (§11.2: a path relative to the package root, with a
 * leading `/`), checked like {@link checkPackageName}.
 *
 * @throws ResourceSyncError `RS_ZIP` for a missing or unsafe path.
 */
export function manifestPathToName(path: string | undefined, url?: string): string {
  const where = url === undefined ? {} : { url };
  if (path === undefined || path === '') throw new ResourceSyncError('RS_ZIP', 'manifest entry has no path', where);
  return checkPackageName(path.startsWith('/') ? path.slice(1) : path, url);
}

/** Options of {@link DumpPackage.open}. */
export interface OpenPackageOptions {
  /** The package's URL, for messages. */
  readonly url?: string;
  readonly maxEntries?: number;
  readonly maxManifestBytes?: number;
  /** Remove the file on {@link DumpPackage.close} (default true). */
  readonly removeOnClose?: boolean;
}

/**
 * A dump package opened for random access.
 * Memory: one small record per file in the package (the central directory), plus one open stream at a time
 * per caller, plus the read caches: 256 KiB read ahead for yauzl and 8 blocks of 256 KiB for small files.
 *
 * @example
 * ```ts
 * const pkg = await DumpPackage.open(await downloadPackage(client, url, { tmpDir }), { url });
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
    private readonly zip: yauzl.ZipFile,
    private readonly entries: ReadonlyMap<string, yauzl.Entry>,
    readonly file: string,
    readonly url: string | undefined,
    private readonly options: OpenPackageOptions,
  ) {}

  /**
   * Opens a package file: reads its central directory and checks every file name.
   * @throws ResourceSyncError `RS_ZIP` for a truncated or corrupt ZIP, an unsafe name, a missing
   *   `manifest.xml`, encrypted entries; `RS_LIMIT` past `maxEntries`.
   */
  static async open(file: string, options: OpenPackageOptions = {}): Promise<DumpPackage> {
    const where = options.url === undefined ? {} : { url: options.url };
    const maxEntries = options.maxEntries ?? DEFAULT_MAX_PACKAGE_ENTRIES;
    let zip: yauzl.ZipFile;
    try {
      // A reader that reads ahead on sequential reads: yauzl reads the central directory entry by entry (two
      // small reads each, each a trip to the thread pool); this serves them from one block.
      const fd = await new Promise<number>((resolve, reject) =>
        open(file, 'r', (e, fd) => (e === null ? resolve(fd) : reject(e))),
      );
      let size: number;
      try {
        size = await new Promise<number>((resolve, reject) =>
          fstat(fd, (e, st) => (e === null ? resolve(st.size) : reject(e))),
        );
      } catch (e) {
        fsClose(fd, () => undefined);
        throw e;
      }
      try {
        zip = await yauzl.fromRandomAccessReaderPromise(new ReadAheadReader(fd), size, {
          lazyEntries: true,
          autoClose: false,
          decodeStrings: false,
          validateEntrySizes: true,
        });
      } catch (e) {
        fsClose(fd, () => undefined); // as yauzl.open does when the ZIP is unreadable
        throw e;
      }
    } catch (e) {
      throw new ResourceSyncError('RS_ZIP', `not a readable ZIP package: ${(e as Error).message}`, {
        ...where,
        cause: e,
      });
    }
    const entries = new Map<string, yauzl.Entry>();
    const decoder = new TextDecoder('utf-8', { fatal: false });
    try {
      if (zip.entryCount > maxEntries)
        throw new ResourceSyncError('RS_LIMIT', `package has ${zip.entryCount} files (limit ${maxEntries})`, where);
      for await (const entry of zip.eachEntry()) {
        const name = checkPackageName(decoder.decode(entry.fileNameRaw), options.url);
        if (name.endsWith('/')) continue; // a directory
        if (entry.isEncrypted())
          throw new ResourceSyncError('RS_ZIP', `encrypted file ${JSON.stringify(name)} in package`, where);
        if (entries.has(name))
          throw new ResourceSyncError('RS_ZIP', `file ${JSON.stringify(name)} appears twice in package`, where);
        entries.set(name, entry);
      }
      if (!entries.has(DUMP_MANIFEST_NAME))
        throw new ResourceSyncError('RS_ZIP', `package has no ${DUMP_MANIFEST_NAME} at its top`, where);
    } catch (e) {
      zip.close();
      if (e instanceof ResourceSyncError) throw e;
      throw new ResourceSyncError('RS_ZIP', `corrupt ZIP package: ${(e as Error).message}`, { ...where, cause: e });
    }
    return new DumpPackage(zip, entries, file, options.url, options);
  }

  /** Number of files in the package (manifest included). */
  get size(): number {
    return this.entries.size;
  }

  /** Names of the files in the package. */
  names(): IterableIterator<string> {
    return this.entries.keys();
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
   * The bytes of the file a manifest `path` names, streamed and decompressed; yauzl checks the uncompressed
   * size against the ZIP headers, the caller checks length and hash against the manifest.
   * @throws ResourceSyncError `RS_ZIP` for an unsafe path or one the package does not hold.
   */
  async openBitstream(path: string | undefined): Promise<AsyncIterable<Uint8Array>> {
    return this.openName(manifestPathToName(path, this.url));
  }

  /** True when the package holds the file a manifest `path` names. */
  has(path: string | undefined): boolean {
    try {
      return this.entries.has(manifestPathToName(path, this.url));
    } catch {
      return false;
    }
  }

  private async openName(name: string): Promise<AsyncIterable<Uint8Array>> {
    const where = this.url === undefined ? {} : { url: this.url };
    const entry = this.entries.get(name);
    if (entry === undefined)
      throw new ResourceSyncError('RS_ZIP', `package has no file ${JSON.stringify(name)}`, where);
    try {
      const stream = await this.zip.openReadStreamPromise(entry);
      return checkedStream(stream, entry.crc32, name, this.url);
    } catch (e) {
      throw new ResourceSyncError(
        'RS_ZIP',
        `cannot read ${JSON.stringify(name)} from package: ${(e as Error).message}`,
        {
          ...where,
          cause: e,
        },
      );
    }
  }

  /** A second descriptor for {@link readSmallBitstream}'s positioned reads (opened on first use). */
  private fd: Promise<number> | undefined;
  /** Blocks of the package read for {@link readSmallBitstream}, by block index (at most {@link SMALL_BLOCKS}). */
  private readonly blocks = new Map<number, Promise<Buffer>>();
  private blockHits = 0;
  private blockMisses = 0;

  /**
   * `length` bytes at `position` (fewer at the end of the file). Small reads go through a cache of aligned
   * blocks while that pays (packages store bitstreams in manifest order, so neighbouring files share a block:
   * one read per block instead of one per file); when reads are scattered (more misses than hits), each read
   * is direct. Memory: {@link SMALL_BLOCKS} blocks of {@link SMALL_BLOCK_BYTES}.
   */
  private async readAt(fd: number, length: number, position: number): Promise<Buffer> {
    const direct = (len: number, pos: number): Promise<Buffer> =>
      new Promise((resolve, reject) => {
        const buf = Buffer.allocUnsafe(len);
        fsRead(fd, buf, 0, len, pos, (e, n) => (e === null ? resolve(buf.subarray(0, n)) : reject(e)));
      });
    const first = Math.floor(position / SMALL_BLOCK_BYTES);
    const last = Math.floor((position + length - 1) / SMALL_BLOCK_BYTES);
    if (
      length > SMALL_BLOCK_BYTES / 4 ||
      last > first + 1 ||
      (this.blockMisses > 16 && this.blockHits < this.blockMisses)
    )
      return direct(length, position);
    const parts: Buffer[] = [];
    for (let b = first; b <= last; b++) {
      let block = this.blocks.get(b);
      if (block === undefined) {
        this.blockMisses++;
        block = direct(SMALL_BLOCK_BYTES, b * SMALL_BLOCK_BYTES);
        this.blocks.set(b, block);
        block.catch(() => this.blocks.delete(b));
        if (this.blocks.size > SMALL_BLOCKS) this.blocks.delete(this.blocks.keys().next().value as number);
      } else this.blockHits++;
      parts.push(await block);
    }
    const whole = parts.length === 1 ? (parts[0] as Buffer) : Buffer.concat(parts);
    const from = position - first * SMALL_BLOCK_BYTES;
    return whole.subarray(from, Math.min(whole.length, from + length));
  }

  /**
   * The bytes of a small file (both sizes at most `limit`) a manifest `path` names, read with one positioned
   * read and inflated in one call, checked against the ZIP's sizes and CRC-32; undefined when the file is
   * larger (use {@link openBitstream}). Much cheaper than a stream per file for packages of many small
   * resources. Memory: the file, twice at most (compressed and inflated).
   * @throws ResourceSyncError `RS_ZIP` for an unsafe or missing path, a corrupt header, data or CRC.
   */
  async readSmallBitstream(path: string | undefined, limit = 256 * 1024): Promise<Uint8Array | undefined> {
    const name = manifestPathToName(path, this.url);
    const where = this.url === undefined ? {} : { url: this.url };
    const entry = this.entries.get(name);
    if (entry === undefined)
      throw new ResourceSyncError('RS_ZIP', `package has no file ${JSON.stringify(name)}`, where);
    if (entry.compressedSize > limit || entry.uncompressedSize > limit) return undefined;
    if (entry.compressionMethod !== 0 && entry.compressionMethod !== 8) return undefined;
    const bad = (why: string): never => {
      throw new ResourceSyncError('RS_ZIP', `corrupt data for ${JSON.stringify(name)} in package: ${why}`, where);
    };
    this.fd ??= new Promise<number>((resolve, reject) =>
      open(this.file, 'r', (e, fd) => (e === null ? resolve(fd) : reject(e))),
    );
    const fd = await this.fd;
    const read = (length: number, position: number): Promise<Buffer> => this.readAt(fd, length, position);
    // Local header (30 bytes + name + extra, §4.3.7 of APPNOTE), then the data; extra lengths may differ from
    // the central directory's, so read a little more and re-read in the rare case it was not enough.
    const headerGuess = 30 + entry.fileNameLength + entry.extraFieldLength + 64;
    const at = entry.relativeOffsetOfLocalHeader;
    let buf = await read(headerGuess + entry.compressedSize, at);
    if (buf.length < 30 || buf.readUInt32LE(0) !== 0x04034b50) bad('bad local file header');
    const start = 30 + buf.readUInt16LE(26) + buf.readUInt16LE(28);
    const end = start + entry.compressedSize;
    if (buf.length < end) buf = await read(end, at);
    if (buf.length < end) bad('truncated');
    const data = buf.subarray(start, end);
    let out: Uint8Array;
    try {
      out =
        entry.compressionMethod === 0
          ? data
          : zlib.inflateRawSync(data, { maxOutputLength: Math.max(1, entry.uncompressedSize) });
    } catch (e) {
      return bad((e as Error).message);
    }
    if (out.byteLength !== entry.uncompressedSize)
      bad(`${out.byteLength} bytes, the ZIP says ${entry.uncompressedSize}`);
    if (crc32 !== undefined && crc32(out) >>> 0 !== entry.crc32 >>> 0) bad('CRC-32 mismatch');
    return out;
  }

  /** Closes the ZIP and (by default) removes the temporary file. */
  async close(): Promise<void> {
    this.blocks.clear();
    this.zip.close();
    if (this.fd !== undefined) {
      const fd = await this.fd.catch(() => undefined);
      if (fd !== undefined) await new Promise<void>((resolve) => fsClose(fd, () => resolve()));
    }
    if (this.options.removeOnClose ?? true) await rm(this.file, { force: true }).catch(() => undefined);
  }
}

/** Block size of the small-bitstream read cache (see DumpPackage.readAt). */
const SMALL_BLOCK_BYTES = 256 * 1024;
/** Blocks the small-bitstream read cache keeps. */
const SMALL_BLOCKS = 8;
/** Read-ahead of {@link ReadAheadReader}. */
const READ_AHEAD_BYTES = 256 * 1024;

/**
 * yauzl's access to a package file: positioned reads, where a read that continues the previous one (yauzl
 * reading the central directory entry after entry) fetches {@link READ_AHEAD_BYTES} at once and later reads
 * inside that block are copied from it; other reads (local headers, bitstream streams) go straight to the
 * file. Closes its descriptor when yauzl closes it. Memory: one block.
 */
class ReadAheadReader extends yauzl.RandomAccessReader {
  private block: Buffer | undefined;
  private blockStart = 0;
  private lastEnd = -1;

  constructor(private readonly fd: number) {
    super();
  }

  override read(
    buffer: Buffer,
    offset: number,
    length: number,
    position: number,
    callback: (err: Error | null, bytesRead?: number) => void,
  ): void {
    const sequential = position === this.lastEnd;
    this.lastEnd = position + length;
    const block = this.block;
    if (block !== undefined && position >= this.blockStart && position + length <= this.blockStart + block.length) {
      block.copy(buffer, offset, position - this.blockStart, position - this.blockStart + length);
      process.nextTick(callback, null, length);
      return;
    }
    if (!sequential || length >= READ_AHEAD_BYTES) {
      fsRead(this.fd, buffer, offset, length, position, (e, n) => callback(e, n));
      return;
    }
    const ahead = Buffer.allocUnsafe(READ_AHEAD_BYTES);
    fsRead(this.fd, ahead, 0, READ_AHEAD_BYTES, position, (e, n) => {
      if (e !== null) {
        callback(e);
        return;
      }
      this.block = ahead.subarray(0, n);
      this.blockStart = position;
      const copied = Math.min(n, length);
      ahead.copy(buffer, offset, 0, copied);
      callback(null, copied);
    });
  }

  /** Bytes `start` to `end` (exclusive) in chunks of 64 KiB (`fs.createReadStream` on a shared fd closed it). */
  override _readStreamForRange(start: number, end: number): Readable {
    const fd = this.fd;
    let pos = start;
    return new Readable({
      read(): void {
        const len = Math.min(64 * 1024, end - pos);
        if (len <= 0) {
          this.push(null);
          return;
        }
        const buf = Buffer.allocUnsafe(len);
        fsRead(fd, buf, 0, len, pos, (e, n) => {
          if (e !== null) this.destroy(e);
          else if (n === 0)
            this.push(null); // early end of file: yauzl reports the missing bytes
          else {
            pos += n;
            this.push(buf.subarray(0, n));
          }
        });
      },
    });
  }

  private closed = false;

  /** Called by yauzl each time its reference count drops to zero: closes the descriptor once. */
  override close(callback: (err: Error | null) => void): void {
    this.block = undefined;
    if (this.closed) {
      process.nextTick(callback, null);
      return;
    }
    this.closed = true;
    fsClose(this.fd, (e) => callback(e));
  }
}

/** zlib.crc32 (Node ≥ 20.15); without it the CRC is not checked (hashes and lengths still are). */
const crc32: ((data: Uint8Array, value?: number) => number) | undefined = (
  zlib as { crc32?: (data: Uint8Array, value?: number) => number }
).crc32;

/**
 * The bytes of a package file, with its CRC-32 checked against the ZIP's central directory at the end (yauzl
 * checks sizes, not CRCs): a corrupt bitstream is refused even when the manifest declares no hash.
 */
async function* checkedStream(
  stream: AsyncIterable<Uint8Array>,
  expectedCrc: number,
  name: string,
  url: string | undefined,
): AsyncGenerator<Uint8Array> {
  const where = url === undefined ? {} : { url };
  let crc = 0;
  try {
    for await (const chunk of stream) {
      if (crc32 !== undefined) crc = crc32(chunk, crc);
      yield chunk;
    }
  } catch (e) {
    if (isResourceSyncError(e)) throw e;
    throw new ResourceSyncError(
      'RS_ZIP',
      `corrupt data for ${JSON.stringify(name)} in package: ${(e as Error).message}`,
      {
        ...where,
        cause: e,
      },
    );
  }
  if (crc32 !== undefined && crc >>> 0 !== expectedCrc >>> 0)
    throw new ResourceSyncError('RS_ZIP', `CRC-32 mismatch for ${JSON.stringify(name)} in package`, where);
}

/** Size of a file, or undefined when it does not exist. */
export async function fileSize(path: string): Promise<number | undefined> {
  try {
    return (await stat(path)).size;
  } catch {
    return undefined;
  }
}
