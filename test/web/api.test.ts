// The explorer's JSON API over real HTTP: a static Source of hand-written documents on one port, the explorer
// on another, the API asked with fetch.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { type RunningExplorer, type StaticSite, sitemapindex, startExplorer, startStatic, urlset } from './helpers.js';

const ONE = 'one\n';
const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');

function resourceEntries(from: number, to: number): string[] {
  const out: string[] = [];
  for (let i = from; i <= to; i++)
    out.push(
      `<url><loc>{base}r/${i}</loc><rs:md length="${i === 1 ? ONE.length : 3}"${i === 1 ? ` hash="sha-256:${sha256(ONE)}"` : ''}/></url>`,
    );
  return out;
}

let site: StaticSite;
let other: StaticSite;
let explorer: RunningExplorer;

before(async () => {
  site = await startStatic({});
  other = await startStatic({ '/elsewhere.txt': { body: 'elsewhere', type: 'text/plain' } });
  const base = site.url;
  const fill = (s: string): string => s.replaceAll('{base}', base);
  const docs: Record<string, string> = {
    '/.well-known/resourcesync': urlset('capability="description"', '', [
      `<url><loc>{base}cap.xml</loc><rs:md capability="capabilitylist"/></url>`,
    ]),
    '/cap.xml': urlset('capability="capabilitylist"', `<rs:ln rel="up" href="{base}.well-known/resourcesync"/>`, [
      `<url><loc>{base}rl-index.xml</loc><rs:md capability="resourcelist"/></url>`,
      `<url><loc>{base}cl.xml</loc><rs:md capability="changelist"/></url>`,
      `<url><loc>{base}broken.xml</loc><rs:md capability="changelist"/></url>`,
    ]),
    '/rl-index.xml': sitemapindex(
      'capability="resourcelist" at="2024-01-01T00:00:00Z"',
      `<rs:ln rel="up" href="{base}cap.xml"/>`,
      [`<sitemap><loc>{base}rl-1.xml</loc></sitemap>`, `<sitemap><loc>{base}rl-2.xml</loc></sitemap>`],
    ),
    '/rl-1.xml': urlset(
      'capability="resourcelist" at="2024-01-01T00:00:00Z"',
      `<rs:ln rel="up" href="{base}cap.xml"/><rs:ln rel="index" href="{base}rl-index.xml"/>`,
      resourceEntries(1, 150),
    ),
    '/rl-2.xml': urlset(
      'capability="resourcelist" at="2024-01-01T00:00:00Z"',
      `<rs:ln rel="up" href="{base}cap.xml"/><rs:ln rel="index" href="{base}rl-index.xml"/>`,
      [...resourceEntries(151, 299), `<url><loc>{base}r/needle-here</loc></url>`],
    ),
    '/cl.xml': urlset('capability="changelist" from="2024-01-01T00:00:00Z"', `<rs:ln rel="up" href="{base}cap.xml"/>`, [
      `<url><loc>{base}r/1</loc><rs:md change="created" datetime="2024-01-01T10:05:00Z"/></url>`,
      `<url><loc>{base}r/2</loc><rs:md change="created" datetime="2024-01-01T10:30:00Z"/></url>`,
      `<url><loc>{base}r/1</loc><rs:md change="updated" datetime="2024-01-01T10:59:59Z"/></url>`,
      `<url><loc>{base}r/2</loc><rs:md change="deleted" datetime="2024-01-01T12:00:00Z"/></url>`,
    ]),
    '/broken.xml': urlset(
      'capability="changelist" from="2024-01-01T00:00:00Z"',
      `<rs:ln rel="up" href="{base}elsewhere.xml"/>`,
      [`<url><loc>{base}r/1</loc><rs:md change="modified" datetime="2024-01-01T10:05:00Z"/></url>`],
    ),
  };
  const daily: string[] = [];
  for (let d = 0; d < 2500; d++)
    daily.push(
      `<url><loc>{base}r/1</loc><rs:md change="updated" datetime="${new Date(Date.UTC(2010, 0, 1) + d * 86_400_000).toISOString()}"/></url>`,
    );
  docs['/long.xml'] = urlset('capability="changelist" from="2010-01-01T00:00:00Z"', '', daily);
  for (const [path, body] of Object.entries(docs)) site.files.set(path, { body: fill(body) });
  site.files.set('/r/1', { body: ONE, type: 'text/plain' });
  site.files.set('/r/2', { body: 'two', type: 'text/plain' });
  explorer = await startExplorer(base, { token: 'secret-token' });
});

