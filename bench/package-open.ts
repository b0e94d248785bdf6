/**
 * Opening a dump package and reading its small bitstreams: yauzl (the way `DumpPackage` opened packages
 * before `io/zip-reader.ts`) against our reader, from a file and from memory.
 *
 *   node --import tsx bench/package-open.ts [--files 1000] [--size 2048] [--runs 15] [--stored]
 *
 * The package is what a Change Dump of 1,000 changes of 2 KB looks like: manifest.xml + 1,000 bitstreams,
 * deflated (`--stored`: stored, as our own Source writes them). Prints the median (and min-max) of --runs
 * runs, after warm-up runs, of:
 * - open: the central directory read and every entry made; yauzl through the read-ahead reader the old
 *   `DumpPackage` used (copied here), plain `yauzl.open`, and ours from a file and from memory;
 * - read: all bitstreams read whole and checked (`readSmall`: one read through the block cache, or a slice,
 *   and inflateRawSync), 16 at a time as an install does; and yauzl's stream per file, for reference;
 * - download over loopback and open: into a temporary file (the old way) against into memory;
 * - CRC-32 of the package's bytes: zlib.crc32 against the table fallback.
 * Data in a temp dir, deleted.
 */
import { randomBytes } from 'node:crypto';
import { close as fsClose, read as fsRead, fstat, open } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import zlib from 'node:zlib';
import yauzl from 'yauzl';
import yazl from 'yazl';
import { DumpPackage, downloadPackage, fetchPackage } from '../src/destination/dump.js';
import { HttpClient } from '../src/http/client.js';
import { crc32Table } from '../src/io/crc32.js';
import { ZipReader } from '../src/io/zip-reader.js';

const args = process.argv.slice(2);
const opt = (name: string, dflt: number): number => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : dflt;
};
const files = opt('files', 1000);
const size = opt('size', 2048);
const runs = opt('runs', 15);
const stored = args.includes('--stored');

interface Measured {
  readonly median: number;
  readonly min: number;
  readonly max: number;
  /** The very first call (cold: before the JIT warms up, as for the one package of a sync run). */
  readonly first: number;
}

/** Median, min and max of a measure run `runs` times after 3 warm-ups, and the first call, in ms. */
async function measure(fn: () => Promise<unknown> | unknown): Promise<Measured> {
  let t = performance.now();
  await fn();
  const first = performance.now() - t;
  for (let i = 0; i < 2; i++) await fn();
  const xs: number[] = [];
  for (let i = 0; i < runs; i++) {
    t = performance.now();
    await fn();
    xs.push(performance.now() - t);
  }
  xs.sort((a, b) => a - b);
  return {
    median: xs[Math.floor(xs.length / 2)] as number,
    min: xs[0] as number,
    max: xs[xs.length - 1] as number,
    first,
  };
}

const fmt = (r: Measured): string =>
  `${r.median.toFixed(3).padStart(8)} ms  (${r.min.toFixed(3)}-${r.max.toFixed(3)}; first ${r.first.toFixed(2)})`;

/** The read-ahead reader the old DumpPackage gave yauzl (src/destination/dump.ts before this bench). */
class ReadAheadReader extends yauzl.RandomAccessReader {
  private block: Buffer | undefined;
  private blockStart = 0;
  private lastEnd = -1;
  constructor(private readonly fd: number) {
    super();
  }
  override read(
    buffer: Buffer,
    offset: number,
    length: number,
    position: number,
    callback: (err: Error | null, bytesRead?: number) => void,
  ): void {
    const sequential = position === this.lastEnd;
    this.lastEnd = position + length;
    const block = this.block;
    if (block !== undefined && position >= this.blockStart && position + length <= this.blockStart + block.length) {
      block.copy(buffer, offset, position - this.blockStart, position - this.blockStart + length);
      process.nextTick(callback, null, length);
      return;
    }
    if (!sequential || length >= 256 * 1024) {
      fsRead(this.fd, buffer, offset, length, position, (e, n) => callback(e, n));
      return;
    }
    const ahead = Buffer.allocUnsafe(256 * 1024);
    fsRead(this.fd, ahead, 0, 256 * 1024, position, (e, n) => {
      if (e !== null) {
        callback(e);
        return;
      }
      this.block = ahead.subarray(0, n);
      this.blockStart = position;
      const copied = Math.min(n, length);
      ahead.copy(buffer, offset, 0, copied);
      callback(null, copied);
    });
  }
  override _readStreamForRange(start: number, end: number): Readable {
    const fd = this.fd;
    let pos = start;
    return new Readable({
      read(): void {
        const len = Math.min(64 * 1024, end - pos);
        if (len <= 0) {
          this.push(null);
          return;
        }
        const buf = Buffer.allocUnsafe(len);
        fsRead(fd, buf, 0, len, pos, (e, n) => {
          if (e !== null) this.destroy(e);
          else {
            pos += n;
            this.push(buf.subarray(0, n));
          }
        });
      },
    });
  }
  override close(callback: (err: Error | null) => void): void {
    fsClose(this.fd, (e) => callback(e));
  }
}

