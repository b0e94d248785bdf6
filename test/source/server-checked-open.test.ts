// The resource fast path of the directory Source (one checked open: O_NOFOLLOW, the descriptor's path from
// /proc/self/fd, its identity against the store, the bytes read from it): a file served once and then changed,
// replaced, removed, turned into a symlink, or reached through a directory turned into a symlink, is served as
// it is now, or refused; never the old bytes, never anything outside the collection.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, rename, rm, symlink, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  type DirectorySource,
  type ResourceRecord,
  type SourceStore,
  openDirectorySource,
} from '../../src/source/index.js';
import { createSourceServer, type SourceServer } from '../../src/source/server.js';
import { SCAN_BATCH_SIZE } from '../../src/source/scan.js';
import { fetchRaw, openFdCount } from './server-helpers.js';

const SECRET = 'TOP-SECRET-OUTSIDE-THE-COLLECTION';
let root = '';
let dir = '';
let site: DirectorySource;
let server: SourceServer;
let port = 0;
const errors: unknown[] = [];

/** Sets a file's mtime to a distinct second, so that a rewrite is seen even within one timestamp tick. */
let tick = 1_700_000_000;
async function touch(path: string): Promise<void> {
  tick += 10;
  await utimes(path, tick, tick);
}

async function put(rel: string, content: string | Buffer): Promise<void> {
  await mkdir(join(dir, rel, '..'), { recursive: true });
  await writeFile(join(dir, rel), content);
  await touch(join(dir, rel));
}

before(async () => {
  root = await mkdtemp(join(tmpdir(), 'rs-checked-open-'));
  dir = join(root, 'collection');
  await mkdir(join(root, 'outside', 'd'), { recursive: true });
  await writeFile(join(root, 'outside', 'secret.txt'), SECRET);
  for (const name of ['same.txt', 'longer.txt', 'renamed.txt', 'gone.txt', 'to-escape.txt', 'to-inside.txt'])
    await put(name, `first ${name}\n`);
  await put('d/file.txt', 'inside d\n');
  await put('e/file.txt', 'inside e\n');
  await put('target.txt', 'the target\n');
  await put('big.bin', Buffer.alloc(100_000, 7));
  await writeFile(join(root, 'outside', 'd', 'file.txt'), SECRET);
  site = await openDirectorySource({ dir, baseUrl: 'http://example.test/', stateDir: join(root, 'state') });
  server = createSourceServer(site, { onError: (e) => errors.push(e) });
  port = (await server.listen(0, '127.0.0.1')).port;
});

after(async () => {
  await server?.close();
  await site?.close();
  await rm(root, { recursive: true, force: true });
});

async function get(path: string): Promise<{ status: number; body: string; etag: string | undefined }> {
  const r = await fetchRaw(port, path);
  return { status: r.status, body: r.body.toString(), etag: r.headers.etag };
}

