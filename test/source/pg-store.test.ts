/**
 * What only the PostgreSQL store does (the shared behaviour is in store-conformance): schema versions, lost
 * connections, bad URLs, and `publish --store` / RESOURCESYNC_STORE. Skipped without RESOURCESYNC_TEST_PG.
 */
import assert from 'node:assert/strict';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import pg from 'pg';
import { runPublish } from '../../src/cli/publish.js';
import { isResourceSyncError } from '../../src/core/errors.js';
import { Source } from '../../src/source/index.js';
import { openStore } from '../../src/source/open-store.js';
import { MIGRATIONS, SCHEMA_VERSION } from '../../src/source/pg/migrations.js';
import { openPgStore } from '../../src/source/pg-store.js';
import { tempDir } from './helpers.js';
import { dropTestSchema, freshSchema, openTestPgStore, PG_SKIP, PG_URL } from './pg-helpers.js';

/** Runs `sql` on a connection of its own. */
async function admin<T extends pg.QueryResultRow>(sql: string, values?: unknown[]): Promise<T[]> {
  const c = new pg.Client({ connectionString: PG_URL });
  await c.connect();
  try {
    return (await c.query<T>(sql, values)).rows;
  } finally {
    await c.end();
  }
}

/** Ends every server connection of the store of `schema` (as a restart or a network cut would). */
async function cutConnections(schema: string): Promise<number> {
  const rows = await admin<{ n: number }>(
    'SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE application_name = $1',
    [`resourcesync ${schema}`.slice(0, 63)],
  );
  return rows[0]?.n ?? 0;
}

