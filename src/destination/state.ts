/**
 * The Destination's local state: one SQLite database (better-sqlite3, WAL) at `<dir>/.resourcesync/state.db`
 * holding a record per resource (URI, local path, length, hashes, lastmod, Source datetime, deleted flag),
 * the watermark (the Source datetime the copy is complete up to), a journal of the operation in progress and
 * free-form metadata.
 *
 * Writes use prepared statements; batch them with {@link DestinationState.transaction} or
 * {@link DestinationState.putMany} (one commit per batch: tens of thousands of records per second).
 * Commits use `synchronous=NORMAL` (safe against a killed process, the database stays consistent after a power
 * loss); the watermark is written with `synchronous=FULL` (or followed by a checkpoint when written inside a
 * transaction), so a watermark that was set survives a power loss along with everything committed before it.
 *
 * @module
 */
import { accessSync, constants as fsConstants, mkdirSync } from 'node:fs';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { ResourceSyncError } from '../core/errors.js';
import { STATE_DIR_NAME } from './paths.js';

/** File name of the state database inside the state directory. */
export const STATE_DB_NAME = 'state.db';
/** Meta key of the run lock. */
const LOCK_KEY = 'lock';

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Schema version written in the `schema_version` table. */
export const STATE_SCHEMA_VERSION = 1;

/** What the Destination knows about one resource. */
export interface ResourceRecord {
  readonly uri: string;
  /** Local path (absolute, as the path mapper gave it; '' for a deletion of a resource never fetched). */
  readonly path: string;
  readonly length?: number;
  readonly md5?: string;
  readonly sha256?: string;
  /** `lastmod` from the Source, as text. */
  readonly lastmod?: string;
  /** The Source datetime this record reflects (the list's `at` or the change's `datetime`). */
  readonly sourceDatetime?: string;
  /** The resource was deleted at the Source. */
  readonly deleted?: boolean;
}

/** The point the local copy is complete up to. */
export interface Watermark {
  /** W3C Datetime of the Source (a Resource List's `at`, or the last applied change's `until`/`datetime`). */
  readonly at: string;
  readonly kind: 'baseline' | 'incremental';
  readonly sourceUrl: string;
}

/** The operation in progress, as recorded by {@link DestinationState.journalBegin}. */
export interface JournalEntry {
  readonly op: string;
  readonly info: unknown;
  /** ISO datetime the operation began. */
  readonly started: string;
}

