// One Source, several entry points (its root, /.well-known/resourcesync, a Source Description Index, any of its
// Source Descriptions, a Capability List): a copy made through one accepts the others, each set keeping its
// watermark; another Source is still refused (issue: a copy made from the root of a Source with an Index
// recorded the Index, a run from a Capability List recorded its Source Description: "a copy of another Source").
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { isResourceSyncError } from '../../src/core/errors.js';
import { Destination } from '../../src/destination/destination.js';
import { DestinationState } from '../../src/destination/state.js';
import type { DirectorySource } from '../../src/source/directory.js';
import type { SourceServer } from '../../src/source/server.js';
import { serveSets } from '../source/sets-source.js';
import { StaticSource, hashAttr } from './static-source.js';

const NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/"';
const AT = '2026-01-01T00:00:00Z';

/**
 * A static Source with a Source Description Index at the well-known URI over two Source Descriptions (naming
 * it by an `up` link, as some Sources do, not `index`), set `a` in the first and `b` in the second, each a
 * Resource List and an empty Change List.
 */
function publishIndexed(src: StaticSource): void {
  const u = (p: string) => src.url(p);
  src.set(
    '/.well-known/resourcesync',
    `<?xml version="1.0" encoding="UTF-8"?>
<sitemapindex ${NS}><rs:md capability="description"/>
  <sitemap><loc>${u('/sd/1.xml')}</loc><rs:md capability="description"/></sitemap>
  <sitemap><loc>${u('/sd/2.xml')}</loc><rs:md capability="description"/></sitemap>
</sitemapindex>`,
    'application/xml',
  );
  for (const [n, set] of [
    ['1', 'a'],
    ['2', 'b'],
  ] as const) {
    src.set(
      `/sd/${n}.xml`,
      `<?xml version="1.0" encoding="UTF-8"?>
<urlset ${NS}><rs:ln rel="up" href="${u('/.well-known/resourcesync')}"/><rs:md capability="description"/>
  <url><loc>${u(`/${set}/capabilitylist.xml`)}</loc><rs:md capability="capabilitylist"/></url>
</urlset>`,
      'application/xml',
    );
    publishSet(src, set, u(`/sd/${n}.xml`));
  }
}

/** Set `set` of a static Source: Capability List (up: `sd`), Resource List of one resource, empty Change List. */
function publishSet(src: StaticSource, set: string, sd: string): void {
  const u = (p: string) => src.url(p);
  const body = Buffer.from(`${set} of ${src.base}\n`);
  src.set(`/${set}/r.txt`, body, 'text/plain');
  src.set(
    `/${set}/capabilitylist.xml`,
    `<?xml version="1.0" encoding="UTF-8"?>
<urlset ${NS}><rs:ln rel="up" href="${sd}"/><rs:md capability="capabilitylist"/>
  <url><loc>${u(`/${set}/resourcelist.xml`)}</loc><rs:md capability="resourcelist"/></url>
  <url><loc>${u(`/${set}/changelist.xml`)}</loc><rs:md capability="changelist"/></url>
</urlset>`,
    'application/xml',
  );
  src.set(
    `/${set}/resourcelist.xml`,
    `<?xml version="1.0" encoding="UTF-8"?>
<urlset ${NS}><rs:ln rel="up" href="${u(`/${set}/capabilitylist.xml`)}"/><rs:md capability="resourcelist" at="${AT}" completed="${AT}"/>
  <url><loc>${u(`/${set}/r.txt`)}</loc><rs:md hash="${hashAttr(body)}" length="${body.length}"/></url>
</urlset>`,
    'application/xml',
  );
  src.set(
    `/${set}/changelist.xml`,
    `<?xml version="1.0" encoding="UTF-8"?>
<urlset ${NS}><rs:ln rel="up" href="${u(`/${set}/capabilitylist.xml`)}"/><rs:md capability="changelist" from="${AT}"/>
</urlset>`,
    'application/xml',
  );
}

