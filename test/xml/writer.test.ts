import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { RS_NS, SITEMAP_NS } from '../../src/core/constants.js';
import {
  createHeader,
  type DocumentHeader,
  documentKind,
  type Entry,
  type ExtensionAttribute,
  type ExtensionElement,
  type Link,
  type Metadata,
  type ResourceSyncDocument,
} from '../../src/core/model.js';
import {
  fileSource,
  openDocument,
  readDocument,
  serializeDocument,
  writeDocument,
  writeDocumentFile,
} from '../../src/xml/index.js';
import { rejectsWith, withoutLines } from './helpers.js';

const enc = (s: string): Uint8Array => Buffer.from(s, 'utf8');

describe('writeDocument', () => {
  it('writes a fixed, indented layout with a fixed attribute order', () => {
    const header = createHeader('change-list', { from: '2013-01-03T00:00:00Z' }, [
      { rel: 'up', href: 'http://e.com/cap.xml' },
    ]);
    const entry: Entry = {
      element: 'url',
      loc: 'http://e.com/a?x=1&y=2',
      lastmod: '2013-01-03T10:00:00Z',
      md: {
        path: '/a',
        encoding: 'gzip',
        type: 'text/html',
        length: 12,
        hash: 'md5:00',
        datetime: '2013-01-03T10:00:00Z',
        change: 'updated',
      },
      links: [
        {
          type: 'text/plain',
          hash: 'md5:11',
          modified: '2013-01-01T00:00:00Z',
          pri: 1,
          href: 'http://m.com/a',
          rel: 'duplicate',
          length: 3,
        },
      ],
    };
    assert.equal(
      serializeDocument({ ...header, entries: [entry] }),
      `<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="${SITEMAP_NS}" xmlns:rs="${RS_NS}">
  <rs:md capability="changelist" from="2013-01-03T00:00:00Z"/>
  <rs:ln rel="up" href="http://e.com/cap.xml"/>
  <url>
    <loc>http://e.com/a?x=1&amp;y=2</loc>
    <lastmod>2013-01-03T10:00:00Z</lastmod>
    <rs:md change="updated" datetime="2013-01-03T10:00:00Z" hash="md5:00" length="12" type="text/html" encoding="gzip" path="/a"/>
    <rs:ln rel="duplicate" href="http://m.com/a" pri="1" modified="2013-01-01T00:00:00Z" hash="md5:11" length="3" type="text/plain"/>
  </url>
</urlset>
`,
    );
  });

  it('adds the Sitemap and rs declarations when the header lacks them, and declares extension namespaces', async () => {
    const header: DocumentHeader = {
      root: 'urlset',
      kind: 'resource-list',
      md: { capability: 'resourcelist' },
      links: [],
      namespaces: { '': 'http://other.example/' },
    };
    const entry: Entry = {
      element: 'url',
      loc: 'http://e.com/a',
      links: [],
      md: { extensions: [{ ns: 'http://x.example/', prefix: 'x', local: 'k', value: 'v' }] },
      extensions: [{ ns: 'http://y.example/', prefix: 'y', local: 'e', attributes: [], children: ['t'] }],
    };
    const xml = serializeDocument({ ...header, entries: [entry] });
    assert.match(
      xml,
      /<sm:urlset xmlns="http:\/\/other.example\/" xmlns:sm="http:\/\/www.sitemaps.org\/schemas\/sitemap\/0.9" xmlns:rs=/,
    );
    assert.match(xml, /<rs:md xmlns:x="http:\/\/x.example\/" x:k="v"\/>/);
    assert.match(xml, /<y:e xmlns:y="http:\/\/y.example\/">t<\/y:e>/);
    const back = await readDocument(enc(xml));
    assert.deepStrictEqual(back.entries[0]?.md, entry.md);
    assert.deepStrictEqual(back.entries[0]?.extensions, entry.extensions);
  });

  it('escapes what needs escaping and refuses what XML cannot carry', async () => {
    const nasty = `a&b<c>d"e'f\tg\nh\ri]]>j é𝄞`;
    const doc: ResourceSyncDocument = {
      ...createHeader('resource-list'),
      entries: [
        {
          element: 'url',
          loc: 'http://e.com/x',
          links: [{ rel: 'alternate', href: nasty }],
          md: { type: nasty },
          extensions: [{ ns: 'http://x/', prefix: 'x', local: 'n', attributes: [], children: [nasty] }],
        },
      ],
    };
    const back = await readDocument(enc(serializeDocument(doc)));
    assert.deepStrictEqual(withoutLines(back), doc);
    for (const bad of ['a\u0000b', 'a\u0008', '\ufffe', 'x\ud800y']) {
      const d: ResourceSyncDocument = {
        ...createHeader('resource-list'),
        entries: [{ element: 'url', loc: bad, links: [] }],
      };
      assert.throws(
        () => serializeDocument(d),
        (e: unknown) => (e as { code?: string }).code === 'RS_INVALID_VALUE',
      );
    }
  });

  it('is pull-based: serialises no further ahead than the consumer asks (backpressure)', async () => {
    let made = 0;
    function* entries(): Generator<Entry> {
      for (let i = 0; i < 100_000; i++) {
        made++;
        yield { element: 'url', loc: `http://e.com/${i}`, links: [] };
      }
    }
    const gen = writeDocument(createHeader('resource-list'), entries(), { chunkSize: 4096 });
    const first = await gen.next();
    assert.ok(first.value !== undefined && first.value.byteLength >= 4096 && first.value.byteLength < 8192);
    const afterOne = made;
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(made, afterOne, 'nothing produced while the consumer waits');
    assert.ok(afterOne < 200, `${afterOne} entries for one 4 KiB chunk`);
    await gen.return(undefined);
  });

  it('writeDocumentFile writes atomically and reports entries and bytes', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'rs-xml-w-'));
    try {
      const path = join(dir, 'list.xml');
      async function* entries(): AsyncGenerator<Entry> {
        for (let i = 0; i < 20_000; i++)
          yield { element: 'url', loc: `http://e.com/${i}`, lastmod: '2013-01-01T00:00:00Z', links: [] };
      }
      const r = await writeDocumentFile(path, createHeader('resource-list', { at: '2013-01-01T00:00:00Z' }), entries());
      assert.equal(r.entries, 20_000);
      assert.equal(r.bytes, (await readFile(path)).byteLength);
      assert.deepStrictEqual(await readdir(dir), ['list.xml'], 'no temporary file left');
      const doc = await openDocument(fileSource(path));
      let n = 0;
      for await (const e of doc.entries) assert.equal(e.loc, `http://e.com/${n++}`);
      assert.equal(n, 20_000);
      // a failing source leaves the old file in place and no temporary file
      async function* failing(): AsyncGenerator<Entry> {
        yield { element: 'url', loc: 'http://e.com/x', links: [] };
        throw new Error('source failed');
      }
      await assert.rejects(writeDocumentFile(path, createHeader('resource-list'), failing()));
      assert.equal((await readFile(path)).byteLength, r.bytes);
      assert.deepStrictEqual(await readdir(dir), ['list.xml']);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('stops with RS_ABORTED', async () => {
    const ac = new AbortController();
    ac.abort();
    await rejectsWith(async () => {
      for await (const _ of writeDocument(createHeader('resource-list'), [], { signal: ac.signal })) void _;
    }, 'RS_ABORTED');
  });
});

