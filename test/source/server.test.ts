// The Source server over real HTTP (loopback, port 0) against a real DirectorySource on a temp dir.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { Agent, get as httpGet, request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { gunzipSync } from 'node:zlib';
import fc from 'fast-check';
import { isResourceSyncError } from '../../src/core/errors.js';
import { type DirectorySource, openDirectorySource, type SourceSite } from '../../src/source/index.js';
import { openGzipCache } from '../../src/source/http/gzip-cache.js';
import { checkRequestTarget } from '../../src/source/http/request-target.js';
import { createSourceServer, type RequestLogEntry, type SourceServer } from '../../src/source/server.js';
import { fetchRaw, rawExchange, statusOf } from './server-helpers.js';

const SECRET = 'TOP-SECRET-OUTSIDE-THE-COLLECTION';
let root = '';
let dir = '';
let site: DirectorySource;
let server: SourceServer;
let port = 0;
const log: RequestLogEntry[] = [];

const files: Record<string, string | Buffer> = {
  'hello.txt': 'Hello, world!\n',
  'page.html': '<!DOCTYPE html>\n<html><head><title>t</title></head><body><p>page</p></body></html>\n',
  'fragment.html': '<p>no head here</p>\n',
  'a b/c#d.txt': 'space and hash\n',
  '100% done.txt': 'percent\n',
  'what?.txt': 'question mark\n',
  'café/naïve 日本.txt': 'non-ascii\n',
  'café/index.html': '<html><head></head><body>index</body></html>\n',
  'data/records.xml': '<?xml version="1.0"?><records><r/></records>\n',
  'empty.txt': '',
  '%2e%2e/literal.txt': 'a folder literally named %2e%2e\n',
  '.hidden': SECRET,
  '.git/config': SECRET,
  'sub/.env': SECRET,
};
const big = Buffer.alloc(300_000);
for (let i = 0; i < big.length; i++) big[i] = (i * 7 + (i >> 9)) & 0xff;

before(async () => {
  root = await mkdtemp(join(tmpdir(), 'rs-server-'));
  dir = join(root, 'collection');
  for (const [name, content] of Object.entries(files)) {
    await mkdir(join(dir, name, '..'), { recursive: true });
    await writeFile(join(dir, name), content);
  }
  await writeFile(join(dir, 'big.bin'), big);
  await writeFile(join(root, 'secret.txt'), SECRET);
  await mkdir(join(root, 'outside'));
  await writeFile(join(root, 'outside', 'file.txt'), SECRET);
  await symlink(join(root, 'secret.txt'), join(dir, 'escape.txt'));
  await symlink(join(root, 'outside'), join(dir, 'outdir'));
  await symlink('../../secret.txt', join(dir, 'data', 'rel-escape.txt'));
  // Symlinks that stay inside the tree but reach hidden files, or go through a symlinked directory.
  await symlink('.git/config', join(dir, 'alias-to-hidden.txt'));
  await symlink('../sub/.env', join(dir, 'data', 'alias-to-env.txt'));
  await symlink('.git', join(dir, 'gitdir'));
  await symlink('data', join(dir, 'datalink'));
  site = await openDirectorySource({
    dir,
    baseUrl: 'http://example.test/',
    stateDir: join(root, 'state'),
    watch: false,
  });

  server = createSourceServer(site, { onRequest: (e) => log.push(e), closeTimeoutMs: 2_000 });
  port = (await server.listen(0, '127.0.0.1')).port;
});

after(async () => {
  await server?.close();
  await site?.close();
  await rm(root, { recursive: true, force: true });
});

const enc = (name: string) => `/${name.split('/').map(encodeURIComponent).join('/')}`;

