// Spare files (spares.ts): replaced small files are kept under .resourcesync/spare and rewritten in place for
// later replacements. The invariant that matters: no file of the copy ever shares its inode with a spare, and a
// spare that does (a crash between the link and the rename) is never written.
import assert from 'node:assert/strict';
import { existsSync, linkSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { isResourceSyncError } from '../../src/core/errors.js';
import { Destination } from '../../src/destination/destination.js';
import { FileWriter } from '../../src/destination/file-writer.js';
import { SPARE_DIR_NAME, SparePool } from '../../src/destination/spares.js';
import { type ChangeSpec, StaticSource, localPathOf, makeResources, readTree } from './static-source.js';

const FAST_HTTP = { retries: 2, retryBaseDelayMs: 5, maxRetryDelayMs: 20 };

/** Every regular file under `dir` with its link count, skipping nothing. */
function linkCounts(dir: string): Map<string, number> {
  const out = new Map<string, number>();
  const walk = (d: string): void => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      const st = statSync(p);
      if (st.isDirectory()) walk(p);
      else out.set(p, st.nlink);
    }
  };
  walk(dir);
  return out;
}

describe('FileWriter refill and replace (spare files)', () => {
  let dir: string;
  const writer = new FileWriter();
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rs-spare-'));
  });
  after(async () => {
    await writer.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('rewrites a spare in place to exactly the new body, shorter or longer', async () => {
    const spare = join(dir, 'spare1');
    writeFileSync(spare, 'a much longer old version of some resource');
    const ino = statSync(spare).ino;
    await writer.refill(spare, Buffer.from('short'));
    assert.equal(readFileSync(spare, 'utf8'), 'short');
    assert.equal(statSync(spare).ino, ino, 'same inode: rewritten in place');
    await writer.refill(spare, Buffer.from('now longer than before'));
    assert.equal(readFileSync(spare, 'utf8'), 'now longer than before');
  });

  it('refuses to rewrite a file with another link, and drops that spare name without touching the file', async () => {
    const live = join(dir, 'live.txt');
    writeFileSync(live, 'copy content');
    const spare = join(dir, 'spare2');
    linkSync(live, spare); // what a crash between the link and the rename leaves
    await assert.rejects(writer.refill(spare, Buffer.from('XXXX')), (e: unknown) => {
      assert.ok(isResourceSyncError(e, 'RS_IO'));
      assert.equal((e as { cause?: { code?: string } }).cause?.code, 'ENOTSPARE');
      return true;
    });
    assert.equal(readFileSync(live, 'utf8'), 'copy content');
    assert.equal(existsSync(spare), false);
    assert.equal(statSync(live).nlink, 1);
  });

  it('replaces a file keeping the old one as a spare (up to keepMax), or freeing it', async () => {
    const target = join(dir, 't.txt');
    writeFileSync(target, 'old');
    const oldIno = statSync(target).ino;
    writeFileSync(join(dir, 'new1'), 'new');
    const kept = await writer.replace(join(dir, 'new1'), target, join(dir, 'keep1'), 1024, join(dir, '.t.x.tmp'));
    assert.equal(kept, 3);
    assert.equal(readFileSync(target, 'utf8'), 'new');
    assert.equal(statSync(join(dir, 'keep1')).ino, oldIno);
    assert.equal(statSync(target).nlink, 1);
    // Larger than keepMax: not kept.
    writeFileSync(join(dir, 'new2'), 'newer');
    assert.equal(await writer.replace(join(dir, 'new2'), target, join(dir, 'keep2'), 2, join(dir, '.t.y.tmp')), -1);
    assert.equal(existsSync(join(dir, 'keep2')), false);
    // A new file (nothing to keep).
    writeFileSync(join(dir, 'new3'), 'first');
    assert.equal(await writer.replace(join(dir, 'new3'), join(dir, 'fresh.txt'), join(dir, 'keep3'), 1024, 'x'), -1);
    assert.equal(readFileSync(join(dir, 'fresh.txt'), 'utf8'), 'first');
  });

  it('when the rename fails, removes the kept link (the live file stays single) and the new version', async () => {
    const target = join(dir, 'busy');
    // A file onto a directory goes to <dir>/%%self (nested resources): a non-empty directory there fails it.
    mkdirSync(join(target, '%%self', 'child'), { recursive: true });
    writeFileSync(join(dir, 'new4'), 'x');
    await assert.rejects(writer.replace(join(dir, 'new4'), target, join(dir, 'keep4'), 1024, join(dir, '.b.tmp')));
    assert.equal(existsSync(join(dir, 'new4')), false);
    assert.equal(existsSync(join(dir, 'keep4')), false);
  });

  it('copies across file systems (EXDEV), durably, when the spare is not on the target file system', async (t) => {
    const shm = '/dev/shm';
    if (!existsSync(shm) || statSync(shm).dev === statSync(dir).dev) {
      t.skip('no second file system at /dev/shm');
      return;
    }
    const other = await mkdtemp(join(shm, 'rs-spare-'));
    try {
      writeFileSync(join(other, 'new5'), 'across');
      writeFileSync(join(dir, 'x.txt'), 'old');
      const kept = await writer.replace(join(other, 'new5'), join(dir, 'x.txt'), undefined, 0, join(dir, '.x.tmp'));
      assert.equal(kept, -1);
      assert.equal(readFileSync(join(dir, 'x.txt'), 'utf8'), 'across');
      assert.equal(existsSync(join(other, 'new5')), false);
      assert.equal(existsSync(join(dir, '.x.tmp')), false);
    } finally {
      await rm(other, { recursive: true, force: true });
    }
  });
});