// ---------------------------------------------------------------------------------------------------------
// Property: read(write(doc)) equals doc for generated documents.

const CHARS = [
  'a',
  'Z',
  '0',
  '9',
  '-',
  '/',
  ':',
  '.',
  '&',
  '<',
  '>',
  '"',
  "'",
  ']]>',
  ' ',
  '\t',
  '\n',
  '\r',
  'é',
  '€',
  '𝄞',
  '&amp;',
  '%',
];
const anyText = fc.array(fc.constantFrom(...CHARS), { minLength: 1, maxLength: 12 }).map((a) => a.join(''));
/** Text that the reader keeps as is after trimming: no white space at either end. */
const trimmed = anyText.map((s) => s.replace(/^[ \t\n\r]+|[ \t\n\r]+$/g, '')).filter((s) => s.length > 0);
const datetime = fc.constantFrom('2013-01-03T09:00:00Z', '2013-01-03T09:00:00.123+01:00', '2013', 'not a date');
const EXT_NS = ['http://x.example/1', 'http://x.example/2'];
const ATTR = { a: 'http://a.example/', b: 'http://b.example/' } as const;

// (fast-check records have a null prototype: spread them into plain objects.)
const extAttr: fc.Arbitrary<ExtensionAttribute> = fc.oneof(
  fc
    .record({
      ns: fc.constant(''),
      prefix: fc.constant(''),
      local: fc.constantFrom('foo', 'bar', 'x-y'),
      value: anyText,
    })
    .map((a) => ({ ...a })),
  fc.constantFrom('a', 'b').chain((p) =>
    fc
      .record({
        ns: fc.constant(ATTR[p as 'a' | 'b']),
        prefix: fc.constant(p),
        local: fc.constantFrom('k', 'q'),
        value: anyText,
      })
      .map((a) => ({ ...a })),
  ),
);
/** Attributes with distinct expanded names (and no ResourceSync attribute names). */
const extAttrs = fc.uniqueArray(extAttr, { maxLength: 3, selector: (a) => `${a.ns} ${a.local}` });