after(async () => {
  await explorer.close();
  await site.close();
  await other.close();
});

describe('explorer API', () => {
  it('discovers the Source and says which way it went', async () => {
    const { status, body } = await explorer.api('discover');
    assert.equal(status, 200);
    assert.equal(body.sourceDescription, `${site.url}.well-known/resourcesync`);
    assert.equal(body.set.url, `${site.url}cap.xml`);
    assert.deepEqual(body.set.capabilities.resourcelist, [`${site.url}rl-index.xml`]);
    assert.ok(body.path.length > 0, 'the discovery path is given');
    assert.ok(
      body.path.some((p: string) => p.includes('capability-list')),
      `path: ${JSON.stringify(body.path)}`,
    );
  });

  it('pages through a document without reading past the page', async () => {
    const first = await explorer.api('document', { url: `${site.url}rl-1.xml`, offset: '0', limit: '100' });
    assert.equal(first.status, 200);
    assert.equal(first.body.header.kind, 'resource-list');
    assert.equal(first.body.entries.length, 100);
    assert.equal(first.body.entries[0].loc, `${site.url}r/1`);
    assert.equal(first.body.more, true);
    const second = await explorer.api('document', { url: `${site.url}rl-1.xml`, offset: '100', limit: '100' });
    assert.equal(second.body.entries.length, 50);
    assert.equal(second.body.entries[0].loc, `${site.url}r/101`);
    assert.equal(second.body.more, false);
  });

  it('gives each entry of a Capability List or an index the documents it leads to (for the tree)', async () => {
    const cap = await explorer.api('document', { url: `${site.url}cap.xml` });
    const children = cap.body.entries.flatMap((e: { children?: { url: string }[] }) => e.children ?? []);
    assert.deepEqual(
      children.map((c: { url: string }) => c.url),
      [`${site.url}rl-index.xml`, `${site.url}cl.xml`, `${site.url}broken.xml`],
    );
    const index = await explorer.api('document', {
      url: `${site.url}rl-index.xml`,
      context: JSON.stringify(children[0].context),
    });
    assert.deepEqual(
      index.body.entries.map(
        (e: { children: { url: string; context: { indexUrl?: string } }[] }) => e.children[0]?.context.indexUrl,
      ),
      [`${site.url}rl-index.xml`, `${site.url}rl-index.xml`],
    );
  });

  it('summarises a whole document: entries, bytes, changes, time range, no issues for a valid one', async () => {
    const { body } = await explorer.api('summary', { url: `${site.url}cl.xml` });
    assert.equal(body.entries, 4);
    assert.ok(body.bytes > 0);
    assert.equal(body.errors, 0, JSON.stringify(body.issues));
    assert.deepEqual(body.changes, { created: 2, updated: 1, deleted: 1 });
    assert.deepEqual(body.datetime, { min: '2024-01-01T10:05:00Z', max: '2024-01-01T12:00:00Z' });
  });

  it('reports every validator issue of a broken document with its rule, section and location', async () => {
    const cap = await explorer.api('document', { url: `${site.url}cap.xml` });
    const context = cap.body.entries[2].children[0].context;
    const { body } = await explorer.api('summary', { url: `${site.url}broken.xml`, context: JSON.stringify(context) });
    assert.equal(body.valid, false);
    const invalid = body.issues.find((i: { code: string }) => i.code === 'change-invalid');
    assert.ok(invalid, JSON.stringify(body.issues));
    assert.equal(invalid.severity, 'error');
    assert.match(invalid.section, /§/);
    assert.equal(invalid.entry, 1);
    // The rule between documents: its up link does not point to the Capability List that lists it.
    assert.ok(
      body.issues.some((i: { code: string }) => i.code === 'up-target-mismatch'),
      JSON.stringify(body.issues),
    );
  });

  it('an unreadable document is one issue with the reader code, not an error of the API', async () => {
    const { status, body } = await explorer.api('summary', { url: `${site.url}missing.xml` });
    assert.equal(status, 200);
    assert.equal(body.valid, false);
    assert.equal(body.issues[0].code, 'RS_HTTP');
  });

  it('searches the members of an index, a limited number at a time, with a cursor to go on', async () => {
    const r1 = await explorer.api('search', { url: `${site.url}rl-index.xml`, q: '/r/1', limit: '5' });
    assert.equal(r1.status, 200);
    assert.deepEqual(
      r1.body.matches.map((m: { value: { loc: string } }) => m.value.loc),
      [1, 10, 11, 12, 13].map((i) => `${site.url}r/${i}`),
    );
    assert.equal(typeof r1.body.cursor, 'string');
    const r2 = await explorer.api('search', {
      url: `${site.url}rl-index.xml`,
      q: '/r/1',
      limit: '5',
      cursor: r1.body.cursor,
    });
    assert.deepEqual(
      r2.body.matches.map((m: { value: { loc: string } }) => m.value.loc),
      [14, 15, 16, 17, 18].map((i) => `${site.url}r/${i}`),
    );
    const far = await explorer.api('search', { url: `${site.url}rl-index.xml`, q: 'NEEDLE' });
    assert.deepEqual(
      far.body.matches.map((m: { doc: string; value: { loc: string } }) => [m.doc, m.value.loc]),
      [[`${site.url}rl-2.xml`, `${site.url}r/needle-here`]],
    );
    assert.equal(far.body.cursor, undefined);
    assert.equal(far.body.scanned, 300);
  });

  it('counts changes per minute, hour or day and change type', async () => {
    const { body } = await explorer.api('changes', { url: `${site.url}cl.xml`, bucket: 'hour' });
    assert.equal(body.total, 4);
    assert.deepEqual(body.buckets, [
      { start: '2024-01-01T10:00:00.000Z', created: 2, updated: 1, deleted: 0, other: 0 },
      { start: '2024-01-01T12:00:00.000Z', created: 0, updated: 0, deleted: 1, other: 0 },
    ]);
    const auto = await explorer.api('changes', { url: `${site.url}cl.xml` });
    assert.equal(auto.body.bucket, 'minute');
    assert.deepEqual(
      auto.body.buckets.map((b: { start: string }) => b.start),
      ['2024-01-01T10:05:00.000Z', '2024-01-01T10:30:00.000Z', '2024-01-01T10:59:00.000Z', '2024-01-01T12:00:00.000Z'],
    );
    const days = await explorer.api('changes', { url: `${site.url}cl.xml`, bucket: 'day' });
    assert.deepEqual(days.body.buckets, [
      { start: '2024-01-01T00:00:00.000Z', created: 2, updated: 1, deleted: 1, other: 0 },
    ]);
  });

  it('keeps a histogram bounded: 2,500 days of changes become at most 2,000 buckets, every change counted', async () => {
    const { body } = await explorer.api('changes', { url: `${site.url}long.xml`, bucket: 'day' });
    assert.ok(body.buckets.length <= 2000, String(body.buckets.length));
    assert.equal(body.bucketMs, 2 * 86_400_000);
    const sum = (b: { buckets: { updated: number }[] }): number => b.buckets.reduce((n, x) => n + x.updated, 0);
    assert.equal(sum(body), 2500);
    const auto = await explorer.api('changes', { url: `${site.url}long.xml` });
    assert.ok(auto.body.buckets.length <= 241, String(auto.body.buckets.length));
    assert.equal(sum(auto.body), 2500);
  });

  it('checks fixity on demand: length and hash compared with what the list says', async () => {
    const ok = await explorer.api('fixity', {
      url: `${site.url}r/1`,
      length: String(ONE.length),
      hash: `sha-256:${sha256(ONE)}`,
    });
    assert.equal(ok.body.ok, true);
    assert.equal(ok.body.lengthMatch, true);
    assert.equal(ok.body.hashMatch, true);
    const bad = await explorer.api('fixity', { url: `${site.url}r/2`, length: '3', hash: `sha-256:${sha256(ONE)}` });
    assert.equal(bad.body.ok, false);
    assert.equal(bad.body.lengthMatch, true);
    assert.equal(bad.body.hashMatch, false);
    assert.equal(bad.body.hashes['sha-256'], sha256('two'));
  });

  it("sends the token to the Source's origin only", async () => {
    site.requests.length = 0;
    other.requests.length = 0;
    await explorer.api('fixity', { url: `${site.url}r/1` });
    await explorer.api('fixity', { url: `${other.url}elsewhere.txt` });
    assert.equal(site.requests[0]?.headers.authorization, 'Bearer secret-token');
    assert.equal(other.requests.length, 1);
    assert.equal(other.requests[0]?.headers.authorization, undefined);
  });

  it('refuses requests from another site, bad parameters and non-http URLs', async () => {
    const cross = await explorer.api('discover', {}, { 'sec-fetch-site': 'cross-site' });
    assert.equal(cross.status, 403);
    const origin = await explorer.api('discover', {}, { origin: 'http://evil.example' });
    assert.equal(origin.status, 403);
    const file = await explorer.api('document', { url: 'file:///etc/passwd' });
    assert.equal(file.status, 400);
    assert.equal(file.body.error.code, 'RS_CONFIG');
    const limit = await explorer.api('document', { url: `${site.url}cap.xml`, limit: 'x' });
    assert.equal(limit.status, 400);
    const unknown = await explorer.api('nothing');
    assert.equal(unknown.status, 404);
  });

  it('serves the page, its script and style, and redirects / to it', async () => {
    const root = await fetch(explorer.page.replace(/explorer\/$/, ''), { redirect: 'manual' });
    assert.equal(root.status, 308);
    assert.equal(root.headers.get('location'), '/explorer/');
    const page = await fetch(explorer.page);
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type') ?? '', /text\/html/);
    assert.match(page.headers.get('content-security-policy') ?? '', /default-src 'self'/);
    assert.match(await page.text(), /<script type="module" src="app.js">/);
    for (const [file, type] of [
      ['app.js', /javascript/],
      ['app.css', /css/],
    ] as const) {
      const res = await fetch(`${explorer.page}${file}`);
      assert.equal(res.status, 200);
      assert.match(res.headers.get('content-type') ?? '', type);
      await res.arrayBuffer();
    }
    const missing = await fetch(`${explorer.page}nothing.js`);
    assert.equal(missing.status, 404);
    await missing.arrayBuffer();
  });
});

describe('explorer API confined to one origin (as serve mounts it)', () => {
  it('refuses URLs outside the allowed origin and Host headers it does not serve', async () => {
    const confined = await startExplorer(site.url, {
      allowUrl: (u) => u.startsWith(site.url),
      allowedHosts: ['only.example:1'],
    });
    try {
      const wrongHost = await confined.api('discover');
      assert.equal(wrongHost.status, 403);
    } finally {
      await confined.close();
    }
    const byOrigin = await startExplorer(site.url, { allowUrl: (u) => u.startsWith(site.url) });
    try {
      const inside = await byOrigin.api('document', { url: `${site.url}cap.xml` });
      assert.equal(inside.status, 200);
      const outside = await byOrigin.api('fixity', { url: `${other.url}elsewhere.txt` });
      assert.equal(outside.status, 400);
      assert.match(outside.body.error.message, /does not fetch/);
    } finally {
      await byOrigin.close();
    }
  });
});
