// Same-run A/B of two builds on the dump ways of the WAN benchmark (issue 14): Resource Dump baseline and
// incremental runs over a Change Dump, against `serve` and a static `publish` site behind bench/wan/proxy.ts.
//
//   node --import tsx bench/wan/dumps-ab.ts --cli A/dist/src/cli/main.js,B/dist/src/cli/main.js
//        [--rtt 0,20] [--runs 3] [--files 2000] [--dump-max-files N] [--bandwidth BYTES_PER_S]
//
// Unlike run.ts, every incremental round changes the files ONCE and then times each build on its own copy
// (each copy sees the same changes), the builds' order alternating round by round; before the timed runs the
// Sources have published the Change Dump for the changes (`publish` is run; `serve`'s changedump.xml is asked
// for directly until its packages reach the changes), so the figures time the Destination, not the Source's
// generation. Sources: `serve` and `publish` of the LAST build. `--dump-max-files N`: packages of N files at
// most (several packages per dump: downloading the next package while one is applied shows). `--bandwidth N`:
// each direction of each Source's link carries N bytes/s at most (a package's body then takes time to arrive:
// applying its files as they arrive shows). Load (uptime) is printed with each round trip.
import { spawnSync } from 'node:child_process';
import { cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { type Summary, changeFiles as changeFiles_, load, makeCollection, median, runSync, startServe } from './lib.js';
import { startProxy } from './proxy.js';
import { startStaticServer } from './static-server.js';

const args = process.argv.slice(2);
const value = (name: string, fallback: string): string => {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] !== undefined ? (args[i + 1] as string) : fallback;
};
const CLIS = value('--cli', '')
  .split(',')
  .filter((c) => c !== '')
  .map((c) => resolve(c));
if (CLIS.length === 0) throw new Error('--cli A,B: the compiled CLIs to compare');
const SOURCE_CLI = CLIS[CLIS.length - 1] as string;
const RTTS = value('--rtt', '0,20').split(',').map(Number);
const RUNS = Number(value('--runs', '3'));
const FILES = Number(value('--files', '2000'));
const CHANGES = Math.min(1000, Math.floor(FILES / 2));
const MAX_FILES = value('--dump-max-files', '');
const BANDWIDTH = Number(value('--bandwidth', '0'));
const SIZE = 2048;
const label = (i: number): string => String.fromCharCode(65 + i);
let round = 0;
const changeFiles = (dir: string): Promise<void> => changeFiles_(dir, round++, FILES, CHANGES, SIZE);
const sync = async (cli: string, url: string, dir: string, extra: string[]): Promise<Summary> =>
  (await runSync(cli, url, dir, extra)).summary;

/** Entries of the manifests of a Change Dump's packages (asked for directly: the Source generates it first). */
async function changeDumpEntries(origin: string): Promise<number> {
  const text = async (u: string): Promise<string> => (await fetch(u.replace(/^http:\/\/[^/]+/, origin))).text();
  const doc = await text(`${origin}/resourcesync/default/changedump.xml`);
  let n = 0;
  for (const m of doc.matchAll(/rel="contents" href="([^"]+)"/g))
    n += ((await text(m[1] as string)).match(/<url>/g) ?? []).length;
  return n;
}

