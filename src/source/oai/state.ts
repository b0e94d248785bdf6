/**
 * The OAI-PMH bridge's own state, an SQLite file next to the Source's store (`oai.db`):
 *
 * - `meta`: which provider (base URL) and OAI set the state belongs to; another one is refused;
 * - `lists`: per metadata format, the watermark (the `from` of the next incremental harvest, in the
 *   provider's granularity) and the list in progress (its `from`, the `responseDate` of its first page, and
 *   the resumption token of the next page), written after every page, so a restarted harvest goes on from
 *   the last page done; and the same for a reconcile (full `ListIdentifiers`) in progress;
 * - `seen`: the identifiers a reconcile listed (so its memory does not grow with the repository);
 * - `content`: the bytes served for each resource (the metadata records), by sha-256.
 *
 * Written with `synchronous = FULL`: a record's bytes are on disk before the Source's store records the change
 * that points at them. Every write is one transaction.
 *
 * @module
 */
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { ResourceSyncError } from '../../core/errors.js';

/** The harvest state of one metadata format. */
export interface ListState {
  readonly metadataPrefix: string;
  /** `from` of the next incremental harvest (provider granularity); undefined: never completed (full harvest). */
  readonly watermark?: string;
  /** The list in progress: the `from` it was started with ('' for a full list). */
  readonly listFrom?: string;
  /** The list in progress: UTC ms of the `responseDate` of its first page. */
  readonly listStartedMs?: number;
  /** The list in progress: the resumption token of its next page. */
  readonly token?: string;
  /** UTC ms (our clock) when a list of this format last completed. */
  readonly completedMs?: number;
  /** UTC ms (our clock) when the last reconcile of this format completed. */
  readonly reconciledMs?: number;
  /** Reconcile in progress: 'listing' (token below) or 'checking'. */
  readonly reconcilePhase?: 'listing' | 'checking';
  readonly reconcileToken?: string;
}

