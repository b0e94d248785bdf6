import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import yazl from 'yazl';
import { runInspect } from '../../src/cli/inspect.js';
import { type CommandOutput, runValidate } from '../../src/cli/validate.js';
import { walkDocuments } from '../../src/cli/walk.js';
import type { Link } from '../../src/core/model.js';
import { createHeader } from '../../src/core/model.js';
import { checkLinkedDocument, sameUrl } from '../../src/core/validate-links.js';

const NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/"';
const T = '2013-01-03T09:00:00Z';

function capture(): CommandOutput & { out: () => string; err: () => string } {
  let out = '';
  let err = '';
  return { stdout: (t) => void (out += t), stderr: (t) => void (err += t), out: () => out, err: () => err };
}

/** A small Source: SD -> CL -> (RL index -> 2 RLs, resource dump -> manifest, change list); with two flaws. */
function site(base: string): Record<string, string> {
  const up = `<rs:ln rel="up" href="${base}/cl.xml"/>`;
  const urlset = (body: string) => `<?xml version="1.0" encoding="UTF-8"?>\n<urlset ${NS}>\n${body}\n</urlset>\n`;
  return {
    '/.well-known/resourcesync': urlset(
      `<rs:ln rel="describedby" href="${base}/about"/><rs:md capability="description"/>
<url><loc>${base}/cl.xml</loc><rs:md capability="capabilitylist"/><rs:ln rel="describedby" href="${base}/set1"/></url>`,
    ),
    '/cl.xml': urlset(
      `<rs:ln rel="describedby" href="${base}/set1"/><rs:ln rel="up" href="${base}/.well-known/resourcesync"/>
<rs:md capability="capabilitylist"/>
<url><loc>${base}/rl-index.xml</loc><rs:md capability="resourcelist"/></url>
<url><loc>${base}/rd.xml</loc><rs:md capability="resourcedump"/></url>
<url><loc>${base}/cl-changes.xml</loc><rs:md capability="changelist"/></url>
<url><loc>ws://example.com/channel</loc><rs:md capability="change-notification"/></url>`,
    ),
    '/rl-index.xml': `<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex ${NS}>${up}<rs:md capability="resourcelist" at="${T}"/>
<sitemap><loc>${base}/rl1.xml</loc></sitemap><sitemap><loc>${base}/rl2.xml</loc></sitemap></sitemapindex>\n`,
    '/rl1.xml': urlset(
      `${up}<rs:ln rel="index" href="${base}/rl-index.xml"/><rs:md capability="resourcelist" at="${T}"/><url><loc>${base}/r1</loc></url>`,
    ),
    // flaw 1: no index link (warning); flaw 2 below: the change list says it is a resource list
    '/rl2.xml': urlset(`${up}<rs:md capability="resourcelist" at="${T}"/><url><loc>${base}/r2</loc></url>`),
    '/rd.xml': urlset(`${up}<rs:md capability="resourcedump" at="${T}"/>
<url><loc>${base}/p1.zip</loc><rs:md type="application/zip" length="10"/><rs:ln rel="contents" href="${base}/m1.xml" type="application/xml"/></url>`),
    '/m1.xml': urlset(
      `<rs:ln rel="up" href="${base}/elsewhere.xml"/><rs:md capability="resourcedump-manifest" at="${T}"/><url><loc>${base}/r1</loc><rs:md path="/r1" type="text/plain"/></url>`,
    ),
    '/cl-changes.xml': urlset(`${up}<rs:md capability="resourcelist" at="${T}"/>`),
  };
}