describe('resources', () => {
  it('GET: body, Content-Type, Content-Length, ETag from the store, Last-Modified, Link, Cache-Control', async () => {
    const r = await fetchRaw(port, '/hello.txt');
    assert.equal(r.status, 200);
    assert.equal(r.body.toString(), files['hello.txt']);
    assert.match(r.headers['content-type'] ?? '', /^text\/plain/);
    assert.equal(r.headers['content-length'], String(Buffer.byteLength(files['hello.txt'] as string)));
    const stored = await site.resource('/hello.txt');
    assert.ok(stored);
    assert.equal(r.headers.etag, stored.etag);
    assert.match(r.headers.etag ?? '', /^"[^"]+"$/);
    assert.equal(r.headers['last-modified'], stored.lastModified.toUTCString());
    const capList = site.capabilityListUrl('/hello.txt');
    assert.ok(capList);
    assert.equal(r.headers.link, `<${capList}>; rel="resourcesync"`);
    assert.match(r.headers['cache-control'] ?? '', /max-age=60/);
    assert.equal(r.headers['accept-ranges'], 'bytes');
    assert.equal(r.headers['x-content-type-options'], 'nosniff');
  });

  it('HEAD: the same headers, no body', async () => {
    const g = await fetchRaw(port, '/big.bin');
    const h = await fetchRaw(port, '/big.bin', { method: 'HEAD' });
    assert.equal(h.status, 200);
    assert.equal(h.body.length, 0);
    for (const k of ['content-type', 'content-length', 'etag', 'last-modified', 'link', 'cache-control']) {
      assert.equal(h.headers[k], g.headers[k], k);
    }
    assert.equal(g.body.length, big.length);
    assert.ok(g.body.equals(big));
  });

  it('names with spaces, #, ?, %, non-ASCII: served at their percent-encoded URI', async () => {
    for (const name of ['a b/c#d.txt', '100% done.txt', 'what?.txt', 'café/naïve 日本.txt', '%2e%2e/literal.txt']) {
      const r = await fetchRaw(port, enc(name));
      assert.equal(r.status, 200, name);
      assert.equal(r.body.toString(), files[name], name);
    }
    const r = await fetchRaw(port, '/empty.txt');
    assert.equal(r.status, 200);
    assert.equal(r.headers['content-length'], '0');
  });

  it('every <loc> of the Resource List maps back to its file', async () => {
    const sd = await fetchRaw(port, '/.well-known/resourcesync');
    const capLists = [...sd.body.toString().matchAll(/<loc>([^<]+)<\/loc>/g)].map((m) => m[1]!);
    assert.ok(capLists.length >= 1);
    const seen = new Set<string>();
    for (const cl of capLists) {
      const capDoc = await fetchRaw(port, new URL(cl).pathname);
      assert.equal(capDoc.status, 200, cl);
      const rl = /<loc>([^<]+)<\/loc>\s*<rs:md capability="resourcelist"/.exec(capDoc.body.toString())?.[1];
      assert.ok(rl, `resource list in ${cl}`);
      const list = await fetchRaw(port, new URL(rl).pathname);
      for (const m of list.body.toString().matchAll(/<loc>([^<]+)<\/loc>/g)) {
        const loc = m[1]!.replace(/&amp;/g, '&');
        const r = await fetchRaw(port, new URL(loc).pathname);
        assert.equal(r.status, 200, loc);
        seen.add(decodeURIComponent(new URL(loc).pathname.slice(1)));
      }
    }
    for (const name of Object.keys(files)) {
      if (name.split('/').some((s) => s.startsWith('.'))) assert.ok(!seen.has(name), name);
      else assert.ok(seen.has(name), name);
    }
  });
});

