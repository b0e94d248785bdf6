/**
 * Subscriptions of the WebSub hub, persisted in SQLite (better-sqlite3, WAL, `synchronous=FULL`): a verified
 * subscription survives a hub restart or crash. One row per (topic, callback) (WebSub §5.1: a new subscription
 * request for the same pair replaces the previous one).
 *
 * @module
 */
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { ResourceSyncError } from '../core/errors.js';

/** A verified subscription. */
export interface Subscription {
  readonly topic: string;
  readonly callback: string;
  /** `hub.secret` (WebSub §5.1), when the subscriber gave one. */
  readonly secret: string | undefined;
  readonly leaseSeconds: number;
  /** Epoch ms after which the subscription is expired (WebSub §5.1 `hub.lease_seconds`). */
  readonly expiresAt: number;
  readonly createdAt: number;
}

interface Row {
  topic: string;
  callback: string;
  secret: string | null;
  lease_seconds: number;
  expires_at: number;
  created_at: number;
}

function toSubscription(r: Row): Subscription {
  return {
    topic: r.topic,
    callback: r.callback,
    secret: r.secret ?? undefined,
    leaseSeconds: r.lease_seconds,
    expiresAt: r.expires_at,
    createdAt: r.created_at,
  };
}

/** The hub's subscription table. Use `':memory:'` for a hub that forgets on restart. */
export class SubscriptionStore {
  readonly #db: Database.Database;
  readonly #upsert: Database.Statement;
  readonly #delete: Database.Statement;
  readonly #active: Database.Statement;
  readonly #get: Database.Statement;
  readonly #purge: Database.Statement;
  readonly #count: Database.Statement;

  private constructor(db: Database.Database) {
    this.#db = db;
    db.exec(`CREATE TABLE IF NOT EXISTS subscriptions (
      topic TEXT NOT NULL,
      callback TEXT NOT NULL,
      secret TEXT,
      lease_seconds INTEGER NOT NULL,
      expires_at INTEGER NOT NULL,
      created_at INTEGER NOT NULL,
      PRIMARY KEY (topic, callback)
    ) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS subscriptions_expiry ON subscriptions (expires_at);`);
    this.#upsert =
      db.prepare(`INSERT INTO subscriptions (topic, callback, secret, lease_seconds, expires_at, created_at)
      VALUES (@topic, @callback, @secret, @lease_seconds, @expires_at, @created_at)
      ON CONFLICT (topic, callback) DO UPDATE SET secret = excluded.secret, lease_seconds = excluded.lease_seconds,
      expires_at = excluded.expires_at`);
    this.#delete = db.prepare('DELETE FROM subscriptions WHERE topic = ? AND callback = ?');
    this.#active = db.prepare(
      'SELECT * FROM subscriptions WHERE topic = ? AND expires_at > ? ORDER BY created_at, callback',
    );
    this.#get = db.prepare('SELECT * FROM subscriptions WHERE topic = ? AND callback = ?');
    this.#purge = db.prepare('DELETE FROM subscriptions WHERE expires_at <= ? RETURNING topic, callback');
    this.#count = db.prepare('SELECT count(*) AS n FROM subscriptions WHERE expires_at > ?');
  }

  /** Opens (creating when needed) the database at `path`. Errors are `RS_STORE` naming the path. */
  static open(path: string): SubscriptionStore {
    try {
      if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
      const db = new Database(path);
      db.pragma('journal_mode = WAL');
      db.pragma('synchronous = FULL');
      db.pragma('busy_timeout = 5000');
      return new SubscriptionStore(db);
    } catch (e) {
      throw new ResourceSyncError('RS_STORE', `cannot open the hub database: ${(e as Error).message}`, {
        url: path,
        cause: e,
      });
    }
  }

  /** Adds or renews a subscription (a renewal keeps `createdAt`). */
  put(sub: Subscription): void {
    this.#upsert.run({
      topic: sub.topic,
      callback: sub.callback,
      secret: sub.secret ?? null,
      lease_seconds: sub.leaseSeconds,
      expires_at: sub.expiresAt,
      created_at: sub.createdAt,
    });
  }

  /** Removes a subscription; true when there was one. */
  delete(topic: string, callback: string): boolean {
    return this.#delete.run(topic, callback).changes > 0;
  }

  get(topic: string, callback: string): Subscription | undefined {
    const row = this.#get.get(topic, callback) as Row | undefined;
    return row === undefined ? undefined : toSubscription(row);
  }

  /** Subscriptions to `topic` whose lease has not expired at `now`. */
  active(topic: string, now: number = Date.now()): Subscription[] {
    return (this.#active.all(topic, now) as Row[]).map(toSubscription);
  }

  /** Number of unexpired subscriptions. */
  count(now: number = Date.now()): number {
    return (this.#count.get(now) as { n: number }).n;
  }

  /** Deletes expired subscriptions, returning them. */
  purgeExpired(now: number = Date.now()): { topic: string; callback: string }[] {
    return this.#purge.all(now) as { topic: string; callback: string }[];
  }

  close(): void {
    if (this.#db.open) this.#db.close();
  }
}
