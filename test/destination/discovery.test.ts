import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { isResourceSyncError } from '../../src/core/errors.js';
import {
  capabilityListName,
  discover,
  findHtmlLinks,
  findRobotsSitemaps,
  openRemoteDocument,
} from '../../src/destination/discovery.js';
import { HttpClient } from '../../src/http/client.js';
import { parseLinkHeader } from '../../src/http/link.js';
import { startServer, type TestServer } from './http-testserver.js';

const RS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/"';

function urlset(md: string, links: string, entries: string): string {
  return `<?xml version="1.0" encoding="UTF-8"?>\n<urlset ${RS}>${links}<rs:md ${md}/>${entries}</urlset>`;
}
function index(md: string, links: string, entries: string): string {
  return `<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex ${RS}>${links}<rs:md ${md}/>${entries}</sitemapindex>`;
}
const ln = (rel: string, href: string): string => `<rs:ln rel="${rel}" href="${href}"/>`;
const url = (loc: string, md = ''): string => `<url><loc>${loc}</loc>${md === '' ? '' : `<rs:md ${md}/>`}</url>`;

interface Doc {
  body: string | Buffer;
  type?: string;
  status?: number;
  headers?: Record<string, string>;
}

describe('discover', () => {
  let s: TestServer;
  let base: string;
  const docs = new Map<string, Doc>();
  let bigListSentBytes = 0;
  let bigListClosedEarly = false;
  const client = new HttpClient({ bearerToken: 'tok', retries: 0 });

  before(async () => {
    s = await startServer((req, res) => {
      const path = (req.url ?? '/').replace(/\?.*$/, '');
      if (path === '/big/resourcelist.xml') {
        // A large Resource List: discovery must read its header only.
        res.setHeader('content-type', 'application/xml');
        const head = urlset(
          'capability="resourcelist" at="2024-01-01T00:00:00Z"',
          ln('up', `${base}/set1/capabilitylist.xml`),
          '',
        );
        res.write(head.replace('</urlset>', ''));
        let i = 0;
        const pump = (): void => {
          while (i < 200_000) {
            const chunk = url(`${base}/r/${i++}`);
            bigListSentBytes += chunk.length;
            if (!res.write(chunk)) {
              res.once('drain', pump);
              return;
            }
          }
          res.end('</urlset>');
        };
        res.on('close', () => {
          if (i < 200_000) bigListClosedEarly = true;
        });
        pump();
        return;
      }
      const doc = docs.get(path);
      if (doc === undefined) {
        res.statusCode = 404;
        res.end('not found');
        return;
      }
      res.statusCode = doc.status ?? 200;
      res.setHeader('content-type', doc.type ?? 'application/xml');
      for (const [k, v] of Object.entries(doc.headers ?? {})) res.setHeader(k, v);
      res.end(doc.body);
    });
    base = s.url;
    const b = base;
    docs.set('/.well-known/resourcesync', {
      body: urlset(
        'capability="description"',
        ln('describedby', `${b}/about.html`),
        url(`${b}/set1/capabilitylist.xml`, 'capability="capabilitylist"') +
          url(`${b}/set2/capabilitylist.xml`, 'capability="capabilitylist"'),
      ),
    });
    for (const set of ['set1', 'set2'])
      docs.set(`/${set}/capabilitylist.xml`, {
        body: urlset(
          'capability="capabilitylist"',
          ln('up', `${b}/.well-known/resourcesync`),
          url(`${b}/${set}/resourcelist.xml`, 'capability="resourcelist"') +
            url(`${b}/${set}/changelist.xml`, 'capability="changelist"'),
        ),
      });
    docs.set('/set1/resourcelist.xml', {
      body: urlset(
        'capability="resourcelist" at="2024-01-01T00:00:00Z"',
        ln('up', `${b}/set1/capabilitylist.xml`),
        url(`${b}/r1`),
      ),
    });
    docs.set('/orphan/resourcelist.xml', {
      body: urlset('capability="resourcelist" at="2024-01-01T00:00:00Z"', '', url(`${b}/r1`)),
    });
    docs.set('/dead-up/resourcelist.xml', {
      body: urlset('capability="resourcelist" at="2024-01-01T00:00:00Z"', ln('up', `${b}/nowhere.xml`), url(`${b}/r1`)),
    });
    docs.set('/part/resourcelist-part1.xml', {
      body: urlset(
        'capability="resourcelist" at="2024-01-01T00:00:00Z"',
        ln('index', `${b}/part/index.xml`),
        url(`${b}/r1`),
      ),
    });
    docs.set('/part/index.xml', {
      body: index(
        'capability="resourcelist" at="2024-01-01T00:00:00Z"',
        ln('up', `${b}/set2/capabilitylist.xml`),
        `<sitemap><loc>${b}/part/resourcelist-part1.xml</loc></sitemap>`,
      ),
    });
    // An up-link cycle between two lists.
    docs.set('/loop/a.xml', {
      body: urlset('capability="resourcelist" at="2024-01-01T00:00:00Z"', ln('up', `${b}/loop/b.xml`), ''),
    });
    docs.set('/loop/b.xml', {
      body: urlset('capability="changelist" from="2024-01-01T00:00:00Z"', ln('up', `${b}/loop/a.xml`), ''),
    });
    docs.set('/page.html', {
      type: 'text/html; charset=utf-8',
      body: `<!DOCTYPE html><html><head><title>x <link rel="resourcesync" href="/wrong.xml"></title>
        <!-- <link rel="resourcesync" href="/commented.xml"> -->
        <script>var s = '<link rel="resourcesync" href="/script.xml">';</script>
        <link rel='stylesheet' href='/s.css'>
        <LINK REL="alternate ResourceSync" HREF="set2/capabilitylist.xml?a=1&amp;b=2&constructor;"></head>
        <body><link rel="resourcesync" href="/body.xml"></body></html>`,
    });
    docs.set('/file.pdf', {
      type: 'application/pdf',
      body: Buffer.alloc(3_000_000, 1),
      headers: {
        link: `</style.css>; rel=stylesheet, <${b}/set1/capabilitylist.xml>; rel="describedby resourcesync"; title="a, b"`,
      },
    });
    docs.set('/notrs.xml', { body: '<?xml version="1.0"?><rss version="2.0"><channel/></rss>' });
  });

  after(async () => {
    await client.destroy();
    await s.close();
  });

  it('finds the Source Description at the host root and lists the sets; --set chooses one', async () => {
    const r = await discover(`${base}/`, client);
    assert.equal(r.sourceDescription, `${base}/.well-known/resourcesync`);
    assert.deepEqual(
      r.sets.map((x) => x.name),
      ['set1', 'set2'],
    );
    assert.equal(r.set, undefined);
    const r2 = await discover(`${base}/`, client, { set: 'set2' });
    assert.equal(r2.set?.url, `${base}/set2/capabilitylist.xml`);
    assert.deepEqual(r2.set?.capabilities.get('resourcelist'), [`${base}/set2/resourcelist.xml`]);
    assert.equal(r2.set?.header.kind, 'capability-list');
    const r3 = await discover(`${base}/.well-known/resourcesync`, client, { set: '1' });
    assert.equal(r3.set?.name, 'set1');
    await assert.rejects(
      discover(`${base}/`, client, { set: 'nope' }),
      (e: unknown) => isResourceSyncError(e, 'RS_DISCOVERY') && /set1.*set2/.test(e.message),
    );
  });

  it('reads a Source Description Index (§8), given directly or at the well-known URI: the sets of all its Source Descriptions, --set chooses', async () => {
    const sd = (sets: string[]) =>
      urlset(
        'capability="description"',
        ln('index', `${base}/sdi/.well-known/resourcesync`),
        sets.map((x) => url(`${base}/${x}/capabilitylist.xml`, 'capability="capabilitylist"')).join(''),
      );
    docs.set('/sdi/sd1.xml', { body: sd(['set1']) });
    docs.set('/sdi/sd2.xml', { body: sd(['set2']) });
    docs.set('/sdi/.well-known/resourcesync', {
      body: index(
        'capability="description"',
        '',
        `<sitemap><loc>${base}/sdi/sd1.xml</loc></sitemap><sitemap><loc>${base}/sdi/sd2.xml</loc><rs:md capability="description"/></sitemap>`,
      ),
    });
    try {
      for (const start of [`${base}/sdi/`, `${base}/sdi/.well-known/resourcesync`]) {
        const r = await discover(start, client);
        assert.equal(r.sourceDescriptionIndex, `${base}/sdi/.well-known/resourcesync`, start);
        assert.equal(r.sourceDescription, `${base}/sdi/.well-known/resourcesync`);
        assert.deepEqual(
          r.sets.map((x) => x.name),
          ['set1', 'set2'],
        );
        assert.equal(r.set, undefined, 'several sets, none chosen');
        const r2 = await discover(start, client, { set: 'set2' });
        assert.equal(r2.set?.url, `${base}/set2/capabilitylist.xml`);
        assert.deepEqual(r2.set?.capabilities.get('resourcelist'), [`${base}/set2/resourcelist.xml`]);
      }
      await assert.rejects(
        discover(`${base}/sdi/`, client, { set: 'nope' }),
        (e: unknown) => isResourceSyncError(e, 'RS_DISCOVERY') && /set1.*set2/.test(e.message),
      );
      // A Source Description of the Index that cannot be read is passed over, with a warning.
      docs.delete('/sdi/sd1.xml');
      const r3 = await discover(`${base}/sdi/`, client);
      assert.equal(r3.set?.url, `${base}/set2/capabilitylist.xml`, 'the one set left is chosen');
      assert.match((r3.warnings ?? []).join('\n'), /sd1\.xml could not be read/);
      docs.delete('/sdi/sd2.xml');
      await assert.rejects(
        discover(`${base}/sdi/.well-known/resourcesync`, client),
        (e: unknown) => isResourceSyncError(e, 'RS_DISCOVERY') && /no Capability List/.test(e.message),
      );
    } finally {
      for (const k of ['/sdi/sd1.xml', '/sdi/sd2.xml', '/sdi/.well-known/resourcesync']) docs.delete(k);
    }
  });

  it('finds the well-known URI under a path, then at the root', async () => {
    docs.set('/sub/.well-known/resourcesync', {
      body: urlset(
        'capability="description"',
        '',
        url(`${base}/set2/capabilitylist.xml`, 'capability="capabilitylist"'),
      ),
    });
    const r = await discover(`${base}/sub/`, client);
    assert.equal(r.sourceDescription, `${base}/sub/.well-known/resourcesync`);
    assert.equal(r.set?.url, `${base}/set2/capabilitylist.xml`);
    docs.delete('/sub/.well-known/resourcesync');
    const r2 = await discover(`${base}/sub/`, client);
    assert.equal(r2.sourceDescription, `${base}/.well-known/resourcesync`);
  });

  it("chooses the set whose directory the user's URL points into", async () => {
    const r = await discover(`${base}/set2/`, client);
    assert.equal(r.sourceDescription, `${base}/.well-known/resourcesync`);
    assert.equal(r.set?.url, `${base}/set2/capabilitylist.xml`);
  });

  it('takes a Capability List as it is', async () => {
    const r = await discover(`${base}/set1/capabilitylist.xml`, client);
    assert.equal(r.set?.url, `${base}/set1/capabilitylist.xml`);
    assert.equal(r.sourceDescription, `${base}/.well-known/resourcesync`);
    assert.deepEqual(r.set?.capabilities.get('changelist'), [`${base}/set1/changelist.xml`]);
  });

  it("follows a Resource List's up link, and an index's", async () => {
    const r = await discover(`${base}/set1/resourcelist.xml`, client);
    assert.equal(r.set?.url, `${base}/set1/capabilitylist.xml`);
    const r2 = await discover(`${base}/part/resourcelist-part1.xml`, client);
    assert.equal(r2.set?.url, `${base}/set2/capabilitylist.xml`);
  });

  it('reads only the header of a large Resource List', async () => {
    const r = await discover(`${base}/big/resourcelist.xml`, client);
    assert.equal(r.set?.url, `${base}/set1/capabilitylist.xml`);
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.ok(bigListClosedEarly, `sent ${bigListSentBytes} bytes`);
    assert.ok(bigListSentBytes < 5_000_000, `sent ${bigListSentBytes} bytes`);
  });

  it('returns direct for a list without a reachable Capability List', async () => {
    const r = await discover(`${base}/orphan/resourcelist.xml`, client);
    assert.deepEqual(r.direct, { url: `${base}/orphan/resourcelist.xml`, kind: 'resource-list' });
    assert.equal(r.set, undefined);
    const r2 = await discover(`${base}/dead-up/resourcelist.xml`, client);
    assert.equal(r2.direct?.kind, 'resource-list');
  });

  it('reads gzip documents (a .xml.gz file, and Content-Encoding: gzip)', async () => {
    const cap = docs.get('/set1/capabilitylist.xml') as Doc;
    docs.set('/gz/capabilitylist.xml.gz', { type: 'application/gzip', body: gzipSync(cap.body) });
    docs.set('/gz/encoded.xml', { body: gzipSync(cap.body), headers: { 'content-encoding': 'gzip' } });
    const r = await discover(`${base}/gz/capabilitylist.xml.gz`, client);
    assert.deepEqual(r.set?.capabilities.get('resourcelist'), [`${base}/set1/resourcelist.xml`]);
    const r2 = await discover(`${base}/gz/encoded.xml`, client);
    assert.equal(r2.set?.url, `${base}/gz/encoded.xml`);
  });

  it('stops at an up-link loop', async () => {
    const r = await discover(`${base}/loop/a.xml`, client);
    assert.equal(r.direct?.url, `${base}/loop/a.xml`);
  });

  it('finds the link of an HTML page, ignoring comments, scripts, the title and the body', async () => {
    const r = await discover(`${base}/page.html`, client);
    // `&constructor;` is no entity (it names an Object property): kept as written.
    assert.equal(r.set?.url, `${base}/set2/capabilitylist.xml?a=1&b=2&constructor;`);
  });

  it('finds a Link header on any resource without downloading it', async () => {
    const r = await discover(`${base}/file.pdf`, client);
    assert.equal(r.set?.url, `${base}/set1/capabilitylist.xml`);
  });

  it('reads robots.txt Sitemap lines', async () => {
    docs.set('/robots.txt', {
      type: 'text/plain',
      body: `User-agent: *\nDisallow: /cgi-bin/\nSitemap: ${base}/set1/resourcelist.xml\n`,
    });
    // /.well-known/resourcesync answers first at the root, so start from robots.txt itself.
    const r = await discover(`${base}/robots.txt`, client);
    assert.equal(r.set?.url, `${base}/set1/capabilitylist.xml`);
    docs.delete('/robots.txt');
  });

  it('sends the bearer token on every discovery request', async () => {
    const before = s.log.length;
    await discover(`${base}/`, client, { set: 'set1' });
    const mine = s.log.slice(before);
    assert.ok(mine.length >= 3);
    for (const r of mine) assert.equal(r.headers.authorization, 'Bearer tok');
  });

  it('says what it tried when nothing is found', async () => {
    const saved = docs.get('/.well-known/resourcesync') as Doc;
    docs.delete('/.well-known/resourcesync');
    try {
      await assert.rejects(discover(`${base}/notrs.xml`, client), (e: unknown) => {
        assert.ok(isResourceSyncError(e, 'RS_DISCOVERY'));
        assert.match(e.message, /notrs\.xml: not a ResourceSync document/);
        assert.match(e.message, /\.well-known\/resourcesync: HTTP 404/);
        assert.match(e.message, /robots\.txt: HTTP 404/);
        return true;
      });
    } finally {
      docs.set('/.well-known/resourcesync', saved);
    }
  });

  it('stops with RS_ABORTED when aborted', async () => {
    await assert.rejects(discover(`${base}/`, client, { signal: AbortSignal.abort() }), (e: unknown) =>
      isResourceSyncError(e, 'RS_ABORTED'),
    );
  });

  it('gives up quickly on an unreachable host', async () => {
    const dead = await startServer((_req, res) => res.end());
    const deadUrl = dead.url;
    await dead.close();
    const c = new HttpClient({ retries: 1, retryBaseDelayMs: 1 });
    try {
      await assert.rejects(discover(`${deadUrl}/some/path/`, c), (e: unknown) => {
        assert.ok(isResourceSyncError(e, 'RS_DISCOVERY'));
        assert.match(e.message, /ECONNREFUSED/);
        assert.match(e.message, /unreachable/);
        return true;
      });
      assert.equal(c.stats.requests, 2); // one URL, retried once; the fallbacks are skipped
    } finally {
      await c.destroy();
    }
  });

  it('opens a remote document with errors naming the URL', async () => {
    const doc = await openRemoteDocument(`${base}/set1/resourcelist.xml`, client);
    assert.equal(doc.header.kind, 'resource-list');
    const locs: string[] = [];
    for await (const e of doc.entries) locs.push(e.loc);
    assert.deepEqual(locs, [`${base}/r1`]);
    await assert.rejects(
      openRemoteDocument(`${base}/notrs.xml`, client),
      (e: unknown) => isResourceSyncError(e) && e.url === `${base}/notrs.xml`,
    );
  });
});

