// The Source's request handler in process (no socket): routing, discovery, conditional requests, Range, gzip
// negotiation and mounted routes, against a real DirectorySource on a temp dir.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { gunzipSync } from 'node:zlib';
import { isResourceSyncError } from '../../src/core/errors.js';
import { type DirectorySource, openDirectorySource, type SourceSite } from '../../src/source/index.js';
import { createSourceHandler, type SourceHandler } from '../../src/source/http/handler.js';
import { text } from '../../src/source/http/handler.js';

let root = '';
let site: DirectorySource;
let handler: SourceHandler;
const big = Buffer.alloc(200_000);
for (let i = 0; i < big.length; i++) big[i] = (i * 13 + (i >> 8)) & 0xff;

before(async () => {
  root = await mkdtemp(join(tmpdir(), 'rs-handler-'));
  const dir = join(root, 'c');
  await mkdir(join(dir, 'docs'), { recursive: true });
  await writeFile(join(dir, 'hello.txt'), 'Hello, world!\n');
  await writeFile(join(dir, 'docs', 'index.html'), '<html><head></head><body>docs</body></html>\n');
  await writeFile(join(dir, 'big.bin'), big);
  await writeFile(join(dir, '.secret'), 'no');
  site = await openDirectorySource({ dir, baseUrl: 'http://example.test/', stateDir: join(root, 'state') });
  handler = createSourceHandler(site, { directoryIndex: 'index.html' });
});

after(async () => {
  await site?.close();
  await rm(root, { recursive: true, force: true });
});

const bytesOf = async (r: Response) => Buffer.from(await r.arrayBuffer());

describe('routing', () => {
  it('a resource: bytes as stored, ETag from the store, Link to its Capability List, nosniff', async () => {
    const r = await handler.request('/hello.txt');
    assert.equal(r.status, 200);
    assert.equal(await r.text(), 'Hello, world!\n');
    const stored = await site.resource('/hello.txt');
    assert.equal(r.headers.get('etag'), stored!.etag);
    assert.equal(r.headers.get('content-length'), '14');
    assert.equal(r.headers.get('link'), `<${site.capabilityListUrl('/hello.txt')}>; rel="resourcesync"`);
    assert.equal(r.headers.get('x-content-type-options'), 'nosniff');
    assert.match(r.headers.get('cache-control') ?? '', /max-age=60/);
  });

  it('documents, robots.txt, the directory index; 404 for unknown and hidden paths', async () => {
    const sd = await handler.request('/.well-known/resourcesync');
    assert.equal(sd.status, 200);
    assert.match(await sd.text(), /capability="description"/);
    assert.equal(sd.headers.get('cache-control'), 'no-cache');
    assert.equal(sd.headers.get('link'), null, 'documents carry no resourcesync link');
    const robots = await handler.request('/robots.txt');
    assert.match(await robots.text(), /^Sitemap: http:\/\/example\.test\/resourcesync\/default\/resourcelist\.xml$/m);
    const index = await handler.request('/docs/');
    assert.equal(await index.text(), '<html><head></head><body>docs</body></html>\n');
    for (const path of ['/nothing.txt', '/.secret', '/docs/nothing/']) {
      const r = await handler.request(path);
      assert.equal(r.status, 404, path);
      assert.equal(r.headers.get('cache-control'), 'no-store');
      await r.arrayBuffer();
    }
  });

  it('405 with Allow for other methods; 400 for a bad target; HEAD has the headers of GET, no body', async () => {
    const post = await handler.request('/hello.txt', { method: 'POST', body: 'x' });
    assert.equal(post.status, 405);
    assert.equal(post.headers.get('allow'), 'GET, HEAD');
    const bad = await handler.handle({ method: 'GET', target: '/a/%2e%2e/hello.txt', headers: {} });
    assert.equal(bad.status, 400);
    const get = await handler.request('/big.bin');
    const head = await handler.request('/big.bin', { method: 'HEAD' });
    assert.equal(head.status, 200);
    assert.equal((await bytesOf(head)).length, 0);
    for (const h of ['content-length', 'etag', 'last-modified', 'link', 'content-type'])
      assert.equal(head.headers.get(h), get.headers.get(h), h);
    assert.ok((await bytesOf(get)).equals(big));
  });

  it('a Source still opening: 503 with Retry-After; one that failed to start says so', async () => {
    let resolve: (s: SourceSite) => void = () => {};
    const pending = createSourceHandler(new Promise<SourceSite>((r) => (resolve = r)));
    const r = await pending.request('/hello.txt');
    assert.equal(r.status, 503);
    assert.equal(r.headers.get('retry-after'), '2');
    assert.match(await r.text(), /is starting/);
    resolve(site);
    await new Promise((r) => setImmediate(r));
    assert.equal((await pending.request('/hello.txt')).status, 200);
    const failed = createSourceHandler(Promise.reject(new Error('boom')));
    await new Promise((r) => setImmediate(r));
    assert.match(await (await failed.request('/')).text(), /failed to start/);
  });

  it('a Source that throws: 500 with a small body, reported to onError', async () => {
    const errors: unknown[] = [];
    const broken = createSourceHandler(
      { ...site, document: () => Promise.reject(new Error('disk on fire')) } as unknown as SourceSite,
      { onError: (e) => errors.push(e) },
    );
    const r = await broken.request('/hello.txt');
    assert.equal(r.status, 500);
    assert.equal(await r.text(), 'Internal Server Error\n');
    assert.equal(errors.length, 1);
  });
});

