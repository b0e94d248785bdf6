/**
 * Building a Resource Dump of 10,000 small files (ZIP, stored), against yazl opening each file itself.
 *
 *   node --import tsx bench/source-dump.ts [--files 10000] [--size 10240] [--runs 3]
 *
 * Prints MB/s of bitstreams packaged (median of --runs): ours (buffers read with large reads, handed to yazl),
 * and the baseline `yazl.addFile` per file, in the same run. Target: >= 100 MB/s. Data in a temp dir, deleted.
 */
import { createWriteStream } from 'node:fs';
import { mkdir, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import yazl from 'yazl';
import { openDirectorySource } from '../src/source/index.js';

const args = process.argv.slice(2);
const opt = (name: string, dflt: number): number => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : dflt;
};
const files = opt('files', 10_000);
const size = opt('size', 10_240);
const runs = opt('runs', 3);
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const work = await mkdtemp(join(tmpdir(), 'rs-bench-dump-'));
try {
  const coll = join(work, 'coll');
  const names: string[] = [];
  for (let d = 0; d < 10; d++) {
    await mkdir(join(coll, `d${d}`), { recursive: true });
    await Promise.all(
      Array.from({ length: files / 10 }, (_, i) => {
        const n = `d${d}/f${i}.bin`;
        names.push(n);
        const b = Buffer.alloc(size, (d * 31 + i) & 0xff);
        b.writeUInt32LE(d * 100_000 + i, 0);
        return writeFile(join(coll, n), b);
      }),
    );
  }
  const totalMb = (files * size) / (1 << 20);
  const source = await openDirectorySource({
    dir: coll,
    baseUrl: 'http://localhost/',
    stateDir: join(work, 'state'),
    limits: { dumpMaxBytes: 4 * 2 ** 30 },
  });
  const ours: number[] = [];
  const base: number[] = [];
  for (let r = 0; r < runs; r++) {
    // Force a new generation: touch the store (an inventory-only write bumps the set's version).
    const rec = await source.store.getResource(names[r]!);
    await source.store.recordChanges([{ ...rec!, change: 'updated', hashes: rec!.hashes }], { log: false });
    let t = performance.now();
    // ensure() waits for the generation (document() would serve the previous dump while a slow one is rebuilt).
    await source.source.ensure('resourcedump', 'default');
    const ms = performance.now() - t;
    const doc = await source.document('/resourcesync/default/resourcedump.xml');
    if (doc === undefined) throw new Error('no resource dump');
    ours.push(totalMb / (ms / 1000));
    t = performance.now();
    const zip = new yazl.ZipFile();
    for (const n of names) zip.addFile(join(coll, n), n, { compress: false });
    zip.end();
    await pipeline(zip.outputStream, createWriteStream(join(work, 'baseline.zip')));
    base.push(totalMb / ((performance.now() - t) / 1000));
    process.stdout.write(
      `  run ${r + 1}: ours ${ours.at(-1)!.toFixed(0)} MB/s, yazl.addFile ${base.at(-1)!.toFixed(0)} MB/s\n`,
    );
  }
  const pkg = (await stat(join(work, 'baseline.zip'))).size;
  process.stdout.write(
    `resource dump of ${files} files x ${size} B (${totalMb.toFixed(0)} MB, package ${(pkg / (1 << 20)).toFixed(0)} MB): ` +
      `${median(ours).toFixed(0)} MB/s (target >= 100); yazl opening each file: ${median(base).toFixed(0)} MB/s ` +
      `(${(median(ours) / median(base)).toFixed(1)}x)\n`,
  );
  await source.close();
} finally {
  await rm(work, { recursive: true, force: true });
}
