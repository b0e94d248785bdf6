// kill -9 of a `resourcesync sync` child process in the middle of a baseline and of an incremental run; the next
// run must converge to the Source's exact content (compared byte for byte), with no temporary file left.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Destination } from '../../src/destination/destination.js';
import { DestinationState } from '../../src/destination/state.js';
import {
  type ChangeSpec,
  StaticSource,
  cliCommand,
  localPathOf,
  makeResources,
  readTree,
  repoRoot,
} from './static-source.js';

const AT = '2024-05-01T00:00:00Z';

function startChild(args: string[]): ChildProcess {
  const { cmd, args: base } = cliCommand();
  return spawn(cmd, [...base, ...args], { stdio: ['ignore', 'pipe', 'pipe'], cwd: repoRoot() });
}

async function killWhen(child: ChildProcess, cond: () => boolean, timeoutMs = 15_000): Promise<boolean> {
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const deadline = Date.now() + timeoutMs;
  let killed = false;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) break;
    if (cond()) {
      child.kill('SIGKILL');
      killed = true;
      break;
    }
    await new Promise((r) => setTimeout(r, 2));
  }
  if (!killed && child.exitCode === null) child.kill('SIGKILL');
  await exited;
  return killed;
}

function resourceHits(src: StaticSource): number {
  return src.log.filter((p) => p.startsWith('/res/')).length;
}

describe('kill -9 mid-run, then rerun', { timeout: 60_000 }, () => {
  let src: StaticSource;
  let dir: string;
  before(async () => {
    src = await StaticSource.start();
    dir = await mkdtemp(join(tmpdir(), 'rs-crash-'));
  });
  after(async () => {
    await src.close();
    await rm(dir, { recursive: true, force: true });
  });

  // `file` durability installs each file as it comes; `batch` stages files and renames them into place when a
  // batch commits (every second here), so its kills wait until files of the killed run are visible.
  for (const durability of ['file', 'batch'] as const) {
    it(`converges after a kill during the baseline and during an incremental run (durability ${durability})`, async () => {
      await rm(dir, { recursive: true, force: true });
      const n = 120;
      const resources = makeResources(n, 3000, 'crash');
      src.publishResourceList(resources, AT, 3);
      for (const r of resources) src.set(r.path, r.body, 'text/plain', 15); // slow, so the kill lands mid-run
      src.publishChangeLists([{ from: AT, changes: [] }]);
      src.publishCapabilities();
      const url = src.url('/capabilitylist.xml');

      // 1. Baseline killed after ~40 resources were requested.
      const start = resourceHits(src);
      const concurrency = durability === 'file' ? '4' : '1';
      const child = startChild(['sync', url, dir, '--concurrency', concurrency, '--durability', durability]);
      const first = join(dir, localPathOf(src, resources[0]!.path));
      const killed = await killWhen(
        child,
        () => resourceHits(src) - start >= 40 && (durability === 'file' || existsSync(first)),
      );
      assert.ok(killed, 'the child was killed mid-run');
      const st = DestinationState.open(dir, { readonly: true });
      assert.equal(st.getWatermark(), undefined, 'no watermark after an interrupted baseline');
      assert.equal(st.journal()?.op, 'baseline');
      st.close();

      const s1 = await new Destination({ url, dir, concurrency: 8, durability }).sync();
      assert.equal(s1.operation, 'baseline');
      assert.equal(s1.counts.failed, 0, JSON.stringify(s1.failures));
      assert.equal(s1.complete, true);
      assert.ok(s1.counts.skipped > 0, 'resources of the killed run were kept');
      const expected = new Map(resources.map((r) => [localPathOf(src, r.path), r.body]));
      assert.deepEqual(sortedTree(readTree(dir)), sortedTree(expected));

      // 2. Incremental run killed mid-way: 100 updates, 10 deletions, 5 creations.
      const changes: ChangeSpec[] = [];
      let t = Date.parse('2024-05-01T01:00:00Z');
      const next = (): string => new Date((t += 1000)).toISOString().replace('.000Z', 'Z');
      for (let i = 0; i < 100; i++)
        changes.push({
          path: `/res/r${i}.txt`,
          change: 'updated',
          datetime: next(),
          body: Buffer.from(`v2 of ${i}\n`),
        });
      for (let i = 100; i < 110; i++) changes.push({ path: `/res/r${i}.txt`, change: 'deleted', datetime: next() });
      for (let i = 0; i < 5; i++)
        changes.push({
          path: `/res/new${i}.txt`,
          change: 'created',
          datetime: next(),
          body: Buffer.from(`new ${i}\n`),
        });
      src.publishChangeLists([
        { from: AT, until: '2024-05-01T01:01:00Z', changes: changes.slice(0, 50) },
        { from: '2024-05-01T01:01:00Z', changes: changes.slice(50) },
      ]);
      for (const c of changes) if (c.body !== undefined) src.set(c.path, c.body, 'text/plain', 15);
      src.publishCapabilities();
      const start2 = resourceHits(src);
      const child2 = startChild([
        'sync',
        url,
        dir,
        '--delete',
        '--concurrency',
        concurrency,
        '--durability',
        durability,
      ]);
      // In `batch` durability the kill waits for a committed batch (a kill during its renames is fine for the
      // copy, but leaves too little to check that applied changes are kept).
      const committed = recordedAfter(dir, src.url('/res/r25.txt'), AT); // applied in order at concurrency 1;
      try {
        assert.ok(
          await killWhen(child2, () => resourceHits(src) - start2 >= 30 && (durability === 'file' || committed())),
          'the child was killed mid-run',
        );
      } finally {
        committed.close();
      }
      const st2 = DestinationState.open(dir, { readonly: true });
      assert.equal(st2.getWatermark()?.at, AT, 'the watermark did not move');
      st2.close();

      const s2 = await new Destination({ url, dir, delete: true, durability }).sync();
      assert.equal(s2.operation, 'incremental');
      assert.equal(s2.counts.failed, 0, JSON.stringify(s2.failures));
      assert.ok(
        s2.counts.skipped >= 20,
        `changes applied before the kill are not fetched again (${s2.counts.skipped})`,
      );
      const want = new Map(expected);
      for (const c of changes) {
        const p = localPathOf(src, c.path);
        if (c.change === 'deleted') want.delete(p);
        else want.set(p, c.body as Buffer);
      }
      assert.deepEqual(sortedTree(readTree(dir)), sortedTree(want));
      const st3 = DestinationState.open(dir, { readonly: true });
      assert.equal(st3.getWatermark()?.at, changes[changes.length - 1]?.datetime);
      assert.equal(st3.journal(), undefined);
      st3.close();
      assert.ok(!existsSync(join(dir, '.resourcesync', 'tmp', 'x')));
    });
  }
});

