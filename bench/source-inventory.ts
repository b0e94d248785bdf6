/**
 * Initial inventory speed of a directory Source (scan + md5/sha-256 + SQLite inventory).
 *
 *   node --import tsx bench/source-inventory.ts [small|big|all] [--files N] [--runs N] [--dir /tmp/x]
 *
 * small: N (default 100,000) files of 4 KB in 100 directories: files/s, against a bare readdir+stat walk of the
 *        same tree measured in the same run (the floor set by file system calls).
 * big:   20 files of 100 MB: MB/s, against one-pass md5+sha-256 of a 100 MB buffer from memory in 1 MiB
 *        chunks (the ceiling: the same hashing without I/O), measured in each run.
 * Data is created under --dir (default: a temp dir) and deleted at the end. Prints the median of --runs runs.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, open, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createMultiHasher } from '../src/io/hashing.js';
import { openDirectorySource } from '../src/source/index.js';

const args = process.argv.slice(2);
const mode = args.find((a) => !a.startsWith('--') && !/^\d+$/.test(a) && !a.startsWith('/')) ?? 'all';
const opt = (name: string, dflt: number): number => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : dflt;
};
const dirArg = args.includes('--dir') ? args[args.indexOf('--dir') + 1] : undefined;
const runs = opt('runs', 3);

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
};

async function bareWalk(dir: string): Promise<number> {
  let n = 0;
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) n += await bareWalk(p);
    else {
      await stat(p, { bigint: true });
      n++;
    }
  }
  return n;
}

async function inventory(
  coll: string,
  work: string,
  run: number,
): Promise<{ ms: number; files: number; bytes: number }> {
  const state = join(work, `state-${run}`);
  const t0 = performance.now();
  const source = await openDirectorySource({
    dir: coll,
    baseUrl: 'http://localhost/',
    stateDir: state,
    scanOnOpen: false,
  });
  const stats = await source.scan();
  const ms = performance.now() - t0;
  await source.close();
  await rm(state, { recursive: true, force: true });
  return { ms, files: stats.files, bytes: stats.bytesHashed };
}

async function small(work: string): Promise<void> {
  const files = opt('files', 100_000);
  const coll = join(work, 'small');
  const perDir = Math.ceil(files / 100);
  process.stdout.write(`creating ${files} files of 4 KB in ${coll} ...\n`);
  const block = randomBytes(4096);
  for (let d = 0; d < 100; d++) {
    await mkdir(join(coll, `d${String(d).padStart(3, '0')}`), { recursive: true });
    const jobs: Promise<void>[] = [];
    for (let f = 0; f < perDir && d * perDir + f < files; f++) {
      const b = Buffer.from(block);
      b.writeUInt32LE(d * perDir + f, 0);
      jobs.push(writeFile(join(coll, `d${String(d).padStart(3, '0')}`, `f${f}.bin`), b));
    }
    await Promise.all(jobs);
  }
  const walkMs: number[] = [];
  const invMs: number[] = [];
  for (let r = 0; r < runs; r++) {
    let t = performance.now();
    const n = await bareWalk(coll);
    walkMs.push(performance.now() - t);
    t = performance.now();
    const inv = await inventory(coll, work, r);
    invMs.push(inv.ms);
    if (n !== files || inv.files !== files) throw new Error(`counted ${n} / ${inv.files} files, expected ${files}`);
    process.stdout.write(`  run ${r + 1}: walk ${walkMs.at(-1)!.toFixed(0)} ms, inventory ${inv.ms.toFixed(0)} ms\n`);
  }
  const walk = median(walkMs);
  const inv = median(invMs);
  process.stdout.write(
    `small files: ${files} x 4 KB: inventory ${(files / (inv / 1000)).toFixed(0)} files/s (${inv.toFixed(0)} ms); ` +
      `bare readdir+stat walk ${(files / (walk / 1000)).toFixed(0)} files/s (${walk.toFixed(0)} ms); ` +
      `inventory takes ${(inv / walk).toFixed(1)}x the walk\n`,
  );
  await rm(coll, { recursive: true, force: true });
}

async function big(work: string): Promise<void> {
  const count = opt('big-files', 20);
  const size = 100 << 20;
  const coll = join(work, 'big');
  await mkdir(coll, { recursive: true });
  process.stdout.write(`creating ${count} files of 100 MB in ${coll} ...\n`);
  const buf = randomBytes(size);
  for (let i = 0; i < count; i++) {
    buf.writeUInt32LE(i, 0);
    const fh = await open(join(coll, `big${i}.bin`), 'w');
    await fh.write(buf);
    await fh.close();
  }
  const ceil: number[] = [];
  const inv: number[] = [];
  for (let r = 0; r < runs; r++) {
    // The ceiling: the same one-pass md5 + sha-256 over 1 MiB chunks (as the scanner does), without any I/O.
    let t = performance.now();
    for (let k = 0; k < 3; k++) {
      const h = createMultiHasher(['md5', 'sha-256']);
      for (let off = 0; off < size; off += 1 << 20) h.update(buf.subarray(off, off + (1 << 20)));
      h.digest();
    }
    ceil.push((3 * size) / (1 << 20) / ((performance.now() - t) / 1000));
    t = performance.now();
    const res = await inventory(coll, work, r);
    inv.push(res.bytes / (1 << 20) / (res.ms / 1000));
    process.stdout.write(
      `  run ${r + 1}: inventory ${inv.at(-1)!.toFixed(0)} MB/s, md5+sha-256 from memory ${ceil.at(-1)!.toFixed(0)} MB/s\n`,
    );
  }
  process.stdout.write(
    `big files: ${count} x 100 MB: inventory ${median(inv).toFixed(0)} MB/s; md5+sha-256 from memory ${median(ceil).toFixed(0)} MB/s ` +
      `(inventory at ${((100 * median(inv)) / median(ceil)).toFixed(0)}% of the ceiling; target >= 400 MB/s)\n`,
  );
  await rm(coll, { recursive: true, force: true });
}

const work = dirArg ?? (await mkdtemp(join(tmpdir(), 'rs-bench-inventory-')));
try {
  if (mode === 'small' || mode === 'all') await small(work);
  if (mode === 'big' || mode === 'all') await big(work);
} finally {
  if (dirArg === undefined) await rm(work, { recursive: true, force: true });
}
