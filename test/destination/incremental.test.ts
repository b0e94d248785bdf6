import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import { isResourceSyncError } from '../../src/core/errors.js';
import { Destination, type DestinationOptions } from '../../src/destination/destination.js';
import { DestinationState } from '../../src/destination/state.js';
import { type ChangeListSpec, StaticSource, localPathOf, makeResources, readTree } from './static-source.js';

const T0 = '2024-03-01T00:00:00Z';
const T1 = '2024-03-02T00:00:00Z';
const FAST_HTTP = { retries: 2, retryBaseDelayMs: 5, maxRetryDelayMs: 20 };

const body = (s: string): Buffer => Buffer.from(`${s}\n`);

describe('incremental', () => {
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
    dir = await mkdtemp(join(tmpdir(), 'rs-inc-'));
    dirs.push(dir);
    for (const p of [...src.routes.keys()]) src.remove(p);
    src.clearFaults();
  });
  function dest(extra: Partial<DestinationOptions> = {}): Destination {
    return new Destination({ url: src.url('/capabilitylist.xml'), dir, http: FAST_HTTP, durability: 'none', ...extra });
  }
  const local = (p: string): string => localPathOf(src, p);
  async function baseline(n = 6): Promise<ReturnType<typeof makeResources>> {
    const resources = makeResources(n, 32, 'base');
    src.publishResourceList(resources, T0, 2);
    src.publishChangeLists([{ from: T0, changes: [] }]);
    src.publishCapabilities();
    const s = await dest().sync();
    assert.equal(s.operation, 'baseline');
    assert.equal(s.watermarkAfter, T0);
    return resources;
  }
  const lists = (): ChangeListSpec[] => [
    {
      from: T0,
      until: T1,
      changes: [
        { path: '/res/r0.txt', change: 'updated', datetime: '2024-03-01T10:00:00Z', body: body('r0 v2') },
        { path: '/res/new1.txt', change: 'created', datetime: '2024-03-01T11:00:00Z', body: body('new1 v1') },
        { path: '/res/r1.txt', change: 'deleted', datetime: '2024-03-01T12:00:00Z' },
        { path: '/res/r0.txt', change: 'updated', datetime: '2024-03-01T13:00:00Z', body: body('r0 v3') },
      ],
    },
    {
      from: T1,
      changes: [
        { path: '/res/new1.txt', change: 'updated', datetime: '2024-03-02T09:00:00Z', body: body('new1 v2') },
        { path: '/res/r2.txt', change: 'deleted', datetime: '2024-03-02T10:00:00Z' },
        { path: '/res/r3.txt', change: 'updated', datetime: '2024-03-02T11:00:00Z', body: body('r3 v2') },
      ],
    },
  ];

  it('applies closed and open Change Lists in order, coalescing, keeping deleted files without --delete', async () => {
    const resources = await baseline();
    src.publishChangeLists(lists());
    src.publishCapabilities();
    const start = src.log.length;
    const s = await dest().sync();
    assert.equal(s.operation, 'incremental');
    assert.equal(s.counts.failed, 0, JSON.stringify(s.failures));
    assert.equal(s.counts.created, 1); // new1
    assert.equal(s.counts.updated, 2); // r0, r3
    assert.equal(s.counts.deletionsRecorded, 2);
    assert.equal(s.watermarkAfter, '2024-03-02T11:00:00Z');
    // r0 and new1 fetched once each though they changed twice.
    const fetched = src.log.slice(start).filter((p) => p.startsWith('/res/'));
    assert.deepEqual(fetched.sort(), ['/res/new1.txt', '/res/r0.txt', '/res/r3.txt']);
    const tree = readTree(dir);
    assert.deepEqual(tree.get(local('/res/r0.txt')), body('r0 v3'));
    assert.deepEqual(tree.get(local('/res/new1.txt')), body('new1 v2'));
    assert.deepEqual(tree.get(local('/res/r3.txt')), body('r3 v2'));
    assert.deepEqual(tree.get(local('/res/r1.txt')), resources[1]!.body); // kept
    const st = DestinationState.open(dir, { readonly: true });
    try {
      assert.equal(st.get(src.url('/res/r1.txt'))?.deleted, true);
      assert.equal(st.getWatermark()?.kind, 'incremental');
      assert.equal(st.journal(), undefined);
    } finally {
      st.close();
    }
    // Nothing new: the closed list is not fetched again; changes at the watermark are re-checked, not re-fetched.
    const again = src.log.length;
    const s2 = await dest().sync();
    assert.equal(s2.counts.created + s2.counts.updated + s2.counts.deleted, 0);
    assert.ok(!src.log.slice(again).includes('/changelist-1.xml'));
    assert.ok(!src.log.slice(again).some((p) => p.startsWith('/res/')));
  });

  it('skips an open Change List whose index <lastmod> is before the watermark, and reads it once it changes', async () => {
    await baseline();
    const open: ChangeListSpec = { ...(lists()[1] as ChangeListSpec), from: T0 };
    src.publishChangeLists([{ ...open, lastmod: '2024-03-02T11:00:00Z' }]);
    src.publishCapabilities();
    const s = await dest().sync();
    assert.equal(s.counts.updated, 1);
    assert.equal(s.watermarkAfter, '2024-03-02T11:00:00Z');
    // Unchanged since: a lastmod precise to the second, ending before the watermark, spares the list.
    src.publishChangeLists([{ ...open, lastmod: '2024-03-02T10:59:59Z' }]);
    const before = src.log.length;
    const s2 = await dest().sync();
    assert.equal(s2.operation, 'incremental');
    assert.ok(!src.log.slice(before).includes('/changelist-1.xml'), src.log.slice(before).join(' '));
    // A lastmod at the watermark (changes stamped there are re-checked), or only a day (may hide later changes
    // that day): the list is read.
    for (const lastmod of ['2024-03-02T11:00:00Z', '2024-03-02']) {
      src.publishChangeLists([{ ...open, lastmod }]);
      const at = src.log.length;
      await dest().sync();
      assert.ok(src.log.slice(at).includes('/changelist-1.xml'), lastmod);
    }
    // A new change moves lastmod past the watermark: read and applied.
    const changed: ChangeListSpec = {
      ...open,
      lastmod: '2024-03-02T12:00:00Z',
      changes: [
        ...open.changes,
        { path: '/res/r4.txt', change: 'updated', datetime: '2024-03-02T12:00:00Z', body: body('r4 v2') },
      ],
    };
    src.publishChangeLists([changed]);
    const s3 = await dest().sync();
    assert.equal(s3.counts.updated, 1);
    assert.deepEqual(readTree(dir).get(local('/res/r4.txt')), body('r4 v2'));
  });

  it('removes deleted resources with --delete', async () => {
    await baseline();
    src.publishChangeLists(lists());
    src.publishCapabilities();
    const s = await dest({ delete: true }).sync();
    assert.equal(s.counts.deleted, 2);
    const tree = readTree(dir);
    assert.equal(tree.has(local('/res/r1.txt')), false);
    assert.equal(tree.has(local('/res/r2.txt')), false);
  });

  it('boundary rule: a change stamped exactly at the watermark is applied (idempotently)', async () => {
    await baseline();
    src.publishChangeLists([
      {
        from: T0,
        changes: [{ path: '/res/r4.txt', change: 'updated', datetime: T0, body: body('r4 at T0'), noHash: true }],
      },
    ]);
    src.publishCapabilities();
    const s = await dest().sync();
    assert.equal(s.counts.updated, 1);
    assert.deepEqual(readTree(dir).get(local('/res/r4.txt')), body('r4 at T0'));
    // Changes before the watermark are not applied.
    src.publishChangeLists([
      {
        from: '2024-02-01T00:00:00Z',
        changes: [{ path: '/res/r5.txt', change: 'deleted', datetime: '2024-02-28T00:00:00Z' }],
      },
    ]);
    src.publishCapabilities();
    const s2 = await dest({ delete: true }).sync();
    assert.equal(s2.counts.deleted, 0);
    assert.ok(readTree(dir).has(local('/res/r5.txt')));
  });

  it('detects entries out of order, reports them, and applies the latest per resource', async () => {
    await baseline();
    src.publishChangeLists([
      {
        from: T0,
        changes: [
          { path: '/res/r0.txt', change: 'updated', datetime: '2024-03-01T15:00:00Z', body: body('r0 latest') },
          { path: '/res/r0.txt', change: 'deleted', datetime: '2024-03-01T14:00:00Z' },
          { path: '/res/r2.txt', change: 'updated', datetime: '2024-03-01T09:00:00Z', body: body('r2 new') },
        ],
      },
    ]);
    src.set('/res/r0.txt', body('r0 latest')); // the Source's current content (the fixture applied the list in order)
    src.publishCapabilities();
    const s = await dest({ delete: true }).sync();
    assert.ok(
      s.warnings.some((w) => /out of chronological order/.test(w)),
      s.warnings.join('\n'),
    );
    assert.equal(s.counts.deleted, 0);
    const tree = readTree(dir);
    assert.deepEqual(tree.get(local('/res/r0.txt')), body('r0 latest'));
    assert.deepEqual(tree.get(local('/res/r2.txt')), body('r2 new'));
  });

  it('detects a gap and says a new baseline is needed, or runs one with autoBaseline', async () => {
    await baseline();
    const later = [{ from: '2024-04-01T00:00:00Z', changes: [] }];
    src.publishChangeLists(later);
    src.publishCapabilities();
    await assert.rejects(dest().sync(), (e) => isResourceSyncError(e, 'RS_GAP') && /baseline/.test(e.message));
    const resources = makeResources(6, 32, 'rebased');
    src.publishResourceList(resources, '2024-04-01T00:00:00Z', 1);
    const s = await dest({ autoBaseline: true }).sync();
    assert.equal(s.operation, 'baseline');
    assert.equal(s.counts.updated, 6);
    assert.equal(s.watermarkAfter, '2024-04-01T00:00:00Z');
  });

  it('starts from --from instead of the watermark', async () => {
    await baseline();
    src.publishChangeLists([
      {
        from: T0,
        changes: [
          { path: '/res/r0.txt', change: 'updated', datetime: '2024-03-01T10:00:00Z', body: body('skipped change') },
          { path: '/res/r1.txt', change: 'updated', datetime: '2024-03-05T00:00:00Z', body: body('applied change') },
        ],
      },
    ]);
    src.publishCapabilities();
    const s = await dest({ from: '2024-03-03T00:00:00Z' }).sync();
    assert.equal(s.operation, 'incremental');
    assert.equal(s.watermarkBefore, T0);
    assert.equal(s.counts.updated, 1);
    assert.deepEqual(readTree(dir).get(local('/res/r1.txt')), body('applied change'));
    assert.notDeepEqual(readTree(dir).get(local('/res/r0.txt')), body('skipped change'));
    await assert.rejects(
      async () => dest({ from: 'yesterday' }),
      (e) => isResourceSyncError(e, 'RS_CONFIG'),
    );
  });

  it('applies Change Dump packages in order, verified, without fetching resources', async () => {
    await baseline();
    const l = lists();
    await src.publishChangeDump(l);
    src.publishChangeLists(l);
    src.publishCapabilities();
    const start = src.log.length;
    const s = await dest({ delete: true }).sync();
    assert.equal(s.counts.failed, 0, JSON.stringify(s.failures));
    assert.deepEqual(s.via, ['dump', 'list']);
    assert.ok(!src.log.slice(start).some((p) => p.startsWith('/res/')), src.log.slice(start).join(' '));
    const tree = readTree(dir);
    assert.deepEqual(tree.get(local('/res/r0.txt')), body('r0 v3'));
    assert.deepEqual(tree.get(local('/res/new1.txt')), body('new1 v2'));
    assert.equal(tree.has(local('/res/r1.txt')), false);
    assert.equal(s.watermarkAfter, '2024-03-02T11:00:00Z');
  });

  it('downloads the next Change Dump package while the one before is still arriving or being applied', async () => {
    await baseline();
    const l = lists();
    await src.publishChangeDump(l);
    src.publishChangeLists(l);
    src.publishCapabilities();
    // Package 1 answers after 1.5 s: one at a time, package 2 could only be asked for after it.
    const first = src.routes.get('/changedump-1.zip')!;
    src.set('/changedump-1.zip', first.body, first.type, 1500);
    const start = src.requests.length;
    const s = await dest({ delete: true }).sync();
    assert.equal(s.counts.failed, 0, JSON.stringify(s.failures));
    assert.deepEqual(s.via, ['dump', 'list']);
    const asked = (p: string): number => src.requests.slice(start).find((r) => r.path === p)?.at as number;
    assert.ok(asked('/changedump-2.zip') - asked('/changedump-1.zip') < 1000, 'package 2 asked for at once');
    assert.ok(!src.log.slice(start).some((p) => p.startsWith('/res/')), src.log.slice(start).join(' '));
    assert.deepEqual(readTree(dir).get(local('/res/new1.txt')), body('new1 v2'));
    assert.equal(s.watermarkAfter, '2024-03-02T11:00:00Z');
  });

  it('falls back to the Change Lists when a Change Dump package is corrupt', async () => {
    await baseline();
    const l = lists();
    await src.publishChangeDump(l);
    src.publishChangeLists(l);
    src.publishCapabilities();
    src.fault('/changedump-2.zip', 'truncate', 5);
    const s = await dest({ delete: true }).sync();
    assert.equal(s.counts.failed, 0, JSON.stringify(s.failures));
    const tree = readTree(dir);
    assert.deepEqual(tree.get(local('/res/new1.txt')), body('new1 v2'));
    assert.deepEqual(tree.get(local('/res/r3.txt')), body('r3 v2'));
    assert.equal(tree.has(local('/res/r2.txt')), false);
  });

  it('fetches from the Change Lists what a Change Dump package holds wrong, keeping what it applied', async () => {
    await baseline();
    const l = lists();
    await src.publishChangeDump(l, ['/res/r3.txt']);
    src.publishChangeLists(l);
    src.publishCapabilities();
    const start = src.log.length;
    const s = await dest({ delete: true }).sync();
    assert.equal(s.counts.failed, 0, JSON.stringify(s.failures));
    assert.equal(s.complete, true);
    assert.deepEqual(s.via, ['dump', 'list']);
    assert.ok(
      s.warnings.some((w) => w.includes('[RS_ZIP]') && w.includes('could not be applied') && w.includes('/res/r3.txt')),
      s.warnings.join('\n'),
    );
    // Only the resource whose bitstream was wrong is fetched; the rest came from the packages.
    assert.deepEqual(
      src.log.slice(start).filter((p) => p.startsWith('/res/')),
      ['/res/r3.txt'],
    );
    const tree = readTree(dir);
    assert.deepEqual(tree.get(local('/res/r3.txt')), body('r3 v2'));
    assert.deepEqual(tree.get(local('/res/new1.txt')), body('new1 v2'));
    assert.equal(s.watermarkAfter, '2024-03-02T11:00:00Z');
  });

  it('checks a Change Dump package against the length and hash its Change Dump declares', async () => {
    await baseline();
    const l = lists();
    await src.publishChangeDump(l);
    const good = src.routes.get('/changedump-1.zip')!.body;
    // The Change Dump declares the good package's hash; the server has a package of the same length whose r0
    // bitstream was altered (its manifest entry and CRC-32 still say what the package holds, not the Source).
    await src.publishChangeDump(l, ['/res/r0.txt']);
    const altered = src.routes.get('/changedump-1.zip')!.body;
    assert.equal(altered.length, good.length);
    const dump = src.routes.get('/changedump.xml')!;
    const sha = createHash('sha256').update(good).digest('hex');
    src.set(
      '/changedump.xml',
      dump.body.toString().replace(`length="${good.length}"`, `length="${good.length}" hash="sha-256:${sha}"`),
      'application/xml',
    );
    src.publishChangeLists(l);
    src.publishCapabilities();
    const s = await dest({ delete: true }).sync();
    assert.equal(s.counts.failed, 0, JSON.stringify(s.failures));
    assert.ok(
      s.warnings.some(
        (w) => w.includes('/changedump-1.zip') && w.includes('does not match the hash the dump declares'),
      ),
      s.warnings.join('\n'),
    );
    assert.deepEqual(readTree(dir).get(local('/res/r0.txt')), body('r0 v3'));
    assert.equal(s.watermarkAfter, '2024-03-02T11:00:00Z');
  });

  it('keeps the watermark when a change fails, and catches up once the Source is fixed', async () => {
    await baseline();
    src.publishChangeLists(lists());
    src.publishCapabilities();
    src.set('/res/r3.txt', body('r3 wrong')); // does not match the list's hash
    const s = await dest().sync();
    assert.equal(s.counts.failed, 1);
    assert.equal(s.complete, false);
    assert.equal(s.watermarkAfter, T0);
    src.set('/res/r3.txt', body('r3 v2'));
    const start = src.log.length;
    const s2 = await dest().sync();
    assert.equal(s2.counts.failed, 0);
    assert.equal(s2.complete, true);
    // Only the failed one is fetched again.
    assert.deepEqual(
      src.log.slice(start).filter((p) => p.startsWith('/res/')),
      ['/res/r3.txt'],
    );
  });
});
