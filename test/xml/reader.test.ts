import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { RS_NS, SITEMAP_NS } from '../../src/core/constants.js';
import { ResourceSyncError } from '../../src/core/errors.js';
import { fileSource, MAX_ISSUES, openDocument, readDocument, serializeDocument } from '../../src/xml/index.js';
import { DocumentParser } from '../../src/xml/parser.js';
import { byteChunks, randomChunks, rejectsWith, SPEC_DIR, specExamples, withoutLines } from './helpers.js';

function* fixedChunks(bytes: Uint8Array, size: number): Generator<Uint8Array> {
  for (let i = 0; i < bytes.length; i += size) yield bytes.subarray(i, i + size);
}

const NS = `xmlns="${SITEMAP_NS}" xmlns:rs="${RS_NS}"`;
const enc = (s: string): Uint8Array => Buffer.from(s, 'utf8');
const doc = (body: string, root = 'urlset'): string =>
  `<?xml version="1.0" encoding="UTF-8"?>\n<${root} ${NS}>\n${body}\n</${root}>\n`;

// Read at load time: a missing fixtures directory fails the file instead of silently running no example.
const EXAMPLES = specExamples();
assert.ok(EXAMPLES.length >= 30, `only ${EXAMPLES.length} spec examples found in ${SPEC_DIR}`);

describe('spec examples', () => {
  for (const file of EXAMPLES) {
    it(`${file}: whole, byte by byte, random chunks give one model; read -> write -> read is stable`, async () => {
      const bytes = readFileSync(join(SPEC_DIR, file));
      const whole = await readDocument(bytes, { url: file });
      assert.ok(whole.entries.length > 0, 'has entries');
      assert.ok(whole.entries.every((e) => typeof e.line === 'number' && /^(http|ws):/.test(e.loc)));
      assert.deepStrictEqual(await readDocument(byteChunks(bytes)), whole);
      for (const seed of [1, 2, 3]) assert.deepStrictEqual(await readDocument(randomChunks(bytes, seed, 40)), whole);
      const again = await readDocument(enc(serializeDocument(whole)));
      assert.deepStrictEqual(withoutLines(again), withoutLines(whole));
      // gzip, one byte at a time
      assert.deepStrictEqual(await readDocument(byteChunks(gzipSync(bytes))), whole);
      // empty chunks in between
      const withEmpty = [...fixedChunks(bytes, 9)].flatMap((c) => [new Uint8Array(0), c, new Uint8Array(0)]);
      assert.deepStrictEqual(await readDocument(withEmpty), whole);
    });
  }

  it('example 2 in detail', async () => {
    const d = await readDocument(readFileSync(join(SPEC_DIR, 'example-02.xml')));
    assert.equal(d.kind, 'resource-list');
    assert.deepStrictEqual(d.md, { capability: 'resourcelist', at: '2013-01-03T09:00:00Z' });
    assert.deepStrictEqual(d.entries[0], {
      element: 'url',
      loc: 'http://example.com/res1',
      lastmod: '2013-01-02T13:00:00Z',
      links: [],
      line: 6,
      md: { hash: 'md5:1584abdf8ebdc9802ac0c6a7402c03b6' },
    });
  });

  it('normalises newlines inside attribute values (example 14: hash over two lines)', async () => {
    const d = await readDocument(readFileSync(join(SPEC_DIR, 'example-14.xml')));
    const hash = d.entries[1]?.md?.hash ?? '';
    assert.match(hash, /^md5:1e0d5cb8ef6ba40c99b14c0237be735e +sha-256:854f/);
    assert.ok(!hash.includes('\n'));
  });
});

