/**
 * The conformance suite of the {@link SourceStore} interface: the same tests for every backend (SQLite, PostgreSQL),
 * parameterised by a {@link StoreFactory}. It checks the guarantees the document generator relies on: a gapless
 * `seq`, datetimes that never go backwards, snapshots that do not move while changes are recorded, the rotation of
 * Change Lists, batches that are atomic with the inventory, binary key order, and persistence across a reopen.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isResourceSyncError } from '../../src/core/errors.js';
import type { ChangeInput, ChangeRecord, ResourceRecord, SourceStore } from '../../src/source/store.js';

/** One store under test: a fresh, empty store, and a way to open more handles on the same data. */
export interface StoreUnderTest {
  readonly store: SourceStore;
  /** Another handle on the same store (the first may be open or closed). */
  open(): Promise<SourceStore>;
  /** Closes what the test left open and removes the store's data. */
  cleanup(): Promise<void>;
}

/** A backend for the suite. */
export interface StoreFactory {
  readonly name: string;
  /**
   * True when several handles (processes) may write the same store at once and still keep its guarantees
   * (PostgreSQL); SQLite is one writer process per state directory.
   */
  readonly shared: boolean;
  create(): Promise<StoreUnderTest>;
}

async function withStore(factory: StoreFactory, fn: (t: StoreUnderTest) => Promise<void>): Promise<void> {
  const t = await factory.create();
  try {
    await fn(t);
  } finally {
    await t.store.close();
    await t.cleanup();
  }
}

async function allChanges(store: SourceStore, query?: Parameters<StoreSnapshotLike['changes']>[0]) {
  const snap = await store.snapshot();
  const out: ChangeRecord[] = [];
  try {
    for await (const c of snap.changes(query)) out.push(c);
  } finally {
    await snap.close();
  }
  return out;
}
type StoreSnapshotLike = Awaited<ReturnType<SourceStore['snapshot']>>;

async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

function binarySorted(keys: readonly string[]): string[] {
  return [...keys].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)));
}

function created(uri: string, setName = 's', extra: Partial<ChangeInput> = {}): ChangeInput {
  return { uri, change: 'created', setName, length: uri.length, lastmodMs: 1_700_000_000_000, ...extra };
}

function assertGapless(changes: readonly ChangeRecord[], from = 1): void {
  changes.forEach((c, i) => {
    assert.equal(c.seq, from + i, `seq ${c.seq} at position ${i}`);
    if (i > 0) assert.ok(c.datetimeMs >= changes[i - 1]!.datetimeMs, `datetime of seq ${c.seq} goes back`);
  });
}

