import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createHeader, type Entry } from '../../src/core/model.js';
import { fileSource, readDocument, writeSplitDocuments } from '../../src/xml/index.js';
import { rejectsWith } from './helpers.js';

const BASE = 'http://example.com/dataset1/';
const UP = { rel: 'up', href: `${BASE}capabilitylist.xml` };

function resources(n: number): Entry[] {
  return Array.from({ length: n }, (_, i) => ({
    element: 'url' as const,
    loc: `http://example.com/res/${i}`,
    md: { hash: `md5:${String(i).padStart(32, '0')}`, length: i },
    links: [],
  }));
}

function changes(n: number): Entry[] {
  return Array.from({ length: n }, (_, i) => ({
    element: 'url' as const,
    loc: `http://example.com/res/${i % 3}`,
    md: { change: 'updated', datetime: `2013-01-02T${String(i).padStart(2, '0')}:00:00Z` },
    links: [],
  }));
}

describe('writeSplitDocuments', () => {
  let dir = '';
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rs-xml-split-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('writes one document under the index name when everything fits', async () => {
    const d = join(dir, 'one');
    const header = createHeader('resource-list', { at: '2013-01-03T09:00:00Z' }, [UP]);
    const r = await writeSplitDocuments({
      header,
      entries: resources(10),
      dir: d,
      baseUrl: BASE,
      name: (n) => `resourcelist-${n}.xml`,
      indexName: 'resourcelist.xml',
      maxEntries: 10,
    });
    assert.equal(r.split, false);
    assert.equal(r.index, undefined);
    assert.equal(r.entries, 10);
    assert.deepStrictEqual(await readdir(d), ['resourcelist.xml']);
    assert.equal(r.documents[0]?.url, `${BASE}resourcelist.xml`);
    const doc = await readDocument(fileSource(join(d, 'resourcelist.xml')));
    assert.deepStrictEqual(doc.links, [UP], 'no index link');
    assert.equal(doc.entries.length, 10);
    assert.equal(r.bytes, (await readFile(join(d, 'resourcelist.xml'))).byteLength);
  });

  it('splits a Resource List past maxEntries: parts with up + index links, and an index', async () => {
    const d = join(dir, 'rl');
    const header = createHeader('resource-list', { at: '2013-01-03T09:00:00Z', completed: '2013-01-03T09:10:00Z' }, [
      UP,
    ]);
    async function* entries(): AsyncGenerator<Entry> {
      yield* resources(25);
    }
    const r = await writeSplitDocuments({
      header,
      entries: entries(),
      dir: d,
      baseUrl: BASE,
      name: (n) => `resourcelist-${n}.xml`,
      indexName: 'resourcelist-index.xml',
      maxEntries: 10,
    });
    assert.equal(r.split, true);
    assert.deepStrictEqual(
      r.documents.map((p) => [p.url, p.entries]),
      [
        [`${BASE}resourcelist-1.xml`, 10],
        [`${BASE}resourcelist-2.xml`, 10],
        [`${BASE}resourcelist-3.xml`, 5],
      ],
    );
    assert.deepStrictEqual((await readdir(d)).sort(), [
      'resourcelist-1.xml',
      'resourcelist-2.xml',
      'resourcelist-3.xml',
      'resourcelist-index.xml',
    ]);
    let n = 0;
    for (const p of r.documents) {
      const part = await readDocument(fileSource(p.path));
      assert.equal(part.kind, 'resource-list');
      assert.deepStrictEqual(part.md, header.md);
      assert.deepStrictEqual(part.links, [UP, { rel: 'index', href: `${BASE}resourcelist-index.xml` }]);
      for (const e of part.entries) assert.equal(e.loc, `http://example.com/res/${n++}`);
      assert.equal(p.bytes, (await readFile(p.path)).byteLength);
    }
    assert.equal(n, 25);
    const index = await readDocument(fileSource(join(d, 'resourcelist-index.xml')));
    assert.equal(index.kind, 'resource-list-index');
    assert.deepStrictEqual(index.md, header.md);
    assert.deepStrictEqual(index.links, [UP]);
    assert.deepStrictEqual(
      index.entries.map((e) => [e.element, e.loc, e.md]),
      r.documents.map((p) => ['sitemap', p.url, { at: '2013-01-03T09:00:00Z', completed: '2013-01-03T09:10:00Z' }]),
    );
    assert.equal(r.index?.entries, 3);
  });

  it('splits a Change List with each part covering from its start to its last change', async () => {
    const d = join(dir, 'cl');
    const header = createHeader('change-list', { from: '2013-01-02T00:00:00Z' }, [UP]);
    const r = await writeSplitDocuments({
      header,
      entries: changes(7),
      dir: d,
      baseUrl: BASE,
      name: (n) => `changelist-${n}.xml`,
      indexName: 'changelist.xml',
      maxEntries: 3,
    });
    const index = await readDocument(fileSource(join(d, 'changelist.xml')));
    assert.equal(index.kind, 'change-list-index');
    assert.deepStrictEqual(index.md, { capability: 'changelist', from: '2013-01-02T00:00:00Z' });
    assert.deepStrictEqual(
      index.entries.map((e) => e.md),
      [
        { from: '2013-01-02T00:00:00Z', until: '2013-01-02T02:00:00Z' },
        { from: '2013-01-02T02:00:00Z', until: '2013-01-02T05:00:00Z' },
        { from: '2013-01-02T05:00:00Z' },
      ],
    );
    const parts = await Promise.all(r.documents.map((p) => readDocument(fileSource(p.path))));
    assert.deepStrictEqual(
      parts.map((p) => p.md),
      [
        { capability: 'changelist', from: '2013-01-02T00:00:00Z', until: '2013-01-02T02:00:00Z' },
        { capability: 'changelist', from: '2013-01-02T02:00:00Z', until: '2013-01-02T05:00:00Z' },
        { capability: 'changelist', from: '2013-01-02T05:00:00Z' },
      ],
    );
    assert.deepStrictEqual(
      parts.flatMap((p) => p.entries.map((e) => e.md?.datetime)),
      changes(7).map((e) => e.md?.datetime),
    );
  });

  it('splits on maxBytes, every part within the limit', async () => {
    const d = join(dir, 'bytes');
    const header = createHeader('resource-list', { at: '2013-01-03T09:00:00Z' }, [UP]);
    const maxBytes = 2000;
    const r = await writeSplitDocuments({
      header,
      entries: resources(40),
      dir: d,
      baseUrl: BASE,
      name: (n) => `rl-${n}.xml`,
      indexName: 'rl.xml',
      maxBytes,
    });
    assert.ok(r.documents.length >= 3, `${r.documents.length} parts`);
    for (const [i, p] of r.documents.entries()) {
      const size = (await readFile(p.path)).byteLength;
      assert.ok(size <= maxBytes, `${p.path} is ${size} bytes`);
      if (i < r.documents.length - 1)
        assert.ok(size > maxBytes * 0.7, `${p.path} is only ${size} bytes: parts are filled`);
    }
    assert.equal(
      r.documents.reduce((a, p) => a + p.entries, 0),
      40,
    );
  });

  it('refuses an entry larger than a document may be, and leaves nothing behind', async () => {
    const d = join(dir, 'big');
    await rejectsWith(
      () =>
        writeSplitDocuments({
          header: createHeader('resource-list'),
          entries: [...resources(3), { element: 'url', loc: `http://e.com/${'x'.repeat(5000)}`, links: [] }],
          dir: d,
          baseUrl: BASE,
          name: (n) => `p${n}.xml`,
          indexName: 'i.xml',
          maxBytes: 2000,
          maxEntries: 2,
        }),
      'RS_LIMIT',
    );
    assert.deepStrictEqual(await readdir(d), []);
  });

  it('keeps the old files when the entries fail half way', async () => {
    const d = join(dir, 'fail');
    await rm(d, { recursive: true, force: true });
    await writeSplitDocuments({
      header: createHeader('resource-list'),
      entries: resources(2),
      dir: d,
      baseUrl: BASE,
      name: (n) => `p${n}.xml`,
      indexName: 'i.xml',
    });
    const before = await readFile(join(d, 'i.xml'));
    function* failing(): Generator<Entry> {
      yield* resources(5);
      throw new Error('store went away');
    }
    await assert.rejects(
      writeSplitDocuments({
        header: createHeader('resource-list'),
        entries: failing(),
        dir: d,
        baseUrl: BASE,
        name: (n) => `p${n}.xml`,
        indexName: 'i.xml',
        maxEntries: 2,
      }),
    );
    assert.deepStrictEqual(await readdir(d), ['i.xml']);
    assert.deepStrictEqual(await readFile(join(d, 'i.xml')), before);
  });

  it('stops with RS_ABORTED and leaves no file behind', async () => {
    const d = join(dir, 'abort');
    const ac = new AbortController();
    function* entries(): Generator<Entry> {
      for (const [i, e] of resources(100).entries()) {
        if (i === 30) ac.abort();
        yield e;
      }
    }
    await rejectsWith(
      () =>
        writeSplitDocuments({
          header: createHeader('resource-list'),
          entries: entries(),
          dir: d,
          baseUrl: BASE,
          name: (n) => `p${n}.xml`,
          indexName: 'i.xml',
          maxEntries: 10,
          signal: ac.signal,
        }),
      'RS_ABORTED',
    );
    assert.deepStrictEqual(await readdir(d), []);
  });

  it('refuses file names that are not plain names', async () => {
    await writeFile(join(dir, 'x'), '');
    await rejectsWith(
      () =>
        writeSplitDocuments({
          header: createHeader('resource-list'),
          entries: [],
          dir,
          baseUrl: BASE,
          name: (n) => `../p${n}.xml`,
          indexName: '../i.xml',
        }),
      'RS_UNSAFE_PATH',
    );
  });
});