describe('namespaces', () => {
  it('accepts any prefix for the Sitemap and ResourceSync namespaces', async () => {
    const xml = `<sm:urlset xmlns:sm="${SITEMAP_NS}" xmlns:r="${RS_NS}"><r:md capability="resourcelist" at="2013-01-03T09:00:00Z"/>
      <sm:url><sm:loc>http://e.com/a</sm:loc><r:md length="5"/><r:ln rel="duplicate" href="http://m.com/a"/></sm:url></sm:urlset>`;
    const d = await readDocument(enc(xml));
    assert.equal(d.kind, 'resource-list');
    assert.deepStrictEqual(d.namespaces, { sm: SITEMAP_NS, r: RS_NS });
    assert.deepStrictEqual(withoutLines(d).entries, [
      {
        element: 'url',
        loc: 'http://e.com/a',
        links: [{ rel: 'duplicate', href: 'http://m.com/a' }],
        md: { length: 5 },
      },
    ]);
    // written back with the document's own prefixes, and read back the same
    const out = serializeDocument(d);
    assert.match(out, /^<\?xml[^>]*>\n<sm:urlset xmlns:sm="[^"]+" xmlns:r="[^"]+">/m);
    assert.match(out, /<r:md length="5"\/>/);
    assert.deepStrictEqual(withoutLines(await readDocument(enc(out))), withoutLines(d));
  });

  it('accepts ResourceSync as the default namespace', async () => {
    const xml = `<s:sitemapindex xmlns:s="${SITEMAP_NS}" xmlns="${RS_NS}"><md capability="changelist" from="2013-01-01T00:00:00Z"/>
      <s:sitemap><s:loc>http://e.com/1.xml</s:loc><md from="2013-01-01T00:00:00Z"/></s:sitemap></s:sitemapindex>`;
    const d = await readDocument(enc(xml));
    assert.equal(d.kind, 'change-list-index');
    assert.equal(d.entries[0]?.element, 'sitemap');
    assert.deepStrictEqual(d.entries[0]?.md, { from: '2013-01-01T00:00:00Z' });
    assert.deepStrictEqual(withoutLines(await readDocument(enc(serializeDocument(d)))), withoutLines(d));
  });

  it('follows a prefix redeclared on an inner element', async () => {
    const xml = doc(`<url xmlns:x="http://x.example/1"><loc>http://e.com/a</loc>
      <x:a v="1"/><x:b xmlns:x="http://x.example/2"><x:c/></x:b>
      <rs:md xmlns:rs="http://not-rs.example/" hash="md5:00"/></url>`);
    const d = await readDocument(enc(xml));
    const e = d.entries[0]!;
    assert.equal(e.md, undefined, 'rs:md bound to another namespace is not the ResourceSync md');
    assert.deepStrictEqual(
      e.extensions?.map((x) => [x.ns, x.prefix, x.local]),
      [
        ['http://x.example/1', 'x', 'a'],
        ['http://x.example/2', 'x', 'b'],
        ['http://not-rs.example/', 'rs', 'md'],
      ],
    );
    assert.deepStrictEqual(e.extensions?.[1]?.children, [
      { ns: 'http://x.example/2', prefix: 'x', local: 'c', attributes: [], children: [] },
    ]);
    // written back with the declarations they need
    const again = await readDocument(enc(serializeDocument(d)));
    assert.deepStrictEqual(withoutLines(again), withoutLines(d));
  });

  it('keeps extension attributes and elements, and a second rs:md in extensions', async () => {
    const xml = `<urlset ${NS} xmlns:x="http://x.example/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:schemaLocation="a b">
      <rs:md capability="changelist" from="2013-01-01T00:00:00Z" x:flag="y"/>
      <x:meta>about <x:b>bold</x:b> text</x:meta>
      <url><loc> http://e.com/a </loc><rs:md change="created" x:k="v" foo="bar"/><rs:md change="deleted"/>
        <rs:ln rel="alternate" href="http://e.com/a.pdf" pri="2" x:q="1"/><lastmod>2013-01-01T00:00:00Z</lastmod></url></urlset>`;
    const d = await readDocument(enc(xml));
    assert.deepStrictEqual(d.attributes, [
      { ns: 'http://www.w3.org/2001/XMLSchema-instance', prefix: 'xsi', local: 'schemaLocation', value: 'a b' },
    ]);
    assert.deepStrictEqual(d.md?.extensions, [{ ns: 'http://x.example/', prefix: 'x', local: 'flag', value: 'y' }]);
    assert.deepStrictEqual(d.extensions?.[0]?.children, [
      'about ',
      { ns: 'http://x.example/', prefix: 'x', local: 'b', attributes: [], children: ['bold'] },
      ' text',
    ]);
    const e = d.entries[0]!;
    assert.equal(e.loc, 'http://e.com/a');
    assert.equal(e.lastmod, '2013-01-01T00:00:00Z');
    assert.deepStrictEqual(e.md, {
      change: 'created',
      extensions: [
        { ns: 'http://x.example/', prefix: 'x', local: 'k', value: 'v' },
        { ns: '', prefix: '', local: 'foo', value: 'bar' },
      ],
    });
    assert.deepStrictEqual(e.extensions, [
      {
        ns: RS_NS,
        prefix: 'rs',
        local: 'md',
        attributes: [{ ns: '', prefix: '', local: 'change', value: 'deleted' }],
        children: [],
      },
    ]);
    assert.deepStrictEqual(e.links, [
      {
        rel: 'alternate',
        href: 'http://e.com/a.pdf',
        pri: 2,
        extensions: [{ ns: 'http://x.example/', prefix: 'x', local: 'q', value: '1' }],
      },
    ]);
    assert.deepStrictEqual(withoutLines(await readDocument(enc(serializeDocument(d)))), withoutLines(d));
  });
});

