/**
 * Content-addressed copies of bitstream versions (by sha-256) in the state directory, so a Change Dump can
 * hold the version of a resource as it was when a change was recorded, even after the file changed again
 * (§13: several versions of one resource). Bounded: past `maxBytes` the oldest copies are evicted.
 *
 * @module
 */
import { randomBytes } from 'node:crypto';
import { mkdir, open, readdir, rename, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';

/** A blob being written; `commit` names it by its sha-256, `discard` removes it. */
export interface BlobWriter {
  write(chunk: Uint8Array): Promise<void>;
  commit(sha256: string): Promise<void>;
  discard(): Promise<void>;
}

/** Options of {@link openBlobStore}. */
export interface BlobStoreOptions {
  readonly dir: string;
  /** Total size bound of the copies (default 1 GiB); 0 disables copies. */
  readonly maxBytes?: number;
}

/** The blob store. Memory: a list of (name, size, mtime) of the blobs, bounded by `maxBytes` / blob size. */
export class BlobStore {
  readonly dir: string;
  readonly maxBytes: number;
  #bytes = 0;
  #index = new Map<string, { size: number; mtimeMs: number }>();

  private constructor(dir: string, maxBytes: number) {
    this.dir = dir;
    this.maxBytes = maxBytes;
  }

  static async open(options: BlobStoreOptions): Promise<BlobStore> {
    const store = new BlobStore(options.dir, options.maxBytes ?? 1 << 30);
    await mkdir(options.dir, { recursive: true });
    for (const name of await readdir(options.dir)) {
      if (name.startsWith('.')) {
        await unlink(join(options.dir, name)).catch(() => undefined); // leftover temp file of a crash
        continue;
      }
      const st = await stat(join(options.dir, name)).catch(() => undefined);
      if (st?.isFile() !== true) continue;
      store.#index.set(name, { size: st.size, mtimeMs: st.mtimeMs });
      store.#bytes += st.size;
    }
    return store;
  }

  get enabled(): boolean {
    return this.maxBytes > 0;
  }

  /** Path of the copy with this sha-256, or undefined when there is none. */
  path(sha256: string): string | undefined {
    return this.#index.has(sha256) ? join(this.dir, sha256) : undefined;
  }

  /** A writer for a new copy (to a temporary file; nothing is visible before `commit`). */
  async create(): Promise<BlobWriter> {
    const tmp = join(this.dir, `.${randomBytes(8).toString('hex')}.tmp`);
    const fh = await open(tmp, 'w');
    let size = 0;
    let done = false;
    const finish = async (): Promise<void> => {
      if (done) return;
      done = true;
      await fh.close();
    };
    return {
      write: async (chunk) => {
        let off = 0;
        while (off < chunk.byteLength) off += (await fh.write(chunk, off, chunk.byteLength - off)).bytesWritten;
        size += chunk.byteLength;
      },
      commit: async (sha256) => {
        await finish();
        if (this.#index.has(sha256) || size > this.maxBytes) {
          await unlink(tmp).catch(() => undefined);
          return;
        }
        await rename(tmp, join(this.dir, sha256));
        this.#index.set(sha256, { size, mtimeMs: Date.now() });
        this.#bytes += size;
        await this.#evict(sha256);
      },
      discard: async () => {
        await finish().catch(() => undefined);
        await unlink(tmp).catch(() => undefined);
      },
    };
  }

  /** Stores a copy from a byte stream (library use). Memory: one chunk. */
  async put(sha256: string, source: AsyncIterable<Uint8Array>): Promise<void> {
    if (!this.enabled || this.#index.has(sha256)) return;
    const w = await this.create();
    try {
      for await (const chunk of source) await w.write(chunk);
      await w.commit(sha256);
    } catch (e) {
      await w.discard();
      throw e;
    }
  }

  async #evict(keep: string): Promise<void> {
    if (this.#bytes <= this.maxBytes) return;
    const byAge = [...this.#index.entries()].sort((a, b) => a[1].mtimeMs - b[1].mtimeMs);
    for (const [name, info] of byAge) {
      if (this.#bytes <= this.maxBytes) break;
      if (name === keep) continue;
      await unlink(join(this.dir, name)).catch(() => undefined);
      this.#index.delete(name);
      this.#bytes -= info.size;
    }
  }
}
