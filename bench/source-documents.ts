/**
 * Generating the Resource List Index of a large store, with the peak RSS of the process.
 *
 *   node --import tsx bench/source-documents.ts [--resources 1000000]
 *
 * Fills a SQLite store with synthetic resources (inventory only), then generates the Resource List (an
 * Index + parts of 50,000) and the Change List; prints the time, the entries per second and the peak RSS
 * (sampled every 10 ms). Data in a temp dir, deleted.
 */
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openSqliteStore, Source } from '../src/source/index.js';
import { fillInventory } from './synthetic.js';

const args = process.argv.slice(2);
const opt = (name: string, dflt: number): number => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : dflt;
};
const total = opt('resources', 1_000_000);
let peak = 0;
const sampler = setInterval(() => {
  peak = Math.max(peak, process.memoryUsage().rss);
}, 10);
const mb = (n: number): string => `${(n / (1 << 20)).toFixed(0)} MB`;

const work = await mkdtemp(join(tmpdir(), 'rs-bench-docs-'));
try {
  let store = await openSqliteStore({ path: join(work, 'source.db') });
  let t = performance.now();
  await fillInventory(store, total);
  const fillMs = performance.now() - t;
  // Reopened, as a server finds it (the WAL checkpointed on close).
  await store.close();
  store = await openSqliteStore({ path: join(work, 'source.db') });
  global.gc?.();
  const before = process.memoryUsage().rss;
  process.stdout.write(
    `filled ${total} resources in ${(fillMs / 1000).toFixed(1)} s; RSS before generation ${mb(before)}\n`,
  );
  peak = before;
  const source = await Source.open({ store, baseUrl: 'http://localhost/', siteDir: join(work, 'site') });
  t = performance.now();
  const cpu0 = process.cpuUsage();
  const doc = await source.document('/resourcesync/default/resourcelist.xml');
  const genMs = performance.now() - t;
  const cpu = process.cpuUsage(cpu0);
  const cpuMs = (cpu.user + cpu.system) / 1000;
  const parts = Math.ceil(total / 50_000);
  const partSize = (await stat(join(work, 'site', 'resourcesync', 'default', 'resourcelist-0001.xml'))).size;
  process.stdout.write(
    `resource list index + ${parts} parts generated in ${(genMs / 1000).toFixed(1)} s ` +
      `(${((total / genMs) * 1000).toFixed(0)} entries/s; a part is ${mb(partSize)}; index ${doc?.length} B); ` +
      `peak RSS ${mb(peak)}; CPU ${(cpuMs / 1000).toFixed(1)} s (load ${(await import('node:os')).loadavg()[0]!.toFixed(1)})\n`,
  );
  t = performance.now();
  for (let i = 0; i < 100; i++)
    await source.document(`/resourcesync/default/resourcelist-${String((i % parts) + 1).padStart(4, '0')}.xml`);
  process.stdout.write(`cached part lookup: ${((performance.now() - t) / 100).toFixed(2)} ms per request\n`);
  await source.close();
  await store.close();
} finally {
  clearInterval(sampler);
  await rm(work, { recursive: true, force: true });
}
