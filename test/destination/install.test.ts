import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { isResourceSyncError } from '../../src/core/errors.js';
import type { Entry } from '../../src/core/model.js';
import { HttpClient } from '../../src/http/client.js';
import {
  downloadAndInstall,
  downloadResumable,
  installFromStream,
  isInstallTempName,
  mirrorsOf,
  syncInstalledDirectories,
} from '../../src/destination/install.js';
import { startServer, type TestServer } from './http-testserver.js';

const dirs: string[] = [];
const servers: TestServer[] = [];
const client = new HttpClient({ retryBaseDelayMs: 1, bodyIdleTimeoutMs: 300 });
after(async () => {
  await client.destroy();
  for (const s of servers) await s.close();
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});
async function tempDir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'rs-install-'));
  dirs.push(d);
  return d;
}
const md5 = (s: string | Buffer): string => createHash('md5').update(s).digest('hex');
const sha256 = (s: string | Buffer): string => createHash('sha256').update(s).digest('hex');

async function* chunks(...parts: string[]): AsyncGenerator<Uint8Array> {
  for (const p of parts) yield Buffer.from(p);
}

async function onlyFiles(dir: string): Promise<string[]> {
  return (await readdir(dir)).sort();
}

describe('installFromStream', () => {
  it('installs verified content atomically and returns md5 + sha-256', async () => {
    const dir = await tempDir();
    const target = join(dir, 'h', 'a.txt');
    const r = await installFromStream(
      chunks('hello ', 'world'),
      target,
      {
        length: 11,
        hashes: { md5: md5('hello world'), 'sha-256': sha256('hello world') },
      },
      { root: dir },
    );
    assert.equal(await readFile(target, 'utf8'), 'hello world');
    assert.deepEqual(r, { length: 11, hashes: { md5: md5('hello world'), 'sha-256': sha256('hello world') } });
    assert.ok((await syncInstalledDirectories()) >= 1);
  });

  it('leaves the old file untouched and no temporary file on a hash mismatch', async () => {
    const dir = await tempDir();
    const target = join(dir, 'a.txt');
    await writeFile(target, 'old content');
    await assert.rejects(
      installFromStream(
        chunks('new content'),
        target,
        { hashes: { md5: md5('something else') } },
        { url: 'http://h/a.txt' },
      ),
      (e: unknown) => isResourceSyncError(e, 'RS_HASH_MISMATCH') && e.url === 'http://h/a.txt',
    );
    assert.equal(await readFile(target, 'utf8'), 'old content');
    assert.deepEqual(await onlyFiles(dir), ['a.txt']);
  });

  it('checks sha-1 when declared, and the length (too long and too short)', async () => {
    const dir = await tempDir();
    const target = join(dir, 'b');
    await assert.rejects(
      installFromStream(chunks('abc'), target, { hashes: { 'sha-1': '0'.repeat(40) } }),
      (e: unknown) => isResourceSyncError(e, 'RS_HASH_MISMATCH'),
    );
    await assert.rejects(installFromStream(chunks('abcdef'), target, { length: 3 }), (e: unknown) =>
      isResourceSyncError(e, 'RS_LENGTH_MISMATCH'),
    );
    await assert.rejects(installFromStream(chunks('ab'), target, { length: 3 }), (e: unknown) =>
      isResourceSyncError(e, 'RS_LENGTH_MISMATCH'),
    );
    assert.deepEqual(await onlyFiles(dir), []);
  });

  it('removes the temporary file when the source fails midway', async () => {
    const dir = await tempDir();
    async function* failing(): AsyncGenerator<Uint8Array> {
      yield Buffer.from('part');
      throw new Error('network gone');
    }
    await assert.rejects(installFromStream(failing(), join(dir, 'c'), {}));
    assert.deepEqual(await onlyFiles(dir), []);
  });

  it('refuses to write through a symlinked directory under the root', async () => {
    const base = await tempDir();
    const root = join(base, 'root');
    await mkdir(join(base, 'outside'), { recursive: true });
    await mkdir(root);
    await symlink(join(base, 'outside'), join(root, 'h'));
    await assert.rejects(installFromStream(chunks('x'), join(root, 'h', 'evil'), {}, { root }), (e: unknown) =>
      isResourceSyncError(e, 'RS_UNSAFE_PATH'),
    );
    assert.deepEqual(await readdir(join(base, 'outside')), []);
  });

  it('recreates a parent directory removed after it was verified', async () => {
    const root = await tempDir();
    await installFromStream(chunks('one'), join(root, 'h', 'd', 'a'), {}, { root });
    await rm(join(root, 'h', 'd'), { recursive: true });
    await installFromStream(chunks('two'), join(root, 'h', 'd', 'b'), {}, { root });
    assert.equal(await readFile(join(root, 'h', 'd', 'b'), 'utf8'), 'two');
    const big = 'x'.repeat(100_000);
    await rm(join(root, 'h', 'd'), { recursive: true });
    await installFromStream(chunks(big), join(root, 'h', 'd', 'c'), {}, { root });
    assert.equal((await readFile(join(root, 'h', 'd', 'c'), 'utf8')).length, big.length);
  });

  it('names temporary files so audits can skip them', () => {
    assert.ok(isInstallTempName('.a.txt.0123456789ab.tmp'));
    assert.ok(!isInstallTempName('a.txt'));
  });
});