describe('discovery parsers', () => {
  it('parses RFC 8288 Link headers', () => {
    const links = parseLinkHeader(
      [
        '<cl.xml>; rel="resourcesync describedby"; title="a, \\"b\\"", </x>;rel=up',
        '<http://o.org/y>; anchor="#z"; rel=ResourceSync; rel=ignored',
        'garbage, <bad',
      ],
      'http://e.org/a/',
    );
    assert.deepEqual(
      links.map((l) => [l.href, l.rel]),
      [
        ['http://e.org/a/cl.xml', ['resourcesync', 'describedby']],
        ['http://e.org/x', ['up']],
        ['http://o.org/y', ['resourcesync']],
      ],
    );
    assert.equal(links[0]?.params.title, 'a, "b"');
  });

  it('finds HTML links (Example 9) and robots Sitemap lines (Example 11)', async () => {
    const fixtures = join(await repoRoot(), 'test', 'fixtures', 'spec-examples');
    const html = await readFile(join(fixtures, 'example-09.html'), 'utf8');
    assert.deepEqual(findHtmlLinks(html, 'http://www.example.com/'), [
      'http://www.example.com/dataset1/capabilitylist.xml',
    ]);
    const robots = await readFile(join(fixtures, 'example-11.txt'), 'utf8');
    assert.deepEqual(findRobotsSitemaps(robots, 'http://example.com/robots.txt'), [
      'http://example.com/dataset1/resourcelist.xml',
    ]);
    const http = await readFile(join(fixtures, 'example-10.txt'), 'utf8');
    const linkValue = /Link:\s*([\s\S]*?)\n\s*\.\.\./.exec(http)?.[1]?.replace(/\s*\n\s*/g, ' ');
    assert.deepEqual(
      parseLinkHeader(linkValue).map((l) => [l.href, l.rel]),
      [['http://www.example.com/dataset1/capabilitylist.xml', ['resourcesync']]],
    );
  });

  it('never throws on arbitrary input, and stays linear on adversarial input', () => {
    const html = fc.string({
      unit: fc.constantFrom(...'<>/="\' \n!-ablinkrehfscriptdy&#;:'.split('')),
      maxLength: 200,
    });
    fc.assert(
      fc.property(html, (h) => {
        findHtmlLinks(h, 'http://e.org/');
        parseLinkHeader(h, 'http://e.org/');
        findRobotsSitemaps(h, 'http://e.org/');
      }),
      { numRuns: 3000 },
    );
    const t0 = performance.now();
    findHtmlLinks('<script></script>'.repeat(20_000), 'http://e.org/');
    findHtmlLinks(`<link href=${'x'.repeat(200_000)}`.repeat(2), 'http://e.org/');
    findHtmlLinks('<a b=c '.repeat(40_000), 'http://e.org/');
    parseLinkHeader('<x>; a=b'.repeat(20_000), 'http://e.org/');
    assert.ok(performance.now() - t0 < 5000, `took ${performance.now() - t0} ms`);
  });

  it('names Capability Lists by directory or file stem', () => {
    assert.equal(capabilityListName('http://e.org/dataset1/capabilitylist.xml'), 'dataset1');
    assert.equal(capabilityListName('http://e.org/capabilitylist1.xml'), 'capabilitylist1');
  });
});

async function repoRoot(): Promise<string> {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    try {
      await readFile(join(dir, 'package.json'));
      return dir;
    } catch {
      const up = dirname(dir);
      if (up === dir) throw new Error('no package.json above the test');
      dir = up;
    }
  }
}