describe('resource lookup by a checked open', () => {
  it('gives the bytes it read with the SiteFile of a small file, none for a large one', async () => {
    const small = await site.resource('/same.txt');
    assert.equal(small?.data?.toString(), 'first same.txt\n');
    assert.equal(small?.length, small?.data?.length);
    const large = await site.resource('/big.bin');
    assert.equal(large?.length, 100_000);
    assert.equal(large?.data, undefined);
    const r = await fetchRaw(port, '/big.bin');
    assert.equal(r.status, 200);
    assert.ok(r.body.equals(Buffer.alloc(100_000, 7)));
  });

  it('a file rewritten in place with the same length: new bytes, new ETag', async () => {
    const a = await get('/same.txt');
    assert.equal(a.body, 'first same.txt\n');
    await writeFile(join(dir, 'same.txt'), 'FIRST SAME.TXT\n');
    await touch(join(dir, 'same.txt'));
    const b = await get('/same.txt');
    assert.equal(b.status, 200);
    assert.equal(b.body, 'FIRST SAME.TXT\n');
    assert.notEqual(b.etag, a.etag);
  });

  it('a file rewritten with another length: new bytes and Content-Length', async () => {
    const a = await get('/longer.txt');
    await writeFile(join(dir, 'longer.txt'), 'a much longer content than before\n');
    await touch(join(dir, 'longer.txt'));
    const r = await fetchRaw(port, '/longer.txt');
    assert.equal(r.status, 200);
    assert.equal(r.body.toString(), 'a much longer content than before\n');
    assert.equal(r.headers['content-length'], String(r.body.length));
    assert.notEqual(r.headers.etag, a.etag);
  });

  it('a file replaced by a rename: the new file', async () => {
    assert.equal((await get('/renamed.txt')).body, 'first renamed.txt\n');
    await writeFile(join(root, 'new.tmp'), 'replacement\n');
    await touch(join(root, 'new.tmp'));
    await rename(join(root, 'new.tmp'), join(dir, 'renamed.txt'));
    const r = await get('/renamed.txt');
    assert.equal(r.status, 200);
    assert.equal(r.body, 'replacement\n');
  });

  it('a file removed: 404', async () => {
    assert.equal((await get('/gone.txt')).status, 200);
    await rm(join(dir, 'gone.txt'));
    assert.equal((await get('/gone.txt')).status, 404);
  });

  it('a file turned into a symlink leaving the tree: refused', async () => {
    assert.equal((await get('/to-escape.txt')).status, 200);
    await rm(join(dir, 'to-escape.txt'));
    await symlink(join(root, 'outside', 'secret.txt'), join(dir, 'to-escape.txt'));
    const r = await get('/to-escape.txt');
    assert.equal(r.status, 404);
    assert.ok(!r.body.includes(SECRET));
    assert.equal(await site.resource('/to-escape.txt'), undefined);
  });

  it('a directory turned into a symlink leaving the tree: refused', async () => {
    assert.equal((await get('/d/file.txt')).body, 'inside d\n');
    await rm(join(dir, 'd'), { recursive: true });
    await symlink(join(root, 'outside', 'd'), join(dir, 'd'));
    const r = await get('/d/file.txt');
    assert.equal(r.status, 404);
    assert.ok(!r.body.includes(SECRET));
  });

  it('a directory turned into a symlink to another directory of the tree: refused (no alias paths)', async () => {
    assert.equal((await get('/e/file.txt')).body, 'inside e\n');
    await rename(join(dir, 'e'), join(dir, 'e-real'));
    await symlink('e-real', join(dir, 'e'));
    assert.equal((await get('/e/file.txt')).status, 404);
  });

  it('a file turned into a symlink to a file of the tree: served as the realpath checks decide (the target)', async () => {
    assert.equal((await get('/to-inside.txt')).body, 'first to-inside.txt\n');
    await rm(join(dir, 'to-inside.txt'));
    await symlink('target.txt', join(dir, 'to-inside.txt'));
    const r = await get('/to-inside.txt');
    assert.equal(r.status, 200);
    assert.equal(r.body, 'the target\n');
  });

  it('a FIFO where a file was: 404 at once, no blocking open', { skip: process.platform === 'win32' }, async () => {
    await put('fifo.txt', 'a file first\n');
    assert.equal((await get('/fifo.txt')).status, 200);
    await rm(join(dir, 'fifo.txt'));
    execFileSync('mkfifo', [join(dir, 'fifo.txt')]);
    const r = await get('/fifo.txt');
    assert.equal(r.status, 404);
  });

  it('leaks no descriptors, refused or served', async () => {
    const before = openFdCount();
    for (let i = 0; i < 50; i++) {
      await get('/target.txt');
      await get('/to-escape.txt');
      await get('/d/file.txt');
      await get('/nothing-here.txt');
    }
    assert.ok(openFdCount() <= before + 2, `${before} -> ${openFdCount()}`);
    assert.deepEqual(errors, []);
  });
});

