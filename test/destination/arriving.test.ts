// Dump packages applied while they arrive (src/io/zip-stream.ts, baseline.ts, incremental.ts): the Source's
// package is sent in two parts, and the test looks at the copy between them.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Destination, type DestinationOptions } from '../../src/destination/destination.js';
import {
  type ChangeListSpec,
  StaticSource,
  cliCommand,
  localPathOf,
  makeResources,
  readTree,
  repoRoot,
} from './static-source.js';

const AT = '2024-02-01T00:00:00Z';
const T0 = '2024-03-01T00:00:00Z';
const FAST_HTTP = { retries: 1, retryBaseDelayMs: 5, maxRetryDelayMs: 20 };

/** Resolves once `seen()` holds (true), or after `ms` (false). */
async function waitFor(seen: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (seen()) return true;
    await sleep(20);
  }
  return seen();
}

describe('dump packages applied while they arrive', () => {
  let src: StaticSource;
  let dir: string;
  const dirs: string[] = [];
  before(async () => {
    src = await StaticSource.start();
  });
  after(async () => {
    await src.close();
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });
  beforeEach(async () => {
    dir = await newDir();
    for (const p of [...src.routes.keys()]) src.remove(p);
    src.clearFaults();
  });
  async function newDir(): Promise<string> {
    const d = await mkdtemp(join(tmpdir(), 'rs-arriving-'));
    dirs.push(d);
    return d;
  }
  function dest(extra: Partial<DestinationOptions> = {}, into = dir): Destination {
    return new Destination({
      url: src.url('/capabilitylist.xml'),
      dir: into,
      http: FAST_HTTP,
      durability: 'none',
      ...extra,
    });
  }
  const local = (into: string, p: string): string => join(into, localPathOf(src, p));

  it('installs a Resource Dump package’s files before the package has fully arrived (and not with applyArriving false)', async () => {
    const resources = makeResources(40, 300, 'arrive');
    src.publishResourceList(resources, AT, 2);
    const [zip] = await src.publishResourceDump(resources, AT, 1);
    src.publishCapabilities();
    const run = async (applyArriving: boolean): Promise<boolean> => {
      const into = await newDir();
      let early = false;
      src.gate('/dump-1.zip', Math.floor((zip as Buffer).length * 0.7), async () => {
        early = await waitFor(() => existsSync(local(into, '/res/r0.txt')), applyArriving ? 5000 : 1500);
      });
      const start = src.log.length;
      const s = await dest({ applyArriving }, into).baseline();
      assert.equal(s.counts.failed, 0, JSON.stringify(s.failures));
      assert.equal(s.counts.created, 40);
      assert.deepEqual(s.via, ['dump']);
      assert.equal(s.watermarkAfter, AT);
      assert.equal(src.log.slice(start).filter((p) => p.startsWith('/res/')).length, 0, 'nothing fetched one by one');
      for (const r of resources) assert.deepEqual(readFileSync(local(into, r.path)), r.body, r.path);
      assert.equal(readTree(join(into, '.resourcesync', 'tmp')).size, 0);
      return early;
    };
    assert.equal(await run(true), true, 'r0 installed while the rest of the package was held back');
    assert.equal(await run(false), false, 'without it, nothing before the package is in');
  });

  it('checks again through the Resource List what it installed from a package that is cut short', async () => {
    const resources = makeResources(40, 300, 'cut');
    // The package holds an older r0 (its manifest describing those bytes); the list and the Source the new one.
    const older = resources.map((r, i) => (i === 0 ? { ...r, body: Buffer.alloc(r.body.length, 0x41) } : r));
    const [zip] = await src.publishResourceDump(older, AT, 1);
    src.publishResourceList(resources, AT, 2);
    src.publishCapabilities();
    let early = false;
    src.gate(
      '/dump-1.zip',
      Math.floor((zip as Buffer).length * 0.6),
      async () => {
        early = await waitFor(() => existsSync(local(dir, '/res/r0.txt')), 5000);
      },
      true, // the connection is cut instead of the rest being sent
    );
    const start = src.log.length;
    const s = await dest().baseline();
    assert.equal(early, true, 'r0 was installed from the package before it was cut');
    assert.equal(s.counts.failed, 0, JSON.stringify(s.failures));
    assert.equal(s.complete, true);
    assert.deepEqual(s.via, ['dump', 'list']);
    for (const r of resources) assert.deepEqual(readFileSync(local(dir, r.path)), r.body, r.path);
    assert.ok(
      s.warnings.some((w) => /installed while the package arrived will be checked against the Resource List/.test(w)),
      s.warnings.join('\n'),
    );
    // Those already right (the same hash as the list's) are not fetched again: r0 and the files never received.
    const fetched = src.log.slice(start).filter((p) => p.startsWith('/res/'));
    assert.ok(fetched.includes('/res/r0.txt'));
    assert.ok(!fetched.includes('/res/r1.txt'), fetched.join(' '));
  });

  it('converges after a kill -9 while a Resource Dump package is being applied as it arrives', async () => {
    const resources = makeResources(60, 300, 'killed');
    src.publishResourceList(resources, AT, 2);
    const [zip] = await src.publishResourceDump(resources, AT, 1);
    src.publishChangeLists([{ from: AT, changes: [] }]);
    src.publishCapabilities();
    const { cmd, args } = cliCommand();
    const child = spawn(cmd, [...args, 'sync', src.url('/capabilitylist.xml'), dir], {
      stdio: 'ignore',
      cwd: repoRoot(),
    });
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    let early = false;
    // The rest of the package is held back until files of it are in the copy (batch durability: renamed into
    // place when their batch commits), then the process is killed and the connection cut.
    src.gate(
      '/dump-1.zip',
      Math.floor((zip as Buffer).length * 0.6),
      async () => {
        early = await waitFor(() => existsSync(local(dir, '/res/r0.txt')), 10_000);
        child.kill('SIGKILL');
        await exited;
      },
      true,
    );
    await exited;
    assert.equal(early, true, 'files were installed before the kill');
    assert.ok(!existsSync(local(dir, '/res/r59.txt')), 'killed before the end of the package');
    delete src.routes.get('/dump-1.zip')!.gate;
    const s = await dest().sync();
    assert.equal(s.counts.failed, 0, JSON.stringify(s.failures));
    assert.equal(s.complete, true);
    assert.equal(s.watermarkAfter, AT);
    // The copy is the Source's content exactly: no file missing, none left over (temporary or staged).
    const tree = readTree(dir);
    assert.deepEqual([...tree.keys()].sort(), resources.map((r) => localPathOf(src, r.path)).sort());
    for (const r of resources) assert.deepEqual(tree.get(localPathOf(src, r.path)), r.body, r.path);
  });

  describe('Change Dump', () => {
    const body = (s: string): Buffer => Buffer.from(`${s} ${'x'.repeat(280)}\n`);
    const n = 40;
    async function baseline(into: string): Promise<void> {
      src.publishResourceList(makeResources(n, 32, 'base'), T0, 2);
      src.publishChangeLists([{ from: T0, changes: [] }]);
      src.publishCapabilities();
      const s = await dest({}, into).sync();
      assert.equal(s.operation, 'baseline');
    }
    // The deletion first in the manifest: applied only once the package is in (and verified).
    const lists = (): ChangeListSpec[] => [
      {
        from: T0,
        changes: [
          { path: '/res/r1.txt', change: 'deleted', datetime: '2024-03-01T01:00:00Z' },
          ...Array.from({ length: n - 2 }, (_, i) => ({
            path: `/res/r${i + 2}.txt`,
            change: 'updated' as const,
            datetime: `2024-03-01T02:${String(i).padStart(2, '0')}:00Z`,
            body: body(`r${i + 2} v2`),
          })),
        ],
      },
    ];

    /** A copy made by a baseline, then the changes published as Change Lists and a Change Dump (its package). */
    async function baselineThenChanges(into: string): Promise<Buffer> {
      await baseline(into);
      const l = lists();
      await src.publishChangeDump(l);
      src.publishChangeLists(l);
      src.publishCapabilities();
      return src.routes.get('/changedump-1.zip')!.body;
    }

    it('installs changes as the package arrives; deletions only once it is in', async () => {
      for (const applyArriving of [true, false]) {
        const into = await newDir();
        const zip = await baselineThenChanges(into);
        let early = false;
        let deletedKept = false;
        src.gate('/changedump-1.zip', Math.floor(zip.length * 0.7), async () => {
          early = await waitFor(
            () => readFileSync(local(into, '/res/r2.txt')).equals(body('r2 v2')),
            applyArriving ? 5000 : 1500,
          );
          deletedKept = existsSync(local(into, '/res/r1.txt'));
        });
        const start = src.log.length;
        const s = await dest({ delete: true, applyArriving }, into).sync();
        assert.equal(s.counts.failed, 0, JSON.stringify(s.failures));
        assert.equal(s.counts.updated, n - 2);
        assert.deepEqual(s.via, ['dump', 'list']);
        assert.equal(s.watermarkAfter, `2024-03-01T02:${String(n - 3).padStart(2, '0')}:00Z`);
        assert.ok(!src.log.slice(start).some((p) => p.startsWith('/res/')), 'nothing fetched one by one');
        assert.equal(existsSync(local(into, '/res/r1.txt')), false, 'the deletion applied in the end');
        for (let i = 2; i < n; i++) assert.deepEqual(readFileSync(local(into, `/res/r${i}.txt`)), body(`r${i} v2`));
        assert.equal(early, applyArriving, `applyArriving ${applyArriving}: r2 updated before the package was in`);
        assert.equal(deletedKept, true, 'r1 still there while the package arrived');
      }
    });

    it('falls back to the Change Lists for a package cut short, keeping what it applied', async () => {
      const zip = await baselineThenChanges(dir);
      let early = false;
      src.gate(
        '/changedump-1.zip',
        Math.floor(zip.length * 0.6),
        async () => {
          early = await waitFor(() => readFileSync(local(dir, '/res/r2.txt')).equals(body('r2 v2')), 5000);
        },
        true,
      );
      const start = src.log.length;
      const s = await dest({ delete: true }).sync();
      assert.equal(early, true);
      assert.equal(s.counts.failed, 0, JSON.stringify(s.failures));
      assert.equal(s.complete, true);
      assert.ok(
        s.warnings.some((w) => /changes applied while it arrived stay applied/.test(w)),
        s.warnings.join('\n'),
      );
      assert.equal(existsSync(local(dir, '/res/r1.txt')), false);
      for (let i = 2; i < n; i++) assert.deepEqual(readFileSync(local(dir, `/res/r${i}.txt`)), body(`r${i} v2`));
      // What arrived whole was not fetched again.
      const fetched = src.log.slice(start).filter((p) => p.startsWith('/res/'));
      assert.ok(!fetched.includes('/res/r2.txt'), fetched.join(' '));
      assert.ok(fetched.length > 0 && fetched.length < n - 2, `${fetched.length} fetched`);
    });
  });
});