async function main(): Promise<void> {
  const tmp = await mkdtemp(join(tmpdir(), 'rs-dumps-ab-'));
  try {
    const staticColl = join(tmp, 'collection-static');
    const serveColl = join(tmp, 'collection-serve');
    const site = join(tmp, 'site');
    await makeCollection(staticColl, FILES, SIZE);
    await cp(staticColl, serveColl, { recursive: true });
    const staticProxy = await startProxy();
    const serveProxy = await startProxy();
    const { server, port: staticPort } = await startStaticServer(site);
    staticProxy.set({ targetPort: staticPort });
    const staticUrl = `http://127.0.0.1:${staticProxy.port}/`;
    const limits = MAX_FILES === '' ? [] : ['--dump-max-files', MAX_FILES];
    const publish = (): void => {
      const p = spawnSync(
        process.execPath,
        [
          SOURCE_CLI,
          'publish',
          staticColl,
          '--out',
          site,
          '--base-url',
          staticUrl,
          '--copy-resources',
          '--json',
          ...limits,
        ],
        { encoding: 'utf8' },
      );
      if (p.status !== 0) throw new Error(`publish: ${p.stdout}${p.stderr}`);
    };
    publish();
    const serveUrl = `http://127.0.0.1:${serveProxy.port}/`;
    const serve = await startServe(SOURCE_CLI, serveColl, join(tmp, 'serve-state'), serveUrl);
    serveProxy.set({ targetPort: serve.port });
    const serveDirect = `http://127.0.0.1:${serve.port}`;
    const sources = [
      { name: 'serve', url: serveUrl, proxy: serveProxy, coll: serveColl },
      { name: 'publish', url: staticUrl, proxy: staticProxy, coll: staticColl },
    ];
    let n = 0;
    const fresh = (): string => join(tmp, `copy-${n++}`);
    // Warm-up, and each build's copy for the incremental runs.
    const incDirs = new Map<string, string>();
    for (const s of sources)
      for (const c of CLIS) {
        await sync(c, s.url, fresh(), ['--baseline']);
        const d = fresh();
        await sync(c, s.url, d, ['--baseline', '--no-dumps']);
        incDirs.set(`${s.name} ${c}`, d);
      }
    let serveDumped = await changeDumpEntries(serveDirect);
    process.stdout.write(
      `# dump ways, ${FILES} x 2 KB, incremental ${CHANGES} changes, ${RUNS} runs per build; ${CLIS.map((c, i) => `[${label(i)}] ${c}`).join(', ')}${MAX_FILES === '' ? '' : `; packages of at most ${MAX_FILES} files`}${BANDWIDTH > 0 ? `; links of ${BANDWIDTH} bytes/s` : ''}\n`,
    );
    for (const rtt of RTTS) {
      for (const s of sources) s.proxy.set({ rttMs: rtt, bandwidthBytesPerSec: BANDWIDTH });
      const results = new Map<string, number[]>();
      const add = (k: string, ms: number): void => {
        results.set(k, [...(results.get(k) ?? []), ms]);
      };
      const loadBefore = load();
      for (let r = 0; r < RUNS; r++) {
        // The builds' order alternates: A B, then B A, ...
        const order = CLIS.map((_, i) => i);
        if (r % 2 === 1) order.reverse();
        for (const s of sources)
          for (const i of order) {
            const x = await sync(CLIS[i] as string, s.url, fresh(), ['--baseline']);
            if (x.counts.created !== FILES || !x.via.includes('dump'))
              throw new Error(`baseline: ${JSON.stringify(x)}`);
            add(`${s.name} Resource Dump baseline [${label(i)}]`, x.elapsedMs);
          }
        for (const s of sources) {
          await changeFiles(s.coll);
          if (s.name === 'publish') publish();
          else {
            const target = serveDumped + CHANGES;
            const end = Date.now() + 120_000;
            while ((await changeDumpEntries(serveDirect)) < target) {
              if (Date.now() > end) throw new Error('serve: the Change Dump never carried the changes');
              await new Promise((res) => setTimeout(res, 200));
            }
            serveDumped = target;
          }
          for (const i of order) {
            const x = await sync(CLIS[i] as string, s.url, incDirs.get(`${s.name} ${CLIS[i]}`) as string, [
              '--incremental',
            ]);
            if (x.counts.updated !== CHANGES || x.counts.failed !== 0 || !x.via.includes('dump'))
              throw new Error(`incremental: ${JSON.stringify(x)}`);
            add(`${s.name} incremental ${CHANGES} changes, Change Dump [${label(i)}]`, x.elapsedMs);
          }
        }
      }
      process.stdout.write(`\n## round trip ${rtt} ms (load before ${loadBefore}, after ${load()})\n`);
      process.stdout.write('| way | run ms (median) | per s |\n|---|---|---|\n');
      for (const [k, ms] of [...results].sort(([a], [b]) => (a < b ? -1 : 1))) {
        const m = median(ms);
        const count = k.includes('incremental') ? CHANGES : FILES;
        process.stdout.write(
          `| ${k} | ${m.toFixed(0)} (${ms.map((x) => x.toFixed(0)).join(', ')}) | ${((count / m) * 1000).toFixed(0)} |\n`,
        );
      }
    }
    serve.child.kill('SIGTERM');
    server.close();
    server.closeAllConnections();
    await staticProxy.close();
    await serveProxy.close();
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

await main();