/** The old DumpPackage.open: fd, fstat, yauzl over the read-ahead reader, every entry decoded and kept. */
async function openOldWay(file: string): Promise<{ zip: yauzl.ZipFile; entries: Map<string, yauzl.Entry> }> {
  const fd = await new Promise<number>((resolve, reject) =>
    open(file, 'r', (e, fd) => (e === null ? resolve(fd) : reject(e))),
  );
  const size = await new Promise<number>((resolve, reject) =>
    fstat(fd, (e, st) => (e === null ? resolve(st.size) : reject(e))),
  );
  const zip = await yauzl.fromRandomAccessReaderPromise(new ReadAheadReader(fd), size, {
    lazyEntries: true,
    autoClose: false,
    decodeStrings: false,
    validateEntrySizes: true,
  });
  const entries = new Map<string, yauzl.Entry>();
  const decoder = new TextDecoder('utf-8', { fatal: false });
  for await (const entry of zip.eachEntry()) entries.set(decoder.decode(entry.fileNameRaw), entry);
  return { zip, entries };
}

async function openPlainYauzl(file: string): Promise<yauzl.ZipFile> {
  const zip = await new Promise<yauzl.ZipFile>((resolve, reject) =>
    yauzl.open(file, { lazyEntries: true, autoClose: false }, (e, z) => (e === null ? resolve(z) : reject(e))),
  );
  for await (const _ of zip.eachEntry());
  return zip;
}