describe('text and values', () => {
  it('decodes entities, character references and CDATA; trims loc', async () => {
    const xml = doc(`<url><loc>
        http://e.com/?a=1&amp;b=&#x32;&#51;<![CDATA[&c=<4>]]>
      </loc><changefreq>daily</changefreq><priority>0.5</priority>
      <rs:md type="a&quot;b&apos;c&lt;&gt;" length=" 12 "/></url>`);
    const d = await readDocument(enc(xml));
    const e = d.entries[0]!;
    assert.equal(e.loc, 'http://e.com/?a=1&b=23&c=<4>');
    assert.equal(e.changefreq, 'daily');
    assert.equal(e.priority, '0.5');
    assert.deepStrictEqual(e.md, { type: `a"b'c<>`, length: 12 });
  });

  it('accepts the less common but well-formed syntax', async () => {
    const xml = `\ufeff<?xml version='1.0' encoding='utf-8' standalone='yes'?>
<!-- a comment --><?pi data?>
<urlset\txmlns="${SITEMAP_NS}"
  xmlns:rs = '${RS_NS}' >
  <url/>
  <url ><loc >a</loc ><rs:md\n  type = "a>b" length='7'
  /></url >
</urlset ><!-- after -->\n`;
    const d = await readDocument(enc(xml));
    assert.deepStrictEqual(
      d.entries.map((e) => [e.loc, e.md, e.line]),
      [
        ['', undefined, 5],
        ['a', { type: 'a>b', length: 7 }, 6],
      ],
    );
    const empty = await openDocument(enc(`<sitemapindex xmlns="${SITEMAP_NS}"/>`));
    assert.equal(empty.header.kind, 'sitemap-index');
    assert.equal((await empty.entries.next()).done, true);
  });

  it('keeps unparseable numbers in invalid and writes them back', async () => {
    const xml = doc(
      '<url><loc>http://e.com/a</loc><rs:md length="abc"/><rs:ln rel="x" href="y" pri="-1" length="1.5"/></url>',
    );
    const d = await readDocument(enc(xml));
    assert.deepStrictEqual(d.entries[0]?.md, { invalid: { length: 'abc' } });
    assert.deepStrictEqual(d.entries[0]?.links[0], { rel: 'x', href: 'y', invalid: { pri: '-1', length: '1.5' } });
    const big = await readDocument(
      enc(
        doc(
          '<url><loc>a</loc><rs:md length="9007199254740991"/></url><url><loc>b</loc><rs:md length="9007199254740993"/></url>',
        ),
      ),
    );
    assert.deepStrictEqual(
      big.entries.map((e) => e.md),
      [{ length: Number.MAX_SAFE_INTEGER }, { invalid: { length: '9007199254740993' } }],
    );
    const out = serializeDocument(d);
    assert.match(out, /<rs:md length="abc"\/>/);
    assert.match(out, /<rs:ln rel="x" href="y" pri="-1" length="1.5"\/>/);
  });

  it('reads UTF-8 with a BOM, UTF-16 with a BOM, and CR LF line ends', async () => {
    const xml = doc('<url><loc>http://e.com/é€𝄞</loc></url>').replace(/\n/g, '\r\n');
    const plain = await readDocument(enc(xml));
    assert.equal(plain.entries[0]?.loc, 'http://e.com/é€𝄞');
    assert.equal(plain.entries[0]?.line, 3);
    const bom = await readDocument(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), enc(xml)]));
    assert.deepStrictEqual(bom, plain);
    const u16 = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(xml.replace('UTF-8', 'UTF-16'), 'utf16le')]);
    assert.deepStrictEqual(await readDocument(byteChunks(u16)), plain);
  });

  it('records late root-level elements and stray text as issues, not errors', async () => {
    const xml = doc(`<url><loc>http://e.com/a</loc>oops</url>
      <rs:md
         capability="resourcelist"/><rs:ln rel="up" href="http://e.com/cap.xml"/>
      <url><loc>http://e.com/b<x/></loc></url><url xmlns:q="http://q/" q:a="1"><loc b="2">c</loc></url>`);
    const d = await openDocument(enc(xml));
    assert.equal(d.header.md, undefined);
    const entries = [];
    for await (const e of d.entries) entries.push(e);
    assert.equal(entries.length, 3);
    assert.equal(entries[1]?.loc, 'http://e.com/b');
    assert.deepStrictEqual(
      d.issues.map((i) => [i.code, i.element, i.line, i.column]),
      [
        ['unexpected-text', 'url', 3, 31],
        ['late-element', 'rs:md', 4, 7],
        ['late-element', 'rs:ln', 5, 37],
        ['unexpected-child', 'loc', 6, 31],
        ['unexpected-attribute', 'url', 6, 47],
        ['unexpected-attribute', 'loc', 6, 80],
      ],
    );
    assert.equal(d.issues[1]?.node?.attributes[0]?.value, 'resourcelist');
  });
});

