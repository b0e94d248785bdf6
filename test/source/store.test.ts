import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { isResourceSyncError } from '../../src/core/errors.js';
import { openSqliteStore } from '../../src/source/index.js';
import type { ChangeRecord, SourceStore } from '../../src/source/store.js';
import { tempDir } from './helpers.js';

async function withStore(fn: (store: SourceStore, dir: string) => Promise<void>): Promise<void> {
  const { dir, cleanup } = await tempDir();
  const store = await openSqliteStore({ path: join(dir, 'state', 'source.db') });
  try {
    await fn(store, dir);
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

describe('SQLite store', () => {
  it('records a batch atomically with the inventory, gapless seq', async () => {
    await withStore(async (store) => {
      const rec = await store.recordChanges([
        { uri: 'a', change: 'created', setName: 's', length: 1, hashes: { md5: 'a'.repeat(32) }, type: 'text/plain' },
        { uri: 'b', change: 'created', setName: 's', length: 2 },
      ]);
      assert.deepEqual(
        rec.map((c) => c.seq),
        [1, 2],
      );
      await store.recordChanges([{ uri: 'a', change: 'deleted', setName: 's' }]);
      assert.equal(await store.getResource('a'), undefined);
      assert.equal((await store.getResource('b'))?.length, 2);
      assert.equal(await store.countResources('s'), 1);
      const head = await store.head();
      assert.equal(head.seq, 3);
      const changes = await allChanges(store);
      assert.deepEqual(
        changes.map((c) => [c.seq, c.uri, c.change]),
        [
          [1, 'a', 'created'],
          [2, 'b', 'created'],
          [3, 'a', 'deleted'],
        ],
      );
      assert.deepEqual(changes[2]?.hashes, {}, 'a delete carries no hash');
    });
  });

  it('keeps datetimes non-decreasing when the clock goes back', async () => {
    await withStore(async (store) => {
      const realNow = Date.now;
      try {
        const t = realNow();
        Date.now = () => t + 10_000;
        await store.recordChanges([{ uri: 'a', change: 'created', setName: 's', length: 1 }]);
        Date.now = () => t; // the clock steps back 10 s
        await store.recordChanges([{ uri: 'b', change: 'created', setName: 's', length: 1 }]);
      } finally {
        Date.now = realNow;
      }
      const [a, b] = await allChanges(store);
      assert.ok(b!.datetimeMs >= a!.datetimeMs);
    });
  });

  it('gives a snapshot a stable view and an `at` before every later change', async () => {
    await withStore(async (store) => {
      await store.recordChanges([{ uri: 'a', change: 'created', setName: 's', length: 1 }]);
      const snap = await store.snapshot();
      try {
        const [later] = await store.recordChanges([{ uri: 'b', change: 'created', setName: 's', length: 1 }]);
        assert.ok(later!.datetimeMs > snap.atMs, 'a change after the snapshot is dated after its at');
        const seen: string[] = [];
        for await (const r of snap.resources()) seen.push(r.uri);
        assert.deepEqual(seen, ['a']);
        assert.equal(await snap.countResources(), 1);
        assert.equal(snap.head.seq, 1);
      } finally {
        await snap.close();
      }
    });
  });

  it('rotates Change Lists by count, per set, with from = until of the previous one', async () => {
    await withStore(async (store) => {
      for (let i = 0; i < 5; i++)
        await store.recordChanges(
          [
            { uri: `x${i}`, change: 'created', setName: 'x', length: 1 },
            { uri: `y${i}`, change: 'created', setName: 'y', length: 1 },
          ],
          { rotation: { maxEntries: 2 } },
        );
      const parts = await store.changeListParts('x');
      assert.deepEqual(
        parts.map((p) => [p.number, p.count, p.untilMs !== undefined]),
        [
          [1, 2, true],
          [2, 2, true],
          [3, 1, false],
        ],
      );
      for (let i = 1; i < parts.length; i++) assert.equal(parts[i]!.fromMs, parts[i - 1]!.untilMs);
      assert.equal((await store.changeListParts('y')).length, 3);
      assert.equal(await store.setVersion('x'), 5);
      assert.deepEqual(await store.setNames(), ['x', 'y']);
    });
  });

  it('records a baseline without log entries, and keeps metadata', async () => {
    await withStore(async (store) => {
      await store.recordChanges([{ uri: 'a', change: 'created', setName: 's', length: 1 }], { log: false });
      assert.equal((await store.head()).seq, 0);
      assert.equal(await store.countResources(), 1);
      assert.equal((await store.changeListParts('s')).length, 1);
      await store.setMeta('k', 'v');
      assert.equal(await store.getMeta('k'), 'v');
      await store.setMeta('k', undefined);
      assert.equal(await store.getMeta('k'), undefined);
    });
  });

  it('pages resources in binary key order', async () => {
    await withStore(async (store) => {
      const keys = ['b', 'a/b', 'a-b', 'é', 'z', 'A'];
      await store.recordChanges(
        keys.map((uri) => ({ uri, change: 'created' as const, setName: 's', length: 1 })),
        { log: false },
      );
      const seen: string[] = [];
      for await (const r of store.resources({ pageSize: 2 })) seen.push(r.uri);
      assert.deepEqual(
        seen,
        [...keys].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y))),
      );
    });
  });

  it('names the file when the store cannot be opened', async () => {
    const { dir, cleanup } = await tempDir();
    try {
      const { writeFile } = await import('node:fs/promises');
      await writeFile(join(dir, 'not-a-db'), 'this is not SQLite '.repeat(100));
      await assert.rejects(openSqliteStore({ path: join(dir, 'not-a-db') }), (e) => {
        assert.ok(isResourceSyncError(e, 'RS_STORE'));
        assert.ok(e.message.includes(join(dir, 'not-a-db')));
        return true;
      });
    } finally {
      await cleanup();
    }
  });
});
