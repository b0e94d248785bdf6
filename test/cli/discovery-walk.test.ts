// One discovery for sync, validate --walk and inspect --walk (src/destination/discovery.ts), against a real
// HTTP Source: a Source's root URL, a web page linking to it, and a robots.txt naming a plain Sitemap before
// the ResourceSync documents.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runInspect } from '../../src/cli/inspect.js';
import { runValidate } from '../../src/cli/validate.js';
import { Destination } from '../../src/destination/destination.js';
import { discover } from '../../src/destination/discovery.js';
import { HttpClient } from '../../src/http/client.js';
import { StaticSource, makeResources } from '../destination/static-source.js';

const AT = '2024-06-01T00:00:00Z';

function capture(): {
  out: { stdout: (t: string) => void; stderr: (t: string) => void };
  o: () => string;
  e: () => string;
} {
  let o = '';
  let e = '';
  return { out: { stdout: (t) => void (o += t), stderr: (t) => void (e += t) }, o: () => o, e: () => e };
}

const PLAIN_SITEMAP = `<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <url><loc>URL/about.html</loc></url>
</urlset>`;

describe('one discovery for sync, validate --walk and inspect --walk', { timeout: 60_000 }, () => {
  let src: StaticSource;
  let client: HttpClient;
  before(async () => {
    src = await StaticSource.start();
    src.publishResourceList(makeResources(3, 20, 'walk'), AT, 1);
    src.publishChangeLists([{ from: AT, changes: [] }]);
    src.publishCapabilities();
    src.set('/sitemap.xml', PLAIN_SITEMAP.replace('URL', src.base), 'application/xml');
    client = new HttpClient({ retries: 0 });
  });
  after(async () => {
    await client.close();
    await src.close();
  });

  it('validate --walk from the Source root (404) walks from the Source Description discovery finds', async () => {
    const c = capture();
    const code = await runValidate([src.url('/')], { walk: true, json: true }, c.out);
    assert.notEqual(code, 2, c.o() + c.e());
    const lines = c
      .o()
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const report = lines[0]?.discovery as { found: string; kind: string; steps: string[] } | undefined;
    assert.ok(report !== undefined, c.o());
    assert.equal(report.found, src.url('/.well-known/resourcesync'));
    assert.equal(report.kind, 'source-description');
    assert.ok(
      report.steps.some((s) => s.includes('HTTP 404')),
      report.steps.join('; '),
    );
    const kinds = lines.slice(1).map((l) => l.kind);
    assert.ok(kinds.includes('source-description'), kinds.join());
    assert.ok(kinds.includes('capability-list'), kinds.join());
    assert.ok(kinds.includes('resource-list-index'), kinds.join());
    // People get the same on stderr.
    const t = capture();
    await runValidate([src.url('/')], { walk: true }, t.out);
    assert.match(t.e(), /discovery from .*: walking from the source-description .*\.well-known\/resourcesync/);
    assert.match(t.e(), /tried .*: HTTP 404/);
  });

  it('inspect --walk from a web page that links to the Capability List', async () => {
    src.set(
      '/home.html',
      `<!doctype html><html><head><link rel="resourcesync" href="/capabilitylist.xml"></head><body>hi</body></html>`,
      'text/html',
    );
    const c = capture();
    const code = await runInspect(src.url('/home.html'), { walk: true, json: true }, c.out);
    assert.equal(code, 0, c.o() + c.e());
    const lines = c
      .o()
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const report = lines[0]?.discovery as { found: string; kind: string } | undefined;
    // The walk starts from the document discovery read (its up link only names the Source Description).
    assert.equal(report?.found, src.url('/capabilitylist.xml'), c.o());
    assert.equal(report?.kind, 'capability-list');
    assert.ok(
      lines.some((l) => l.kind === 'capability-list' && l.depth === 0),
      c.o(),
    );
    assert.ok(
      lines.some((l) => l.kind === 'resource-list-index' && l.depth === 1),
      c.o(),
    );
  });

  it('a URL that is a ResourceSync document is walked as given, without a discovery report', async () => {
    const c = capture();
    await runInspect(src.url('/capabilitylist.xml'), { walk: true, json: true }, c.out);
    const first = JSON.parse(c.o().split('\n')[0] as string) as Record<string, unknown>;
    assert.equal(first.discovery, undefined);
    assert.equal(first.source, src.url('/capabilitylist.xml'));
    assert.equal(first.kind, 'capability-list');
  });

  it('robots.txt naming a plain Sitemap first: the document with rs:md is preferred, and the choice reported', async () => {
    src.remove('/.well-known/resourcesync');
    src.set(
      '/robots.txt',
      `User-agent: *\nSitemap: ${src.url('/sitemap.xml')}\nSitemap: ${src.url('/resourcelist-index.xml')}\n`,
      'text/plain',
    );
    try {
      const found = await discover(src.url('/'), client);
      assert.equal(found.direct, undefined, JSON.stringify(found));
      assert.equal(found.set?.url, src.url('/capabilitylist.xml'));
      assert.ok(
        found.warnings?.some((w) => w.includes('plain Sitemap') && w.includes('/sitemap.xml')),
        JSON.stringify(found.warnings),
      );
      // sync takes the same choice, and says so.
      const dir = await mkdtemp(join(tmpdir(), 'rs-robots-'));
      try {
        const s = await new Destination({ url: src.url('/'), dir, durability: 'none', http: { retries: 0 } }).sync();
        assert.equal(s.counts.created, 3, JSON.stringify(s));
        assert.ok(
          s.warnings.some((w) => w.includes('passed over the plain Sitemap')),
          JSON.stringify(s.warnings),
        );
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
      // Only a plain Sitemap: used as a Resource List, with a warning.
      src.set('/robots.txt', `Sitemap: ${src.url('/sitemap.xml')}\n`, 'text/plain');
      const plain = await discover(src.url('/'), client);
      assert.deepEqual(plain.direct, { url: src.url('/sitemap.xml'), kind: 'sitemap' });
      assert.ok(
        plain.warnings?.some((w) => w.includes('using the plain Sitemap')),
        JSON.stringify(plain),
      );
      // The walk from the root reports the same choice.
      src.set(
        '/robots.txt',
        `Sitemap: ${src.url('/sitemap.xml')}\nSitemap: ${src.url('/capabilitylist.xml')}\n`,
        'text/plain',
      );
      const c = capture();
      await runInspect(src.url('/'), { walk: true }, c.out);
      assert.match(c.e(), /walking from the capability-list .*capabilitylist\.xml/);
      assert.match(c.e(), /warning: .*passed over the plain Sitemap/);
    } finally {
      src.remove('/robots.txt');
      src.publishCapabilities();
    }
  });
});