function recordedSets(dir: string): [string, string, string | undefined][] {
  const st = DestinationState.open(dir);
  try {
    return st.sets().map((s) => [s.source, s.set, s.watermark?.at]);
  } finally {
    st.close();
  }
}

function refusedAsOther(e: unknown, owner: string): boolean {
  assert.ok(isResourceSyncError(e, 'RS_CONFIG'), String(e));
  assert.ok(e.message.includes(`a copy of ${owner}, not of`), e.message);
  assert.match(e.message, /--allow-other-source/);
  return true;
}

describe('one Source through each of its entry points', { timeout: 120_000 }, () => {
  let work: string;
  let served: { site: DirectorySource; server: SourceServer; base: string };
  let indexed: StaticSource;
  let other: StaticSource;
  before(async () => {
    work = await mkdtemp(join(tmpdir(), 'rs-srcid-'));
    served = await serveSets(join(work, 'served'), { maxEntriesPerDocument: 2 });
    indexed = await StaticSource.start();
    publishIndexed(indexed);
    other = await StaticSource.start();
    other.set(
      '/.well-known/resourcesync',
      `<?xml version="1.0" encoding="UTF-8"?>
<urlset ${NS}><rs:md capability="description"/>
  <url><loc>${other.url('/a/capabilitylist.xml')}</loc><rs:md capability="capabilitylist"/></url>
</urlset>`,
      'application/xml',
    );
    publishSet(other, 'a', other.url('/.well-known/resourcesync'));
  });
  after(async () => {
    await served?.server.close();
    await served?.site.close();
    await indexed?.close();
    await other?.close();
    await rm(work, { recursive: true, force: true });
  });

  it('our Source with an Index: the root, a Capability List (--set), the Index and a Source Description are one Source', async () => {
    const { base } = served;
    const index = `${base}.well-known/resourcesync`;
    const dir = join(work, 'served-copy');
    const first = await new Destination({ url: base, set: 's4', dir, durability: 'none' }).sync();
    assert.equal(first.operation, 'baseline');
    assert.equal(first.counts.created, 1);
    const w = first.watermarkAfter;
    assert.ok(w !== undefined);
    // s4 is listed by the second Source Description; its Capability List points up to that one, not the Index.
    for (const url of [
      `${base}resourcesync/s4/capabilitylist.xml`,
      index,
      `${base}resourcesync/description-0002.xml`,
    ]) {
      const s = await new Destination({ url, set: 's4', dir, durability: 'none' }).sync();
      assert.equal(s.operation, 'incremental', url);
      assert.equal(s.watermarkBefore, w, `${url}: the set's own watermark`);
      assert.equal(s.counts.failed, 0, JSON.stringify(s.failures));
    }
    // Another set through its Capability List (listed by the first Source Description): the same Source, its
    // own baseline.
    const s2 = await new Destination({
      url: `${base}resourcesync/s2/capabilitylist.xml`,
      set: 's2',
      dir,
      durability: 'none',
    }).sync();
    assert.equal(s2.operation, 'baseline');
    assert.equal(s2.counts.created, 1);
    assert.deepEqual(
      recordedSets(dir).map(([source, set]) => [source, set]),
      [
        [index, `${base}resourcesync/s4/capabilitylist.xml`],
        [index, `${base}resourcesync/s2/capabilitylist.xml`],
      ],
      'one Source, recorded as first synchronized; one row (one watermark) per set',
    );
    // A different Source is still refused, from its root and from its Capability List.
    for (const url of [other.base, other.url('/a/capabilitylist.xml')])
      await assert.rejects(new Destination({ url, dir, durability: 'none' }).sync(), (e) => refusedAsOther(e, index));
  });

  it('a copy first made from a Capability List accepts the root and the Index', async () => {
    const { base } = served;
    const dir = join(work, 'served-from-list');
    const first = await new Destination({
      url: `${base}resourcesync/s5/capabilitylist.xml`,
      dir,
      durability: 'none',
    }).sync();
    assert.equal(first.operation, 'baseline');
    for (const url of [base, `${base}.well-known/resourcesync`]) {
      const s = await new Destination({ url, set: 's5', dir, durability: 'none' }).sync();
      assert.equal(s.operation, 'incremental', url);
      assert.equal(s.watermarkBefore, first.watermarkAfter, url);
    }
    assert.deepEqual(
      recordedSets(dir).map(([source]) => source),
      [`${base}resourcesync/description-0003.xml`],
    );
  });

  it('a copy made before this change (Index recorded, nothing learnt) reads the Source Description once, then not again', async () => {
    const dir = join(work, 'static-old');
    const index = indexed.url('/.well-known/resourcesync');
    const first = await new Destination({ url: indexed.base, set: 'b', dir, durability: 'none' }).sync();
    assert.equal(first.operation, 'baseline');
    assert.equal(first.counts.created, 1);
    // What a copy of the earlier version holds: the Source and set rows, no learnt entry points.
    const st = DestinationState.open(dir);
    st.setMeta('source-aliases', '{}');
    st.close();
    const sd2 = () => indexed.hits.get('/sd/2.xml') ?? 0;
    const before = sd2();
    const viaList = await new Destination({
      url: indexed.url('/b/capabilitylist.xml'),
      dir,
      durability: 'none',
    }).sync();
    assert.equal(viaList.operation, 'incremental');
    assert.equal(viaList.watermarkBefore, first.watermarkAfter);
    assert.equal(sd2() - before, 1, 'one GET of the Source Description the Capability List points up to');
    const again = await new Destination({ url: indexed.url('/b/capabilitylist.xml'), dir, durability: 'none' }).sync();
    assert.equal(again.operation, 'incremental');
    assert.equal(sd2() - before, 1, 'learnt: no further request');
    // The other Source Description's set is the same Source too (the Index lists it).
    const a = await new Destination({ url: indexed.url('/a/capabilitylist.xml'), dir, durability: 'none' }).sync();
    assert.equal(a.operation, 'baseline');
    assert.deepEqual(
      recordedSets(dir).map(([source, set]) => [source, set]),
      [
        [index, indexed.url('/b/capabilitylist.xml')],
        [index, indexed.url('/a/capabilitylist.xml')],
      ],
    );
    // Another Source's Capability List: its Source Description is read once and names no Index of ours.
    await assert.rejects(
      new Destination({ url: other.url('/a/capabilitylist.xml'), dir, durability: 'none' }).sync(),
      (e) => refusedAsOther(e, index),
    );
  });

  it('a copy of one Source Description of an Index: a sibling one is refused with a hint until the Index is synchronized', async () => {
    const dir = join(work, 'static-siblings');
    const index = indexed.url('/.well-known/resourcesync');
    const sd2 = indexed.url('/sd/2.xml');
    const first = await new Destination({ url: indexed.url('/b/capabilitylist.xml'), dir, durability: 'none' }).sync();
    assert.equal(first.operation, 'baseline');
    // Neither /sd/1.xml nor its Index is known to the copy yet, and one request cannot tell.
    await assert.rejects(
      new Destination({ url: indexed.url('/a/capabilitylist.xml'), dir, durability: 'none' }).sync(),
      (e) => {
        refusedAsOther(e, sd2);
        assert.ok((e as Error).message.includes(`synchronize once from ${index}`), (e as Error).message);
        return true;
      },
    );
    const viaIndex = await new Destination({ url: index, set: 'b', dir, durability: 'none' }).sync();
    assert.equal(viaIndex.operation, 'incremental');
    assert.equal(viaIndex.watermarkBefore, first.watermarkAfter);
    const a = await new Destination({ url: indexed.url('/a/capabilitylist.xml'), dir, durability: 'none' }).sync();
    assert.equal(a.operation, 'baseline');
    assert.deepEqual(
      recordedSets(dir).map(([source]) => source),
      [sd2, sd2],
    );
  });
});