const elementHead = fc.record({
  nsPrefix: fc.constantFrom(['', ''], ['x', EXT_NS[0]!], ['x', EXT_NS[1]!], ['y', EXT_NS[1]!], ['', EXT_NS[0]!]),
  local: fc.constantFrom('a', 'b', 'meta'),
  attributes: extAttrs,
});
const nonBlank = anyText.filter((s) => /[^ \t\n\r]/.test(s));
const extElement: fc.Arbitrary<ExtensionElement> = fc.letrec<{ el: ExtensionElement }>((tie) => ({
  el: fc.oneof(
    { maxDepth: 3 },
    // a leaf: empty or one text node (which may be blank: it is kept when it is alone)
    fc.tuple(elementHead, fc.option(anyText, { nil: undefined })).map(([h, text]) => ({
      ns: h.nsPrefix[1]!,
      prefix: h.nsPrefix[0]!,
      local: h.local,
      attributes: h.attributes,
      children: text === undefined ? [] : [text],
    })),
    // element children, or mixed content (text that is not blank between elements)
    fc
      .tuple(elementHead, fc.array(tie('el'), { minLength: 1, maxLength: 2 }), fc.option(nonBlank, { nil: undefined }))
      .map(([h, kids, text]) => ({
        ns: h.nsPrefix[1]!,
        prefix: h.nsPrefix[0]!,
        local: h.local,
        attributes: h.attributes,
        children: text === undefined ? kids : [text, ...kids.flatMap((k) => [k, text])],
      })),
  ),
})).el;

function opt<T>(arb: fc.Arbitrary<T>): fc.Arbitrary<T | undefined> {
  return fc.option(arb, { nil: undefined, freq: 2 });
}

/** Drops undefined fields (the model never holds them). */
function compact<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