describe('SparePool', () => {
  it('bounds the files it holds and reuses only spare names', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'rs-pool-'));
    try {
      writeFileSync(join(dir, 'not-a-spare.txt'), 'x');
      const pool = await SparePool.open(join(dir, 'spare'), { max: 2 });
      const a = pool.reserve();
      const b = pool.reserve();
      assert.ok(a !== undefined && b !== undefined && a !== b);
      assert.equal(pool.reserve(), undefined, 'full at max');
      pool.released(a, true);
      pool.released(b, false); // not kept: its place is free again
      assert.equal(pool.size, 1);
      assert.equal(pool.take(), a);
      assert.equal(pool.take(), undefined);
      assert.ok(pool.reserve() !== undefined);
      // Reopened: names of spares in the directory are found, other files ignored.
      writeFileSync(a, 'spare');
      writeFileSync(join(dir, 'spare', 'other-file'), 'x');
      const again = await SparePool.open(join(dir, 'spare'));
      assert.equal(again.take(), a);
      assert.equal(again.take(), undefined);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('Destination with spare files (batch durability)', () => {
  let src: StaticSource;
  let dir: string;
  before(async () => {
    src = await StaticSource.start();
    dir = await mkdtemp(join(tmpdir(), 'rs-spare-dest-'));
  });
  after(async () => {
    await src.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('keeps replaced files as spares, reuses them, and never leaves a copy file sharing its inode', async () => {
    const T0 = '2024-03-01T00:00:00Z';
    const resources = makeResources(40, 100, 'v1');
    src.publishResourceList(resources, T0, 1);
    src.publishChangeLists([{ from: T0, changes: [] }]);
    src.publishCapabilities();
    const dest = (): Destination =>
      new Destination({ url: src.url('/capabilitylist.xml'), dir, http: FAST_HTTP, durability: 'batch' });
    assert.equal((await dest().sync()).operation, 'baseline');
    const spareDir = join(dir, '.resourcesync', SPARE_DIR_NAME);
    const all: ChangeSpec[] = [];
    for (let round = 1; round <= 3; round++) {
      if (round === 3) {
        // A crash between a link and its rename leaves a spare linked to a copy file: it must never be written.
        // r29 is not changed in round 3, and round 3 needs more spares than there are, so this one is taken.
        linkSync(join(dir, localPathOf(src, '/res/r29.txt')), join(spareDir, 's0badc0de-1'));
      }
      for (let i = 0; i < (round === 3 ? 38 : 30); i++) {
        const r = resources[(i * 7 + round) % resources.length]!;
        const body = Buffer.from(`round ${round} of ${r.path} ${'y'.repeat(round * 10)}`);
        all.push({
          path: r.path,
          change: 'updated',
          datetime: `2024-03-0${round + 1}T00:00:${String(i).padStart(2, '0')}Z`,
          body,
        });
      }
      src.publishChangeLists([{ from: T0, changes: all }]);
      const s = await dest().sync();
      assert.equal(s.operation, 'incremental');
      assert.equal(s.counts.failed, 0, JSON.stringify(s.failures));
      // Every replaced file was kept (within the bound), and each round reuses the previous round's.
      assert.ok(readdirSync(spareDir).length >= 25, `spares after round ${round}: ${readdirSync(spareDir).length}`);
      // The copy is exact and no copy file has a second link.
      const latest = new Map<string, Buffer>(resources.map((r) => [localPathOf(src, r.path), r.body]));
      for (const c of all) latest.set(localPathOf(src, c.path), c.body as Buffer);
      assert.deepEqual(readTree(dir), latest);
      for (const [path, links] of linkCounts(dir))
        if (!path.includes(`${join('.resourcesync', SPARE_DIR_NAME)}`) && !path.endsWith('.db-wal'))
          assert.equal(links, 1, `${path} has ${links} links`);
    }
    // The linked spare of round 3 was dropped, not written: r29 kept its content (checked above).
    assert.equal(existsSync(join(spareDir, 's0badc0de-1')), false);
  });
});