describe('downloadAndInstall', () => {
  it('downloads, verifies and installs; a reset mid-body is retried as a whole', async () => {
    const body = Buffer.alloc(200_000, 120);
    const s = await startServer((req, res, n) => {
      res.setHeader('content-length', String(body.length));
      if (n === 1) {
        res.write(body.subarray(0, 1000));
        setTimeout(() => req.socket.destroy(), 10);
      } else res.end(body);
    });
    servers.push(s);
    const dir = await tempDir();
    const r = await downloadAndInstall(client, `${s.url}/big`, join(dir, 'big'), {
      length: body.length,
      hashes: { 'sha-256': sha256(body) },
    });
    assert.equal(r.length, body.length);
    assert.equal(r.url, `${s.url}/big`);
    assert.equal(r.hashes.md5, md5(body));
    assert.equal((await readFile(join(dir, 'big'))).length, body.length);
    assert.equal(s.log.length, 2);
  });

  it('installs 300 resources through injected 500s, 503s, resets and truncations, concurrently', async () => {
    const bodyOf = (i: number): Buffer => Buffer.from(`resource ${i} `.repeat(50 + (i % 400)));
    const s = await startServer((req, res, n) => {
      const i = Number(req.url?.slice(3));
      const body = bodyOf(i);
      if (n % 7 === 0) {
        res.statusCode = 500;
        res.end();
      } else if (n % 11 === 0) {
        res.statusCode = 503;
        res.setHeader('retry-after', '0');
        res.end();
      } else if (n % 13 === 0) {
        res.setHeader('content-length', String(body.length));
        res.write(body.subarray(0, 10));
        setTimeout(() => req.socket.destroy(), 5);
      } else if (n % 17 === 0) {
        res.setHeader('content-length', String(body.length + 100));
        res.end(body); // promises more than it sends, then the connection is reset
        setTimeout(() => req.socket.destroy(), 5);
      } else res.end(body);
    });
    servers.push(s);
    const dir = await tempDir();
    const c = new HttpClient({ retryBaseDelayMs: 1, connectionsPerHost: 16, bodyIdleTimeoutMs: 2000 });
    try {
      let next = 0;
      await Promise.all(
        Array.from({ length: 16 }, async () => {
          while (next < 300) {
            const i = next++;
            const body = bodyOf(i);
            await downloadAndInstall(
              c,
              `${s.url}/r/${i}`,
              join(dir, `r${i}`),
              {
                length: body.length,
                hashes: { md5: md5(body) },
              },
              { retries: 4 },
            );
          }
        }),
      );
    } finally {
      await c.destroy();
    }
    for (let i = 0; i < 300; i++) assert.ok((await readFile(join(dir, `r${i}`))).equals(bodyOf(i)), `r${i}`);
    assert.equal((await readdir(dir)).length, 300); // no temporary file left
    assert.ok(s.log.length > 300);
  });

  it('tries mirrors first, skips one with a bad hash, and falls back to the loc', async () => {
    const good = 'the real content';
    const s = await startServer((req, res) => {
      if (req.url === '/mirror-bad') res.end('corrupted copy');
      else if (req.url === '/mirror-down') {
        res.statusCode = 404;
        res.end();
      } else res.end(good);
    });
    servers.push(s);
    const dir = await tempDir();
    const target = join(dir, 'r');
    await writeFile(target, 'old');
    const r = await downloadAndInstall(
      client,
      `${s.url}/loc`,
      target,
      { hashes: { md5: md5(good) } },
      {
        mirrors: [`${s.url}/mirror-down`, `${s.url}/mirror-bad`],
      },
    );
    assert.equal(r.url, `${s.url}/loc`);
    assert.equal(await readFile(target, 'utf8'), good);
    assert.deepEqual(
      s.log.map((l) => l.url),
      ['/mirror-down', '/mirror-bad', '/loc'],
    );
  });

  it('leaves the old file when every URL fails, with the error of the loc', async () => {
    const s = await startServer((_req, res) => res.end('wrong'));
    servers.push(s);
    const dir = await tempDir();
    const target = join(dir, 'r');
    await writeFile(target, 'old');
    await assert.rejects(
      downloadAndInstall(client, `${s.url}/loc`, target, { hashes: { md5: md5('right') } }),
      (e: unknown) => isResourceSyncError(e, 'RS_HASH_MISMATCH') && e.url === `${s.url}/loc`,
    );
    assert.equal(await readFile(target, 'utf8'), 'old');
    assert.deepEqual(await onlyFiles(dir), ['r']);
  });

  it('gives up on a resource that stalls forever (timeout, retried, reported)', async () => {
    const s = await startServer((_req, res) => {
      res.setHeader('content-length', '100');
      res.write('x');
    });
    servers.push(s);
    const dir = await tempDir();
    await assert.rejects(
      downloadAndInstall(client, `${s.url}/stall`, join(dir, 's'), {}, { retries: 1 }),
      (e: unknown) => isResourceSyncError(e, 'RS_TIMEOUT'),
    );
    assert.equal(s.log.length, 2);
    assert.deepEqual(await onlyFiles(dir), []);
  });
});

