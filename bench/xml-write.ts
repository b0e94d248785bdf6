/**
 * Write speed: `writeDocumentFile` of a 500,000-entry Resource List (entries as in gen-resourcelist.ts),
 * median of several runs; and `serializeDocument`-free streaming to /dev/null for the pure serialisation cost.
 *
 * Run: `node --import tsx bench/xml-write.ts [--runs 5] [--entries 500000]`
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHeader, type Entry } from '../src/core/model.js';
import { writeDocument, writeDocumentFile, writeSplitDocuments } from '../src/xml/index.js';

function arg(name: string, def: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : def;
}

const runs = arg('runs', 5);
const count = arg('entries', 500_000);
const hashes: string[] = [];
for (let i = 0; i < 1000; i++) hashes.push(`md5:${createHash('md5').update(String(i)).digest('hex')}`);

function* entries(): Generator<Entry> {
  for (let i = 0; i < count; i++) {
    yield {
      element: 'url',
      loc: `http://example.com/res/${String(i).padStart(6, '0')}`,
      lastmod: '2013-01-02T13:00:00Z',
      md: { hash: hashes[i % 1000]!, length: 10000 + (i % 90000), type: 'text/html' },
      links: [],
    };
  }
}

const header = createHeader('resource-list', { at: '2013-01-03T09:00:00Z' }, [
  { rel: 'up', href: 'http://example.com/capabilitylist.xml' },
]);

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

const dir = mkdtempSync(join(tmpdir(), 'rs-xml-write-'));
try {
  // Cost of making the entries alone, to subtract mentally.
  const tg: number[] = [];
  for (let r = 0; r < runs; r++) {
    const t0 = performance.now();
    let n = 0;
    for (const e of entries()) n += e.loc.length;
    tg.push(performance.now() - t0);
    if (n === 0) throw new Error('no entries');
  }
  const tMem: number[] = [];
  let memBytes = 0;
  for (let r = 0; r < runs; r++) {
    const t0 = performance.now();
    memBytes = 0;
    for await (const c of writeDocument(header, entries())) memBytes += c.byteLength;
    tMem.push(performance.now() - t0);
  }
  const tFile: number[] = [];
  let fileBytes = 0;
  for (let r = 0; r < runs; r++) {
    const t0 = performance.now();
    fileBytes = (await writeDocumentFile(join(dir, 'resourcelist.xml'), header, entries())).bytes;
    tFile.push(performance.now() - t0);
  }
  const tSplit: number[] = [];
  let parts = 0;
  for (let r = 0; r < runs; r++) {
    const t0 = performance.now();
    const res = await writeSplitDocuments({
      header,
      entries: entries(),
      dir: join(dir, 'split'),
      baseUrl: 'http://example.com/',
      name: (n) => `resourcelist-${n}.xml`,
      indexName: 'resourcelist.xml',
    });
    parts = res.documents.length;
    tSplit.push(performance.now() - t0);
  }
  const mb = fileBytes / 1e6;
  console.log(`${count} entries, ${mb.toFixed(1)} MB, median of ${runs} runs`);
  console.log(`making the entries alone        ${median(tg).toFixed(0).padStart(6)} ms`);
  console.log(
    `writeDocument (chunks, no I/O)  ${median(tMem).toFixed(0).padStart(6)} ms  ${(memBytes / 1e6 / (median(tMem) / 1000)).toFixed(1)} MB/s`,
  );
  console.log(
    `writeDocumentFile (atomic+fsync) ${median(tFile).toFixed(0).padStart(5)} ms  ${(mb / (median(tFile) / 1000)).toFixed(1)} MB/s`,
  );
  console.log(
    `writeSplitDocuments (${parts} parts + index) ${median(tSplit).toFixed(0).padStart(5)} ms  ${(mb / (median(tSplit) / 1000)).toFixed(1)} MB/s`,
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