describe('conditional requests', () => {
  it('If-None-Match (exact, list, weak, *) -> 304 without body; If-Match mismatch -> 412', async () => {
    const etag = (await handler.request('/hello.txt')).headers.get('etag')!;
    for (const inm of [etag, `"x", ${etag}`, `W/${etag}`, '*']) {
      const r = await handler.request('/hello.txt', { headers: { 'if-none-match': inm } });
      assert.equal(r.status, 304, inm);
      assert.equal(r.headers.get('etag'), etag);
      assert.equal(r.headers.get('content-type'), null);
    }
    assert.equal((await handler.request('/hello.txt', { headers: { 'if-none-match': '"other"' } })).status, 200);
    const failed = await handler.request('/hello.txt', { headers: { 'if-match': '"other"' } });
    assert.equal(failed.status, 412);
    assert.equal(failed.headers.get('etag'), etag);
  });

  it('If-Modified-Since: 304 at or after Last-Modified, 200 before', async () => {
    const lm = (await handler.request('/hello.txt')).headers.get('last-modified')!;
    assert.equal((await handler.request('/hello.txt', { headers: { 'if-modified-since': lm } })).status, 304);
    const older = new Date(Date.parse(lm) - 10_000).toUTCString();
    assert.equal((await handler.request('/hello.txt', { headers: { 'if-modified-since': older } })).status, 200);
  });
});

describe('ranges', () => {
  it('a-b, a-, -n: 206 with Content-Range and the right bytes (small and streamed files)', async () => {
    const cases: [string, number, number][] = [
      ['bytes=0-4', 0, 5],
      ['bytes=100000-', 100_000, big.length],
      ['bytes=-10', big.length - 10, big.length],
      ['bytes=65530-65545', 65_530, 65_546],
    ];
    for (const [range, start, end] of cases) {
      const r = await handler.request('/big.bin', { headers: { range } });
      assert.equal(r.status, 206, range);
      assert.equal(r.headers.get('content-range'), `bytes ${start}-${end - 1}/${big.length}`);
      assert.ok((await bytesOf(r)).equals(big.subarray(start, end)), range);
    }
    const small = await handler.request('/hello.txt', { headers: { range: 'bytes=7-11' } });
    assert.equal(await small.text(), 'world');
  });

  it('416 with bytes */len; If-Range with a stale tag gives the whole file', async () => {
    const r = await handler.request('/big.bin', { headers: { range: `bytes=${big.length}-` } });
    assert.equal(r.status, 416);
    assert.equal(r.headers.get('content-range'), `bytes */${big.length}`);
    await r.arrayBuffer();
    const whole = await handler.request('/big.bin', { headers: { range: 'bytes=0-9', 'if-range': '"stale"' } });
    assert.equal(whole.status, 200);
    assert.equal((await bytesOf(whole)).length, big.length);
    const etag = whole.headers.get('etag')!;
    const part = await handler.request('/big.bin', { headers: { range: 'bytes=0-9', 'if-range': etag } });
    assert.equal(part.status, 206);
    await part.arrayBuffer();
  });
});