describe('conditional requests', () => {
  it('If-None-Match: exact, list, *, weak -> 304 without body; other tag -> 200', async () => {
    const { headers } = await fetchRaw(port, '/hello.txt');
    const etag = headers.etag!;
    for (const inm of [etag, `"nope", ${etag}`, '*', `W/${etag}`]) {
      const r = await fetchRaw(port, '/hello.txt', { headers: { 'If-None-Match': inm } });
      assert.equal(r.status, 304, inm);
      assert.equal(r.body.length, 0);
      assert.equal(r.headers.etag, etag);
    }
    assert.equal((await fetchRaw(port, '/hello.txt', { headers: { 'If-None-Match': '"other"' } })).status, 200);
  });
  it('If-Modified-Since -> 304, older date -> 200; If-Match mismatch -> 412', async () => {
    const { headers } = await fetchRaw(port, '/hello.txt');
    const lm = headers['last-modified']!;
    assert.equal((await fetchRaw(port, '/hello.txt', { headers: { 'If-Modified-Since': lm } })).status, 304);
    const older = new Date(Date.parse(lm) - 60_000).toUTCString();
    assert.equal((await fetchRaw(port, '/hello.txt', { headers: { 'If-Modified-Since': older } })).status, 200);
    assert.equal((await fetchRaw(port, '/hello.txt', { headers: { 'If-Match': '"other"' } })).status, 412);
  });
  it('documents: 304 on their ETag, including the gzip one', async () => {
    const plain = await fetchRaw(port, '/.well-known/resourcesync');
    assert.equal(plain.status, 200);
    const r = await fetchRaw(port, '/.well-known/resourcesync', { headers: { 'If-None-Match': plain.headers.etag! } });
    assert.equal(r.status, 304);
    const gz = await fetchRaw(port, '/.well-known/resourcesync', { headers: { 'Accept-Encoding': 'gzip' } });
    const r2 = await fetchRaw(port, '/.well-known/resourcesync', {
      headers: { 'Accept-Encoding': 'gzip', 'If-None-Match': gz.headers.etag! },
    });
    assert.equal(r2.status, 304);
    assert.equal(r2.headers.etag, gz.headers.etag);
  });
});

describe('ranges', () => {
  const get = (range: string, extra: Record<string, string> = {}) =>
    fetchRaw(port, '/big.bin', { headers: { Range: range, ...extra } });
  it('a-b, a-, -n -> 206 with Content-Range and the right bytes', async () => {
    const cases: [string, number, number][] = [
      ['bytes=0-99', 0, 99],
      ['bytes=1000-', 1000, big.length - 1],
      ['bytes=-500', big.length - 500, big.length - 1],
      ['bytes=299990-400000', 299_990, big.length - 1],
    ];
    for (const [range, s, e] of cases) {
      const r = await get(range);
      assert.equal(r.status, 206, range);
      assert.equal(r.headers['content-range'], `bytes ${s}-${e}/${big.length}`);
      assert.equal(r.headers['content-length'], String(e - s + 1));
      assert.ok(r.body.equals(big.subarray(s, e + 1)), range);
    }
  });
  it('unsatisfiable -> 416 with bytes */len; several ranges -> 200 whole; malformed -> 200', async () => {
    const r = await get(`bytes=${big.length}-`);
    assert.equal(r.status, 416);
    assert.equal(r.headers['content-range'], `bytes */${big.length}`);
    assert.match(r.body.toString(), /Range Not Satisfiable/);
    const m = await get('bytes=0-1,5-6');
    assert.equal(m.status, 200);
    assert.equal(m.body.length, big.length);
    assert.equal((await get('bytes=x-y')).status, 200);
  });
  it('If-Range: current ETag -> 206, stale ETag or date -> 200', async () => {
    const { headers } = await fetchRaw(port, '/big.bin', { method: 'HEAD' });
    assert.equal((await get('bytes=0-9', { 'If-Range': headers.etag! })).status, 206);
    assert.equal((await get('bytes=0-9', { 'If-Range': '"stale"' })).status, 200);
    assert.equal((await get('bytes=0-9', { 'If-Range': headers['last-modified']! })).status, 206);
    assert.equal((await get('bytes=0-9', { 'If-Range': 'Mon, 01 Jan 2001 00:00:00 GMT' })).status, 200);
  });
  it('Range on a document (identity encoding even when gzip is accepted)', async () => {
    const whole = await fetchRaw(port, '/.well-known/resourcesync');
    const r = await fetchRaw(port, '/.well-known/resourcesync', {
      headers: { Range: 'bytes=5-24', 'Accept-Encoding': 'gzip' },
    });
    assert.equal(r.status, 206);
    assert.equal(r.headers['content-encoding'], undefined);
    assert.ok(r.body.equals(whole.body.subarray(5, 25)));
  });
});

