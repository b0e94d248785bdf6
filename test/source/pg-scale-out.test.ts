/**
 * Several `serve` processes on one PostgreSQL store, behind a round-robin balancer: a Destination harvests through
 * it (every request may go to another instance), the instance that watches the collection is killed (-9) in
 * the middle of a burst of changes and started again, and an audit finds the Destination in sync, with every
 * change in the log once. Skipped without RESOURCESYNC_TEST_PG.
 */
import assert from 'node:assert/strict';
import { createServer, request, type Server } from 'node:http';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { Destination } from '../../src/destination/destination.js';
import { openPgStore } from '../../src/source/pg-store.js';
import { killChildren, runCli, waitForEvent, type CliRun } from '../cli/cli-child.js';
import { tempDir } from './helpers.js';
import { dropTestSchema, freshSchema, PG_SKIP, PG_URL } from './pg-helpers.js';

after(killChildren);

/** A balancer sending each request to the next live backend in turn. */
async function balancer(): Promise<{
  server: Server;
  port: number;
  backends: Map<string, number>;
  hits: Map<string, number>;
}> {
  const backends = new Map<string, number>();
  const hits = new Map<string, number>();
  let next = 0;
  const server = createServer((req, res) => {
    const live = [...backends.entries()];
    if (live.length === 0) {
      res.writeHead(503).end();
      return;
    }
    const [name, port] = live[next++ % live.length]!;
    hits.set(name, (hits.get(name) ?? 0) + 1);
    const up = request({ host: '127.0.0.1', port, path: req.url, method: req.method, headers: req.headers }, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    up.on('error', () => {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
    req.pipe(up);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as { port: number }).port, backends, hits };
}

describe('several serve processes on one PostgreSQL store', { skip: PG_SKIP }, () => {
  it('answer alike through a balancer, survive a kill -9 of the writer mid-burst, and a Destination audits in sync', async () => {
    const { dir, cleanup } = await tempDir('rs-scale-out-');
    const schema = freshSchema();
    const url = new URL(PG_URL!);
    url.searchParams.set('schema', schema);
    const lb = await balancer();
    const base = `http://127.0.0.1:${lb.port}/`;
    const coll = join(dir, 'coll');
    const runs: CliRun[] = [];
    const serve = async (name: string, watch: boolean): Promise<CliRun> => {
      const r = runCli([
        'serve',
        coll,
        '--port',
        '0',
        '--base-url',
        base,
        '--store',
        url.href,
        '--state',
        join(dir, `state-${name}`),
        '--json',
        '--no-notify',
        ...(watch ? [] : ['--no-watch']),
      ]);
      runs.push(r);
      const listening = await waitForEvent(r, 'listening', () => true, 120_000);
      lb.backends.set(name, Number(new URL(String(listening.url)).port));
      return r;
    };
    try {
      await mkdir(coll, { recursive: true });
      for (let i = 0; i < 40; i++) await writeFile(join(coll, `f${String(i).padStart(3, '0')}.txt`), `v1 ${i}`);
      // The writer first (its start-up scan is the baseline), then two that only serve.
      let writer = await serve('w', true);
      await serve('r1', false);
      await serve('r2', false);
      const dest = join(dir, 'dest');
      const d = (): Destination =>
        new Destination({ url: `${base}.well-known/resourcesync`, dir: dest, durability: 'none', delete: true });
      const first = await d().baseline();
      assert.equal(first.complete, true, JSON.stringify(first.failures));
      assert.equal(first.counts.created, 40);

      // A burst of changes; the writer is killed in the middle of it (once it has recorded some: it watches) and
      // started again.
      const store = await openPgStore({ url: url.href });
      for (let i = 0; i < 20; i++) await writeFile(join(coll, `f${String(i).padStart(3, '0')}.txt`), `v2 ${i}`);
      for (let n = 0; (await store.head()).seq === 0; n++) {
        assert.ok(n < 1200, 'the watching writer records changes');
        await new Promise((r) => setTimeout(r, 50));
      }
      for (let i = 0; i < 10; i++) await writeFile(join(coll, `new${i}.txt`), `new ${i}`);
      writer.child.kill('SIGKILL');
      lb.backends.delete('w');
      await writer.exit;
      for (let i = 20; i < 30; i++) await rm(join(coll, `f${String(i).padStart(3, '0')}.txt`));
      for (let i = 30; i < 35; i++) await writeFile(join(coll, `f${String(i).padStart(3, '0')}.txt`), `v3 ${i}`);
      writer = await serve('w', true);

      // Everything is recorded once the restarted writer's start-up scan is done (it is, at 'listening').
      try {
        const snap = await store.snapshot();
        const last = new Map<string, string>();
        let prev = 0;
        try {
          for await (const c of snap.changes()) {
            assert.equal(c.seq, prev + 1, 'gapless');
            prev = c.seq;
            // Nothing doubled: a resource is not created twice without a deletion between, nor deleted twice.
            const before = last.get(c.uri);
            if (c.change === 'created')
              assert.ok(before === undefined || before === 'deleted', `${c.uri} created twice`);
            if (c.change === 'deleted') assert.notEqual(before, 'deleted', `${c.uri} deleted twice`);
            last.set(c.uri, c.change);
          }
        } finally {
          await snap.close();
        }
        assert.equal(await store.countResources(), 40 + 10 - 10);
      } finally {
        await store.close();
      }

      const inc = await d().incremental();
      assert.equal(inc.complete, true, JSON.stringify(inc.failures));
      const audit = await d().audit();
      assert.equal(audit.inSync, true, JSON.stringify(audit.audit));
      const local = join(dest, `127.0.0.1_${lb.port}`);
      assert.equal(await readFile(join(local, 'f000.txt'), 'utf8'), 'v2 0');
      assert.equal(await readFile(join(local, 'f030.txt'), 'utf8'), 'v3 30');
      assert.equal(await readFile(join(local, 'new9.txt'), 'utf8'), 'new 9');
      await assert.rejects(readFile(join(local, 'f020.txt')), { code: 'ENOENT' });
      // Every instance answered some of it.
      for (const name of ['w', 'r1', 'r2']) assert.ok((lb.hits.get(name) ?? 0) > 0, `${name} served nothing`);
    } finally {
      for (const r of runs) r.child.kill('SIGTERM');
      await Promise.all(runs.map((r) => r.exit));
      lb.server.close();
      await dropTestSchema(schema);
      await cleanup();
    }
  });
});
