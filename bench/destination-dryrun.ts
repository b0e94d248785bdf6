// Memory of a dry-run baseline over a huge Resource List Index: entries are streamed, never held.
//
//   node --import tsx bench/destination-dryrun.ts [entries=1000000]
//
// The Source (bench/destination-server.ts big) runs in a child process and generates lists of 50,000 entries
// on request. Prints elapsed time, entries/s and the peak RSS of this process (sampled every 20 ms).
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Destination } from '../src/destination/destination.js';

const N = Number(process.argv[2] ?? 1_000_000);
const here = dirname(fileURLToPath(import.meta.url));
const ext = import.meta.url.endsWith('.ts') ? '.ts' : '.js';
const child = spawn(
  process.execPath,
  [...(ext === '.ts' ? ['--import', 'tsx'] : []), join(here, `destination-server${ext}`), 'big', String(N)],
  { stdio: ['ignore', 'pipe', 'inherit'] },
);
const first = await createInterface({ input: child.stdout })[Symbol.asyncIterator]().next();
const base = (JSON.parse(String(first.value)) as { base: string }).base;

const dir = await mkdtemp(join(tmpdir(), 'rs-bench-dry-'));
let peak = process.memoryUsage().rss;
const timer = setInterval(() => {
  peak = Math.max(peak, process.memoryUsage().rss);
}, 20);
const t0 = performance.now();
const cpu0 = process.cpuUsage();
const s = await new Destination({ url: `${base}/resourcelist-index.xml`, dir, dryRun: true }).baseline();
const ms = performance.now() - t0;
const cpu = process.cpuUsage(cpu0);
clearInterval(timer);
peak = Math.max(peak, process.memoryUsage().rss);
process.stdout.write(
  `dry-run baseline of a ${N.toLocaleString('en')}-entry Resource List Index: ${s.counts.created.toLocaleString('en')} would be created in ${(ms / 1000).toFixed(1)} s ` +
    `(${((s.counts.created / ms) * 1000).toFixed(0)} entries/s, CPU ${((cpu.user + cpu.system) / 1e6).toFixed(1)} s); peak RSS ${(peak / 2 ** 20).toFixed(0)} MiB\n`,
);
if (s.counts.created !== N) process.exitCode = 1;
await rm(dir, { recursive: true, force: true });
child.kill();