describe('documents', () => {
  it('Source Description: XML, no-cache, Vary, gzip decoded equals plain', async () => {
    const plain = await fetchRaw(port, '/.well-known/resourcesync');
    assert.equal(plain.status, 200);
    assert.match(plain.headers['content-type'] ?? '', /xml/);
    assert.equal(plain.headers['cache-control'], 'no-cache');
    assert.equal(plain.headers.vary, 'Accept-Encoding');
    assert.equal(plain.headers.link, undefined);
    assert.match(plain.body.toString(), /capability="description"/);
    const gz = await fetchRaw(port, '/.well-known/resourcesync', { headers: { 'Accept-Encoding': 'gzip, br' } });
    assert.equal(gz.headers['content-encoding'], 'gzip');
    assert.equal(gz.headers['content-length'], undefined);
    assert.equal(gz.headers.vary, 'Accept-Encoding');
    assert.notEqual(gz.headers.etag, plain.headers.etag);
    assert.ok(gunzipSync(gz.body).equals(plain.body));
    const head = await fetchRaw(port, '/.well-known/resourcesync', {
      method: 'HEAD',
      headers: { 'Accept-Encoding': 'gzip' },
    });
    assert.equal(head.body.length, 0);
    assert.equal(head.headers['content-encoding'], 'gzip');
    // A resource is never compressed.
    const res = await fetchRaw(port, '/data/records.xml', { headers: { 'Accept-Encoding': 'gzip' } });
    assert.equal(res.headers['content-encoding'], undefined);
    assert.equal(res.body.toString(), files['data/records.xml']);
  });
  it('gzip cache: compressed once in the background, then served with Content-Length; bounded', async () => {
    const cache = await openGzipCache({ dir: join(root, 'gzip-cache'), maxBytes: 100_000 });
    const s = createSourceServer(site, { gzipCache: cache });
    const p = (await s.listen(0)).port;
    const path = new URL(site.sourceDescriptionUrl).pathname;
    const plain = await fetchRaw(p, path);
    const gz = { 'Accept-Encoding': 'gzip' };
    const first = await fetchRaw(p, path, { headers: gz });
    assert.equal(first.headers['content-length'], undefined, 'first one compressed on the fly');
    await cache.idle();
    const second = await fetchRaw(p, path, { headers: gz });
    assert.equal(second.headers['content-encoding'], 'gzip');
    assert.equal(second.headers['content-length'], String(second.body.length));
    assert.equal(second.headers.etag, first.headers.etag);
    assert.ok(gunzipSync(second.body).equals(plain.body));
    const head = await fetchRaw(p, path, { method: 'HEAD', headers: gz });
    assert.equal(head.headers['content-length'], second.headers['content-length']);
    assert.ok(cache.bytes > 0 && cache.bytes <= 100_000);
    // More documents than fit: the least recently used ones are dropped.
    const small = await openGzipCache({ dir: join(root, 'gzip-small'), maxBytes: 1 });
    const s2 = createSourceServer(site, { gzipCache: small });
    const p2 = (await s2.listen(0)).port;
    await fetchRaw(p2, path, { headers: gz });
    await small.idle();
    assert.equal(small.bytes, 0);
    await s.close();
    await s2.close();
    await cache.close();
    await small.close();
    assert.deepEqual(await readdir(join(root, 'gzip-cache')), []);
  });
  it('a large document (streamed, not read whole): gzip on the fly, from the cache, and Range', async () => {
    const xml = `<?xml version="1.0"?><urlset>${'<url><loc>http://example.test/x</loc></url>'.repeat(30_000)}</urlset>`;
    const bigDoc = join(root, 'big-doc.xml');
    await writeFile(bigDoc, xml);
    const plain = Buffer.from(xml);
    const withBigDoc: SourceSite = {
      baseUrl: site.baseUrl,
      sourceDescriptionUrl: site.sourceDescriptionUrl,
      document: async (p) =>
        p === '/big-doc.xml'
          ? {
              path: bigDoc,
              contentType: 'application/xml',
              length: plain.length,
              etag: '"big-doc-v1"',
              lastModified: new Date(0),
            }
          : site.document(p),
      resource: (p) => site.resource(p),
      capabilityListUrl: (p) => site.capabilityListUrl(p),
      robotsTxt: () => site.robotsTxt(),
      onChange: (l) => site.onChange(l),
      close: async () => {},
    };
    const cache = await openGzipCache({ dir: join(root, 'gzip-big') });
    const s = createSourceServer(withBigDoc, { gzipCache: cache });
    const p = (await s.listen(0)).port;
    const gz = { 'Accept-Encoding': 'gzip' };
    const first = await fetchRaw(p, '/big-doc.xml', { headers: gz });
    assert.equal(first.headers['content-encoding'], 'gzip');
    assert.ok(gunzipSync(first.body).equals(plain));
    await cache.idle();
    const second = await fetchRaw(p, '/big-doc.xml', { headers: gz });
    assert.equal(second.headers['content-length'], String(second.body.length));
    assert.ok(gunzipSync(second.body).equals(plain));
    const whole = await fetchRaw(p, '/big-doc.xml');
    assert.equal(whole.headers['content-length'], String(plain.length));
    assert.ok(whole.body.equals(plain));
    const part = await fetchRaw(p, '/big-doc.xml', { headers: { Range: 'bytes=70000-200000' } });
    assert.equal(part.status, 206);
    assert.ok(part.body.equals(plain.subarray(70_000, 200_001)));
    await s.close();
    await cache.close();
  });
  it('robots.txt names the Resource Lists', async () => {
    const r = await fetchRaw(port, '/robots.txt');
    assert.equal(r.status, 200);
    assert.match(r.headers['content-type'] ?? '', /^text\/plain/);
    assert.match(r.body.toString(), /^Sitemap: http:\/\/example\.test\/\S+$/m);
  });
});

