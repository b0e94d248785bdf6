// Follower latency: `resourcesync serve` and N `resourcesync sync --follow` child processes on loopback; a file
// is written into the served directory every `intervalMs`; latency is measured from the write to the moment the
// new content is in every follower's copy (polled every 2 ms), so it includes the Source's change detection
// (watcher debounce), the notification, and the follower's incremental run. Also prints the latency from each
// change being recorded at the Source to the end of the follower's run that applied it (the followers report
// it in their `applied` events; Source and followers share the clock).
//
//   node --import tsx bench/notify-follow.ts [followers=2] [changes=40] [intervalMs=100]
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { freePort } from '../test/notify/helpers.js';

// The repository root (this file runs from bench/ through tsx, or compiled from dist/bench/).
let root = dirname(fileURLToPath(import.meta.url));
while (!existsSync(join(root, 'package.json')) && dirname(root) !== root) root = dirname(root);
// The compiled CLI when it has been built (what users run), else the TypeScript sources through tsx.
const compiled = join(root, 'dist/src/cli/main.js');
const CLI = existsSync(compiled) ? [compiled] : ['--import', 'tsx', join(root, 'src/cli/main.ts')];
const followers = Number(process.argv[2] ?? 2);
const changes = Number(process.argv[3] ?? 40);
const intervalMs = Number(process.argv[4] ?? 100);

function cli(args: string[]): { child: ChildProcess; lines: AsyncIterableIterator<string> } {
  const child = spawn(process.execPath, [...CLI, ...args], {
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  return { child, lines: createInterface({ input: child.stdout! })[Symbol.asyncIterator]() };
}
async function waitLine(
  l: AsyncIterableIterator<string>,
  pred: (o: Record<string, unknown>) => boolean,
): Promise<void> {
  for (;;) {
    const r = await l.next();
    if (r.done === true) throw new Error('process ended');
    try {
      if (pred(JSON.parse(r.value) as Record<string, unknown>)) return;
    } catch {
      // not JSON
    }
  }
}
async function fileIn(dir: string, name: string): Promise<string | undefined> {
  for (const e of await readdir(dir, { withFileTypes: true, recursive: true }).catch(() => [])) {
    if (e.isFile() && e.name === name && !e.parentPath.includes('.resourcesync')) return join(e.parentPath, e.name);
  }
  return undefined;
}
function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

const dir = await mkdtemp(join(tmpdir(), 'rs-bench-follow-'));
const col = join(dir, 'col');
await mkdir(col);
await writeFile(join(col, 'f.txt'), 'v0');
const port = await freePort();
const serve = cli(['serve', col, '--port', String(port), '--json', '--state', join(dir, 'state')]);
await waitLine(serve.lines, (o) => o.event === 'listening');
const procs = Array.from({ length: followers }, (_, i) =>
  cli(['sync', '--follow', `http://127.0.0.1:${port}/`, join(dir, `copy${i}`), '--json', '--durability', 'none']),
);
await Promise.all(procs.map((p) => waitLine(p.lines, (o) => o.event === 'connected')));
const recordLatencies: number[] = [];
for (const p of procs) {
  void (async () => {
    for (;;) {
      const r = await p.lines.next();
      if (r.done === true) return;
      try {
        const o = JSON.parse(r.value) as { event?: string; recordToAppliedMs?: number[] };
        if (o.event === 'applied' && o.recordToAppliedMs !== undefined) recordLatencies.push(...o.recordToAppliedMs);
      } catch {
        // not JSON
      }
    }
  })();
}
const paths: string[] = [];
for (let i = 0; i < followers; i++) {
  let p: string | undefined;
  while ((p = await fileIn(join(dir, `copy${i}`), 'f.txt')) === undefined) await new Promise((r) => setTimeout(r, 20));
  paths.push(p);
}
const latencies: number[] = [];
for (let n = 1; n <= changes; n++) {
  const content = `v${n}`;
  const t0 = performance.now();
  await writeFile(join(col, 'f.txt'), content);
  const pending = new Set(paths);
  const deadline = t0 + 30_000;
  while (pending.size > 0 && performance.now() < deadline) {
    for (const p of [...pending]) {
      if ((await readFile(p, 'utf8').catch(() => '')) === content) {
        latencies.push(performance.now() - t0);
        pending.delete(p);
      }
    }
    await new Promise((r) => setTimeout(r, 2));
  }
  if (pending.size > 0) console.log(`change ${n}: ${pending.size} follower(s) missed it within 30 s`);
  const wait = intervalMs - (performance.now() - t0);
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
}
latencies.sort((a, b) => a - b);
console.log(
  `${followers} follower(s), ${changes} changes: latency from file write to follower copy  p50 ${pct(latencies, 50).toFixed(1)} ms  p99 ${pct(latencies, 99).toFixed(1)} ms  max ${latencies.at(-1)!.toFixed(1)} ms`,
);
recordLatencies.sort((a, b) => a - b);
if (recordLatencies.length > 0) {
  console.log(
    `from the change being recorded to the end of the follower's run (${recordLatencies.length} samples)  p50 ${pct(recordLatencies, 50)} ms  p99 ${pct(recordLatencies, 99)} ms`,
  );
}
for (const p of [...procs, serve]) p.child.kill('SIGTERM');
await new Promise((r) => setTimeout(r, 500));
await rm(dir, { recursive: true, force: true });
