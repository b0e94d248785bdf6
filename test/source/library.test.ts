import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, it } from 'node:test';
import { isResourceSyncError } from '../../src/core/errors.js';
import { BlobStore, openSqliteStore, type RecordedChange, Source } from '../../src/source/index.js';
import { bytes, checkPackage, crawl, tempDir } from './helpers.js';

/**
 * Runs `fn` with a Source over a fresh SQLite store (site under `<dir>/site`) whose every generation counts as
 * "big" (served stale and regenerated in the background) and that never regenerates on a timer.
 */
async function withBigGroupSource(fn: (source: Source, dir: string) => Promise<void>): Promise<void> {
  const { dir, cleanup } = await tempDir();
  const store = await openSqliteStore({ path: join(dir, 'source.db') });
  try {
    const blobs = await BlobStore.open({ dir: join(dir, 'blobs') });
    const source = await Source.open({
      store,
      baseUrl: 'http://localhost/',
      siteDir: join(dir, 'site'),
      blobs,
      backgroundAfterMs: 0,
      regenerateAfterMs: Number.POSITIVE_INFINITY,
      fsync: false,
    });
    try {
      await fn(source, dir);
    } finally {
      await source.close();
    }
  } finally {
    await store.close();
    await cleanup();
  }
}

describe('Source library API', () => {
  it('records changes with metadata and content, and publishes valid documents and dumps', async () => {
    const { dir, cleanup } = await tempDir();
    const store = await openSqliteStore({ path: join(dir, 'source.db') });
    try {
      const blobs = await BlobStore.open({ dir: join(dir, 'blobs') });
      const source = await Source.open({
        store,
        baseUrl: 'https://repo.example.org/',
        siteDir: join(dir, 'site'),
        blobs,
        sets: [{ name: 'items', describedBy: 'https://repo.example.org/about-items' }, { name: 'theses' }],
        describedBy: 'https://repo.example.org/about',
        limits: { maxEntriesPerDocument: 2, changeListMaxEntries: 2 },
        fsync: false,
      });
      const heard: RecordedChange[] = [];
      const off = source.onChange((c) => heard.push(...c));
      const recorded = await source.recordChanges([
        {
          uri: 'items/1/a.pdf',
          change: 'created',
          setName: 'items',
          type: 'application/pdf',
          lastmod: '2024-01-02T03:04:05Z',
          content: () => bytes('pdf v1'),
        },
        { uri: 'items/2/b.txt', change: 'created', setName: 'items', type: 'text/plain', content: () => bytes('b') },
        {
          uri: 'https://other.example.org/c',
          change: 'created',
          setName: 'theses',
          length: 1,
          hashes: { md5: createHash('md5').update('c').digest('hex') },
        },
      ]);
      assert.equal(recorded.length, 3);
      assert.equal(recorded[0]?.uri, 'https://repo.example.org/items/1/a.pdf');
      assert.match(recorded[0]?.hash ?? '', /^md5:[0-9a-f]{32} sha-256:[0-9a-f]{64}$/);
      await source.recordChanges([
        {
          uri: 'items/1/a.pdf',
          change: 'updated',
          setName: 'items',
          type: 'application/pdf',
          content: () => bytes('pdf v2'),
        },
      ]);
      await source.recordChanges([{ uri: 'items/2/b.txt', change: 'deleted', setName: 'items' }]);
      assert.equal(heard.length, 5);
      off();

      // A hash that does not match the content: refused, nothing recorded.
      const seq = (await store.head()).seq;
      await assert.rejects(
        source.recordChanges([
          {
            uri: 'items/3/x',
            change: 'created',
            setName: 'items',
            hashes: { md5: '0'.repeat(32) },
            content: () => bytes('x'),
          },
        ]),
        (e) => isResourceSyncError(e, 'RS_HASH_MISMATCH'),
      );
      assert.equal((await store.head()).seq, seq);

      const { docs, packages } = await crawl(source, source.sourceDescriptionUrl);
      const sd = docs.find((d) => d.doc.kind === 'source-description')!;
      assert.deepEqual(sd.doc.links, [{ rel: 'describedby', href: 'https://repo.example.org/about' }]);
      const cap = docs.find((d) => d.url.endsWith('/items/capabilitylist.xml'))!;
      assert.ok(
        cap.doc.links.some((l) => l.rel === 'describedby' && l.href === 'https://repo.example.org/about-items'),
      );
      assert.ok(cap.doc.links.some((l) => l.rel === 'up' && l.href === source.sourceDescriptionUrl));
      const theses = docs.find((d) => d.url.endsWith('/theses/resourcelist.xml'))!;
      assert.deepEqual(
        theses.doc.entries.map((e) => e.loc),
        ['https://other.example.org/c'],
      );
      // The Change Dump holds both versions of a.pdf (from the kept content).
      const versions: string[] = [];
      for (const p of packages) {
        const m = await checkPackage(source, p);
        if (m.kind === 'change-dump-manifest')
          for (const e of m.entries) if (e.loc.endsWith('a.pdf')) versions.push(e.md?.hash ?? '');
      }
      assert.equal(new Set(versions).size, 2);
      // Closed change lists: 4 changes in `items` with at most 2 per list.
      const itemLists = docs.filter((d) => d.doc.kind === 'change-list' && d.url.includes('/items/'));
      assert.equal(itemLists.length, 2);
      assert.equal(itemLists.filter((d) => d.doc.md?.until !== undefined).length, 1);
      await source.close();
    } finally {
      await store.close();
      await cleanup();
    }
  });

  it('rotates Change Lists by period and never rewrites a closed one', async () => {
    const { dir, cleanup } = await tempDir();
    const store = await openSqliteStore({ path: join(dir, 'source.db') });
    try {
      const source = await Source.open({
        store,
        baseUrl: 'http://localhost/',
        siteDir: join(dir, 'site'),
        limits: { changeListPeriodMs: 1 },
        fsync: false,
      });
      await source.recordChanges([{ uri: 'a', change: 'created', length: 1 }]);
      await sleep(5);
      await source.recordChanges([{ uri: 'b', change: 'created', length: 1 }]);
      const first = await source.document('/resourcesync/default/changelist-0001.xml');
      assert.ok(first !== undefined);
      await sleep(5);
      await source.recordChanges([{ uri: 'a', change: 'updated', length: 2 }]);
      const again = await source.document('/resourcesync/default/changelist-0001.xml');
      assert.deepEqual(again, first, 'the closed list is not rewritten');
      const parts = await store.changeListParts('default');
      assert.equal(parts.length, 3);
      for (let i = 1; i < parts.length; i++) assert.equal(parts[i]!.fromMs, parts[i - 1]!.untilMs);
      const { docs } = await crawl(source, source.sourceDescriptionUrl);
      assert.equal(docs.filter((d) => d.doc.kind === 'change-list').length, 3);
      await source.close();
    } finally {
      await store.close();
      await cleanup();
    }
  });

  it('serves a big stale Resource List while a new one is generated in the background', async () => {
    const { dir, cleanup } = await tempDir();
    const store = await openSqliteStore({ path: join(dir, 'source.db') });
    try {
      const source = await Source.open({
        store,
        baseUrl: 'http://localhost/',
        siteDir: join(dir, 'site'),
        backgroundAfterMs: 0,
        fsync: false,
      });
      await source.recordChanges([{ uri: 'a', change: 'created', length: 1 }]);
      await source.prepare();
      const first = await source.document('/resourcesync/default/resourcelist.xml');
      await source.recordChanges([{ uri: 'b', change: 'created', length: 1 }]);
      const during = await source.document('/resourcesync/default/resourcelist.xml');
      assert.deepEqual(during, first, 'the complete earlier list is served at once');
      await source.ensure('resourcelist', 'default');
      const after = await source.document('/resourcesync/default/resourcelist.xml');
      assert.notEqual(after?.etag, first?.etag);
      // Change Lists never lag.
      const cl = await source.document('/resourcesync/default/changelist.xml');
      assert.match(await readFile(cl!.path, 'utf8'), /\/b<\/loc>/);
      await source.close();
    } finally {
      await store.close();
      await cleanup();
    }
  });

  it('brings a stale Change Dump up to date before serving it, even when its generation is "big"', async () => {
    // Issue 14: served stale, the Change Dump lacked the changes the Change Lists had, and every Destination
    // fetched each changed resource itself.
    await withBigGroupSource(async (source, dir) => {
      await source.recordChanges([{ uri: 'a', change: 'created', content: () => bytes('a1') }]);
      const first = await source.document('/resourcesync/default/changedump.xml');
      assert.ok(first !== undefined);
      await source.recordChanges([{ uri: 'b', change: 'created', content: () => bytes('b1') }]);
      const doc = await source.document('/resourcesync/default/changedump.xml');
      const text = await readFile(doc!.path, 'utf8');
      const packages = [...text.matchAll(/<loc>([^<]+\.zip)<\/loc>/g)].map((m) => m[1]);
      const last = packages
        .at(-1)!
        .split('/')
        .pop()!
        .replace(/\.zip$/, '');
      const manifest = await readFile(join(dir, 'site', 'resourcesync', 'default', `${last}-manifest.xml`), 'utf8');
      assert.match(manifest, /\/b<\/loc>/, 'the change recorded last is in a package');
    });
  });

  it('brings a stale Resource Dump up to date before serving it, even when its generation is "big"', async () => {
    // A Resource Dump older than the Resource List is refused by a Destination (issue 14: served stale while
    // the list was regenerated, it sent the bench's baselines to the list).
    await withBigGroupSource(async (source) => {
      await source.recordChanges([{ uri: 'a', change: 'created', content: () => bytes('a1') }]);
      assert.ok((await source.document('/resourcesync/default/resourcedump.xml')) !== undefined);
      await source.recordChanges([{ uri: 'b', change: 'created', content: () => bytes('b1') }]);
      const list = await source.document('/resourcesync/default/resourcelist.xml');
      const listAt = /at="([^"]+)"/.exec(await readFile(list!.path, 'utf8'))?.[1];
      const dump = await source.document('/resourcesync/default/resourcedump.xml');
      const dumpAt = /at="([^"]+)"/.exec(await readFile(dump!.path, 'utf8'))?.[1];
      assert.ok(
        dumpAt !== undefined && listAt !== undefined && dumpAt >= listAt,
        `dump at ${dumpAt}, list at ${listAt}`,
      );
    });
  });

  it('regenerates a big Resource List in the background once changes settle, without a request', async () => {
    const { dir, cleanup } = await tempDir();
    const store = await openSqliteStore({ path: join(dir, 'source.db') });
    try {
      const source = await Source.open({
        store,
        baseUrl: 'http://localhost/',
        siteDir: join(dir, 'site'),
        backgroundAfterMs: 0,
        regenerateAfterMs: 20,
        fsync: false,
      });
      await source.recordChanges([{ uri: 'a', change: 'created', length: 1 }]);
      await source.prepare();
      const path = join(dir, 'site', 'resourcesync', 'default', 'resourcelist.xml');
      assert.doesNotMatch(await readFile(path, 'utf8'), /\/b<\/loc>/);
      await source.recordChanges([{ uri: 'b', change: 'created', length: 1 }]);
      let text = '';
      for (let i = 0; i < 200 && !/\/b<\/loc>/.test(text); i++) {
        await sleep(25);
        text = await readFile(path, 'utf8');
      }
      assert.match(text, /\/b<\/loc>/, 'regenerated without being asked for');
      await source.close();
    } finally {
      await store.close();
      await cleanup();
    }
  });

  it('splits documents by size as well as by count', async () => {
    const { dir, cleanup } = await tempDir();
    const store = await openSqliteStore({ path: join(dir, 'source.db') });
    try {
      const source = await Source.open({
        store,
        baseUrl: 'http://localhost/',
        siteDir: join(dir, 'site'),
        limits: { maxBytesPerDocument: 2000 },
        fsync: false,
      });
      await source.recordChanges(
        Array.from({ length: 12 }, (_, i) => ({
          uri: `r${i}`,
          change: 'created' as const,
          length: i,
          type: 'text/plain',
        })),
      );
      const { docs } = await crawl(source, source.sourceDescriptionUrl);
      const parts = docs.filter((d) => d.doc.kind === 'resource-list');
      assert.ok(parts.length >= 2, 'split by size');
      assert.ok(docs.some((d) => d.doc.kind === 'resource-list-index'));
      for (const p of parts) assert.ok((await readFile(p.path)).length <= 2000);
      assert.equal(
        parts.reduce((a, p) => a + p.doc.entries.length, 0),
        12,
      );
      await source.close();
    } finally {
      await store.close();
      await cleanup();
    }
  });

  it('refuses a base URL that is not absolute http(s)', async () => {
    const { dir, cleanup } = await tempDir();
    const store = await openSqliteStore({ path: join(dir, 'source.db') });
    try {
      for (const bad of ['example.org/', 'ftp://example.org/', '/relative', 'http://example.org/?q=1'])
        await assert.rejects(Source.open({ store, baseUrl: bad, siteDir: dir }), (e) =>
          isResourceSyncError(e, 'RS_CONFIG'),
        );
    } finally {
      await store.close();
      await cleanup();
    }
  });
});
