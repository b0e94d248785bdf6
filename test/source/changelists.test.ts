// Change Lists of the Source (issue 12): a plain Change List while a set has one, an Index once it rotates,
// and Change Lists split by bytes when their changes exceed the document size limit.
import assert from 'node:assert/strict';
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { Entry } from '../../src/core/model.js';
import {
  createSourceServer,
  type DirectorySource,
  openDirectorySource,
  openSqliteStore,
  Source,
  type SourceLimits,
} from '../../src/source/index.js';
import { readDocument } from '../../src/xml/index.js';
import { crawl, tempDir } from './helpers.js';

const CL = '/resourcesync/default/changelist.xml';

async function withSource(limits: SourceLimits, fn: (source: Source) => Promise<void>): Promise<void> {
  const { dir, cleanup } = await tempDir();
  const store = await openSqliteStore({ path: join(dir, 'source.db') });
  try {
    const source = await Source.open({
      store,
      baseUrl: 'http://localhost/',
      siteDir: join(dir, 'site'),
      limits,
      fsync: false,
      regenerateAfterMs: Number.POSITIVE_INFINITY,
    });
    try {
      await fn(source);
    } finally {
      await source.close();
    }
  } finally {
    await store.close();
    await cleanup();
  }
}

async function record(source: Source, from: number, count: number, prefix = 'r'): Promise<void> {
  await source.recordChanges(
    Array.from({ length: count }, (_, i) => ({ uri: `${prefix}-${from + i}`, change: 'created' as const, length: 1 })),
  );
}

async function documentAt(source: Source, pathname: string) {
  const f = await source.document(pathname);
  assert.ok(f !== undefined, `${pathname} is served`);
  return { file: f, doc: await readDocument(await readFile(f.path), { url: `http://localhost${pathname}` }) };
}

/** Every change in the Change Lists reachable from changelist.xml, in order, and the lists' documents. */
async function changesOf(source: Source): Promise<{ locs: string[]; lists: { path: string; bytes: number }[] }> {
  const { doc } = await documentAt(source, CL);
  const lists = doc.kind === 'change-list' ? [CL] : doc.entries.map((e) => new URL(e.loc).pathname);
  const locs: string[] = [];
  const out: { path: string; bytes: number }[] = [];
  for (const p of lists) {
    const { file, doc: list } = await documentAt(source, p);
    assert.equal(list.kind, 'change-list', p);
    locs.push(...list.entries.map((e: Entry) => e.loc));
    out.push({ path: p, bytes: (await stat(file.path)).size });
  }
  return { locs, lists: out };
}

