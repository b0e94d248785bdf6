/**
 * The server-grade {@link SourceStore}: PostgreSQL (driver `pg`), one schema per Source, so that several `serve`
 * processes (and `publish` runs) can share one Source.
 *
 * Guarantees, across every process using the schema:
 * - `seq` is gapless and `datetimeMs` never decreases: a batch is one transaction that first takes the
 *   Source's writer lock (a transaction-level advisory lock keyed by the schema), then reads the head from the
 *   one-row `state` table, so batches are serialised whichever process records them;
 * - a snapshot is a `REPEATABLE READ READ ONLY` transaction started while holding the same lock; before it
 *   starts it raises the shared floor (`state.floor_ms`) above its `at`, so no change recorded after it, by any
 *   process, is dated at or before its `at`;
 * - the schema is versioned by the migrations in `pg/migrations.ts`; a schema written by a newer resourcesync is
 *   refused (`RS_STORE`), never altered.
 *
 * Lost connections: a call that fails because the server went away is retried on a new connection, a write for up
 * to `retryMs` (default 30 s), a read for up to `readRetryMs` (default 1 s), then fails with `RS_STORE` naming the
 * store and the last error (a Source then serves the documents it generated last). A batch whose
 * COMMIT was sent when the connection broke is looked up by its batch id before being sent again, so a retry
 * never records a batch twice.
 *
 * Memory: a snapshot's iterators read through a server-side cursor, {@link PgStoreOptions.fetchSize} rows at a
 * time; {@link SourceStore.resources} pages by key; a batch is held whole (as the caller's array is).
 *
 * @module
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import type { ChangeType } from '../core/constants.js';
import { ResourceSyncError } from '../core/errors.js';
import type { Hashes } from '../core/hash.js';
import { MIGRATIONS, SCHEMA_VERSION } from './pg/migrations.js';
import { decodeLinks, encodeLinks } from './sqlite-store.js';
import type {
  ChangeInput,
  ChangeListPart,
  ChangeQuery,
  ChangeRecord,
  RecordOptions,
  ResourceRecord,
  SharedLock,
  SourceStore,
  StoreHead,
  StoreSnapshot,
} from './store.js';
import { checkLinks, nextChangeDatetime, type ShownRow, sameShown } from './store.js';

/** Options of {@link openPgStore}. */
export interface PgStoreOptions {
  /**
   * Connection URL, `postgres://user@host:port/database`. A `schema` query parameter names the Source's
   * schema (`postgres://localhost/test?schema=my_source`); `options.schema` wins over it.
   */
  readonly url: string;
  /** Schema of this Source (created when missing): lower-case letters, digits and `_`. Default `resourcesync`. */
  readonly schema?: string;
  /** Open without creating or migrating anything (fails when the schema is missing). */
  readonly readonly?: boolean;
  /** Connections in the pool (default 4). */
  readonly poolSize?: number;
  /**
   * How long a write (a batch, metadata) is retried after a lost connection before it fails (default 30,000 ms;
   * opening the store too).
   */
  readonly retryMs?: number;
  /**
   * How long a read is retried (default 1,000 ms): short, so that a server whose database went away answers
   * from the documents it generated before instead of holding requests.
   */
  readonly readRetryMs?: number;
  /** Rows a snapshot's cursor fetches at a time (default 1,000). */
  readonly fetchSize?: number;
  /** Timeout of one connection attempt (default 10,000 ms). */
  readonly connectTimeoutMs?: number;
}

/** The LISTEN/NOTIFY channel of change notices (one for all Sources of a database; the payload names the schema). */
const NOTICE_CHANNEL = 'resourcesync_changes';

/** The first part of the advisory lock keys of resourcesync ('RSYC'); the second is `hashtext(schema)`. */
const LOCK_CLASS = 0x52535943;

const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

/** int8 and numeric as numbers (lengths and epoch milliseconds are far below 2^53). */
const TYPES = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === 20 || oid === 1700) return (v: string) => Number(v);
    return pg.types.getTypeParser(oid, format);
  },
};

/** The URL without its password and the schema, for messages. */
function describe(url: URL, schema: string): string {
  const shown = new URL(url.href);
  shown.password = '';
  shown.search = '';
  return `${shown.href} (schema ${schema})`;
}

/** Splits `--store postgres://…?schema=x` into the connection URL and the schema. */
export function parsePgUrl(url: string, schema?: string): { url: URL; schema: string } {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new ResourceSyncError('RS_CONFIG', `store: not a URL: ${url.replace(/:[^:@/]*@/, ':***@')}`);
  }
  if (u.protocol !== 'postgres:' && u.protocol !== 'postgresql:')
    throw new ResourceSyncError('RS_CONFIG', `store: ${u.protocol} is not postgres: or postgresql:`);
  const name = schema ?? u.searchParams.get('schema') ?? 'resourcesync';
  u.searchParams.delete('schema');
  if (!SCHEMA_NAME.test(name))
    throw new ResourceSyncError(
      'RS_CONFIG',
      `store: schema ${JSON.stringify(name)} is not a plain name (lower-case letters, digits, _; at most 63)`,
    );
  return { url: u, schema: name };
}

