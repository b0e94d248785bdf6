/**
 * The Destination's local state: one SQLite database (better-sqlite3, WAL) at `<dir>/.resourcesync/state.db`
 * holding a record per resource (URI, local path, length, hashes, lastmod, Source datetime, deleted flag, the
 * set it came from), a watermark per Source and set (the Source datetime the copy of that set is complete up
 * to), a journal of the operation in progress, a list of files being renamed, and free-form metadata.
 *
 * A copy belongs to one Source (the first one synchronized into it; see {@link DestinationState.copySource})
 * and may hold several of its sets (Capability Lists), each with its own watermark and baseline: select one
 * with {@link DestinationState.selectSet} before reading or moving its watermark; records written afterwards
 * are tagged with it. Databases of schema version 1 (one watermark, untagged records) are migrated when
 * opened for writing: their watermark becomes a "legacy" set, adopted by the first set selected with
 * `adoptLegacy` (see {@link DestinationState.selectSet}).
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
import { SELF_NAME, STATE_DIR_NAME } from './paths.js';

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
export const STATE_SCHEMA_VERSION = 2;

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

/** One set of a Source (a Capability List, or the list or dump synchronized directly) held in a copy. */
export interface SetKey {
  /** The Source: its Source Description's URL (else the set's own URL). */
  readonly source: string;
  /** The set: its Capability List's URL (or the list or dump synchronized without one). */
  readonly set: string;
}

/** A set recorded in the state, with its watermark if it has one. */
export interface SetInfo extends SetKey {
  readonly id: number;
  readonly watermark?: Watermark;
  /** A watermark migrated from a copy of schema version 1, not yet adopted: its Source and set are not known. */
  readonly legacy: boolean;
}

