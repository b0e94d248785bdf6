/**
 * Reading a ZIP archive's files in the order they arrive, from its local headers, while the archive is still
 * being received (APPNOTE 6.3.x §4.3.7): the Destination applies a dump package's files as they come instead
 * of after the whole package is in (see `destination/dump.ts`, {@link LocalEntryParser}).
 *
 * Only what a local header fully describes is read: a file whose sizes and CRC-32 are in its local header
 * (general purpose bit 3 clear), stored or deflated, not encrypted, not ZIP64, at most the size bound. At the
 * first file that is not like that, at the central directory, or past the memory bound, the parser stops
 * ({@link LocalEntryParser.stopped} says why) and ignores the rest: what it did not deliver is read from the
 * whole archive once it has arrived, through `zip-reader.ts`, which also checks the central directory.
 * Nothing here is trusted beyond one file: each file's name is checked ({@link checkEntryName}), its bytes
 * inflated with the output bounded by the declared size, and its size and CRC-32 checked; a file that fails
 * those checks stops the parser with the reason (the whole archive is then judged by `zip-reader.ts`).
 *
 * @module
 */
import zlib from 'node:zlib';
import { crc32 } from './crc32.js';
import { checkEntryName } from './zip-reader.js';

const SIG_LOCAL = 0x04034b50;
const LOCAL_BYTES = 30;

/** A file read from its local header as it arrived: its bytes checked against the header's size and CRC-32. */
export interface LocalEntry {
  readonly name: string;
  /** Offset of its local header in the archive. */
  readonly offset: number;
  readonly crc32: number;
  readonly compressedSize: number;
  readonly size: number;
  /** The uncompressed bytes (a view into a received chunk for a stored file). */
  readonly data: Uint8Array;
}

/** Options of {@link LocalEntryParser}. */
export interface LocalEntryParserOptions {
  /** Largest file read (both sizes); a larger one stops the parser. */
  readonly maxEntryBytes: number;
  /** Largest first file (a dump's `manifest.xml` is larger than its bitstreams); default `maxEntryBytes`. */
  readonly maxFirstEntryBytes?: number;
  /**
   * Bound on the bytes held: files parsed and not yet taken plus the bytes of the file being received. Past
   * it the parser stops (the consumer is slower than the network: the rest waits for the whole archive).
   */
  readonly maxQueuedBytes: number;
}

/**
 * Parses local file entries from an archive's bytes pushed to it in order ({@link push}), and hands them out
 * through an async iterator. Memory: at most `maxQueuedBytes` (plus one received chunk).
 *
 * @example
 * ```ts
 * const parser = new LocalEntryParser({ maxEntryBytes: 256 * 1024, maxQueuedBytes: 16 * 1024 ** 2 });
 * body.on('data', (c) => parser.push(c)); body.on('end', () => parser.end());
 * for await (const file of parser) use(file.name, file.data);
 * if (parser.stopped !== undefined) console.log('the rest from the whole archive:', parser.stopped);
 * ```
 */
export class LocalEntryParser implements AsyncIterable<LocalEntry> {
  /** Why the parser stopped before the end of the files (undefined while running, or at the central directory). */
  stopped: string | undefined;
  private chunks: Uint8Array[] = [];
  private buffered = 0;
  /** Archive offset of the first buffered byte. */
  private position = 0;
  private queue: LocalEntry[] = [];
  private queuedBytes = 0;
  private done = false;
  private entries = 0;
  private wake: (() => void) | undefined;

  constructor(private readonly options: LocalEntryParserOptions) {}

  /** The next bytes of the archive. Never throws: a bad file stops the parser. */
  push(chunk: Uint8Array): void {
    if (this.done) return;
    this.chunks.push(chunk);
    this.buffered += chunk.byteLength;
    this.parse();
    if (!this.done && this.buffered + this.queuedBytes > this.options.maxQueuedBytes + LOCAL_BYTES)
      this.stop('more bytes arrived than the consumer took (memory bound)');
    this.notify();
  }

  /** The archive ended (or its download failed: `why`). */
  end(why?: string): void {
    if (!this.done) {
      if (why !== undefined) this.stopped = why;
      else if (this.buffered > 0) this.stopped = 'the archive ends inside a file';
    }
    this.finish();
  }

  /** Stops reading: nothing more is parsed or delivered (files already queued are dropped). */
  stop(why: string): void {
    if (this.done) return;
    this.queue = [];
    this.queuedBytes = 0;
    this.halt(why);
  }

