/**
 * Which {@link SourceStore} a Source uses: the embedded SQLite file in its state directory (the default), or a
 * PostgreSQL schema named by a `postgres://` URL (`--store`, or the `RESOURCESYNC_STORE` environment variable),
 * which several `serve` processes can share.
 *
 * @module
 */
import { join } from 'node:path';
import { ResourceSyncError } from '../core/errors.js';
import type { PgStore, PgStoreOptions } from './pg-store.js';
import { openSqliteStore } from './sqlite-store.js';
import type { SourceStore } from './store.js';

/** The environment variable naming the store when no `store` option is given. */
export const STORE_ENV = 'RESOURCESYNC_STORE';

/**
 * The store spec in force: `spec` when given, else `RESOURCESYNC_STORE`, else undefined (SQLite in the state
 * directory). An empty value counts as not given.
 */
export function storeSpec(spec?: string): string | undefined {
  const s = spec ?? process.env[STORE_ENV];
  return s === undefined || s === '' ? undefined : s;
}

/** The spec without a password, for messages. */
export function describeStoreSpec(spec: string): string {
  return spec.replace(/^([a-z]+:\/\/[^:@/]*):[^@/]*@/i, '$1:***@');
}

/**
 * Opens the store of a Source: `spec` (see {@link storeSpec}) is `postgres://user@host:port/db?schema=name`
 * (or `postgresql://`), `sqlite` or `sqlite:<path>`; without one, `<stateDir>/source.db`. The PostgreSQL driver
 * is loaded only when a PostgreSQL store is asked for.
 *
 * @throws ResourceSyncError `RS_CONFIG` for a spec that is none of these; `RS_STORE` when the store cannot be
 *   opened.
 * @example
 * ```ts
 * const store = await openStore('postgres://postgres@127.0.0.1/test?schema=photos', 'state');
 * ```
 */
export async function openStore(spec: string | undefined, stateDir: string): Promise<SourceStore> {
  const s = storeSpec(spec);
  if (s === undefined || s === 'sqlite') return openSqliteStore({ path: join(stateDir, 'source.db') });
  if (s.startsWith('sqlite:')) return openSqliteStore({ path: s.slice('sqlite:'.length) });
  if (/^postgres(ql)?:\/\//i.test(s)) {
    return openPgStore({ url: s });
  }
  throw new ResourceSyncError(
    'RS_CONFIG',
    `store ${JSON.stringify(describeStoreSpec(s))}: expected postgres://user@host:port/database?schema=name, sqlite or sqlite:<path>`,
  );
}

/**
 * Opens a PostgreSQL store (see `pg-store.ts`): the driver is loaded on the first call, not when the module is
 * imported (it costs ~0.2 s of start-up).
 *
 * @example
 * ```ts
 * const store = await openPgStore({ url: 'postgres://postgres@127.0.0.1/test', schema: 'photos' });
 * ```
 */
export async function openPgStore(options: PgStoreOptions): Promise<PgStore> {
  const pg = await import('./pg-store.js');
  return pg.openPgStore(options);
}