const metadata: fc.Arbitrary<Metadata> = fc
  .record({
    capability: opt(fc.constantFrom('resourcelist', 'changelist', 'description', 'capabilitylist', 'x&y')),
    at: opt(datetime),
    completed: opt(datetime),
    from: opt(datetime),
    until: opt(datetime),
    change: opt(fc.constantFrom('created', 'updated', 'deleted', 'other')),
    datetime: opt(datetime),
    hash: opt(anyText),
    length: opt(fc.oneof(fc.nat(), fc.constant(Number.MAX_SAFE_INTEGER))),
    badLength: opt(fc.constantFrom('abc', '-1', '1.5')),
    type: opt(anyText),
    encoding: opt(anyText),
    path: opt(anyText),
    extensions: opt(extAttrs.filter((a) => a.length > 0)),
  })
  .map(({ badLength, ...md }) => {
    const out = compact(md) as Metadata;
    if (badLength !== undefined && out.length === undefined) out.invalid = { length: badLength };
    return out;
  });

const link: fc.Arbitrary<Link> = fc
  .record({
    rel: anyText,
    href: anyText,
    pri: opt(fc.integer({ min: 1, max: 999_999 })),
    modified: opt(datetime),
    hash: opt(anyText),
    length: opt(fc.nat()),
    type: opt(anyText),
    encoding: opt(anyText),
    path: opt(anyText),
    extensions: opt(extAttrs.filter((a) => a.length > 0)),
  })
  .map((l) => compact(l) as Link);

const entry: fc.Arbitrary<Entry> = fc
  .record({
    element: fc.constantFrom('url', 'sitemap'),
    loc: trimmed,
    lastmod: opt(datetime),
    changefreq: opt(trimmed),
    priority: opt(trimmed),
    md: opt(metadata),
    links: fc.array(link, { maxLength: 2 }),
    extensions: opt(fc.array(extElement, { minLength: 1, maxLength: 2 })),
  })
  .map((e) => compact(e) as Entry);

const documentArb: fc.Arbitrary<ResourceSyncDocument> = fc
  .record({
    root: fc.constantFrom('urlset', 'sitemapindex'),
    md: opt(metadata),
    links: fc.array(link, { maxLength: 2 }),
    declareX: fc.boolean(),
    attributes: opt(extAttrs.filter((a) => a.length > 0 && a.every((x) => x.prefix !== ''))),
    extensions: opt(fc.array(extElement, { minLength: 1, maxLength: 2 })),
    entries: fc.array(entry, { maxLength: 5 }),
  })
  .map(({ root, md, links, declareX, attributes, extensions, entries }) => {
    const namespaces: Record<string, string> = { '': SITEMAP_NS, rs: RS_NS };
    if (declareX) namespaces.x = EXT_NS[0]!;
    if (attributes !== undefined) for (const a of attributes) namespaces[a.prefix] = a.ns;
    const doc: ResourceSyncDocument = {
      root: root as 'urlset',
      kind: documentKind(root as 'urlset', md?.capability),
      links,
      namespaces,
      entries,
    };
    if (md !== undefined) doc.md = md;
    if (attributes !== undefined) doc.attributes = attributes;
    if (extensions !== undefined) doc.extensions = extensions;
    return doc;
  });

describe('round trip property', () => {
  it('read(write(doc)) equals doc, whole and in random chunks', async () => {
    await fc.assert(
      fc.asyncProperty(documentArb, fc.integer({ min: 1, max: 50 }), async (doc, cut) => {
        const xml = serializeDocument(doc);
        const back = withoutLines(await readDocument(enc(xml)));
        assert.deepStrictEqual(back, doc);
        // streamed in small chunks, the writer's output reads the same
        const chunks: Uint8Array[] = [];
        for await (const c of writeDocument(doc, doc.entries, { chunkSize: cut })) chunks.push(c);
        assert.equal(Buffer.concat(chunks).toString('utf8'), xml);
        const bytes = enc(xml);
        const pieces: Uint8Array[] = [];
        for (let i = 0; i < bytes.length; i += cut) pieces.push(bytes.subarray(i, i + cut));
        assert.deepStrictEqual(withoutLines(await readDocument(pieces)), doc);
        // writing is deterministic
        assert.equal(serializeDocument(back), xml);
      }),
      { numRuns: 300, seed: 20131 },
    );
  });
});
