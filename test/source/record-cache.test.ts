// RecordCache over a real SQLite store: answers as the store does, reads ahead in key order while that is used
// and stops when it is not, stays bounded, forgets on invalidate(), and a lookup racing with a write leaves
// nothing stale behind.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { RecordCache } from '../../src/source/record-cache.js';
import { openSqliteStore } from '../../src/source/sqlite-store.js';
import type { ResourceRecord, SourceStore } from '../../src/source/store.js';

let dir = '';
let store: SourceStore;
const N = 500;
const key = (i: number) => `d/r${String(i).padStart(4, '0')}.txt`;

async function put(i: number, sha: string): Promise<void> {
  await store.recordChanges(
    [
      {
        uri: key(i),
        change: 'updated',
        setName: 'default',
        length: 10,
        type: 'text/plain',
        hashes: { 'sha-256': sha },
        lastmodMs: 1_700_000_000_000 + i,
        fileId: `10:${i}:${i}`,
      },
    ],
    { log: false },
  );
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rs-record-cache-'));
  store = await openSqliteStore({ path: join(dir, 'source.db') });
  await store.recordChanges(
    Array.from({ length: N }, (_, i) => ({
      uri: key(i),
      change: 'created' as const,
      setName: 'default',
      length: 10,
      type: 'text/plain',
      hashes: { 'sha-256': `h${i}` },
      lastmodMs: 1_700_000_000_000 + i,
      fileId: `10:${i}:${i}`,
    })),
    { log: false },
  );
});
after(async () => {
  await store?.close();
  await rm(dir, { recursive: true, force: true });
});

/**
 * The real store, counting the calls that reach it (lookups, and range reads past the record asked for);
 * `sync` keeps its synchronous `resourcesFromSync`, else the store is seen without it. `hold()` makes
 * getResource wait until released.
 */
function counted(sync: boolean): {
  store: SourceStore;
  gets: () => number;
  ranges: () => number;
  hold: () => () => void;
} {
  let gets = 0;
  let ranges = 0;
  let gate: Promise<void> | undefined;
  const overrides: Partial<Record<keyof SourceStore, unknown>> = {
    getResource: async (uri: string) => {
      gets++;
      if (gate !== undefined) await gate;
      return store.getResource(uri);
    },
    resources: (options?: { after?: string; pageSize?: number }) => {
      ranges++;
      return store.resources(options);
    },
    resourcesFromSync: sync
      ? (uri: string, limit: number) => {
          gets++;
          if (limit > 1) ranges++;
          return store.resourcesFromSync!(uri, limit);
        }
      : undefined,
  };
  const wrapped = new Proxy(store, {
    get(target, prop) {
      if (prop in overrides) return overrides[prop as keyof SourceStore];
      const v = (target as unknown as Record<string | symbol, unknown>)[prop];
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return {
    store: wrapped,
    gets: () => gets,
    ranges: () => ranges,
    hold: () => {
      let release: () => void = () => undefined;
      gate = new Promise((r) => (release = r));
      return () => {
        gate = undefined;
        release();
      };
    },
  };
}

describe('RecordCache', () => {
  it('answers as the store does, hits included, and misses with undefined', async () => {
    const cache = new RecordCache(store);
    for (const i of [0, 1, 2, 250, 3, 499, 2])
      assert.deepEqual(await cache.get(key(i)), await store.getResource(key(i)));
    assert.equal(await cache.get('d/nothing.txt'), undefined);
  });

  for (const sync of [true, false]) {
    const how = sync ? 'one synchronous query' : 'getResource + resources()';
    it(`in key order, one range read serves the following lookups (${how})`, async () => {
      const c = counted(sync);
      const cache = new RecordCache(c.store, { readAhead: 63 });
      for (let i = 0; i < 256; i++) assert.equal((await cache.get(key(i)))?.hashes['sha-256'], `h${i}`);
      assert.equal(c.gets(), 4, 'one lookup per 64 records');
      assert.equal(c.ranges(), 4);
    });

    it(`in no order, read-ahead stops after it went unused, an occasional probe only (${how})`, async () => {
      const c = counted(sync);
      const cache = new RecordCache(c.store, { readAhead: 63 });
      // A stride of 97 over 500 keys: never the next key in order.
      for (let k = 0; k < 200; k++)
        assert.equal((await cache.get(key((k * 97) % N)))?.hashes['sha-256'], `h${(k * 97) % N}`);
      assert.ok(c.ranges() <= 1 + Math.ceil(200 / 64), `${c.ranges()} range reads`);
    });
  }

  it('SQLite resourcesFromSync gives the records getResource gives, in key order from the key', async () => {
    await store.recordChanges(
      [
        {
          uri: 'e/all-hashes.bin',
          change: 'created',
          setName: 'other',
          length: 3,
          hashes: { md5: 'm', 'sha-1': 's1', 'sha-256': 's256' },
          lastmodMs: 5,
        },
        { uri: 'e/no-hash.bin', change: 'created', setName: 'other', length: 0, lastmodMs: 6, fileId: '0:6:6' },
      ],
      { log: false },
    );
    const rows = store.resourcesFromSync!('e/', 5);
    assert.deepEqual(
      rows.map((r) => r.uri),
      ['e/all-hashes.bin', 'e/no-hash.bin'],
    );
    for (const r of rows) assert.deepEqual(r, await store.getResource(r.uri));
    const from = store.resourcesFromSync!(key(7), 3);
    assert.deepEqual(
      from.map((r) => r.uri),
      [key(7), key(8), key(9)],
    );
    for (const r of from) assert.deepEqual(r, await store.getResource(r.uri));
  });

  it('stays within maxEntries', async () => {
    const cache = new RecordCache(store, { maxEntries: 50, readAhead: 20 });
    for (let i = 0; i < N; i++) await cache.get(key(i));
    assert.ok(cache.size <= 50, String(cache.size));
  });

  it('invalidate() forgets: a record changed in the store is seen', async () => {
    const cache = new RecordCache(store);
    assert.equal((await cache.get(key(10)))?.hashes['sha-256'], 'h10');
    await put(10, 'changed');
    assert.equal((await cache.get(key(10)))?.hashes['sha-256'], 'h10', 'cached until invalidated');
    cache.invalidate();
    assert.equal(cache.size, 0);
    assert.equal((await cache.get(key(10)))?.hashes['sha-256'], 'changed');
    await put(10, 'h10');
  });

  it('a lookup that saw an invalidation while it ran does not fill the cache', async () => {
    const c = counted(false);
    const cache = new RecordCache(c.store);
    const release = c.hold();
    const pending = cache.get(key(20));
    await put(20, 'racing'); // a write begins and ends while the lookup waits
    cache.invalidate();
    release();
    const seen: ResourceRecord | undefined = await pending;
    assert.ok(seen !== undefined);
    assert.equal(cache.size, 0, 'nothing kept from a lookup that raced with a write');
    assert.equal((await cache.get(key(20)))?.hashes['sha-256'], 'racing');
    await put(20, 'h20');
  });
});
