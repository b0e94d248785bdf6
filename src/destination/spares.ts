/**
 * Spare files: the replaced versions of small files, kept (hard-linked under `<dir>/.resourcesync/spare/`)
 * instead of freed, and rewritten in place to stage the next replacements. On this machine (ext4 mounted
 * with `discard` and without a journal: each freed extent is a discard request issued to the disk at once),
 * replacing files as `batch` durability does costs 10-27 µs per new temporary file plus 79-104 µs per rename
 * over the old file, which frees it; with spares, ~5 µs to rewrite one plus 12-13 µs for the link and the
 * rename (`BENCH_ONLY=floor node dist/bench/destination-sync.js 10000 1 real`, rounds
 * of 1,000 on one thread). Elsewhere a spare costs one link() per replacement and saves a block free and an
 * inode allocation.
 *
 * Safety: a spare is scratch, never under a name of the copy; the writer refuses to rewrite a file with more
 * than one link (see the `refill` job), so a spare that still shares its inode with a copy file (a crash
 * between the link and the rename) is dropped, never written. The pool holds at most {@link SparePoolOptions.max}
 * files of at most {@link SparePoolOptions.keepMax} bytes each (by default 1,024 files of 64 KiB: 64 MiB in all).
 *
 * Memory: the names of the free spares (at most `max`).
 *
 * @module
 */
import { randomBytes } from 'node:crypto';
import { mkdir, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { ResourceSyncError } from '../core/errors.js';

/** Options of {@link SparePool.open}. */
export interface SparePoolOptions {
  /** Files the pool may hold (default 1,024). */
  readonly max?: number;
  /** Largest replaced file kept as a spare (default 64 KiB). */
  readonly keepMax?: number;
}

const SPARE_NAME = /^s[0-9a-f]{8}-[0-9a-f]+$/;

/** The pool's directory under the copy's state directory. */
export const SPARE_DIR_NAME = 'spare';

/** The spare files of a copy (see the module comment). */
export class SparePool {
  /** Spares ready to be rewritten. */
  private readonly free: string[];
  /** Names in the directory or reserved for a link (free, taken and not yet renamed away, reserved). */
  private held: number;
  private readonly prefix = `s${randomBytes(4).toString('hex')}-`;
  private counter = 0;
  readonly max: number;
  readonly keepMax: number;

  private constructor(
    readonly dir: string,
    names: string[],
    options: SparePoolOptions,
  ) {
    this.max = options.max ?? 1024;
    this.keepMax = options.keepMax ?? 64 * 1024;
    this.free = names.slice(0, this.max).map((n) => join(dir, n));
    this.held = names.length;
  }

  /**
   * Opens (creating) the pool in `dir`. Files there that are not spares' names are left alone and not used.
   * @throws ResourceSyncError RS_IO when the directory cannot be created or read.
   */
  static async open(dir: string, options: SparePoolOptions = {}): Promise<SparePool> {
    try {
      await mkdir(dir, { recursive: true, mode: 0o700 });
      const names = (await readdir(dir)).filter((n) => SPARE_NAME.test(n));
      return new SparePool(dir, names, options);
    } catch (e) {
      throw new ResourceSyncError('RS_IO', `cannot open the spare files in ${dir}: ${(e as Error).message}`, {
        cause: e,
      });
    }
  }

  /** A spare to rewrite, removed from the free list; undefined when none is free. */
  take(): string | undefined {
    return this.free.pop();
  }

  /** A spare left the directory (renamed over a copy file, or removed after a failure). */
  dropped(): void {
    this.held = Math.max(0, this.held - 1);
  }

  /** A new name under which to keep a replaced file, within the bound; undefined when the pool is full. */
  reserve(): string | undefined {
    if (this.held >= this.max) return undefined;
    this.held++;
    this.counter++;
    return join(this.dir, `${this.prefix}${this.counter.toString(16)}`);
  }

  /** The outcome of a {@link reserve}d name: `kept`, it is a free spare now; else the name was not used. */
  released(name: string, kept: boolean): void {
    if (kept) this.free.push(name);
    else this.dropped();
  }

  /** Free spares (for tests and reports). */
  get size(): number {
    return this.free.length;
  }
}
