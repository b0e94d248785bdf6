import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import yazl from 'yazl';
import { isResourceSyncError } from '../../src/core/errors.js';
import { ZIP_STREAM_CHUNK_BYTES, ZipReader, checkEntryName, isPlainSafeName } from '../../src/io/zip-reader.js';

const URL_ = 'http://example.org/p.zip';

interface FileSpec {
  readonly name: string;
  readonly body?: Buffer;
  readonly compress?: boolean;
  /** Added as a stream: yazl writes a data descriptor after the data. */
  readonly stream?: boolean;
  readonly directory?: boolean;
}

async function buildZip(
  files: readonly FileSpec[],
  options: { zip64?: boolean; comment?: string } = {},
): Promise<Buffer> {
  const zip = new yazl.ZipFile();
  const o = { forceZip64Format: options.zip64 === true };
  for (const f of files) {
    if (f.directory === true) zip.addEmptyDirectory(f.name);
    else if (f.stream === true)
      zip.addReadStream(Readable.from([f.body ?? Buffer.alloc(0)]), f.name, { ...o, compress: f.compress ?? true });
    else zip.addBuffer(f.body ?? Buffer.alloc(0), f.name, { ...o, compress: f.compress ?? false });
  }
  zip.end({ forceZip64Format: options.zip64 === true, comment: options.comment ?? '' });
  const chunks: Buffer[] = [];
  for await (const c of zip.outputStream as AsyncIterable<Buffer>) chunks.push(c);
  return Buffer.concat(chunks);
}

/** Central directory records of a (non-ZIP64, comment-less) archive: where each starts, and its fields. */
function central(zip: Buffer): { at: number; name: string; offset: number }[] {
  const eocd = zip.length - 22;
  assert.equal(zip.readUInt32LE(eocd), 0x06054b50);
  const out: { at: number; name: string; offset: number }[] = [];
  let p = zip.readUInt32LE(eocd + 16);
  for (let k = 0; k < zip.readUInt16LE(eocd + 10); k++) {
    const n = zip.readUInt16LE(p + 28);
    out.push({ at: p, name: zip.toString('latin1', p + 46, p + 46 + n), offset: zip.readUInt32LE(p + 42) });
    p += 46 + n + zip.readUInt16LE(p + 30) + zip.readUInt16LE(p + 32);
  }
  return out;
}

function cdOf(zip: Buffer, name: string): number {
  const e = central(zip).find((c) => c.name === name);
  assert.ok(e, name);
  return e.at;
}

function lhOf(zip: Buffer, name: string): number {
  const e = central(zip).find((c) => c.name === name);
  assert.ok(e, name);
  return e.offset;
}

async function collect(it: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  for await (const c of it) chunks.push(c);
  return Buffer.concat(chunks);
}

function isZipError(re?: RegExp): (e: unknown) => boolean {
  return (e) => isResourceSyncError(e, 'RS_ZIP') && (re === undefined || re.test(e.message));
}