describe('streaming', () => {
  it('gives the header before reading the entries, and closes the source on break', async () => {
    let pulled = 0;
    let closed = false;
    const many = doc(Array.from({ length: 5000 }, (_, i) => `<url><loc>http://e.com/${i}</loc></url>`).join('\n'));
    const bytes = enc(many);
    async function* source(): AsyncGenerator<Uint8Array> {
      try {
        for (let i = 0; i < bytes.length; i += 1000) {
          pulled++;
          yield bytes.subarray(i, i + 1000);
        }
      } finally {
        closed = true;
      }
    }
    const d = await openDocument(source());
    assert.equal(d.header.root, 'urlset');
    assert.ok(pulled <= 2, `header needed ${pulled} chunks`);
    let n = 0;
    for await (const _ of d.entries) if (++n === 10) break;
    assert.ok(closed, 'source closed');
    assert.ok(pulled < 5, 'did not read ahead');
  });

  it('turns a failing source into RS_IO naming the URL, keeping the cause', async () => {
    async function* failing(): AsyncGenerator<Uint8Array> {
      yield enc(doc('<url><loc>http://e.com/a</loc></url>').slice(0, 150));
      throw new Error('connection reset');
    }
    const e = await rejectsWith(() => readDocument(failing(), { url: 'http://e.com/list.xml' }), 'RS_IO');
    assert.equal(e.url, 'http://e.com/list.xml');
    assert.equal((e.cause as Error).message, 'connection reset');
    // the same through gzip
    const gz = gzipSync(
      enc(doc(Array.from({ length: 500 }, (_, i) => `<url><loc>http://e.com/${i}</loc></url>`).join(''))),
    );
    async function* failingGzip(): AsyncGenerator<Uint8Array> {
      yield gz.subarray(0, 100);
      throw new Error('connection reset');
    }
    const g = await rejectsWith(() => readDocument(failingGzip()), 'RS_IO');
    assert.equal((g.cause as Error).message, 'connection reset');
  });

  it('aborts with RS_ABORTED', async () => {
    const ac = new AbortController();
    const many = enc(doc(Array.from({ length: 2000 }, (_, i) => `<url><loc>http://e.com/${i}</loc></url>`).join('')));
    const d = await openDocument(randomChunks(many, 7, 500), { signal: ac.signal });
    await rejectsWith(async () => {
      let n = 0;
      for await (const _ of d.entries) if (++n === 5) ac.abort();
    }, 'RS_ABORTED');
  });
});

/** Reads `xml` and expects a refusal with `code` at `line`:`column`. */
async function refused(
  xml: string | Uint8Array,
  code: string,
  line?: number,
  column?: number,
  opts = {},
): Promise<void> {
  const bytes = typeof xml === 'string' ? enc(xml) : xml;
  for (const src of [bytes, byteChunks(bytes)]) {
    const e = await rejectsWith(() => readDocument(src, { url: 'http://e.com/doc.xml', ...opts }), code);
    assert.equal(e.url, 'http://e.com/doc.xml');
    if (line !== undefined) assert.equal(e.line, line, `line of: ${e.message}`);
    if (column !== undefined) assert.equal(e.column, column, `column of: ${e.message}`);
  }
}

