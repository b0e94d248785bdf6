import assert from 'node:assert/strict';
import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { datetimeMs } from '../../src/core/datetime.js';
import { type DirectorySource, openDirectorySource } from '../../src/source/index.js';
import { checkPackage, crawl, tempDir } from './helpers.js';

/**
 * A generated collection with small limits so every kind of document appears: a Resource List Index with
 * parts, Resource Dump packages, closed Change Lists and their Index, Change Dump packages with several
 * versions of one resource.
 */
describe('documents of a directory Source', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let source: DirectorySource;
  const warnings: string[] = [];

  before(async () => {
    ({ dir, cleanup } = await tempDir());
    const coll = join(dir, 'coll');
    await mkdir(join(coll, 'images'), { recursive: true });
    await mkdir(join(coll, 'texts', 'deep'), { recursive: true });
    for (let i = 0; i < 7; i++) await writeFile(join(coll, 'texts', `t${i}.txt`), `text ${i}\n`);
    await writeFile(join(coll, 'texts', 'deep', 'a b#c%d é.html'), '<p>odd name</p>');
    for (let i = 0; i < 3; i++) await writeFile(join(coll, 'images', `i${i}.png`), Buffer.alloc(100 + i, i));
    await writeFile(join(coll, 'top.json'), '{}');
    await writeFile(join(coll, '.hidden'), 'not a resource');
    source = await openDirectorySource({
      dir: coll,
      baseUrl: 'http://example.org/coll/',
      stateDir: join(dir, 'state'),
      sets: 'top-level',
      limits: { maxEntriesPerDocument: 3, changeListMaxEntries: 2, dumpMaxFiles: 2 },
      fsync: false,
      onWarning: (m) => warnings.push(m),
    });
    // Changes: creates, updates (one resource three times), a delete and a rename.
    await writeFile(join(coll, 'texts', 't0.txt'), 'text 0, version 2\n');
    await writeFile(join(coll, 'texts', 'new.txt'), 'new\n');
    await source.scan();
    await writeFile(join(coll, 'texts', 't0.txt'), 'text 0, version 3 (longer)\n');
    await rm(join(coll, 'texts', 't1.txt'));
    await source.scan();
    await rename(join(coll, 'texts', 't2.txt'), join(coll, 'texts', 't2-renamed.txt'));
    await writeFile(join(coll, 'texts', 't0.txt'), 'text 0, version 4\n');
    await source.scan();
  });

  after(async () => {
    await source?.close();
    await cleanup?.();
  });

  it('emits only valid documents, with indexes, closed change lists and dumps', async () => {
    const { docs, packages } = await crawl(source, source.sourceDescriptionUrl);
    const kinds = new Set(docs.map((d) => d.doc.kind));
    for (const k of [
      'source-description',
      'capability-list',
      'resource-list-index',
      'resource-list',
      'resource-dump',
      'resource-dump-index',
      'resource-dump-manifest',
      'change-list-index',
      'change-list',
      'change-dump',
      'change-dump-index',
      'change-dump-manifest',
    ] as const)
      assert.ok(kinds.has(k), `a ${k} is emitted`);
    // Three sets: default (top.json), images, texts.
    const sd = docs.find((d) => d.doc.kind === 'source-description')!;
    assert.equal(sd.url, 'http://example.org/.well-known/resourcesync');
    assert.equal(sd.doc.entries.length, 3);
    const closed = docs.filter((d) => d.doc.kind === 'change-list' && d.doc.md?.until !== undefined);
    assert.ok(closed.length >= 2, 'closed change lists');
    const open = docs.filter((d) => d.doc.kind === 'change-list' && d.doc.md?.until === undefined);
    assert.equal(open.length, 3, 'one open change list per set');
    for (const p of packages) await checkPackage(source, p);
    assert.ok(packages.length >= 4);
  });

  it('lists every resource once in the Resource List Index parts, with correct URLs', async () => {
    const { docs } = await crawl(source, source.sourceDescriptionUrl);
    const locs = docs.filter((d) => d.doc.kind === 'resource-list').flatMap((d) => d.doc.entries.map((e) => e.loc));
    assert.equal(new Set(locs).size, locs.length);
    assert.ok(locs.includes('http://example.org/coll/texts/deep/a%20b%23c%25d%20%C3%A9.html'));
    assert.ok(locs.includes('http://example.org/coll/texts/t2-renamed.txt'));
    assert.ok(!locs.includes('http://example.org/coll/texts/t2.txt'));
    assert.ok(!locs.includes('http://example.org/coll/texts/t1.txt'));
    assert.ok(!locs.some((l) => l.includes('hidden')));
    assert.equal(locs.length, 12);
    for (const d of docs.filter((x) => x.doc.kind === 'resource-list')) {
      assert.ok(d.doc.links.some((l) => l.rel === 'up'));
      assert.equal(
        d.doc.links.some((l) => l.rel === 'index'),
        /-\d{4}\.xml$/.test(d.url),
        `${d.url}: index link on parts only`,
      );
      assert.ok(datetimeMs(d.doc.md!.at!) <= datetimeMs(d.doc.md!.completed!));
    }
  });

  it('records changes in order, in forward chronological Change Lists with true from/until', async () => {
    const { docs } = await crawl(source, source.sourceDescriptionUrl);
    const lists = docs
      .filter((d) => d.doc.kind === 'change-list' && d.url.includes('/texts/'))
      .sort((a, b) => a.url.localeCompare(b.url));
    const changes = lists.flatMap((d) =>
      d.doc.entries.map((e) => [e.loc.replace('http://example.org/coll/texts/', ''), e.md!.change]),
    );
    assert.deepEqual(changes, [
      ['new.txt', 'created'],
      ['t0.txt', 'updated'],
      ['t0.txt', 'updated'],
      ['t1.txt', 'deleted'],
      ['t0.txt', 'updated'],
      ['t2-renamed.txt', 'created'],
      ['t2.txt', 'deleted'],
    ]);
    let last = 0;
    for (const d of lists) {
      const from = datetimeMs(d.doc.md!.from!);
      const until = d.doc.md!.until === undefined ? Number.POSITIVE_INFINITY : datetimeMs(d.doc.md!.until);
      for (const e of d.doc.entries) {
        const t = datetimeMs(e.md!.datetime!);
        assert.ok(t >= last && t >= from && t <= until, 'datetimes in order and inside from/until');
        last = t;
      }
    }
  });

  it('keeps every version of a resource changed several times in the Change Dump', async () => {
    const { packages } = await crawl(source, source.sourceDescriptionUrl);
    const versions: string[] = [];
    for (const p of packages.filter((x) => x.url.includes('/texts/changedump'))) {
      const m = await checkPackage(source, p);
      for (const e of m.entries) if (e.loc.endsWith('/t0.txt')) versions.push(e.md!.hash!);
    }
    assert.equal(new Set(versions).size, 3, 'three versions of t0.txt');
  });

  it('regenerates documents only when the store moved', async () => {
    const a = await source.document('/coll/resourcesync/texts/resourcelist.xml');
    const b = await source.document('/coll/resourcesync/texts/resourcelist.xml');
    assert.deepEqual(a, b);
    await writeFile(join(source.root, 'texts', 'later.txt'), 'later');
    await source.scan();
    const c = await source.document('/coll/resourcesync/texts/resourcelist.xml');
    assert.notEqual(c?.etag, a?.etag);
  });

  it('refuses requests outside the collection and unknown documents', async () => {
    for (const p of [
      '/coll/../etc/passwd',
      '/coll/%2e%2e/state/source.db',
      '/coll/texts%2f..%2f..%2fx',
      '/coll/.hidden',
      '/other/texts/t0.txt',
      '/coll/texts/%ZZ',
      '/coll/resourcesync/texts/resourcelist.xml',
    ])
      assert.equal(await source.resource(p), undefined, p);
    assert.equal(await source.document('/coll/resourcesync/nosuchset/capabilitylist.xml'), undefined);
    assert.equal(await source.document('/coll/resourcesync/texts/whatever.xml'), undefined);
    assert.equal(await source.document('/coll/resourcesync/texts/resourcedump-v1-0001.zip'), undefined);
    const r = await source.resource('/coll/texts/deep/a%20b%23c%25d%20%C3%A9.html');
    assert.ok(r !== undefined);
    assert.equal(r.contentType, 'text/html');
    assert.equal(r.length, 15);
    assert.match(r.etag, /^"[0-9a-f]{64}"$/);
    assert.equal(
      source.capabilityListUrl('/coll/images/i0.png'),
      'http://example.org/coll/resourcesync/images/capabilitylist.xml',
    );
    assert.match(
      await source.robotsTxt(),
      /Sitemap: http:\/\/example\.org\/coll\/resourcesync\/texts\/resourcelist\.xml/,
    );
  });
});