describe('resource lookup while files are replaced', () => {
  it('every 200 carries the ETag (sha-256) of the very bytes it sends, with a watcher recording changes', async () => {
    const { createHash } = await import('node:crypto');
    const wroot = await mkdtemp(join(tmpdir(), 'rs-checked-open-live-'));
    const wdir = join(wroot, 'c');
    await mkdir(wdir);
    const names = ['a.txt', 'b.txt', 'c.txt'];
    for (const n of names) await writeFile(join(wdir, n), `${n} v0\n`);
    const live = await openDirectorySource({
      dir: wdir,
      baseUrl: 'http://example.test/',
      stateDir: join(wroot, 'state'),
      watch: true,
      debounceMs: 5,
    });
    const liveServer = createSourceServer(live);
    const livePort = (await liveServer.listen(0, '127.0.0.1')).port;
    try {
      let ok = 0;
      for (let round = 1; round <= 25; round++) {
        // A new version of each file, renamed into place (a new inode: no in-place rewrite under a reader).
        for (const n of names) {
          const tmp = join(wroot, `${n}.tmp`);
          await writeFile(tmp, `${n} v${round} ${'x'.repeat(round * 7)}\n`);
          await rename(tmp, join(wdir, n));
        }
        const replies = await Promise.all(
          Array.from({ length: 9 }, (_, k) => fetchRaw(livePort, `/${names[k % names.length]}`)),
        );
        for (const r of replies) {
          if (r.status !== 200) {
            assert.equal(r.status, 503, `unexpected ${r.status}`); // a length that no longer matches: retry later
            continue;
          }
          const sha = createHash('sha256').update(r.body).digest('hex');
          assert.equal(r.headers.etag, `"${sha}"`, r.body.toString());
          assert.equal(r.headers['content-length'], String(r.body.length));
          ok++;
        }
        if (round % 5 === 0) await live.settled();
      }
      assert.ok(ok > 100, `${ok} responses checked`);
    } finally {
      await liveServer.close();
      await live.close();
      await rm(wroot, { recursive: true, force: true });
    }
  });
});

/** Writes another sha-256 for `rec` straight into the store, bypassing the Source (same file identity). */
async function writeHashBehindSource(store: SourceStore, rec: ResourceRecord, sha256: string): Promise<void> {
  await store.recordChanges(
    [
      {
        uri: rec.uri,
        change: 'updated',
        setName: rec.setName,
        length: rec.length,
        ...(rec.type === undefined ? {} : { type: rec.type }),
        hashes: { 'sha-256': sha256 },
        ...(rec.lastmodMs === undefined ? {} : { lastmodMs: rec.lastmodMs }),
        ...(rec.fileId === undefined ? {} : { fileId: rec.fileId }),
      },
    ],
    { log: false },
  );
}

/**
 * A directory Source over `files` (name -> content) in a temporary directory, served on 127.0.0.1; `fn` gets
 * the Source, the server's port and the directory. Everything is closed and removed afterwards.
 */
async function withServedDir(
  prefix: string,
  files: Record<string, string>,
  fn: (s: DirectorySource, port: number, dir: string) => Promise<void>,
  fill?: (dir: string) => Promise<void>,
): Promise<void> {
  const wroot = await mkdtemp(join(tmpdir(), prefix));
  const wdir = join(wroot, 'c');
  await mkdir(wdir);
  for (const [name, content] of Object.entries(files)) await writeFile(join(wdir, name), content);
  await fill?.(wdir);
  const s = await openDirectorySource({ dir: wdir, baseUrl: 'http://example.test/', stateDir: join(wroot, 'state') });
  const srv = createSourceServer(s);
  try {
    await fn(s, (await srv.listen(0, '127.0.0.1')).port, wdir);
  } finally {
    await srv.close();
    await s.close();
    await rm(wroot, { recursive: true, force: true });
  }
}