/** A file of the copy to move from `from` to `to` (relative paths), through the temporary `via`. */
export interface PendingRename {
  readonly seq: number;
  readonly uri: string;
  readonly from: string;
  readonly to: string;
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
  set_id: number | null;
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
  deleted INTEGER NOT NULL DEFAULT 0,
  set_id INTEGER
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS resources_path ON resources (path);
CREATE TABLE IF NOT EXISTS sets (
  id INTEGER PRIMARY KEY,
  source TEXT NOT NULL,
  set_url TEXT NOT NULL,
  at TEXT,
  kind TEXT,
  source_url TEXT,
  updated TEXT,
  UNIQUE (source, set_url)
);
CREATE TABLE IF NOT EXISTS journal (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  op TEXT NOT NULL,
  info TEXT NOT NULL,
  started TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS renames (seq INTEGER PRIMARY KEY, uri TEXT NOT NULL, from_path TEXT NOT NULL, to_path TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) WITHOUT ROWID;
`;

/** Schema version 1 -> 2: records tagged with their set, a watermark per set, renames. */
const MIGRATE_1_TO_2 = `
ALTER TABLE resources ADD COLUMN set_id INTEGER;
CREATE TABLE sets (
  id INTEGER PRIMARY KEY,
  source TEXT NOT NULL,
  set_url TEXT NOT NULL,
  at TEXT,
  kind TEXT,
  source_url TEXT,
  updated TEXT,
  UNIQUE (source, set_url)
);
INSERT INTO sets (source, set_url, at, kind, source_url, updated) SELECT '', '', at, kind, source_url, updated FROM watermark;
INSERT INTO sets (source, set_url) SELECT '', '' WHERE NOT EXISTS (SELECT 1 FROM sets) AND EXISTS (SELECT 1 FROM resources);
DROP TABLE watermark;
CREATE TABLE renames (seq INTEGER PRIMARY KEY, uri TEXT NOT NULL, from_path TEXT NOT NULL, to_path TEXT NOT NULL);
`;

/** Meta key of the file-name options of the copy (see {@link DestinationState.nameOptions}). */
const NAMES_KEY = 'names';
/** Metadata key of {@link DestinationState.sourceAliases}: JSON `{ "<recorded Source>": ["<url>", ...] }`. */
const SOURCE_ALIASES_KEY = 'source-aliases';
/** Most aliases kept per Source (an Index listing more Source Descriptions is still named by their `index` links). */
const MAX_ALIASES_PER_SOURCE = 1000;

interface SetRow {
  id: number;
  source: string;
  set_url: string;
  at: string | null;
  kind: string | null;
  source_url: string | null;
}

function watermarkOf(r: SetRow): Watermark | undefined {
  if (r.at === null) return undefined;
  return { at: r.at, kind: r.kind === 'incremental' ? 'incremental' : 'baseline', sourceUrl: r.source_url ?? '' };
}

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

function rowParams(rec: ResourceRecord, setId: number | null): unknown[] {
  return [
    rec.uri,
    rec.path,
    rec.length ?? null,
    rec.md5 ?? null,
    rec.sha256 ?? null,
    rec.lastmod ?? null,
    rec.sourceDatetime ?? null,
    rec.deleted === true ? 1 : 0,
    setId,
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

/** Creates the schema of a new database, or brings an older one to {@link STATE_SCHEMA_VERSION}. */
function migrate(db: Database.Database, path: string): void {
  db.exec('CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL, applied TEXT NOT NULL)');
  const row = db.prepare('SELECT max(version) AS v FROM schema_version').get() as { v: number | null };
  const version = row.v ?? (tableExists(db, 'resources') ? 1 : 0);
  if (version > STATE_SCHEMA_VERSION)
    throw new ResourceSyncError(
      'RS_STORE',
      `state database ${path} has schema version ${version}, newer than this program's ${STATE_SCHEMA_VERSION}`,
    );
  if (version === STATE_SCHEMA_VERSION) return;
  db.transaction(() => {
    if (version === 1) {
      db.exec(MIGRATE_1_TO_2);
      // Files of version 1 copies have the names of the first mapping: renamed by the Destination's next run.
      if (db.prepare('SELECT 1 FROM resources LIMIT 1').get() !== undefined)
        db.prepare('INSERT INTO meta (key, value) VALUES (?, \'{"version":1}\') ON CONFLICT (key) DO NOTHING').run(
          NAMES_KEY,
        );
    }
    db.exec(SCHEMA);
    db.prepare('INSERT INTO schema_version (version, applied) VALUES (?, ?)').run(
      STATE_SCHEMA_VERSION,
      new Date().toISOString(),
    );
  })();
}

function tableExists(db: Database.Database, name: string): boolean {
  return db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(name) !== undefined;
}

