/**
 * SQLite against PostgreSQL in the same run: recording changes, generating the Resource List Index of a large
 * inventory (with the peak RSS), and serving a part warm.
 *
 *   RESOURCESYNC_TEST_PG=postgres://postgres@127.0.0.1:5432/test \
 *     node --import tsx bench/store-compare.ts [--changes 1000000] [--resources 1000000] [--batch 1000]
 *
 * Each store runs in a child process of its own (so each RSS is its own), one after the other: SQLite in a temp
 * dir, PostgreSQL in a fresh schema dropped afterwards. Per store it prints:
 * - `record`: --changes changes in batches of --batch (one transaction each, Change Lists rotating at 50,000),
 *   changes/s;
 * - `fill`: an inventory of --resources resources (no log entries, batches of 10,000);
 * - `generate`: the Resource List Index and its parts of 50,000 from a fresh Source (a snapshot streamed), entries/s,
 *   RSS before and peak RSS during generation (sampled every 10 ms): flat means it does not grow with the list;
 * - `serve warm`: a generated part asked for again (what a server does per request once documents are cached),
 *   median of 200.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openPgStore, openSqliteStore, Source } from '../src/source/index.js';
import type { ChangeInput, SourceStore } from '../src/source/store.js';
import { fillInventory, syntheticResource } from './synthetic.js';

const args = process.argv.slice(2);
const opt = (name: string, dflt: number): number => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : dflt;
};
const only = args.includes('--only') ? args[args.indexOf('--only') + 1] : undefined;
const changes = opt('changes', 1_000_000);
const resources = opt('resources', 1_000_000);
const batchSize = opt('batch', 1000);
const pgUrl = process.env.RESOURCESYNC_TEST_PG;
const mb = (n: number): string => `${(n / (1 << 20)).toFixed(0)} MB`;

if (only === undefined) {
  // Driver: one child per store.
  const self = fileURLToPath(import.meta.url);
  const stores = pgUrl === undefined ? ['sqlite'] : ['sqlite', 'postgres'];
  if (pgUrl === undefined) process.stdout.write('RESOURCESYNC_TEST_PG not set: SQLite only\n');
  process.stdout.write(
    `changes ${changes.toLocaleString('en')} (batches of ${batchSize}), resources ${resources.toLocaleString('en')}; load ${loadavg()[0]!.toFixed(1)}\n`,
  );
  for (const s of stores) {
    const child = spawn(process.execPath, [...process.execArgv, self, ...args, '--only', s], { stdio: 'inherit' });
    const code = await new Promise<number | null>((r) => child.on('exit', r));
    if (code !== 0) process.exitCode = 1;
  }
} else {
  let peak = 0;
  const sampler = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage().rss);
  }, 10);
  const work = await mkdtemp(join(tmpdir(), 'rs-bench-store-'));
  const schema = `rs_bench_${process.pid}`;
  const open = async (name: string): Promise<SourceStore> =>
    only === 'sqlite'
      ? openSqliteStore({ path: join(work, `${name}.db`) })
      : openPgStore({ url: pgUrl!, schema: `${schema}_${name}` });
  const say = (what: string): void => void process.stdout.write(`${only.padEnd(8)} ${what}\n`);
  const stores: SourceStore[] = [];
  try {
    // Recording changes (--changes 0 leaves it out).
    let t = performance.now();
    let ms = 0;
    if (changes > 0) {
      const log = await open('log');
      stores.push(log);
      for (let start = 0; start < changes; start += batchSize) {
        const batch: ChangeInput[] = [];
        for (let i = start; i < Math.min(changes, start + batchSize); i++)
          batch.push(syntheticResource(i % 100_000, i < 100_000 ? 'created' : 'updated'));
        await log.recordChanges(batch);
      }
      ms = performance.now() - t;
      say(
        `record   ${changes.toLocaleString('en')} changes in ${(ms / 1000).toFixed(1)} s: ${((changes / ms) * 1000).toFixed(0)} changes/s; head seq ${(await log.head()).seq}`,
      );
    }

    // Filling an inventory.
    let inv = await open('inv');
    stores.push(inv);
    t = performance.now();
    await fillInventory(inv, resources);
    ms = performance.now() - t;
    say(`fill     ${resources.toLocaleString('en')} resources in ${(ms / 1000).toFixed(1)} s`);
    await inv.close();
    inv = await open('inv');
    stores.push(inv);

    // Generating the Resource List Index.
    global.gc?.();
    const before = process.memoryUsage().rss;
    peak = before;
    const source = await Source.open({ store: inv, baseUrl: 'http://localhost/', siteDir: join(work, 'site') });
    t = performance.now();
    const cpu0 = process.cpuUsage();
    await source.document('/resourcesync/default/resourcelist.xml');
    ms = performance.now() - t;
    const cpu = process.cpuUsage(cpu0);
    const parts = Math.ceil(resources / 50_000);
    say(
      `generate index + ${parts} parts in ${(ms / 1000).toFixed(1)} s: ${((resources / ms) * 1000).toFixed(0)} entries/s, CPU ${((cpu.user + cpu.system) / 1e6).toFixed(1)} s; RSS before ${mb(before)}, peak ${mb(peak)}`,
    );

    // Serving a part warm.
    const times: number[] = [];
    for (let i = 0; i < 200; i++) {
      const part = `/resourcesync/default/resourcelist-${String((i % parts) + 1).padStart(4, '0')}.xml`;
      const t1 = performance.now();
      const doc = await source.document(part);
      times.push(performance.now() - t1);
      if (doc === undefined) throw new Error(`no ${part}`);
    }
    times.sort((a, b) => a - b);
    say(
      `serve warm part: median ${times[100]!.toFixed(2)} ms, p95 ${times[190]!.toFixed(2)} ms; RSS now ${mb(process.memoryUsage().rss)}`,
    );
    await source.close();
  } finally {
    clearInterval(sampler);
    for (const s of stores) await s.close().catch(() => {});
    if (only === 'postgres') {
      for (const name of ['log', 'inv']) {
        const s = await openPgStore({ url: pgUrl!, schema: `${schema}_${name}` }).catch(() => undefined);
        await s?.dropSchema();
      }
    }
    await rm(work, { recursive: true, force: true });
  }
}
