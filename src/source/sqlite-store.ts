/**
 * The embedded {@link SourceStore}: one SQLite file (better-sqlite3) in WAL mode. Every batch of changes is
 * one transaction with its inventory update, so a crash (even `kill -9`) leaves the batch whole or absent.
 *
 * better-sqlite3 is synchronous; the async methods here are the boundary a PostgreSQL backend would keep.
 *
 * @module
 */
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import type { ChangeType } from '../core/constants.js';
import { ResourceSyncError } from '../core/errors.js';
import type { Hashes } from '../core/hash.js';
import type {
  ChangeInput,
  ChangeListPart,
  ChangeQuery,
  ChangeRecord,
  RecordOptions,
  ResourceLink,
  ResourceRecord,
  SourceStore,
  StoreHead,
  StoreSnapshot,
} from './store.js';
import { checkLinks, nextChangeDatetime, type ShownRow, sameShown } from './store.js';

const SCHEMA = `
CREATE TABLE IF NOT EXISTS resources (
  uri TEXT PRIMARY KEY,
  set_name TEXT NOT NULL,
  length INTEGER NOT NULL,
  type TEXT,
  md5 TEXT,
  sha1 TEXT,
  sha256 TEXT,
  lastmod_ms INTEGER NOT NULL,
  file_id TEXT,
  links TEXT
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS resources_by_set ON resources(set_name, uri);
CREATE TABLE IF NOT EXISTS changes (
  seq INTEGER PRIMARY KEY,
  uri TEXT NOT NULL,
  change TEXT NOT NULL CHECK (change IN ('created', 'updated', 'deleted')),
  datetime_ms INTEGER NOT NULL,
  set_name TEXT NOT NULL,
  length INTEGER,
  type TEXT,
  md5 TEXT,
  sha1 TEXT,
  sha256 TEXT,
  lastmod_ms INTEGER,
  links TEXT
);
CREATE INDEX IF NOT EXISTS changes_by_set ON changes(set_name, seq);
CREATE TABLE IF NOT EXISTS change_lists (
  set_name TEXT NOT NULL,
  number INTEGER NOT NULL,
  from_ms INTEGER NOT NULL,
  until_ms INTEGER,
  count INTEGER NOT NULL DEFAULT 0,
  last_seq INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (set_name, number)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
`;

/**
 * Version of {@link SCHEMA} (SQLite's `user_version`). A database of an older version is brought up to it by
 * {@link MIGRATIONS} when opened read-write, in one transaction; one of a newer version is refused.
 * Version 1: the schema before migrations (user_version 0 with tables). Version 2: `links` (§14).
 */
export const SCHEMA_VERSION = 2;

/** The statements taking a database from version `n - 1` to `n`. */
const MIGRATIONS: Readonly<Record<number, string>> = {
  2: 'ALTER TABLE resources ADD COLUMN links TEXT; ALTER TABLE changes ADD COLUMN links TEXT;',
};

/** Creates the schema or migrates it to {@link SCHEMA_VERSION}. */
function migrate(db: Database.Database, path: string): void {
  const run = db.transaction(() => {
    let version = Number(db.pragma('user_version', { simple: true }));
    const hasTables =
      db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'resources'").get() !== undefined;
    if (version > SCHEMA_VERSION)
      throw new ResourceSyncError(
        'RS_STORE',
        `store ${path}: schema version ${version} is newer than this program's (${SCHEMA_VERSION}); use a newer resourcesync`,
      );
    if (!hasTables) {
      db.exec(SCHEMA);
      version = SCHEMA_VERSION;
    } else if (version === 0) version = 1;
    for (let v = version + 1; v <= SCHEMA_VERSION; v++) db.exec(MIGRATIONS[v]!);
    db.pragma(`user_version = ${SCHEMA_VERSION}`);
  });
  run.immediate();
}

