// RecordCache over a real SQLite store: answers as the store does, reads ahead in key order while that is used
// and stops when it is not, stays bounded, forgets on invalidate(), holds after written() exactly what the store
// holds for the changes written (SqliteStore.recordOf, checked against the store by property), and a lookup
// racing with a write leaves nothing stale behind.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { RecordCache } from '../../src/source/record-cache.js';
import { openSqliteStore } from '../../src/source/sqlite-store.js';
import type { ChangeInput, ResourceRecord, SourceStore } from '../../src/source/store.js';

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

  it('written(): the changed records are what the store now returns, without a lookup; others stay; deleted ones are forgotten', async () => {
    const c = counted(true);
    const cache = new RecordCache(c.store, { readAhead: 0 });
    await store.recordChanges([{ uri: 'z/tmp.txt', change: 'created', setName: 'default', length: 1, lastmodMs: 5 }], {
      log: false,
    });
    for (const k of [key(30), key(31), key(40), 'z/tmp.txt']) await cache.get(k);
    const update = (i: number, sha: string): ChangeInput => ({
      uri: key(i),
      change: 'updated',
      setName: 'default',
      length: 11,
      type: 'text/plain',
      hashes: { md5: 'm'.repeat(32), 'sha-256': sha },
      lastmodMs: 1_800_000_000_000 + i,
      fileId: `11:${i}:${i}:racy`,
    });
    const changes: ChangeInput[] = [
      update(30, 'w30'),
      update(40, 'w40 first'),
      update(40, 'w40 second'),
      // No type, no hashes, no file identity.
      { uri: 'z/new.txt', change: 'created', setName: 'other', length: 0, lastmodMs: 7 },
      { uri: 'z/tmp.txt', change: 'deleted', setName: 'default' },
    ];
    const token = cache.writing(changes);
    await store.recordChanges(changes, { log: true });
    cache.written(changes, token);
    const gets = c.gets();
    for (const k of [key(30), key(40), 'z/new.txt', key(31)])
      assert.deepEqual(await cache.get(k), await store.getResource(k), k);
    assert.equal(c.gets(), gets, 'served from the cache');
    assert.equal((await cache.get(key(40)))?.hashes['sha-256'], 'w40 second', 'the last change of a resource');
    assert.equal(await cache.get('z/tmp.txt'), undefined);
    assert.equal(c.gets(), gets + 1, 'a deleted resource is asked for');
    await store.recordChanges(
      [
        { uri: 'z/new.txt', change: 'deleted', setName: 'other' },
        { ...update(30, 'h30'), length: 10, lastmodMs: 1_700_000_000_030, fileId: '10:30:30' },
        { ...update(40, 'h40'), length: 10, lastmodMs: 1_700_000_000_040, fileId: '10:40:40' },
      ],
      { log: false },
    );
  });

  it('written(): a change whose record the store cannot tell beforehand (no lastmod) is forgotten, not guessed', async () => {
    const c = counted(true);
    const cache = new RecordCache(c.store, { readAhead: 0 });
    await cache.get(key(60));
    const change: ChangeInput = { uri: key(60), change: 'updated', setName: 'default', length: 10 };
    const token = cache.writing([change]);
    await store.recordChanges([change], { log: false });
    cache.written([change], token);
    const gets = c.gets();
    assert.deepEqual(await cache.get(key(60)), await store.getResource(key(60)));
    assert.equal(c.gets(), gets + 1, 'looked up');
    await put(60, 'h60');
  });

  it('written() of a store without recordOf forgets everything', async () => {
    const c = counted(true);
    const without = new Proxy(c.store, {
      get: (target, prop) =>
        prop === 'recordOf' ? undefined : (target as unknown as Record<string | symbol, unknown>)[prop],
    });
    const cache = new RecordCache(without, { readAhead: 0 });
    await cache.get(key(70));
    await cache.get(key(71));
    const change: ChangeInput = {
      uri: key(70),
      change: 'updated',
      setName: 'default',
      length: 10,
      lastmodMs: 1,
      hashes: { 'sha-256': 'w70' },
    };
    const token = cache.writing([change]);
    await put(70, 'w70');
    cache.written([change], token);
    assert.equal(cache.size, 0);
    assert.equal((await cache.get(key(70)))?.hashes['sha-256'], 'w70');
    await put(70, 'h70');
  });

  it('written() of a batch larger than the cache keeps the first maxEntries', async () => {
    const c = counted(false);
    const cache = new RecordCache(c.store, { maxEntries: 8, readAhead: 0 });
    const changes: ChangeInput[] = Array.from({ length: 20 }, (_, i) => ({
      uri: key(100 + i),
      change: 'updated' as const,
      setName: 'default',
      length: 10,
      type: 'text/plain',
      hashes: { 'sha-256': `h${100 + i}` },
      lastmodMs: 1_700_000_000_000 + 100 + i,
      fileId: `10:${100 + i}:${100 + i}`,
    }));
    cache.written(changes, cache.writing(changes));
    assert.equal(cache.size, 8);
    // The first eight come from the cache (no lookup reaches the store), and are what the store holds.
    for (let i = 0; i < 8; i++) assert.deepEqual(await cache.get(key(100 + i)), await store.getResource(key(100 + i)));
    assert.equal(c.gets(), 0);
    // A later one was not kept: looking it up reaches the store.
    await cache.get(key(119));
    assert.equal(c.gets(), 1);
  });

  it('a lookup running while written() is called does not fill the cache', async () => {
    const c = counted(false);
    const cache = new RecordCache(c.store);
    const token = cache.writing([]);
    const release = c.hold();
    const pending = cache.get(key(80)); // started after writing(): only written() can keep it out
    cache.written([], token);
    release();
    await pending;
    assert.equal(cache.size, 0);
  });

  it('written() after another write was heard of (invalidate) clears the cache instead of filling it', async () => {
    const c = counted(false);
    const cache = new RecordCache(c.store, { readAhead: 0 });
    await cache.get(key(90));
    const change: ChangeInput = {
      uri: key(91),
      change: 'updated',
      setName: 'default',
      length: 10,
      type: 'text/plain',
      hashes: { 'sha-256': 'h91' },
      lastmodMs: 1_700_000_000_091,
      fileId: '10:91:91',
    };
    const token = cache.writing([change]);
    cache.invalidate(); // another writer's notification, while this batch was being recorded
    await cache.get(key(90));
    cache.written([change], token);
    assert.equal(cache.size, 0);
  });
});