describe('files', () => {
  it('reads a file in small chunks (multi-byte characters cut), and refuses a missing file with RS_IO', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'rs-xml-r-'));
    try {
      const path = join(dir, 'list.xml');
      const xml = doc(Array.from({ length: 50 }, (_, i) => `<url><loc>http://e.com/é€𝄞/${i}</loc></url>`).join('\n'));
      await writeFile(path, xml);
      const whole = await readDocument(enc(xml));
      for (const size of [1, 2, 3, 5, 7, 64]) assert.deepStrictEqual(await readDocument(fileSource(path, size)), whole);
      const e = await rejectsWith(() => readDocument(fileSource(join(dir, 'missing.xml'))), 'RS_IO');
      assert.equal(e.url, join(dir, 'missing.xml'));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('records at most MAX_ISSUES issues, then counts the rest', async () => {
    const xml = doc(`<url><loc>a</loc></url>${'<x/>'.repeat(MAX_ISSUES + 20)}`);
    const d = await openDocument(enc(xml));
    for await (const _ of d.entries) void _;
    assert.equal(d.issues.length, MAX_ISSUES + 1);
    assert.equal(d.issues[MAX_ISSUES]?.code, 'too-many-issues');
    assert.match(d.issues[MAX_ISSUES]?.message ?? '', /^20 more/);
  });
});