interface ListRow {
  prefix: string;
  watermark: string | null;
  list_from: string | null;
  list_started_ms: number | null;
  token: string | null;
  completed_ms: number | null;
  reconciled_ms: number | null;
  reconcile_phase: string | null;
  reconcile_token: string | null;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS lists(
  prefix TEXT PRIMARY KEY,
  watermark TEXT,
  list_from TEXT,
  list_started_ms INTEGER,
  token TEXT,
  completed_ms INTEGER,
  reconciled_ms INTEGER,
  reconcile_phase TEXT,
  reconcile_token TEXT
);
CREATE TABLE IF NOT EXISTS seen(
  prefix TEXT NOT NULL,
  identifier TEXT NOT NULL,
  datestamp_ms INTEGER NOT NULL,
  deleted INTEGER NOT NULL,
  PRIMARY KEY(prefix, identifier)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS content(sha256 TEXT PRIMARY KEY, bytes BLOB NOT NULL);
`;

function stateError(path: string, what: string, e: unknown): ResourceSyncError {
  return new ResourceSyncError('RS_STORE', `cannot ${what} (${(e as Error).message})`, { url: path, cause: e });
}

/** A row of the `seen` table. */
export interface SeenRow {
  readonly identifier: string;
  readonly datestampMs: number;
  readonly deleted: boolean;
}

/**
 * The bridge's state file. Synchronous underneath (better-sqlite3); every method is one transaction.
 * Memory: a prepared statement each; the iterators hold one row at a time.
 */
export class OaiState {
  readonly path: string;
  readonly #db: Database.Database;
  readonly #s;

  private constructor(db: Database.Database, path: string) {
    this.#db = db;
    this.path = path;
    this.#s = {
      getMeta: db.prepare<[string], { value: string }>('SELECT value FROM meta WHERE key = ?'),
      setMeta: db.prepare<[string, string]>(
        'INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value',
      ),
      getList: db.prepare<[string], ListRow>('SELECT * FROM lists WHERE prefix = ?'),
      allLists: db.prepare<[], ListRow>('SELECT * FROM lists ORDER BY prefix'),
      putList: db.prepare(
        `INSERT INTO lists(prefix, watermark, list_from, list_started_ms, token, completed_ms, reconciled_ms,
           reconcile_phase, reconcile_token)
         VALUES (@prefix, @watermark, @list_from, @list_started_ms, @token, @completed_ms, @reconciled_ms,
           @reconcile_phase, @reconcile_token)
         ON CONFLICT(prefix) DO UPDATE SET watermark = excluded.watermark, list_from = excluded.list_from,
           list_started_ms = excluded.list_started_ms, token = excluded.token, completed_ms = excluded.completed_ms,
           reconciled_ms = excluded.reconciled_ms, reconcile_phase = excluded.reconcile_phase,
           reconcile_token = excluded.reconcile_token`,
      ),
      dropList: db.prepare<[string]>('DELETE FROM lists WHERE prefix = ?'),
      clearSeen: db.prepare<[string]>('DELETE FROM seen WHERE prefix = ?'),
      putSeen: db.prepare<[string, string, number, number]>(
        `INSERT INTO seen(prefix, identifier, datestamp_ms, deleted) VALUES (?, ?, ?, ?)
         ON CONFLICT(prefix, identifier) DO UPDATE SET datestamp_ms = excluded.datestamp_ms, deleted = excluded.deleted`,
      ),
      getSeen: db.prepare<[string, string], { datestamp_ms: number; deleted: number }>(
        'SELECT datestamp_ms, deleted FROM seen WHERE prefix = ? AND identifier = ?',
      ),
      pageSeen: db.prepare<[string, string, number], { identifier: string; datestamp_ms: number; deleted: number }>(
        'SELECT identifier, datestamp_ms, deleted FROM seen WHERE prefix = ? AND identifier > ? ORDER BY identifier LIMIT ?',
      ),
      putContent: db.prepare<[string, Buffer]>('INSERT OR IGNORE INTO content(sha256, bytes) VALUES (?, ?)'),
      getContent: db.prepare<[string], { bytes: Buffer }>('SELECT bytes FROM content WHERE sha256 = ?'),
      hasContent: db.prepare<[string], { one: number }>('SELECT 1 AS one FROM content WHERE sha256 = ?'),
    };
  }

  /**
   * Opens (creating when missing) the state file.
   * @throws ResourceSyncError `RS_STORE` naming the file.
   */
  static open(path: string): OaiState {
    let db: Database.Database;
    try {
      mkdirSync(dirname(path), { recursive: true });
      db = new Database(path);
    } catch (e) {
      throw stateError(path, 'open the OAI-PMH harvest state', e);
    }
    try {
      db.pragma('journal_mode = WAL');
      db.pragma('synchronous = FULL');
      db.pragma('busy_timeout = 5000');
      db.exec(SCHEMA);
    } catch (e) {
      db.close();
      throw stateError(path, 'initialise the OAI-PMH harvest state (is the directory writable?)', e);
    }
    return new OaiState(db, path);
  }

  #run<T>(what: string, fn: () => T): T {
    try {
      return fn();
    } catch (e) {
      if (e instanceof ResourceSyncError) throw e;
      throw stateError(this.path, what, e);
    }
  }

  getMeta(key: string): string | undefined {
    return this.#run('read the harvest state', () => this.#s.getMeta.get(key)?.value);
  }

  setMeta(key: string, value: string): void {
    this.#run('write the harvest state', () => this.#s.setMeta.run(key, value));
  }

  getList(prefix: string): ListState {
    const row = this.#run('read the harvest state', () => this.#s.getList.get(prefix));
    return row === undefined ? { metadataPrefix: prefix } : fromRow(row);
  }

  lists(): ListState[] {
    return this.#run('read the harvest state', () => this.#s.allLists.all().map(fromRow));
  }

  /** Replaces the state of one format (one transaction). */
  putList(state: ListState): void {
    this.#run('write the harvest state', () =>
      this.#s.putList.run({
        prefix: state.metadataPrefix,
        watermark: state.watermark ?? null,
        list_from: state.listFrom ?? null,
        list_started_ms: state.listStartedMs ?? null,
        token: state.token ?? null,
        completed_ms: state.completedMs ?? null,
        reconciled_ms: state.reconciledMs ?? null,
        reconcile_phase: state.reconcilePhase ?? null,
        reconcile_token: state.reconcileToken ?? null,
      }),
    );
  }

  /** Forgets a format (and what a reconcile of it listed). */
  dropList(prefix: string): void {
    this.#run('write the harvest state', () =>
      this.#db.transaction(() => {
        this.#s.dropList.run(prefix);
        this.#s.clearSeen.run(prefix);
      })(),
    );
  }

  clearSeen(prefix: string): void {
    this.#run('write the harvest state', () => this.#s.clearSeen.run(prefix));
  }

  /** Adds identifiers a reconcile listed, and the format's state after the page, in one transaction. */
  addSeen(prefix: string, rows: readonly SeenRow[], after: ListState): void {
    this.#run('write the harvest state', () =>
      this.#db.transaction(() => {
        for (const r of rows) this.#s.putSeen.run(prefix, r.identifier, r.datestampMs, r.deleted ? 1 : 0);
        this.putList(after);
      })(),
    );
  }

  getSeen(prefix: string, identifier: string): SeenRow | undefined {
    const row = this.#run('read the harvest state', () => this.#s.getSeen.get(prefix, identifier));
    return row === undefined ? undefined : { identifier, datestampMs: row.datestamp_ms, deleted: row.deleted !== 0 };
  }

  /** The listed identifiers of a format in binary order, a page at a time (after `after`). */
  seenPage(prefix: string, after: string, limit: number): SeenRow[] {
    return this.#run('read the harvest state', () =>
      this.#s.pageSeen
        .all(prefix, after, limit)
        .map((r) => ({ identifier: r.identifier, datestampMs: r.datestamp_ms, deleted: r.deleted !== 0 })),
    );
  }

  /** Keeps the bytes of resources (one transaction; bytes already kept are not written again). */
  putContent(items: readonly { readonly sha256: string; readonly bytes: Buffer }[]): void {
    if (items.length === 0) return;
    this.#run('store record content', () =>
      this.#db.transaction(() => {
        for (const i of items) this.#s.putContent.run(i.sha256, i.bytes);
      })(),
    );
  }

  getContent(sha256: string): Buffer | undefined {
    return this.#run('read record content', () => this.#s.getContent.get(sha256)?.bytes);
  }

  hasContent(sha256: string): boolean {
    return this.#run('read record content', () => this.#s.hasContent.get(sha256) !== undefined);
  }

  /**
   * Deletes the content no longer referenced: `keep` yields every sha-256 still in use (in any order).
   * Memory: a temporary table in the database, not in the process.
   */
  async collectContent(keep: AsyncIterable<string>): Promise<number> {
    this.#run('collect record content', () => {
      this.#db.exec('CREATE TEMP TABLE IF NOT EXISTS keep(sha256 TEXT PRIMARY KEY) WITHOUT ROWID; DELETE FROM keep;');
    });
    const insert = this.#db.prepare<[string]>('INSERT OR IGNORE INTO keep(sha256) VALUES (?)');
    let batch: string[] = [];
    const flush = (): void => {
      const b = batch;
      batch = [];
      this.#run('collect record content', () =>
        this.#db.transaction(() => {
          for (const s of b) insert.run(s);
        })(),
      );
    };
    for await (const sha of keep) {
      batch.push(sha);
      if (batch.length >= 1000) flush();
    }
    flush();
    return this.#run('collect record content', () => {
      const r = this.#db.prepare('DELETE FROM content WHERE sha256 NOT IN (SELECT sha256 FROM keep)').run();
      this.#db.exec('DELETE FROM keep');
      return r.changes;
    });
  }

  close(): void {
    if (this.#db.open) this.#db.close();
  }
}

function fromRow(row: ListRow): ListState {
  const s: { -readonly [K in keyof ListState]: ListState[K] } = { metadataPrefix: row.prefix };
  if (row.watermark !== null) s.watermark = row.watermark;
  if (row.list_from !== null) s.listFrom = row.list_from;
  if (row.list_started_ms !== null) s.listStartedMs = row.list_started_ms;
  if (row.token !== null) s.token = row.token;
  if (row.completed_ms !== null) s.completedMs = row.completed_ms;
  if (row.reconciled_ms !== null) s.reconciledMs = row.reconciled_ms;
  if (row.reconcile_phase === 'listing' || row.reconcile_phase === 'checking') s.reconcilePhase = row.reconcile_phase;
  if (row.reconcile_token !== null) s.reconcileToken = row.reconcile_token;
  return s;
}