describe('PostgreSQL store', { skip: PG_SKIP }, () => {
  it('refuses a schema written by a newer resourcesync, and leaves it as it is', async () => {
    const { store, schema, drop } = await openTestPgStore();
    try {
      await store.recordChanges([{ uri: 'a', change: 'created', setName: 's', length: 1 }]);
      assert.equal(await store.schemaVersion(), SCHEMA_VERSION);
      await store.close();
      await admin(
        `INSERT INTO "${schema}".schema_migrations (version, description, applied_ms) VALUES ($1, 'future', 0)`,
        [SCHEMA_VERSION + 1],
      );
      await assert.rejects(openPgStore({ url: PG_URL!, schema }), (e) => {
        assert.ok(isResourceSyncError(e, 'RS_STORE'), String(e));
        assert.match(e.message, new RegExp(`schema ${schema}.*version ${SCHEMA_VERSION + 1}.*newer resourcesync`));
        assert.ok(!e.message.includes('password'));
        return true;
      });
      const rows = await admin<{ n: number }>(`SELECT count(*)::int AS n FROM "${schema}".changes`);
      assert.equal(rows[0]?.n, 1, 'the newer schema is not touched');
    } finally {
      await drop();
    }
  });

  it('migrates a schema of an earlier version in place, keeping its data', async () => {
    const schema = freshSchema();
    // A schema as version 1 of the package left it.
    await admin(`CREATE SCHEMA "${schema}"`);
    await admin(
      `CREATE TABLE "${schema}".schema_migrations (version integer PRIMARY KEY, description text NOT NULL, applied_ms bigint NOT NULL)`,
    );
    await admin(MIGRATIONS[0]!.sql.replaceAll('{s}', `"${schema}"`));
    await admin(`INSERT INTO "${schema}".schema_migrations VALUES (1, 'v1', 0)`);
    await admin(
      `INSERT INTO "${schema}".resources (uri, set_name, length, lastmod_ms) VALUES ('old', 's', 3, 1700000000000)`,
    );
    const store = await openPgStore({ url: PG_URL!, schema });
    try {
      assert.equal(await store.schemaVersion(), SCHEMA_VERSION);
      assert.deepEqual(await store.getResource('old'), {
        uri: 'old',
        setName: 's',
        length: 3,
        hashes: {},
        lastmodMs: 1_700_000_000_000,
      });
      const [c] = await store.recordChanges([
        { uri: 'new', change: 'created', setName: 's', length: 1, links: [{ rel: 'describedby', href: 'm' }] },
      ]);
      assert.deepEqual(c!.links, [{ rel: 'describedby', href: 'm' }]);
    } finally {
      await store.dropSchema();
    }
  });

  it('migrates a new schema once when several processes open it at once', async () => {
    const schema = freshSchema();
    const stores = await Promise.all(Array.from({ length: 4 }, () => openPgStore({ url: PG_URL!, schema })));
    try {
      const rows = await admin<{ version: number }>(`SELECT version FROM "${schema}".schema_migrations ORDER BY 1`);
      assert.deepEqual(
        rows.map((r) => r.version),
        Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1),
      );
    } finally {
      for (const s of stores.slice(1)) await s.close();
      await stores[0]!.dropSchema();
    }
  });

  it('names what is wrong with a store URL', async () => {
    await assert.rejects(openStore('mysql://localhost/x', '/nonexistent'), (e) => isResourceSyncError(e, 'RS_CONFIG'));
    await assert.rejects(openPgStore({ url: PG_URL!, schema: 'Bad-Name' }), (e) => {
      assert.ok(isResourceSyncError(e, 'RS_CONFIG'));
      assert.match(e.message, /"Bad-Name"/);
      return true;
    });
    await assert.rejects(openPgStore({ url: 'postgres://secret:hunter2@127.0.0.1:1/test', retryMs: 300 }), (e) => {
      assert.ok(isResourceSyncError(e, 'RS_STORE'));
      assert.match(e.message, /127\.0\.0\.1:1\/test \(schema resourcesync\).*retried for 300 ms/);
      assert.ok(!e.message.includes('hunter2'), 'the password is not shown');
      return true;
    });
  });

  it('carries on over a lost connection, recording each batch once', async () => {
    const { store, schema, drop } = await openTestPgStore();
    try {
      await store.recordChanges([{ uri: 'a', change: 'created', setName: 's', length: 1 }]);
      for (let round = 0; round < 5; round++) {
        assert.ok((await cutConnections(schema)) > 0, 'the pool had a connection to cut');
        const [c] = await store.recordChanges([{ uri: `b${round}`, change: 'created', setName: 's', length: 1 }]);
        assert.equal(c!.seq, round + 2);
        await cutConnections(schema);
        assert.equal((await store.getResource(`b${round}`))?.length, 1);
      }
      // Cuts while batches are in flight: each batch is in the log once, whatever the cut hit.
      const writes = Array.from({ length: 30 }, (_, i) =>
        store.recordChanges([{ uri: `c${i}`, change: 'created', setName: 's', length: 1 }]),
      );
      for (let i = 0; i < 3; i++) await cutConnections(schema);
      const results = await Promise.all(writes);
      const snap = await store.snapshot();
      const uris: string[] = [];
      try {
        for await (const c of snap.changes()) uris.push(c.uri);
      } finally {
        await snap.close();
      }
      assert.equal(uris.length, 1 + 5 + 30);
      assert.equal(new Set(uris).size, uris.length, 'no batch recorded twice');
      assert.deepEqual(
        results.map((r) => r[0]!.uri),
        writes.map((_, i) => `c${i}`),
      );
    } finally {
      await drop();
    }
  });

  it('fails with a clear error once the server has been gone longer than the retry bound', async () => {
    // A server that accepts connections and closes them at once stands for one that went away.
    const net = await import('node:net');
    const server = net.createServer((s) => s.destroy());
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    try {
      const started = Date.now();
      await assert.rejects(openPgStore({ url: `postgres://postgres@127.0.0.1:${port}/test`, retryMs: 500 }), (e) => {
        assert.ok(isResourceSyncError(e, 'RS_STORE'), String(e));
        assert.match(e.message, new RegExp(`127\\.0\\.0\\.1:${port}/test.*retried for 500 ms`));
        return true;
      });
      assert.ok(Date.now() - started < 30_000, 'the bound holds');
    } finally {
      server.close();
    }
  });

  it('publishes from a PostgreSQL store (--store), and a second run records what changed', async () => {
    const { dir, cleanup } = await tempDir();
    const schema = freshSchema();
    const url = new URL(PG_URL!);
    url.searchParams.set('schema', schema);
    try {
      const coll = join(dir, 'coll');
      await mkdir(coll, { recursive: true });
      for (let i = 0; i < 3; i++) await writeFile(join(coll, `${i}.txt`), `v1 ${i}`);
      const out = join(dir, 'site');
      const err: string[] = [];
      const base = {
        dir: coll,
        out,
        baseUrl: 'https://example.org/data/',
        store: url.href,
        stdout: () => {},
        stderr: (t: string) => void err.push(t),
        progress: false,
      };
      assert.equal(await runPublish(base), 0, err.join(''));
      await writeFile(join(coll, '1.txt'), 'v2');
      assert.equal(await runPublish(base), 0, err.join(''));
      const store = await openPgStore({ url: url.href });
      try {
        assert.equal(await store.countResources(), 3);
        const snap = await store.snapshot();
        const log: string[] = [];
        try {
          for await (const c of snap.changes()) log.push(`${c.change} ${c.uri}`);
        } finally {
          await snap.close();
        }
        assert.deepEqual(log, ['updated 1.txt']);
      } finally {
        await store.dropSchema();
      }
    } finally {
      await cleanup();
    }
  });
});

