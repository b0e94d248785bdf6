/**
 * The streaming reader: bytes in, the document's header first, then an async stream of entries.
 *
 * @module
 */
import { isAscii, isUtf8 } from 'node:buffer';
import { TextDecoder } from 'node:util';
import { ResourceSyncError } from '../core/errors.js';
import type { DocumentHeader, Entry, ResourceSyncDocument } from '../core/model.js';
import { type ByteSource, documentBytes } from './bytes.js';
import { DocumentParser, type ReadIssue } from './parser.js';

/** Default of {@link ReadOptions.maxBytes}: 1 GiB. */
export const DEFAULT_MAX_BYTES = 1024 * 1024 * 1024;
/** Default of {@link ReadOptions.maxEntryBytes}: 1 MiB. */
export const DEFAULT_MAX_ENTRY_BYTES = 1024 * 1024;
/** Default of {@link ReadOptions.maxDepth}. */
export const DEFAULT_MAX_DEPTH = 32;

/** Options of {@link openDocument} and {@link readDocument}. */
export interface ReadOptions {
  /** URL or path of the document, named in errors. */
  readonly url?: string;
  /** Deepest element nesting allowed (default 32); deeper is `RS_LIMIT`. */
  readonly maxDepth?: number;
  /**
   * Largest root-level child (an entry, or any other element), and largest single token, in characters
   * (default 1 MiB); larger is `RS_LIMIT`.
   */
  readonly maxEntryBytes?: number;
  /** Largest document, compressed and decompressed, in bytes (default 1 GiB); larger is `RS_LIMIT`. */
  readonly maxBytes?: number;
  /** Aborts the read: the next chunk read throws `RS_ABORTED`. */
  readonly signal?: AbortSignal;
}

/** An open document: its header, and its entries to be pulled. */
export interface DocumentStream {
  readonly header: DocumentHeader;
  /**
   * The entries in document order. Pull them once; breaking out of the loop closes the source.
   * Throws `ResourceSyncError` (`RS_XML_SYNTAX`, `RS_LIMIT`, `RS_ABORTED`, ...) where the document goes wrong.
   */
  readonly entries: AsyncGenerator<Entry, void, undefined>;
  /**
   * The same entries, in the batches the parser completes them in (those of one input chunk, never empty):
   * one `await` per chunk rather than per entry, for consumers that go through every entry fast (the
   * validator). Pull either `entries` or `batches`, not both (they share one source). Optional because
   * streams built elsewhere may not have it; {@link openDocument} always sets it. Memory: one chunk's entries.
   */
  readonly batches?: AsyncGenerator<readonly Entry[], void, undefined>;
  /**
   * Well-formed content the model has no place for (root-level elements after the first entry, stray text,
   * children of `<loc>` ...). Grows while `entries` is pulled; complete when `entries` is done. At most
   * {@link MAX_ISSUES} + 1 items.
   */
  readonly issues: readonly ReadIssue[];
  /**
   * Bytes of the document read so far (uncompressed); its size once the entries are done. Optional because
   * streams built elsewhere may not have it; {@link openDocument} always sets it.
   */
  readonly bytesRead?: number;
}

/**
 * Input is decoded and parsed at most this many bytes at a time: the decoded text, the values sliced from it
 * and the entries built from them then stay in the processor's cache until the consumer takes them (about
 * 12% less CPU time to read and validate a large list than with 256 KiB at a time).
 */
const FEED_BYTES = 64 * 1024;

/** Text decoding of a byte stream, chunk by chunk. */
interface ChunkDecoder {
  readonly encoding: string;
  /** Decodes the next chunk (`undefined`: the end of the input). Throws on bytes that are not valid. */
  decode(chunk: Uint8Array | undefined): string;
}

/**
 * Streaming UTF-8 decoding with Node's native validation and conversion (faster than TextDecoder, and ASCII
 * input becomes a one-byte string, which halves the memory the parser scans). A character cut by a chunk
 * boundary is carried to the next chunk. A leading byte order mark is dropped.
 */
class Utf8Decoder implements ChunkDecoder {
  readonly encoding = 'utf-8';
  private carry: Buffer | undefined;
  private first = true;

