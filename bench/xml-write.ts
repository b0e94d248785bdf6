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

/** Median wall ms and median CPU ms (user + system) of `runs` calls. */
async function measure(fn: () => Promise<unknown> | unknown): Promise<{ ms: number; cpu: number }> {
  const walls: number[] = [];
  const cpus: number[] = [];
  for (let r = 0; r < runs; r++) {
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    await fn();
    walls.push(performance.now() - t0);
    const c = process.cpuUsage(c0);
    cpus.push((c.user + c.system) / 1000);
  }
  return { ms: median(walls), cpu: median(cpus) };
}

const dir = mkdtempSync(join(tmpdir(), 'rs-xml-write-'));
try {
  let n = 0;
  const gen = await measure(() => {
    for (const e of entries()) n += e.loc.length;
  });
  if (n === 0) throw new Error('no entries');
  let memBytes = 0;
  const mem = await measure(async () => {
    memBytes = 0;
    for await (const c of writeDocument(header, entries())) memBytes += c.byteLength;
  });
  let fileBytes = 0;
  const file = await measure(async () => {
    fileBytes = (await writeDocumentFile(join(dir, 'resourcelist.xml'), header, entries())).bytes;
  });
  let parts = 0;
  const split = await measure(async () => {
    const res = await writeSplitDocuments({
      header,
      entries: entries(),
      dir: join(dir, 'split'),
      baseUrl: 'http://example.com/',
      name: (k) => `resourcelist-${k}.xml`,
      indexName: 'resourcelist.xml',
    });
    parts = res.documents.length;
  });
  const mb = fileBytes / 1e6;
  const row = (name: string, r: { ms: number; cpu: number }, bytes = mb): void =>
    console.log(
      `${name.padEnd(38)} ${r.ms.toFixed(0).padStart(6)} ms ${(bytes / (r.ms / 1000)).toFixed(1).padStart(7)} MB/s wall` +
        ` | ${r.cpu.toFixed(0).padStart(6)} ms CPU ${(bytes / (r.cpu / 1000)).toFixed(1).padStart(7)} MB/s of CPU time`,
    );
  console.log(`${count} entries, ${mb.toFixed(1)} MB, median of ${runs} runs`);
  console.log(`making the entries alone: ${gen.ms.toFixed(0)} ms`);
  row('writeDocument (chunks, no I/O)', mem, memBytes / 1e6);
  row('writeDocumentFile (atomic, fsync)', file);
  row(`writeSplitDocuments (${parts} parts + index)`, split);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
