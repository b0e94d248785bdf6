// A Resource Dump older than the Resource List: a baseline through it never installs older content over newer
// nor moves the watermark back; it finishes from the Resource List (and later runs from the Change Lists).
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import { Destination, type DestinationOptions } from '../../src/destination/destination.js';
import { DestinationState } from '../../src/destination/state.js';
import { StaticSource, localPathOf, makeResources, readTree } from './static-source.js';

const T0 = '2024-01-01T00:00:00Z'; // the dump's snapshot
const T1 = '2024-02-01T00:00:00Z'; // the Resource List's, newer
const FAST_HTTP = { retries: 1, retryBaseDelayMs: 5, maxRetryDelayMs: 20 };

describe('baseline from a Resource Dump older than the Resource List', () => {
  let src: StaticSource;
  let dir: string;
  const dirs: string[] = [];
  const old = makeResources(4, 40, 'old');
  // r0 and r1 changed between the dump and the list; r3 was deleted; r4 is new.
  const current = [old[2]!, ...makeResources(2, 40, 'new'), ...makeResources(5, 40, 'new').slice(4)];
  before(async () => {
    src = await StaticSource.start();
  });
  after(async () => {
    await src.close();
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rs-stale-'));
    dirs.push(dir);
    for (const p of [...src.routes.keys()]) src.remove(p);
    await src.publishResourceDump(old, T0, 2);
    src.publishResourceList(current, T1, 1);
    src.publishChangeLists([{ from: T1, changes: [] }]);
    src.publishCapabilities();
  });
  const dest = (extra: Partial<DestinationOptions> = {}): Destination =>
    new Destination({ url: src.url('/capabilitylist.xml'), dir, http: FAST_HTTP, durability: 'none', ...extra });
  const expected = (): Map<string, Buffer> =>
    new Map(current.map((r) => [localPathOf(src, r.path), r.body] as const).sort(([a], [b]) => (a < b ? -1 : 1)));
  const watermark = (): string | undefined => {
    const st = DestinationState.open(dir, { readonly: true });
    try {
      return st.getWatermark()?.at;
    } finally {
      st.close();
    }
  };

  it('a first baseline ends with the Resource List content and its time as watermark', async () => {
    const s = await dest().baseline();
    assert.equal(s.counts.failed, 0, JSON.stringify(s.failures));
    assert.deepEqual(readTree(dir), expected());
    assert.equal(watermark(), T1);
  });

  it('a --baseline over a newer copy puts no old bytes back and keeps the watermark', async () => {
    const first = await dest({ noDumps: true }).baseline();
    assert.equal(first.counts.failed, 0);
    assert.equal(watermark(), T1);
    const s = await dest().baseline();
    assert.equal(s.counts.failed, 0, JSON.stringify(s.failures));
    assert.deepEqual(readTree(dir), expected());
    assert.equal(watermark(), T1);
    assert.equal(s.counts.updated, 0, 'nothing older installed over the copy');
  });

  it('a --baseline from a list older than changes the copy applied keeps them and the watermark', async () => {
    assert.equal((await dest({ noDumps: true }).baseline()).counts.failed, 0);
    // A change after the list's snapshot, applied by an incremental run.
    const T2 = '2024-03-01T00:00:00Z';
    const v3 = Buffer.from('r0 after the list\n');
    src.publishChangeLists([
      { from: T1, changes: [{ path: current[1]!.path, change: 'updated', datetime: T2, body: v3 }] },
    ]);
    const inc = await dest().incremental();
    assert.equal(inc.counts.updated, 1, JSON.stringify(inc.failures));
    assert.equal(watermark(), T2);
    const s = await dest({ noDumps: true }).baseline();
    assert.equal(s.counts.failed, 0, JSON.stringify(s.failures));
    assert.equal(s.counts.updated, 0);
    assert.deepEqual(readTree(dir).get(localPathOf(src, current[1]!.path)), v3);
    assert.equal(watermark(), T2);
  });
});
