/**
 * PostgreSQL for tests: `RESOURCESYNC_TEST_PG=postgres://…` names a server (CI sets it; the tests then fail when it
 * is unreachable). Without it the PostgreSQL tests are skipped, and say so and how to run them.
 *
 * Every store a test opens lives in a fresh schema `rs_test_<run>_<n>`, dropped when the test is done.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { openPgStore, type PgStore, type PgStoreOptions } from '../../src/source/pg-store.js';

/** The server the PostgreSQL tests use, or undefined (skip them). */
export const PG_URL: string | undefined = process.env.RESOURCESYNC_TEST_PG || undefined;

/** The `skip` option of a suite of PostgreSQL tests: false when they run, else the reason shown. */
export const PG_SKIP: string | false =
  PG_URL === undefined
    ? 'PostgreSQL tests skipped: set RESOURCESYNC_TEST_PG=postgres://postgres@127.0.0.1:5432/test to run them'
    : false;

if (PG_SKIP !== false && process.env.RS_PG_SKIP_NOTED === undefined) {
  process.env.RS_PG_SKIP_NOTED = '1';
  console.log(PG_SKIP);
}

const RUN = `rs_test_${process.pid}_${randomBytes(3).toString('hex')}`;
let counter = 0;

/** A schema name no other test (or test run) uses. */
export function freshSchema(): string {
  return `${RUN}_${++counter}`;
}

/**
 * Drops a test schema with plain SQL (not through a store, which would refuse a schema a test made newer than
 * this version).
 */
export async function dropTestSchema(schema: string): Promise<void> {
  const c = new pg.Client({ connectionString: PG_URL });
  await c.connect();
  try {
    await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await c.end();
  }
}

/** Opens a store in a fresh schema of the test server; `drop` closes it and drops the schema. */
export async function openTestPgStore(
  options: Omit<PgStoreOptions, 'url'> = {},
): Promise<{ store: PgStore; schema: string; drop: () => Promise<void> }> {
  if (PG_URL === undefined) throw new Error(String(PG_SKIP));
  const schema = options.schema ?? freshSchema();
  const store = await openPgStore({ retryMs: 5000, ...options, url: PG_URL, schema });
  return {
    store,
    schema,
    drop: async () => {
      await store.close();
      await dropTestSchema(schema);
    },
  };
}