describe('refusals', () => {
  it('DTDs and entity declarations: RS_XML_DTD', async () => {
    await refused('<?xml version="1.0"?>\n<!DOCTYPE urlset [<!ENTITY x "y">]>\n<urlset/>', 'RS_XML_DTD', 2, 1);
    await refused(doc('<!ENTITY x "y">'), 'RS_XML_DTD', 3, 1);
  });

  it('unknown entities and bad references: RS_XML_SYNTAX', async () => {
    await refused(doc('<url><loc>a&nbsp;b</loc></url>'), 'RS_XML_SYNTAX', 3, 12);
    await refused(doc('<url><loc>a & b</loc></url>'), 'RS_XML_SYNTAX', 3, 13);
    await refused(doc('<url><loc>&#0;</loc></url>'), 'RS_XML_SYNTAX', 3, 11);
    await refused(doc('<url><rs:md hash="&bogus;"/></url>'), 'RS_XML_SYNTAX', 3);
  });

  it('malformed markup, with line and column', async () => {
    await refused(doc('<url><loc>x</lo></url>'), 'RS_XML_SYNTAX', 3, 12);
    await refused(doc('<url><loc>x</loc>'), 'RS_XML_SYNTAX');
    await refused(`<urlset ${NS}><url>`, 'RS_XML_SYNTAX', 1);
    await refused(doc('<url><rs:md length=5/></url>'), 'RS_XML_SYNTAX', 3, 20);
    await refused(doc('<url><rs:md length/></url>'), 'RS_XML_SYNTAX', 3, 19);
    await refused(doc('<url><rs:md length="1"hash="x"/></url>'), 'RS_XML_SYNTAX', 3, 23);
    await refused(doc('<url><rs:md length="1" length="2"/></url>'), 'RS_XML_SYNTAX', 3, 24);
    await refused(doc('<url xmlns:a="u" xmlns:b="u"><x a:k="1" b:k="2"/></url>'), 'RS_XML_SYNTAX', 3);
    await refused(doc('<url><rs:md type="a<b"/></url>'), 'RS_XML_SYNTAX', 3, 20);
    await refused(doc('<url><zz:x/></url>'), 'RS_XML_SYNTAX', 3, 6);
    await refused(doc('<url><x zz:a="1"/></url>'), 'RS_XML_SYNTAX', 3, 6);
    await refused(doc('<url><1x/></url>'), 'RS_XML_SYNTAX', 3, 6);
    await refused(doc('<url><a!b/></url>'), 'RS_XML_SYNTAX', 3, 8);
    await refused(doc('<url><loc>a]]>b</loc></url>'), 'RS_XML_SYNTAX', 3, 12);
    await refused(doc('<url><loc><![CDATA[x]]></loc><x:y xmlns:x="u">]]></x:y></url>'), 'RS_XML_SYNTAX', 3, 47);
    await refused(doc('<url><a b$c="1"/></url>'), 'RS_XML_SYNTAX', 3, 10);
    await refused(doc('<url><!-- a -- b --></url>'), 'RS_XML_SYNTAX', 3, 13);
    await refused(`${doc('')}trailing`, 'RS_XML_SYNTAX', 5, 1);
    await refused(`${doc('')}<urlset ${NS}/>`, 'RS_XML_SYNTAX', 5, 1);
    await refused(`junk${doc('')}`, 'RS_XML_SYNTAX', 1, 1);
    await refused(`\n<?xml version="1.0"?><urlset ${NS}/>`, 'RS_XML_SYNTAX', 2, 1);
    await refused('', 'RS_XML_SYNTAX');
    await refused('<!-- nothing -->', 'RS_XML_SYNTAX');
    await refused(doc('<url><loc>a\u0001b</loc></url>'), 'RS_XML_SYNTAX', 3, 12);
    await refused(
      Buffer.concat([enc(doc('<url><loc>')), Buffer.from([0xc3, 0x28]), enc('</loc></url>')]),
      'RS_XML_SYNTAX',
    );
  });

  it('other encodings declared: RS_XML_SYNTAX', async () => {
    await refused(`<?xml version="1.0" encoding="ISO-8859-1"?><urlset ${NS}/>`, 'RS_XML_SYNTAX', 1, 1);
  });

  it('not a Sitemap / ResourceSync document: RS_NOT_RESOURCESYNC', async () => {
    await refused('<html><body/></html>', 'RS_NOT_RESOURCESYNC', 1, 1);
    await refused('<urlset><url><loc>x</loc></url></urlset>', 'RS_NOT_RESOURCESYNC', 1, 1);
    await refused(`<rs:md xmlns:rs="${RS_NS}"/>`, 'RS_NOT_RESOURCESYNC');
  });

  it('many attributes on one element: duplicates still found, and no quadratic work', async () => {
    const many = Array.from({ length: 40_000 }, (_, i) => `a${i}="${i}"`).join(' ');
    const d = await readDocument(enc(doc(`<url><loc>x</loc><e ${many}/></url>`)));
    assert.equal(d.entries[0]?.extensions?.[0]?.attributes.length, 40_000);
    await rejectsWith(() => readDocument(enc(doc(`<url><e ${many} a17="x"/></url>`))), 'RS_XML_SYNTAX');
    const prefixed = Array.from({ length: 40 }, (_, i) => `p:a${i}="1"`).join(' ');
    await refused(doc(`<url xmlns:p="u" xmlns:q="u"><e ${prefixed} q:a7="2"/></url>`), 'RS_XML_SYNTAX', 3);
    // A 500 KB tag fed 4 characters at a time: re-parsing the cut tag at every chunk would be quadratic
    // (~10^10 steps, minutes); the parser waits until the input behind a long cut token has doubled.
    const text = doc(`<url><loc>x</loc><e ${many}/></url>`);
    const parser = new DocumentParser({ maxDepth: 32, maxEntryBytes: 1 << 20, encoding: 'utf-8', url: undefined });
    const t0 = Date.now();
    let entries = 0;
    for (let i = 0; i < text.length; i += 4) {
      parser.feed(text.slice(i, i + 4));
      entries += parser.batch.length;
      parser.batch = [];
    }
    parser.end();
    entries += parser.batch.length;
    assert.equal(entries, 1);
    assert.ok(Date.now() - t0 < 10_000, `${Date.now() - t0} ms`);
  });

  it('limits: depth, entry size, total bytes (plain and gzip): RS_LIMIT', async () => {
    await refused(doc(`<url>${'<x>'.repeat(40)}${'</x>'.repeat(40)}</url>`), 'RS_LIMIT', 3);
    await rejectsWith(() => readDocument(enc(doc(`${'<rs:ln rel="a" href="b"/>'.repeat(1001)}<url/>`))), 'RS_LIMIT');
    assert.equal((await readDocument(enc(doc(`${'<rs:ln rel="a" href="b"/>'.repeat(999)}<url/>`)))).links.length, 999);
    await refused(doc(`<url>${'<x>'.repeat(4)}${'</x>'.repeat(4)}</url>`), 'RS_LIMIT', 3, undefined, { maxDepth: 4 });
    await refused(doc(`<url><loc>${'a'.repeat(3000)}</loc></url>`), 'RS_LIMIT', 3, undefined, { maxEntryBytes: 1000 });
    await refused(doc(`<url><loc>a</loc>${'<x/>'.repeat(500)}</url>`), 'RS_LIMIT', 3, undefined, {
      maxEntryBytes: 1000,
    });
    await refused(doc(`<url><rs:md type="${'a'.repeat(3000)}"/></url>`), 'RS_LIMIT', 3, undefined, {
      maxEntryBytes: 1000,
    });
    const big = doc(Array.from({ length: 300 }, (_, i) => `<url><loc>http://e.com/${i}</loc></url>`).join('\n'));
    await rejectsWith(() => readDocument(enc(big), { maxBytes: 5000 }), 'RS_LIMIT');
    await rejectsWith(() => readDocument(gzipSync(enc(big)), { maxBytes: 5000 }), 'RS_LIMIT');
    const bomb = gzipSync(Buffer.concat([enc(`<urlset ${NS}>`), Buffer.alloc(20_000_000, 32), enc('</urlset>')]));
    await rejectsWith(() => readDocument(bomb, { maxBytes: 1_000_000 }), 'RS_LIMIT');
    await rejectsWith(() => readDocument(gzipSync(enc(big)).subarray(0, 200)), 'RS_XML_SYNTAX');
  });
});

