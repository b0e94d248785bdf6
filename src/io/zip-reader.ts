/**
 * A small random-access reader of ZIP archives (APPNOTE 6.3.x), for untrusted dump packages, over a file
 * descriptor or a Buffer held in memory.
 *
 * Opening reads the End Of Central Directory record (ZIP64 included: record, locator and the extended
 * information extra field 0x0001) and the whole central directory in ONE read, and parses it into compact
 * {@link ZipEntry} records. Everything that could make a later read go wrong is refused at open, for the
 * whole archive: truncated or corrupt structures, a central directory outside the file, multi-disk archives,
 * too many entries ({@link ZipReaderOptions.maxEntries}) or too large a central directory, unsafe names (see
 * {@link checkEntryName}: absolute paths, drive letters, backslashes, NUL, `.`/`..`/empty segments), duplicate
 * names, encrypted files, stored files whose two sizes differ, and file data that lies outside the file or
 * overlaps another entry (the "overlapping files" zip bomb). Reading a file then checks its local header
 * (signature, the data range), inflates with the output bounded by the declared size (a bomb cannot expand
 * past it), and checks the size and the CRC-32. Only methods 0 (stored) and 8 (deflate) are read; others are
 * refused when the file is read, naming it.
 *
 * Every refusal is a {@link ResourceSyncError} `RS_ZIP` (`RS_LIMIT` for the bounds) whose message names the
 * entry and whose `url` is the archive's URL when given.
 *
 * @module
 */
import { close as fsClose, fstat, open as fsOpen, read as fsRead } from 'node:fs';
import { Readable, pipeline } from 'node:stream';
import zlib from 'node:zlib';
import { ResourceSyncError } from '../core/errors.js';
import { crc32 } from './crc32.js';

/** Default bound on the number of entries (central directory records) of an archive. */
export const DEFAULT_MAX_ZIP_ENTRIES = 1_000_000;
/** Default bound on the size of the central directory, read in one piece: 256 MiB. */
export const DEFAULT_MAX_CENTRAL_DIRECTORY_BYTES = 256 * 1024 ** 2;
/** Size of the chunks {@link ZipReader.openStream} reads and yields. */
export const ZIP_STREAM_CHUNK_BYTES = 64 * 1024;

/** Options of {@link ZipReader.open} and {@link ZipReader.fromBuffer}. */
export interface ZipReaderOptions {
  /** The archive's URL, for messages. */
  readonly url?: string;
  /** Refuse an archive with more entries, directories included (default {@link DEFAULT_MAX_ZIP_ENTRIES}). */
  readonly maxEntries?: number;
  /** Refuse a larger central directory (default {@link DEFAULT_MAX_CENTRAL_DIRECTORY_BYTES}). */
  readonly maxCentralDirectoryBytes?: number;
}

/** A file of an archive, as its central directory describes it. */
export class ZipEntry {
  constructor(
    /** The name, UTF-8 decoded (invalid sequences become U+FFFD), checked by {@link checkEntryName}. */
    readonly name: string,
    /** General purpose bit flags. */
    readonly flags: number,
    /** Compression method: 0 stored, 8 deflate (others are refused when read). */
    readonly method: number,
    /** CRC-32 of the uncompressed bytes (unsigned). */
    readonly crc32: number,
    readonly compressedSize: number,
    /** Uncompressed size. */
    readonly size: number,
    readonly localHeaderOffset: number,
    /** Length of the name and extra field in the central directory: a guess of the local header's size. */
    readonly headerGuess: number,
  ) {}
}

/**
 * Matches every ASCII name {@link checkEntryName} refuses, and every name with a byte that is not ASCII
 * (or NUL, or a backslash): a NUL or backslash anywhere, a leading `/`, a drive letter, `//` (an empty
 * segment), a `.` or `..` segment. A name it does not match (and that is not empty) is safe as it is; one it
 * matches goes through {@link checkEntryName}. One native regex instead of a split and a loop per name: cheap
 * even before the JIT warms up (the first package of a run is read cold).
 */
const SUSPECT_NAME = /[^\x01-\x5b\x5d-\x7f]|^\/|^[a-zA-Z]:|\/\/|(?:^|\/)\.\.?(?:\/|$)/;