/** True for errors that mean the connection (not the statement) failed: worth a retry on a new one. */
function isConnectionError(e: unknown): boolean {
  if (!(e instanceof Error)) return false;
  const code = (e as { code?: unknown }).code;
  if (typeof code === 'string') {
    // Class 08: connection exception; 57P01-57P03: admin shutdown, crash shutdown, cannot connect now.
    if (code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03') return true;
    if (['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ENOTFOUND', 'EAI_AGAIN'].includes(code)) return true;
  }
  return /Connection terminated|connection timeout|Client has encountered a connection error|not queryable/i.test(
    e.message,
  );
}

function messageOf(e: unknown): string {
  if (e instanceof AggregateError && e.errors.length > 0) return e.errors.map(messageOf).join('; ');
  return e instanceof Error ? e.message || String((e as { code?: unknown }).code ?? e.name) : String(e);
}

/** A lone surrogate (with the `u` flag, a paired one is one code point, not matched). */
const LONE_SURROGATE = /\p{Cs}/u;

/** True when PostgreSQL stores the text as it is (no lone surrogate, which UTF-8 cannot carry; no NUL). */
function storedAsIs(text: string | null): boolean {
  return text === null || (!LONE_SURROGATE.test(text) && !text.includes('\0'));
}

type ResourceRow = [
  uri: string,
  setName: string,
  length: number,
  type: string | null,
  md5: string | null,
  sha1: string | null,
  sha256: string | null,
  lastmodMs: number,
  fileId: string | null,
  /** JSON, as the SQLite store keeps it ({@link encodeLinks}). */
  links: string | null,
];
const RESOURCE_COLUMNS = 'uri, set_name, length, type, md5, sha1, sha256, lastmod_ms, file_id, links';

type ChangeRow = [
  seq: number,
  uri: string,
  change: string,
  datetimeMs: number,
  setName: string,
  length: number | null,
  type: string | null,
  md5: string | null,
  sha1: string | null,
  sha256: string | null,
  lastmodMs: number | null,
  links: string | null,
];
const CHANGE_COLUMNS = 'seq, uri, change, datetime_ms, set_name, length, type, md5, sha1, sha256, lastmod_ms, links';

interface PartRow {
  set_name: string;
  number: number;
  from_ms: number;
  until_ms: number | null;
  count: number;
  last_seq: number;
}
const PART_COLUMNS = 'set_name, number, from_ms, until_ms, count, last_seq';

function hashesOf(md5: string | null, sha1: string | null, sha256: string | null): Hashes {
  const h: Hashes = {};
  if (md5 !== null) h.md5 = md5;
  if (sha1 !== null) h['sha-1'] = sha1;
  if (sha256 !== null) h['sha-256'] = sha256;
  return h;
}

function toResource(row: ResourceRow): ResourceRecord {
  const [uri, setName, length, type, md5, sha1, sha256, lastmodMs, fileId, links] = row;
  const r: { -readonly [K in keyof ResourceRecord]: ResourceRecord[K] } = {
    uri,
    setName,
    length,
    hashes: hashesOf(md5, sha1, sha256),
    lastmodMs,
  };
  if (type !== null) r.type = type;
  if (fileId !== null) r.fileId = fileId;
  const l = decodeLinks(links);
  if (l !== undefined) r.links = l;
  return r;
}

function toChange(row: ChangeRow): ChangeRecord {
  const [seq, uri, change, datetimeMs, setName, length, type, md5, sha1, sha256, lastmodMs, links] = row;
  const c: { -readonly [K in keyof ChangeRecord]: ChangeRecord[K] } = {
    seq,
    uri,
    change: change as ChangeType,
    datetimeMs,
    setName,
    hashes: hashesOf(md5, sha1, sha256),
  };
  if (length !== null) c.length = length;
  if (type !== null) c.type = type;
  if (lastmodMs !== null) c.lastmodMs = lastmodMs;
  const l = decodeLinks(links);
  if (l !== undefined) c.links = l;
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

/**
 * Opens the store of one Source in a PostgreSQL database, creating its schema or migrating it to this version
 * when needed.
 *
 * @throws ResourceSyncError `RS_CONFIG` for a bad URL or schema name; `RS_STORE` naming the server and schema
 *   when it cannot be reached (after `retryMs`), when the schema is from a newer resourcesync, or when it is
 *   missing and `readonly` is set.
 * @example
 * ```ts
 * const store = await openPgStore({ url: 'postgres://postgres@127.0.0.1/test?schema=my_source' });
 * await store.recordChanges([{ uri: 'a.txt', change: 'created', setName: 'default', length: 3 }]);
 * await store.close();
 * ```
 */
export async function openPgStore(options: PgStoreOptions): Promise<PgStore> {
  const { url, schema } = parsePgUrl(options.url, options.schema);
  const location = describe(url, schema);
  const config = {
    connectionString: url.href,
    connectionTimeoutMillis: options.connectTimeoutMs ?? 10_000,
    types: TYPES,
    // Names the Source, so an operator (or a test) can tell its connections apart in pg_stat_activity.
    application_name: `resourcesync ${schema}`.slice(0, 63),
  };
  const pool = new pg.Pool({
    connectionString: url.href,
    max: options.poolSize ?? 4,
    connectionTimeoutMillis: options.connectTimeoutMs ?? 10_000,
    idleTimeoutMillis: 30_000,
    // Idle connections do not keep the process alive (a CLI run ends when its work does).
    allowExitOnIdle: true,
    types: TYPES,
    // Names the Source, so an operator (or a test) can tell its connections apart in pg_stat_activity.
    application_name: `resourcesync ${schema}`.slice(0, 63),
  });
  // A connection that breaks (server restart, network cut) emits 'error', idle in the pool or checked out between
  // queries; the query that uses it next fails and is retried on a new one, so the event itself is not needed.
  pool.on('error', () => {});
  pool.on('connect', (client) => client.on('error', () => {}));
  const store = new PgStore(pool, schema, location, options, config);
  try {
    await store.init(options.readonly === true);
  } catch (e) {
    await pool.end().catch(() => {});
    throw e;
  }
  return store;
}

type Queryable = Pick<pg.PoolClient, 'query'>;

/** The PostgreSQL store (see the module comment). */
export class PgStore implements SourceStore {
  readonly location: string;
  /** The schema of this Source. */
  readonly schema: string;
  readonly #pool: pg.Pool;
  /** Quoted schema, for SQL text. */
  readonly #s: string;
  readonly #retryMs: number;
  readonly #readRetryMs: number;
  readonly #fetchSize: number;
  /** Open snapshots: closed with the store (each holds a connection the pool would wait for). */
  readonly #snapshots = new Set<PgSnapshot>();
  #closed = false;

  /** This handle's id in change notices (its own batches are not told back to it). */
  readonly #id = randomUUID();
  readonly #clientConfig: pg.ClientConfig;
  /** Listeners of {@link watch}, and what the notice connection has delivered. */
  readonly #watchers = new Set<(changes: readonly ChangeRecord[]) => void>();
  #listener: pg.Client | undefined;
  #reconnectTimer: NodeJS.Timeout | undefined;
  /** Highest seq told to watchers (or recorded here); undefined until the notice connection is up. */
  #delivered: number | undefined;
  /** Seq ranges of this handle's own batches above {@link #delivered} (not told to its watchers). */
  #own: [number, number][] = [];
  /** Catch-ups run one after the other, in notice order. */
  #catchUp: Promise<void> = Promise.resolve();
  /** The connection holding the locks of {@link lockShared}, and those locks by key. */
  #lockClient: Promise<pg.Client> | undefined;
  readonly #heldNames = new Map<string, { held: boolean }>();

  constructor(pool: pg.Pool, schema: string, location: string, options: PgStoreOptions, clientConfig: pg.ClientConfig) {
    this.#clientConfig = clientConfig;
    this.#pool = pool;
    this.schema = schema;
    this.#s = `"${schema}"`;
    this.location = location;
    this.#retryMs = options.retryMs ?? 30_000;
    this.#readRetryMs = options.readRetryMs ?? 1000;
    this.#fetchSize = Math.max(1, options.fetchSize ?? 1000);
  }

  #error(action: string, e: unknown): ResourceSyncError {
    if (e instanceof ResourceSyncError) return e;
    return new ResourceSyncError('RS_STORE', `store ${this.location}: cannot ${action}: ${messageOf(e)}`, {
      cause: e,
    });
  }

  #check(): void {
    if (this.#closed) throw new ResourceSyncError('RS_STORE', `store ${this.location} is closed`);
  }

  /**
   * Runs `fn` on a pooled connection, again on a new one while the connection fails, for up to `retryMs`.
   * Statement errors are not retried.
   */
  async #with<T>(action: string, fn: (c: pg.PoolClient) => Promise<T>, boundMs = this.#readRetryMs): Promise<T> {
    this.#check();
    const deadline = Date.now() + boundMs;
    let delay = 50;
    for (;;) {
      let client: pg.PoolClient | undefined;
      try {
        client = await this.#pool.connect();
        const out = await fn(client);
        client.release();
        return out;
      } catch (e) {
        // A connection that failed (or is mid-transaction after an error) is not given back to the pool.
        client?.release(true);
        if (!isConnectionError(e) || this.#closed || Date.now() + delay > deadline)
          throw this.#error(`${action}${isConnectionError(e) ? ` (retried for ${boundMs} ms)` : ''}`, e);
        await new Promise((r) => setTimeout(r, delay));
        delay = Math.min(delay * 2, 1000);
      }
    }
  }

  async #query<R extends pg.QueryResultRow>(
    action: string,
    text: string,
    values?: unknown[],
    boundMs = this.#readRetryMs,
  ): Promise<R[]> {
    return this.#with(action, async (c) => (await c.query<R>(text, values)).rows, boundMs);
  }

  /** Creates or migrates the schema (under the Source's lock, so that processes opening it at once agree). */
  async init(readonly: boolean): Promise<void> {
    await this.#with(
      'open the schema',
      async (c) => {
        const exists = await c.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [this.schema]);
        if (readonly) {
          if (exists.rowCount === 0)
            throw new ResourceSyncError('RS_STORE', `store ${this.location}: the schema does not exist`);
          await this.#checkVersion(c, await this.#appliedVersion(c));
          return;
        }
        await c.query('SELECT pg_advisory_lock($1, hashtext($2))', [LOCK_CLASS, this.schema]);
        try {
          await c.query(`CREATE SCHEMA IF NOT EXISTS ${this.#s}`);
          await c.query(
            `CREATE TABLE IF NOT EXISTS ${this.#s}.schema_migrations (version integer PRIMARY KEY, description text NOT NULL, applied_ms bigint NOT NULL)`,
          );
          const applied = await this.#appliedVersion(c);
          await this.#checkVersion(c, applied);
          for (const m of MIGRATIONS) {
            if (m.version <= applied) continue;
            await c.query('BEGIN');
            try {
              await c.query(m.sql.replaceAll('{s}', this.#s));
              await c.query(
                `INSERT INTO ${this.#s}.schema_migrations (version, description, applied_ms) VALUES ($1, $2, $3)`,
                [m.version, m.description, Date.now()],
              );
              await c.query('COMMIT');
            } catch (e) {
              await c.query('ROLLBACK').catch(() => {});
              throw this.#error(`apply migration ${m.version} (${m.description})`, e);
            }
          }
        } finally {
          await c.query('SELECT pg_advisory_unlock($1, hashtext($2))', [LOCK_CLASS, this.schema]);
        }
      },
      this.#retryMs,
    );
  }

  async #appliedVersion(c: Queryable): Promise<number> {
    const t = await c.query<{ t: string | null }>('SELECT to_regclass($1) AS t', [`${this.#s}.schema_migrations`]);
    if (t.rows[0]?.t == null) return 0;
    const r = await c.query<{ v: number | null }>(`SELECT max(version) AS v FROM ${this.#s}.schema_migrations`);
    return r.rows[0]?.v ?? 0;
  }

  async #checkVersion(_c: Queryable, applied: number): Promise<void> {
    if (applied > SCHEMA_VERSION)
      throw new ResourceSyncError(
        'RS_STORE',
        `store ${this.location}: the schema is at version ${applied}, written by a newer resourcesync (this one knows up to ${SCHEMA_VERSION}); upgrade resourcesync or use another schema`,
      );
  }

  /** The schema version recorded in the store (the last migration applied). */
  async schemaVersion(): Promise<number> {
    return this.#with('read the schema version', (c) => this.#appliedVersion(c));
  }

  async head(): Promise<StoreHead> {
    const [row] = await this.#query<{ seq: number; version: number; last_ms: number | null }>(
      'read the head',
      `SELECT seq, version, last_ms FROM ${this.#s}.state WHERE id = 1`,
    );
    return headOf(row!);
  }

  async getResource(uri: string): Promise<ResourceRecord | undefined> {
    const rows = await this.#with('read a resource', async (c) => {
      const r = await c.query<ResourceRow>({
        text: `SELECT ${RESOURCE_COLUMNS} FROM ${this.#s}.resources WHERE uri = $1`,
        values: [uri],
        rowMode: 'array',
      });
      return r.rows;
    });
    return rows[0] === undefined ? undefined : toResource(rows[0]);
  }

  recordOf(change: ChangeInput): ResourceRecord | undefined {
    if (change.change === 'deleted' || change.lastmodMs === undefined) return undefined;
    const length = change.length ?? 0;
    if (!Number.isSafeInteger(length) || !Number.isSafeInteger(change.lastmodMs)) return undefined;
    const h = change.hashes ?? {};
    const row: ResourceRow = [
      change.uri,
      change.setName,
      length === 0 ? 0 : length,
      change.type ?? null,
      h.md5 ?? null,
      h['sha-1'] ?? null,
      h['sha-256'] ?? null,
      change.lastmodMs === 0 ? 0 : change.lastmodMs,
      change.fileId ?? null,
      encodeLinks(change.links),
    ];
    for (const t of [row[0], row[1], row[3], row[4], row[5], row[6], row[8], row[9]])
      if (!storedAsIs(t)) return undefined;
    return toResource(row);
  }

  /**
   * The sets an inventory-only batch moves: those of its deletions, and of each upsert whose stored row differs
   * in more than `file_id` (or is new, or moves to another set: both sets). One SELECT of the upserted keys.
   */
  async #movedSets(c: Queryable, changes: readonly ChangeInput[], upserts: readonly ResourceRow[]): Promise<string[]> {
    const moved = new Set<string>();
    for (const ch of changes) if (ch.change === 'deleted') moved.add(ch.setName);
    if (upserts.length === 0) return [...moved];
    const old = new Map<string, ShownRow>();
    for (const r of (
      await c.query<ShownRow>(
        `SELECT uri, set_name, length, type, md5, sha1, sha256, lastmod_ms, links FROM ${this.#s}.resources WHERE uri = ANY($1::text[])`,
        [upserts.map((u) => u[0])],
      )
    ).rows)
      old.set(r.uri, r);
    for (const row of upserts) {
      const [uri, setName, length, type, md5, sha1, sha256, lastmodMs, , links] = row;
      const o = old.get(uri);
      if (o !== undefined && o.set_name !== setName) moved.add(o.set_name);
      const shown = { uri, set_name: setName, length, type, md5, sha1, sha256, lastmod_ms: lastmodMs, links };
      if (!sameShown(o, shown)) moved.add(setName);
    }
    return [...moved];
  }

  async setVersion(setName: string): Promise<number> {
    const rows = await this.#query<{ version: number }>(
      'read a set version',
      `SELECT version FROM ${this.#s}.set_versions WHERE set_name = $1`,
      [setName],
    );
    return rows[0]?.version ?? 0;
  }

  async countResources(setName?: string): Promise<number> {
    return countResources(this.#s, (t, v) => this.#query('count resources', t, v), setName);
  }

  async *resources(
    options: { readonly setName?: string; readonly after?: string; readonly pageSize?: number } = {},
  ): AsyncGenerator<ResourceRecord, void, undefined> {
    const pageSize = Math.max(1, options.pageSize ?? 1000);
    let after = options.after ?? '';
    for (;;) {
      const rows = await this.#with('read resources', async (c) => {
        const r = await c.query<ResourceRow>({
          text:
            options.setName === undefined
              ? `SELECT ${RESOURCE_COLUMNS} FROM ${this.#s}.resources WHERE uri > $1 ORDER BY uri LIMIT $2`
              : `SELECT ${RESOURCE_COLUMNS} FROM ${this.#s}.resources WHERE set_name = $3 AND uri > $1 ORDER BY uri LIMIT $2`,
          values: options.setName === undefined ? [after, pageSize] : [after, pageSize, options.setName],
          rowMode: 'array',
        });
        return r.rows;
      });
      for (const row of rows) yield toResource(row);
      if (rows.length < pageSize) return;
      after = rows[rows.length - 1]![0];
    }
  }

  async recordChanges(changes: readonly ChangeInput[], options: RecordOptions = {}): Promise<ChangeRecord[]> {
    this.#check();
    if (changes.length === 0) return [];
    const batchId = randomUUID();
    let sent = false;
    return this.#with(
      'record changes',
      async (c) => {
        if (sent) {
          // The connection broke after COMMIT was sent: the batch may be in. Its id says.
          const found = await this.#batchRecorded(c, batchId);
          if (found !== undefined) return found;
        }
        await c.query('BEGIN');
        let own: [number, number] | undefined;
        try {
          const out = await this.#record(c, changes, options, batchId);
          // Known as this handle's own before the commit, so that a catch-up after it does not tell it back.
          if (out.length > 0 && this.#watchers.size > 0) {
            own = [out[0]!.seq, out[out.length - 1]!.seq];
            this.#own.push(own);
          }
          sent = true;
          await c.query('COMMIT');
          return out;
        } catch (e) {
          if (own !== undefined && !isConnectionError(e)) this.#own = this.#own.filter((r) => r !== own);
          if (!isConnectionError(e)) await c.query('ROLLBACK').catch(() => {});
          throw e;
        }
      },
      this.#retryMs,
    );
  }

  /** The records of a batch whose commit was in doubt, when it was committed. */
  async #batchRecorded(c: Queryable, batchId: string): Promise<ChangeRecord[] | undefined> {
    const r = await c.query<{ first_seq: number; last_seq: number }>(
      `SELECT first_seq, last_seq FROM ${this.#s}.batches WHERE id = $1`,
      [batchId],
    );
    const b = r.rows[0];
    if (b === undefined) return undefined;
    const rows = await c.query<ChangeRow>({
      text: `SELECT ${CHANGE_COLUMNS} FROM ${this.#s}.changes WHERE seq >= $1 AND seq <= $2 ORDER BY seq`,
      values: [b.first_seq, b.last_seq],
      rowMode: 'array',
    });
    return rows.rows.map(toChange);
  }

  async #record(
    c: Queryable,
    changes: readonly ChangeInput[],
    options: RecordOptions,
    batchId: string,
  ): Promise<ChangeRecord[]> {
    const s = this.#s;
    const log = options.log ?? true;
    const maxEntries = options.rotation?.maxEntries ?? 50_000;
    const periodMs = options.rotation?.periodMs;
    await c.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [LOCK_CLASS, this.schema]);
    const state = (
      await c.query<{ seq: number; last_ms: number | null; floor_ms: number }>(
        `SELECT seq, last_ms, floor_ms FROM ${s}.state WHERE id = 1`,
      )
    ).rows[0]!;
    for (const ch of changes) if (ch.change !== 'deleted') checkLinks(ch.uri, ch.links);
    const clock = Date.now();
    // Each logged change gets its own datetime (distinct and increasing as far as the clock allows), as in SQLite.
    let last = state.last_ms ?? undefined;
    const first = nextChangeDatetime(last, clock, state.floor_ms);
    const setNames = [...new Set(changes.map((ch) => ch.setName))];
    const open = new Map<string, PartRow & { dirty: boolean }>();
    for (const row of (
      await c.query<PartRow>(
        `SELECT DISTINCT ON (set_name) ${PART_COLUMNS} FROM ${s}.change_lists WHERE set_name = ANY($1::text[]) ORDER BY set_name, number DESC`,
        [setNames],
      )
    ).rows)
      open.set(row.set_name, { ...row, dirty: false });
    const touchedParts: (PartRow & { dirty: boolean })[] = [];
    /** The set's open part, the first one (from `dt`) when the set has none. */
    const partFor = (name: string, dt: number): PartRow & { dirty: boolean } => {
      let p = open.get(name);
      if (p === undefined) {
        p = { set_name: name, number: 1, from_ms: dt, until_ms: null, count: 0, last_seq: 0, dirty: true };
        open.set(name, p);
        touchedParts.push(p);
      }
      return p;
    };
    /** The inventory after the batch: the last change of each key wins. */
    const inventory = new Map<string, ResourceRow | null>();
    const out: ChangeRecord[] = [];
    let seq = state.seq;
    let logged = 0;
    for (const ch of changes) {
      const h = ch.hashes ?? {};
      const now = log ? nextChangeDatetime(last, clock, state.floor_ms) : first;
      last = now;
      const links = ch.change === 'deleted' ? null : encodeLinks(ch.links);
      if (ch.change === 'deleted') inventory.set(ch.uri, null);
      else
        inventory.set(ch.uri, [
          ch.uri,
          ch.setName,
          ch.length ?? 0,
          ch.type ?? null,
          h.md5 ?? null,
          h['sha-1'] ?? null,
          h['sha-256'] ?? null,
          ch.lastmodMs ?? now,
          ch.fileId ?? null,
          links,
        ]);
      let part = partFor(ch.setName, now);
      if (!log) continue;
      logged = now;
      if (part.count >= maxEntries || (periodMs !== undefined && now >= part.from_ms + periodMs)) {
        part.until_ms = now;
        if (!part.dirty) {
          part.dirty = true;
          touchedParts.push(part);
        }
        part = {
          set_name: part.set_name,
          number: part.number + 1,
          from_ms: now,
          until_ms: null,
          count: 0,
          last_seq: 0,
          dirty: true,
        };
        open.set(ch.setName, part);
        touchedParts.push(part);
      }
      seq += 1;
      part.count += 1;
      part.last_seq = seq;
      if (!part.dirty) {
        part.dirty = true;
        touchedParts.push(part);
      }
      const rec: { -readonly [K in keyof ChangeRecord]: ChangeRecord[K] } = {
        seq,
        uri: ch.uri,
        change: ch.change,
        datetimeMs: now,
        setName: ch.setName,
        hashes: {},
      };
      if (ch.change !== 'deleted') {
        rec.hashes = { ...h };
        if (ch.length !== undefined) rec.length = ch.length;
        if (ch.type !== undefined) rec.type = ch.type;
        rec.lastmodMs = ch.lastmodMs ?? now;
        const decoded = decodeLinks(links);
        if (decoded !== undefined) rec.links = decoded;
      }
      out.push(rec);
    }
    const deleted: string[] = [];
    const upserts: ResourceRow[] = [];
    for (const [uri, row] of inventory) {
      if (row === null) deleted.push(uri);
      else upserts.push(row);
    }
    // Sets whose documents this write moves (their version is bumped below): all of them for a logged write; for
    // an inventory-only one, not those whose rows change in nothing but `file_id` (a rescan clearing a racy mark
    // after re-hashing the same bytes), so an unchanged collection keeps its documents (as the SQLite store).
    const moved = log ? setNames : await this.#movedSets(c, changes, upserts);
    if (deleted.length > 0) await c.query(`DELETE FROM ${s}.resources WHERE uri = ANY($1::text[])`, [deleted]);
    if (upserts.length > 0)
      await c.query(
        `INSERT INTO ${s}.resources (${RESOURCE_COLUMNS})
         SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[], $9::text[], $10::text[])
         ON CONFLICT (uri) DO UPDATE SET set_name = excluded.set_name, length = excluded.length, type = excluded.type,
           md5 = excluded.md5, sha1 = excluded.sha1, sha256 = excluded.sha256, lastmod_ms = excluded.lastmod_ms,
           file_id = excluded.file_id, links = excluded.links`,
        columns(upserts, 10),
      );
    if (out.length > 0)
      await c.query(
        `INSERT INTO ${s}.changes (${CHANGE_COLUMNS})
         SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::bigint[], $7::text[], $8::text[], $9::text[], $10::text[], $11::bigint[], $12::text[])`,
        columns(
          out.map((r): ChangeRow => {
            const del = r.change === 'deleted';
            return [
              r.seq,
              r.uri,
              r.change,
              r.datetimeMs,
              r.setName,
              del ? null : (r.length ?? null),
              del ? null : (r.type ?? null),
              del ? null : (r.hashes.md5 ?? null),
              del ? null : (r.hashes['sha-1'] ?? null),
              del ? null : (r.hashes['sha-256'] ?? null),
              del ? null : (r.lastmodMs ?? null),
              del ? null : encodeLinks(r.links),
            ];
          }),
          12,
        ),
      );
    if (touchedParts.length > 0)
      await c.query(
        `INSERT INTO ${s}.change_lists (${PART_COLUMNS})
         SELECT * FROM unnest($1::text[], $2::integer[], $3::bigint[], $4::bigint[], $5::integer[], $6::bigint[])
         ON CONFLICT (set_name, number) DO UPDATE SET until_ms = excluded.until_ms, count = excluded.count,
           last_seq = excluded.last_seq`,
        columns(
          touchedParts.map((p) => [p.set_name, p.number, p.from_ms, p.until_ms, p.count, p.last_seq]),
          6,
        ),
      );
    await c.query(
      `INSERT INTO ${s}.set_versions (set_name, version) SELECT unnest($1::text[]), 1
       ON CONFLICT (set_name) DO UPDATE SET version = ${s}.set_versions.version + 1`,
      [moved],
    );
    await c.query(
      `UPDATE ${s}.state SET seq = $1, version = version + 1, last_ms = CASE WHEN $2::bigint IS NULL THEN last_ms ELSE $2::bigint END WHERE id = 1`,
      [seq, out.length > 0 ? logged : null],
    );
    // The batch's id, so that a retry after a commit in doubt finds it instead of recording it again; ids older
    // than the retry bound can no longer be asked for.
    await c.query(`DELETE FROM ${s}.batches WHERE at_ms < $1`, [Date.now() - 2 * this.#retryMs - 60_000]);
    // Told to the handles that watch, at commit (NOTIFY is transactional, delivered in commit order).
    if (out.length > 0)
      await c.query('SELECT pg_notify($1, $2)', [
        NOTICE_CHANNEL,
        JSON.stringify({ s: this.schema, o: this.#id, l: seq }),
      ]);
    await c.query(`INSERT INTO ${s}.batches (id, first_seq, last_seq, at_ms) VALUES ($1, $2, $3, $4)`, [
      batchId,
      state.seq + 1,
      seq,
      Date.now(),
    ]);
    return out;
  }

  async setNames(): Promise<string[]> {
    const rows = await this.#query<{ set_name: string }>(
      'list sets',
      `SELECT set_name FROM ${this.#s}.set_versions v
       WHERE EXISTS (SELECT 1 FROM ${this.#s}.change_lists p WHERE p.set_name = v.set_name)
          OR EXISTS (SELECT 1 FROM ${this.#s}.resources r WHERE r.set_name = v.set_name)
       ORDER BY set_name`,
    );
    return rows.map((r) => r.set_name);
  }

  async changeListParts(setName: string): Promise<ChangeListPart[]> {
    return changeListParts(this.#s, (t, v) => this.#query('read Change Lists', t, v), setName);
  }

  async snapshot(): Promise<StoreSnapshot> {
    this.#check();
    const s = this.#s;
    let client: pg.PoolClient | undefined;
    try {
      client = await this.#pool.connect();
      // Under the writer lock: no batch is in flight, so the floor raised here holds for every later batch, and
      // the transaction's snapshot (taken at its first statement) holds every batch before.
      await client.query('SELECT pg_advisory_lock($1, hashtext($2))', [LOCK_CLASS, this.schema]);
      const [at] = (
        await client.query<{ at: number }>(
          `UPDATE ${s}.state SET floor_ms = GREATEST(floor_ms, $1::bigint, COALESCE(last_ms, 0)) + 1 WHERE id = 1 RETURNING floor_ms - 1 AS at`,
          [Date.now()],
        )
      ).rows;
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      const [row] = (
        await client.query<{ seq: number; version: number; last_ms: number | null; created_ms: number }>(
          `SELECT seq, version, last_ms, created_ms FROM ${s}.state WHERE id = 1`,
        )
      ).rows;
      await client.query('SELECT pg_advisory_unlock($1, hashtext($2))', [LOCK_CLASS, this.schema]);
      const snap: PgSnapshot = new PgSnapshot(
        client,
        s,
        headOf(row!),
        at!.at,
        row!.created_ms,
        this.#fetchSize,
        (e) => this.#error('read a snapshot', e),
        () => this.#snapshots.delete(snap),
      );
      this.#snapshots.add(snap);
      return snap;
    } catch (e) {
      // A connection that still holds the lock, or failed, is closed rather than pooled.
      client?.release(true);
      throw this.#error('open a read snapshot', e);
    }
  }

  async getMeta(key: string): Promise<string | undefined> {
    const rows = await this.#query<{ value: string }>(
      'read metadata',
      `SELECT value FROM ${this.#s}.meta WHERE key = $1`,
      [key],
    );
    return rows[0]?.value;
  }

  async setMeta(key: string, value: string | undefined): Promise<void> {
    if (value === undefined)
      await this.#query('write metadata', `DELETE FROM ${this.#s}.meta WHERE key = $1`, [key], this.#retryMs);
    else
      await this.#query(
        'write metadata',
        `INSERT INTO ${this.#s}.meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
        [key, value],
        this.#retryMs,
      );
  }

  /**
   * Drops the Source's schema with everything in it (for tests and for removing a Source).
   * The store is closed afterwards.
   */
  async dropSchema(): Promise<void> {
    await this.#query('drop the schema', `DROP SCHEMA IF EXISTS ${this.#s} CASCADE`, [], this.#retryMs);
    await this.close();
  }

  /**
   * Takes the exclusive lock `name` of this Source (see {@link SourceStore.lockShared}): a session-level
   * advisory lock keyed by `hashtextextended(schema, name)`, held on one extra connection of this handle (opened
   * on first use, shared by all its locks). Polls `pg_try_advisory_lock` (20 ms, doubling to 250 ms) for up to
   * `waitMs`, so waiting for one lock never holds up another on the same connection. A name already held through
   * this handle waits too (advisory locks are re-entrant per session; these are not). When the process dies its
   * connection closes and PostgreSQL frees the locks; when the connection breaks, its locks are marked lost
   * (`held` false) and the next call opens a new one.
   *
   * @throws ResourceSyncError `RS_STORE` when the server cannot be reached (retried as a read is, `readRetryMs`).
   */
  async lockShared(name: string, waitMs: number): Promise<SharedLock | undefined> {
    this.#check();
    const key = `${this.schema}\n${name}`;
    const deadline = Date.now() + Math.max(0, waitMs);
    // A server that cannot be reached fails the call as soon as a read would (the Source then serves what it has).
    const reachDeadline = Math.min(deadline, Date.now() + this.#readRetryMs);
    let delay = 20;
    for (;;) {
      if (!this.#heldNames.has(key)) {
        let conn: Promise<pg.Client> | undefined;
        try {
          conn = this.#lockConnection();
          const c = await conn;
          const r = await c.query<{ ok: boolean }>('SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS ok', [key]);
          // Taken meanwhile by another call of this handle (both asked at once): given back (one count of two).
          if (r.rows[0]?.ok === true && this.#heldNames.has(key))
            await c.query('SELECT pg_advisory_unlock(hashtextextended($1, 0))', [key]);
          else if (r.rows[0]?.ok === true) return this.#heldLock(key, conn, c);
        } catch (e) {
          if (conn !== undefined) this.#dropLockConnection(conn);
          if (!isConnectionError(e) || this.#closed || Date.now() + delay > reachDeadline)
            throw this.#error(`take the lock ${JSON.stringify(name)}`, e);
        }
      }
      // The last try is at the deadline.
      const left = deadline - Date.now();
      if (left <= 0) return undefined;
      await new Promise((r) => setTimeout(r, Math.min(delay, left)));
      delay = Math.min(delay * 2, 250);
    }
  }

  #heldLock(key: string, conn: Promise<pg.Client>, c: pg.Client): SharedLock {
    const lock = {
      held: true,
      release: async (): Promise<void> => {
        if (!this.#heldNames.has(key) || this.#heldNames.get(key) !== lock) return;
        this.#heldNames.delete(key);
        if (!lock.held) return;
        lock.held = false;
        // Only on the connection it was taken on (a new one does not hold it).
        if (this.#lockClient === conn)
          await c.query('SELECT pg_advisory_unlock(hashtextextended($1, 0))', [key]).catch(() => {
            this.#dropLockConnection(conn);
          });
      },
    };
    this.#heldNames.set(key, lock);
    return lock;
  }

  #lockConnection(): Promise<pg.Client> {
    if (this.#lockClient !== undefined) return this.#lockClient;
    const client = new pg.Client(this.#clientConfig);
    const conn = client.connect().then(() => client);
    this.#lockClient = conn;
    const lost = (): void => this.#dropLockConnection(conn);
    client.on('error', lost);
    client.on('end', lost);
    conn.catch(lost);
    return conn;
  }

  /** Forgets a lock connection that broke (or is closed): its locks are lost (PostgreSQL freed them). */
  #dropLockConnection(conn: Promise<pg.Client>): void {
    if (this.#lockClient !== conn) return;
    this.#lockClient = undefined;
    for (const [key, lock] of this.#heldNames) {
      lock.held = false;
      this.#heldNames.delete(key);
    }
    void conn.then((c) => c.end()).catch(() => {});
  }

  /**
   * Tells `listener` of the changes other processes (other handles) record in this Source, in seq order, each
   * once, through LISTEN/NOTIFY on one extra connection (reconnected with back-off when it breaks; what was
   * recorded meanwhile is read from the log then). This handle's own batches are not told back. Returns a
   * function that stops the listener. Memory: one notice's changes (a batch) at a time.
   */
  watch(listener: (changes: readonly ChangeRecord[]) => void): () => void {
    this.#check();
    this.#watchers.add(listener);
    if (this.#listener === undefined && this.#reconnectTimer === undefined) this.#listen(0);
    return () => {
      this.#watchers.delete(listener);
      if (this.#watchers.size === 0) this.#unlisten();
    };
  }

  /** Resolves once every notice received so far has been told to the watchers (for tests and shutdown). */
  async watchSettled(): Promise<void> {
    await this.#catchUp;
  }

  #listen(delayMs: number): void {
    this.#reconnectTimer = setTimeout(() => {
      this.#reconnectTimer = undefined;
      if (this.#closed || this.#watchers.size === 0) return;
      const client = new pg.Client(this.#clientConfig);
      this.#listener = client;
      const retry = (): void => {
        if (this.#listener !== client) return;
        this.#listener = undefined;
        client.end().catch(() => {});
        if (!this.#closed && this.#watchers.size > 0) this.#listen(Math.min(Math.max(delayMs * 2, 100), 5000));
      };
      client.on('error', retry);
      client.on('end', retry);
      client.on('notification', (n) => {
        if (n.channel !== NOTICE_CHANNEL || n.payload === undefined) return;
        let notice: { s?: unknown; l?: unknown };
        try {
          notice = JSON.parse(n.payload) as { s?: unknown; l?: unknown };
        } catch {
          return;
        }
        if (notice.s === this.schema && typeof notice.l === 'number') this.#queueCatchUp(notice.l);
      });
      client
        .connect()
        .then(() => client.query(`LISTEN ${NOTICE_CHANNEL}`))
        .then(async () => {
          // Listening now: what was recorded before (or while the connection was down) is read from the log.
          const [row] = (await client.query<{ seq: number }>(`SELECT seq FROM ${this.#s}.state WHERE id = 1`)).rows;
          if (this.#delivered === undefined) this.#delivered = row!.seq;
          else this.#queueCatchUp(row!.seq);
          delayMs = 0;
        })
        .catch(retry);
    }, delayMs);
  }

  #unlisten(): void {
    clearTimeout(this.#reconnectTimer);
    this.#reconnectTimer = undefined;
    const client = this.#listener;
    this.#listener = undefined;
    this.#delivered = undefined;
    this.#own = [];
    client?.end().catch(() => {});
  }

  #queueCatchUp(through: number): void {
    this.#catchUp = this.#catchUp
      .then(() => this.#deliverThrough(through))
      .catch(() => {
        // The log could not be read (the connection is down): the next notice or reconnection catches up.
      });
  }

  /** Tells the watchers of the changes after {@link #delivered} through `through`, leaving out this handle's own. */
  async #deliverThrough(through: number): Promise<void> {
    const from = this.#delivered;
    if (from === undefined || through <= from || this.#closed) return;
    for (let after = from; after < through; ) {
      const upTo = Math.min(through, after + this.#fetchSize);
      const rows = await this.#with('read changes recorded elsewhere', async (c) => {
        const r = await c.query<ChangeRow>({
          text: `SELECT ${CHANGE_COLUMNS} FROM ${this.#s}.changes WHERE seq > $1 AND seq <= $2 ORDER BY seq`,
          values: [after, upTo],
          rowMode: 'array',
        });
        return r.rows;
      });
      const own = this.#own;
      const foreign = rows.map(toChange).filter((ch) => !own.some(([f, l]) => ch.seq >= f && ch.seq <= l));
      after = upTo;
      this.#delivered = upTo;
      this.#own = own.filter(([, l]) => l > upTo);
      if (foreign.length > 0)
        for (const w of this.#watchers) {
          try {
            w(foreign);
          } catch {
            // A listener's failure is its own; the others are still told.
          }
        }
    }
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#watchers.clear();
    this.#unlisten();
    if (this.#lockClient !== undefined) this.#dropLockConnection(this.#lockClient);
    for (const snap of [...this.#snapshots]) await snap.close();
    await this.#pool.end();
  }
}

function headOf(row: { seq: number; version: number; last_ms: number | null }): StoreHead {
  return row.last_ms === null || row.seq === 0
    ? { seq: row.seq, version: row.version }
    : { seq: row.seq, version: row.version, datetimeMs: row.last_ms };
}

/** Column arrays of rows, for `unnest($1::type[], …)` (one parameter per column, not per value). */
function columns(rows: readonly (readonly unknown[])[], width: number): unknown[][] {
  const cols: unknown[][] = Array.from({ length: width }, () => new Array<unknown>(rows.length));
  rows.forEach((row, i) => {
    for (let k = 0; k < width; k++) cols[k]![i] = row[k];
  });
  return cols;
}

type Run = <R extends pg.QueryResultRow>(text: string, values?: unknown[]) => Promise<R[]>;

async function countResources(s: string, run: Run, setName?: string): Promise<number> {
  const rows =
    setName === undefined
      ? await run<{ n: number }>(`SELECT count(*) AS n FROM ${s}.resources`)
      : await run<{ n: number }>(`SELECT count(*) AS n FROM ${s}.resources WHERE set_name = $1`, [setName]);
  return rows[0]?.n ?? 0;
}

async function changeListParts(s: string, run: Run, setName: string): Promise<ChangeListPart[]> {
  const rows = await run<PartRow>(`SELECT ${PART_COLUMNS} FROM ${s}.change_lists WHERE set_name = $1 ORDER BY number`, [
    setName,
  ]);
  if (rows.length > 0) return rows.map(toPart);
  const [st] = await run<{ created_ms: number }>(`SELECT created_ms FROM ${s}.state WHERE id = 1`);
  return [{ setName, number: 1, fromMs: st!.created_ms, count: 0, lastSeq: 0 }];
}

let cursorCounter = 0;

class PgSnapshot implements StoreSnapshot {
  readonly head: StoreHead;
  readonly atMs: number;
  readonly #client: pg.PoolClient;
  readonly #s: string;
  readonly #createdMs: number;
  readonly #fetchSize: number;
  readonly #error: (e: unknown) => ResourceSyncError;
  readonly #onClose: () => void;
  #closed = false;
  #failed = false;

  constructor(
    client: pg.PoolClient,
    s: string,
    head: StoreHead,
    atMs: number,
    createdMs: number,
    fetchSize: number,
    error: (e: unknown) => ResourceSyncError,
    onClose: () => void,
  ) {
    this.#onClose = onClose;
    this.#client = client;
    this.#s = s;
    this.head = head;
    this.atMs = atMs;
    this.#createdMs = createdMs;
    this.#fetchSize = fetchSize;
    this.#error = error;
  }

  #run: Run = async (text, values) => {
    if (this.#closed) throw this.#error(new Error('the snapshot is closed'));
    try {
      return (await this.#client.query(text, values)).rows;
    } catch (e) {
      this.#failed = true;
      throw this.#error(e);
    }
  };

  async setVersion(setName: string): Promise<number> {
    const rows = await this.#run<{ version: number }>(
      `SELECT version FROM ${this.#s}.set_versions WHERE set_name = $1`,
      [setName],
    );
    return rows[0]?.version ?? 0;
  }

  async countResources(setName?: string): Promise<number> {
    return countResources(this.#s, this.#run, setName);
  }

  /** Rows of a query through a server-side cursor, `fetchSize` at a time. */
  async *#cursor<R extends unknown[]>(text: string, values: unknown[]): AsyncGenerator<R, void, undefined> {
    const name = `rs_cursor_${++cursorCounter}`;
    await this.#run(`DECLARE ${name} NO SCROLL CURSOR FOR ${text}`, values);
    try {
      for (;;) {
        if (this.#closed) throw this.#error(new Error('the snapshot is closed'));
        let rows: R[];
        try {
          rows = (await this.#client.query<R>({ text: `FETCH ${this.#fetchSize} FROM ${name}`, rowMode: 'array' }))
            .rows;
        } catch (e) {
          this.#failed = true;
          throw this.#error(e);
        }
        for (const row of rows) yield row;
        if (rows.length < this.#fetchSize) return;
      }
    } finally {
      if (!this.#closed && !this.#failed) await this.#client.query(`CLOSE ${name}`).catch(() => {});
    }
  }

  /** Memory: `fetchSize` rows. */
  async *resources(setName?: string): AsyncGenerator<ResourceRecord, void, undefined> {
    const it =
      setName === undefined
        ? this.#cursor<ResourceRow>(`SELECT ${RESOURCE_COLUMNS} FROM ${this.#s}.resources ORDER BY uri`, [])
        : this.#cursor<ResourceRow>(
            `SELECT ${RESOURCE_COLUMNS} FROM ${this.#s}.resources WHERE set_name = $1 ORDER BY uri`,
            [setName],
          );
    for await (const row of it) yield toResource(row);
  }

  /** Memory: `fetchSize` rows. */
  async *changes(query: ChangeQuery = {}): AsyncGenerator<ChangeRecord, void, undefined> {
    const after = query.afterSeq ?? 0;
    const through = query.throughSeq ?? Number.MAX_SAFE_INTEGER;
    const it =
      query.setName === undefined
        ? this.#cursor<ChangeRow>(
            `SELECT ${CHANGE_COLUMNS} FROM ${this.#s}.changes WHERE seq > $1 AND seq <= $2 ORDER BY seq`,
            [after, through],
          )
        : this.#cursor<ChangeRow>(
            `SELECT ${CHANGE_COLUMNS} FROM ${this.#s}.changes WHERE set_name = $3 AND seq > $1 AND seq <= $2 ORDER BY seq`,
            [after, through, query.setName],
          );
    for await (const row of it) yield toChange(row);
  }

  async changeListParts(setName: string): Promise<ChangeListPart[]> {
    const rows = await this.#run<PartRow>(
      `SELECT ${PART_COLUMNS} FROM ${this.#s}.change_lists WHERE set_name = $1 ORDER BY number`,
      [setName],
    );
    if (rows.length > 0) return rows.map(toPart);
    return [{ setName, number: 1, fromMs: this.#createdMs, count: 0, lastSeq: 0 }];
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#onClose();
    try {
      await this.#client.query('COMMIT');
      this.#client.release();
    } catch {
      this.#client.release(true);
    }
  }
}
