/**
 * A bounded on-disk cache of gzip-compressed copies of generated XML documents, so that a document asked for
 * with `Accept-Encoding: gzip` many times is compressed once (and then served with a Content-Length).
 *
 * Keyed by the document's path and ETag (documents are never rewritten in place: a new generation has a new
 * ETag), so an entry never goes stale; least recently used entries are removed past `maxBytes`. Entries are
 * filled in the background, one at a time (the first request streams through zlib meanwhile), and written
 * atomically: a half-written file is never served.
 *
 * Memory: O(number of entries) for the index (a path and two numbers each), plus one zlib stream while
 * filling. Disk: at most `maxBytes` plus the entry being written.
 *
 * @module
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, readdir, rm, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import { writeFileAtomic } from '../../io/atomic.js';

/** Options of {@link GzipCache}. */
export interface GzipCacheOptions {
  /** A directory the cache owns (created; leftover cache files in it are removed at start). */
  readonly dir: string;
  /** Upper bound of the cached bytes. Default 256 MiB. */
  readonly maxBytes?: number;
  /** zlib level. Default 6. */
  readonly level?: number;
  /** Called when a fill fails (the document is then compressed per request, as without a cache). */
  readonly onError?: (error: unknown) => void;
}

/** A cached compressed copy. */
export interface CachedGzip {
  readonly path: string;
  readonly length: number;
}

interface Entry {
  readonly path: string;
  readonly length: number;
  lastUsed: number;
}

const NAME = /^(?:\.)?[0-9a-f]{40}\.gz(?:\..*\.tmp)?$/;

/** See the module comment. Create with {@link openGzipCache}. */
export class GzipCache {
  readonly #dir: string;
  readonly #maxBytes: number;
  readonly #level: number;
  readonly #onError: ((error: unknown) => void) | undefined;
  readonly #entries = new Map<string, Entry>();
  readonly #pending = new Set<string>();
  #queue: Promise<void> = Promise.resolve();
  #bytes = 0;
  #tick = 0;
  #closed = false;

  constructor(options: GzipCacheOptions) {
    this.#dir = options.dir;
    this.#maxBytes = options.maxBytes ?? 256 * 1024 * 1024;
    this.#level = options.level ?? 6;
    this.#onError = options.onError;
  }

  /** Bytes currently cached. */
  get bytes(): number {
    return this.#bytes;
  }

  /**
   * The compressed copy of `source` (a complete, never rewritten file) with validator `etag`, or undefined when
   * there is none yet; then a background fill is queued (once per key), unless the file is larger than the
   * cache itself.
   */
  lookup(source: { readonly path: string; readonly etag: string; readonly length: number }): CachedGzip | undefined {
    const key = createHash('sha1').update(`${source.path}\n${source.etag}\n${this.#level}`).digest('hex');
    const hit = this.#entries.get(key);
    if (hit !== undefined) {
      hit.lastUsed = ++this.#tick;
      return { path: hit.path, length: hit.length };
    }
    if (!this.#closed && !this.#pending.has(key) && source.length <= this.#maxBytes) {
      this.#pending.add(key);
      this.#queue = this.#queue.then(() => this.#fill(key, source.path));
    }
    return undefined;
  }

  /** Resolves when every queued fill has finished (tests, shutdown). */
  idle(): Promise<void> {
    return this.#queue;
  }

  /** Waits for the fill in progress, then removes every cached file. */
  async close(): Promise<void> {
    this.#closed = true;
    await this.#queue;
    this.#entries.clear();
    this.#bytes = 0;
    await removeCacheFiles(this.#dir);
  }

  async #fill(key: string, sourcePath: string): Promise<void> {
    try {
      if (this.#closed) return;
      const dest = join(this.#dir, `${key}.gz`);
      const gzip = createGzip({ level: this.#level });
      const feeding = pipeline(createReadStream(sourcePath), gzip);
      feeding.catch(() => {}); // the error reaches the reader below through the destroyed gzip stream
      const length = await writeFileAtomic(dest, gzip, { fsync: false });
      await feeding;
      this.#entries.set(key, { path: dest, length, lastUsed: ++this.#tick });
      this.#bytes += length;
      await this.#evict();
    } catch (e) {
      this.#onError?.(e);
    } finally {
      this.#pending.delete(key);
    }
  }

  async #evict(): Promise<void> {
    while (this.#bytes > this.#maxBytes && this.#entries.size > 0) {
      let oldestKey: string | undefined;
      let oldest = Number.POSITIVE_INFINITY;
      for (const [k, e] of this.#entries) {
        if (e.lastUsed < oldest) {
          oldest = e.lastUsed;
          oldestKey = k;
        }
      }
      const e = this.#entries.get(oldestKey!)!;
      this.#entries.delete(oldestKey!);
      this.#bytes -= e.length;
      // A response may still be reading it: unlinking an open file is safe on POSIX.
      await unlink(e.path).catch(() => {});
    }
  }
}

async function removeCacheFiles(dir: string): Promise<void> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return;
  }
  await Promise.all(names.filter((n) => NAME.test(n)).map((n) => rm(join(dir, n), { force: true })));
}

/** Creates the cache directory (removing leftover cache files from an earlier run) and the cache. */
export async function openGzipCache(options: GzipCacheOptions): Promise<GzipCache> {
  await mkdir(options.dir, { recursive: true });
  await removeCacheFiles(options.dir);
  return new GzipCache(options);
}
