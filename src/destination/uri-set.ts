/**
 * A set of URIs whose memory does not grow with the collection: held in memory up to a limit, then moved to
 * a scratch SQLite database in a temporary directory (removed by {@link UriSet.close}).
 *
 * @module
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { ResourceSyncError } from '../core/errors.js';

/** URIs kept in memory before the set moves to disk (about 15 MB of strings for typical URIs). */
export const URI_SET_MEMORY_LIMIT = 100_000;

/** Inserts per transaction once on disk. */
const INSERT_BATCH = 10_000;

/**
 * Add, then look up. Memory: at most `memoryLimit` URIs, plus SQLite's page cache (about 8 MB) once on disk.
 * Adding after a lookup is allowed (pending inserts are written before each lookup that needs them).
 */
export class UriSet {
  #memory: Set<string> | undefined = new Set();
  #db: Database.Database | undefined;
  #dir: string | undefined;
  #pending: string[] = [];
  #insert: Database.Statement | undefined;
  #select: Database.Statement | undefined;
  readonly #limit: number;
  readonly #parent: string;

  constructor(options: { readonly memoryLimit?: number; readonly tmpDir?: string } = {}) {
    this.#limit = options.memoryLimit ?? URI_SET_MEMORY_LIMIT;
    this.#parent = options.tmpDir ?? tmpdir();
  }

  /** True once the set has moved to disk. */
  get onDisk(): boolean {
    return this.#db !== undefined;
  }

  add(uri: string): void {
    if (this.#memory !== undefined) {
      this.#memory.add(uri);
      if (this.#memory.size > this.#limit) this.#spill();
      return;
    }
    this.#pending.push(uri);
    if (this.#pending.length >= INSERT_BATCH) this.#flush();
  }

  has(uri: string): boolean {
    if (this.#memory !== undefined) return this.#memory.has(uri);
    if (this.#pending.length > 0) this.#flush();
    return this.#select?.get(uri) !== undefined;
  }

  /** Removes the scratch database, if any. */
  close(): void {
    this.#memory = undefined;
    this.#pending = [];
    try {
      this.#db?.close();
    } finally {
      this.#db = undefined;
      if (this.#dir !== undefined) rmSync(this.#dir, { recursive: true, force: true });
      this.#dir = undefined;
    }
  }

  #spill(): void {
    try {
      this.#dir = mkdtempSync(join(this.#parent, 'rs-uris-'));
      const db = new Database(join(this.#dir, 'uris.sqlite'));
      db.pragma('journal_mode = OFF');
      db.pragma('synchronous = OFF');
      db.pragma('cache_size = -8000');
      db.exec('CREATE TABLE uris (uri TEXT PRIMARY KEY) WITHOUT ROWID');
      this.#db = db;
      this.#insert = db.prepare('INSERT OR IGNORE INTO uris (uri) VALUES (?)');
      this.#select = db.prepare('SELECT 1 FROM uris WHERE uri = ?').pluck();
    } catch (e) {
      this.close();
      throw new ResourceSyncError(
        'RS_IO',
        `cannot create a scratch database under ${this.#parent}: ${(e as Error).message}`,
        {
          cause: e,
        },
      );
    }
    this.#pending = [...(this.#memory ?? [])];
    this.#memory = undefined;
    this.#flush();
  }

  #flush(): void {
    const db = this.#db;
    const insert = this.#insert;
    if (db === undefined || insert === undefined) return;
    const rows = this.#pending;
    this.#pending = [];
    db.transaction(() => {
      for (const uri of rows) insert.run(uri);
    })();
  }
}