/** Links as stored (JSON, fields in a fixed order; NULL for none). */
export function encodeLinks(links: readonly ResourceLink[] | undefined): string | null {
  if (links === undefined || links.length === 0) return null;
  return JSON.stringify(
    links.map((l) => {
      const o: { -readonly [K in keyof ResourceLink]: ResourceLink[K] } = { rel: l.rel, href: l.href };
      if (l.type !== undefined) o.type = l.type;
      if (l.length !== undefined) o.length = l.length;
      if (l.hashes !== undefined && Object.keys(l.hashes).length > 0) o.hashes = { ...l.hashes };
      if (l.modifiedMs !== undefined) o.modifiedMs = l.modifiedMs;
      if (l.pri !== undefined) o.pri = l.pri;
      if (l.encoding !== undefined) o.encoding = l.encoding;
      if (l.path !== undefined) o.path = l.path;
      return o;
    }),
  );
}

export function decodeLinks(text: string | null | undefined): ResourceLink[] | undefined {
  if (text === null || text === undefined) return undefined;
  return JSON.parse(text) as ResourceLink[];
}

interface ResourceRow extends ShownRow {
  file_id: string | null;
}
interface ChangeRow {
  seq: number;
  uri: string;
  change: string;
  datetime_ms: number;
  set_name: string;
  length: number | null;
  type: string | null;
  md5: string | null;
  sha1: string | null;
  sha256: string | null;
  lastmod_ms: number | null;
  links: string | null;
}
interface PartRow {
  set_name: string;
  number: number;
  from_ms: number;
  until_ms: number | null;
  count: number;
  last_seq: number;
}

function hashesOf(row: { md5: string | null; sha1: string | null; sha256: string | null }): Hashes {
  const h: Hashes = {};
  if (row.md5 !== null) h.md5 = row.md5;
  if (row.sha1 !== null) h['sha-1'] = row.sha1;
  if (row.sha256 !== null) h['sha-256'] = row.sha256;
  return h;
}

/** A resources row as an array (no object per row from the driver). */
type RawResourceRow = [
  uri: string,
  setName: string,
  length: number,
  type: string | null,
  md5: string | null,
  sha1: string | null,
  sha256: string | null,
  lastmodMs: number,
  fileId: string | null,
  links: string | null,
];

function fromRawResource(row: RawResourceRow): ResourceRecord {
  const [uri, setName, length, type, md5, sha1, sha256, lastmodMs, fileId, links] = row;
  const hashes: Hashes = {};
  if (md5 !== null) hashes.md5 = md5;
  if (sha1 !== null) hashes['sha-1'] = sha1;
  if (sha256 !== null) hashes['sha-256'] = sha256;
  return resourceRecord(uri, setName, length, hashes, lastmodMs, type, fileId, links);
}

/**
 * The `resources` row {@link SqliteStore.recordChanges} writes for a created or updated resource (`nowMs`: the
 * batch's datetime, the last modification when the change gives none).
 */
function upsertRow(c: ChangeInput, nowMs: number): ResourceRow {
  const h = c.hashes ?? {};
  return {
    uri: c.uri,
    set_name: c.setName,
    length: c.length ?? 0,
    type: c.type ?? null,
    md5: h.md5 ?? null,
    sha1: h['sha-1'] ?? null,
    sha256: h['sha-256'] ?? null,
    lastmod_ms: c.lastmodMs ?? nowMs,
    file_id: c.fileId ?? null,
    links: encodeLinks(c.links),
  };
}

/** A lone surrogate (with the `u` flag, a paired one is one code point, not matched). */
const LONE_SURROGATE = /\p{Cs}/u;

/** True when SQLite stores the string as it is (a lone surrogate would come back as U+FFFD). */
function storedAsIs(text: string | null): boolean {
  return text === null || !LONE_SURROGATE.test(text);
}

