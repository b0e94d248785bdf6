/**
 * Several Source processes on one PostgreSQL store: what generating each document once (one shared site
 * directory, a lock per group) saves against each process generating its own (a site directory each, as before
 * issue 15's generation-once), in the same run.
 *
 *   RESOURCESYNC_TEST_PG=postgres://postgres@127.0.0.1:5432/test \
 *     node --import tsx bench/generate-once.ts [--resources 100000] [--instances 3] [--rounds 5]
 *
 * An inventory of --resources synthetic resources (a Resource List Index and its parts of 50,000) is filled once.
 * Each round, for each way ("shared": one site directory; "separate": one each), alternating, --instances fresh
 * child processes open the store and a Source each (start-up not timed), then ask for the first part of the
 * Resource List (cold: nothing generated in their site directories):
 * - `sequential`: one after the other; time to the part for the 1st, 2nd, 3rd... process;
 * - `at once`: all together; time to the part for the slowest, and the CPU time summed over the processes.
 * Medians over the rounds. Each child is a process of its own, as `serve` instances are. First, what generating
 * once adds to every generation: a lock taken and released, the saved state read and written under its lock.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { openPgStore, Source } from '../src/source/index.js';
import { fillInventory } from './synthetic.js';

const args = process.argv.slice(2);
const opt = (name: string, dflt: string): string => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1]! : dflt;
};
const pgUrl = process.env.RESOURCESYNC_TEST_PG;
/** The first part of the Resource List Index (the list itself when it fits one document). */
const PART = `/resourcesync/default/resourcelist${Number(opt('resources', '100000')) > 50_000 ? '-0001' : ''}.xml`;