describe('dumps', () => {
  it('a Resource Dump package: application/zip, Range, never gzip-encoded', async () => {
    const cap = await fetchRaw(port, new URL(site.capabilityListUrl('/hello.txt')!).pathname);
    const dumpUrl = /<loc>([^<]+)<\/loc>\s*<rs:md capability="resourcedump"/.exec(cap.body.toString())?.[1];
    assert.ok(dumpUrl, cap.body.toString());
    const dump = await fetchRaw(port, new URL(dumpUrl).pathname);
    assert.equal(dump.status, 200);
    const zipUrl = /<loc>([^<]+\.zip)<\/loc>/.exec(dump.body.toString())?.[1];
    assert.ok(zipUrl, dump.body.toString());
    const zipPath = new URL(zipUrl).pathname;
    const whole = await fetchRaw(port, zipPath, { headers: { 'Accept-Encoding': 'gzip' } });
    assert.equal(whole.status, 200);
    assert.equal(whole.headers['content-type'], 'application/zip');
    assert.equal(whole.headers['content-encoding'], undefined);
    assert.equal(whole.headers['content-length'], String(whole.body.length));
    assert.equal(whole.body.subarray(0, 4).toString('latin1'), 'PK\u0003\u0004');
    // Resume a download: the last 100 bytes, guarded by If-Range.
    const tail = await fetchRaw(port, zipPath, { headers: { Range: 'bytes=-100', 'If-Range': whole.headers.etag! } });
    assert.equal(tail.status, 206);
    assert.ok(tail.body.equals(whole.body.subarray(whole.body.length - 100)));
  });
});

describe('changes', () => {
  it('a changed file gets a new ETag and body; a deleted one 404; documents follow', async () => {
    await writeFile(join(dir, 'changing.txt'), 'version 1\n');
    const v1 = await fetchRaw(port, '/changing.txt');
    assert.equal(v1.status, 200);
    assert.equal(v1.body.toString(), 'version 1\n');
    await writeFile(join(dir, 'changing.txt'), 'version 2, longer\n');
    const v2 = await fetchRaw(port, '/changing.txt', { headers: { 'If-None-Match': v1.headers.etag! } });
    assert.equal(v2.status, 200);
    assert.equal(v2.body.toString(), 'version 2, longer\n');
    assert.notEqual(v2.headers.etag, v1.headers.etag);
    const rl = await fetchRaw(port, new URL(site.sourceDescriptionUrl).pathname);
    assert.equal(rl.status, 200);
    await rm(join(dir, 'changing.txt'));
    assert.equal((await fetchRaw(port, '/changing.txt')).status, 404);
  });
});

