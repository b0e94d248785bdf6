// A baseline taken while the Source changes: a resource changed or deleted after the Resource List's `at` (its
// bytes differ from the list's length/hash, or it answers 404) is left to the Change Lists since `at`, which the
// baseline's own follow-up incremental run applies; it is confirmed there, or the run is incomplete. Without a
// Change List it stays a failure, said so in the message.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import { Destination } from '../../src/destination/destination.js';
import { DestinationState } from '../../src/destination/state.js';
import { StaticSource, localPathOf, makeResources, readTree } from './static-source.js';

const T1 = '2024-02-01T00:00:00Z'; // the Resource List's at
const T2 = '2024-02-01T00:00:05Z'; // changes after it
const FAST_HTTP = { retries: 1, retryBaseDelayMs: 5, maxRetryDelayMs: 20 };

describe('baseline while the Source changes', () => {
  let src: StaticSource;
  let dir: string;
  const dirs: string[] = [];
  const listed = makeResources(4, 40, 'v1');
  const r0v2 = Buffer.from('r0, changed after the list was served\n');
  before(async () => {
    src = await StaticSource.start();
  });
  after(async () => {
    await src.close();
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rs-changing-'));
    dirs.push(dir);
    for (const p of [...src.routes.keys()]) src.remove(p);
    // The list describes v1; by the time the resources are fetched r0 has other bytes and r1 is gone.
    src.publishResourceList(listed, T1, 1);
    src.set(listed[0]!.path, r0v2);
    src.remove(listed[1]!.path);
  });
  const watermark = (): string | undefined => {
    const st = DestinationState.open(dir, { readonly: true });
    try {
      return st.getWatermark()?.at;
    } finally {
      st.close();
    }
  };
  const dest = (): Destination =>
    new Destination({ url: src.url('/capabilitylist.xml'), dir, http: FAST_HTTP, durability: 'none' });

  it('with a Change List since at: complete, the copy has the changes, watermark past at', async () => {
    src.publishChangeLists(
      [
        {
          from: T1,
          changes: [
            { path: listed[0]!.path, change: 'updated', datetime: T2, body: r0v2 },
            { path: listed[1]!.path, change: 'deleted', datetime: T2 },
          ],
        },
      ],
      { serve: false },
    );
    src.publishCapabilities();
    const s = await dest().baseline();
    assert.equal(s.counts.failed, 0, JSON.stringify(s.failures));
    assert.equal(s.complete, true);
    const want = new Map(
      [
        [localPathOf(src, listed[0]!.path), r0v2] as const,
        ...listed.slice(2).map((r) => [localPathOf(src, r.path), r.body] as const),
      ].sort(([a], [b]) => (a < b ? -1 : 1)),
    );
    assert.deepEqual(readTree(dir), want);
    assert.equal(watermark(), T2);
    assert.equal(s.watermarkAfter, T2);
    const again = await dest().sync();
    assert.equal(again.operation, 'incremental');
    assert.equal(again.counts.failed, 0, JSON.stringify(again.failures));
    assert.equal(again.counts.created + again.counts.updated, 0);
  });

  it('with a Change List of undated changes since at (spec 1.0, resync-simulator): complete as well', async () => {
    // No datetime on the changes: the update is applied (its content differs from the copy), and the deletion
    // must be applied too although the gone resource was recorded as a (placeholder) deletion by the baseline.
    src.publishChangeLists(
      [
        {
          from: T1,
          changes: [
            { path: listed[0]!.path, change: 'updated', body: r0v2 },
            { path: listed[1]!.path, change: 'deleted' },
          ],
        },
      ],
      { serve: false },
    );
    src.publishCapabilities();
    const s = await dest().baseline();
    assert.equal(s.counts.failed, 0, JSON.stringify(s.failures));
    assert.equal(s.complete, true);
    assert.equal(s.counts.deleted + s.counts.deletionsRecorded, 1, JSON.stringify(s.counts));
    const want = new Map(
      [
        [localPathOf(src, listed[0]!.path), r0v2] as const,
        ...listed.slice(2).map((r) => [localPathOf(src, r.path), r.body] as const),
      ].sort(([a], [b]) => (a < b ? -1 : 1)),
    );
    assert.deepEqual(readTree(dir), want);
    const again = await dest().sync();
    assert.equal(again.operation, 'incremental');
    assert.equal(again.counts.failed, 0, JSON.stringify(again.failures));
    assert.equal(again.counts.created + again.counts.updated + again.counts.deleted, 0);
  });

  it('with a Change List that does not report them: incomplete, and the next run is a baseline again', async () => {
    src.publishChangeLists([{ from: T1, changes: [] }], { serve: false });
    src.publishCapabilities();
    const s = await dest().baseline();
    assert.equal(s.complete, false);
    assert.deepEqual(s.failures.map((f) => f.code).sort(), ['RS_GAP', 'RS_GAP']);
    assert.match(s.failures[0]!.message, /no change since then in the Change List confirms it/);
    const next = await dest().sync();
    assert.equal(next.operation, 'baseline');
  });

  it('without a Change List: the mismatch and the 404 stay failures, the message says why', async () => {
    src.publishCapabilities();
    const s = await dest().baseline();
    assert.equal(s.complete, false);
    assert.equal(s.counts.failed, 2, JSON.stringify(s.failures));
    for (const f of s.failures) assert.match(f.message, /offers no Change List to confirm it/);
    assert.equal(watermark(), undefined);
  });
});