if (args.includes('--child')) {
  // One Source process: opens, says `ready`, asks for the part at `go`, says how long it took and what it got.
  const store = await openPgStore({ url: pgUrl!, schema: opt('schema', '') });
  const source = await Source.open({ store, baseUrl: 'http://localhost/', siteDir: opt('site', '') });
  let generated = 0;
  source.onGeneration((e) => {
    if (!e.adopted) generated++;
  });
  process.stdout.write('ready\n');
  for await (const line of createInterface({ input: process.stdin })) {
    if (line !== 'go') continue;
    const cpu0 = process.cpuUsage();
    const t = performance.now();
    const file = await source.document(PART);
    const ms = performance.now() - t;
    const cpu = process.cpuUsage(cpu0);
    const sha = createHash('sha256')
      .update(await readFile(file!.path))
      .digest('hex');
    process.stdout.write(`${JSON.stringify({ ms, cpuMs: (cpu.user + cpu.system) / 1000, sha, generated })}\n`);
    break;
  }
  await source.close();
  await store.close();
} else {
  if (pgUrl === undefined) throw new Error('set RESOURCESYNC_TEST_PG=postgres://…');
  const resources = Number(opt('resources', '100000'));
  const instances = Number(opt('instances', '3'));
  const rounds = Number(opt('rounds', '5'));
  const self = fileURLToPath(import.meta.url);
  const schema = `rs_bench_once_${process.pid}`;
  const work = await mkdtemp(join(tmpdir(), 'rs-bench-once-'));
  const store = await openPgStore({ url: pgUrl, schema });
  interface Result {
    ms: number;
    cpuMs: number;
    sha: string;
    generated: number;
  }
  const child = (site: string) => {
    const c = spawn(
      process.execPath,
      [...process.execArgv, self, '--child', '--schema', schema, '--site', site, '--resources', String(resources)],
      {
        stdio: ['pipe', 'pipe', 'inherit'],
      },
    );
    const lines = createInterface({ input: c.stdout! })[Symbol.asyncIterator]();
    return {
      ready: lines.next(),
      result: async (): Promise<Result> => {
        c.stdin!.write('go\n');
        const { value } = await lines.next();
        c.stdin!.end();
        return JSON.parse(String(value)) as Result;
      },
    };
  };
  const median = (xs: number[]): number => {
    const s = [...xs].sort((a, b) => a - b);
    return s[Math.floor(s.length / 2)]!;
  };
  try {
    const t0 = performance.now();
    await fillInventory(store, resources);
    process.stdout.write(
      `${resources.toLocaleString('en')} resources filled in ${((performance.now() - t0) / 1000).toFixed(1)} s; ${instances} processes, ${rounds} rounds; load ${loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')}\n`,
    );
    // What generating once adds to each generation: a lock taken and given back, and the saved state read and
    // written back (under a second lock).
    const lockTimes: number[] = [];
    const stateTimes: number[] = [];
    for (let i = 0; i < 200; i++) {
      let t = performance.now();
      const l = await store.lockShared(`bench ${i % 7}`, 1000);
      await l!.release();
      lockTimes.push(performance.now() - t);
      t = performance.now();
      const m = await store.lockShared('bench state', 1000);
      const v = await store.getMeta('bench state');
      await store.setMeta('bench state', `${v ?? ''}x`.slice(-100));
      await m!.release();
      stateTimes.push(performance.now() - t);
    }
    process.stdout.write(
      `per generation: lock + release median ${median(lockTimes).toFixed(2)} ms; saved state read + write under its lock median ${median(stateTimes).toFixed(2)} ms (200 each)\n`,
    );
    const seq: Record<string, number[][]> = { shared: [], separate: [] };
    const together: Record<string, { slowest: number[]; cpu: number[]; generated: number[]; same: number[] }> = {
      shared: { slowest: [], cpu: [], generated: [], same: [] },
      separate: { slowest: [], cpu: [], generated: [], same: [] },
    };
    let n = 0;
    for (let r = 0; r < rounds; r++)
      for (const way of r % 2 === 0 ? ['shared', 'separate'] : ['separate', 'shared']) {
        // Sequential: each process asks once the one before has its part.
        const site = (i: number): string => join(work, `site-${++n}${way === 'shared' ? '' : `-${i}`}`);
        const base = site(0);
        let cs = Array.from({ length: instances }, (_, i) => child(way === 'shared' ? base : `${base}-${i}`));
        await Promise.all(cs.map((c) => c.ready));
        const times: number[] = [];
        for (const c of cs) times.push((await c.result()).ms);
        seq[way]!.push(times);
        // At once.
        const base2 = site(0);
        cs = Array.from({ length: instances }, (_, i) => child(way === 'shared' ? base2 : `${base2}-${i}`));
        await Promise.all(cs.map((c) => c.ready));
        const res = await Promise.all(cs.map((c) => c.result()));
        together[way]!.slowest.push(Math.max(...res.map((x) => x.ms)));
        together[way]!.cpu.push(res.reduce((a, x) => a + x.cpuMs, 0));
        together[way]!.generated.push(res.reduce((a, x) => a + x.generated, 0));
        together[way]!.same.push(new Set(res.map((x) => x.sha)).size === 1 ? 1 : 0);
        process.stdout.write(
          `round ${r + 1} ${way.padEnd(8)} sequential ${times.map((t) => t.toFixed(0)).join(' / ')} ms; at once slowest ${Math.max(...res.map((x) => x.ms)).toFixed(0)} ms, CPU ${res.reduce((a, x) => a + x.cpuMs, 0).toFixed(0)} ms, generations ${res.reduce((a, x) => a + x.generated, 0)}, identical bytes ${new Set(res.map((x) => x.sha)).size === 1}; load ${loadavg()[0]!.toFixed(1)}\n`,
        );
      }
    for (const way of ['separate', 'shared']) {
      const s = seq[way]!;
      const per = Array.from({ length: instances }, (_, i) => median(s.map((t) => t[i]!)));
      const t = together[way]!;
      process.stdout.write(
        `${way.padEnd(8)} medians: sequential ${per.map((x, i) => `#${i + 1} ${x.toFixed(0)} ms`).join(', ')}; at once: slowest ${median(t.slowest).toFixed(0)} ms, CPU summed ${median(t.cpu).toFixed(0)} ms, generations ${median(t.generated)}, identical bytes in ${t.same.reduce((a, b) => a + b, 0)}/${t.same.length} rounds\n`,
      );
    }
  } finally {
    await store.dropSchema().catch(() => {});
    await rm(work, { recursive: true, force: true });
  }
}
