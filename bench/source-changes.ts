/**
 * 1,000 file changes in one second, recorded by a watching directory Source.
 *
 *   node --import tsx bench/source-changes.ts [--files 1000] [--runs 3]
 *
 * Writes --files files spread over one second (10 bursts), then waits until every change is recorded.
 * Prints: changes recorded / written, order violations (a file recorded after one written in a later burst),
 * and the lag from the last write to the last change recorded (median of --runs).
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { openDirectorySource } from '../src/source/index.js';

const args = process.argv.slice(2);
const opt = (name: string, dflt: number): number => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : dflt;
};
const files = opt('files', 1000);
const runs = opt('runs', 3);
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const work = await mkdtemp(join(tmpdir(), 'rs-bench-changes-'));
try {
  const root = join(work, 'coll');
  await mkdir(root);
  const source = await openDirectorySource({
    dir: root,
    baseUrl: 'http://localhost/',
    stateDir: join(work, 'state'),
    watch: true,
    debounceMs: 50,
    rescanIntervalMs: 0,
  });
  const lags: number[] = [];
  let allOk = true;
  for (let r = 0; r < runs; r++) {
    const dir = `run${r}`;
    await mkdir(join(root, dir));
    await sleep(200);
    await source.settled();
    const seq = (await source.store.head()).seq;
    const names = Array.from({ length: files }, (_, i) => `${dir}/f${String(files - i).padStart(5, '0')}.txt`);
    const per = Math.ceil(files / 10);
    const t0 = performance.now();
    for (let k = 0; k < 10; k++) {
      await Promise.all(names.slice(k * per, (k + 1) * per).map((n) => writeFile(join(root, n), n)));
      await sleep(Math.max(0, t0 + (k + 1) * 95 - performance.now()));
    }
    const wroteAt = performance.now();
    let count = 0;
    const deadline = wroteAt + 60_000;
    while (count < files && performance.now() < deadline) {
      count = (await source.store.head()).seq - seq;
      if (count < files) await sleep(5);
    }
    const lag = performance.now() - wroteAt;
    await source.settled();
    const snap = await source.store.snapshot();
    const burstOf = new Map(names.map((n, i) => [n, Math.floor(i / per)]));
    let last = 0;
    let violations = 0;
    let recorded = 0;
    try {
      for await (const c of snap.changes({ afterSeq: seq })) {
        recorded++;
        const b = burstOf.get(c.uri) ?? -1;
        if (b < last) violations++;
        last = Math.max(last, b);
      }
    } finally {
      await snap.close();
    }
    lags.push(lag);
    allOk &&= recorded === files && violations === 0;
    process.stdout.write(
      `  run ${r + 1}: wrote ${files} files in ${(wroteAt - t0).toFixed(0)} ms; recorded ${recorded}, ` +
        `order violations ${violations}, last change recorded ${lag.toFixed(0)} ms after the last write\n`,
    );
  }
  process.stdout.write(
    `${files} changes in one second: ${allOk ? 'all recorded, in order' : 'MISSING OR OUT OF ORDER'}; ` +
      `lag after the last write ${median(lags).toFixed(0)} ms (median of ${runs})\n`,
  );
  await source.close();
} finally {
  await rm(work, { recursive: true, force: true });
}
