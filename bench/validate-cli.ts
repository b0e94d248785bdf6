/**
 * Whole-process cost of `resourcesync validate FILE`: Node startup, module loading, reading and validating,
 * as a user sees it. Spawns the compiled CLI (`dist/src/cli/main.js`, build it first with
 * `npx tsc -p tsconfig.json`) N times per file and prints medians of wall time and of user+sys CPU time, the
 * throughput in MB/s of file bytes per wall second and per CPU second, and peak RSS. Node does not expose a
 * child's rusage, so CPU and peak RSS come from GNU `/usr/bin/time` (when it is missing only wall time is
 * printed). Also times `--version` (startup alone). On a shared machine judge by CPU time.
 *
 * Run: `node --import tsx bench/validate-cli.ts [--runs 5] [--sizes 50000,500000]` (generates the data when
 * missing). Exit status 1 of `validate` on the 500k file is expected (more than 50,000 entries).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureResourceList } from './gen-resourcelist.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const CLI = join(ROOT, 'dist/src/cli/main.js');
const TIME = '/usr/bin/time';

function arg(name: string, def: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? (process.argv[i + 1] ?? def) : def;
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
}

interface Run {
  readonly wall: number;
  readonly cpu: number | undefined;
  readonly user: number | undefined;
  readonly sys: number | undefined;
  readonly rssKb: number | undefined;
  readonly status: number | null;
}

/** One child process; CPU and peak RSS from GNU time's `-f` report on stderr (last line). */
function runOnce(args: readonly string[]): Run {
  const useTime = existsSync(TIME);
  const cmd = useTime ? TIME : process.execPath;
  const argv = useTime ? ['-f', '@@%U %S %M', process.execPath, CLI, ...args] : [CLI, ...args];
  const t0 = process.hrtime.bigint();
  const r = spawnSync(cmd, argv, { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  let user: number | undefined;
  let sys: number | undefined;
  let rssKb: number | undefined;
  const m = /@@([\d.]+) ([\d.]+) (\d+)\s*$/.exec(r.stderr ?? '');
  if (m !== null) {
    user = Number(m[1]);
    sys = Number(m[2]);
    rssKb = Number(m[3]);
  }
  const cpu = user !== undefined && sys !== undefined ? user + sys : undefined;
  // GNU time reports a non-zero exit as "Command exited with non-zero status N" before our line.
  const st = /non-zero status (\d+)/.exec(r.stderr ?? '');
  const status = useTime ? (st === null ? 0 : Number(st[1])) : r.status;
  return { wall, cpu, user, sys, rssKb, status };
}

function summarise(label: string, runs: readonly Run[], bytes: number | undefined): void {
  const wall = median(runs.map((r) => r.wall));
  const cpus = runs.map((r) => r.cpu).filter((x): x is number => x !== undefined);
  const rss = runs.map((r) => r.rssKb).filter((x): x is number => x !== undefined);
  const cpu = cpus.length > 0 ? median(cpus) : undefined;
  const user = cpus.length > 0 ? median(runs.map((r) => r.user ?? 0)) : undefined;
  const sys = cpus.length > 0 ? median(runs.map((r) => r.sys ?? 0)) : undefined;
  const mb = bytes === undefined ? undefined : bytes / 1e6;
  const parts = [
    label.padEnd(28),
    `wall ${wall.toFixed(3)} s`,
    cpu === undefined ? '' : `cpu ${cpu.toFixed(2)} s (user ${user?.toFixed(2)} sys ${sys?.toFixed(2)})`,
    mb === undefined ? '' : `${(mb / wall).toFixed(1)} MB/s wall`,
    mb === undefined || cpu === undefined ? '' : `${(mb / cpu).toFixed(1)} MB/s cpu`,
    rss.length === 0
      ? ''
      : `peak RSS ${(Math.max(...rss) / 1024).toFixed(0)} MB (median ${(median(rss) / 1024).toFixed(0)})`,
    `exit ${[...new Set(runs.map((r) => r.status))].join('/')}`,
  ];
  console.log(parts.filter((p) => p !== '').join('  '));
}

function main(): void {
  if (!existsSync(CLI)) throw new Error(`${CLI} missing: build first with npx tsc -p tsconfig.json`);
  const runs = Number(arg('runs', '5'));
  const sizes = arg('sizes', '50000,500000')
    .split(',')
    .map((s) => Number(s));
  console.log(`resourcesync validate, whole process, median of ${runs} runs (${process.version})`);
  const startup: Run[] = [];
  for (let i = 0; i < runs; i++) startup.push(runOnce(['--version']));
  summarise('--version (startup)', startup, undefined);
  for (const n of sizes) {
    const path = ensureResourceList(n);
    const bytes = statSync(path).size;
    runOnce(['validate', path]); // warm the page cache
    const rs: Run[] = [];
    for (let i = 0; i < runs; i++) rs.push(runOnce(['validate', path]));
    summarise(`validate ${n} (${(bytes / 1e6).toFixed(1)} MB)`, rs, bytes);
  }
}

main();