/**
 * Checks the name of a file inside an archive and returns it. Refused: empty names, absolute paths (`/x`),
 * drive letters (`C:`), backslashes, NUL, and any `.` or `..` segment, or an empty one (`a//b`) except a
 * trailing `/` (a directory).
 *
 * @throws ResourceSyncError `RS_ZIP` naming the entry.
 */
export function checkEntryName(name: string, url?: string): string {
  if (isPlainSafeName(name)) return name; // the common case, in one native call
  const bad = (why: string): never => {
    throw new ResourceSyncError(
      'RS_ZIP',
      `unsafe file name ${JSON.stringify(name)} in package: ${why}`,
      url === undefined ? {} : { url },
    );
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
 * True when `name` (decoded as Latin-1 from its bytes) is an ASCII name {@link checkEntryName} accepts; false
 * for a name that is unsafe, empty or not ASCII (the caller then decodes it as UTF-8 and runs
 * {@link checkEntryName}, which refuses it with the reason, or accepts a safe non-ASCII name). For ASCII both
 * decodings agree. Exported for tests.
 */
export function isPlainSafeName(name: string): boolean {
  return name.length > 0 && !SUSPECT_NAME.test(name);
}

// ---------------------------------------------------------------------------------------------------------
// Byte sources

/** Block size of the small-read cache of a file archive. */
const BLOCK_BYTES = 256 * 1024;
/** Blocks the small-read cache keeps. */
const BLOCKS = 8;
/** Bytes read from the end of a file to find the EOCD record (and, usually, the whole central directory). */
const TAIL_BYTES = 256 * 1024;

/** Positioned reads of an archive: a file descriptor, or bytes in memory. */
interface ByteSource {
  readonly size: number;
  /** The archive is held in memory (its reads are views of it). */
  readonly inMemory: boolean;
  /** `length` bytes at `position` (fewer at the end of the file). */
  read(position: number, length: number): Promise<Buffer>;
  /** Like {@link read}, through a cache of blocks for small reads of neighbouring files. */
  readSmall(position: number, length: number): Promise<Buffer>;
  close(): Promise<void>;
}

class MemorySource implements ByteSource {
  readonly inMemory = true;
  readonly size: number;
  constructor(private readonly whole: Buffer) {
    this.size = whole.length;
  }
  read(position: number, length: number): Promise<Buffer> {
    return Promise.resolve(this.whole.subarray(position, Math.min(this.size, position + length)));
  }
  readSmall(position: number, length: number): Promise<Buffer> {
    return this.read(position, length);
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

/**
 * A file, read by positioned reads on the thread pool. Small reads go through a cache of aligned blocks
 * while that pays (packages store files in manifest order, so neighbouring files share a block: one read per
 * block instead of one per file); when reads are scattered (more misses than hits), each read is direct.
 * Closing waits for reads in flight, so the descriptor is never reused under them.
 * Memory: {@link BLOCKS} blocks of {@link BLOCK_BYTES}.
 */
class FileSource implements ByteSource {
  readonly inMemory = false;
  private readonly blocks = new Map<number, Promise<Buffer>>();
  private hits = 0;
  private misses = 0;
  private pending = 0;
  private drained: (() => void) | undefined;
  private closed = false;

  constructor(
    private readonly fd: number,
    readonly size: number,
  ) {}

  read(position: number, length: number): Promise<Buffer> {
    if (this.closed) return Promise.reject(new Error('archive closed'));
    this.pending++;
    return new Promise<Buffer>((resolve, reject) => {
      const buf = Buffer.allocUnsafe(length);
      fsRead(this.fd, buf, 0, length, position, (e, n) => {
        if (--this.pending === 0) this.drained?.();
        if (e === null) resolve(n === length ? buf : buf.subarray(0, n));
        else reject(e);
      });
    });
  }

  async readSmall(position: number, length: number): Promise<Buffer> {
    const first = Math.floor(position / BLOCK_BYTES);
    const last = Math.floor((position + length - 1) / BLOCK_BYTES);
    if (length > BLOCK_BYTES / 4 || last > first + 1 || (this.misses > 16 && this.hits < this.misses))
      return this.read(position, length);
    const parts: Buffer[] = [];
    for (let b = first; b <= last; b++) {
      let block = this.blocks.get(b);
      if (block === undefined) {
        this.misses++;
        block = this.read(b * BLOCK_BYTES, BLOCK_BYTES);
        this.blocks.set(b, block);
        block.catch(() => this.blocks.delete(b));
        if (this.blocks.size > BLOCKS) this.blocks.delete(this.blocks.keys().next().value as number);
      } else this.hits++;
      parts.push(await block);
    }
    const whole = parts.length === 1 ? (parts[0] as Buffer) : Buffer.concat(parts);
    const from = position - first * BLOCK_BYTES;
    return whole.subarray(from, Math.min(whole.length, from + length));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.blocks.clear();
    if (this.pending > 0) await new Promise<void>((resolve) => (this.drained = resolve));
    await new Promise<void>((resolve) => fsClose(this.fd, () => resolve()));
  }
}

// ---------------------------------------------------------------------------------------------------------
// The reader

const SIG_LOCAL = 0x04034b50;
const SIG_CENTRAL = 0x02014b50;
const SIG_EOCD = 0x06054b50;
const SIG_ZIP64_EOCD = 0x06064b50;
const SIG_ZIP64_LOCATOR = 0x07064b50;
const EOCD_BYTES = 22;
const LOCATOR_BYTES = 20;
const ZIP64_EOCD_BYTES = 56;
const CENTRAL_BYTES = 46;
const LOCAL_BYTES = 30;
const MAX_COMMENT = 0xffff;

/** An unsigned 64-bit little-endian number, refused past 2^53 - 1. */
function readU64(b: Buffer, at: number, fail: (why: string) => never): number {
  const hi = b.readUInt32LE(at + 4);
  if (hi > 0x1fffff) fail('a ZIP64 size or offset is too large');
  return hi * 0x100000000 + b.readUInt32LE(at);
}

/**
 * A ZIP archive opened for random access. Memory: the entries (one {@link ZipEntry} per file, ~100 bytes
 * plus its name), the central directory while opening (at most `maxCentralDirectoryBytes`), and for a file
 * archive the read cache (8 blocks of 256 KiB) and the last 256 KiB of the file while opening; for an
 * in-memory archive, the caller's buffer (never copied).
 *
 * @example
 * ```ts
 * const zip = await ZipReader.open('package.zip', { url });
 * try {
 *   const entry = zip.get('manifest.xml');
 *   if (entry !== undefined) for await (const chunk of await zip.openStream(entry)) process(chunk);
 * } finally { await zip.close(); }
 * ```
 */
export class ZipReader {
  private constructor(
    private readonly source: ByteSource,
    /** Files by name (directories are checked, then left out), in central directory order. */
    readonly entries: ReadonlyMap<string, ZipEntry>,
    /** Number of entries in the central directory, directories included. */
    readonly entryCount: number,
    /** Where file data must end: the start of the central directory. */
    private readonly dataEnd: number,
    readonly url: string | undefined,
  ) {}

  /** True when the archive is held in memory. */
  get inMemory(): boolean {
    return this.source.inMemory;
  }

  /**
   * Opens an archive file: two reads (the last 256 KiB, then the central directory when it starts before
   * them), parsed and checked as the module comment says. The file stays open until {@link close}.
   * @throws ResourceSyncError `RS_ZIP`, `RS_LIMIT`; `RS_IO` when the file cannot be opened or read.
   */
  static async open(path: string, options: ZipReaderOptions = {}): Promise<ZipReader> {
    const where = options.url === undefined ? {} : { url: options.url };
    let fd: number;
    let size: number;
    try {
      fd = await new Promise<number>((resolve, reject) =>
        fsOpen(path, 'r', (e, fd) => (e === null ? resolve(fd) : reject(e))),
      );
    } catch (e) {
      throw new ResourceSyncError('RS_IO', `cannot open package: ${(e as Error).message}`, { ...where, cause: e });
    }
    const source = await (async () => {
      try {
        size = await new Promise<number>((resolve, reject) =>
          fstat(fd, (e, st) => (e === null ? resolve(st.size) : reject(e))),
        );
        return new FileSource(fd, size);
      } catch (e) {
        await new Promise<void>((resolve) => fsClose(fd, () => resolve()));
        throw new ResourceSyncError('RS_IO', `cannot read package: ${(e as Error).message}`, { ...where, cause: e });
      }
    })();
    try {
      const tailStart = Math.max(0, source.size - TAIL_BYTES);
      const tail = await source.read(tailStart, source.size - tailStart);
      if (tail.length !== source.size - tailStart) throw new Error('file shrank while read');
      const eocd = findDirectory(tail, tailStart, source.size, options);
      let cd: Buffer;
      if (eocd.zip64At !== undefined && eocd.zip64At < tailStart) {
        // A ZIP64 EOCD record before the tail (only with a central directory larger than the tail).
        const rec = await source.read(eocd.zip64At, ZIP64_EOCD_BYTES);
        Object.assign(eocd, readZip64Record(rec, 0, eocd.zip64At, eocd.zip64At, options));
      }
      checkDirectoryBounds(eocd, options);
      if (eocd.cdOffset >= tailStart)
        cd = tail.subarray(eocd.cdOffset - tailStart, eocd.cdOffset - tailStart + eocd.cdSize);
      else {
        cd = await source.read(eocd.cdOffset, eocd.cdSize);
        if (cd.length !== eocd.cdSize) throw new Error('file shrank while read');
      }
      const entries = parseDirectory(cd, eocd.count, eocd.cdOffset, options.url);
      return new ZipReader(source, entries, eocd.count, eocd.cdOffset, options.url);
    } catch (e) {
      await source.close();
      if (e instanceof ResourceSyncError) throw e;
      throw new ResourceSyncError('RS_IO', `cannot read package: ${(e as Error).message}`, { ...where, cause: e });
    }
  }

  /**
   * Opens an archive held in memory (no copy; the caller must not change the bytes while the reader is in
   * use). Parsing is synchronous: no I/O.
   * @throws ResourceSyncError `RS_ZIP`, `RS_LIMIT`.
   */
  static fromBuffer(bytes: Uint8Array, options: ZipReaderOptions = {}): ZipReader {
    const whole = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const eocd = findDirectory(whole, 0, whole.length, options);
    checkDirectoryBounds(eocd, options);
    const cd = whole.subarray(eocd.cdOffset, eocd.cdOffset + eocd.cdSize);
    const entries = parseDirectory(cd, eocd.count, eocd.cdOffset, options.url);
    return new ZipReader(new MemorySource(whole), entries, eocd.count, eocd.cdOffset, options.url);
  }

  /** The file named `name`, or undefined. */
  get(name: string): ZipEntry | undefined {
    return this.entries.get(name);
  }

  private fail(why: string, cause?: unknown): never {
    const o: { url?: string; cause?: unknown } = {};
    if (this.url !== undefined) o.url = this.url;
    if (cause !== undefined) o.cause = cause;
    throw new ResourceSyncError('RS_ZIP', why, o);
  }

  private checkMethod(entry: ZipEntry): void {
    if (entry.method !== 0 && entry.method !== 8)
      this.fail(`unsupported compression method ${entry.method} for ${JSON.stringify(entry.name)} in package`);
  }

  /** Where the data of `entry` starts, from its local header (`header` holds the bytes at its offset). */
  private dataStart(entry: ZipEntry, header: Buffer): number {
    const name = JSON.stringify(entry.name);
    if (header.length < LOCAL_BYTES) this.fail(`truncated local header of ${name} in package`);
    if (header.readUInt32LE(0) !== SIG_LOCAL) this.fail(`bad local header signature for ${name} in package`);
    const start = entry.localHeaderOffset + LOCAL_BYTES + header.readUInt16LE(26) + header.readUInt16LE(28);
    if (start + entry.compressedSize > this.dataEnd) this.fail(`data of ${name} lies outside the package's files`);
    return start;
  }

  /**
   * The whole bytes of `entry`, checked (size, CRC-32). One positioned read (through the small-read cache
   * for files up to 64 KiB; a view for an in-memory archive), then one bounded `inflateRawSync`. A stored
   * file of an in-memory archive is a view into the archive's buffer (do not modify it).
   * Memory: the compressed and uncompressed bytes, at most both sizes (plus a read block).
   * @throws ResourceSyncError `RS_ZIP` naming the entry.
   */
  async readSmall(entry: ZipEntry): Promise<Uint8Array> {
    this.checkMethod(entry);
    const at = entry.localHeaderOffset;
    // The local header's name and extra lengths usually equal the central directory's; read a little more
    // and read again in the rare case it was not enough.
    const guess = Math.min(LOCAL_BYTES + entry.headerGuess + 64 + entry.compressedSize, this.dataEnd - at);
    let buf: Buffer;
    try {
      buf = await this.source.readSmall(at, guess);
    } catch (e) {
      return this.fail(`cannot read ${JSON.stringify(entry.name)} from package: ${(e as Error).message}`, e);
    }
    const start = this.dataStart(entry, buf) - at;
    const end = start + entry.compressedSize;
    if (buf.length < end)
      try {
        buf = await this.source.read(at, end);
      } catch (e) {
        return this.fail(`cannot read ${JSON.stringify(entry.name)} from package: ${(e as Error).message}`, e);
      }
    if (buf.length < end) this.fail(`data of ${JSON.stringify(entry.name)} is truncated in package`);
    const data = buf.subarray(start, end);
    return this.decode(entry, data);
  }

  private decode(entry: ZipEntry, data: Buffer): Uint8Array {
    let out: Buffer = data;
    if (entry.method === 8)
      try {
        // maxOutputLength bounds what a bomb can expand to (one byte more than declared is enough to see it).
        out = zlib.inflateRawSync(data, { maxOutputLength: Math.max(1, entry.size) });
      } catch (e) {
        this.fail(`corrupt data for ${JSON.stringify(entry.name)} in package: ${(e as Error).message}`, e);
      }
    if (out.length !== entry.size)
      this.fail(
        `corrupt data for ${JSON.stringify(entry.name)} in package: ${out.length} bytes, the ZIP says ${entry.size}`,
      );
    if (crc32(out) !== entry.crc32) this.fail(`CRC-32 mismatch for ${JSON.stringify(entry.name)} in package`);
    return out;
  }

  /**
   * The bytes of `entry`, streamed in chunks of up to 64 KiB (inflated by a zlib stream), its size checked
   * as it goes (refused as soon as it passes the declared size) and its size and CRC-32 at the end: the
   * last `next()` rejects on a mismatch, so a consumer must read to the end before trusting the bytes.
   * The local header is read and checked before this returns. Memory: one 64 KiB read and zlib's window and
   * buffers (~100 KiB). Breaking out of the iteration releases everything.
   * @throws ResourceSyncError `RS_ZIP` naming the entry (here or from the iteration).
   */
  async openStream(entry: ZipEntry): Promise<AsyncIterable<Uint8Array>> {
    this.checkMethod(entry);
    let header: Buffer;
    try {
      header = await this.source.read(entry.localHeaderOffset, LOCAL_BYTES);
    } catch (e) {
      return this.fail(`cannot read ${JSON.stringify(entry.name)} from package: ${(e as Error).message}`, e);
    }
    const start = this.dataStart(entry, header);
    return this.stream(entry, start);
  }

  private async *compressed(entry: ZipEntry, start: number): AsyncGenerator<Buffer> {
    const end = start + entry.compressedSize;
    for (let p = start; p < end; ) {
      const len = Math.min(ZIP_STREAM_CHUNK_BYTES, end - p);
      const chunk = await this.source.read(p, len);
      if (chunk.length !== len) this.fail(`data of ${JSON.stringify(entry.name)} is truncated in package`);
      p += len;
      yield chunk;
    }
  }

  private async *stream(entry: ZipEntry, start: number): AsyncGenerator<Uint8Array> {
    const name = JSON.stringify(entry.name);
    let crc = 0;
    let total = 0;
    try {
      const chunks: AsyncIterable<Uint8Array> =
        entry.method === 0
          ? this.compressed(entry, start)
          : pipeline(
              Readable.from(this.compressed(entry, start), { objectMode: false }),
              zlib.createInflateRaw({ chunkSize: ZIP_STREAM_CHUNK_BYTES }),
              () => undefined, // errors reach the iteration below
            );
      for await (const chunk of chunks) {
        total += chunk.length;
        if (total > entry.size)
          this.fail(`corrupt data for ${name} in package: more than the ${entry.size} bytes the ZIP says`);
        crc = crc32(chunk, crc);
        yield chunk;
      }
    } catch (e) {
      if (e instanceof ResourceSyncError) throw e;
      this.fail(`corrupt data for ${name} in package: ${(e as Error).message}`, e);
    }
    if (total !== entry.size)
      this.fail(`corrupt data for ${name} in package: ${total} bytes, the ZIP says ${entry.size}`);
    if (crc !== entry.crc32) this.fail(`CRC-32 mismatch for ${name} in package`);
  }

  /** Closes the file (waiting for reads in flight); nothing to do for an in-memory archive. */
  close(): Promise<void> {
    return this.source.close();
  }
}

/** What the end of central directory records say. */
interface DirectoryInfo {
  count: number;
  cdSize: number;
  cdOffset: number;
  /** Where the central directory must end (the ZIP64 EOCD record, or the EOCD record). */
  cdLimit: number;
  /** Offset of a ZIP64 EOCD record not yet read (outside the bytes given to {@link findDirectory}). */
  zip64At: number | undefined;
}

function zipError(why: string, url: string | undefined): ResourceSyncError {
  return new ResourceSyncError('RS_ZIP', why, url === undefined ? {} : { url });
}

/** A refusal of the archive's end records: `not a readable ZIP package: <why>`. */
function unreadable(options: ZipReaderOptions): (why: string) => never {
  return (why) => {
    throw zipError(`not a readable ZIP package: ${why}`, options.url);
  };
}

/**
 * Finds the EOCD record in `tail` (the archive's bytes from `tailStart` to its end `size`): the last
 * signature, within the last 64 KiB + 22 bytes, whose comment length reaches exactly the end of the file;
 * then the ZIP64 locator and record when present.
 */
function findDirectory(tail: Buffer, tailStart: number, size: number, options: ZipReaderOptions): DirectoryInfo {
  const fail = unreadable(options);
  if (size < EOCD_BYTES) fail('too short');
  let at = -1;
  const lowest = Math.max(0, tail.length - EOCD_BYTES - MAX_COMMENT);
  for (let i = tail.length - EOCD_BYTES; i >= lowest; i--) {
    if (tail[i] !== 0x50 || tail.readUInt32LE(i) !== SIG_EOCD) continue;
    if (tail.readUInt16LE(i + 20) === tail.length - i - EOCD_BYTES) {
      at = i;
      break;
    }
  }
  if (at < 0) fail('no end of central directory record (truncated or not a ZIP)');
  const disk = tail.readUInt16LE(at + 4);
  const cdDisk = tail.readUInt16LE(at + 6);
  const diskCount = tail.readUInt16LE(at + 8);
  const count = tail.readUInt16LE(at + 10);
  const cdSize = tail.readUInt32LE(at + 12);
  const cdOffset = tail.readUInt32LE(at + 16);
  const eocdAt = tailStart + at;
  if (at >= LOCATOR_BYTES && tail.readUInt32LE(at - LOCATOR_BYTES) === SIG_ZIP64_LOCATOR) {
    const l = at - LOCATOR_BYTES;
    if (tail.readUInt32LE(l + 4) !== 0 || tail.readUInt32LE(l + 16) > 1) fail('multi-disk archives are not supported');
    const recAt = readU64(tail, l + 8, fail);
    if (recAt + ZIP64_EOCD_BYTES > eocdAt - LOCATOR_BYTES)
      fail('ZIP64 end of central directory record outside the file');
    if (recAt < tailStart) return { count: 0, cdSize: 0, cdOffset: 0, cdLimit: recAt, zip64At: recAt };
    return readZip64Record(tail, recAt - tailStart, recAt, recAt, options);
  }
  if (disk !== 0 || cdDisk !== 0 || diskCount !== count) fail('multi-disk archives are not supported');
  if (cdSize === 0xffffffff || cdOffset === 0xffffffff) fail('ZIP64 values without a ZIP64 record');
  return { count, cdSize, cdOffset, cdLimit: eocdAt, zip64At: undefined };
}

/** Reads a ZIP64 EOCD record at `b[at]` (its offset in the file is `fileAt`). */
function readZip64Record(
  b: Buffer,
  at: number,
  fileAt: number,
  cdLimit: number,
  options: ZipReaderOptions,
): DirectoryInfo {
  const fail = unreadable(options);
  if (b.length < at + ZIP64_EOCD_BYTES || b.readUInt32LE(at) !== SIG_ZIP64_EOCD)
    fail(`bad ZIP64 end of central directory record at ${fileAt}`);
  if (b.readUInt32LE(at + 16) !== 0 || b.readUInt32LE(at + 20) !== 0) fail('multi-disk archives are not supported');
  const diskCount = readU64(b, at + 24, fail);
  const count = readU64(b, at + 32, fail);
  if (diskCount !== count) fail('multi-disk archives are not supported');
  return {
    count,
    cdSize: readU64(b, at + 40, fail),
    cdOffset: readU64(b, at + 48, fail),
    cdLimit,
    zip64At: undefined,
  };
}

function checkDirectoryBounds(d: DirectoryInfo, options: ZipReaderOptions): void {
  const where = options.url === undefined ? {} : { url: options.url };
  const maxEntries = options.maxEntries ?? DEFAULT_MAX_ZIP_ENTRIES;
  const maxCd = options.maxCentralDirectoryBytes ?? DEFAULT_MAX_CENTRAL_DIRECTORY_BYTES;
  if (d.count > maxEntries)
    throw new ResourceSyncError('RS_LIMIT', `package has ${d.count} files (limit ${maxEntries})`, where);
  if (d.cdSize > maxCd)
    throw new ResourceSyncError('RS_LIMIT', `package's central directory is ${d.cdSize} bytes (limit ${maxCd})`, where);
  if (d.cdOffset + d.cdSize > d.cdLimit)
    throw zipError('corrupt ZIP package: the central directory lies outside the file', options.url);
  if (d.count * CENTRAL_BYTES > d.cdSize)
    throw zipError(
      `corrupt ZIP package: a central directory of ${d.cdSize} bytes cannot hold ${d.count} entries`,
      options.url,
    );
}

/**
 * `b[start, end)` as Latin-1: Buffer's native `latin1Slice` where it has it (every Node we run on), else
 * `toString('latin1', ...)` (several JS calls: slower before the JIT warms up).
 */
const latin1: (b: Buffer, start: number, end: number) => string =
  typeof (Buffer.prototype as { latin1Slice?: unknown }).latin1Slice === 'function'
    ? (b, start, end) => (b as unknown as { latin1Slice(start: number, end: number): string }).latin1Slice(start, end)
    : (b, start, end) => b.toString('latin1', start, end);

/**
 * Parses `count` central directory records from `cd` (which starts at `cdOffset` in the file) into entries,
 * checking each as the module comment says.
 */
function parseDirectory(cd: Buffer, count: number, cdOffset: number, url: string | undefined): Map<string, ZipEntry> {
  const entries = new Map<string, ZipEntry>();
  // Local header offset and least end of every entry, to refuse overlaps; checked in one pass while the
  // offsets increase (as every writer lays them out), sorted otherwise.
  const starts = new Float64Array(count);
  const ends = new Float64Array(count);
  let sorted = true;
  let p = 0;
  let k = 0;
  // One closure for the loop (not one per entry): it reads `k`.
  const fail = (why: string): never => {
    throw zipError(`corrupt ZIP package: central directory entry ${k + 1}: ${why}`, url);
  };
  const cdLength = cd.length;
  // DataView reads (builtins) and latin1Slice (native): few JS calls per entry, cheap before the JIT warms up.
  const dv = new DataView(cd.buffer, cd.byteOffset, cd.byteLength);
  for (; k < count; k++) {
    if (p + CENTRAL_BYTES > cdLength) fail('truncated central directory');
    if (dv.getUint32(p, true) !== SIG_CENTRAL) fail('bad signature');
    const flags = dv.getUint16(p + 8, true);
    const method = dv.getUint16(p + 10, true);
    const crc = dv.getUint32(p + 16, true);
    let compressedSize = dv.getUint32(p + 20, true);
    let size = dv.getUint32(p + 24, true);
    const nameLength = dv.getUint16(p + 28, true);
    const extraLength = dv.getUint16(p + 30, true);
    const commentLength = dv.getUint16(p + 32, true);
    let offset = dv.getUint32(p + 42, true);
    const nameStart = p + CENTRAL_BYTES;
    const extraStart = nameStart + nameLength;
    const next = extraStart + extraLength + commentLength;
    if (next > cdLength) fail('truncated central directory');
    let name = latin1(cd, nameStart, extraStart);
    if (!isPlainSafeName(name)) name = checkEntryName(cd.toString('utf8', nameStart, extraStart), url);
    if (size === 0xffffffff || compressedSize === 0xffffffff || offset === 0xffffffff) {
      const z = readZip64Extra(cd, extraStart, extraStart + extraLength, size, compressedSize, offset, name, fail);
      size = z[0];
      compressedSize = z[1];
      offset = z[2];
    }
    if (method === 0 && compressedSize !== size)
      fail(
        `stored file ${JSON.stringify(name)} has a compressed size (${compressedSize}) other than its size (${size})`,
      );
    const least = offset + LOCAL_BYTES + nameLength + compressedSize;
    if (least > cdOffset) fail(`data of ${JSON.stringify(name)} lies outside the package's files`);
    starts[k] = offset;
    ends[k] = least;
    if (k > 0 && sorted) {
      if (offset < (starts[k - 1] as number)) sorted = false;
      else if (offset < (ends[k - 1] as number)) fail(`data of ${JSON.stringify(name)} overlaps another file`);
    }
    p = next;
    if (name.charCodeAt(name.length - 1) === 0x2f) continue; // a directory ('/' at its end): checked, not kept
    // Bit 0: encrypted; 6: strong encryption; 13: central directory encrypted (local headers masked).
    if ((flags & 0x2041) !== 0) throw zipError(`encrypted file ${JSON.stringify(name)} in package`, url);
    const before = entries.size;
    entries.set(name, new ZipEntry(name, flags, method, crc, compressedSize, size, offset, nameLength + extraLength));
    if (entries.size === before) throw zipError(`file ${JSON.stringify(name)} appears twice in package`, url);
  }
  if (!sorted) {
    const order = Array.from({ length: count }, (_, i) => i).sort(
      (a, b) => (starts[a] as number) - (starts[b] as number),
    );
    for (let i = 1; i < order.length; i++)
      if ((starts[order[i] as number] as number) < (ends[order[i - 1] as number] as number))
        throw zipError(
          `corrupt ZIP package: the data of two files overlap (central directory entry ${(order[i] as number) + 1})`,
          url,
        );
  }
  return entries;
}

/**
 * The 64-bit values of the saturated fields (size, compressed size, local header offset: in this order) from
 * the ZIP64 extended information extra field (0x0001) in `cd[start, end)`.
 */
function readZip64Extra(
  cd: Buffer,
  start: number,
  end: number,
  size: number,
  compressedSize: number,
  offset: number,
  name: string,
  fail: (why: string) => never,
): [number, number, number] {
  for (let e = start; e + 4 <= end; ) {
    const id = cd.readUInt16LE(e);
    const len = cd.readUInt16LE(e + 2);
    if (e + 4 + len > end) fail(`bad extra field for ${JSON.stringify(name)}`);
    if (id !== 0x0001) {
      e += 4 + len;
      continue;
    }
    let z = e + 4;
    const take = (): number => {
      if (z + 8 > e + 4 + len) fail(`ZIP64 extra field too short for ${JSON.stringify(name)}`);
      const v = readU64(cd, z, fail);
      z += 8;
      return v;
    };
    return [
      size === 0xffffffff ? take() : size,
      compressedSize === 0xffffffff ? take() : compressedSize,
      offset === 0xffffffff ? take() : offset,
    ];
  }
  return fail(`no ZIP64 extra field for ${JSON.stringify(name)}`);
}
