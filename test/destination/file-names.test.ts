// File names of a copy equal the collection's (a `diff -r` of the original tree and the copy finds nothing),
// through our `serve` and through `publish` behind a plain static web server; query URIs get distinct names.
import assert from 'node:assert/strict';
import { createReadStream } from 'node:fs';
import { mkdir, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runPublish } from '../../src/cli/publish.js';
import { Destination } from '../../src/destination/destination.js';
import { createPathMapper } from '../../src/destination/paths.js';
import { type DirectorySource, openDirectorySource } from '../../src/source/directory.js';
import { type SourceServer, createSourceServer } from '../../src/source/server.js';
import { startServer } from './http-testserver.js';
import { hashAttr, readTree } from './static-source.js';

/** Names a collection may hold that percent-encoding used to mangle (RFC 3986 sub-delims, `%`, `#`, `?`...). */
const NAMES = [
  'C++',
  '#x',
  'a+b',
  '50% off',
  'a b',
  'ü',
  '?q',
  '%41',
  'a=b;c,d@e$f&g!h(i)j*k:l~m',
  '[x]|y^{z}`"<>',
  'don’t',
  '日本語.txt',
  'index',
  'trail.',
];

async function makeCollection(dir: string): Promise<void> {
  for (const [i, name] of NAMES.entries()) await writeFile(join(dir, name), `file ${i}: ${name}\n`);
  await mkdir(join(dir, 'sub dir', 'C++', '#1'), { recursive: true });
  await writeFile(join(dir, 'sub dir', 'C++', '#1', '?x=1&y=2'), 'deep\n');
}

function sorted(m: Map<string, Buffer>): [string, string][] {
  return [...m].map(([k, v]): [string, string] => [k, v.toString('utf8')]).sort(([a], [b]) => (a < b ? -1 : 1));
}

/** The copy under its host directory, compared with the original tree as `diff -r` would (names and bytes). */
function assertSameTree(collection: string, mirror: string, base: string, under = ''): void {
  const u = new URL(base);
  const copy = readTree(join(mirror, `${u.hostname}_${u.port}`, ...under.split('/').filter((s) => s !== '')));
  assert.deepEqual(sorted(copy), sorted(readTree(collection)));
}