describe('SIGINT mid-run', { timeout: 60_000 }, () => {
  it('exits with 130, keeps the state consistent, and the next run completes', async () => {
    const src = await StaticSource.start();
    const dir = await mkdtemp(join(tmpdir(), 'rs-sigint-'));
    try {
      const resources = makeResources(80, 500, 'sigint');
      src.publishResourceList(resources, AT, 1);
      for (const r of resources) src.set(r.path, r.body, 'text/plain', 20);
      src.publishCapabilities();
      const url = src.url('/capabilitylist.xml');
      const child = startChild(['sync', url, dir, '--concurrency', '2']);
      let stderr = '';
      child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
      const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
      while (resourceHits(src) < 10 && child.exitCode === null) await new Promise((r) => setTimeout(r, 2));
      child.kill('SIGINT');
      assert.equal(await exited, 130, stderr);
      assert.match(stderr, /interrupted|RS_ABORTED/);
      const s = await new Destination({ url, dir }).sync();
      assert.equal(s.operation, 'baseline');
      assert.equal(s.complete, true);
      assert.ok(s.counts.skipped > 0);
      const expected = new Map(resources.map((r) => [localPathOf(src, r.path), r.body]));
      assert.deepEqual(sortedTree(readTree(dir)), sortedTree(expected));
    } finally {
      await src.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

/** Polls the copy's state (read-only) for a record of `uri` whose source datetime is after `after`. */
function recordedAfter(dir: string, uri: string, after: string): (() => boolean) & { close(): void } {
  let st: DestinationState | undefined;
  const check = (): boolean => {
    try {
      st ??= DestinationState.open(dir, { readonly: true });
      const dt = st.get(uri)?.sourceDatetime;
      return dt !== undefined && dt > after;
    } catch {
      return false;
    }
  };
  return Object.assign(check, { close: () => st?.close() });
}

function sortedTree(m: Map<string, Buffer>): [string, string][] {
  return [...m.entries()]
    .map(([k, v]) => [k, v.toString('hex')] as [string, string])
    .sort(([a], [b]) => (a < b ? -1 : 1));
}
