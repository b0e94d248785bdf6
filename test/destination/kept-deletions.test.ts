// Deletions recorded without --delete (files kept) are applied by a later run with --delete, incremental or
// not, and an audit that finds their files says which command removes them.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Destination, type DestinationOptions } from '../../src/destination/destination.js';
import { StaticSource, localPathOf, makeResources } from './static-source.js';

const T0 = '2024-03-01T00:00:00Z';
const FAST_HTTP = { retries: 1, retryBaseDelayMs: 5, maxRetryDelayMs: 20 };

describe('deletions kept, then applied', () => {
  let src: StaticSource;
  let dir: string;
  before(async () => {
    src = await StaticSource.start();
    dir = await mkdtemp(join(tmpdir(), 'rs-kept-'));
  });
  after(async () => {
    await src.close();
    await rm(dir, { recursive: true, force: true });
  });
  const dest = (extra: Partial<DestinationOptions> = {}): Destination =>
    new Destination({ url: src.url('/capabilitylist.xml'), dir, http: FAST_HTTP, durability: 'none', ...extra });

  it('a later sync --delete removes the files of deletions an earlier run recorded and kept', async () => {
    const resources = makeResources(4, 32, 'v1');
    src.publishResourceList(resources, T0, 1);
    src.publishChangeLists([{ from: T0, changes: [] }]);
    src.publishCapabilities();
    assert.equal((await dest().sync()).counts.created, 4);
    const gone = ['/res/r1.txt', '/res/r2.txt'];
    src.publishChangeLists([
      {
        from: T0,
        changes: gone.map((path, i) => ({ path, change: 'deleted' as const, datetime: `2024-03-01T0${i + 1}:00:00Z` })),
      },
    ]);
    // The Resource List moves on too (an audit compares with it).
    src.publishResourceList(
      resources.filter((r) => !gone.includes(r.path)),
      '2024-03-01T05:00:00Z',
      1,
    );
    const kept = await dest().sync();
    assert.equal(kept.counts.deletionsRecorded, 2);
    for (const p of gone) assert.ok(existsSync(join(dir, localPathOf(src, p))));

    const audit = await dest().audit();
    assert.equal(audit.inSync, false);
    assert.ok(
      audit.warnings.some((w) => /2 of the extra files are deletions recorded .*files kept.*sync --delete/.test(w)),
      JSON.stringify(audit.warnings),
    );

    const s = await dest({ delete: true }).sync();
    assert.equal(s.operation, 'incremental');
    assert.equal(s.counts.deleted, 2, JSON.stringify(s.counts));
    for (const p of gone) assert.ok(!existsSync(join(dir, localPathOf(src, p))), p);
    const again = await dest().audit();
    assert.equal(again.inSync, true, JSON.stringify(again.audit));
  });
});