describe('errors', () => {
  it('404 with a small text body; 405 with Allow; 400 for a bad target', async () => {
    const nf = await fetchRaw(port, '/nope.txt');
    assert.equal(nf.status, 404);
    assert.match(nf.headers['content-type'] ?? '', /^text\/plain/);
    assert.match(nf.body.toString(), /Not Found/);
    for (const method of ['POST', 'PUT', 'DELETE', 'OPTIONS']) {
      const r = await fetchRaw(port, '/hello.txt', { method });
      assert.equal(r.status, 405, method);
      assert.equal(r.headers.allow, 'GET, HEAD');
    }
    assert.equal((await fetchRaw(port, '/a%zz')).status, 400);
  });
  it('a Source that fails: 500 with a small body, reported to onError', async () => {
    const root2 = await mkdtemp(join(tmpdir(), 'rs-server-fail-'));
    await mkdir(join(root2, 'c'));
    await writeFile(join(root2, 'c', 'x.txt'), 'x');
    const failing = await openDirectorySource({
      dir: join(root2, 'c'),
      baseUrl: 'http://example.test/',
      stateDir: join(root2, 's'),
    });
    const errors: unknown[] = [];
    const s = createSourceServer(failing, { onError: (e) => errors.push(e) });
    const p = (await s.listen(0)).port;
    await failing.close(); // the store is closed under the server's feet
    const r = await fetchRaw(p, '/x.txt');
    assert.equal(r.status, 500);
    assert.equal(r.body.toString(), 'Internal Server Error\n');
    assert.equal(errors.length, 1);
    await s.close();
    await rm(root2, { recursive: true, force: true });
  });
  it('a document replaced between lookup and open (a newer generation) is looked up again', async () => {
    let calls = 0;
    const errors: unknown[] = [];
    // Fault injection around the real Source: the first lookup returns a file that no longer exists.
    const racing: SourceSite = {
      baseUrl: site.baseUrl,
      sourceDescriptionUrl: site.sourceDescriptionUrl,
      document: async (p) => {
        const real = await site.document(p);
        calls++;
        return real && calls === 1 ? { ...real, path: join(root, 'gone-generation.xml') } : real;
      },
      resource: (p) => site.resource(p),
      capabilityListUrl: (p) => site.capabilityListUrl(p),
      robotsTxt: () => site.robotsTxt(),
      onChange: (l) => site.onChange(l),
      close: async () => {},
    };
    const s = createSourceServer(racing, { onError: (e) => errors.push(e) });
    const p = (await s.listen(0)).port;
    const r = await fetchRaw(p, '/.well-known/resourcesync');
    assert.equal(r.status, 200);
    assert.equal(calls, 2);
    assert.deepEqual(errors, []);
    await s.close();
  });
  it('an oversized request line or malformed request: 431 / 400 with Connection: close', async () => {
    const long = await rawExchange(port, `GET /${'a'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`);
    assert.equal(statusOf(long), 431);
    const garbage = await rawExchange(port, 'NOT HTTP AT ALL\r\n\r\n');
    assert.equal(statusOf(garbage), 400);
    assert.match(garbage, /Connection: close/);
  });
  it('a directory is not a resource', async () => {
    assert.equal((await fetchRaw(port, '/data')).status, 404);
    assert.equal((await fetchRaw(port, '/data/')).status, 404);
  });
});

