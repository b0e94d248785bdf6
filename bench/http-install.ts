// Cost of a verified install per small file: installFromStream (temp file, md5 + sha-256, rename) with and
// without fsync, against a plain writeFile, in the same run.
//
//   node --import tsx bench/http-install.ts [files=1000] [bytes=2048] [runs=3]
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { installFromStream, syncInstalledDirectories } from '../src/destination/install.js';

const files = Number(process.argv[2] ?? 1000);
const bytes = Number(process.argv[3] ?? 2048);
const runs = Number(process.argv[4] ?? 3);
const body = Buffer.alloc(bytes, 97);

async function* one(): AsyncGenerator<Uint8Array> {
  yield body;
}

async function time(
  label: string,
  fn: (dir: string, i: number) => Promise<unknown>,
  after?: () => Promise<unknown>,
): Promise<number> {
  const results: number[] = [];
  for (let r = 0; r < runs; r++) {
    const dir = await mkdtemp(join(tmpdir(), 'rs-bench-install-'));
    const t0 = performance.now();
    // 16 at a time, like a harvester does.
    let next = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < files) {
          const i = next++;
          await fn(dir, i);
        }
      }),
    );
    await after?.();
    results.push((performance.now() - t0) / files);
    await rm(dir, { recursive: true, force: true });
  }
  results.sort((a, b) => a - b);
  const med = results[Math.floor(results.length / 2)] as number;
  console.log(`  ${label.padEnd(44)} ${med.toFixed(3)} ms/file  ${Math.round(1000 / med)} files/s`);
  return med;
}

console.log(`${files} files of ${bytes} bytes, 16 concurrent, median of ${runs} runs`);
const plain = await time('writeFile (no temp, no hash, no fsync)', (dir, i) => writeFile(join(dir, `f${i}`), body));
const nosync = await time('installFromStream, fsync: false', (dir, i) =>
  installFromStream(one(), join(dir, `f${i}`), { length: bytes }, { fsync: false }),
);
const sync = await time(
  'installFromStream, fsync: true (+ dir fsync)',
  (dir, i) => installFromStream(one(), join(dir, `f${i}`), { length: bytes }),
  () => syncInstalledDirectories(),
);
console.log(
  `  verified install / writeFile: ${(nosync / plain).toFixed(2)}x; fsync costs ${(sync - nosync).toFixed(3)} ms/file`,
);

// Recording resources in the state database (what a harvester does after each install), batched as in a sync.
{
  const { DestinationState } = await import('../src/destination/state.js');
  const n = 100_000;
  const recs = Array.from({ length: n }, (_, i) => ({
    uri: `http://example.org/r/${i}`,
    path: `example.org/r/${i}`,
    length: bytes,
    md5: 'a'.repeat(32),
    sha256: 'b'.repeat(64),
    lastmod: '2024-01-01T00:00:00Z',
    sourceDatetime: '2024-01-01T00:00:00Z',
  }));
  const results: number[] = [];
  for (let r = 0; r < runs; r++) {
    const dir = await mkdtemp(join(tmpdir(), 'rs-bench-state-'));
    const state = DestinationState.open(dir);
    const t0 = performance.now();
    for (let i = 0; i < n; i += 500) state.putMany(recs.slice(i, i + 500));
    results.push(n / ((performance.now() - t0) / 1000));
    state.close();
    await rm(dir, { recursive: true, force: true });
  }
  results.sort((a, b) => a - b);
  console.log(
    `  state.putMany (batches of 500):               ${Math.round(results[Math.floor(runs / 2)] as number)} records/s`,
  );
}
