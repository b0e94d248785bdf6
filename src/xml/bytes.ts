/**
 * Byte sources for the reader: any iterable of chunks, a file, gzip detection (magic bytes 1f 8b) and
 * streaming decompression, and a bound on the number of bytes.
 *
 * @module
 */
import { createReadStream } from 'node:fs';
import { pipeline, Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { ResourceSyncError } from '../core/errors.js';

/** Bytes of a document: a stream of chunks (a file, an HTTP body), chunks in memory, or one buffer. */
export type ByteSource = AsyncIterable<Uint8Array> | Iterable<Uint8Array> | Uint8Array;

/** Read size of {@link fileSource}: large reads, few chunks. */
export const FILE_CHUNK_SIZE = 256 * 1024;

/**
 * The bytes of the file at `path`, in chunks of {@link FILE_CHUNK_SIZE}. Memory: one chunk at a time.
 * The file is opened on the first read and closed when the iteration ends or is abandoned.
 *
 * @throws ResourceSyncError `RS_IO` (with `url` set to the path) when the file cannot be read.
 * @example
 * ```ts
 * const doc = await openDocument(fileSource('resourcelist.xml'), { url: 'resourcelist.xml' });
 * ```
 */
export function fileSource(path: string, chunkSize: number = FILE_CHUNK_SIZE): AsyncIterable<Uint8Array> {
  return {
    async *[Symbol.asyncIterator]() {
      const stream = createReadStream(path, { highWaterMark: chunkSize });
      try {
        for await (const chunk of stream) yield chunk as Uint8Array;
      } catch (e) {
        const err = e as NodeJS.ErrnoException;
        throw new ResourceSyncError('RS_IO', `cannot read ${path}: ${err.code ?? err.message}`, {
          url: path,
          cause: e,
        });
      } finally {
        stream.destroy();
      }
    },
  };
}

/** Any {@link ByteSource} as an async iterator. */
export function toAsyncIterable(source: ByteSource): AsyncIterable<Uint8Array> {
  if (source instanceof Uint8Array) {
    return {
      async *[Symbol.asyncIterator]() {
        yield source;
      },
    };
  }
  if (Symbol.asyncIterator in source) return source;
  const sync = source;
  return {
    async *[Symbol.asyncIterator]() {
      yield* sync;
    },
  };
}

function limitError(maxBytes: number, url: string | undefined, what: string): ResourceSyncError {
  return new ResourceSyncError(
    'RS_LIMIT',
    `${what} is larger than ${maxBytes} bytes (maxBytes)`,
    url === undefined ? {} : { url },
  );
}

/**
 * The document's bytes, decompressed when they start with the gzip magic bytes, and at most `maxBytes` of
 * them (compressed and decompressed sizes are both bounded). Memory: one input chunk plus zlib's window and
 * output chunk. A gzip stream whose decompressed size passes `maxBytes` is stopped there (RS_LIMIT), so a
 * "zip bomb" costs no more than `maxBytes` of work.
 */
export async function* documentBytes(
  source: ByteSource,
  maxBytes: number,
  url: string | undefined,
  signal: AbortSignal | undefined,
): AsyncGenerator<Uint8Array, void, undefined> {
  const it = toAsyncIterable(source)[Symbol.asyncIterator]();
  let done = false;
  try {
    // Look at the first two bytes (they may come in separate chunks).
    let head: Uint8Array = new Uint8Array(0);
    while (head.byteLength < 2) {
      const r = await it.next();
      if (r.done === true) {
        done = true;
        break;
      }
      head = head.byteLength === 0 ? r.value : concat(head, r.value);
    }
    let raw = head.byteLength;
    if (raw > maxBytes) throw limitError(maxBytes, url, 'the document');
    const gzip = head[0] === 0x1f && head[1] === 0x8b;
    if (!gzip) {
      if (head.byteLength > 0) yield head;
      while (!done) {
        signal?.throwIfAborted();
        const r = await it.next();
        if (r.done === true) {
          done = true;
          break;
        }
        raw += r.value.byteLength;
        if (raw > maxBytes) throw limitError(maxBytes, url, 'the document');
        yield r.value;
      }
      return;
    }
    yield* gunzip(head, it, maxBytes, url, signal, () => {
      done = true;
    });
  } finally {
    if (!done) await it.return?.();
  }
}

async function* gunzip(
  head: Uint8Array,
  it: AsyncIterator<Uint8Array>,
  maxBytes: number,
  url: string | undefined,
  signal: AbortSignal | undefined,
  onEnd: () => void,
): AsyncGenerator<Uint8Array, void, undefined> {
  let raw = head.byteLength;
  let sourceError: unknown;
  async function* compressed(): AsyncGenerator<Uint8Array, void, undefined> {
    yield head;
    for (;;) {
      signal?.throwIfAborted();
      let r: IteratorResult<Uint8Array>;
      try {
        r = await it.next();
      } catch (e) {
        sourceError = e;
        throw e;
      }
      if (r.done === true) {
        onEnd();
        return;
      }
      raw += r.value.byteLength;
      if (raw > maxBytes) throw limitError(maxBytes, url, 'the document');
      yield r.value;
    }
  }
  const input = Readable.from(compressed(), { objectMode: false });
  const z = createGunzip();
  // pipeline forwards an input error (a limit, an I/O error) to `z`, whose iterator then throws it.
  pipeline(input, z, () => undefined);
  let inflated = 0;
  try {
    for await (const c of z) {
      inflated += (c as Uint8Array).byteLength;
      if (inflated > maxBytes) throw limitError(maxBytes, url, 'the decompressed document');
      yield c as Uint8Array;
    }
  } catch (e) {
    if (sourceError !== undefined) throw sourceError;
    if (e instanceof ResourceSyncError || (e as Error).name === 'AbortError') throw e;
    throw new ResourceSyncError('RS_XML_SYNTAX', `corrupt gzip data: ${(e as Error).message}`, {
      ...(url === undefined ? {} : { url }),
      cause: e,
    });
  } finally {
    z.destroy();
    input.destroy();
  }
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const c = new Uint8Array(a.byteLength + b.byteLength);
  c.set(a, 0);
  c.set(b, a.byteLength);
  return c;
}