/** Registers the suite for one backend. */
export function storeConformance(factory: StoreFactory): void {
  describe(`SourceStore conformance: ${factory.name}`, () => {
    it('records a batch atomically with the inventory and returns it as stored', async () => {
      await withStore(factory, async ({ store }) => {
        const h = { md5: 'a'.repeat(32), 'sha-256': 'b'.repeat(64) };
        const rec = await store.recordChanges([
          created('a', 's', { hashes: h, type: 'text/plain', fileId: '1:2:3' }),
          { uri: 'b', change: 'created', setName: 's', length: 2 },
        ]);
        assert.deepEqual(
          rec.map((c) => [c.seq, c.uri, c.change, c.setName]),
          [
            [1, 'a', 'created', 's'],
            [2, 'b', 'created', 's'],
          ],
        );
        assert.deepEqual(rec[0]!.hashes, h);
        assert.equal(rec[0]!.type, 'text/plain');
        assert.equal(rec[0]!.lastmodMs, 1_700_000_000_000);
        assert.equal(rec[1]!.lastmodMs, rec[1]!.datetimeMs, 'without a lastmod, the change datetime');
        const a = await store.getResource('a');
        assert.deepEqual(a, {
          uri: 'a',
          setName: 's',
          length: 1,
          hashes: h,
          type: 'text/plain',
          lastmodMs: 1_700_000_000_000,
          fileId: '1:2:3',
        });
        assert.deepEqual(await allChanges(store), rec, 'the log holds what recordChanges returned');
        await store.recordChanges([{ uri: 'a', change: 'deleted', setName: 's' }]);
        assert.equal(await store.getResource('a'), undefined);
        assert.equal(await store.countResources('s'), 1);
        assert.equal(await store.countResources(), 1);
        assert.equal(await store.countResources('other'), 0);
        const log = await allChanges(store);
        assert.deepEqual(
          log.map((c) => [c.seq, c.uri, c.change]),
          [
            [1, 'a', 'created'],
            [2, 'b', 'created'],
            [3, 'a', 'deleted'],
          ],
        );
        assert.deepEqual(log[2]!.hashes, {}, 'a deletion carries no hash');
        assert.equal(log[2]!.length, undefined);
        assert.equal(log[2]!.lastmodMs, undefined);
        const head = await store.head();
        assert.equal(head.seq, 3);
        assert.equal(head.datetimeMs, log[2]!.datetimeMs);
      });
    });

    it('applies several changes of one resource in one batch in order', async () => {
      await withStore(factory, async ({ store }) => {
        await store.recordChanges([
          created('x', 's', { length: 1 }),
          { uri: 'x', change: 'updated', setName: 's', length: 2, lastmodMs: 5 },
          created('y'),
          { uri: 'y', change: 'deleted', setName: 's' },
          { uri: 'z', change: 'deleted', setName: 's' },
          created('z', 's', { length: 9 }),
        ]);
        assert.equal((await store.getResource('x'))?.length, 2);
        assert.equal((await store.getResource('x'))?.lastmodMs, 5);
        assert.equal(await store.getResource('y'), undefined);
        assert.equal((await store.getResource('z'))?.length, 9);
        assertGapless(await allChanges(store));
        assert.equal((await store.head()).seq, 6);
      });
    });

    it('keeps seq gapless and datetimes non-decreasing under concurrent batches', async () => {
      await withStore(factory, async ({ store }) => {
        const batches = Array.from({ length: 20 }, (_, b) =>
          Array.from({ length: 1 + (b % 4) }, (_, i) => created(`r${b}-${i}`, `set${b % 3}`)),
        );
        const results = await Promise.all(batches.map((batch) => store.recordChanges(batch)));
        const total = batches.reduce((n, b) => n + b.length, 0);
        const seqs = results.flat().map((c) => c.seq);
        assert.deepEqual(
          [...seqs].sort((x, y) => x - y),
          Array.from({ length: total }, (_, i) => i + 1),
        );
        for (const r of results)
          for (let i = 1; i < r.length; i++) assert.equal(r[i]!.seq, r[i - 1]!.seq + 1, 'a batch is contiguous');
        const log = await allChanges(store);
        assert.equal(log.length, total);
        assertGapless(log);
        assert.equal((await store.head()).seq, total);
      });
    });

    it('keeps datetimes non-decreasing when the clock goes back', async () => {
      await withStore(factory, async ({ store }) => {
        const realNow = Date.now;
        try {
          const t = realNow();
          Date.now = () => t + 60_000;
          await store.recordChanges([created('a')]);
          Date.now = () => t; // the clock steps back a minute
          await store.recordChanges([created('b')]);
        } finally {
          Date.now = realNow;
        }
        const [a, b] = await allChanges(store);
        assert.ok(b!.datetimeMs >= a!.datetimeMs, `${b!.datetimeMs} < ${a!.datetimeMs}`);
        assert.equal((await store.head()).datetimeMs, b!.datetimeMs);
      });
    });

    it('gives a snapshot a view that does not move and an `at` before every later change', async () => {
      await withStore(factory, async ({ store }) => {
        await store.recordChanges(
          Array.from({ length: 1500 }, (_, i) => created(`r${String(i).padStart(5, '0')}`)),
          { rotation: { maxEntries: 1000 } },
        );
        const snap = await store.snapshot();
        let later: ChangeRecord[] = [];
        try {
          assert.ok(snap.atMs >= snap.head.datetimeMs!);
          const parts = await snap.changeListParts('s');
          const version = await snap.setVersion('s');
          // Writes interleave with a snapshot's iteration: a deletion, an update, an insertion and a new set.
          const seen: ResourceRecord[] = [];
          for await (const r of snap.resources('s')) {
            seen.push(r);
            if (seen.length === 10) {
              later = await store.recordChanges(
                [
                  { uri: 'r00000', change: 'deleted', setName: 's' },
                  { uri: 'r01499', change: 'deleted', setName: 's' },
                  created('r00020', 's', { length: 99 }),
                  created('q', 's'),
                  created('new', 'other'),
                ],
                { rotation: { maxEntries: 1 } },
              );
            }
          }
          assert.equal(seen.length, 1500);
          assert.equal(seen[0]!.uri, 'r00000');
          assert.equal(seen[1499]!.uri, 'r01499');
          assert.equal(seen[20]!.length, 6, 'an update after the snapshot is not in it');
          assert.ok(later[0]!.datetimeMs > snap.atMs, 'a change after the snapshot is dated after its at');
          assert.equal(await snap.countResources(), 1500);
          assert.equal(await snap.countResources('other'), 0);
          assert.equal(await snap.setVersion('s'), version);
          assert.deepEqual(await snap.changeListParts('s'), parts);
          assert.equal(snap.head.seq, 1500);
          const changes = await collect(snap.changes());
          assert.equal(changes.length, 1500);
          assertGapless(changes);
          assert.deepEqual(await collect(snap.changes({ setName: 'other' })), []);
          if (snap.resourcesSync !== undefined) {
            let n = 0;
            for (const r of snap.resourcesSync('s')) {
              if (n === 20) assert.equal(r.length, 6);
              n++;
            }
            assert.equal(n, 1500);
          }
        } finally {
          await snap.close();
        }
        assert.equal(await store.countResources(), 1500 - 2 + 2);
        const after = await store.snapshot();
        try {
          assert.equal(after.head.seq, 1505);
          assert.ok(after.atMs >= later[4]!.datetimeMs);
          assert.equal((await collect(after.resources('s')))[0]?.uri, 'q');
        } finally {
          await after.close();
        }
      });
    });

    it('dates changes after the `at` of every snapshot taken before them, however quickly they follow', async () => {
      await withStore(factory, async ({ store }) => {
        const realNow = Date.now;
        const t = realNow();
        try {
          Date.now = () => t; // a clock that stands still: same-millisecond snapshots and changes
          for (let i = 0; i < 20; i++) {
            const snap = await store.snapshot();
            const [c] = await store.recordChanges([created(`r${i}`)]);
            await snap.close();
            assert.ok(c!.datetimeMs > snap.atMs, `change ${i}: ${c!.datetimeMs} <= at ${snap.atMs}`);
          }
        } finally {
          Date.now = realNow;
        }
      });
    });

    it('selects changes by set and seq range', async () => {
      await withStore(factory, async ({ store }) => {
        for (let i = 0; i < 6; i++) await store.recordChanges([created(`r${i}`, i % 2 === 0 ? 'even' : 'odd')]);
        const seqs = async (q: Parameters<StoreSnapshotLike['changes']>[0]) =>
          (await allChanges(store, q)).map((c) => c.seq);
        assert.deepEqual(await seqs({ setName: 'even' }), [1, 3, 5]);
        assert.deepEqual(await seqs({ afterSeq: 2, throughSeq: 4 }), [3, 4]);
        assert.deepEqual(await seqs({ setName: 'odd', afterSeq: 2 }), [4, 6]);
        assert.deepEqual(await seqs({ throughSeq: 0 }), []);
      });
    });

    it('rotates Change Lists by count, per set, with from = until of the previous one', async () => {
      await withStore(factory, async ({ store }) => {
        for (let i = 0; i < 5; i++)
          await store.recordChanges([created(`x${i}`, 'x'), created(`y${i}`, 'y')], { rotation: { maxEntries: 2 } });
        const parts = await store.changeListParts('x');
        assert.deepEqual(
          parts.map((p) => [p.number, p.count, p.untilMs !== undefined]),
          [
            [1, 2, true],
            [2, 2, true],
            [3, 1, false],
          ],
        );
        for (let i = 1; i < parts.length; i++) {
          assert.equal(parts[i]!.fromMs, parts[i - 1]!.untilMs);
          assert.ok(parts[i - 1]!.untilMs! >= parts[i - 1]!.fromMs);
        }
        const log = await allChanges(store, { setName: 'x' });
        assert.deepEqual(
          parts.map((p) => p.lastSeq),
          [log[1]!.seq, log[3]!.seq, log[4]!.seq],
        );
        for (const p of parts) {
          const inPart = log.filter(
            (c) => c.seq <= p.lastSeq && (p.number === 1 || c.seq > parts[p.number - 2]!.lastSeq),
          );
          for (const c of inPart) {
            assert.ok(c.datetimeMs >= p.fromMs, 'a change is not before its part');
            if (p.untilMs !== undefined) assert.ok(c.datetimeMs <= p.untilMs, 'a change is not after its part');
          }
        }
        assert.equal((await store.changeListParts('y')).length, 3);
        assert.equal(await store.setVersion('x'), 5);
        assert.deepEqual(await store.setNames(), ['x', 'y']);
      });
    });

    it('rotates a batch larger than a part into several parts', async () => {
      await withStore(factory, async ({ store }) => {
        await store.recordChanges(
          Array.from({ length: 7 }, (_, i) => created(`r${i}`)),
          { rotation: { maxEntries: 3 } },
        );
        assert.deepEqual(
          (await store.changeListParts('s')).map((p) => [p.number, p.count, p.lastSeq]),
          [
            [1, 3, 3],
            [2, 3, 6],
            [3, 1, 7],
          ],
        );
      });
    });

    it('rotates Change Lists by period', async () => {
      await withStore(factory, async ({ store }) => {
        const realNow = Date.now;
        const t = realNow() + 1000;
        try {
          Date.now = () => t;
          await store.recordChanges([created('a')], { rotation: { periodMs: 1000 } });
          Date.now = () => t + 500;
          await store.recordChanges([created('b')], { rotation: { periodMs: 1000 } });
          Date.now = () => t + 1000;
          await store.recordChanges([created('c')], { rotation: { periodMs: 1000 } });
        } finally {
          Date.now = realNow;
        }
        const parts = await store.changeListParts('s');
        assert.deepEqual(
          parts.map((p) => [p.number, p.count, p.fromMs, p.untilMs]),
          [
            [1, 2, t, t + 1000],
            [2, 1, t + 1000, undefined],
          ],
        );
      });
    });

    it('gives a set without changes one open, empty Change List', async () => {
      await withStore(factory, async ({ store }) => {
        const [p, ...rest] = await store.changeListParts('none');
        assert.deepEqual(rest, []);
        assert.deepEqual([p!.setName, p!.number, p!.count, p!.lastSeq, p!.untilMs], ['none', 1, 0, 0, undefined]);
        assert.ok(Number.isSafeInteger(p!.fromMs));
      });
    });

    it('records a baseline without log entries, bumping versions', async () => {
      await withStore(factory, async ({ store }) => {
        const v0 = (await store.head()).version;
        await store.recordChanges([created('a'), created('b', 't')], { log: false });
        const head = await store.head();
        assert.equal(head.seq, 0);
        assert.equal(head.datetimeMs, undefined);
        assert.ok(head.version > v0);
        assert.equal(await store.countResources(), 2);
        assert.deepEqual(await allChanges(store), []);
        const parts = await store.changeListParts('s');
        assert.deepEqual(
          parts.map((p) => [p.number, p.count, p.untilMs]),
          [[1, 0, undefined]],
        );
        assert.equal(await store.setVersion('s'), 1);
        assert.equal(await store.setVersion('t'), 1);
        assert.equal(await store.setVersion('u'), 0);
        assert.deepEqual(await store.setNames(), ['s', 't']);
        const [c] = await store.recordChanges([created('c')]);
        assert.equal(c!.seq, 1, 'the log starts after the baseline');
      });
    });

    it('bumps the version of every write and of the sets it touches only', async () => {
      await withStore(factory, async ({ store }) => {
        const v0 = (await store.head()).version;
        await store.recordChanges([created('a', 'x'), created('b', 'y')]);
        await store.recordChanges([created('c', 'x')]);
        assert.equal((await store.head()).version, v0 + 2);
        assert.equal(await store.setVersion('x'), 2);
        assert.equal(await store.setVersion('y'), 1);
        assert.deepEqual(await store.recordChanges([]), []);
        assert.equal((await store.head()).version, v0 + 2, 'an empty batch writes nothing');
      });
    });

    it("leaves a set's version when an inventory-only write changes nothing but fileId", async () => {
      await withStore(factory, async ({ store }) => {
        const a = created('a', 'x', {
          length: 3,
          hashes: { md5: '900150983cd24fb0d6963f7d28e17f72' },
          lastmodMs: 1e12,
        });
        await store.recordChanges([{ ...a, fileId: 'racy:1' }, created('b', 'y')], { log: false });
        const [x, y] = [await store.setVersion('x'), await store.setVersion('y')];
        const v = (await store.head()).version;
        // A rescan re-hashed the file, found the same bytes and clears the racy mark: nothing any document shows.
        await store.recordChanges([{ ...a, fileId: '1:2:3' }], { log: false });
        assert.equal(await store.setVersion('x'), x, 'only fileId changed: the set keeps its documents');
        assert.equal(await store.setVersion('y'), y);
        assert.ok((await store.head()).version > v, 'the store version still moves');
        assert.equal((await store.getResource(a.uri))?.fileId, '1:2:3');
        // A touched file (new lastmod) moves it; so does a logged write of the same content.
        await store.recordChanges([{ ...a, fileId: '1:2:4', lastmodMs: 2e12 }], { log: false });
        assert.equal(await store.setVersion('x'), x + 1);
        await store.recordChanges([{ ...a, change: 'updated', fileId: '1:2:4', lastmodMs: 2e12 }]);
        assert.equal(await store.setVersion('x'), x + 2);
        // The same resource moving to another set, inventory-only: both sets' documents change.
        await store.recordChanges([{ ...a, setName: 'y', fileId: '1:2:4', lastmodMs: 2e12 }], { log: false });
        assert.equal(await store.setVersion('x'), x + 3, 'the set it left');
        assert.equal(await store.setVersion('y'), y + 1, 'the set it joined');
      });
    });

    it('keeps metadata', async () => {
      await withStore(factory, async ({ store }) => {
        assert.equal(await store.getMeta('k'), undefined);
        await store.setMeta('k', 'v');
        await store.setMeta('k', 'w');
        await store.setMeta('ü/😀', '');
        assert.equal(await store.getMeta('k'), 'w');
        assert.equal(await store.getMeta('ü/😀'), '');
        await store.setMeta('k', undefined);
        assert.equal(await store.getMeta('k'), undefined);
      });
    });

    it('pages resources in binary key order, by set and after a key', async () => {
      await withStore(factory, async ({ store }) => {
        const keys = ['b', 'a/b', 'a-b', 'é', 'z', 'A', '😀', '\uffff', 'https://example.org/x?y=1', 'a b'];
        await store.recordChanges(
          keys.map((uri, i) => created(uri, i % 2 === 0 ? 'even' : 'odd')),
          { log: false },
        );
        const uris = async (o?: Parameters<SourceStore['resources']>[0]) =>
          (await collect(store.resources(o))).map((r) => r.uri);
        const sorted = binarySorted(keys);
        assert.deepEqual(await uris({ pageSize: 2 }), sorted);
        assert.deepEqual(await uris(), sorted);
        assert.deepEqual(await uris({ pageSize: 3, after: 'a/b' }), sorted.slice(sorted.indexOf('a/b') + 1));
        assert.deepEqual(await uris({ setName: 'odd', pageSize: 1 }), binarySorted(keys.filter((_, i) => i % 2 === 1)));
        const snap = await store.snapshot();
        try {
          assert.deepEqual(
            (await collect(snap.resources())).map((r) => r.uri),
            sorted,
          );
          assert.deepEqual(
            (await collect(snap.resources('even'))).map((r) => r.uri),
            binarySorted(keys.filter((_, i) => i % 2 === 0)),
          );
        } finally {
          await snap.close();
        }
        if (store.resourcesFromSync !== undefined) {
          assert.deepEqual(
            store.resourcesFromSync('a-b', 3).map((r) => r.uri),
            sorted.slice(sorted.indexOf('a-b'), sorted.indexOf('a-b') + 3),
          );
        }
      });
    });

    it('returns from recordOf what getResource returns after the change', async () => {
      await withStore(factory, async ({ store }) => {
        if (store.recordOf === undefined) return;
        const inputs: ChangeInput[] = [
          created('plain'),
          created('typed', 's', { type: 'text/plain', hashes: { 'sha-1': 'c'.repeat(40) }, fileId: 'f' }),
          created('zero', 's', { length: 0, lastmodMs: 0 }),
          created('big', 's', { length: 2 ** 40, lastmodMs: 253_402_300_799_000 }),
        ];
        for (const c of inputs) {
          const predicted = store.recordOf(c);
          await store.recordChanges([c]);
          if (predicted !== undefined) assert.deepEqual(predicted, await store.getResource(c.uri), c.uri);
        }
        assert.equal(store.recordOf({ uri: 'plain', change: 'deleted', setName: 's' }), undefined);
      });
    });

    it('keeps the links of resources and changes (§14), and refuses bad ones before writing', async () => {
      await withStore(factory, async ({ store }) => {
        const links = [
          { rel: 'describedby', href: 'meta/a.xml', type: 'application/xml', length: 12, pri: 1 },
          {
            rel: 'alternate',
            href: 'https://mirror.example.org/a',
            hashes: { md5: 'a'.repeat(32) },
            modifiedMs: 1_600_000_000_000,
            encoding: 'gzip',
          },
        ];
        const [c] = await store.recordChanges([created('a', 's', { links })]);
        assert.deepEqual(c!.links, links);
        assert.deepEqual((await store.getResource('a'))?.links, links);
        if (store.recordOf !== undefined)
          assert.deepEqual(store.recordOf(created('a', 's', { links })), await store.getResource('a'));
        const snap = await store.snapshot();
        try {
          assert.deepEqual((await collect(snap.resources()))[0]?.links, links);
          assert.deepEqual((await collect(snap.changes()))[0]?.links, links);
        } finally {
          await snap.close();
        }
        // An update without links leaves none; a deletion carries none.
        await store.recordChanges([{ uri: 'a', change: 'updated', setName: 's', length: 2 }]);
        assert.equal((await store.getResource('a'))?.links, undefined);
        const [d] = await store.recordChanges([{ uri: 'a', change: 'deleted', setName: 's', links }]);
        assert.equal(d!.links, undefined);
        const head = await store.head();
        await assert.rejects(
          store.recordChanges([created('b'), created('c', 's', { links: [{ rel: 'alternate', href: '' }] })]),
          (e) => isResourceSyncError(e, 'RS_INVALID_VALUE') && /c: link 1/.test(e.message),
        );
        assert.deepEqual(await store.head(), head, 'nothing of the refused batch is written');
        assert.equal(await store.getResource('b'), undefined);
      });
    });

    it('dates the changes of one batch apart when the clock stands still', async () => {
      await withStore(factory, async ({ store }) => {
        const realNow = Date.now;
        const t = realNow();
        try {
          Date.now = () => t;
          const recs = await store.recordChanges(Array.from({ length: 5 }, (_, i) => created(`r${i}`)));
          const more = await store.recordChanges([created('s0')]);
          const all = [...recs, ...more];
          for (let i = 1; i < all.length; i++) assert.ok(all[i]!.datetimeMs > all[i - 1]!.datetimeMs, `change ${i}`);
          assert.ok(all[all.length - 1]!.datetimeMs - t <= 1000, 'at most 1 s ahead of the clock');
          assert.equal((await store.head()).datetimeMs, all[all.length - 1]!.datetimeMs);
        } finally {
          Date.now = realNow;
        }
      });
    });

    it('keeps everything across a reopen', async () => {
      await withStore(factory, async (t) => {
        await t.store.recordChanges([created('a'), created('b')], { rotation: { maxEntries: 1 } });
        await t.store.setMeta('k', 'v');
        const before = {
          head: await t.store.head(),
          parts: await t.store.changeListParts('s'),
          log: await allChanges(t.store),
          a: await t.store.getResource('a'),
        };
        await t.store.close();
        const again = await t.open();
        try {
          assert.deepEqual(await again.head(), before.head);
          assert.deepEqual(await again.changeListParts('s'), before.parts);
          assert.deepEqual(await allChanges(again), before.log);
          assert.deepEqual(await again.getResource('a'), before.a);
          assert.equal(await again.getMeta('k'), 'v');
          const [c] = await again.recordChanges([created('c')]);
          assert.equal(c!.seq, 3);
          assert.ok(c!.datetimeMs >= before.head.datetimeMs!);
        } finally {
          await again.close();
        }
      });
    });

    it('refuses calls on a closed store with RS_STORE', async () => {
      await withStore(factory, async ({ store }) => {
        await store.close();
        await assert.rejects(store.head(), (e) => isResourceSyncError(e, 'RS_STORE'));
        await assert.rejects(store.recordChanges([created('a')]), (e) => isResourceSyncError(e, 'RS_STORE'));
        await store.close(); // twice is fine
      });
    });

    if (factory.shared) {
      it('keeps seq gapless and snapshots before later changes across handles writing at once', async () => {
        await withStore(factory, async (t) => {
          const others = [await t.open(), await t.open()];
          try {
            const handles = [t.store, ...others];
            const writes = handles.flatMap((h, k) =>
              Array.from({ length: 10 }, (_, i) => h.recordChanges([created(`h${k}-${i}`), created(`h${k}-${i}b`)])),
            );
            const snaps = await Promise.all(handles.map((h) => h.snapshot()));
            const results = await Promise.all(writes);
            const log = await allChanges(t.store);
            assert.equal(log.length, 60);
            assertGapless(log);
            assert.deepEqual(
              results
                .flat()
                .map((c) => c.seq)
                .sort((x, y) => x - y),
              log.map((c) => c.seq),
            );
            for (const snap of snaps) {
              for (const c of log)
                if (c.seq > snap.head.seq)
                  assert.ok(c.datetimeMs > snap.atMs, `seq ${c.seq} dated at or before a snapshot's at`);
              await snap.close();
            }
          } finally {
            for (const o of others) await o.close();
          }
        });
      });
    }
  });
}