describe('PostgreSQL store shared by several processes', { skip: PG_SKIP }, () => {
  it('tells each handle of the changes the others record, in order, once, across a lost notice connection', async () => {
    const { store: a, schema, drop } = await openTestPgStore();
    const b = await openPgStore({ url: PG_URL!, schema, retryMs: 5000 });
    const c = await openPgStore({ url: PG_URL!, schema, retryMs: 5000 });
    try {
      const seen = new Map<PgStoreLike, number[]>([
        [a, []],
        [b, []],
        [c, []],
      ]);
      for (const [s, list] of seen) s.watch((changes) => list.push(...changes.map((ch) => ch.seq)));
      // The notice connections are up once a change of another handle arrives.
      await until(async () => {
        await c.recordChanges([{ uri: 'warm', change: 'created', setName: 's', length: 1 }]);
        return seen.get(a)!.length > 0 && seen.get(b)!.length > 0;
      });
      // Changes up to here (the warm-up's) may still be on their way: only later ones are compared.
      const head0 = (await a.head()).seq;
      const writes: Promise<unknown>[] = [];
      for (let i = 0; i < 30; i++)
        writes.push(
          [a, b, c][i % 3]!.recordChanges([
            { uri: `r${i}`, change: 'created', setName: 's', length: 1 },
            { uri: `r${i}b`, change: 'created', setName: 't', length: 1 },
          ]),
        );
      await Promise.all(writes);
      // A cut of every connection of the Source (notice connections too): changes recorded meanwhile still come.
      await cutConnections(schema);
      for (let i = 30; i < 36; i++)
        await [a, b, c][i % 3]!.recordChanges([{ uri: `r${i}`, change: 'created', setName: 's', length: 1 }]);
      const total = 30 * 2 + 6;
      const all = Array.from({ length: total }, (_, i) => head0 + i + 1);
      // Each handle is told every change but its own, in seq order, once.
      const own = new Map<PgStoreLike, number[]>([
        [a, []],
        [b, []],
        [c, []],
      ]);
      const snap = await a.snapshot();
      try {
        for await (const ch of snap.changes({ afterSeq: head0 })) {
          const i = Number(/^r(\d+)/.exec(ch.uri)![1]);
          own.get([a, b, c][i % 3]!)!.push(ch.seq);
        }
      } finally {
        await snap.close();
      }
      await until(async () => {
        for (const [s, seenAll] of seen) {
          const list = seenAll.filter((q) => q > head0);
          const expected = all.filter((q) => !own.get(s)!.includes(q));
          if (list.length < expected.length) return false;
          assert.deepEqual(list, expected);
        }
        return true;
      });
    } finally {
      await b.close();
      await c.close();
      await drop();
    }
  });

  it('gives the change listeners of every Source on the schema the changes recorded through any, and fresh documents', async () => {
    const { store: a, schema, drop } = await openTestPgStore();
    const b = await openPgStore({ url: PG_URL!, schema, retryMs: 5000 });
    const { dir, cleanup } = await tempDir();
    const base = 'http://localhost/';
    const sa = await Source.open({ store: a, baseUrl: base, siteDir: join(dir, 'a') });
    const sb = await Source.open({ store: b, baseUrl: base, siteDir: join(dir, 'b') });
    try {
      const heard: string[] = [];
      sb.onChange((changes) => heard.push(...changes.map((c) => `${c.change} ${c.uri}`)));
      await until(async () => {
        await sa.record([{ uri: `warm${heard.length}`, change: 'created', setName: 's', length: 1 }], true);
        return heard.length > 0;
      });
      await sa.record([{ uri: 'x', change: 'created', setName: 's', length: 1 }], true);
      await sa.record([{ uri: 'x', change: 'deleted', setName: 's' }], true);
      await until(async () => heard.includes(`deleted ${base}x`));
      // (warm-up changes may come before them)
      assert.deepEqual(
        heard.filter((h) => !h.includes('warm')),
        [`created ${base}x`, `deleted ${base}x`],
      );
      // Both answer with the same Change List content.
      const text = async (s: Source, path: string) => readFile((await s.document(path))!.path, 'utf8');
      const entries = async (s: Source) => {
        // The Change List, or the last (open) part of a Change List Index.
        let part = await text(s, '/resourcesync/s/changelist.xml');
        if (part.includes('<sitemapindex')) {
          const parts = [...part.matchAll(/<loc>([^<]*)<\/loc>/g)].map((m) => new URL(m[1]!).pathname);
          part = await text(s, parts[parts.length - 1]!);
        }
        return [...part.matchAll(/<loc>([^<]*)<\/loc>[\s\S]*?change="(\w+)"/g)].map((m) => `${m[2]} ${m[1]}`);
      };
      assert.deepEqual(await entries(sb), await entries(sa));
      const eb = await entries(sb);
      assert.ok(eb.includes(`deleted ${base}x`), JSON.stringify(eb));
    } finally {
      await sa.close();
      await sb.close();
      await b.close();
      await cleanup();
      await drop();
    }
  });
});

