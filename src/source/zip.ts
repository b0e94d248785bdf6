/**
 * A small streaming writer of stored (uncompressed) ZIP packages, for dump packages below 4 GiB and 65,535
 * entries (the common case; larger ones go through yazl with ZIP64, see `dumps.ts`).
 *
 * Why not yazl for everything: yazl looks up the next entry to write by scanning its whole entry list on every
 * step (quadratic in the number of entries) and computes CRC-32 a byte at a time; for 10,000 small files that
 * is most of the time spent. Here entries are written in order as they come, with a slicing-by-8 CRC-32.
 *
 * Format (APPNOTE 6.3.x): per entry a local file header (UTF-8 name, CRC and sizes in it when the bytes are
 * given as a buffer; in a data descriptor after the bytes when they are streamed), an extended timestamp extra
 * field (UTC mtime), then the central directory and the end of central directory record.
 *
 * @module
 */
import { ResourceSyncError } from '../core/errors.js';
import { writeFileAtomic } from '../io/atomic.js';
import { crc32 } from '../io/crc32.js';

/** One entry of a package: a buffer, or a stream of exactly `length` bytes. */
export interface StoredZipEntry {
  /** Path inside the package, `/`-separated, no leading `/`. */
  readonly name: string;
  readonly mtime: Date;
  readonly content:
    | { readonly data: Uint8Array }
    | { readonly stream: () => AsyncIterable<Uint8Array>; readonly length: number };
}

/** Largest package this writer makes (no ZIP64): offsets and sizes are 32-bit. */
export const STORED_ZIP_MAX_BYTES = 0xffff_fff0;
/** Most entries without ZIP64. */
export const STORED_ZIP_MAX_ENTRIES = 0xffff;

function dosDateTime(d: Date): { date: number; time: number } {
  const year = Math.min(Math.max(d.getUTCFullYear(), 1980), 2107);
  return {
    date: ((year - 1980) << 9) | ((d.getUTCMonth() + 1) << 5) | d.getUTCDate(),
    time: (d.getUTCHours() << 11) | (d.getUTCMinutes() << 5) | Math.floor(d.getUTCSeconds() / 2),
  };
}

interface CentralRecord {
  name: Buffer;
  flags: number;
  date: number;
  time: number;
  unixTime: number;
  crc: number;
  size: number;
  offset: number;
}

/** Extended timestamp extra field (0x5455): flags "mtime present", then the UTC mtime in seconds. */
function timestampExtra(unixTime: number): Buffer {
  const b = Buffer.alloc(9);
  b.writeUInt16LE(0x5455, 0);
  b.writeUInt16LE(5, 2);
  b.writeUInt8(1, 4);
  b.writeUInt32LE(unixTime >>> 0, 5);
  return b;
}

/** Output chunks of about this size are handed to the file writer. */
const CHUNK = 1 << 20;

/**
 * Writes a stored ZIP package atomically (temporary file + rename) and returns its size in bytes.
 * Memory: one entry's buffer (or one chunk of a streamed entry) plus a 1 MiB output chunk; the central
 * directory (about 100 bytes per entry).
 *
 * @throws ResourceSyncError `RS_LIMIT` past {@link STORED_ZIP_MAX_BYTES} or {@link STORED_ZIP_MAX_ENTRIES},
 *   `RS_LENGTH_MISMATCH` when a stream's bytes differ from its length, `RS_IO`.
 */
export async function writeStoredZip(
  path: string,
  entries: AsyncIterable<StoredZipEntry> | Iterable<StoredZipEntry>,
  options: { readonly fsync?: boolean } = {},
): Promise<number> {
  return writeFileAtomic(path, storedZipBytes(entries), options.fsync === undefined ? {} : { fsync: options.fsync });
}