const work = await mkdtemp(join(tmpdir(), 'rs-bench-pkg-'));
try {
  // Build the package: manifest.xml + `files` bitstreams of `size` bytes.
  const z = new yazl.ZipFile();
  let manifest =
    '<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n';
  const names: string[] = [];
  for (let i = 0; i < files; i++) {
    const name = `resources/changes/r${String(i).padStart(5, '0')}.txt`;
    names.push(name);
    manifest += `<url><loc>http://example.org/r${i}.txt</loc></url>\n`;
    // Text of random letters and digits (as base64 of random bytes): deflate keeps ~75% of it.
    const body = Buffer.from(
      randomBytes(Math.ceil((size * 3) / 4))
        .toString('base64')
        .slice(0, size),
    );
    z.addBuffer(body, name, { compress: !stored });
  }
  z.addBuffer(Buffer.from(`${manifest}</urlset>\n`), 'manifest.xml', { compress: !stored });
  z.end();
  const chunks: Buffer[] = [];
  for await (const c of z.outputStream as AsyncIterable<Buffer>) chunks.push(c);
  const bytes = Buffer.concat(chunks);
  const file = join(work, 'package.zip');
  await writeFile(file, bytes);
  console.log(
    `package: ${files} bitstreams of ${size} bytes + manifest.xml, ${stored ? 'stored' : 'deflated'}, ${(bytes.length / 1024 / 1024).toFixed(2)} MB; median of ${runs} runs`,
  );

  console.log('\nopen (central directory, every entry):');
  const oldOpen = await measure(async () => (await openOldWay(file)).zip.close());
  console.log(`  yauzl, read-ahead reader (old DumpPackage)  ${fmt(oldOpen)}`);
  console.log(
    `  yauzl.open                                  ${fmt(await measure(async () => (await openPlainYauzl(file)).close()))}`,
  );
  const newFile = await measure(async () => (await ZipReader.open(file)).close());
  console.log(
    `  ZipReader.open (file: open, fstat, 1 read)  ${fmt(newFile)}   ${(oldOpen.median / newFile.median).toFixed(1)}x`,
  );
  const newMem = await measure(() => ZipReader.fromBuffer(bytes));
  console.log(
    `  ZipReader.fromBuffer (parse only)           ${fmt(newMem)}   ${(oldOpen.median / newMem.median).toFixed(1)}x`,
  );
  console.log(
    `  DumpPackage.open(file)                      ${fmt(await measure(async () => (await DumpPackage.open(file, { removeOnClose: false })).close()))}`,
  );
  console.log(
    `  DumpPackage.fromBytes                       ${fmt(await measure(() => DumpPackage.fromBytes(bytes)))}`,
  );

  console.log(`\nread all ${files} bitstreams whole, checked, 16 at a time (package already open):`);
  const readAll = async (pkg: DumpPackage): Promise<void> => {
    for (let i = 0; i < names.length; i += 16)
      await Promise.all(names.slice(i, i + 16).map((n) => pkg.readSmallBitstream(`/${n}`)));
  };
  const pkgFile = await DumpPackage.open(file, { removeOnClose: false });
  const fromFile = await measure(() => readAll(pkgFile));
  await pkgFile.close();
  console.log(`  from a file (block cache, inflateRawSync)   ${fmt(fromFile)}`);
  const pkgMem = DumpPackage.fromBytes(bytes);
  const fromMem = await measure(() => readAll(pkgMem));
  console.log(
    `  from memory (slices, inflateRawSync)        ${fmt(fromMem)}   ${(fromFile.median / fromMem.median).toFixed(1)}x`,
  );
  const { zip, entries } = await openOldWay(file);
  const streams = await measure(async () => {
    for (let i = 0; i < names.length; i += 16)
      await Promise.all(
        names.slice(i, i + 16).map(async (n) => {
          for await (const _ of await zip.openReadStreamPromise(entries.get(n) as yauzl.Entry));
        }),
      );
  });
  zip.close();
  console.log(`  yauzl, a stream per file (reference)        ${fmt(streams)}`);

  console.log(`\nopen + read all (a whole package's ZIP work):`);
  console.log(
    `  old (yauzl open, file reads)  ${(oldOpen.median + fromFile.median).toFixed(2)} ms;  new from memory ${(newMem.median + fromMem.median).toFixed(2)} ms`,
  );

  // Download over loopback (a plain node:http server, Content-Length known), then open, read all, close.
  const server = createServer((_req, res) => res.writeHead(200, { 'content-length': bytes.length }).end(bytes));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/package.zip`;
  const client = new HttpClient();
  const tmpDir = join(work, 'tmp');
  try {
    console.log('\ndownload over loopback + open + close (no reads):');
    const viaFile = await measure(async () =>
      (await DumpPackage.open(await downloadPackage(client, url, { tmpDir }))).close(),
    );
    console.log(`  to a temporary file (old way)               ${fmt(viaFile)}`);
    const viaMemory = await measure(async () =>
      (await DumpPackage.open(await fetchPackage(client, url, { tmpDir }))).close(),
    );
    console.log(
      `  into memory (fetchPackage)                  ${fmt(viaMemory)}   ${(viaFile.median / viaMemory.median).toFixed(1)}x`,
    );
  } finally {
    await client.close();
    server.close();
  }

  const native = (zlib as { crc32?: (d: Uint8Array, v?: number) => number }).crc32;
  console.log(`\nCRC-32 of the ${(bytes.length / 1024 / 1024).toFixed(2)} MB package:`);
  if (native !== undefined) console.log(`  zlib.crc32                  ${fmt(await measure(() => native(bytes)))}`);
  const table = await measure(() => crc32Table(bytes));
  console.log(
    `  table (slicing by 8)        ${fmt(table)}   ${(bytes.length / 1e6 / (table.median / 1000)).toFixed(0)} MB/s`,
  );
} finally {
  await rm(work, { recursive: true, force: true });
}