describe('walking a Source', () => {
  let server: Server;
  let base: string;
  let pages: Record<string, string>;
  let zipBytes: Buffer | undefined;
  before(async () => {
    server = createServer((req, res) => {
      if (req.url === '/p1.zip' && zipBytes !== undefined) {
        res.end(zipBytes);
        return;
      }
      const body = pages[req.url ?? ''];
      res.statusCode = body === undefined ? 404 : 200;
      res.end(body ?? 'not found');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    pages = site(base);
    // The package of the Resource Dump: its manifest points up to the wrong place.
    const z = new yazl.ZipFile();
    z.addBuffer(Buffer.from((pages['/m1.xml'] as string).replace('/elsewhere.xml', '/other.xml')), 'manifest.xml');
    z.addBuffer(Buffer.from('hello'), 'r1');
    z.end();
    const chunks: Buffer[] = [];
    for await (const c of z.outputStream) chunks.push(c as Buffer);
    zipBytes = Buffer.concat(chunks);
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('visits every document once, breadth first, and checks the links between them', async () => {
    const walk = walkDocuments(`${base}/.well-known/resourcesync`);
    const seen: [string, number, string[]][] = [];
    for await (const d of walk.documents) {
      assert.ok('result' in d.outcome);
      seen.push([d.url.slice(base.length), d.depth, d.outcome.result.issues.map((i) => i.code)]);
    }
    assert.deepEqual(seen, [
      ['/.well-known/resourcesync', 0, []],
      ['/cl.xml', 1, []],
      ['/rl-index.xml', 2, []],
      ['/rd.xml', 2, []],
      ['/cl-changes.xml', 2, ['capability-mismatch']],
      ['/rl1.xml', 3, []],
      ['/rl2.xml', 3, ['index-link-recommended']],
      ['/m1.xml', 3, ['up-target-mismatch']],
    ]);
    assert.equal(walk.skipped(), 0);
  });

  it('compares the up link of a Capability List with the Source Description URL, unless read at the well-known URI', async () => {
    const original = pages['/cl.xml'] as string;
    pages['/sd.xml'] = pages['/.well-known/resourcesync'] as string;
    try {
      pages['/cl.xml'] = original.replace('/.well-known/resourcesync"', '/sd.xml"');
      const fromWellKnown = walkDocuments(`${base}/.well-known/resourcesync`, { maxDocuments: 2 });
      const codes: string[][] = [];
      for await (const d of fromWellKnown.documents)
        if ('result' in d.outcome) codes.push(d.outcome.result.issues.map((i) => i.code));
      assert.deepEqual(codes, [[], []]);
      pages['/cl.xml'] = original;
      const fromOther = walkDocuments(`${base}/sd.xml`, { maxDocuments: 2 });
      const codes2: string[][] = [];
      for await (const d of fromOther.documents)
        if ('result' in d.outcome) codes2.push(d.outcome.result.issues.map((i) => i.code));
      assert.deepEqual(codes2, [[], ['up-target-mismatch']]);
    } finally {
      pages['/cl.xml'] = original;
      delete pages['/sd.xml'];
    }
  });

  it('walks from a Source Description Index (§8) into its Source Descriptions and on, checking the links between them', async () => {
    const sd = pages['/.well-known/resourcesync'] as string;
    pages['/sdi.xml'] = `<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex ${NS}><rs:md capability="description"/>
<sitemap><loc>${base}/sd-a.xml</loc></sitemap><sitemap><loc>${base}/sd-b.xml</loc></sitemap><sitemap><loc>${base}/cl.xml</loc></sitemap></sitemapindex>\n`;
    pages['/sd-a.xml'] = sd.replace(
      '<rs:md capability="description"/>',
      `<rs:ln rel="index" href="${base}/sdi.xml"/><rs:md capability="description"/>`,
    );
    pages['/sd-b.xml'] = sd.replace(`${base}/cl.xml`, `${base}/cl-b.xml`);
    try {
      const walk = walkDocuments(`${base}/sdi.xml`, { maxDocuments: 5 });
      const seen: [string, number, string, string[]][] = [];
      for await (const d of walk.documents) {
        const o = d.outcome;
        if ('result' in o)
          seen.push([d.url.slice(base.length), d.depth, o.result.kind, o.result.issues.map((i) => i.code)]);
        else seen.push([d.url.slice(base.length), d.depth, 'unreadable', [o.unreadable.code]]);
      }
      assert.deepEqual(seen, [
        ['/sdi.xml', 0, 'source-description-index', []],
        ['/sd-a.xml', 1, 'source-description', []],
        ['/sd-b.xml', 1, 'source-description', ['index-link-recommended']],
        // A Capability List where a Source Description should be; its up names the well-known one.
        ['/cl.xml', 1, 'capability-list', ['capability-mismatch', 'index-link-recommended']],
        ['/cl-b.xml', 2, 'unreadable', ['RS_HTTP']],
      ]);
      const io = capture();
      assert.equal(await runInspect(`${base}/sdi.xml`, { walk: true, maxDocuments: 3 }, io), 0);
      assert.match(
        io.out(),
        /^source-description-index .*\/sdi\.xml: 3 entries, 0 errors, 0 warnings\n {2}source-description .*\/sd-a\.xml/,
      );
    } finally {
      for (const k of ['/sdi.xml', '/sd-a.xml', '/sd-b.xml']) delete pages[k];
    }
  });

  it('validate --walk reports every document and exits 1 on the errors; --max-documents bounds it', async () => {
    const io = capture();
    assert.equal(await runValidate([`${base}/cl.xml`], { walk: true }, io), 1);
    assert.match(
      io.out(),
      /cl-changes\.xml: error capability-mismatch .* lists this document as "changelist", it says "resourcelist" \(§6\.1\)/,
    );
    assert.match(io.out(), /rl2\.xml: warning index-link-recommended/);
    assert.match(io.out(), /7 documents: 5 valid, 2 invalid, 0 unreadable/);
    const small = capture();
    await runValidate([`${base}/cl.xml`], { walk: true, maxDocuments: 2, json: true }, small);
    const lines = small
      .out()
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { source: string; depth: number; parent?: string });
    assert.equal(lines.length, 2);
    assert.deepEqual(lines[1], { ...lines[1], source: `${base}/rl-index.xml`, depth: 1, parent: `${base}/cl.xml` });
    assert.match(small.err(), /4 linked document\(s\) not visited/);
  });

  it('--packages also checks the dump packages, with the rules between documents', async () => {
    const walk = walkDocuments(`${base}/rd.xml`, { packages: true });
    const seen: [string, string, string[]][] = [];
    for await (const d of walk.documents) {
      assert.ok('result' in d.outcome, JSON.stringify(d.outcome));
      seen.push([d.url.slice(base.length), d.outcome.result.kind, d.outcome.result.issues.map((i) => i.code)]);
    }
    assert.deepEqual(seen, [
      ['/rd.xml', 'resource-dump', []],
      ['/m1.xml', 'resource-dump-manifest', ['up-target-mismatch']],
      ['/p1.zip', 'resource-dump-manifest', ['up-target-mismatch']],
    ]);
  });

  it('inspect --walk prints the tree of documents', async () => {
    const io = capture();
    assert.equal(await runInspect(`${base}/.well-known/resourcesync`, { walk: true }, io), 0);
    const lines = io.out().trim().split('\n');
    assert.equal(lines.length, 8, io.out());
    assert.match(lines[0] ?? '', /^source-description .*\/\.well-known\/resourcesync: 1 entry, 0 errors, 0 warnings$/);
    assert.match(lines[2] ?? '', /^ {4}resource-list-index .*\/rl-index\.xml: 2 entries/);
    assert.match(lines[5] ?? '', /^ {6}resource-list .*\/rl1\.xml/);
  });
});

describe('rules between documents', () => {
  const up = (href: string): Link => ({ rel: 'up', href });
  it('compare URLs loosely', () => {
    assert.ok(sameUrl('HTTP://Example.com:80', 'http://example.com/'));
    assert.ok(!sameUrl('http://example.com/a', 'http://example.com/b'));
  });
  it('capability, up target and index link', () => {
    const ctx = {
      parentUrl: 'http://e.com/idx.xml',
      parentKind: 'change-list-index' as const,
      capability: 'changelist',
      upUrl: 'http://e.com/cl.xml',
      indexUrl: 'http://e.com/idx.xml',
    };
    const ok = createHeader('change-list', { from: T }, [
      up('http://e.com/cl.xml'),
      { rel: 'index', href: 'http://e.com/idx.xml' },
    ]);
    assert.deepEqual(checkLinkedDocument(ok, ctx), []);
    const bad = createHeader('resource-list', { at: T }, [up('http://e.com/other.xml')]);
    assert.deepEqual(
      checkLinkedDocument(bad, ctx).map((i) => [i.code, i.severity]),
      [
        ['capability-mismatch', 'error'],
        ['up-target-mismatch', 'error'],
        ['index-link-recommended', 'warning'],
      ],
    );
  });
});