describe('mutated documents (fuzz)', () => {
  const PIECES = [
    '<',
    '>',
    '&',
    ';',
    '"',
    "'",
    '/',
    '=',
    ' ',
    '\n',
    '!',
    '?',
    '[',
    ']',
    '-',
    ':',
    'x',
    'rs:',
    '&amp;',
    '<!--',
    '-->',
    '<![CDATA[',
    ']]>',
    '</url>',
    '<url>',
    '\u0001',
    'é',
  ];
  it('either read or refused with a ResourceSyncError, the same whole and in random chunks', async () => {
    const sources = EXAMPLES.map((f) => readFileSync(join(SPEC_DIR, f), 'utf8'));
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: sources.length - 1 }),
        fc.array(fc.tuple(fc.nat(), fc.nat({ max: 3 }), fc.constantFrom(...PIECES)), { minLength: 1, maxLength: 4 }),
        fc.integer({ min: 1, max: 1000 }),
        async (which, edits, seed) => {
          let text = sources[which]!;
          for (const [at, del, piece] of edits) {
            const i = at % (text.length + 1);
            text = text.slice(0, i) + piece + text.slice(i + del);
          }
          const bytes = enc(text);
          const outcome = async (src: Parameters<typeof readDocument>[0]): Promise<unknown> => {
            try {
              return await readDocument(src);
            } catch (e) {
              if (!(e instanceof ResourceSyncError)) throw e;
              return { code: e.code, line: e.line, column: e.column };
            }
          };
          const whole = await outcome(bytes);
          assert.deepStrictEqual(await outcome(randomChunks(bytes, seed, 30)), whole);
        },
      ),
      { numRuns: 400, seed: 7 },
    );
  });
});

describe('memory', () => {
  it('stays flat however many entries are read (live heap after GC)', async () => {
    v8.setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const entry = (i: number): string =>
      `  <url>\n    <loc>http://example.com/res/${i}</loc>\n    <lastmod>2013-01-02T13:00:00Z</lastmod>\n` +
      `    <rs:md hash="md5:1584abdf8ebdc9802ac0c6a7402c03b6" length="${i}" type="text/html"/>\n  </url>\n`;
    async function* generated(count: number): AsyncGenerator<Uint8Array> {
      yield enc(`<?xml version="1.0" encoding="UTF-8"?>\n<urlset ${NS}>\n`);
      let s = '';
      for (let i = 0; i < count; i++) {
        s += entry(i);
        if (s.length > 100_000) {
          yield enc(s);
          s = '';
        }
      }
      yield enc(`${s}</urlset>\n`);
    }
    const d = await openDocument(generated(120_000));
    const heap: number[] = [];
    let n = 0;
    for await (const _ of d.entries) {
      if (++n % 30_000 === 0) {
        gc();
        heap.push(process.memoryUsage().heapUsed);
      }
    }
    assert.equal(n, 120_000);
    const growth = heap[heap.length - 1]! - heap[0]!;
    assert.ok(growth < 4_000_000, `live heap grew by ${(growth / 1e6).toFixed(1)} MB from 30k to 120k entries`);
  });
});
