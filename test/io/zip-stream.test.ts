import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { describe, it } from 'node:test';
import yazl from 'yazl';
import { ZipReader } from '../../src/io/zip-reader.js';
import { type LocalEntry, LocalEntryParser } from '../../src/io/zip-stream.js';
import { storedZipBytes } from '../../src/source/zip.js';
import { buildZip, repoRoot } from '../destination/static-source.js';

const LIMITS = { maxEntryBytes: 256 * 1024, maxFirstEntryBytes: 1024 * 1024, maxQueuedBytes: 8 * 1024 * 1024 };

/** Pushes `zip` in chunks of pseudo-random sizes (1 to `most` bytes), then ends, and collects what comes out. */
async function parse(
  zip: Buffer,
  most = 700,
  limits = LIMITS,
): Promise<{ entries: LocalEntry[]; stopped: string | undefined }> {
  const parser = new LocalEntryParser(limits);
  let seed = 7;
  for (let p = 0; p < zip.length; ) {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    const n = 1 + (seed % most);
    parser.push(zip.subarray(p, p + n));
    p += n;
  }
  parser.end();
  const entries: LocalEntry[] = [];
  for await (const e of parser) entries.push(e);
  return { entries, stopped: parser.stopped };
}

function files(n: number): [string, Buffer][] {
  const out: [string, Buffer][] = [['manifest.xml', Buffer.from(`<urlset>${'<url/>'.repeat(n)}</urlset>`)]];
  for (let i = 0; i < n; i++) {
    // Some compressible (yazl deflates those over 512 bytes), some random-ish (stored).
    const body =
      i % 3 === 0
        ? Buffer.alloc(600 + i * 13, `text ${i} `)
        : Buffer.from(Array.from({ length: 100 + i * 7 }, (_, k) => (i * 131 + k * 7 + ((k * k) >> 3)) & 0xff));
    out.push([`resources/r${i}.bin`, body]);
  }
  return out;
}