  /** Stops parsing at a file it cannot read as it arrives; the files before it are still handed out. */
  private halt(why: string): void {
    this.stopped = why;
    this.finish();
  }

  private finish(): void {
    this.done = true;
    this.chunks = [];
    this.buffered = 0;
    this.notify();
  }

  private notify(): void {
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<LocalEntry> {
    for (;;) {
      const e = this.queue.shift();
      if (e !== undefined) {
        this.queuedBytes -= e.data.byteLength;
        yield e;
        continue;
      }
      if (this.done) return;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
      });
    }
  }

  /** The first `n` buffered bytes as one buffer (joined only when they span chunks). */
  private peek(n: number): Buffer {
    const first = this.chunks[0] as Uint8Array;
    if (first.byteLength >= n) return Buffer.from(first.buffer, first.byteOffset, n);
    const joined = Buffer.concat(this.chunks, this.buffered);
    this.chunks = [joined];
    return joined.subarray(0, n);
  }

  private consume(n: number): void {
    this.position += n;
    this.buffered -= n;
    while (n > 0) {
      const first = this.chunks[0] as Uint8Array;
      if (first.byteLength <= n) {
        this.chunks.shift();
        n -= first.byteLength;
      } else {
        this.chunks[0] = first.subarray(n);
        n = 0;
      }
    }
  }

  private parse(): void {
    while (!this.done && this.buffered >= 4) {
      const sig = this.peek(4).readUInt32LE(0);
      if (sig !== SIG_LOCAL) {
        // The central directory (or anything else) follows the files: nothing more to read here.
        if (sig !== 0x02014b50 && sig !== 0x06054b50) this.stopped = 'no local header where one was expected';
        this.finish();
        return;
      }
      if (this.buffered < LOCAL_BYTES) return;
      const h = this.peek(LOCAL_BYTES);
      const flags = h.readUInt16LE(6);
      const method = h.readUInt16LE(8);
      const crc = h.readUInt32LE(14);
      const compressedSize = h.readUInt32LE(18);
      const size = h.readUInt32LE(22);
      const nameLength = h.readUInt16LE(26);
      const extraLength = h.readUInt16LE(28);
      const limit =
        this.entries === 0
          ? (this.options.maxFirstEntryBytes ?? this.options.maxEntryBytes)
          : this.options.maxEntryBytes;
      if ((flags & 0x0008) !== 0) {
        this.halt('a file with a data descriptor (sizes after its data)');
        return;
      }
      if ((flags & 0x2041) !== 0) {
        this.halt('an encrypted file');
        return;
      }
      if (method !== 0 && method !== 8) {
        this.halt(`compression method ${method}`);
        return;
      }
      if (compressedSize === 0xffffffff || size === 0xffffffff) {
        this.halt('a ZIP64 file');
        return;
      }
      if (compressedSize > limit || size > limit) {
        this.halt(`a file larger than ${limit} bytes`);
        return;
      }
      if (method === 0 && compressedSize !== size) {
        this.halt('a stored file whose two sizes differ');
        return;
      }
      const total = LOCAL_BYTES + nameLength + extraLength + compressedSize;
      if (this.buffered < total) return;
      const all = this.peek(total);
      const rawName = all.subarray(LOCAL_BYTES, LOCAL_BYTES + nameLength);
      // UTF-8, as the central directory reader decodes names (the same name on both sides).
      const name = rawName.toString('utf8');
      const raw = all.subarray(LOCAL_BYTES + nameLength + extraLength, total);
      const offset = this.position;
      let data: Uint8Array;
      try {
        checkEntryName(name);
        data = method === 8 ? zlib.inflateRawSync(raw, { maxOutputLength: Math.max(1, size) }) : Uint8Array.from(raw);
      } catch (e) {
        this.halt(`${JSON.stringify(name)}: ${(e as Error).message}`);
        return;
      }
      if (data.byteLength !== size) {
        this.halt(`${JSON.stringify(name)}: ${data.byteLength} bytes, its header says ${size}`);
        return;
      }
      if (crc32(data) !== crc) {
        this.halt(`${JSON.stringify(name)}: CRC-32 mismatch`);
        return;
      }
      this.consume(total);
      this.entries++;
      if (name.endsWith('/')) continue; // a directory
      this.queue.push({ name, offset, crc32: crc, compressedSize, size, data });
      this.queuedBytes += data.byteLength;
    }
  }
}