describe('PostgreSQL store: the database goes away while serving', { skip: PG_SKIP }, () => {
  it('serves the documents generated last, retries writes until it is back, and fails clearly after the bound', async () => {
    const proxy = await tcpProxy(new URL(PG_URL!));
    const schema = freshSchema();
    const url = new URL(PG_URL!);
    url.host = `127.0.0.1:${proxy.port}`;
    const store = await openPgStore({ url: url.href, schema, retryMs: 10_000, readRetryMs: 300 });
    const { dir, cleanup } = await tempDir();
    const warnings: string[] = [];
    const source = await Source.open({
      store,
      baseUrl: 'http://localhost/',
      siteDir: dir,
      onWarning: (m) => void warnings.push(m),
    });
    try {
      await source.record([{ uri: 'a', change: 'created', setName: 's', length: 1 }], true);
      const before = await source.document('/resourcesync/s/resourcelist.xml');
      const text = await readFile(before!.path, 'utf8');
      proxy.stop();
      // Documents: the last generation, at once.
      const during = await source.document('/resourcesync/s/resourcelist.xml');
      assert.equal(await readFile(during!.path, 'utf8'), text);
      assert.ok(
        warnings.some((w) => w.includes('as generated last')),
        warnings.join('\n'),
      );
      // A write waits for the database...
      let done = false;
      const write = store.recordChanges([{ uri: 'b', change: 'created', setName: 's', length: 1 }]).finally(() => {
        done = true;
      });
      await new Promise((r) => setTimeout(r, 500));
      assert.equal(done, false, 'the write is retried, not failed');
      await proxy.start();
      const [b] = await write;
      assert.equal(b!.seq, 2);
      // ... and fails, naming the store, when it stays away longer than the bound.
      proxy.stop();
      await assert.rejects(store.recordChanges([{ uri: 'c', change: 'created', setName: 's', length: 1 }]), (e) => {
        assert.ok(isResourceSyncError(e, 'RS_STORE'), String(e));
        assert.match(
          e.message,
          new RegExp(
            `127\\.0\\.0\\.1:${proxy.port}/test \\(schema ${schema}\\): cannot record changes \\(retried for 10000 ms\\)`,
          ),
        );
        return true;
      });
    } finally {
      proxy.stop();
      await source.close();
      await store.close();
      await cleanup();
      await dropTestSchema(schema);
    }
  });
});

/** A TCP proxy to the database that a test can stop (every connection cut, new ones refused) and start again. */
async function tcpProxy(target: URL): Promise<{ port: number; stop: () => void; start: () => Promise<void> }> {
  const net = await import('node:net');
  const sockets = new Set<import('node:net').Socket>();
  let server: import('node:net').Server | undefined;
  let port = 0;
  const start = async (): Promise<void> => {
    if (server !== undefined) return;
    const s = net.createServer((client) => {
      const upstream = net.connect(Number(target.port || 5432), target.hostname);
      for (const x of [client, upstream]) {
        sockets.add(x);
        x.on('close', () => sockets.delete(x));
        x.on('error', () => {
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream);
      upstream.pipe(client);
    });
    await new Promise<void>((resolve, reject) => {
      s.once('error', reject);
      s.listen(port, '127.0.0.1', () => resolve());
    });
    port = (s.address() as { port: number }).port;
    server = s;
  };
  await start();
  return {
    get port() {
      return port;
    },
    stop: () => {
      server?.close();
      server = undefined;
      for (const x of sockets) x.destroy();
    },
    start,
  };
}

type PgStoreLike = Awaited<ReturnType<typeof openPgStore>>;

/** Polls `cond` (generous bound: the machine is loaded). */
async function until(cond: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}