function toResource(row: ResourceRow): ResourceRecord {
  return resourceRecord(
    row.uri,
    row.set_name,
    row.length,
    hashesOf(row),
    row.lastmod_ms,
    row.type,
    row.file_id,
    row.links,
  );
}

/** A record from column values (NULL columns left out). */
function resourceRecord(
  uri: string,
  setName: string,
  length: number,
  hashes: Hashes,
  lastmodMs: number,
  type: string | null,
  fileId: string | null,
  links: string | null | undefined,
): ResourceRecord {
  const r: { -readonly [K in keyof ResourceRecord]: ResourceRecord[K] } = { uri, setName, length, hashes, lastmodMs };
  if (type !== null) r.type = type;
  if (fileId !== null) r.fileId = fileId;
  const l = decodeLinks(links);
  if (l !== undefined) r.links = l;
  return r;
}

function toChange(row: ChangeRow): ChangeRecord {
  const c: {
    seq: number;
    uri: string;
    change: ChangeType;
    datetimeMs: number;
    setName: string;
    hashes: Hashes;
    length?: number;
    type?: string;
    lastmodMs?: number;
    links?: ResourceLink[];
  } = {
    seq: row.seq,
    uri: row.uri,
    change: row.change as ChangeType,
    datetimeMs: row.datetime_ms,
    setName: row.set_name,
    hashes: hashesOf(row),
  };
  if (row.length !== null) c.length = row.length;
  if (row.type !== null) c.type = row.type;
  if (row.lastmod_ms !== null) c.lastmodMs = row.lastmod_ms;
  const links = decodeLinks(row.links);
  if (links !== undefined) c.links = links;
  return c;
}

function toPart(row: PartRow): ChangeListPart {
  const p: { -readonly [K in keyof ChangeListPart]: ChangeListPart[K] } = {
    setName: row.set_name,
    number: row.number,
    fromMs: row.from_ms,
    count: row.count,
    lastSeq: row.last_seq,
  };
  if (row.until_ms !== null) p.untilMs = row.until_ms;
  return p;
}

function storeError(path: string, action: string, e: unknown): ResourceSyncError {
  const msg = e instanceof Error ? e.message : String(e);
  return new ResourceSyncError('RS_STORE', `store ${path}: cannot ${action}: ${msg}`, { cause: e });
}

/** Options of {@link openSqliteStore}. */
export interface SqliteStoreOptions {
  /** Path of the database file (created with its directory when missing). */
  readonly path: string;
  /** Open read-only (no schema creation, no writes). */
  readonly readonly?: boolean;
}

/**
 * Opens (creating when missing) a SQLite store.
 *
 * @throws ResourceSyncError `RS_STORE` naming the file when it cannot be opened or written (read-only disk,
 *   not a database).
 * @example
 * ```ts
 * const store = await openSqliteStore({ path: 'state/source.db' });
 * await store.recordChanges([{ uri: 'a.txt', change: 'created', setName: 'default', length: 3, lastmodMs: Date.now() }]);
 * ```
 */
export async function openSqliteStore(options: SqliteStoreOptions): Promise<SourceStore> {
  const path = options.path;
  let db: Database.Database;
  try {
    if (options.readonly !== true) mkdirSync(dirname(path), { recursive: true });
    db = new Database(path, { readonly: options.readonly === true, fileMustExist: options.readonly === true });
  } catch (e) {
    throw storeError(path, 'open the database', e);
  }
  try {
    if (options.readonly !== true) {
      db.pragma('journal_mode = WAL');
      // NORMAL in WAL mode: a process crash never loses a committed transaction; power loss may lose the last ones.
      db.pragma('synchronous = NORMAL');
      migrate(db, path);
      db.prepare("INSERT OR IGNORE INTO meta(key, value) VALUES ('created_ms', ?)").run(String(Date.now()));
    }
    db.pragma('busy_timeout = 5000');
    if (options.readonly === true) {
      const version = Number(db.pragma('user_version', { simple: true }));
      if (version !== SCHEMA_VERSION)
        throw new ResourceSyncError(
          'RS_STORE',
          `store ${path}: schema version ${version}, this program reads ${SCHEMA_VERSION} (open it read-write once to migrate)`,
        );
    }
  } catch (e) {
    db.close();
    if (e instanceof ResourceSyncError) throw e;
    throw storeError(path, 'initialise the database (is the directory writable?)', e);
  }
  return new SqliteStore(db, path);
}