describe('record cache wiring', () => {
  it('a scan replaces only the records of what it changed; a write through the Source (recordChanges) clears them all', async () => {
    await withServedDir('rs-checked-open-cache-', { 'a.txt': 'a\n', 'b.txt': 'b\n' }, async (s, p, wdir) => {
      const first = await fetchRaw(p, '/a.txt');
      const rec = await s.store.getResource('a.txt');
      assert.ok(rec !== undefined && first.headers.etag === `"${rec.hashes['sha-256']}"`);
      // A write straight into the store (not through the Source), same file identity, another hash.
      const other = 'f'.repeat(64);
      await writeHashBehindSource(s.store, rec, other);
      // Not seen yet: the record is cached (a write that bypasses the Source is seen after the next one through it).
      assert.equal((await fetchRaw(p, '/a.txt')).headers.etag, first.headers.etag);
      await writeFile(join(wdir, 'b.txt'), 'b changed\n');
      await s.scanPaths(['b.txt']);
      assert.equal((await fetchRaw(p, '/b.txt')).body.toString(), 'b changed\n');
      assert.equal((await fetchRaw(p, '/a.txt')).headers.etag, first.headers.etag, 'a scan of b leaves a cached');
      await s.source.recordChanges([{ uri: 'elsewhere.txt', change: 'created', length: 1, lastmod: 1_000 }]);
      assert.equal((await fetchRaw(p, '/a.txt')).headers.etag, `"${other}"`);
    });
  });

  it('after a scan, the files it found changed are served from the records it wrote; a later rewrite is still detected; a write through the Source clears them', async () => {
    const sha = (text: string) => `"${createHash('sha256').update(text).digest('hex')}"`;
    const files = { 'a.txt': 'a, first\n', 'b.txt': 'b, first\n' };
    await withServedDir('rs-checked-open-written-', files, async (s, p, wdir) => {
      assert.equal((await fetchRaw(p, '/a.txt')).headers.etag, sha('a, first\n'));
      await writeFile(join(wdir, 'a.txt'), 'a, second\n');
      await touch(join(wdir, 'a.txt'));
      await s.scan();
      const rec = await s.store.getResource('a.txt');
      assert.ok(rec !== undefined && rec.hashes['sha-256'] === sha('a, second\n').slice(1, -1));
      // A write straight into the store (not through the Source), same file identity, another hash: not seen,
      // since the record the scan wrote is served from the cache (before any request asked for it).
      const other = 'f'.repeat(64);
      await writeHashBehindSource(s.store, rec, other);
      const served = await fetchRaw(p, '/a.txt');
      assert.equal(served.body.toString(), 'a, second\n');
      assert.equal(served.headers.etag, sha('a, second\n'), 'the record the scan wrote');
      assert.equal(served.headers['last-modified'], new Date(rec.lastmodMs).toUTCString());
      await writeHashBehindSource(s.store, rec, rec.hashes['sha-256']!);
      // Rewritten after the scan, same length: the checked open sees another identity, the file is hashed again.
      await writeFile(join(wdir, 'a.txt'), 'a, third!\n');
      await touch(join(wdir, 'a.txt'));
      const third = await fetchRaw(p, '/a.txt');
      assert.equal(third.body.toString(), 'a, third!\n');
      assert.equal(third.headers.etag, sha('a, third!\n'));
      // A write through the Source (not a scan of ours) clears the cached records: a bypassing write is then seen.
      const now = await s.store.getResource('a.txt');
      assert.ok(now !== undefined && now.hashes['sha-256'] === sha('a, third!\n').slice(1, -1));
      assert.equal((await fetchRaw(p, '/a.txt')).headers.etag, sha('a, third!\n'));
      await writeHashBehindSource(s.store, now, other);
      assert.equal((await fetchRaw(p, '/a.txt')).headers.etag, sha('a, third!\n'), 'still cached');
      await s.source.recordChanges([{ uri: 'elsewhere.txt', change: 'created', length: 1, lastmod: 1_000 }]);
      assert.equal((await fetchRaw(p, '/a.txt')).headers.etag, `"${other}"`);
    });
  });

  it('a scan recording its changes in several batches keeps the records of every batch (not only the last)', async () => {
    // More changes than one batch of the scan.
    const n = SCAN_BATCH_SIZE + 100;
    const name = (i: number) => `f${String(i).padStart(5, '0')}.txt`;
    const fill = async (wdir: string): Promise<void> => {
      for (let i = 0; i < n; i += 100)
        await Promise.all(Array.from({ length: 100 }, (_, k) => writeFile(join(wdir, name(i + k)), 'one\n')));
    };
    await withServedDir(
      'rs-checked-open-batches-',
      {},
      async (s, p, wdir) => {
        for (let i = 0; i < n; i += 100)
          await Promise.all(Array.from({ length: 100 }, (_, k) => writeFile(join(wdir, name(i + k)), 'two\n')));
        const stats = await s.scan();
        assert.equal(stats.updated, n);
        const want = `"${createHash('sha256').update('two\n').digest('hex')}"`;
        // The first file went in the first batch: a bypassing store write of it is not seen (its record is cached).
        const rec = await s.store.getResource(name(0));
        assert.ok(rec !== undefined && `"${rec.hashes['sha-256']}"` === want);
        await writeHashBehindSource(s.store, rec, 'e'.repeat(64));
        const r = await fetchRaw(p, `/${name(0)}`);
        assert.equal(r.body.toString(), 'two\n');
        assert.equal(r.headers.etag, want);
      },
      fill,
    );
  });
});
