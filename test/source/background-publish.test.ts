import assert from 'node:assert/strict';
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { isResourceSyncError } from '../../src/core/errors.js';
import { BlobStore, Source, openSqliteStore } from '../../src/source/index.js';
import { bytes, tempDir } from './helpers.js';

/** Change Lists and Change Dumps are published in the background once changes settle. */
describe('Source background publication', () => {
  it('regenerates the Change List and Change Dump a Destination asked for, after changes settle, without a request, while they are asked for', async () => {
    const { dir, cleanup } = await tempDir();
    const store = await openSqliteStore({ path: join(dir, 'source.db') });
    try {
      const source = await Source.open({
        store,
        baseUrl: 'https://repo.example.org/',
        siteDir: join(dir, 'site'),
        blobs: await BlobStore.open({ dir: join(dir, 'blobs') }),
        sets: [{ name: 'items' }, { name: 'other' }],
        fsync: false,
        regenerateAfterMs: 30,
      });
      try {
        await source.recordChanges([
          { uri: 'items/a.txt', change: 'created', setName: 'items', content: () => bytes('a1') },
        ]);
        await source.recordChanges([
          { uri: 'other/x.txt', change: 'created', setName: 'other', content: () => bytes('x') },
        ]);
        await source.settled();
        // Nothing was asked for yet: nothing is generated in the background.
        assert.deepEqual(await readdir(join(dir, 'site')).catch(() => []), []);
        // A Destination asks for the Change List and the Change Dump of `items` (as a request would).
        assert.ok(await source.document('/resourcesync/items/changelist.xml'));
        assert.ok(await source.document('/resourcesync/items/changedump.xml'));
        // One open part: changelist.xml is the Change List itself.
        const list = join(dir, 'site', 'resourcesync', 'items', 'changelist.xml');
        assert.doesNotMatch(await readFile(list, 'utf8'), /b\.txt/);
        await source.recordChanges([
          { uri: 'items/b.txt', change: 'created', setName: 'items', content: () => bytes('b1') },
        ]);
        await source.settled();
        // Published without a request: the list names the change, the dump has a package holding it.
        assert.match(await readFile(list, 'utf8'), /items\/b\.txt/);
        const dump = await readFile(join(dir, 'site', 'resourcesync', 'items', 'changedump.xml'), 'utf8');
        const manifest = /href="https:\/\/repo\.example\.org\/resourcesync\/items\/([^"]+-manifest\.xml)"/.exec(
          dump,
        )?.[1];
        assert.ok(manifest !== undefined, dump);
        assert.match(await readFile(join(dir, 'site', 'resourcesync', 'items', manifest), 'utf8'), /items\/b\.txt/);
        // The other set, never asked for, is still not generated.
        assert.deepEqual(await readdir(join(dir, 'site', 'resourcesync')), ['items']);
        // Not asked for since that generation: the next changes leave the documents to the next request.
        await source.recordChanges([
          { uri: 'items/c.txt', change: 'created', setName: 'items', content: () => bytes('c1') },
        ]);
        await source.settled();
        assert.doesNotMatch(await readFile(list, 'utf8'), /items\/c\.txt/);
        assert.ok(await source.document('/resourcesync/items/changelist.xml'));
        assert.match(await readFile(list, 'utf8'), /items\/c\.txt/);
      } finally {
        await source.close();
      }
    } finally {
      await store.close();
      await cleanup();
    }
  });

  it("regenerates a set whose name holds ':' (the background run split its key at every colon)", async () => {
    const { dir, cleanup } = await tempDir();
    const store = await openSqliteStore({ path: join(dir, 'source.db') });
    try {
      const source = await Source.open({
        store,
        baseUrl: 'https://repo.example.org/',
        siteDir: join(dir, 'site'),
        sets: [{ name: 'a:b' }],
        fsync: false,
        regenerateAfterMs: 30,
      });
      try {
        await source.recordChanges([{ uri: 'a.txt', change: 'created', setName: 'a:b', content: () => bytes('a') }]);
        assert.ok(await source.document('/resourcesync/a:b/changelist.xml'));
        await source.recordChanges([{ uri: 'b.txt', change: 'created', setName: 'a:b', content: () => bytes('b') }]);
        await source.settled();
        const list = await readFile(join(dir, 'site', 'resourcesync', 'a:b', 'changelist.xml'), 'utf8');
        assert.match(list, /repo\.example\.org\/b\.txt/);
      } finally {
        await source.close();
      }
    } finally {
      await store.close();
      await cleanup();
    }
  });

  it('refuses a Change List period below 1 ms (one list per change)', async () => {
    const { dir, cleanup } = await tempDir();
    const store = await openSqliteStore({ path: join(dir, 'source.db') });
    try {
      for (const changeListPeriodMs of [0, -5, 1.5])
        await assert.rejects(
          Source.open({ store, baseUrl: 'https://repo.example.org/', siteDir: dir, limits: { changeListPeriodMs } }),
          (e) => isResourceSyncError(e, 'RS_CONFIG') && /changeListPeriodMs/.test(e.message),
        );
    } finally {
      await store.close();
      await cleanup();
    }
  });
});
