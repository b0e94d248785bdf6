/**
 * Change Dump generation as the open Change List grows: a directory Source of N small files, then rounds of
 * 1,000 changes (new content of 1,000 distinct files, recorded by a scan), each followed by one Change Dump
 * generation (`Source.ensure('changedump', set)`, what a request for `changedump.xml` runs when the dump is
 * stale).
 *
 *   node --import tsx bench/source-changedump.ts [--files 10000] [--size 2048] [--rounds 8] [--changes 1000] [--reps 5]
 *
 * Per round (1..rounds): the generation's wall time and the bytes it wrote into the set's directory (files new
 * or replaced: packages, manifest copies, changedump.xml), each the median of --reps repetitions (each
 * repetition a fresh state directory over the same collection). With append-only packages, both stay flat as
 * the open part grows; when the open part is rewritten whole, both grow with it. Scans are not timed. Data in
 * a temp dir, deleted. fsync on (the default of a Source).
 */
import { mkdir, mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDirectorySource } from '../src/source/index.js';

const args = process.argv.slice(2);
const opt = (name: string, dflt: number): number => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : dflt;
};
const files = opt('files', 10_000);
const size = opt('size', 2048);
const rounds = opt('rounds', 8);
const perRound = opt('changes', 1000);
const reps = opt('reps', 5);
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Identity of every file of a directory: name -> `ino:size:mtimeNs`, and sizes. */
async function listing(dir: string): Promise<Map<string, { id: string; size: number }>> {
  const out = new Map<string, { id: string; size: number }>();
  for (const name of await readdir(dir).catch(() => [] as string[])) {
    const st = await stat(join(dir, name), { bigint: true }).catch(() => undefined);
    if (st?.isFile() === true) out.set(name, { id: `${st.ino}:${st.size}:${st.mtimeNs}`, size: Number(st.size) });
  }
  return out;
}

const work = await mkdtemp(join(tmpdir(), 'rs-bench-changedump-'));
try {
  const coll = join(work, 'coll');
  const path = (i: number): string => join(coll, `d${i % 100}`, `f${i}.bin`);
  for (let d = 0; d < 100; d++) await mkdir(join(coll, `d${d}`), { recursive: true });
  const body = (i: number, tag: number): Buffer => {
    const b = Buffer.alloc(size, i & 0xff);
    b.write(`${i} ${tag} `, 0);
    return b;
  };
  for (let i = 0; i < files; i += 500)
    await Promise.all(
      Array.from({ length: Math.min(500, files - i) }, (_, k) => writeFile(path(i + k), body(i + k, 0))),
    );
  const ms: number[][] = Array.from({ length: rounds }, () => []);
  const written: number[][] = Array.from({ length: rounds }, () => []);
  const packages: number[][] = Array.from({ length: rounds }, () => []);
  let tag = 0;
  for (let rep = 0; rep < reps; rep++) {
    const site = await openDirectorySource({
      dir: coll,
      baseUrl: 'http://localhost/',
      stateDir: join(work, `state${rep}`),
    });
    const setDir = site.source.layout.setDir('default');
    for (let r = 0; r < rounds; r++) {
      tag++;
      // 1,000 distinct files a round (the round's changes keep their own bytes: blob copies of each version).
      await Promise.all(
        Array.from({ length: perRound }, (_, k) => {
          const i = (r * perRound + k) % files;
          return writeFile(path(i), body(i, tag));
        }),
      );
      await site.scan();
      const before = await listing(setDir);
      const t = performance.now();
      await site.source.ensure('changedump', 'default');
      ms[r]!.push(performance.now() - t);
      const after = await listing(setDir);
      let bytes = 0;
      for (const [name, f] of after) if (before.get(name)?.id !== f.id) bytes += f.size;
      written[r]!.push(bytes);
      packages[r]!.push([...after.keys()].filter((n) => n.endsWith('.zip')).length);
    }
    await site.close();
    await rm(join(work, `state${rep}`), { recursive: true, force: true });
    process.stdout.write(`  repetition ${rep + 1}/${reps} done\n`);
  }
  process.stdout.write(
    `change dump generation, ${files} files x ${size} B, ${perRound} changes a round (median of ${reps}):\n`,
  );
  process.stdout.write('round  changes-in-part  ms/generation  MB written  .zip files in dir\n');
  for (let r = 0; r < rounds; r++)
    process.stdout.write(
      `${String(r + 1).padStart(5)}  ${String((r + 1) * perRound).padStart(15)}  ${median(ms[r]!).toFixed(0).padStart(13)}  ` +
        `${(median(written[r]!) / (1 << 20)).toFixed(2).padStart(10)}  ${String(median(packages[r]!)).padStart(17)}\n`,
    );
} finally {
  await rm(work, { recursive: true, force: true });
}
