import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { type Server, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import { isResourceSyncError } from '../../src/core/errors.js';
import { Destination } from '../../src/destination/destination.js';
import {
  DumpPackage,
  checkPackageName,
  downloadPackage,
  fetchPackage,
  manifestPathToName,
  startPackage,
} from '../../src/destination/dump.js';
import { HttpClient } from '../../src/http/client.js';
import { StaticSource, buildZip, localPathOf, makeResources, readTree } from './static-source.js';

const AT = '2024-02-01T00:00:00Z';
const FAST_HTTP = { retries: 1, retryBaseDelayMs: 5, maxRetryDelayMs: 20 };

function sorted(m: Map<string, Buffer>): Map<string, Buffer> {
  return new Map([...m.entries()].sort(([a], [b]) => (a < b ? -1 : 1)));
}

describe('dump packages', () => {
  let src: StaticSource;
  const dirs: string[] = [];
  before(async () => {
    src = await StaticSource.start();
  });
  after(async () => {
    await src.close();
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });
  async function newDir(): Promise<string> {
    const d = await mkdtemp(join(tmpdir(), 'rs-dump-'));
    dirs.push(d);
    return d;
  }
  function expected(resources: ReturnType<typeof makeResources>): Map<string, Buffer> {
    return sorted(new Map(resources.map((r) => [localPathOf(src, r.path), r.body])));
  }

  it('refuses unsafe names: absolute, .., backslash, drive letter', () => {
    for (const bad of ['/etc/passwd', '../x', 'a/../../x', 'a\\b', 'C:/x', 'c:x', 'a/./b', '', 'a//b', 'x\0y']) {
      assert.throws(
        () => checkPackageName(bad),
        (e) => isResourceSyncError(e, 'RS_ZIP'),
        bad,
      );
    }
    assert.equal(checkPackageName('resources/a b.txt'), 'resources/a b.txt');
    assert.equal(manifestPathToName('/resources/x'), 'resources/x');
    assert.throws(
      () => manifestPathToName('/../x'),
      (e) => isResourceSyncError(e, 'RS_ZIP'),
    );
    assert.throws(
      () => manifestPathToName(undefined),
      (e) => isResourceSyncError(e, 'RS_ZIP'),
    );
  });

  it('refuses a package with a zip-slip entry as a whole', async () => {
    const dir = await newDir();
    const file = join(dir, 'evil.zip');
    // yazl refuses such names: write a same-length safe name and patch both headers.
    const zip = await buildZip([
      ['manifest.xml', Buffer.from('<urlset/>')],
      ['xx/xx/evil.txt', Buffer.from('pwned')],
    ]);
    const patched = Buffer.from(zip.toString('latin1').replaceAll('xx/xx/evil.txt', '../../evil.txt'), 'latin1');
    await writeFile(file, patched);
    await assert.rejects(DumpPackage.open(file), (e) => isResourceSyncError(e, 'RS_ZIP') && /unsafe/.test(e.message));
  });

  it('reads a small and a 5 MB manifest, every entry; refuses a corrupt one', async () => {
    const dir = await newDir();
    const manifestOf = (n: number): Buffer => {
      let x = `<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">
<rs:md capability="resourcedump-manifest" at="${AT}"/>
`;
      for (let i = 0; i < n; i++)
        x += `<url><loc>http://example.org/res/r${i}.txt</loc><rs:md length="10" path="/resources/r${i}.txt" hash="md5:${'0'.repeat(32)} sha-256:${'0'.repeat(64)}" type="text/plain"/></url>\n`;
      return Buffer.from(`${x}</urlset>\n`);
    };
    for (const [n, bigger] of [
      [50, false],
      [20_000, true],
    ] as const) {
      const manifest = manifestOf(n);
      assert.equal(manifest.length > 4 * 1024 * 1024, bigger);
      const file = join(dir, `m${n}.zip`);
      await writeFile(file, await buildZip([['manifest.xml', manifest]]));
      const pkg = await DumpPackage.open(file, { url: 'http://example.org/p.zip' });
      try {
        const doc = await pkg.openManifest();
        assert.equal(doc.header.kind, 'resource-dump-manifest');
        let count = 0;
        let last = '';
        for await (const e of doc.entries) {
          count++;
          last = e.md?.path ?? '';
        }
        assert.equal(count, n);
        assert.equal(last, `/resources/r${n - 1}.txt`);
      } finally {
        await pkg.close();
      }
    }
    // One byte of the compressed manifest flipped: refused as a corrupt package, naming it.
    const zip = await buildZip([['manifest.xml', manifestOf(50)]]);
    const dataAt = 30 + zip.readUInt16LE(26) + zip.readUInt16LE(28);
    zip[dataAt + 20] = (zip[dataAt + 20] as number) ^ 0xff;
    const file = join(dir, 'corrupt.zip');
    await writeFile(file, zip);
    const pkg = await DumpPackage.open(file, { url: 'http://example.org/c.zip' });
    try {
      await assert.rejects(
        (async () => {
          const doc = await pkg.openManifest();
          for await (const _ of doc.entries);
        })(),
        (e) => isResourceSyncError(e, 'RS_ZIP') || isResourceSyncError(e, 'RS_XML_SYNTAX'),
      );
    } finally {
      await pkg.close();
    }
  });

  it('refuses a truncated ZIP and one without manifest.xml', async () => {
    const dir = await newDir();
    const zip = await buildZip([
      ['manifest.xml', Buffer.from('<urlset/>')],
      ['a.txt', Buffer.from('a')],
    ]);
    await writeFile(join(dir, 't.zip'), zip.subarray(0, zip.length - 30));
    await assert.rejects(DumpPackage.open(join(dir, 't.zip')), (e) => isResourceSyncError(e, 'RS_ZIP'));
    await writeFile(join(dir, 'n.zip'), await buildZip([['a.txt', Buffer.from('a')]]));
    await assert.rejects(
      DumpPackage.open(join(dir, 'n.zip')),
      (e) => isResourceSyncError(e, 'RS_ZIP') && /manifest/.test(e.message),
    );
  });

  it('checks each bitstream CRC-32 even when the manifest gives no hash', async () => {
    const dir = await newDir();
    const zip = await buildZip([
      ['manifest.xml', Buffer.from('<urlset/>')],
      ['a.txt', Buffer.from('original content')],
    ]);
    const bad = Buffer.from(zip);
    const at = bad.indexOf(Buffer.from('original content'));
    bad.write('ORIGINAL', at);
    await writeFile(join(dir, 'c.zip'), bad);
    const pkg = await DumpPackage.open(join(dir, 'c.zip'), { removeOnClose: false });
    try {
      const read = async (): Promise<void> => {
        for await (const _ of await pkg.openBitstream('/a.txt'));
      };
      await assert.rejects(read(), (e) => isResourceSyncError(e, 'RS_ZIP') && /CRC-32/.test(e.message));
      await assert.rejects(
        pkg.readSmallBitstream('/a.txt'),
        (e) => isResourceSyncError(e, 'RS_ZIP') && /CRC-32/.test(e.message),
      );
    } finally {
      await pkg.close();
    }
    await writeFile(join(dir, 'ok.zip'), zip);
    const good = await DumpPackage.open(join(dir, 'ok.zip'));
    const chunks: Uint8Array[] = [];
    for await (const c of await good.openBitstream('/a.txt')) chunks.push(c);
    assert.equal(Buffer.concat(chunks).toString(), 'original content');
    assert.equal(Buffer.from((await good.readSmallBitstream('/a.txt'))!).toString(), 'original content');
    assert.equal(await good.readSmallBitstream('/a.txt', 4), undefined, 'larger than the limit: stream it');
    // A deflated file (yazl compresses files over 512 bytes here).
    await writeFile(
      join(dir, 'big.zip'),
      await buildZip([
        ['manifest.xml', Buffer.from('<urlset/>')],
        ['b.txt', Buffer.alloc(5000, 'b')],
      ]),
    );
    const big = await DumpPackage.open(join(dir, 'big.zip'));
    assert.deepEqual(Buffer.from((await big.readSmallBitstream('/b.txt'))!), Buffer.alloc(5000, 'b'));
    await big.close();
    await good.close();
  });

  it('reads every file of a large package right, in package order, scattered, and streamed', async () => {
    // 2,500 files with long names: a central directory (~400 KB) and data (~5 MB) spanning many read-ahead
    // blocks, with files across block boundaries; random bytes, so yazl stores what it cannot shrink.
    const dir = await newDir();
    const files: [string, Buffer][] = [['manifest.xml', Buffer.from('<urlset/>')]];
    for (let i = 0; i < 2500; i++) {
      const body = Buffer.alloc(1500 + ((i * 37) % 1200));
      for (let k = 0; k < body.length; k++) body[k] = (i * 131 + k * 7 + ((k * k) >> 3)) & 0xff;
      files.push([`resources/${'n'.repeat(100)}/${i}.bin`, body]);
    }
    await writeFile(join(dir, 'many.zip'), await buildZip(files));
    const pkg = await DumpPackage.open(join(dir, 'many.zip'), { removeOnClose: false });
    try {
      assert.equal(pkg.size, files.length);
      const check = async (i: number): Promise<void> => {
        const [name, body] = files[i] as [string, Buffer];
        assert.deepEqual(Buffer.from((await pkg.readSmallBitstream(`/${name}`))!), body, name);
      };
      // In package order, 16 at a time (as an install does).
      for (let i = 1; i < files.length; i += 16)
        await Promise.all(Array.from({ length: Math.min(16, files.length - i) }, (_, k) => check(i + k)));
      // Scattered: far apart, so block reads stop paying and reads go direct.
      for (let n = 0; n < 400; n++) await check(1 + ((n * 1009) % 2500));
      const [name, body] = files[1234] as [string, Buffer];
      const chunks: Uint8Array[] = [];
      for await (const c of await pkg.openBitstream(`/${name}`)) chunks.push(c);
      assert.deepEqual(Buffer.concat(chunks), body);
    } finally {
      await pkg.close();
    }
  });

  it('baselines from a Resource Dump without fetching resources one by one', async () => {
    const dir = await newDir();
    const resources = makeResources(30, 700, 'dump');
    src.publishResourceList(resources, AT, 2);
    await src.publishResourceDump(resources, AT, 3);
    src.publishCapabilities();
    const start = src.log.length;
    const d = new Destination({ url: src.url('/capabilitylist.xml'), dir, http: FAST_HTTP, durability: 'none' });
    const s = await d.baseline();
    assert.equal(s.counts.failed, 0, JSON.stringify(s.failures));
    assert.equal(s.counts.created, 30);
    assert.deepEqual(s.via, ['dump']);
    assert.equal(s.watermarkAfter, AT);
    assert.deepEqual(sorted(readTree(dir)), expected(resources));
    assert.equal(src.log.slice(start).filter((p) => p.startsWith('/res/')).length, 0);
    // Temporary packages are gone.
    assert.deepEqual(readTree(join(dir, '.resourcesync', 'tmp')).size, 0);
  });

  it('downloads the next package while the one before is still arriving or being applied', async () => {
    const dir = await newDir();
    const resources = makeResources(30, 100, 'ahead');
    src.publishResourceList(resources, AT, 2);
    const zips = await src.publishResourceDump(resources, AT, 3);
    // Package 1 answers after 1.5 s: one at a time, package 2 could only be asked for after it.
    src.set('/dump-1.zip', zips[0]!, 'application/zip', 1500);
    src.publishCapabilities();
    const start = src.requests.length;
    const s = await new Destination({ url: src.url('/capabilitylist.xml'), dir, http: FAST_HTTP }).baseline();
    assert.equal(s.counts.failed, 0, JSON.stringify(s.failures));
    assert.equal(s.counts.created, 30);
    assert.deepEqual(s.via, ['dump']);
    const asked = (p: string): number => src.requests.slice(start).find((r) => r.path === p)?.at as number;
    assert.ok(asked('/dump-2.zip') - asked('/dump-1.zip') < 1000, 'package 2 asked for before package 1 arrived');
    assert.ok(asked('/dump-3.zip') > asked('/dump-2.zip'), 'one package ahead, not all at once');
    assert.deepEqual(sorted(readTree(dir)), expected(resources));
    assert.deepEqual(readTree(join(dir, '.resourcesync', 'tmp')).size, 0);
  });

  it('removes a package downloaded ahead when the dump is left for the Resource List', async () => {
    const dir = await newDir();
    const resources = makeResources(30, 100, 'left');
    src.publishResourceList(resources, AT, 2);
    await src.publishResourceDump(resources, AT, 3);
    // Package 1 unusable and its manifest link broken: the whole list is used, package 2 is not needed.
    src.fault('/dump-1.zip', 'truncate', 5);
    src.remove('/dump-1-manifest.xml');
    src.publishCapabilities();
    const s = await new Destination({
      url: src.url('/capabilitylist.xml'),
      dir,
      http: FAST_HTTP,
    }).baseline();
    src.clearFaults();
    assert.equal(s.counts.failed, 0, JSON.stringify(s.failures));
    assert.deepEqual(s.via, ['dump', 'list']);
    assert.deepEqual(sorted(readTree(dir)), expected(resources));
    assert.deepEqual(readTree(join(dir, '.resourcesync', 'tmp')).size, 0);
  });

  it('falls back to the Resource List for a truncated package and a bitstream with a bad hash, only for their resources', async () => {
    const dir = await newDir();
    const resources = makeResources(30, 300, 'fallback');
    src.publishResourceList(resources, AT, 2);
    const zips = await src.publishResourceDump(resources, AT, 3);
    // Package 2 truncated (served whole-looking, but cut).
    src.fault('/dump-2.zip', 'truncate', 5);
    // Package 3: a bitstream whose content does not match the manifest.
    const z3 = zips[2]!;
    const idx = z3.indexOf(Buffer.from('fallback resource 25'));
    assert.ok(idx > 0, 'stored uncompressed');
    const bad = Buffer.from(z3);
    bad.write('FALLBACK', idx);
    // yazl stored it uncompressed with a CRC yauzl does not check: the manifest hash catches it.
    src.set('/dump-3.zip', bad, 'application/zip');

    src.publishCapabilities();
    const start = src.log.length;
    const s = await new Destination({
      url: src.url('/capabilitylist.xml'),
      dir,
      http: FAST_HTTP,
      durability: 'none',
    }).baseline();
    assert.equal(s.counts.failed, 0, JSON.stringify(s.failures));
    assert.deepEqual(s.via, ['dump', 'list']);
    assert.equal(s.complete, true);
    assert.deepEqual(sorted(readTree(dir)), expected(resources));
    const fetched = src.log.slice(start).filter((p) => p.startsWith('/res/'));
    // Package 2 holds r10..r19 (those that arrived whole before the cut were installed as it arrived, then
    // found right by the Resource List's hash: not fetched again); package 3's r25 failed verification.
    const allowed = [...Array.from({ length: 10 }, (_, i) => `/res/r${10 + i}.txt`), '/res/r25.txt'];
    assert.ok(
      fetched.every((p) => allowed.includes(p)),
      fetched.join(' '),
    );
    assert.ok(fetched.includes('/res/r19.txt') && fetched.includes('/res/r25.txt'), fetched.join(' '));
    assert.equal(new Set(fetched).size, fetched.length, 'each at most once');
    assert.ok(
      s.warnings.some((w) => /r25\.txt.*(CRC-32|RS_HASH_MISMATCH)/.test(w)),
      s.warnings.join('\n'),
    );
    src.clearFaults();
  });

  it('uses the Resource List alone with noDumps', async () => {
    const dir = await newDir();
    const resources = makeResources(5, 50, 'nodumps');
    src.publishResourceList(resources, AT, 1);
    await src.publishResourceDump(resources, AT, 1);
    src.publishCapabilities();
    const start = src.log.length;
    const s = await new Destination({
      url: src.url('/capabilitylist.xml'),
      dir,
      http: FAST_HTTP,
      noDumps: true,
      durability: 'none',
    }).baseline();
    assert.deepEqual(s.via, ['list']);
    assert.equal(s.counts.created, 5);
    assert.ok(!src.log.slice(start).some((p) => p.endsWith('.zip')));
  });

  it('reads every file alike from memory and from a file; open(bytes) and fromBytes are in memory', async () => {
    const dir = await newDir();
    const files: [string, Buffer][] = [['manifest.xml', Buffer.from('<urlset/>')]];
    for (let i = 0; i < 200; i++) files.push([`resources/r${i}.txt`, Buffer.alloc(100 + i * 30, `content ${i} `)]);
    files.push(['resources/large.bin', Buffer.alloc(600_000, 'large ')]);
    const zip = await buildZip(files);
    await writeFile(join(dir, 'p.zip'), zip);
    const fromFile = await DumpPackage.open(join(dir, 'p.zip'), { removeOnClose: false });
    const fromMemory = await DumpPackage.open(new Uint8Array(zip.buffer, zip.byteOffset, zip.length));
    const sync = DumpPackage.fromBytes(zip, { url: 'http://example.org/p.zip' });
    try {
      assert.equal(fromFile.inMemory, false);
      assert.equal(fromFile.file, join(dir, 'p.zip'));
      assert.equal(fromMemory.inMemory, true);
      assert.equal(fromMemory.file, undefined);
      assert.deepEqual([...fromMemory.names()], [...fromFile.names()]);
      assert.equal(sync.size, files.length);
      for (const [name, body] of files) {
        for (const pkg of [fromFile, fromMemory, sync]) {
          const streamed: Uint8Array[] = [];
          for await (const c of await pkg.openBitstream(`/${name}`)) streamed.push(c);
          assert.deepEqual(Buffer.concat(streamed), body, name);
          const small = await pkg.readSmallBitstream(`/${name}`);
          if (body.length > 256 * 1024) assert.equal(small, undefined);
          else assert.deepEqual(Buffer.from(small!), body, name);
        }
      }
      assert.equal(fromMemory.has('/resources/r3.txt'), true);
      assert.equal(fromMemory.has('/../x'), false);
      await assert.rejects(
        fromMemory.readSmallBitstream('/nope'),
        (e) => isResourceSyncError(e, 'RS_ZIP') && /nope/.test(e.message),
      );
    } finally {
      await Promise.all([fromFile.close(), fromMemory.close(), sync.close()]);
    }
    assert.ok(existsSync(join(dir, 'p.zip')), 'removeOnClose: false keeps the file');
    assert.throws(
      () => DumpPackage.fromBytes(zip.subarray(0, 100)),
      (e) => isResourceSyncError(e, 'RS_ZIP'),
    );
    // A file that cannot be opened: RS_ZIP; one that is not a ZIP is removed (removeOnClose by default).
    await assert.rejects(DumpPackage.open(join(dir, 'missing.zip')), (e) => isResourceSyncError(e, 'RS_ZIP'));
    await writeFile(join(dir, 'junk.zip'), 'not a zip');
    await assert.rejects(DumpPackage.open(join(dir, 'junk.zip')), (e) => isResourceSyncError(e, 'RS_ZIP'));
    assert.equal(existsSync(join(dir, 'junk.zip')), false);
  });

  describe('fetchPackage', () => {
    const zipFiles: [string, Buffer][] = [['manifest.xml', Buffer.from('<urlset/>')]];
    for (let i = 0; i < 50; i++) zipFiles.push([`resources/r${i}.txt`, Buffer.alloc(1000 + i, `r${i} `)]);
    let zip: Buffer;
    let server: Server;
    let base: string;
    let client: HttpClient;
    let tmpDir: string;
    const stalled: ServerResponse[] = [];
    before(async () => {
      zip = await buildZip(zipFiles);
      tmpDir = await newDir();
      server = createServer((req, res) => {
        const path = req.url ?? '/';
        if (path === '/length.zip') res.writeHead(200, { 'content-length': zip.length }).end(zip);
        else if (path === '/chunked.zip') {
          res.writeHead(200, { 'content-type': 'application/zip' });
          for (let p = 0; p < zip.length; p += 4096) res.write(zip.subarray(p, p + 4096));
          res.end();
        } else if (path === '/gzip.zip') {
          const gz = gzipSync(zip);
          res.writeHead(200, { 'content-encoding': 'gzip', 'content-length': gz.length }).end(gz);
        } else if (path === '/stall.zip') {
          // Half the package, then nothing until the client gives up.
          res.writeHead(200, { 'content-length': zip.length });
          res.write(zip.subarray(0, zip.length >> 1));
          stalled.push(res);
        } else res.writeHead(404).end();
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      client = new HttpClient({ retries: 0 });
    });
    after(async () => {
      for (const r of stalled) r.destroy();
      await client.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    });
    const leftovers = (): string[] => readdirSync(tmpDir);

    async function readAll(pkg: DumpPackage): Promise<void> {
      try {
        for (const [name, body] of zipFiles)
          assert.deepEqual(Buffer.from((await pkg.readSmallBitstream(`/${name}`))!), body);
      } finally {
        await pkg.close();
      }
    }

    it('receives a small package into memory, with or without Content-Length, and opens it from there', async () => {
      for (const path of ['/length.zip', '/chunked.zip', '/gzip.zip']) {
        const got = await fetchPackage(client, base + path, { tmpDir });
        assert.ok(typeof got !== 'string', path);
        assert.deepEqual(Buffer.from(got), zip, path);
        const pkg = await DumpPackage.open(got, { url: base + path });
        assert.equal(pkg.inMemory, true);
        await readAll(pkg);
      }
      // The declared length and hashes are checked in memory too.
      const sha = createHash('sha256').update(zip).digest('hex');
      const ok = await fetchPackage(client, `${base}/length.zip`, {
        tmpDir,
        length: zip.length,
        hashes: { 'sha-256': sha },
      });
      assert.equal(ok.length, zip.length);
      assert.deepEqual(leftovers(), []);
    });

    it('goes to a temporary file past the memory bound (known length at once, unknown by spilling)', async () => {
      for (const path of ['/length.zip', '/chunked.zip', '/gzip.zip']) {
        const got = await fetchPackage(client, base + path, { tmpDir, memoryBytes: 2_000 });
        assert.equal(typeof got, 'string', path);
        assert.deepEqual(await readFile(got as string), zip, path);
        const pkg = await DumpPackage.open(got, { url: base + path });
        assert.equal(pkg.inMemory, false);
        await readAll(pkg);
        assert.deepEqual(leftovers(), [], 'removed on close');
      }
      // memoryBytes 0 and downloadPackage: always a file.
      const file = await downloadPackage(client, `${base}/length.zip`, { tmpDir });
      assert.deepEqual(await readFile(file), zip);
      await rm(file);
      assert.equal(typeof (await fetchPackage(client, `${base}/length.zip`, { tmpDir, memoryBytes: 0 })), 'string');
      await rm(tmpDir, { recursive: true });
    });

    it('refuses a package larger than maxBytes, or unlike its declared length or hash, leaving no file', async () => {
      for (const memoryBytes of [undefined, 2_000]) {
        for (const path of ['/length.zip', '/chunked.zip']) {
          const url = base + path;
          const o = memoryBytes === undefined ? { tmpDir } : { tmpDir, memoryBytes };
          await assert.rejects(fetchPackage(client, url, { ...o, maxBytes: zip.length - 1 }), (e) =>
            isResourceSyncError(e, 'RS_LIMIT'),
          );
          await assert.rejects(fetchPackage(client, url, { ...o, length: zip.length + 1 }), (e) =>
            isResourceSyncError(e, 'RS_LENGTH_MISMATCH'),
          );
          await assert.rejects(fetchPackage(client, url, { ...o, length: zip.length - 1 }), (e) =>
            isResourceSyncError(e, 'RS_LENGTH_MISMATCH'),
          );
          await assert.rejects(fetchPackage(client, url, { ...o, hashes: { md5: '0'.repeat(32) } }), (e) =>
            isResourceSyncError(e, 'RS_HASH_MISMATCH'),
          );
          assert.deepEqual(existsSync(tmpDir) ? leftovers() : [], [], `${path} ${memoryBytes}`);
        }
      }
      // Aborted mid-body, in memory and after spilling to a file.
      for (const memoryBytes of [undefined, 2_000]) {
        const ac = new AbortController();
        const o = memoryBytes === undefined ? { tmpDir } : { tmpDir, memoryBytes };
        const got = fetchPackage(client, `${base}/stall.zip`, { ...o, signal: ac.signal });
        setTimeout(() => ac.abort(), 50);
        await assert.rejects(got, (e) => isResourceSyncError(e, 'RS_ABORTED'));
        assert.deepEqual(existsSync(tmpDir) ? leftovers() : [], [], `aborted ${memoryBytes}`);
      }
      await assert.rejects(fetchPackage(client, `${base}/missing.zip`, { tmpDir }), (e) =>
        isResourceSyncError(e, 'RS_HTTP'),
      );
    });

    it('startPackage: a package received ahead and discarded, arrived or still arriving, leaves no file', async () => {
      const arrived = startPackage(client, `${base}/length.zip`, { tmpDir, memoryBytes: 0 });
      const file = await arrived.received;
      assert.equal(typeof file, 'string');
      assert.ok(existsSync(file as string));
      await arrived.discard();
      assert.equal(existsSync(file as string), false);
      // Still arriving (the body stalls): the download is stopped, its file removed, nothing unhandled.
      const arriving = startPackage(client, `${base}/stall.zip`, { tmpDir, memoryBytes: 0 });
      await new Promise((r) => setTimeout(r, 50));
      await arriving.discard();
      await assert.rejects(arriving.received, (e) => isResourceSyncError(e, 'RS_ABORTED'));
      assert.deepEqual(leftovers(), []);
      // A failure is reported to whoever awaits it, and only then.
      const missing = startPackage(client, `${base}/missing.zip`, { tmpDir });
      await new Promise((r) => setTimeout(r, 50));
      await assert.rejects(missing.received, (e) => isResourceSyncError(e, 'RS_HTTP'));
      await missing.discard();
    });
  });
});