describe('SqliteStore.recordOf', () => {
  it('is, when it gives a record, what getResource returns after the change is recorded (property)', async () => {
    const text = fc.oneof(fc.string(), fc.string({ unit: 'binary' }), fc.string({ unit: 'grapheme' }));
    const change = fc.record(
      {
        uri: text.filter((u) => u.length > 0),
        change: fc.constantFrom('created' as const, 'updated' as const),
        setName: text,
        length: fc.oneof(fc.nat(), fc.maxSafeNat(), fc.double({ noNaN: true, noDefaultInfinity: true })),
        type: text,
        hashes: fc.record({ md5: text, 'sha-1': text, 'sha-256': text }, { requiredKeys: [] }),
        lastmodMs: fc.oneof(
          fc.integer({ min: 0, max: 4_102_444_800_000 }),
          fc.double({ noNaN: true, noDefaultInfinity: true }),
        ),
        fileId: text,
      },
      { requiredKeys: ['uri', 'change', 'setName'] },
    );
    let given = 0;
    await fc.assert(
      fc.asyncProperty(change, async (c) => {
        const predicted = store.recordOf!(c);
        await store.recordChanges([c], { log: false });
        const stored = await store.getResource(c.uri);
        await store.recordChanges([{ uri: c.uri, change: 'deleted', setName: c.setName }], { log: false });
        if (predicted === undefined) {
          // Only when it cannot be known: no lastmod, or a value SQLite does not keep as it is.
          if (c.lastmodMs !== undefined && Number.isSafeInteger(c.lastmodMs) && Number.isSafeInteger(c.length ?? 0))
            assert.ok(
              [c.uri, c.setName, c.type, c.fileId, ...Object.values(c.hashes ?? {})].some(
                (t) => t !== undefined && /\p{Cs}/u.test(t),
              ),
              'refused only for lone surrogates',
            );
          return;
        }
        given++;
        assert.deepEqual(predicted, stored);
      }),
      { numRuns: 300 },
    );
    assert.ok(given > 30, `records given: ${given}`);
    assert.equal(store.recordOf!({ uri: key(1), change: 'deleted', setName: 'default' }), undefined);
    assert.equal(store.recordOf!({ uri: key(1), change: 'updated', setName: 'default', length: 1 }), undefined);
  });
});