class SqliteStore implements SourceStore {
  readonly location: string;
  readonly #db: Database.Database;
  /** Lowest datetime the next change may get (raised by snapshots so later changes come after their `at`). */
  #floorMs = 0;
  #closed = false;
  readonly #stmts;

  constructor(db: Database.Database, path: string) {
    this.#db = db;
    this.location = path;
    this.#stmts = {
      head: db.prepare<[], { seq: number | null; dt: number | null }>(
        'SELECT seq, datetime_ms AS dt FROM changes ORDER BY seq DESC LIMIT 1',
      ),
      getResource: db.prepare<[string], ResourceRow>('SELECT * FROM resources WHERE uri = ?'),
      countAll: db.prepare<[], { n: number }>('SELECT count(*) AS n FROM resources'),
      countSet: db.prepare<[string], { n: number }>('SELECT count(*) AS n FROM resources WHERE set_name = ?'),
      pageAll: db.prepare<[string, number], ResourceRow>('SELECT * FROM resources WHERE uri > ? ORDER BY uri LIMIT ?'),
      pageFrom: db
        .prepare<[string, number], RawResourceRow>(
          'SELECT uri, set_name, length, type, md5, sha1, sha256, lastmod_ms, file_id, links FROM resources WHERE uri >= ? ORDER BY uri LIMIT ?',
        )
        .raw(),
      pageSet: db.prepare<[string, string, number], ResourceRow>(
        'SELECT * FROM resources WHERE set_name = ? AND uri > ? ORDER BY uri LIMIT ?',
      ),
      upsert: db.prepare(
        `INSERT INTO resources(uri, set_name, length, type, md5, sha1, sha256, lastmod_ms, file_id, links)
         VALUES (@uri, @set_name, @length, @type, @md5, @sha1, @sha256, @lastmod_ms, @file_id, @links)
         ON CONFLICT(uri) DO UPDATE SET set_name = excluded.set_name, length = excluded.length, type = excluded.type,
           md5 = excluded.md5, sha1 = excluded.sha1, sha256 = excluded.sha256, lastmod_ms = excluded.lastmod_ms,
           file_id = excluded.file_id, links = excluded.links`,
      ),
      remove: db.prepare<[string]>('DELETE FROM resources WHERE uri = ?'),
      insertChange: db.prepare(
        `INSERT INTO changes(uri, change, datetime_ms, set_name, length, type, md5, sha1, sha256, lastmod_ms, links)
         VALUES (@uri, @change, @datetime_ms, @set_name, @length, @type, @md5, @sha1, @sha256, @lastmod_ms, @links)`,
      ),
      openPart: db.prepare<[string], PartRow>(
        'SELECT * FROM change_lists WHERE set_name = ? ORDER BY number DESC LIMIT 1',
      ),
      insertPart: db.prepare<[string, number, number]>(
        'INSERT INTO change_lists(set_name, number, from_ms) VALUES (?, ?, ?)',
      ),
      closePart: db.prepare<[number, string, number]>(
        'UPDATE change_lists SET until_ms = ? WHERE set_name = ? AND number = ?',
      ),
      bumpPart: db.prepare<[number, number, string, number]>(
        'UPDATE change_lists SET count = count + ?, last_seq = ? WHERE set_name = ? AND number = ?',
      ),
      parts: db.prepare<[string], PartRow>('SELECT * FROM change_lists WHERE set_name = ? ORDER BY number'),
      getMeta: db.prepare<[string], { value: string }>('SELECT value FROM meta WHERE key = ?'),
      setMeta: db.prepare<[string, string]>(
        'INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value',
      ),
      deleteMeta: db.prepare<[string]>('DELETE FROM meta WHERE key = ?'),
      setNames: db.prepare<[], { set_name: string }>(
        'SELECT set_name FROM change_lists UNION SELECT DISTINCT set_name FROM resources ORDER BY 1',
      ),
    };
  }

  #check(): void {
    if (this.#closed) throw new ResourceSyncError('RS_STORE', `store ${this.location} is closed`);
  }

  #head(): StoreHead {
    const row = this.#stmts.head.get();
    const version = Number(this.#stmts.getMeta.get('version')?.value ?? '0');
    if (row?.seq == null) return { seq: 0, version };
    return row.dt === null ? { seq: row.seq, version } : { seq: row.seq, version, datetimeMs: row.dt };
  }

  async head(): Promise<StoreHead> {
    this.#check();
    return this.#head();
  }

  async getResource(uri: string): Promise<ResourceRecord | undefined> {
    this.#check();
    const row = this.#stmts.getResource.get(uri);
    return row === undefined ? undefined : toResource(row);
  }

  recordOf(change: ChangeInput): ResourceRecord | undefined {
    if (change.change === 'deleted' || change.lastmodMs === undefined) return undefined;
    const row = upsertRow(change, change.lastmodMs);
    // Values that come back from SQLite exactly as written (integers within 2^53, well-formed strings).
    if (!Number.isSafeInteger(row.length) || !Number.isSafeInteger(row.lastmod_ms)) return undefined;
    // -0 comes back as 0.
    if (row.length === 0) row.length = 0;
    if (row.lastmod_ms === 0) row.lastmod_ms = 0;
    for (const t of [row.uri, row.set_name, row.type, row.md5, row.sha1, row.sha256, row.file_id])
      if (!storedAsIs(t)) return undefined;
    return toResource(row);
  }

  resourcesFromSync(uri: string, limit: number): ResourceRecord[] {
    this.#check();
    return this.#stmts.pageFrom.all(uri, Math.max(1, Math.floor(limit))).map(fromRawResource);
  }

  async setVersion(setName: string): Promise<number> {
    this.#check();
    return Number(this.#stmts.getMeta.get(`version:${setName}`)?.value ?? '0');
  }

  async countResources(setName?: string): Promise<number> {
    this.#check();
    return (setName === undefined ? this.#stmts.countAll.get() : this.#stmts.countSet.get(setName))?.n ?? 0;
  }

  async *resources(
    options: { readonly setName?: string; readonly after?: string; readonly pageSize?: number } = {},
  ): AsyncGenerator<ResourceRecord, void, undefined> {
    const pageSize = options.pageSize ?? 1000;
    let after = options.after ?? '';
    for (;;) {
      this.#check();
      const rows =
        options.setName === undefined
          ? this.#stmts.pageAll.all(after, pageSize)
          : this.#stmts.pageSet.all(options.setName, after, pageSize);
      for (const row of rows) yield toResource(row);
      if (rows.length < pageSize) return;
      after = rows[rows.length - 1]!.uri;
    }
  }

  async recordChanges(changes: readonly ChangeInput[], options: RecordOptions = {}): Promise<ChangeRecord[]> {
    this.#check();
    if (changes.length === 0) return [];
    for (const c of changes) if (c.change !== 'deleted') checkLinks(c.uri, c.links);
    const log = options.log ?? true;
    const maxEntries = options.rotation?.maxEntries ?? 50_000;
    const periodMs = options.rotation?.periodMs;
    const s = this.#stmts;
    const run = this.#db.transaction((): ChangeRecord[] => {
      const head = this.#head();
      const clock = Date.now();
      // Each logged change gets its own datetime (distinct and increasing as far as the clock allows).
      let last = head.datetimeMs;
      const first = nextChangeDatetime(last, clock, this.#floorMs);
      const out: ChangeRecord[] = [];
      const openParts = new Map<string, PartRow>();
      const partFor = (setName: string, dt: number): PartRow => {
        let part = openParts.get(setName) ?? s.openPart.get(setName);
        if (part === undefined) {
          s.insertPart.run(setName, 1, dt);
          part = { set_name: setName, number: 1, from_ms: dt, until_ms: null, count: 0, last_seq: 0 };
        }
        openParts.set(setName, part);
        return part;
      };
      // Sets whose documents this write moves (their version is bumped below).
      const moved = new Set<string>();
      for (const c of changes) {
        const h = c.hashes ?? {};
        const now = log ? nextChangeDatetime(last, clock, this.#floorMs) : first;
        if (c.change === 'deleted') {
          s.remove.run(c.uri);
          moved.add(c.setName);
        } else {
          const row = upsertRow(c, now);
          // An inventory-only refresh of a file's identity (its racy mark cleared after a re-hash gave the same
          // bytes) changes nothing a document shows: the set's version stays, so its documents stay (same `at`,
          // same bytes, same ETag) instead of being regenerated after every rescan that re-hashed a file.
          // A set a resource leaves moves too (as in the PostgreSQL store). A logged write moves its set anyway.
          if (log) moved.add(c.setName);
          else {
            const stored = s.getResource.get(c.uri);
            if (stored !== undefined && stored.set_name !== c.setName) moved.add(stored.set_name);
            if (!sameShown(stored, row)) moved.add(c.setName);
          }
          s.upsert.run(row);
        }
        let part = partFor(c.setName, now);
        if (!log) continue;
        last = now;
        if (part.count >= maxEntries || (periodMs !== undefined && now >= part.from_ms + periodMs)) {
          s.closePart.run(now, part.set_name, part.number);
          s.insertPart.run(part.set_name, part.number + 1, now);
          part = { ...part, number: part.number + 1, from_ms: now, until_ms: null, count: 0, last_seq: 0 };
          openParts.set(c.setName, part);
        }
        const deleted = c.change === 'deleted';
        const links = deleted ? null : encodeLinks(c.links);
        const info = s.insertChange.run({
          uri: c.uri,
          change: c.change,
          datetime_ms: now,
          set_name: c.setName,
          length: deleted ? null : (c.length ?? null),
          type: deleted ? null : (c.type ?? null),
          md5: deleted ? null : (h.md5 ?? null),
          sha1: deleted ? null : (h['sha-1'] ?? null),
          sha256: deleted ? null : (h['sha-256'] ?? null),
          lastmod_ms: deleted ? null : (c.lastmodMs ?? now),
          links,
        });
        const seq = Number(info.lastInsertRowid);
        s.bumpPart.run(1, seq, part.set_name, part.number);
        part.count += 1;
        part.last_seq = seq;
        const rec: {
          seq: number;
          uri: string;
          change: ChangeType;
          datetimeMs: number;
          setName: string;
          hashes: Hashes;
          length?: number;
          type?: string;
          lastmodMs?: number;
          links?: ResourceLink[];
        } = { seq, uri: c.uri, change: c.change, datetimeMs: now, setName: c.setName, hashes: {} };
        if (!deleted) {
          rec.hashes = { ...h };
          if (c.length !== undefined) rec.length = c.length;
          if (c.type !== undefined) rec.type = c.type;
          rec.lastmodMs = c.lastmodMs ?? now;
          const decoded = decodeLinks(links);
          if (decoded !== undefined) rec.links = decoded;
        }
        out.push(rec);
      }
      s.setMeta.run('version', String(head.version + 1));
      for (const name of moved) {
        const v = Number(s.getMeta.get(`version:${name}`)?.value ?? '0');
        s.setMeta.run(`version:${name}`, String(v + 1));
      }
      return out;
    });
    try {
      return run.immediate();
    } catch (e) {
      throw storeError(this.location, 'record changes', e);
    }
  }

  async setNames(): Promise<string[]> {
    this.#check();
    return this.#stmts.setNames.all().map((r) => r.set_name);
  }

  async changeListParts(setName: string): Promise<ChangeListPart[]> {
    this.#check();
    const rows = this.#stmts.parts.all(setName);
    if (rows.length > 0) return rows.map(toPart);
    const created = Number(this.#stmts.getMeta.get('created_ms')?.value ?? Date.now());
    return [{ setName, number: 1, fromMs: created, count: 0, lastSeq: 0 }];
  }

  async snapshot(): Promise<StoreSnapshot> {
    this.#check();
    let db: Database.Database;
    try {
      db = new Database(this.location, { readonly: true, fileMustExist: true });
      db.pragma('busy_timeout = 5000');
      db.exec('BEGIN');
    } catch (e) {
      throw storeError(this.location, 'open a read snapshot', e);
    }
    const headRow = db
      .prepare<[], { seq: number | null; dt: number | null }>(
        'SELECT seq, datetime_ms AS dt FROM changes ORDER BY seq DESC LIMIT 1',
      )
      .get();
    const version = Number(
      db.prepare<[], { value: string }>("SELECT value FROM meta WHERE key = 'version'").get()?.value ?? '0',
    );
    const created = Number(
      db.prepare<[], { value: string }>("SELECT value FROM meta WHERE key = 'created_ms'").get()?.value ?? '0',
    );
    const head: StoreHead =
      headRow?.seq == null
        ? { seq: 0, version }
        : headRow.dt === null
          ? { seq: headRow.seq, version }
          : { seq: headRow.seq, version, datetimeMs: headRow.dt };
    const atMs = Math.max(Date.now(), head.datetimeMs ?? 0, this.#floorMs);
    // Changes recorded after this snapshot get a datetime after its `at` (§10.1 `at`, Appendix A).
    this.#floorMs = Math.max(this.#floorMs, atMs + 1);
    return new SqliteSnapshot(db, head, atMs, created);
  }

  async getMeta(key: string): Promise<string | undefined> {
    this.#check();
    return this.#stmts.getMeta.get(key)?.value;
  }

  async setMeta(key: string, value: string | undefined): Promise<void> {
    this.#check();
    try {
      if (value === undefined) this.#stmts.deleteMeta.run(key);
      else this.#stmts.setMeta.run(key, value);
    } catch (e) {
      throw storeError(this.location, 'write metadata', e);
    }
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#db.close();
  }
}

class SqliteSnapshot implements StoreSnapshot {
  readonly head: StoreHead;
  readonly atMs: number;
  readonly #db: Database.Database;
  readonly #createdMs: number;
  #closed = false;

  constructor(db: Database.Database, head: StoreHead, atMs: number, createdMs: number) {
    this.#db = db;
    this.head = head;
    this.atMs = atMs;
    this.#createdMs = createdMs;
  }

  async setVersion(setName: string): Promise<number> {
    const row = this.#db
      .prepare<[string], { value: string }>('SELECT value FROM meta WHERE key = ?')
      .get(`version:${setName}`);
    return Number(row?.value ?? '0');
  }

  async countResources(setName?: string): Promise<number> {
    const row =
      setName === undefined
        ? this.#db.prepare<[], { n: number }>('SELECT count(*) AS n FROM resources').get()
        : this.#db
            .prepare<[string], { n: number }>('SELECT count(*) AS n FROM resources WHERE set_name = ?')
            .get(setName);
    return row?.n ?? 0;
  }

  /** Memory: one row at a time (a SQLite cursor). One iterator of a snapshot at a time. */
  async *resources(setName?: string): AsyncGenerator<ResourceRecord, void, undefined> {
    const it =
      setName === undefined
        ? this.#db.prepare<[], ResourceRow>('SELECT * FROM resources ORDER BY uri').iterate()
        : this.#db
            .prepare<[string], ResourceRow>('SELECT * FROM resources WHERE set_name = ? ORDER BY uri')
            .iterate(setName);
    try {
      for (const row of it) yield toResource(row);
    } finally {
      it.return?.();
    }
  }

  /**
   * Memory: one row at a time. Only the columns a Resource List needs, as raw arrays (no row objects), so a
   * 50,000-entry part costs ~1 µs a row here. `setName` is the one asked for (or `''` for all sets) and
   * `fileId` is left out.
   */
  *resourcesSync(setName?: string): Generator<ResourceRecord, void, undefined> {
    const cols = 'uri, length, type, md5, sha1, sha256, lastmod_ms, links';
    type Raw = [string, number, string | null, string | null, string | null, string | null, number, string | null];
    // When the set is the only one, the table is read in its own (primary key) order: no index lookup a row.
    const alone =
      setName !== undefined &&
      this.#db
        .prepare<[string, string], { other: number }>(
          'SELECT EXISTS(SELECT 1 FROM resources WHERE set_name < ?) OR EXISTS(SELECT 1 FROM resources WHERE set_name > ?) AS other',
        )
        .get(setName, setName)?.other === 0;
    const it = (
      setName === undefined || alone
        ? this.#db.prepare<[], Raw>(`SELECT ${cols} FROM resources ORDER BY uri`).raw().iterate()
        : this.#db
            .prepare<[string], Raw>(`SELECT ${cols} FROM resources WHERE set_name = ? ORDER BY uri`)
            .raw()
            .iterate(setName)
    ) as IterableIterator<Raw>;
    const set = setName ?? '';
    try {
      for (const row of it) {
        const hashes: Hashes = {};
        if (row[3] !== null) hashes.md5 = row[3];
        if (row[4] !== null) hashes['sha-1'] = row[4];
        if (row[5] !== null) hashes['sha-256'] = row[5];
        const r: {
          uri: string;
          setName: string;
          length: number;
          hashes: Hashes;
          lastmodMs: number;
          type?: string;
          links?: ResourceLink[];
        } = {
          uri: row[0],
          setName: set,
          length: row[1],
          hashes,
          lastmodMs: row[6],
        };
        if (row[2] !== null) r.type = row[2];
        if (row[7] !== null) r.links = decodeLinks(row[7])!;
        yield r;
      }
    } finally {
      it.return?.();
    }
  }

  /** Memory: one row at a time. */
  async *changes(query: ChangeQuery = {}): AsyncGenerator<ChangeRecord, void, undefined> {
    const after = query.afterSeq ?? 0;
    const through = query.throughSeq ?? Number.MAX_SAFE_INTEGER;
    const it =
      query.setName === undefined
        ? this.#db
            .prepare<[number, number], ChangeRow>('SELECT * FROM changes WHERE seq > ? AND seq <= ? ORDER BY seq')
            .iterate(after, through)
        : this.#db
            .prepare<[string, number, number], ChangeRow>(
              'SELECT * FROM changes WHERE set_name = ? AND seq > ? AND seq <= ? ORDER BY seq',
            )
            .iterate(query.setName, after, through);
    try {
      for (const row of it) yield toChange(row);
    } finally {
      it.return?.();
    }
  }

  async changeListParts(setName: string): Promise<ChangeListPart[]> {
    const rows = this.#db
      .prepare<[string], PartRow>('SELECT * FROM change_lists WHERE set_name = ? ORDER BY number')
      .all(setName);
    if (rows.length > 0) return rows.map(toPart);
    return [{ setName, number: 1, fromMs: this.#createdMs, count: 0, lastSeq: 0 }];
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    try {
      this.#db.exec('COMMIT');
    } finally {
      this.#db.close();
    }
  }
}