/** The bytes of a stored ZIP package, as a pull-based stream of about 1 MiB chunks. */
export async function* storedZipBytes(
  entries: AsyncIterable<StoredZipEntry> | Iterable<StoredZipEntry>,
): AsyncGenerator<Uint8Array, void, undefined> {
  const central: CentralRecord[] = [];
  let offset = 0;
  let pending: Uint8Array[] = [];
  let pendingBytes = 0;
  const push = (b: Uint8Array): Uint8Array | undefined => {
    offset += b.byteLength;
    if (offset > STORED_ZIP_MAX_BYTES)
      throw new ResourceSyncError('RS_LIMIT', `a stored ZIP package is limited to ${STORED_ZIP_MAX_BYTES} bytes`);
    pending.push(b);
    pendingBytes += b.byteLength;
    if (pendingBytes < CHUNK) return undefined;
    const out = pending.length === 1 ? pending[0]! : Buffer.concat(pending, pendingBytes);
    pending = [];
    pendingBytes = 0;
    return out;
  };
  for await (const e of entries) {
    if (central.length >= STORED_ZIP_MAX_ENTRIES)
      throw new ResourceSyncError('RS_LIMIT', `a stored ZIP package is limited to ${STORED_ZIP_MAX_ENTRIES} entries`);
    const name = Buffer.from(e.name, 'utf8');
    const { date, time } = dosDateTime(e.mtime);
    const unixTime = Math.max(0, Math.floor(e.mtime.getTime() / 1000));
    const extra = timestampExtra(unixTime);
    const streamed = !('data' in e.content);
    const flags = 0x0800 | (streamed ? 0x0008 : 0); // UTF-8 names; data descriptor for streamed bytes
    let crc = 0;
    let size = 0;
    if ('data' in e.content) {
      crc = crc32(e.content.data);
      size = e.content.data.byteLength;
    }
    const header = Buffer.alloc(30);
    header.writeUInt32LE(0x04034b50, 0);
    header.writeUInt16LE(20, 4);
    header.writeUInt16LE(flags, 6);
    header.writeUInt16LE(0, 8);
    header.writeUInt16LE(time, 10);
    header.writeUInt16LE(date, 12);
    header.writeUInt32LE(crc, 14);
    header.writeUInt32LE(size, 18);
    header.writeUInt32LE(size, 22);
    header.writeUInt16LE(name.length, 26);
    header.writeUInt16LE(extra.length, 28);
    const record: CentralRecord = { name, flags, date, time, unixTime, crc, size, offset };
    for (const b of [header, name, extra]) {
      const out = push(b);
      if (out !== undefined) yield out;
    }
    if ('data' in e.content) {
      const out = push(e.content.data);
      if (out !== undefined) yield out;
    } else {
      let c = 0;
      let n = 0;
      for await (const chunk of e.content.stream()) {
        c = crc32(chunk, c);
        n += chunk.byteLength;
        const out = push(chunk);
        if (out !== undefined) yield out;
      }
      if (n !== e.content.length)
        throw new ResourceSyncError(
          'RS_LENGTH_MISMATCH',
          `${e.name}: ${n} bytes read where ${e.content.length} were expected`,
        );
      record.crc = c;
      record.size = n;
      const desc = Buffer.alloc(16);
      desc.writeUInt32LE(0x08074b50, 0);
      desc.writeUInt32LE(c, 4);
      desc.writeUInt32LE(n, 8);
      desc.writeUInt32LE(n, 12);
      const out = push(desc);
      if (out !== undefined) yield out;
    }
    central.push(record);
  }
  const cdStart = offset;
  for (const r of central) {
    const h = Buffer.alloc(46);
    h.writeUInt32LE(0x02014b50, 0);
    h.writeUInt16LE((3 << 8) | 20, 4); // made by: Unix, 2.0
    h.writeUInt16LE(20, 6);
    h.writeUInt16LE(r.flags, 8);
    h.writeUInt16LE(0, 10);
    h.writeUInt16LE(r.time, 12);
    h.writeUInt16LE(r.date, 14);
    h.writeUInt32LE(r.crc, 16);
    h.writeUInt32LE(r.size, 20);
    h.writeUInt32LE(r.size, 24);
    h.writeUInt16LE(r.name.length, 28);
    h.writeUInt16LE(9, 30);
    h.writeUInt16LE(0, 32);
    h.writeUInt16LE(0, 34);
    h.writeUInt16LE(0, 36);
    h.writeUInt32LE((0o100644 << 16) >>> 0, 38);
    h.writeUInt32LE(r.offset, 42);
    for (const b of [h, r.name, timestampExtra(r.unixTime)]) {
      const out = push(b);
      if (out !== undefined) yield out;
    }
  }
  const cdSize = offset - cdStart;
  const eocd = Buffer.alloc(22);
  eocd.writeUInt32LE(0x06054b50, 0);
  eocd.writeUInt16LE(0, 4);
  eocd.writeUInt16LE(0, 6);
  eocd.writeUInt16LE(central.length, 8);
  eocd.writeUInt16LE(central.length, 10);
  eocd.writeUInt32LE(cdSize, 12);
  eocd.writeUInt32LE(cdStart, 16);
  eocd.writeUInt16LE(0, 20);
  const last = push(eocd);
  if (last !== undefined) yield last;
  if (pendingBytes > 0) yield pending.length === 1 ? pending[0]! : Buffer.concat(pending, pendingBytes);
}