describe('Change Lists of the Source', () => {
  it('while a set has one Change List, changelist.xml is that list (plain); an Index once it rotates', async () => {
    await withSource({ changeListMaxEntries: 3 }, async (source) => {
      await record(source, 0, 2);
      const plain = await documentAt(source, CL);
      assert.equal(plain.doc.kind, 'change-list');
      assert.equal(plain.doc.entries.length, 2);
      assert.ok(!plain.doc.links.some((l) => l.rel === 'index'), 'no index link: there is no index');
      assert.ok(plain.doc.md?.from !== undefined && plain.doc.md.until === undefined, 'open: from, no until');

      await record(source, 2, 3); // 5 changes: the first list closes at 3
      const index = await documentAt(source, CL);
      assert.equal(index.doc.kind, 'change-list-index');
      assert.deepEqual(
        index.doc.entries.map((e) => new URL(e.loc).pathname),
        ['/resourcesync/default/changelist-0001.xml', '/resourcesync/default/changelist-0002.xml'],
      );
      const closed = await documentAt(source, '/resourcesync/default/changelist-0001.xml');
      assert.ok(closed.doc.md?.until !== undefined);
      assert.ok(closed.doc.links.some((l) => l.rel === 'index' && l.href.endsWith('/changelist.xml')));
      const { locs } = await changesOf(source);
      assert.deepEqual(
        locs,
        Array.from({ length: 5 }, (_, i) => `http://localhost/r-${i}`),
      );
      // The closed list is not written again.
      await record(source, 5, 1);
      await documentAt(source, CL);
      const again = await source.document('/resourcesync/default/changelist-0001.xml');
      assert.equal(again?.etag, closed.file.etag);
      // Everything crawled validates.
      const { docs } = await crawl(source, source.sourceDescriptionUrl);
      assert.ok(docs.some((d) => d.doc.kind === 'change-list-index'));
    });
  });

  it('a Change List whose changes exceed the byte limit is split; no document exceeds it', async () => {
    const maxBytes = 4096;
    await withSource({ maxBytesPerDocument: maxBytes, changeListMaxEntries: 40 }, async (source) => {
      const long = 'x'.repeat(200);
      // 30 changes of ~450 bytes each: about 13 KB in one open part of the log.
      await record(source, 0, 30, long);
      const first = await changesOf(source);
      assert.deepEqual(
        first.locs,
        Array.from({ length: 30 }, (_, i) => `http://localhost/${long}-${i}`),
      );
      assert.ok(first.lists.length >= 4, `split into ${first.lists.length} documents`);
      for (const l of first.lists) assert.ok(l.bytes <= maxBytes, `${l.path}: ${l.bytes} bytes`);
      assert.equal(first.lists[0]!.path, '/resourcesync/default/changelist-0001.xml');
      assert.equal(first.lists[1]!.path, '/resourcesync/default/changelist-0001-0002.xml');
      // More changes, then a rotation (40 per part): the closed part's documents stay, the new part follows.
      await record(source, 30, 20, long);
      const second = await changesOf(source);
      assert.deepEqual(
        second.locs,
        Array.from({ length: 50 }, (_, i) => `http://localhost/${long}-${i}`),
      );
      for (const l of second.lists) assert.ok(l.bytes <= maxBytes, `${l.path}: ${l.bytes} bytes`);
      assert.ok(second.lists.some((l) => l.path.startsWith('/resourcesync/default/changelist-0002')));
      const closedEtags = async () => {
        const out: string[] = [];
        for (const l of second.lists.filter((x) => x.path.includes('changelist-0001')))
          out.push((await source.document(l.path))!.etag);
        return out;
      };
      const before = await closedEtags();
      await record(source, 50, 1, long);
      await changesOf(source);
      assert.deepEqual(await closedEtags(), before, 'the closed part is not written again');
      const { docs } = await crawl(source, source.sourceDescriptionUrl);
      assert.ok(docs.filter((d) => d.doc.kind === 'change-list').length >= 5);
    });
  });

  it('serve redirects <base>changelist.xml (where the reference Python client looks) to the Change List', async () => {
    const { dir, cleanup } = await tempDir();
    try {
      const coll = join(dir, 'coll');
      await mkdir(coll, { recursive: true });
      await writeFile(join(coll, 'a.txt'), 'a');
      let resolveSite: (s: DirectorySource) => void = () => undefined;
      const server = createSourceServer(new Promise<DirectorySource>((r) => (resolveSite = r)));
      const { url } = await server.listen(0, '127.0.0.1');
      const site = await openDirectorySource({
        dir: coll,
        baseUrl: `${url}data/`,
        stateDir: join(dir, 'state'),
        fsync: false,
      });
      resolveSite(site);
      try {
        const res = await fetch(`${url}data/changelist.xml`, { redirect: 'manual' });
        assert.equal(res.status, 302);
        await res.arrayBuffer();
        assert.equal(res.headers.get('location'), `${url}data/resourcesync/default/changelist.xml`);
        const followed = await fetch(`${url}data/changelist.xml`);
        assert.match(await followed.text(), /capability="changelist"/);
        // Only there: elsewhere it is 404.
        const other = await fetch(`${url}changelist.xml`, { redirect: 'manual' });
        await other.arrayBuffer();
        assert.equal(other.status, 404);
        // A resource of that name is served as itself.
        await writeFile(join(coll, 'changelist.xml'), '<mine/>');
        const own = await fetch(`${url}data/changelist.xml`, { redirect: 'manual' });
        assert.equal(own.status, 200);
        assert.equal(await own.text(), '<mine/>');
      } finally {
        await server.close();
        await site.close();
      }
    } finally {
      await cleanup();
    }
  });
});