describe('LocalEntryParser', () => {
  it('hands out every file of a yazl package, stored and deflated, whatever the chunking, as the central directory says', async () => {
    const list = files(60);
    const zip = await buildZip(list);
    for (const most of [1, 29, 700, 70_000]) {
      const { entries, stopped } = await parse(zip, most);
      assert.equal(stopped, undefined, `chunks up to ${most}`);
      assert.deepEqual(
        entries.map((e) => e.name),
        list.map(([n]) => n),
      );
      for (let i = 0; i < list.length; i++) assert.deepEqual(Buffer.from(entries[i]!.data), list[i]![1]);
    }
    // Offsets, CRC-32 and sizes agree with the central directory.
    const reader = ZipReader.fromBuffer(zip);
    for (const e of (await parse(zip)).entries) {
      const c = reader.get(e.name)!;
      assert.deepEqual([e.offset, e.crc32, e.size], [c.localHeaderOffset, c.crc32, c.size], e.name);
    }
  });

  it("reads our Source's own packages (stored, sizes in the local headers)", async () => {
    const list = files(40);
    const chunks: Uint8Array[] = [];
    for await (const c of storedZipBytes(list.map(([name, data]) => ({ name, mtime: new Date(0), content: { data } }))))
      chunks.push(c);
    const { entries, stopped } = await parse(Buffer.concat(chunks), 5000);
    assert.equal(stopped, undefined);
    assert.equal(entries.length, list.length);
    assert.deepEqual(Buffer.from(entries[39]!.data), list[39]![1]);
  });

  it('reads a package written by the reference implementation (resync-build: Python zipfile, deflated) in its manifest order', async () => {
    const zip = readFileSync(join(repoRoot(), 'test', 'fixtures', 'resync', 'dump.zip00000.zip'));
    const { entries, stopped } = await parse(zip, 300);
    assert.equal(stopped, undefined);
    assert.equal(entries[0]?.name, 'manifest.xml');
    const manifest = Buffer.from(entries[0]!.data).toString('utf8');
    const paths = [...manifest.matchAll(/path="([^"]+)"/g)].map((m) => m[1]);
    assert.equal(paths.length, 12);
    assert.deepEqual(
      entries.slice(1).map((e) => e.name),
      paths,
      'the files arrive in the order of the manifest',
    );
    for (const e of entries.slice(1)) {
      const n = Number(/r(\d+)\.txt/.exec(e.name)?.[1]);
      assert.equal(Buffer.from(e.data).toString(), `resource ${n}\n`.repeat(20 * n), e.name);
    }
    const reader = ZipReader.fromBuffer(zip);
    for (const e of entries) {
      const c = reader.get(e.name)!;
      assert.deepEqual([e.offset, e.crc32, e.size], [c.localHeaderOffset, c.crc32, c.size], e.name);
    }
  });

  it('stops at a file whose sizes follow its data (a data descriptor), having handed out those before', async () => {
    const zip = new yazl.ZipFile();
    zip.addBuffer(Buffer.from('<urlset/>'), 'manifest.xml', { compress: false });
    zip.addBuffer(Buffer.from('first'), 'a.txt', { compress: false });
    zip.addReadStream(Readable.from([Buffer.from('streamed')]), 'b.txt', { compress: false });
    zip.addBuffer(Buffer.from('after'), 'c.txt', { compress: false });
    zip.end();
    const parts: Buffer[] = [];
    for await (const c of zip.outputStream as AsyncIterable<Buffer>) parts.push(c);
    const { entries, stopped } = await parse(Buffer.concat(parts));
    assert.deepEqual(
      entries.map((e) => e.name),
      ['manifest.xml', 'a.txt'],
    );
    assert.match(stopped ?? '', /data descriptor/);
  });

  it('stops at a file that fails its CRC-32, an unsafe name, a file over the bound, a cut archive', async () => {
    const list: [string, Buffer][] = [
      ['manifest.xml', Buffer.from('<urlset/>')],
      ['a.txt', Buffer.from('alpha alpha')],
      ['b.txt', Buffer.from('bravo bravo')],
    ];
    const zip = await buildZip(list);
    const bad = Buffer.from(zip);
    bad[bad.indexOf('bravo bravo') + 1] = 0x58;
    let r = await parse(bad);
    assert.deepEqual(
      r.entries.map((e) => e.name),
      ['manifest.xml', 'a.txt'],
    );
    assert.match(r.stopped ?? '', /"b\.txt": CRC-32 mismatch/);

    // yazl refuses to write such a name: written as `xx/evil.txt`, then renamed in place.
    const evil = await buildZip([...list.slice(0, 2), ['xx/evil.txt', Buffer.from('x')]]);
    evil.write('..', evil.indexOf('xx/evil.txt'), 'latin1');
    r = await parse(evil);
    assert.equal(r.entries.length, 2);
    assert.match(r.stopped ?? '', /unsafe file name/);

    r = await parse(await buildZip([...list, ['big.bin', Buffer.alloc(300 * 1024, 1)]]));
    assert.equal(r.entries.length, 3);
    assert.match(r.stopped ?? '', /larger than 262144 bytes/);

    r = await parse(zip.subarray(0, zip.indexOf('bravo bravo') + 3));
    assert.equal(r.entries.length, 2);
    assert.match(r.stopped ?? '', /ends inside a file/);

    // The first file (a manifest) may be larger than the others.
    r = await parse(await buildZip([['manifest.xml', Buffer.alloc(500 * 1024, 0x20)], ...list.slice(1)]));
    assert.equal(r.stopped, undefined);
    assert.equal(r.entries.length, 3);
  });

  it('stops, dropping what it held, when more arrives than the consumer takes (memory bound)', async () => {
    const zip = await buildZip(files(60));
    const { entries, stopped } = await parse(zip, 700, { ...LIMITS, maxQueuedBytes: 4000 });
    assert.equal(entries.length, 0);
    assert.match(stopped ?? '', /memory bound/);
  });

  it('hands files out while the archive is still arriving, and ends the iteration when told why', async () => {
    const zip = await buildZip(files(10));
    const parser = new LocalEntryParser(LIMITS);
    const it = parser[Symbol.asyncIterator]();
    const cut = Math.floor(zip.length / 2);
    parser.push(zip.subarray(0, cut));
    const first = await it.next();
    assert.equal(first.value?.name, 'manifest.xml', 'the first file before the archive ended');
    parser.end('the download failed: reset');
    const rest: string[] = [];
    for (let r = await it.next(); r.done !== true; r = await it.next()) rest.push(r.value.name);
    assert.ok(rest.length < 10, `only the files that arrived whole (${rest.length})`);
    assert.equal(parser.stopped, 'the download failed: reset');
  });
});