describe('gzip negotiation', () => {
  it('documents: gzip when accepted (derived ETag, Vary), identity otherwise and for a Range', async () => {
    const path = '/resourcesync/default/resourcelist.xml';
    const plain = await handler.request(path);
    const plainBody = await bytesOf(plain);
    assert.equal(plain.headers.get('vary'), 'Accept-Encoding');
    assert.equal(plain.headers.get('content-encoding'), null);
    const gz = await handler.request(path, { headers: { 'accept-encoding': 'br, gzip' } });
    assert.equal(gz.headers.get('content-encoding'), 'gzip');
    assert.equal(gz.headers.get('etag'), `${plain.headers.get('etag')!.slice(0, -1)}-gzip"`);
    assert.ok(gunzipSync(await bytesOf(gz)).equals(plainBody));
    // The identity tag also revalidates the gzip representation.
    const revalidated = await handler.request(path, {
      headers: { 'accept-encoding': 'gzip', 'if-none-match': plain.headers.get('etag')! },
    });
    assert.equal(revalidated.status, 304);
    const ranged = await handler.request(path, { headers: { 'accept-encoding': 'gzip', range: 'bytes=0-9' } });
    assert.equal(ranged.status, 206);
    assert.equal(ranged.headers.get('content-encoding'), null);
    assert.ok((await bytesOf(ranged)).equals(plainBody.subarray(0, 10)));
    const refused = await handler.request(path, { headers: { 'accept-encoding': 'gzip;q=0' } });
    assert.equal(refused.headers.get('content-encoding'), null);
    await refused.arrayBuffer();
  });

  it('resources are never gzip-encoded', async () => {
    const r = await handler.request('/hello.txt', { headers: { 'accept-encoding': 'gzip' } });
    assert.equal(r.headers.get('content-encoding'), null);
    assert.equal(
      createHash('sha256')
        .update(await bytesOf(r))
        .digest('hex').length,
      64,
    );
  });
});

describe('mounted routes', () => {
  it('a prefix route takes the paths under it, redirects its bare path, and gets the subpath and query', async () => {
    const seen: string[] = [];
    const unmount = handler.mount('/explorer/', (req) => {
      seen.push(`${req.subpath}?${req.query ?? ''}`);
      return text(req.method, 200, `explorer ${req.subpath}`);
    });
    try {
      assert.equal(await (await handler.request('/explorer/')).text(), 'explorer \n');
      assert.equal(await (await handler.request('/explorer/app.js?v=1')).text(), 'explorer app.js\n');
      const bare = await handler.request('/explorer?x=1', { redirect: 'manual' });
      assert.equal(bare.status, 308);
      assert.equal(bare.headers.get('location'), '/explorer/?x=1');
      await bare.arrayBuffer();
      assert.deepEqual(seen, ['?', 'app.js?v=1']);
      // HEAD on a GET route: the same headers, no body.
      const head = await handler.request('/explorer/app.js', { method: 'HEAD' });
      assert.equal(head.headers.get('content-length'), String('explorer app.js\n'.length));
      assert.equal((await bytesOf(head)).length, 0);
      const post = await handler.request('/explorer/', { method: 'POST' });
      assert.equal(post.status, 405);
      assert.equal(post.headers.get('allow'), 'GET, HEAD');
    } finally {
      unmount();
    }
    assert.equal((await handler.request('/explorer/')).status, 404, 'unmounted');
  });

  it('an exact POST route reads the body; undefined passes the request on; a throwing route is a 500', async () => {
    const unmountPost = handler.mount(
      '/resourcesync/ingest',
      async (req) => {
        let n = 0;
        for await (const chunk of req.body ?? []) n += chunk.length;
        return text(req.method, 202, `got ${n} bytes`);
      },
      { methods: ['POST'] },
    );
    const unmountPass = handler.mount('/hello.txt', () => undefined);
    const errors: unknown[] = [];
    const failing = createSourceHandler(site, { onError: (e) => errors.push(e) });
    failing.mount('/boom', () => {
      throw new Error('route failed');
    });
    try {
      const r = await handler.request('/resourcesync/ingest', { method: 'POST', body: 'x'.repeat(1000) });
      assert.equal(r.status, 202);
      assert.equal(await r.text(), 'got 1000 bytes\n');
      assert.equal((await handler.request('/resourcesync/ingest')).status, 405);
      assert.equal(await (await handler.request('/hello.txt')).text(), 'Hello, world!\n', 'passed on');
      assert.equal((await failing.request('/boom')).status, 500);
      assert.equal(errors.length, 1);
    } finally {
      unmountPost();
      unmountPass();
    }
  });

  it('refuses paths that are not plain, the root, and a path mounted twice', () => {
    for (const bad of ['/', 'relative', '/a/../b', '/a?q', '/a%2Fb']) {
      assert.throws(
        () => handler.mount(bad, () => undefined),
        (e: unknown) => isResourceSyncError(e) && e.code === 'RS_CONFIG',
        bad,
      );
    }
    const off = handler.mount('/twice', () => undefined);
    assert.throws(() => handler.mount('/twice', () => undefined), /already mounted/);
    off();
  });
});