describe('downloadResumable', () => {
  const big = Buffer.alloc(3 * 1024 * 1024);
  for (let i = 0; i < big.length; i++) big[i] = (i * 31) % 251;

  /** Serves `big` with an ETag and Range support; cuts the first `cuts` responses after `cutAt` bytes. */
  async function rangeServer(opts: { cuts: number; cutAt: number; ranges: boolean; etag?: string }) {
    let served = 0;
    const s = await startServer((req, res, n) => {
      let start = 0;
      const m = /^bytes=(\d+)-$/.exec(String(req.headers.range ?? ''));
      const etag = opts.etag ?? '"v1"';
      res.setHeader('etag', etag);
      if (opts.ranges && m !== null && req.headers['if-range'] === etag) {
        start = Number(m[1]);
        res.statusCode = 206;
        res.setHeader('content-range', `bytes ${start}-${big.length - 1}/${big.length}`);
      }
      const body = big.subarray(start);
      res.setHeader('content-length', String(body.length));
      if (n <= opts.cuts) {
        res.write(body.subarray(0, opts.cutAt), () => setTimeout(() => req.socket.destroy(), 10));
        served += opts.cutAt;
      } else {
        res.end(body);
        served += body.length;
      }
    });
    servers.push(s);
    return { s, served: () => served };
  }

  it('resumes with Range/If-Range after a reset instead of starting over', async () => {
    const { s, served } = await rangeServer({ cuts: 2, cutAt: 1024 * 1024, ranges: true });
    const dir = await tempDir();
    const r = await downloadResumable(client, `${s.url}/pkg.zip`, join(dir, 'pkg.zip'), {
      length: big.length,
      hashes: { 'sha-256': sha256(big) },
    });
    assert.equal(r.length, big.length);
    assert.ok((await readFile(join(dir, 'pkg.zip'))).equals(big));
    assert.equal(s.log.length, 3);
    // Each retry asks for the rest after what arrived (a reset may lose a little of what was in flight).
    const starts = s.log.slice(1).map((l) => Number(/^bytes=(\d+)-$/.exec(String(l.headers.range))?.[1]));
    assert.ok(starts[0] !== undefined && starts[0] > 512 * 1024 && starts[0] <= 1024 * 1024, String(starts));
    assert.ok(starts[1] !== undefined && starts[1] > (starts[0] as number), String(starts));
    assert.equal(s.log[1]?.headers['if-range'], '"v1"');
    assert.ok(served() < big.length + 512 * 1024, `served ${served()} bytes: not started over`);
    assert.deepEqual(await readdir(dir), ['pkg.zip']);
  });

  it('starts over when the server ignores the range, or the ETag is weak', async () => {
    for (const opts of [
      { cuts: 1, cutAt: 500_000, ranges: false },
      { cuts: 1, cutAt: 500_000, ranges: true, etag: 'W/"weak"' },
    ]) {
      const { s } = await rangeServer(opts);
      const dir = await tempDir();
      const r = await downloadResumable(client, `${s.url}/pkg.zip`, join(dir, 'pkg.zip'), {
        hashes: { md5: md5(big) },
      });
      assert.equal(r.hashes.md5, md5(big));
      assert.ok((await readFile(join(dir, 'pkg.zip'))).equals(big));
    }
  });

  it('is what downloadAndInstall uses for resources declaring 8 MiB or more', async () => {
    const huge = Buffer.alloc(9 * 1024 * 1024, 3);
    const s = await startServer((req, res, n) => {
      const m = /^bytes=(\d+)-$/.exec(String(req.headers.range ?? ''));
      const start = m === null ? 0 : Number(m[1]);
      res.setHeader('last-modified', 'Mon, 01 Jan 2024 00:00:00 GMT');
      if (start > 0) {
        res.statusCode = 206;
        res.setHeader('content-range', `bytes ${start}-${huge.length - 1}/${huge.length}`);
      }
      res.setHeader('content-length', String(huge.length - start));
      if (n === 1) res.write(huge.subarray(0, 2_000_000), () => setTimeout(() => req.socket.destroy(), 10));
      else res.end(huge.subarray(start));
    });
    servers.push(s);
    const dir = await tempDir();
    const r = await downloadAndInstall(client, `${s.url}/huge`, join(dir, 'huge'), {
      length: huge.length,
      hashes: { md5: md5(huge) },
    });
    assert.equal(r.length, huge.length);
    assert.match(String(s.log[1]?.headers.range), /^bytes=[1-9]\d*-$/);
    assert.equal(s.log[1]?.headers['if-range'], 'Mon, 01 Jan 2024 00:00:00 GMT');
  });

  it('refuses a body over maxBytes, leaving nothing behind', async () => {
    const { s } = await rangeServer({ cuts: 0, cutAt: 0, ranges: true });
    const dir = await tempDir();
    await assert.rejects(
      downloadResumable(client, `${s.url}/pkg.zip`, join(dir, 'pkg.zip'), {}, { maxBytes: 1000 }),
      (e: unknown) => isResourceSyncError(e, 'RS_LIMIT'),
    );
    assert.deepEqual(await readdir(dir), []);
  });
});

describe('mirrorsOf', () => {
  it('orders duplicate links by pri, then document order', () => {
    const entry: Entry = {
      element: 'url',
      loc: 'http://a.org/r',
      links: [
        { rel: 'duplicate', href: 'http://m3.org/r' },
        { rel: 'duplicate', href: 'http://m2.org/r', pri: 2 },
        { rel: 'alternate', href: 'http://x.org/r', pri: 1 },
        { rel: 'duplicate', href: 'http://m1.org/r', pri: 1 },
      ],
    };
    assert.deepEqual(mirrorsOf(entry), ['http://m1.org/r', 'http://m2.org/r', 'http://m3.org/r']);
  });
});
