import assert from 'node:assert/strict';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { isResourceSyncError } from '../../src/core/errors.js';
import { DestinationState, type ResourceRecord, STATE_SCHEMA_VERSION } from '../../src/destination/state.js';

const dirs: string[] = [];
after(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});
async function tempDir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'rs-state-'));
  dirs.push(d);
  return d;
}

describe('DestinationState', () => {
  it('persists records, watermark, journal and metadata across reopen', async () => {
    const dir = await tempDir();
    const s = DestinationState.open(dir);
    assert.equal(s.path, join(dir, '.resourcesync', 'state.db'));
    assert.equal(s.schemaVersion(), STATE_SCHEMA_VERSION);
    const rec: ResourceRecord = {
      uri: 'http://e.org/a',
      path: join(dir, 'e.org', 'a'),
      length: 12,
      md5: 'a'.repeat(32),
      sha256: 'b'.repeat(64),
      lastmod: '2024-01-01T00:00:00Z',
      sourceDatetime: '2024-01-02T00:00:00Z',
    };
    s.put(rec);
    s.put({ uri: 'http://e.org/b', path: join(dir, 'e.org', 'b') });
    s.markDeleted('http://e.org/b', '2024-01-03T00:00:00Z');
    s.markDeleted('http://e.org/never', '2024-01-03T00:00:00Z');
    s.setWatermark({ at: '2024-01-02T00:00:00Z', kind: 'baseline', sourceUrl: 'http://e.org/cl.xml' });
    s.journalBegin('incremental', { from: '2024-01-02T00:00:00Z' });
    s.setMeta('source', 'http://e.org/');
    s.close();

    const t = DestinationState.open(dir);
    assert.deepEqual(t.get('http://e.org/a'), rec);
    assert.deepEqual(t.getByPath(join(dir, 'e.org', 'a')), rec);
    assert.deepEqual(t.get('http://e.org/b'), {
      uri: 'http://e.org/b',
      path: join(dir, 'e.org', 'b'),
      sourceDatetime: '2024-01-03T00:00:00Z',
      deleted: true,
    });
    assert.equal(t.get('http://e.org/never')?.deleted, true);
    assert.equal(t.get('http://e.org/zzz'), undefined);
    assert.equal(t.count(), 1);
    assert.equal(t.countAll(), 3);
    assert.deepEqual(t.getWatermark(), {
      at: '2024-01-02T00:00:00Z',
      kind: 'baseline',
      sourceUrl: 'http://e.org/cl.xml',
    });
    assert.equal(t.journal()?.op, 'incremental');
    assert.deepEqual(t.journal()?.info, { from: '2024-01-02T00:00:00Z' });
    assert.equal(t.getMeta('source'), 'http://e.org/');
    t.journalEnd();
    assert.equal(t.journal(), undefined);
    t.remove('http://e.org/a');
    assert.equal(t.get('http://e.org/a'), undefined);
    t.clearWatermark();
    assert.equal(t.getWatermark(), undefined);
    t.close();
  });

  it('writes many records in one transaction, and all() pages through them while writing', async () => {
    const dir = await tempDir();
    const s = DestinationState.open(dir);
    const n = 5000;
    const recs = Array.from({ length: n }, (_, i) => ({
      uri: `http://e.org/r${String(i).padStart(5, '0')}`,
      path: `/p/${i}`,
      length: i,
    }));
    const t0 = performance.now();
    assert.equal(s.putMany(recs), n);
    const ms = performance.now() - t0;
    assert.ok(ms < 5000, `putMany took ${ms} ms`);
    assert.equal(s.count(), n);
    let seen = 0;
    let previous = '';
    for (const r of s.all(300)) {
      assert.ok(r.uri > previous);
      previous = r.uri;
      if (seen % 2 === 0) s.markDeleted(r.uri, '2024-01-01T00:00:00Z'); // writing while iterating is allowed
      seen++;
    }
    assert.equal(seen, n);
    assert.equal(s.count(), n / 2);
    // getMany: the records that exist, deleted ones included, in one query; URIs with quotes are data.
    const many = s.getMany(['http://e.org/r00001', 'http://e.org/missing', 'http://e.org/r04999', '"]', '']);
    assert.deepEqual([...many.keys()].sort(), ['http://e.org/r00001', 'http://e.org/r04999']);
    assert.equal(many.get('http://e.org/r04999')?.length, 4999);
    assert.equal(many.get('http://e.org/r00001')?.path, '/p/1');
    assert.equal(s.getMany([]).size, 0);
    s.close();
  });

  it('rolls a failed transaction back, and keeps a watermark set inside one', async () => {
    const dir = await tempDir();
    const s = DestinationState.open(dir);
    assert.throws(() =>
      s.transaction(() => {
        s.put({ uri: 'http://e.org/x', path: '/x' });
        throw new Error('halfway');
      }),
    );
    assert.equal(s.get('http://e.org/x'), undefined);
    s.transaction(() => {
      s.put({ uri: 'http://e.org/y', path: '/y' });
      s.setWatermark({ at: '2024-05-01T00:00:00Z', kind: 'incremental', sourceUrl: 'http://e.org/' });
    });
    s.close();
    const t = DestinationState.open(dir);
    assert.equal(t.getWatermark()?.kind, 'incremental');
    assert.equal(t.get('http://e.org/y')?.path, '/y');
    t.close();
  });

  it('refuses a directory it cannot create or write with RS_IO naming it', async () => {
    const dir = await tempDir();
    const file = join(dir, 'not-a-dir');
    await writeFile(file, 'x');
    assert.throws(
      () => DestinationState.open(file),
      (e: unknown) => isResourceSyncError(e, 'RS_IO') && e.message.includes(join(file, '.resourcesync')),
    );
    if (process.getuid?.() !== 0) {
      const ro = join(dir, 'ro');
      await (await import('node:fs/promises')).mkdir(ro);
      await chmod(ro, 0o555);
      assert.throws(
        () => DestinationState.open(ro),
        (e: unknown) => isResourceSyncError(e, 'RS_IO') && e.message.includes(ro),
      );
      await chmod(ro, 0o755);
    }
  });

  it('refuses a file that is not a database', async () => {
    const dir = await tempDir();
    await (await import('node:fs/promises')).mkdir(join(dir, '.resourcesync'));
    await writeFile(join(dir, '.resourcesync', 'state.db'), 'this is not sqlite at all, not even close'.repeat(100));
    assert.throws(
      () => DestinationState.open(dir),
      (e: unknown) => isResourceSyncError(e) && (e.code === 'RS_STORE' || e.code === 'RS_IO'),
    );
  });
});

describe('DestinationState run lock', () => {
  it('refuses a second run while the first holds the lock, and takes over a dead one', async () => {
    const dir = await tempDir();
    const a = DestinationState.open(dir);
    a.acquireLock();
    a.acquireLock(); // re-entrant for the same process
    const b = DestinationState.open(dir);
    // Pretend the lock belongs to another live process on this host (our parent).
    b.setMeta('lock', JSON.stringify({ pid: process.ppid, host: (await import('node:os')).hostname(), since: 'x' }));
    assert.throws(
      () => a.acquireLock(),
      (e: unknown) => isResourceSyncError(e, 'RS_IO') && /another run/.test(e.message),
    );
    // A process that no longer exists.
    b.setMeta('lock', JSON.stringify({ pid: 2 ** 22 + 12345, host: (await import('node:os')).hostname(), since: 'x' }));
    a.acquireLock();
    a.releaseLock();
    assert.equal(b.getMeta('lock'), undefined);
    a.close();
    b.close();
  });
});