  decode(chunk: Uint8Array | undefined): string {
    let b: Buffer;
    if (chunk === undefined) {
      if (this.carry === undefined) return '';
      b = this.carry;
      this.carry = undefined;
      if (!isUtf8(b)) throw new TypeError('truncated UTF-8 sequence at the end');
      return b.toString('utf8');
    }
    b = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    if (this.carry !== undefined) {
      b = Buffer.concat([this.carry, b]);
      this.carry = undefined;
    }
    if (this.first && b.length >= 3) {
      this.first = false;
      if (b[0] === 0xef && b[1] === 0xbb && b[2] === 0xbf) b = b.subarray(3);
    } else if (this.first) {
      // Too short to tell whether it starts with a byte order mark: wait for more.
      this.carry = Buffer.from(b);
      return '';
    }
    // Cut before a multi-byte character that continues in the next chunk.
    let end = b.length;
    let i = end - 1;
    while (i >= 0 && end - i <= 3 && (b[i]! & 0xc0) === 0x80) i--;
    if (i >= 0) {
      const lead = b[i]!;
      const need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
      if (i + need > end) end = i;
    }
    if (end < b.length) {
      this.carry = Buffer.from(b.subarray(end));
      b = b.subarray(0, end);
    }
    if (isAscii(b)) return b.toString('latin1');
    if (!isUtf8(b)) throw new TypeError('invalid UTF-8 sequence');
    return b.toString('utf8');
  }
}

class Utf16Decoder implements ChunkDecoder {
  private readonly d: TextDecoder;
  constructor(readonly encoding: 'utf-16le' | 'utf-16be') {
    this.d = new TextDecoder(encoding, { fatal: true });
  }
  decode(chunk: Uint8Array | undefined): string {
    return chunk === undefined ? this.d.decode() : this.d.decode(chunk, { stream: true });
  }
}

function detectEncoding(b: Uint8Array): 'utf-8' | 'utf-16le' | 'utf-16be' {
  if (b[0] === 0xff && b[1] === 0xfe) return 'utf-16le';
  if (b[0] === 0xfe && b[1] === 0xff) return 'utf-16be';
  return 'utf-8';
}

/**
 * Opens a Sitemap / ResourceSync document for streaming: resolves once the header (root element, root
 * `rs:md` and `rs:ln`, namespace declarations, root attributes, unknown root-level elements before the first
 * entry) is read, and gives the entries as an async generator.
 *
 * Input: UTF-8 with or without a byte order mark, or UTF-16 with one; gzip-compressed input is recognised by
 * its magic bytes and decompressed as it streams. Namespace prefixes may be anything (the Sitemap namespace
 * need not be the default one). DTDs are refused.
 *
 * Memory: one input chunk (256 KiB for {@link fileSource}), the entries parsed from 64 KiB of it, and at most one
 * unfinished entry (bounded by `maxEntryBytes`). Independent of the number of entries. Note that V8 may
 * represent a value (a `loc`, a `hash`) as a slice of the decoded chunk it came from: a consumer that keeps
 * values from many chunks of a huge document keeps those chunks alive too (store such values elsewhere,
 * e.g. in SQLite, or keep a bounded number of them).
 *
 * @throws ResourceSyncError `RS_XML_SYNTAX` (not well-formed, with line and column), `RS_XML_DTD`,
 *   `RS_LIMIT`, `RS_NOT_RESOURCESYNC` (the root is not `<urlset>`/`<sitemapindex>` of the Sitemap
 *   namespace), `RS_ABORTED`, `RS_IO` (from the source).
 * @example
 * ```ts
 * const doc = await openDocument(fileSource('changelist.xml'), { url: 'changelist.xml' });
 * console.log(doc.header.kind, doc.header.md?.from);
 * for await (const entry of doc.entries) console.log(entry.loc, entry.md?.change);
 * ```
 */