describe('nothing outside the collection is served', () => {
  const attempts = [
    '/../secret.txt',
    '/data/../../secret.txt',
    '/%2e%2e/secret.txt',
    '/%2E%2E/%2e%2e/secret.txt',
    '/.%2e/secret.txt',
    '/data%2f..%2f..%2fsecret.txt',
    '/data/..%2F..%2Fsecret.txt',
    '/..%5csecret.txt',
    '/data\\..\\..\\secret.txt',
    '/%252e%252e/secret.txt',
    '/%252e%252e%252fsecret.txt',
    '/hello.txt%00.html',
    '/escape.txt',
    '/outdir/file.txt',
    '/data/rel-escape.txt',
    '/alias-to-hidden.txt',
    '/data/alias-to-env.txt',
    '/gitdir/config',
    '/datalink/records.xml',
    '/.hidden',
    '/.git/config',
    '/%2egit/config',
    '/sub/.env',
    '/sub/%2Eenv',
    '//secret.txt',
    `/${encodeURIComponent(join('..', 'secret.txt'))}`,
    `/${encodeURIComponent(join(tmpdir(), 'x'))}`,
  ];
  for (const path of attempts) {
    it(`refuses ${path}`, async () => {
      const r = await fetchRaw(port, path);
      assert.ok(r.status === 400 || r.status === 404, `${path}: ${r.status}`);
      assert.ok(!r.body.toString().includes(SECRET), path);
    });
  }
  it('raw request lines with NUL, spaces and absolute paths are refused', async () => {
    for (const target of ['/hello.txt\0', '/../../secret.txt', `${join(root, 'secret.txt')}`, '*', 'secret.txt']) {
      const raw = await rawExchange(port, `GET ${target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      const status = statusOf(raw);
      assert.ok(status === 400 || status === 404, `${JSON.stringify(target)} -> ${raw.slice(0, 60)}`);
      assert.ok(!raw.includes(SECRET));
    }
  });
  it('property: whatever the path, a served file is inside the collection and not hidden', async () => {
    const atoms = [
      '..',
      '.',
      '%2e',
      '%2E',
      '%2f',
      '%2F',
      '%5c',
      '\\',
      '/',
      '%00',
      '%25',
      '%252e',
      'a b',
      'a%20b',
      'c%23d.txt',
      'data',
      'sub',
      '.env',
      '%2eenv',
      '.git',
      'config',
      'hello.txt',
      'escape.txt',
      'outdir',
      'file.txt',
      'gitdir',
      'datalink',
      'records.xml',
      'alias-to-hidden.txt',
      'secret.txt',
      '%2e%2e',
      '',
    ];
    const realRoot = await realpath(dir);
    await fc.assert(
      fc.asyncProperty(fc.array(fc.constantFrom(...atoms), { minLength: 1, maxLength: 6 }), async (parts) => {
        const path = `/${parts.join('/')}`;
        const served = await site.resource(path);
        if (!path.includes(' ')) {
          const r = await fetchRaw(port, path);
          assert.ok(!r.body.includes(SECRET), path);
          if (r.status === 200) assert.ok(served !== undefined && checkRequestTarget(path).ok, path);
        }
        if (served === undefined) return;
        const rel = relative(realRoot, served.path);
        assert.ok(!rel.startsWith('..') && !rel.startsWith('/'), `${path} -> ${served.path}`);
        assert.ok(!rel.split('/').some((seg) => seg.startsWith('.')), `${path} -> ${served.path}`);
      }),
      { numRuns: 400 },
    );
  });
  it('the engine itself refuses them too (site.resource)', async () => {
    for (const path of attempts) {
      assert.equal(await site.resource(path), undefined, path);
    }
  });
});

describe('discovery links (§6.3.3)', () => {
  it('HTML is served as it is, with the Capability List in the Link header: bytes, length and ETag as listed', async () => {
    const r = await fetchRaw(port, '/page.html');
    const capList = site.capabilityListUrl('/page.html')!;
    assert.equal(r.body.toString(), files['page.html']);
    assert.equal(r.headers['content-length'], String(Buffer.byteLength(files['page.html'] as string)));
    assert.equal(r.headers.etag, (await site.resource('/page.html'))!.etag);
    assert.equal(r.headers.link, `<${capList}>; rel="resourcesync"`);
  });
  it('directoryIndex: /dir/ serves /dir/index.html (with the Link header); without it, 404', async () => {
    const indexed = createSourceServer(site, { directoryIndex: 'index.html' });
    const p = (await indexed.listen(0)).port;
    const r = await fetchRaw(p, '/caf%C3%A9/');
    assert.equal(r.status, 200);
    assert.equal(r.body.toString(), files['café/index.html']);
    assert.equal(r.headers.link, `<${site.capabilityListUrl('/caf%C3%A9/index.html')}>; rel="resourcesync"`);
    assert.equal((await fetchRaw(p, '/data/')).status, 404, 'no index.html there');
    assert.equal((await fetchRaw(p, '/.git/')).status, 404);
    assert.equal((await fetchRaw(port, '/caf%C3%A9/')).status, 404);
    await indexed.close();
  });
});

describe('connections', () => {
  it('keeps connections alive across requests', async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const ports = new Set<number>();
    for (let i = 0; i < 3; i++) {
      await new Promise<void>((resolve, reject) => {
        httpGet({ host: '127.0.0.1', port, path: '/hello.txt', agent }, (res) => {
          ports.add(res.socket.localPort!);
          res.resume();
          res.on('end', resolve);
        }).on('error', reject);
      });
    }
    agent.destroy();
    assert.equal(ports.size, 1);
  });
  it('logs one entry per request', async () => {
    const before = log.length;
    await fetchRaw(port, '/hello.txt');
    await fetchRaw(port, '/nope');
    const entries = log.slice(before);
    assert.deepEqual(
      entries.map((e) => [e.method, e.target, e.status, e.aborted]),
      [
        ['GET', '/hello.txt', 200, false],
        ['GET', '/nope', 404, false],
      ],
    );
    assert.ok(entries[0]!.bytes > Buffer.byteLength(files['hello.txt'] as string));
  });
  it('port in use: RS_CONFIG naming the port', async () => {
    const other = createSourceServer(site);
    await assert.rejects(other.listen(port, '127.0.0.1'), (e: unknown) => {
      assert.ok(isResourceSyncError(e, 'RS_CONFIG'));
      assert.match(e.message, new RegExp(`port ${port}`));
      return true;
    });
    await other.close();
  });
  it('a Source still opening is answered with 503 and Retry-After', async () => {
    let resolveSite: (s: DirectorySource) => void = () => {};
    const pending = new Promise<DirectorySource>((r) => {
      resolveSite = r;
    });
    const s = createSourceServer(pending);
    const p = (await s.listen(0)).port;
    const r = await fetchRaw(p, '/hello.txt');
    assert.equal(r.status, 503);
    assert.ok(r.headers['retry-after']);
    resolveSite(site);
    await pending;
    assert.equal((await fetchRaw(p, '/hello.txt')).status, 200);
    await s.close();
  });
  it('a GET with a body, framed or not, is still answered', async () => {
    for (const headers of [{ 'Content-Length': '12' }, {}]) {
      const r = await new Promise<string>((resolve, reject) => {
        const req = httpRequest(
          { host: '127.0.0.1', port, path: '/hello.txt', method: 'GET', agent: false, headers },
          (res) => {
            let body = '';
            res.on('data', (c: Buffer) => {
              body += c.toString();
            });
            res.on('end', () => resolve(`${res.statusCode} ${body}`));
          },
        );
        req.on('error', reject);
        req.end('ignored body');
      });
      assert.equal(r, `200 ${files['hello.txt']}`);
    }
  });
});

describe('mounted routes over HTTP', () => {
  it('a long-lived streamed body ends when the server closes (its signal is aborted), without waiting out the deadline', async () => {
    const s = createSourceServer(site, { closeTimeoutMs: 10_000 });
    s.handler.mount('/events', (req) => ({
      status: 200,
      headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-store' },
      body: (async function* () {
        const signal = req.signal!;
        while (!signal.aborted) {
          yield Buffer.from(': keep-alive\n\n');
          await new Promise<void>((r) => {
            const t = setTimeout(r, 50);
            signal.addEventListener('abort', () => {
              clearTimeout(t);
              r();
            });
          });
        }
      })(),
    }));
    const p = (await s.listen(0)).port;
    const received = await new Promise<string>((resolve, reject) => {
      httpGet({ host: '127.0.0.1', port: p, path: '/events', agent: false }, (res) => {
        let text = '';
        res.on('data', (c: Buffer) => {
          text += c.toString();
          if (text.length >= 40 && text.length < 60) void s.close();
        });
        res.on('end', () => resolve(text));
        res.on('error', reject);
      }).on('error', reject);
    });
    const started = Date.now();
    await s.close();
    assert.ok(Date.now() - started < 2_000, 'closed without waiting for the 10 s deadline');
    assert.match(received, /^(: keep-alive\n\n)+$/);
  });
});