interface Row {
  uri: string;
  path: string;
  length: number | null;
  md5: string | null;
  sha256: string | null;
  lastmod: string | null;
  source_datetime: string | null;
  deleted: number;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL, applied TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS resources (
  uri TEXT PRIMARY KEY NOT NULL,
  path TEXT NOT NULL,
  length INTEGER,
  md5 TEXT,
  sha256 TEXT,
  lastmod TEXT,
  source_datetime TEXT,
  deleted INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS resources_path ON resources (path);
CREATE TABLE IF NOT EXISTS watermark (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  at TEXT NOT NULL,
  kind TEXT NOT NULL,
  source_url TEXT NOT NULL,
  updated TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS journal (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  op TEXT NOT NULL,
  info TEXT NOT NULL,
  started TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) WITHOUT ROWID;
`;

function toRecord(row: Row): ResourceRecord {
  const rec: {
    uri: string;
    path: string;
    length?: number;
    md5?: string;
    sha256?: string;
    lastmod?: string;
    sourceDatetime?: string;
    deleted?: boolean;
  } = { uri: row.uri, path: row.path };
  if (row.length !== null) rec.length = row.length;
  if (row.md5 !== null) rec.md5 = row.md5;
  if (row.sha256 !== null) rec.sha256 = row.sha256;
  if (row.lastmod !== null) rec.lastmod = row.lastmod;
  if (row.source_datetime !== null) rec.sourceDatetime = row.source_datetime;
  if (row.deleted !== 0) rec.deleted = true;
  return rec;
}

function rowParams(rec: ResourceRecord): unknown[] {
  return [
    rec.uri,
    rec.path,
    rec.length ?? null,
    rec.md5 ?? null,
    rec.sha256 ?? null,
    rec.lastmod ?? null,
    rec.sourceDatetime ?? null,
    rec.deleted === true ? 1 : 0,
  ];
}

function storeError(what: string, e: unknown, path?: string): ResourceSyncError {
  if (e instanceof ResourceSyncError) return e;
  const message = (e as Error | undefined)?.message ?? String(e);
  const code = (e as { code?: string } | undefined)?.code;
  const io =
    code === 'SQLITE_READONLY' || code === 'SQLITE_CANTOPEN' || code === 'SQLITE_IOERR' || code === 'SQLITE_FULL';
  return new ResourceSyncError(io ? 'RS_IO' : 'RS_STORE', `${what}: ${message}`, {
    cause: e,
    ...(path === undefined ? {} : { url: path }),
  });
}

/**
 * The state database of one local copy. Synchronous API (better-sqlite3): every call is a few microseconds.
 *
 * @example
 * ```ts
 * const state = DestinationState.open('./mirror');
 * state.putMany(records);            // one transaction
 * state.setWatermark({ at: '2024-01-01T00:00:00Z', kind: 'baseline', sourceUrl });
 * state.close();
 * ```
 */
export class DestinationState {
  /** Path of the database file. */
  readonly path: string;
  readonly #db: Database.Database;
  readonly #get: Database.Statement<[string], Row>;
  readonly #getMany: Database.Statement<[string], Row>;
  readonly #getByPath: Database.Statement<[string], Row>;
  readonly #put: Database.Statement<unknown[]>;
  readonly #markDeleted: Database.Statement<[string, string, string]>;
  readonly #remove: Database.Statement<[string]>;
  readonly #page: Database.Statement<[string, number], Row>;
  readonly #count: Database.Statement<[], { n: number }>;
  readonly #countAll: Database.Statement<[], { n: number }>;
  readonly #getMeta: Database.Statement<[string], { value: string }>;
  readonly #setMeta: Database.Statement<[string, string]>;
  #durablePending = false;

  private constructor(path: string, db: Database.Database) {
    this.path = path;
    this.#db = db;
    this.#get = db.prepare('SELECT * FROM resources WHERE uri = ?');
    this.#getMany = db.prepare('SELECT r.* FROM json_each(?) AS j JOIN resources AS r ON r.uri = j.value');
    this.#getByPath = db.prepare('SELECT * FROM resources WHERE path = ? LIMIT 1');
    this.#put = db.prepare(
      `INSERT INTO resources (uri, path, length, md5, sha256, lastmod, source_datetime, deleted) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (uri) DO UPDATE SET path = excluded.path, length = excluded.length, md5 = excluded.md5, sha256 = excluded.sha256,
       lastmod = excluded.lastmod, source_datetime = excluded.source_datetime, deleted = excluded.deleted`,
    );
    this.#markDeleted = db.prepare(
      `INSERT INTO resources (uri, path, source_datetime, deleted) VALUES (?, ?, ?, 1)
       ON CONFLICT (uri) DO UPDATE SET deleted = 1, source_datetime = excluded.source_datetime`,
    );
    this.#remove = db.prepare('DELETE FROM resources WHERE uri = ?');
    this.#page = db.prepare('SELECT * FROM resources WHERE uri > ? ORDER BY uri LIMIT ?');
    this.#count = db.prepare('SELECT count(*) AS n FROM resources WHERE deleted = 0');
    this.#countAll = db.prepare('SELECT count(*) AS n FROM resources');
    this.#getMeta = db.prepare('SELECT value FROM meta WHERE key = ?');
    this.#setMeta = db.prepare(
      'INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
    );
  }

  /**
   * Opens (creating when needed) the state of the local copy in `dir`: `<dir>/.resourcesync/state.db`.
   * @throws ResourceSyncError `RS_IO` naming the directory when it cannot be created or written;
   *   `RS_STORE` for a database that is not ours or of a newer schema.
   */
  static open(dir: string, options: { readonly readonly?: boolean } = {}): DestinationState {
    const stateDir = join(resolve(dir), STATE_DIR_NAME);
    const path = join(stateDir, STATE_DB_NAME);
    const readonly = options.readonly ?? false;
    if (!readonly) {
      try {
        mkdirSync(stateDir, { recursive: true });
        accessSync(stateDir, fsConstants.W_OK);
      } catch (e) {
        throw new ResourceSyncError('RS_IO', `cannot write the state directory ${stateDir}: ${(e as Error).message}`, {
          cause: e,
          url: stateDir,
        });
      }
    }
    let db: Database.Database;
    try {
      db = new Database(path, { readonly, fileMustExist: readonly });
      if (!readonly) {
        db.pragma('journal_mode = WAL');
        db.pragma('synchronous = NORMAL');
      }
      db.pragma('busy_timeout = 5000');
      db.pragma('foreign_keys = ON');
      // A page cache of up to 32 MiB (SQLite's default is 2 MiB): the records of ~100,000 resources stay
      // cached, so an incremental run's lookup per change does not read pages again.
      db.pragma('cache_size = -32768');
    } catch (e) {
      throw storeError(`cannot open the state database ${path}`, e, path);
    }
    try {
      if (!readonly) {
        db.exec(SCHEMA);
        const row = db.prepare('SELECT max(version) AS v FROM schema_version').get() as { v: number | null };
        if (row.v === null)
          db.prepare('INSERT INTO schema_version (version, applied) VALUES (?, ?)').run(
            STATE_SCHEMA_VERSION,
            new Date().toISOString(),
          );
        else if (row.v > STATE_SCHEMA_VERSION)
          throw new ResourceSyncError(
            'RS_STORE',
            `state database ${path} has schema version ${row.v}, newer than this program's ${STATE_SCHEMA_VERSION}`,
          );
      }
      return new DestinationState(path, db);
    } catch (e) {
      db.close();
      throw storeError(`cannot prepare the state database ${path}`, e, path);
    }
  }

  /** Schema version of the open database. */
  schemaVersion(): number {
    const row = this.#db.prepare('SELECT max(version) AS v FROM schema_version').get() as { v: number | null };
    return row.v ?? 0;
  }

  get(uri: string): ResourceRecord | undefined {
    const row = this.#get.get(uri);
    return row === undefined ? undefined : toRecord(row);
  }

  /**
   * The records of `uris` (those that have one), in one query: cheaper than a {@link get} each for a batch.
   * Memory: the records found.
   */
  getMany(uris: readonly string[]): Map<string, ResourceRecord> {
    const out = new Map<string, ResourceRecord>();
    if (uris.length === 0) return out;
    for (const row of this.#getMany.all(JSON.stringify(uris))) out.set(row.uri, toRecord(row));
    return out;
  }

  /** The record whose local path is `path`, if any. */
  getByPath(path: string): ResourceRecord | undefined {
    const row = this.#getByPath.get(path);
    return row === undefined ? undefined : toRecord(row);
  }

  /** Inserts or replaces the record of `rec.uri`. */
  put(rec: ResourceRecord): void {
    this.#run(() => this.#put.run(...rowParams(rec)), 'cannot record a resource');
  }

  /** Inserts or replaces many records in one transaction. */
  putMany(recs: Iterable<ResourceRecord>): number {
    let n = 0;
    this.transaction(() => {
      for (const rec of recs) {
        this.#put.run(...rowParams(rec));
        n++;
      }
    });
    return n;
  }

  /** Marks `uri` deleted at the Source at `datetime` (a record is created if there was none). */
  markDeleted(uri: string, datetime: string): void {
    this.#run(() => this.#markDeleted.run(uri, '', datetime), 'cannot record a deletion');
  }

  /** Forgets `uri`. */
  remove(uri: string): void {
    this.#run(() => this.#remove.run(uri), 'cannot remove a record');
  }

  /**
   * Every record (deleted ones included), in URI order, read in pages of `pageSize`: memory is one page, and
   * writing to the state while iterating is allowed (records changed behind the cursor may or may not be seen).
   */
  *all(pageSize = 1000): IterableIterator<ResourceRecord> {
    let after = '';
    for (;;) {
      const rows = this.#page.all(after, pageSize);
      for (const row of rows) yield toRecord(row);
      const last = rows[rows.length - 1];
      if (last === undefined || rows.length < pageSize) return;
      after = last.uri;
    }
  }

  /** Number of records not marked deleted. */
  count(): number {
    return this.#count.get()?.n ?? 0;
  }

  /** Number of records, deleted ones included. */
  countAll(): number {
    return this.#countAll.get()?.n ?? 0;
  }

  /**
   * Runs `fn` in one transaction (nested calls join the outer one). A watermark set inside is made durable
   * by a checkpoint after the commit.
   */
  transaction<T>(fn: () => T): T {
    const outer = !this.#db.inTransaction;
    let result: T;
    try {
      result = this.#db.transaction(fn)();
    } catch (e) {
      throw storeError('state transaction failed', e, this.path);
    }
    if (outer && this.#durablePending) this.#checkpoint();
    return result;
  }

  getWatermark(): Watermark | undefined {
    const row = this.#db.prepare('SELECT at, kind, source_url FROM watermark WHERE id = 1').get() as
      | { at: string; kind: string; source_url: string }
      | undefined;
    if (row === undefined) return undefined;
    return { at: row.at, kind: row.kind === 'incremental' ? 'incremental' : 'baseline', sourceUrl: row.source_url };
  }

  /** Sets the watermark durably (fsync of the write-ahead log before returning, or after the enclosing transaction). */
  setWatermark(w: Watermark): void {
    const write = (): void => {
      this.#db
        .prepare(
          `INSERT INTO watermark (id, at, kind, source_url, updated) VALUES (1, ?, ?, ?, ?)
           ON CONFLICT (id) DO UPDATE SET at = excluded.at, kind = excluded.kind, source_url = excluded.source_url, updated = excluded.updated`,
        )
        .run(w.at, w.kind, w.sourceUrl, new Date().toISOString());
    };
    if (this.#db.inTransaction) {
      this.#run(write, 'cannot record the watermark');
      this.#durablePending = true;
      return;
    }
    try {
      this.#db.pragma('synchronous = FULL');
      write();
    } catch (e) {
      throw storeError('cannot record the watermark', e, this.path);
    } finally {
      this.#db.pragma('synchronous = NORMAL');
    }
  }

  /** Removes the watermark (the next run is a baseline). */
  clearWatermark(): void {
    this.#run(() => this.#db.prepare('DELETE FROM watermark').run(), 'cannot clear the watermark');
  }

  /** Records that operation `op` began (replacing any previous journal entry). */
  journalBegin(op: string, info: object): void {
    this.#run(
      () =>
        this.#db
          .prepare(
            `INSERT INTO journal (id, op, info, started) VALUES (1, ?, ?, ?)
             ON CONFLICT (id) DO UPDATE SET op = excluded.op, info = excluded.info, started = excluded.started`,
          )
          .run(op, JSON.stringify(info), new Date().toISOString()),
      'cannot write the journal',
    );
  }

  /** Records that the operation in progress ended. */
  journalEnd(): void {
    this.#run(() => this.#db.prepare('DELETE FROM journal').run(), 'cannot write the journal');
  }

  /** The operation in progress (left by a run that did not finish), if any. */
  journal(): JournalEntry | undefined {
    const row = this.#db.prepare('SELECT op, info, started FROM journal WHERE id = 1').get() as
      | { op: string; info: string; started: string }
      | undefined;
    if (row === undefined) return undefined;
    let info: unknown;
    try {
      info = JSON.parse(row.info);
    } catch {
      info = row.info;
    }
    return { op: row.op, info, started: row.started };
  }

  getMeta(key: string): string | undefined {
    return this.#getMeta.get(key)?.value;
  }

  setMeta(key: string, value: string): void {
    this.#run(() => this.#setMeta.run(key, value), 'cannot write metadata');
  }

  /**
   * Takes the run lock of this copy so two runs never work on one directory at once. A lock left by a process
   * that no longer runs (killed) on this host is taken over.
   * @throws ResourceSyncError `RS_IO` naming the process that holds the lock.
   */
  acquireLock(): void {
    const me = { pid: process.pid, host: hostname(), since: new Date().toISOString() };
    this.transaction(() => {
      const held = this.getMeta(LOCK_KEY);
      if (held !== undefined) {
        let other: { pid?: number; host?: string; since?: string } = {};
        try {
          other = JSON.parse(held) as typeof other;
        } catch {
          // A garbled lock is taken over.
        }
        const mine = other.pid === me.pid && other.host === me.host;
        if (!mine && typeof other.pid === 'number' && (other.host !== me.host || isAlive(other.pid)))
          throw new ResourceSyncError(
            'RS_IO',
            `another run holds ${this.path} (pid ${other.pid} on ${other.host ?? '?'} since ${other.since ?? '?'})`,
            { url: this.path },
          );
      }
      this.setMeta(LOCK_KEY, JSON.stringify(me));
    });
  }

  /** Releases the run lock taken by {@link DestinationState.acquireLock} (no-op when another process holds it). */
  releaseLock(): void {
    const held = this.getMeta(LOCK_KEY);
    if (held === undefined) return;
    try {
      const other = JSON.parse(held) as { pid?: number; host?: string };
      if (other.pid !== process.pid || other.host !== hostname()) return;
    } catch {
      // Garbled: remove it.
    }
    this.#run(() => this.#db.prepare('DELETE FROM meta WHERE key = ?').run(LOCK_KEY), 'cannot release the lock');
  }

  /** Checkpoints the write-ahead log into the database file and closes it. */
  close(): void {
    if (!this.#db.open) return;
    try {
      if (!this.#db.readonly) this.#db.pragma('wal_checkpoint(TRUNCATE)');
    } catch {
      // Another connection may hold the log; closing is still safe.
    }
    this.#db.close();
  }

  #checkpoint(): void {
    this.#durablePending = false;
    try {
      this.#db.pragma('wal_checkpoint(FULL)');
    } catch (e) {
      throw storeError('cannot checkpoint the state database', e, this.path);
    }
  }

  #run(fn: () => unknown, what: string): void {
    try {
      fn();
    } catch (e) {
      throw storeError(what, e, this.path);
    }
  }
}
