// Followers under load (issue 5's benchmark): `resourcesync serve` and N `sync --follow` child processes; files
// are created or rewritten at `rate` per second for `seconds`; at the end every follower must become
// byte-identical to the Source. Prints the time to converge after the last write and the latency from each change
// being recorded at the Source to the end of the follower run that applied it (reported by the followers).
//
//   node --import tsx bench/notify-follow-load.ts [followers=10] [seconds=60] [rate=100] [files=500]
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { freePort } from '../test/notify/helpers.js';

// The repository root (this file runs from bench/ through tsx, or compiled from dist/bench/).
let root = dirname(fileURLToPath(import.meta.url));
while (!existsSync(join(root, 'package.json')) && dirname(root) !== root) root = dirname(root);
// The compiled CLI when it has been built (what users run), else the TypeScript sources through tsx.
const compiled = join(root, 'dist/src/cli/main.js');
const CLI = existsSync(compiled) ? [compiled] : ['--import', 'tsx', join(root, 'src/cli/main.ts')];
const followers = Number(process.argv[2] ?? 10);
const seconds = Number(process.argv[3] ?? 60);
const rate = Number(process.argv[4] ?? 100);
const files = Number(process.argv[5] ?? 500);

/** `BENCH_PROF_DIR=dir`: the Source and the first follower write V8 CPU profiles there. */
const profDir = process.env.BENCH_PROF_DIR;
function cli(args: string[], profile = false): { child: ChildProcess; json: Record<string, unknown>[] } {
  const prof = profile && profDir !== undefined ? ['--cpu-prof', '--cpu-prof-dir', profDir] : [];
  const child = spawn(process.execPath, [...prof, ...CLI, ...args], {
    stdio: ['ignore', 'pipe', process.env.BENCH_STDERR === '1' ? 'inherit' : 'ignore'],
  });
  const json: Record<string, unknown>[] = [];
  createInterface({ input: child.stdout! }).on('line', (l) => {
    try {
      json.push(JSON.parse(l) as Record<string, unknown>);
    } catch {
      // not JSON
    }
  });
  return { child, json };
}
async function until(pred: () => boolean | Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await pred()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}
/** name -> sha-256 of every file under `dir` (the copy's host folder is flattened away; state skipped). */
async function treeDigest(dir: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const entries = await readdir(dir, { withFileTypes: true, recursive: true }).catch(() => []);
  for (const e of entries) {
    if (!e.isFile() || e.parentPath.includes('.resourcesync')) continue;
    const path = join(e.parentPath, e.name);
    const data = await readFile(path).catch(() => undefined);
    if (data !== undefined)
      out.set(relative(dir, path).split('/').slice(-1)[0]!, createHash('sha256').update(data).digest('hex'));
  }
  return out;
}
function same(a: Map<string, string>, b: Map<string, string>): boolean {
  if (a.size !== b.size) return false;
  for (const [k, v] of a) if (b.get(k) !== v) return false;
  return true;
}
function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

const dir = await mkdtemp(join(tmpdir(), 'rs-bench-follow-load-'));
const col = join(dir, 'col');
await mkdir(col);
for (let i = 0; i < 10; i++) await writeFile(join(col, `f${i}.txt`), `initial ${i}`);
const port = await freePort();
const serve = cli(['serve', col, '--port', String(port), '--json', '--state', join(dir, 'state')], true);
if (!(await until(() => serve.json.some((e) => e.event === 'listening'), 60_000)))
  throw new Error('serve did not start');
const procs = Array.from({ length: followers }, (_, i) =>
  cli(
    ['sync', '--follow', `http://127.0.0.1:${port}/`, join(dir, `copy${i}`), '--json', '--durability', 'none'],
    i === 0,
  ),
);
if (!(await until(() => procs.every((p) => p.json.some((e) => e.event === 'connected')), 120_000)))
  throw new Error('followers did not connect');
console.log(`${followers} followers connected; writing ${rate} changes/s for ${seconds} s over ${files} files`);

const t0 = performance.now();
let written = 0;
while (performance.now() - t0 < seconds * 1000) {
  const due = Math.floor(((performance.now() - t0) / 1000) * rate);
  while (written < due) {
    const i = written % files;
    await writeFile(join(col, `f${i}.txt`), `change ${written} of file ${i}\n`);
    written++;
  }
  await new Promise((r) => setTimeout(r, 5));
}
const lastWrite = performance.now();
const source = await treeDigest(col);
const converged: number[] = [];
for (let i = 0; i < followers; i++) {
  const ok = await until(async () => same(source, await treeDigest(join(dir, `copy${i}`))), 60_000);
  converged.push(ok ? performance.now() - lastWrite : Number.NaN);
  if (!ok) {
    const copy = await treeDigest(join(dir, `copy${i}`));
    const diff = [...source].filter(([k, v]) => copy.get(k) !== v).map(([k]) => k);
    console.log(
      `follower ${i}: ${diff.length} files differ (${diff.slice(0, 5).join(', ')}), ${copy.size} vs ${source.size}`,
    );
  }
}
const latencies = procs
  .flatMap((p) =>
    p.json.filter((e) => e.event === 'applied').flatMap((e) => (e.recordToAppliedMs as number[] | undefined) ?? []),
  )
  .sort((a, b) => a - b);
if (process.env.BENCH_EVENTS === '1') {
  // What the first follower did: its events by kind (and by operation for `applied`).
  const kinds = new Map<string, number>();
  for (const e of procs[0]?.json ?? []) {
    const k = e.event === 'applied' ? `applied/${String(e.operation ?? 'run')}` : String(e.event);
    kinds.set(k, (kinds.get(k) ?? 0) + 1);
  }
  console.log(`follower 0 events: ${JSON.stringify(Object.fromEntries(kinds))}`);
  const stopped = procs[0]?.json.find((e) => e.event === 'stopped');
  if (stopped !== undefined) console.log(`follower 0 stopped: ${JSON.stringify(stopped)}`);
}
const identical = converged.filter((x) => !Number.isNaN(x)).length;
console.log(`${written} changes written; ${identical}/${followers} followers byte-identical to the Source`);
console.log(
  `converged after the last write in max ${Math.max(...converged.filter((x) => !Number.isNaN(x))).toFixed(0)} ms`,
);
if (latencies.length > 0) {
  console.log(
    `change recorded -> follower run done (${latencies.length} samples): p50 ${pct(latencies, 50)} ms  p99 ${pct(latencies, 99)} ms  max ${latencies.at(-1)} ms`,
  );
}
/** CPU seconds (user + system) a process used so far (Linux /proc), or NaN. */
async function cpuSeconds(pid: number | undefined): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / 100; // utime + stime in clock ticks (100/s)
}
const sourceCpu = await cpuSeconds(serve.child.pid);
const followerCpu = await Promise.all(procs.map((p) => cpuSeconds(p.child.pid)));
const meanFollower = followerCpu.reduce((a, b) => a + b, 0) / followers;
console.log(
  `CPU (whole run, start-up included): Source ${sourceCpu.toFixed(1)} s = ${((sourceCpu / written) * 1000).toFixed(2)} ms/change ` +
    `(${((sourceCpu / (written * followers)) * 1000).toFixed(2)} ms per follower GET); follower mean ${meanFollower.toFixed(1)} s = ` +
    `${((meanFollower / written) * 1000).toFixed(2)} ms/change`,
);
for (const p of [...procs, serve]) p.child.kill('SIGTERM');
await new Promise((r) => setTimeout(r, 1000));
await rm(dir, { recursive: true, force: true });