export async function openDocument(source: ByteSource, options: ReadOptions = {}): Promise<DocumentStream> {
  const url = options.url;
  const signal = options.signal;
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
  const bytes = documentBytes(source, maxBytes, url, signal);
  let parser: DocumentParser | undefined;
  let decoder: ChunkDecoder | undefined;
  let ended = false;
  const where = url === undefined ? {} : { url };

  const start = (first: Uint8Array): void => {
    const encoding = detectEncoding(first);
    decoder = encoding === 'utf-8' ? new Utf8Decoder() : new Utf16Decoder(encoding);
    parser = new DocumentParser({
      url,
      encoding,
      maxDepth: options.maxDepth ?? DEFAULT_MAX_DEPTH,
      maxEntryBytes: options.maxEntryBytes ?? DEFAULT_MAX_ENTRY_BYTES,
    });
  };

  const decode = (chunk: Uint8Array | undefined): string => {
    try {
      return decoder!.decode(chunk);
    } catch (e) {
      const at = parser!.currentPosition();
      throw new ResourceSyncError('RS_XML_SYNTAX', `the document is not valid ${decoder!.encoding}`, {
        ...where,
        ...at,
        cause: e,
      });
    }
  };

  let bytesRead = 0;
  const nextChunk = async (): Promise<IteratorResult<Uint8Array, void>> => {
    try {
      const r = await bytes.next();
      if (r.done !== true) bytesRead += r.value.byteLength;
      return r;
    } catch (e) {
      if ((e as Error).name === 'AbortError')
        throw new ResourceSyncError('RS_ABORTED', 'reading was aborted', { ...where, cause: e });
      if (e instanceof ResourceSyncError) throw e;
      // A source that fails in its own way (a reset connection...): one error class for callers to handle.
      throw new ResourceSyncError('RS_IO', `reading the document failed: ${(e as Error).message}`, {
        ...where,
        cause: e,
      });
    }
  };

  /** The part of the last input chunk not parsed yet (chunks are parsed FEED_BYTES at a time). */
  let rest: Uint8Array | undefined;
  /** Parses at most FEED_BYTES of `chunk` and keeps the rest for the next pull. */
  const feed = (chunk: Uint8Array): void => {
    if (chunk.byteLength > FEED_BYTES) {
      rest = chunk.subarray(FEED_BYTES);
      chunk = chunk.subarray(0, FEED_BYTES);
    } else rest = undefined;
    parser!.feed(decode(chunk));
  };

  /** Reads and parses one more chunk (or part of one); false at the end of the document. */
  const pull = async (): Promise<boolean> => {
    if (signal?.aborted === true) throw new ResourceSyncError('RS_ABORTED', 'reading was aborted', where);
    if (rest !== undefined) {
      feed(rest);
      return true;
    }
    const r = await nextChunk();
    if (r.done === true) {
      ended = true;
      if (parser === undefined) throw new ResourceSyncError('RS_XML_SYNTAX', 'the document is empty', where);
      parser.end(decode(undefined));
      return false;
    }
    let chunk = r.value;
    if (parser === undefined) {
      // Two bytes tell a UTF-16 byte order mark; gather them if the first chunk is a single byte.
      while (chunk.byteLength < 2) {
        const more = await nextChunk();
        if (more.done === true) break;
        chunk = Buffer.concat([chunk, more.value]);
      }
      start(chunk);
    }
    feed(chunk);
    return true;
  };

  try {
    while (parser === undefined || !parser.headerDone) {
      if (!(await pull())) break;
    }
  } catch (e) {
    await bytes.return(undefined);
    throw e;
  }
  const p = parser!;
  const header = p.header!;

  async function* entries(): AsyncGenerator<Entry, void, undefined> {
    try {
      for (;;) {
        const batch = p.batch;
        if (batch.length > 0) {
          p.batch = [];
          for (let i = 0; i < batch.length; i++) yield batch[i]!;
        }
        if (ended) return;
        await pull();
      }
    } finally {
      if (!ended) {
        ended = true;
        await bytes.return(undefined);
      }
    }
  }

  async function* batches(): AsyncGenerator<readonly Entry[], void, undefined> {
    try {
      for (;;) {
        const batch = p.batch;
        if (batch.length > 0) {
          p.batch = [];
          yield batch;
        }
        if (ended) return;
        await pull();
      }
    } finally {
      if (!ended) {
        ended = true;
        await bytes.return(undefined);
      }
    }
  }

  return {
    header,
    entries: entries(),
    batches: batches(),
    issues: p.issues,
    get bytesRead(): number {
      return bytesRead;
    },
  };
}

/**
 * Reads a whole document into memory: for small documents (a Capability List, a Source Description, an
 * index) and tests. Memory: the whole model; use {@link openDocument} for lists of any size.
 *
 * @throws ResourceSyncError as {@link openDocument}.
 * @example
 * ```ts
 * const doc = await readDocument(await fetchBody(url), { url });
 * for (const e of doc.entries) console.log(e.loc);
 * ```
 */
export async function readDocument(source: ByteSource, options: ReadOptions = {}): Promise<ResourceSyncDocument> {
  const { header, entries } = await openDocument(source, options);
  const all: Entry[] = [];
  for await (const e of entries) all.push(e);
  return { ...header, entries: all };
}