describe('ZipReader', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rs-zip-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  let n = 0;
  /** Both ways of opening the same bytes; the file reader is closed by the caller through `close`. */
  async function both(zip: Buffer, options = {}): Promise<{ readers: ZipReader[]; close: () => Promise<void> }> {
    const file = join(dir, `z${n++}.zip`);
    await writeFile(file, zip);
    const readers = [
      ZipReader.fromBuffer(zip, { url: URL_, ...options }),
      await ZipReader.open(file, { url: URL_, ...options }),
    ];
    return { readers, close: async () => void (await Promise.all(readers.map((r) => r.close()))) };
  }
  /** Refused the same way from memory and from a file. */
  async function refusedAtOpen(zip: Buffer, check: (e: unknown) => boolean, options = {}): Promise<void> {
    const file = join(dir, `z${n++}.zip`);
    await writeFile(file, zip);
    assert.throws(() => ZipReader.fromBuffer(zip, { url: URL_, ...options }), check);
    await assert.rejects(ZipReader.open(file, { url: URL_, ...options }), check);
  }

  const texts = {
    'manifest.xml': Buffer.from('<urlset/>'),
    'a/small.txt': Buffer.from('small stored file'),
    'a/deflated.txt': Buffer.alloc(5000, 'deflate me '),
    'a/empty.txt': Buffer.alloc(0),
    'b/random.bin': randomBytes(300_000),
    'b/big-deflated.txt': Buffer.alloc(1_000_000, 'abcdefgh'),
    'ü/ñ.txt': Buffer.from('non-ASCII name'),
  } as const;
  const specs = (stream = false): FileSpec[] => [
    { name: 'a/', directory: true },
    ...Object.entries(texts).map(([name, body]) => ({
      name,
      body,
      compress: name.includes('deflated') || name === 'a/empty.txt',
      stream: stream && name !== 'manifest.xml',
    })),
  ];

  for (const [label, zip64, stream] of [
    ['stored and deflated', false, false],
    ['ZIP64 (forced)', true, false],
    ['data descriptors (streams)', false, true],
    ['ZIP64 and data descriptors', true, true],
  ] as const)
    it(`reads ${label} entries alike from memory and from a file, whole and streamed`, async () => {
      const zip = await buildZip(specs(stream), { zip64 });
      const { readers, close } = await both(zip);
      try {
        for (const r of readers) {
          assert.deepEqual([...r.entries.keys()], Object.keys(texts), 'directories left out, order kept');
          assert.equal(r.entryCount, Object.keys(texts).length + 1);
          for (const [name, body] of Object.entries(texts)) {
            const e = r.get(name);
            assert.ok(e, name);
            assert.equal(e.size, body.length);
            assert.deepEqual(Buffer.from(await r.readSmall(e)), body, `${name} whole`);
            const chunks: Uint8Array[] = [];
            for await (const c of await r.openStream(e)) {
              assert.ok(c.length <= ZIP_STREAM_CHUNK_BYTES);
              chunks.push(c);
            }
            assert.deepEqual(Buffer.concat(chunks), body, `${name} streamed`);
          }
          assert.equal(r.get('a/deflated.txt')?.method, 8);
          assert.equal(r.get('a/small.txt')?.method, 0);
          assert.equal((r.get('a/small.txt')!.flags & 8) !== 0, stream, 'data descriptor');
        }
      } finally {
        await close();
      }
    });

  it('reads a central directory larger than the tail read (a second read) and a comment after the EOCD', async () => {
    const files: FileSpec[] = [{ name: 'manifest.xml', body: Buffer.from('m') }];
    for (let i = 0; i < 3000; i++)
      files.push({ name: `resources/${'x'.repeat(90)}/${i}.txt`, body: Buffer.from(`body ${i}`) });
    // A comment holding an EOCD signature whose comment length does not reach the end: not taken for the EOCD.
    for (const zip64 of [false, true]) {
      const zip = await buildZip(files, { zip64, comment: `PKxx${'c'.repeat(40)}` });
      zip.writeUInt16LE(0x0605, zip.length - 42); // yazl refuses the signature in a comment
      const { readers, close } = await both(zip);
      try {
        for (const r of readers) {
          assert.equal(r.entries.size, 3001);
          const name = `resources/${'x'.repeat(90)}/2999.txt`;
          assert.equal(Buffer.from(await r.readSmall(r.get(name)!)).toString(), 'body 2999');
        }
      } finally {
        await close();
      }
    }
  });

  it('refuses truncated files, non-ZIPs and a central directory outside the file', async () => {
    const zip = await buildZip([
      { name: 'manifest.xml', body: Buffer.from('<urlset/>') },
      { name: 'a.txt', body: Buffer.from('a') },
    ]);
    await refusedAtOpen(zip.subarray(0, zip.length - 30), isZipError(/no end of central directory/));
    await refusedAtOpen(zip.subarray(0, 10), isZipError(/too short/));
    await refusedAtOpen(randomBytes(5000), isZipError());
    // Cut inside the central directory, the EOCD kept: the directory no longer fits.
    const cut = Buffer.concat([zip.subarray(0, zip.length - 22 - 20), zip.subarray(zip.length - 22)]);
    await refusedAtOpen(cut, isZipError(/outside the file/));
    const outside = Buffer.from(zip);
    outside.writeUInt32LE(zip.length, zip.length - 22 + 16);
    await refusedAtOpen(outside, isZipError(/outside the file/));
    const multi = Buffer.from(zip);
    multi.writeUInt16LE(1, zip.length - 22 + 4);
    await refusedAtOpen(multi, isZipError(/multi-disk/));
    const sig = Buffer.from(zip);
    sig.writeUInt32LE(0x12345678, cdOf(zip, 'a.txt'));
    await refusedAtOpen(sig, isZipError(/entry 2: bad signature/));
    const saturated = Buffer.from(zip);
    saturated.writeUInt32LE(0xffffffff, zip.length - 22 + 16);
    await refusedAtOpen(saturated, isZipError(/ZIP64/));
    // A count the directory's size cannot hold.
    const count = Buffer.from(zip);
    count.writeUInt16LE(500, zip.length - 22 + 8);
    count.writeUInt16LE(500, zip.length - 22 + 10);
    await refusedAtOpen(count, isZipError(/cannot hold/));
  });

  it('bounds the number of entries and the size of the central directory (RS_LIMIT)', async () => {
    const zip = await buildZip([{ name: 'a' }, { name: 'b' }, { name: 'c' }]);
    await refusedAtOpen(zip, (e) => isResourceSyncError(e, 'RS_LIMIT') && /3 files/.test(e.message), { maxEntries: 2 });
    await refusedAtOpen(zip, (e) => isResourceSyncError(e, 'RS_LIMIT') && /central directory/.test(e.message), {
      maxCentralDirectoryBytes: 100,
    });
    const { close } = await both(zip, { maxEntries: 3 });
    await close();
  });

  it('refuses every unsafe name, ASCII or not, naming it and the URL', async () => {
    const safe = 'xxxxxxxx/evil.txt';
    for (const bad of [
      '../../x/evil.txt',
      '/xxxxxxx/evil.txt',
      'C:/xxxxxx/evil.txt',
      'xxxxxxxx\\evil.txt',
      'xxx//xxx/evil.txt',
      './xxxxxx/evil.txt',
      'xxxxxxx\0/evil.txt',
      'é/../xxx/evil.txt',
    ]) {
      const name = Buffer.from(bad, 'utf8');
      const zip = await buildZip([
        { name: 'manifest.xml' },
        {
          name: safe.slice(0, name.length) + (name.length > safe.length ? 'y'.repeat(name.length - safe.length) : ''),
          body: Buffer.from('pwned'),
        },
      ]);
      const placeholder = Buffer.from(central(zip)[1]!.name, 'latin1');
      assert.equal(placeholder.length, name.length);
      const patched = Buffer.from(zip);
      for (let at = patched.indexOf(placeholder); at >= 0; at = patched.indexOf(placeholder, at + 1))
        name.copy(patched, at);
      await refusedAtOpen(
        patched,
        (e) =>
          isZipError(/unsafe file name/)(e) &&
          (e as Error).message.includes(JSON.stringify(bad)) &&
          (e as Error).message.includes(URL_),
      );
    }
    // An empty name.
    const zip = await buildZip([{ name: 'm' }, { name: 'a', body: Buffer.from('a') }]);
    const empty = Buffer.from(zip);
    empty.writeUInt16LE(0, cdOf(zip, 'a') + 28);
    await refusedAtOpen(empty, isZipError());
  });

  it('checks names with one regex exactly as the split-based rules say', () => {
    // The rules as checkPackageName first wrote them (a split and a loop), as the oracle.
    const reference = (name: string): boolean => {
      if (name.length === 0 || name.includes('\\') || name.includes('\0') || name.startsWith('/')) return false;
      if (/^[a-zA-Z]:/.test(name)) return false;
      const segments = name.split('/');
      return segments.every((s, i) => s !== '.' && s !== '..' && (s !== '' || i === segments.length - 1));
    };
    const ascii = ['a', 'B', 'z', '.', '/', '\\', ':', '\0', ' ', 'C', '-', '\u007f', '\u0001'];
    for (const extra of [[], ['é', '\u00ff', '\u2028']]) {
      fc.assert(
        fc.property(fc.array(fc.constantFrom(...ascii, ...extra), { minLength: 0, maxLength: 12 }), (chars) => {
          const name = chars.join('');
          const want = reference(name);
          let got = true;
          try {
            assert.equal(checkEntryName(name), name);
          } catch (e) {
            assert.ok(isZipError(/unsafe file name/)(e));
            got = false;
          }
          assert.equal(got, want, JSON.stringify(name));
          // The fast check is exact for ASCII, and sends every other name to checkEntryName.
          if (extra.length === 0) assert.equal(isPlainSafeName(name), want, JSON.stringify(name));
          else if (isPlainSafeName(name)) assert.ok(want && /^[\x01-\x7f]*$/.test(name));
        }),
        { numRuns: 3000 },
      );
    }
  });

  it('refuses duplicate names, encrypted files, stored files with two sizes, overlapping data', async () => {
    const zip = await buildZip([
      { name: 'manifest.xml' },
      { name: 'a.txt', body: Buffer.from('aaa') },
      { name: 'b.txt', body: Buffer.from('bbb') },
    ]);
    const dup = Buffer.from(zip);
    dup.write('a', cdOf(zip, 'b.txt') + 46, 'latin1');
    await refusedAtOpen(dup, isZipError(/"a\.txt" appears twice/));
    const enc = Buffer.from(zip);
    enc.writeUInt16LE(enc.readUInt16LE(cdOf(zip, 'b.txt') + 8) | 1, cdOf(zip, 'b.txt') + 8);
    await refusedAtOpen(enc, isZipError(/encrypted file "b\.txt"/));
    const sizes = Buffer.from(zip);
    sizes.writeUInt32LE(2, cdOf(zip, 'b.txt') + 24);
    await refusedAtOpen(sizes, isZipError(/stored file "b\.txt"/));
    // b.txt pointing at a.txt's local header (the "overlapping files" bomb), in order and out of order.
    const overlap = Buffer.from(zip);
    overlap.writeUInt32LE(lhOf(zip, 'a.txt'), cdOf(zip, 'b.txt') + 42);
    await refusedAtOpen(overlap, isZipError(/overlap/));
    const before = Buffer.from(zip);
    before.writeUInt32LE(lhOf(zip, 'a.txt') + 5, cdOf(zip, 'manifest.xml') + 42);
    await refusedAtOpen(before, isZipError(/overlap/));
    // Data said to run past the central directory's start.
    const long = Buffer.from(zip);
    long.writeUInt32LE(10_000, cdOf(zip, 'b.txt') + 20);
    long.writeUInt32LE(10_000, cdOf(zip, 'b.txt') + 24);
    await refusedAtOpen(long, isZipError(/"b\.txt" lies outside/));
  });

  it('refuses a bad ZIP64 extra field', async () => {
    const zip = await buildZip([{ name: 'manifest.xml', body: Buffer.from('m') }], { zip64: true });
    const eocd = zip.length - 22;
    // The ZIP64 EOCD record holds the directory offset; the directory's one record has the ZIP64 extra field.
    assert.equal(zip.readUInt32LE(eocd - 20), 0x07064b50, 'ZIP64 locator');
    const z64 = Number(zip.readBigUInt64LE(eocd - 20 + 8));
    const cd = Number(zip.readBigUInt64LE(z64 + 48));
    assert.equal(zip.readUInt32LE(cd), 0x02014b50);
    let extra = cd + 46 + zip.readUInt16LE(cd + 28); // yazl puts the timestamp field 0x5455 first
    while (zip.readUInt16LE(extra) !== 0x0001) extra += 4 + zip.readUInt16LE(extra + 2);
    const noExtra = Buffer.from(zip);
    noExtra.writeUInt16LE(0x9999, extra); // no longer 0x0001
    await refusedAtOpen(noExtra, isZipError(/no ZIP64 extra field/));
    const short = Buffer.from(zip);
    short.writeUInt16LE(8, extra + 2); // one value where three are needed
    await refusedAtOpen(short, isZipError(/ZIP64 extra field too short|bad extra field/));
    const badRecord = Buffer.from(zip);
    badRecord.writeUInt32LE(0, z64);
    await refusedAtOpen(badRecord, isZipError(/ZIP64 end of central directory record/));
  });

  it('refuses, when reading, bad local headers, unsupported methods, CRC and size mismatches, and bombs', async () => {
    const stored = Buffer.from('stored content here');
    const deflated = Buffer.alloc(20_000, 'deflated content ');
    const zip = await buildZip([
      { name: 'manifest.xml', body: Buffer.from('m') },
      { name: 's.txt', body: stored },
      { name: 'd.txt', body: deflated, compress: true },
    ]);
    const cases: [string, Buffer, string, RegExp][] = [];
    const sig = Buffer.from(zip);
    sig.writeUInt32LE(0, lhOf(zip, 's.txt'));
    cases.push(['local signature', sig, 's.txt', /bad local header signature for "s\.txt"/]);
    const far = Buffer.from(zip);
    far.writeUInt16LE(60_000, lhOf(zip, 'd.txt') + 28); // local extra length: data past the directory
    cases.push(['local extra length', far, 'd.txt', /"d\.txt" lies outside/]);
    const method = Buffer.from(zip);
    method.writeUInt16LE(12, cdOf(zip, 'd.txt') + 10);
    cases.push(['bzip2', method, 'd.txt', /unsupported compression method 12 for "d\.txt"/]);
    const data = Buffer.from(zip);
    data.write('S', data.indexOf(stored));
    cases.push(['stored data', data, 's.txt', /CRC-32 mismatch for "s\.txt"/]);
    const crc = Buffer.from(zip);
    crc.writeUInt32LE((crc.readUInt32LE(cdOf(zip, 'd.txt') + 16) ^ 1) >>> 0, cdOf(zip, 'd.txt') + 16);
    cases.push(['deflated CRC', crc, 'd.txt', /CRC-32 mismatch for "d\.txt"/]);
    const smaller = Buffer.from(zip);
    smaller.writeUInt32LE(19_999, cdOf(zip, 'd.txt') + 24);
    cases.push(['declared smaller', smaller, 'd.txt', /corrupt data for "d\.txt"/]);
    const larger = Buffer.from(zip);
    larger.writeUInt32LE(20_001, cdOf(zip, 'd.txt') + 24);
    cases.push(['declared larger', larger, 'd.txt', /corrupt data for "d\.txt"/]);
    const inflate = Buffer.from(zip);
    const dAt = lhOf(zip, 'd.txt');
    const dData = dAt + 30 + inflate.readUInt16LE(dAt + 26) + inflate.readUInt16LE(dAt + 28);
    inflate.fill(0xff, dData, dData + 8);
    cases.push(['deflate stream', inflate, 'd.txt', /corrupt data for "d\.txt"|CRC-32/]);
    for (const [label, bytes, name, re] of cases) {
      const { readers, close } = await both(bytes);
      try {
        for (const r of readers) {
          const check = (e: unknown): boolean => isZipError(re)(e) && (e as Error).message.includes(URL_);
          const e = r.get(name)!;
          await assert.rejects(r.readSmall(e), check, `${label}: readSmall ${r.inMemory ? 'memory' : 'file'}`);
          // Refused when opened (local header) or while read (data): either way, the same error.
          await assert.rejects(async () => collect(await r.openStream(e)), check, `${label}: stream`);
        }
      } finally {
        await close();
      }
    }
  });

  it('does not let a bomb expand past its declared size', async () => {
    // 64 MiB of zeros deflated (~64 KB), declared as 1,000 bytes.
    const body = Buffer.alloc(64 * 1024 * 1024);
    const zip = await buildZip([{ name: 'manifest.xml' }, { name: 'bomb', body, compress: true }]);
    const bomb = Buffer.from(zip);
    bomb.writeUInt32LE(1000, cdOf(zip, 'bomb') + 24);
    const { readers, close } = await both(bomb);
    try {
      for (const r of readers) {
        const before = process.memoryUsage().arrayBuffers;
        await assert.rejects(r.readSmall(r.get('bomb')!), isZipError(/"bomb"/));
        let seen = 0;
        await assert.rejects(
          (async () => {
            for await (const c of await r.openStream(r.get('bomb')!)) seen += c.length;
          })(),
          isZipError(/more than the 1000 bytes/),
        );
        assert.equal(seen, 0, 'the first inflated chunk is already too large: nothing handed out');
        assert.ok(process.memoryUsage().arrayBuffers - before < 32 * 1024 * 1024);
      }
    } finally {
      await close();
    }
  });

  it('stops a stream early without error, and reads after that', async () => {
    const zip = await buildZip([
      { name: 'big', body: Buffer.alloc(2_000_000, 'x'), compress: true },
      { name: 'raw', body: randomBytes(500_000) },
    ]);
    const { readers, close } = await both(zip);
    try {
      for (const r of readers) {
        for (const name of ['big', 'raw']) {
          for await (const c of await r.openStream(r.get(name)!)) {
            assert.ok(c.length > 0);
            break;
          }
        }
        assert.equal((await collect(await r.openStream(r.get('big')!))).length, 2_000_000);
      }
    } finally {
      await close();
    }
  });
});