describe('file names of a copy', { timeout: 60_000 }, () => {
  let work: string;
  let collection: string;
  before(async () => {
    work = await mkdtemp(join(tmpdir(), 'rs-names-'));
    collection = join(work, 'collection');
    await mkdir(collection);
    await makeCollection(collection);
  });
  after(async () => {
    await rm(work, { recursive: true, force: true });
  });

  it('equal the collection through our serve (baseline, incremental, audit)', async () => {
    let site: DirectorySource | undefined;
    let resolveSite: (s: DirectorySource) => void = () => undefined;
    const server: SourceServer = createSourceServer(new Promise<DirectorySource>((r) => (resolveSite = r)));
    try {
      const base = (await server.listen(0, '127.0.0.1')).url;
      site = await openDirectorySource({
        dir: collection,
        baseUrl: base,
        stateDir: join(work, 'serve-state'),
        fsync: false,
      });
      resolveSite(site);
      const mirror = join(work, 'mirror-serve');
      for (const noDumps of [false, true]) {
        const dir = `${mirror}${noDumps ? '-lists' : ''}`;
        const s = await new Destination({ url: base, dir, durability: 'none', noDumps }).sync();
        assert.equal(s.counts.failed + s.counts.refused, 0, JSON.stringify(s.failures));
        assert.equal(s.counts.created, NAMES.length + 1);
        assertSameTree(collection, dir, base);
      }
      // The one exception (docs/file-names.md): `%%` starts the copy's escapes, so a name holding it differs.
      await writeFile(join(collection, '100%%'), 'percent percent\n');
      await site.scan();
      const s = await new Destination({ url: base, dir: mirror, durability: 'none' }).sync();
      assert.equal(s.counts.created, 1);
      const u = new URL(base);
      assert.equal(
        readTree(join(mirror, `${u.hostname}_${u.port}`))
          .get('100%%25%')
          ?.toString(),
        'percent percent\n',
      );
      await rm(join(collection, '100%%'));
      await site.scan();
      const s2 = await new Destination({ url: base, dir: mirror, durability: 'none', delete: true }).sync();
      assert.equal(s2.counts.deleted, 1);
      // A change to an oddly named file comes through the Change Dump / Change List to the same name.
      await writeFile(join(collection, 'C++'), 'C++, second version\n');
      await writeFile(join(collection, '50% off'), 'now 60% off\n');
      await site.scan();
      for (const noDumps of [false, true]) {
        const dir = `${mirror}${noDumps ? '-lists' : ''}`;
        const s = await new Destination({ url: base, dir, durability: 'none', noDumps }).sync();
        assert.equal(s.operation, 'incremental');
        assert.equal(s.counts.updated, 2, JSON.stringify(s));
        assert.equal(s.counts.created, 0, 'no second copy under another name');
        assertSameTree(collection, dir, base);
        const a = await new Destination({ url: base, dir, checksum: true }).audit();
        assert.equal(a.inSync, true, JSON.stringify(a.audit));
      }
    } finally {
      await server.close();
      await site?.close();
    }
  });

  it('equal the collection through publish behind a plain static web server', async () => {
    const out = join(work, 'site');
    const quiet = { stdout: () => undefined, stderr: () => undefined, progress: false };
    // The web server: decodes the request path and serves the file there, as nginx or Apache do.
    const server = await startServer(async (req, res) => {
      const path = new URL(req.url ?? '/', 'http://x').pathname;
      const file = join(out, ...path.split('/').map(decodeURIComponent));
      const st = await stat(file).catch(() => undefined);
      if (st?.isFile() !== true) {
        res.writeHead(404).end();
        return;
      }
      res.writeHead(200, { 'content-length': String(st.size) });
      createReadStream(file).pipe(res);
    });
    try {
      const code = await runPublish({
        dir: collection,
        out,
        baseUrl: `${server.url}/data/`,
        copyResources: true,
        ...quiet,
      });
      assert.equal(code, 0);
      const mirror = join(work, 'mirror-publish');
      const s = await new Destination({ url: `${server.url}/`, dir: mirror, durability: 'none' }).sync();
      assert.equal(s.counts.failed + s.counts.refused, 0, JSON.stringify(s.failures));
      assertSameTree(collection, mirror, server.url, 'data');
    } finally {
      await server.close();
    }
  });

  it('hold names up to the file system limit, and cut longer ones (any durability)', async () => {
    // 240 and 254 bytes of two-byte letters: their temporary files' names must stay within 255 bytes too.
    const names = ['é'.repeat(120), 'é'.repeat(127), 'a'.repeat(250), 'é'.repeat(140), 'x'.repeat(300)];
    const bodies = new Map(names.map((n) => [`/${encodeURIComponent(n)}`, Buffer.from(`${n.length} letters\n`)]));
    const server = await startServer((req, res) => {
      const body = req.url === '/resourcelist.xml' ? list : bodies.get(req.url ?? '');
      if (body === undefined) {
        res.writeHead(404).end();
        return;
      }
      res.writeHead(200, { 'content-length': String(body.length) }).end(body);
    });
    const list = Buffer.from(`<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">
  <rs:md capability="resourcelist" at="2024-01-01T00:00:00Z"/>
${[...bodies].map(([p, b]) => `  <url><loc>${server.url + p}</loc><rs:md hash="${hashAttr(b)}" length="${b.length}"/></url>`).join('\n')}
</urlset>`);
    try {
      for (const durability of ['batch', 'none'] as const) {
        const dir = join(work, `mirror-long-${durability}`);
        const url = `${server.url}/resourcelist.xml`;
        const s = await new Destination({ url, dir, durability }).baseline();
        assert.equal(s.counts.failed, 0, JSON.stringify(s.failures));
        assert.equal(s.counts.created, names.length);
        const u = new URL(server.url);
        const local = [...readTree(join(dir, `${u.hostname}_${u.port}`)).keys()];
        for (const n of names.slice(0, 3)) assert.ok(local.includes(n), `${n.length} letters under its own name`);
        for (const n of local) assert.ok(Buffer.byteLength(n) <= 255, n);
        assert.equal(local.filter((n) => n.includes('%%~')).length, 2, 'the two longer names are cut');
        const a = await new Destination({ url, dir, checksum: true }).audit();
        assert.equal(a.inSync, true, JSON.stringify(a.audit));
        const again = await new Destination({ url, dir, durability }).baseline();
        assert.equal(again.counts.skipped, names.length);
      }
    } finally {
      await server.close();
    }
  });

  it('give query URIs distinct names that map back (and the copy audits in sync)', async () => {
    const bodies = new Map<string, Buffer>();
    for (const p of ['/item?id=1', '/item?id=2', '/item', '/item%3Fid=1', '/search?q=a&b=c', '/search?q=a/b', '/a/?q'])
      bodies.set(p, Buffer.from(`resource ${p}\n`));
    const server = await startServer((req, res) => {
      const url = req.url ?? '/';
      const body = url === '/resourcelist.xml' ? list : bodies.get(url);
      if (body === undefined) {
        res.writeHead(404).end();
        return;
      }
      res.writeHead(200, { 'content-length': String(body.length) }).end(body);
    });
    const esc = (s: string): string => s.replace(/&/g, '&amp;');
    const list = Buffer.from(`<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">
  <rs:md capability="resourcelist" at="2024-01-01T00:00:00Z"/>
${[...bodies].map(([p, b]) => `  <url><loc>${esc(server.url + p)}</loc><rs:md hash="${hashAttr(b)}" length="${b.length}"/></url>`).join('\n')}
</urlset>`);
    try {
      const dir = join(work, 'mirror-query');
      const s = await new Destination({ url: `${server.url}/resourcelist.xml`, dir, durability: 'none' }).baseline();
      assert.equal(s.counts.failed + s.counts.refused, 0, JSON.stringify(s.failures));
      assert.equal(s.counts.created, bodies.size);
      const u = new URL(server.url);
      const files = readTree(join(dir, `${u.hostname}_${u.port}`));
      assert.equal(files.size, bodies.size, [...files.keys()].join(', '));
      assert.equal(files.get('item?id=1')?.toString(), 'resource /item%3Fid=1\n', 'the file named item?id=1');
      const mapper = createPathMapper({ root: dir, sourceUrl: server.url });
      for (const [p, b] of bodies) {
        const local = mapper.toLocalPath(server.url + p);
        assert.equal(mapper.toUri(local), server.url + p);
        assert.equal(files.get(local.slice(join(dir, `${u.hostname}_${u.port}`).length + 1))?.toString(), b.toString());
      }
      const a = await new Destination({ url: `${server.url}/resourcelist.xml`, dir, checksum: true }).audit();
      assert.equal(a.inSync, true, JSON.stringify(a.audit));
    } finally {
      await server.close();
    }
  });
});
