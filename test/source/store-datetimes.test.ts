import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import {
  type ChangeRecord,
  MAX_DATETIME_LEAD_MS,
  nextChangeDatetime,
  openSqliteStore,
  type SourceStore,
} from '../../src/source/index.js';
import { tempDir } from './helpers.js';

async function withStore(fn: (store: SourceStore) => Promise<void>): Promise<void> {
  const { dir, cleanup } = await tempDir();
  const store = await openSqliteStore({ path: join(dir, 'source.db') });
  try {
    await fn(store);
  } finally {
    await store.close();
    await cleanup();
  }
}

async function allChanges(store: SourceStore): Promise<ChangeRecord[]> {
  const snap = await store.snapshot();
  const out: ChangeRecord[] = [];
  try {
    for await (const c of snap.changes()) out.push(c);
  } finally {
    await snap.close();
  }
  return out;
}

describe('distinct, increasing change datetimes', () => {
  it('nextChangeDatetime: the clock, one step past the previous change, bounded lead, never backwards', () => {
    assert.equal(nextChangeDatetime(undefined, 5000), 5000);
    assert.equal(nextChangeDatetime(undefined, 5000, 7000), 7000, 'the snapshot floor');
    assert.equal(nextChangeDatetime(1000, 5000), 5000, 'the clock moved on');
    assert.equal(nextChangeDatetime(5000, 5000), 5001, 'same millisecond: one step');
    assert.equal(nextChangeDatetime(5500, 5000), 5501, 'ahead of the clock, within the lead');
    const cap = 5000 + MAX_DATETIME_LEAD_MS;
    assert.equal(nextChangeDatetime(cap, 5000), cap, 'at the lead: shared, not further ahead');
    assert.equal(nextChangeDatetime(cap + 50, 5000), cap + 50, 'never before the previous change');
    assert.equal(nextChangeDatetime(cap, 5000, cap + 2), cap + 2, 'the floor wins over the lead');
    assert.equal(nextChangeDatetime(9000, 5000), 9000, 'a clock that went back: not before the previous one');
  });

  it('gives every change of a burst its own datetime, also across batches and after a snapshot', async () => {
    await withStore(async (store) => {
      const burst = Array.from({ length: 6 }, (_, i) => ({
        uri: `burst/b${i}.txt`,
        change: 'created' as const,
        setName: 's',
        length: 1,
      }));
      const recorded = await store.recordChanges(burst);
      const more = await store.recordChanges([{ uri: 'burst/b0.txt', change: 'updated', setName: 's', length: 2 }]);
      const snap = await store.snapshot();
      const at = snap.atMs;
      await snap.close();
      const after = await store.recordChanges([{ uri: 'burst/b1.txt', change: 'deleted', setName: 's' }]);
      const dts = [...recorded, ...more, ...after].map((c) => c.datetimeMs);
      for (let i = 1; i < dts.length; i++) assert.ok(dts[i]! > dts[i - 1]!, `datetime ${i} after ${i - 1}: ${dts}`);
      assert.ok(after[0]!.datetimeMs > at, 'a change after a snapshot is dated after its at');
      assert.deepEqual(
        (await allChanges(store)).map((c) => c.datetimeMs),
        dts,
        'the log holds what recordChanges returned',
      );
      // The inventory's default lastmod of a change is its datetime.
      assert.equal((await store.getResource('burst/b2.txt'))?.lastmodMs, recorded[2]?.datetimeMs);
    });
  });

  it('does not run further ahead of the clock than the lead for a large batch', async () => {
    await withStore(async (store) => {
      const n = MAX_DATETIME_LEAD_MS + 500;
      const recorded = await store.recordChanges(
        Array.from({ length: n }, (_, i) => ({ uri: `r${i}`, change: 'created' as const, setName: 's', length: 1 })),
      );
      const afterCall = Date.now();
      const dts = recorded.map((c) => c.datetimeMs);
      for (let i = 1; i < n; i++) assert.ok(dts[i]! >= dts[i - 1]!, 'never decreasing');
      assert.ok(dts[n - 1]! <= afterCall + MAX_DATETIME_LEAD_MS, 'at most the lead ahead of the clock');
      assert.ok(new Set(dts).size > MAX_DATETIME_LEAD_MS, 'distinct as long as the lead allows');
      const parts = await store.changeListParts('s');
      assert.equal(parts[0]?.fromMs, dts[0], 'the Change List starts at its first change');
    });
  });
});