/**
 * The state database of one local copy. Synchronous API (better-sqlite3): every call is a few microseconds.
 *
 * @example
 * ```ts
 * const state = DestinationState.open('./mirror');
 * state.selectSet({ source: 'https://example.org/.well-known/resourcesync', set: capabilityListUrl });
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
  readonly #markDeleted: Database.Statement<[string, string, string, number | null]>;
  readonly #remove: Database.Statement<[string]>;
  readonly #page: Database.Statement<[string, number], Row>;
  readonly #pageSet: Database.Statement<[string, number, number], Row>;
  readonly #deletedPage: Database.Statement<[string, number], Row>;
  readonly #deletedPageSet: Database.Statement<[string, number, number], Row>;
  readonly #count: Database.Statement<[], { n: number }>;
  readonly #countAll: Database.Statement<[], { n: number }>;
  readonly #getMeta: Database.Statement<[string], { value: string }>;
  readonly #setMeta: Database.Statement<[string, string]>;
  #durablePending = false;
  /** The set selected by {@link selectSet}: its watermark, and the tag of records written. */
  #setId: number | null = null;

  private constructor(path: string, db: Database.Database) {
    this.path = path;
    this.#db = db;
    this.#get = db.prepare('SELECT * FROM resources WHERE uri = ?');
    this.#getMany = db.prepare('SELECT r.* FROM json_each(?) AS j JOIN resources AS r ON r.uri = j.value');
    this.#getByPath = db.prepare('SELECT * FROM resources WHERE path = ? LIMIT 1');
    this.#put = db.prepare(
      `INSERT INTO resources (uri, path, length, md5, sha256, lastmod, source_datetime, deleted, set_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (uri) DO UPDATE SET path = excluded.path, length = excluded.length, md5 = excluded.md5, sha256 = excluded.sha256,
       lastmod = excluded.lastmod, source_datetime = excluded.source_datetime, deleted = excluded.deleted,
       set_id = coalesce(excluded.set_id, set_id)`,
    );
    this.#markDeleted = db.prepare(
      `INSERT INTO resources (uri, path, source_datetime, deleted, set_id) VALUES (?, ?, ?, 1, ?)
       ON CONFLICT (uri) DO UPDATE SET deleted = 1, source_datetime = excluded.source_datetime,
       set_id = coalesce(excluded.set_id, set_id)`,
    );
    this.#remove = db.prepare('DELETE FROM resources WHERE uri = ?');
    this.#page = db.prepare('SELECT * FROM resources WHERE uri > ? ORDER BY uri LIMIT ?');
    this.#pageSet = db.prepare('SELECT * FROM resources WHERE uri > ? AND set_id = ? ORDER BY uri LIMIT ?');
    this.#deletedPage = db.prepare('SELECT * FROM resources WHERE uri > ? AND deleted = 1 ORDER BY uri LIMIT ?');
    this.#deletedPageSet = db.prepare(
      'SELECT * FROM resources WHERE uri > ? AND deleted = 1 AND set_id = ? ORDER BY uri LIMIT ?',
    );
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
   *   `RS_STORE` for a database that is not ours or of a newer schema, or (read-only) of an older one.
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
        migrate(db, path);
      } else {
        const row = db.prepare('SELECT max(version) AS v FROM schema_version').get() as { v: number | null };
        if ((row.v ?? 1) < STATE_SCHEMA_VERSION)
          throw new ResourceSyncError(
            'RS_STORE',
            `the state of ${resolve(dir)} was written by an older version: run \`resourcesync sync\` on it once (without --dry-run or --audit) to bring it up to date`,
            { url: path },
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

  /**
   * Whose file the local file at `path` (relative, `/`-separated) is: the URI recorded for it, whether it
   * belongs to a set other than the selected one, and whether its resource was deleted at the Source (a
   * deletion recorded without `--delete`: the file was kept). `<path>/%%self` is the file of the record of `<path>`.
   */
  fileOwner(path: string): { readonly uri: string; readonly otherSet: boolean; readonly deleted: boolean } | undefined {
    const natural = path.endsWith(`/${SELF_NAME}`) ? path.slice(0, -SELF_NAME.length - 1) : path;
    const row = this.#getByPath.get(natural);
    if (row === undefined) return undefined;
    return {
      uri: row.uri,
      otherSet: this.#setId !== null && row.set_id !== null && row.set_id !== this.#setId,
      deleted: row.deleted !== 0,
    };
  }

  /** Inserts or replaces the record of `rec.uri`. */
  put(rec: ResourceRecord): void {
    this.#run(() => this.#put.run(...rowParams(rec, this.#setId)), 'cannot record a resource');
  }

  /** Inserts or replaces many records in one transaction. */
  putMany(recs: Iterable<ResourceRecord>): number {
    let n = 0;
    this.transaction(() => {
      for (const rec of recs) {
        this.#put.run(...rowParams(rec, this.#setId));
        n++;
      }
    });
    return n;
  }

  /** Marks `uri` deleted at the Source at `datetime` (a record is created if there was none). */
  markDeleted(uri: string, datetime: string): void {
    this.#run(() => this.#markDeleted.run(uri, '', datetime, this.#setId), 'cannot record a deletion');
  }

  /** Forgets `uri`. */
  remove(uri: string): void {
    this.#run(() => this.#remove.run(uri), 'cannot remove a record');
  }

  /**
   * Every record (deleted ones included) of the selected set (of the whole copy when none is selected), in URI
   * order, read in pages of `pageSize`: memory is one page, and writing to the state while iterating is
   * allowed (records changed behind the cursor may or may not be seen).
   */
  *all(pageSize = 1000): IterableIterator<ResourceRecord> {
    let after = '';
    const set = this.#setId;
    for (;;) {
      const rows = set === null ? this.#page.all(after, pageSize) : this.#pageSet.all(after, set, pageSize);
      for (const row of rows) yield toRecord(row);
      const last = rows[rows.length - 1];
      if (last === undefined || rows.length < pageSize) return;
      after = last.uri;
    }
  }

  /**
   * The records marked deleted (deletions recorded, their files removed or kept) of the selected set, as
   * {@link all}. One scan of the table; memory is one page.
   */
  *deletedRecords(pageSize = 1000): IterableIterator<ResourceRecord> {
    let after = '';
    const set = this.#setId;
    for (;;) {
      const rows =
        set === null ? this.#deletedPage.all(after, pageSize) : this.#deletedPageSet.all(after, set, pageSize);
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

  /**
   * Selects the set later calls work on: its watermark ({@link getWatermark}, {@link setWatermark}) and the
   * tag of the records written. The set is recorded when new (not in a read-only state: then the watermark is
   * simply absent). With `adoptLegacy`, a watermark migrated from schema version 1 (whose Source and set were
   * not recorded) becomes this set's, along with the untagged records: the caller decides it is the same Source.
   */
  selectSet(key: SetKey, options: { readonly adoptLegacy?: boolean } = {}): void {
    const find = (): number | undefined =>
      (
        this.#db.prepare('SELECT id FROM sets WHERE source = ? AND set_url = ?').get(key.source, key.set) as
          | { id: number }
          | undefined
      )?.id;
    let id = find();
    if (id === undefined && !this.#db.readonly) {
      this.transaction(() => {
        const legacy = this.#db.prepare("SELECT id FROM sets WHERE source = '' AND set_url = ''").get() as
          | { id: number }
          | undefined;
        if (legacy !== undefined && options.adoptLegacy === true) {
          this.#db.prepare('UPDATE sets SET source = ?, set_url = ? WHERE id = ?').run(key.source, key.set, legacy.id);
          this.#db.prepare('UPDATE resources SET set_id = ? WHERE set_id IS NULL').run(legacy.id);
        } else this.#db.prepare('INSERT INTO sets (source, set_url) VALUES (?, ?)').run(key.source, key.set);
      });
      id = find();
    }
    this.#setId = id ?? -1;
  }

  /** Every set the copy holds, in the order they were first synchronized. */
  sets(): SetInfo[] {
    const rows = this.#db
      .prepare('SELECT id, source, set_url, at, kind, source_url FROM sets ORDER BY id')
      .all() as SetRow[];
    return rows.map((r) => {
      const info: { -readonly [K in keyof SetInfo]: SetInfo[K] } = {
        id: r.id,
        source: r.source,
        set: r.set_url,
        legacy: r.source === '' && r.set_url === '',
      };
      const w = watermarkOf(r);
      if (w !== undefined) info.watermark = w;
      return info;
    });
  }

  /**
   * The Source this copy belongs to: that of the first set synchronized into it (undefined for a new copy, and
   * for a copy migrated from schema version 1 whose watermark was not adopted yet: see {@link legacySet}).
   */
  copySource(): string | undefined {
    return this.sets().find((s) => !s.legacy)?.source;
  }

  /**
   * The Sources the copy holds (see {@link copySource}; more than one only with sets of other Sources kept on
   * purpose), each as first recorded, in the order they were first synchronized.
   */
  copySources(): string[] {
    return [...new Set(this.sets().flatMap((s) => (s.legacy ? [] : [s.source])))];
  }

  /**
   * Other URLs known to name the Source recorded as `source` (see {@link SetKey.source}): the Source
   * Description Index, its Source Descriptions, learnt from the documents of earlier runs, at most 1,000. A
   * Source is recorded in the sets under the URL it was first synchronized from, whichever entry point that
   * was; these let its other entry points find it. Empty for a copy made before they were kept.
   */
  sourceAliases(source: string): string[] {
    return this.#aliasMap()[source] ?? [];
  }

  /**
   * Adds URLs naming the Source recorded as `source` (see {@link sourceAliases}); returns whether any was new.
   * Nothing is written when none is new (nor in a read-only state).
   */
  addSourceAliases(source: string, urls: Iterable<string>): boolean {
    const map = this.#aliasMap();
    const known = new Set(map[source] ?? []);
    const before = known.size;
    for (const u of urls) {
      if (known.size >= MAX_ALIASES_PER_SOURCE) break;
      if (u !== source && u !== '') known.add(u);
    }
    if (known.size === before || this.#db.readonly) return false;
    map[source] = [...known];
    this.setMeta(SOURCE_ALIASES_KEY, JSON.stringify(map));
    return true;
  }

  #aliasMap(): Record<string, string[]> {
    const text = this.getMeta(SOURCE_ALIASES_KEY);
    if (text === undefined) return Object.create(null) as Record<string, string[]>;
    try {
      const parsed = JSON.parse(text) as unknown;
      const out = Object.create(null) as Record<string, string[]>;
      if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return out;
      for (const [k, v] of Object.entries(parsed))
        if (Array.isArray(v)) out[k] = v.filter((x): x is string => typeof x === 'string');
      return out;
    } catch {
      return Object.create(null) as Record<string, string[]>;
    }
  }

  /** The watermark migrated from schema version 1, not adopted yet by a set (see {@link selectSet}). */
  legacySet(): SetInfo | undefined {
    return this.sets().find((s) => s.legacy);
  }

  /**
   * The watermark of the selected set (see {@link selectSet}); without a selection, that of the copy's only
   * set. @throws ResourceSyncError `RS_STORE` without a selection in a copy of several sets.
   */
  getWatermark(): Watermark | undefined {
    const id = this.#setId ?? this.#onlySet(false);
    const row = this.#db
      .prepare('SELECT id, source, set_url, at, kind, source_url FROM sets WHERE id = ?')
      .get(id ?? -1) as SetRow | undefined;
    return row === undefined ? undefined : watermarkOf(row);
  }

  /** The id of the copy's only set (created, Source unknown, when `create` and there is none). */
  #onlySet(create: boolean): number | undefined {
    const rows = this.#db.prepare('SELECT id FROM sets LIMIT 2').all() as { id: number }[];
    if (rows.length > 1)
      throw new ResourceSyncError('RS_STORE', `${this.path} holds several sets: select one (selectSet) first`);
    if (rows[0] !== undefined || !create) return rows[0]?.id;
    return Number(this.#db.prepare("INSERT INTO sets (source, set_url) VALUES ('', '')").run().lastInsertRowid);
  }

  /**
   * Sets the watermark of the selected set durably (fsync of the write-ahead log before returning, or after
   * the enclosing transaction). Without a selection, that of the copy's only set (one whose Source is not
   * known, adopted by the next Destination run from the same origin, when the copy has none).
   */
  setWatermark(w: Watermark): void {
    const id = this.#setId ?? this.#onlySet(true);
    if (id === undefined || id < 0)
      throw new ResourceSyncError('RS_STORE', 'the selected set is not recorded (a read-only state)');
    const write = (): void => {
      this.#db
        .prepare('UPDATE sets SET at = ?, kind = ?, source_url = ?, updated = ? WHERE id = ?')
        .run(w.at, w.kind, w.sourceUrl, new Date().toISOString(), id);
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

  /** Removes the watermark of the selected set (its next run is a baseline). */
  clearWatermark(): void {
    const id = this.#setId ?? this.#onlySet(false) ?? -1;
    this.#run(
      () => this.#db.prepare('UPDATE sets SET at = NULL, kind = NULL, source_url = NULL WHERE id = ?').run(id),
      'cannot clear the watermark',
    );
  }

  /**
   * The file-name options the copy was made with (see paths.ts `NameOptions`), with the version of the
   * mapping: 1 for copies made before names were decoded (their files are renamed by `renameCopyFiles`),
   * undefined for a copy that recorded none yet.
   */
  nameOptions(): { version: number; foldCase: boolean; windowsNames: boolean } | undefined {
    const text = this.getMeta(NAMES_KEY);
    if (text === undefined) return undefined;
    try {
      const o = JSON.parse(text) as { version?: unknown; foldCase?: unknown; windowsNames?: unknown };
      return {
        version: typeof o.version === 'number' ? o.version : 1,
        foldCase: o.foldCase === true,
        windowsNames: o.windowsNames === true,
      };
    } catch {
      return { version: 1, foldCase: false, windowsNames: false };
    }
  }

  /** Records the file-name options of the copy (see {@link nameOptions}). */
  setNameOptions(o: { readonly version: number; readonly foldCase: boolean; readonly windowsNames: boolean }): void {
    this.setMeta(NAMES_KEY, JSON.stringify({ version: o.version, foldCase: o.foldCase, windowsNames: o.windowsNames }));
  }

  /** Adds files to move (see {@link PendingRename}); returns how many were added. */
  addRenames(renames: Iterable<{ readonly uri: string; readonly from: string; readonly to: string }>): number {
    const insert = this.#db.prepare('INSERT INTO renames (uri, from_path, to_path) VALUES (?, ?, ?)');
    let n = 0;
    this.transaction(() => {
      for (const r of renames) {
        insert.run(r.uri, r.from, r.to);
        n++;
      }
    });
    return n;
  }

  /** The files left to move, in the order they were added, a page at a time. */
  *renames(pageSize = 1000): IterableIterator<PendingRename> {
    let after = 0;
    const page = this.#db.prepare(
      'SELECT seq, uri, from_path, to_path FROM renames WHERE seq > ? ORDER BY seq LIMIT ?',
    );
    for (;;) {
      const rows = page.all(after, pageSize) as { seq: number; uri: string; from_path: string; to_path: string }[];
      for (const r of rows) yield { seq: r.seq, uri: r.uri, from: r.from_path, to: r.to_path };
      const last = rows[rows.length - 1];
      if (last === undefined || rows.length < pageSize) return;
      after = last.seq;
    }
  }

  /** Forgets a pending rename (`done`: the record's path becomes its `to`, in the same transaction). */
  finishRename(seq: number, done: boolean): void {
    this.transaction(() => {
      if (done)
        this.#db
          .prepare(
            'UPDATE resources SET path = (SELECT to_path FROM renames WHERE seq = ?) WHERE uri = (SELECT uri FROM renames WHERE seq = ?)',
          )
          .run(seq, seq);
      this.#db.prepare('DELETE FROM renames WHERE seq = ?').run(seq);
    });
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

  /** Sets a metadata value; `durable`: fsynced before returning (or after the enclosing transaction). */
  setMeta(key: string, value: string, options: { readonly durable?: boolean } = {}): void {
    if (options.durable !== true || this.#db.inTransaction) {
      this.#run(() => this.#setMeta.run(key, value), 'cannot write metadata');
      if (options.durable === true) this.#durablePending = true;
      return;
    }
    try {
      this.#db.pragma('synchronous = FULL');
      this.#setMeta.run(key, value);
    } catch (e) {
      throw storeError('cannot write metadata', e, this.path);
    } finally {
      this.#db.pragma('synchronous = NORMAL');
    }
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
