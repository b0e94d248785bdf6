// The WAN benchmark: our `sync` (Resource List and Resource Dump baselines, incremental runs over Change Lists
// and over a Change Dump) against our `serve` and against a static `publish` site, each behind a proxy that
// adds a round trip (bench/wan/proxy.ts), plus the one-request-at-a-time pattern of a sequential harvester as
// the reference; rates and ratios at each round trip, the ways alternating within one run.
//
//   npm run build && node --import tsx bench/wan/run.ts [--short] [--runs 3] [--rtt 0,20,100] [--files 2000]
//                                                         [--python] [--cli dist/src/cli/main.js] [--json]
//
// --short: one run of each way (the default is 3, medians printed). --python: also time the Python reference
// client's `resync-sync --baseline` once at the second round trip (needs /work/peers/resync or RESYNC_DIR).
// --cli: the compiled CLI to time; `--cli A,B` times two builds alternately in the same run (rows marked [A]
// and [B]; `serve` and `publish` are those of --serve-cli, default the last of --cli). Every `sync` is a
// fresh process (`resourcesync sync --json`): the rates are computed from the run's own elapsed time (the
// summary's elapsedMs), and the wall time of the process, Node's start-up included, is printed beside them.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Summary, changeFiles as changeFiles_, load, makeCollection, median, runSync, startServe } from './lib.js';
import { startProxy, type WanProxy } from './proxy.js';
import { sequentialHarvest } from './sequential.js';
import { startStaticServer } from './static-server.js';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..', '..');
const args = process.argv.slice(2);
const flag = (name: string): boolean => args.includes(name);
const value = (name: string, fallback: string): string => {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] !== undefined ? (args[i + 1] as string) : fallback;
};
const SHORT = flag('--short');
const RUNS = Number(value('--runs', SHORT ? '1' : '3'));
const RTTS = value('--rtt', '0,20,100').split(',').map(Number);
const FILES = Number(value('--files', '2000'));
const CHANGES = Math.min(1000, Math.floor(FILES / 2));
const SIZE = 2048;
const CLIS = value('--cli', join(root, 'dist', 'src', 'cli', 'main.js'))
  .split(',')
  .map((p) => resolve(p));
/** The build that runs `serve` and `publish` (the Sources are the same for every build timed). */
const CLI = resolve(value('--serve-cli', CLIS[CLIS.length - 1] as string));
/** The row label of a build in an A/B run. */
const tag = (i: number): string => (CLIS.length > 1 ? ` [${String.fromCharCode(65 + i)}]` : '');
const PYTHON = flag('--python');
/** `--only <text>`: only the ways whose name contains it (e.g. 'serve Resource List'), for a quick look. */
const ONLY = value('--only', '');
const want = (key: string): boolean => key.includes(ONLY);
const RESYNC_DIR = process.env['RESYNC_DIR'] ?? '/work/peers/resync';
/** Resources the sequential pattern fetches at each round trip (its rate does not depend on how many). */
const sequentialCount = (rtt: number): number =>
  Math.min(FILES, rtt === 0 ? FILES : Math.max(30, Math.round((SHORT ? 2000 : 4000) / rtt)));

for (const c of [...CLIS, CLI])
  if (!existsSync(c)) {
    process.stderr.write(`no compiled CLI at ${c}: run npm run build first (or pass --cli)\n`);
    process.exit(2);
  }

const cleanup: string[] = [];
let tmp = '';

let changeRound = 0;
/** Rewrites CHANGES files of the collection (a different slice each round). */
const changeFiles = (dir: string): Promise<void> => changeFiles_(dir, changeRound++, FILES, CHANGES, SIZE);

function cli(argv: string[]): { status: number | null; stdout: string; stderr: string } {
  return spawnSync(process.execPath, [CLI, ...argv], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
}

interface SyncResult {
  /** The run's own elapsed time (its summary's elapsedMs). */
  run: number;
  /** Wall time of the process. */
  wall: number;
  /** Most connections the Source's proxy saw open at once. */
  connections: number;
}

async function sync(
  proxy: WanProxy,
  url: string,
  dir: string,
  extra: string[],
  expect: (s: Summary) => boolean,
  build = CLIS[0] as string,
) {
  proxy.resetStats();
  const { summary: s, wall } = await runSync(build, url, dir, extra);
  if (!expect(s)) throw new Error(`sync ${extra.join(' ')}: unexpected ${JSON.stringify(s).slice(0, 1000)}`);
  return { run: s.elapsedMs, wall, connections: proxy.stats.maxOpen } satisfies SyncResult;
}

/** Counts the changes of the Source's Change Lists (fetched directly, not through the proxy). */
async function countChanges(origin: string): Promise<number> {
  const text = async (u: string): Promise<string> => (await fetch(u)).text();
  const locOf = (xml: string, cap?: string): string[] =>
    xml
      .split(/<url>|<sitemap>/)
      .slice(1)
      .filter((p) => cap === undefined || p.includes(`capability="${cap}"`))
      .map((p) => /<loc>([^<]+)<\/loc>/.exec(p)?.[1] ?? '');
  const desc = await text(`${origin}/.well-known/resourcesync`);
  const caps = await text(locOf(desc)[0]!.replace(/^http:\/\/[^/]+/, origin));
  const cl = locOf(caps, 'changelist')[0];
  if (cl === undefined) return 0;
  const xml = await text(cl.replace(/^http:\/\/[^/]+/, origin));
  if (!xml.includes('<sitemapindex')) return (xml.match(/<url>/g) ?? []).length;
  let n = 0;
  for (const part of locOf(xml))
    n += ((await text(part.replace(/^http:\/\/[^/]+/, origin))).match(/<url>/g) ?? []).length;
  return n;
}

async function waitFor(what: string, check: () => Promise<boolean>, ms = 120_000): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`timed out waiting for ${what}`);
}

async function main(): Promise<void> {
  tmp = await mkdtemp(join(tmpdir(), 'rs-wan-'));
  cleanup.push(tmp);
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
  const publish = (): void => {
    const p = cli(['publish', staticColl, '--out', site, '--base-url', staticUrl, '--copy-resources', '--json']);
    if (p.status !== 0) throw new Error(`publish: ${p.stdout}${p.stderr}`);
  };
  publish();
  const serveUrl = `http://127.0.0.1:${serveProxy.port}/`;
  const serve = await startServe(CLI, serveColl, join(tmp, 'serve-state'), serveUrl);
  serveProxy.set({ targetPort: serve.port });
  const serveDirect = `http://127.0.0.1:${serve.port}`;

  const sources = [
    { name: 'serve', url: serveUrl, proxy: serveProxy },
    { name: 'publish', url: staticUrl, proxy: staticProxy },
  ];
  let n = 0;
  const fresh = (): string => join(tmp, `copy-${n++}`);
  const created = (s: Summary): boolean => s.counts.created === FILES && s.counts.failed === 0;

  // Warm-up (untimed): the Sources build their dumps on first request, the file cache fills.
  for (const s of sources) for (const c of CLIS) await sync(s.proxy, s.url, fresh(), ['--baseline'], created, c);
  // The copies the incremental runs update, baselined once (one per build).
  const incDirs = new Map<string, string>();
  for (const s of sources)
    for (const c of CLIS) {
      const d = fresh();
      await sync(s.proxy, s.url, d, ['--baseline', '--no-dumps'], created, c);
      incDirs.set(`${s.name} ${c}`, d);
    }
  let initialServeChanges = await countChanges(serveDirect);

  const out: string[] = [];
  const say = (line: string): void => {
    out.push(line);
    process.stdout.write(`${line}\n`);
  };
  say(
    `# WAN benchmark: ${FILES} x ${SIZE / 1024} KB, incremental ${CHANGES} changes, ${RUNS} run(s) per way, CLI ${CLIS.map((c, i) => `${c.replace(`${root}/`, '')}${tag(i)}`).join(', ')}; Sources by ${CLI.replace(`${root}/`, '')}`,
  );
  const summary: Record<string, Record<string, number>> = {};
  for (const rtt of RTTS) {
    for (const s of sources) s.proxy.set({ rttMs: rtt });
    say(`\n## round trip ${rtt} ms (load ${load()})`);
    const results = new Map<string, SyncResult[]>();
    const add = (key: string, r: SyncResult): void => {
      results.set(key, [...(results.get(key) ?? []), r]);
    };
    const seq: number[] = [];
    for (let r = 0; r < RUNS; r++) {
      for (const s of sources)
        for (const [i, c] of CLIS.entries()) {
          if (want(`${s.name} Resource List baseline`))
            add(
              `${s.name} Resource List baseline${tag(i)}`,
              await sync(s.proxy, s.url, fresh(), ['--baseline', '--no-dumps'], created, c),
            );
          if (want(`${s.name} Resource Dump baseline`))
            add(
              `${s.name} Resource Dump baseline${tag(i)}`,
              await sync(
                s.proxy,
                s.url,
                fresh(),
                ['--baseline'],
                (x) => created(x) && x.via.some((v) => v.includes('dump')),
                c,
              ),
            );
        }
      // The sequential pattern against the static site.
      const sdir = fresh();
      const h = await sequentialHarvest(staticUrl, sdir, sequentialCount(rtt));
      seq.push(h.count / (h.ms / 1000));
      // Incremental runs: Change Lists, then a Change Dump, against each Source.
      for (const via of ['Change Lists', 'Change Dump'] as const) {
        for (const s of sources) {
          if (!want(`${s.name} incremental ${CHANGES} changes, ${via}`)) continue;
          // One round of changes for every build: each build's copy then has the same 1,000 changes to apply
          // (a round per build left the first build's changes out of the second's copy: 2,000 to apply).
          if (s.name === 'publish') {
            await changeFiles(staticColl);
            publish();
          } else {
            await changeFiles(serveColl);
            const target = initialServeChanges + CHANGES;
            await waitFor('serve to record the changes', async () => (await countChanges(serveDirect)) >= target);
            initialServeChanges = target;
          }
          for (const [i, c] of CLIS.entries()) {
            const extra = via === 'Change Lists' ? ['--incremental', '--no-dumps'] : ['--incremental'];
            add(
              `${s.name} incremental ${CHANGES} changes, ${via}${tag(i)}`,
              await sync(
                s.proxy,
                s.url,
                incDirs.get(`${s.name} ${c}`) as string,
                extra,
                (x) =>
                  x.operation === 'incremental' &&
                  x.counts.updated === CHANGES &&
                  x.counts.failed === 0 &&
                  (via === 'Change Lists' || x.via.some((v) => v.includes('dump'))),
                c,
              ),
            );
          }
        }
      }
    }
    const seqRate = median(seq);
    say(`| way | run ms (median) | per s | x sequential | wall ms | connections |`);
    say(`|---|---|---|---|---|---|`);
    const row: Record<string, number> = { sequential: seqRate };
    for (const [key, rs] of results) {
      const runMs = median(rs.map((x) => x.run));
      const count = key.includes('incremental') ? CHANGES : FILES;
      const rate = count / (runMs / 1000);
      row[key] = rate;
      say(
        `| ${key} | ${runMs.toFixed(0)} (${rs.map((x) => x.run.toFixed(0)).join(', ')}) | ${rate.toFixed(0)} | ${(rate / seqRate).toFixed(1)} | ${median(rs.map((x) => x.wall)).toFixed(0)} | ${Math.max(...rs.map((x) => x.connections))} |`,
      );
    }
    say(
      `| sequential (one request at a time, ${sequentialCount(rtt)} resources) | | ${seqRate.toFixed(0)} | 1.0 | | 1 |`,
    );
    summary[String(rtt)] = row;
    if (PYTHON && rtt === RTTS[1]) {
      const pdir = fresh();
      const t0 = performance.now();
      const p = spawnSync(
        '/usr/bin/python3',
        [
          join(RESYNC_DIR, 'resync-sync'),
          '--baseline',
          '--sitemap',
          `${staticUrl}resourcesync/default/resourcelist.xml`,
          staticUrl,
          pdir,
        ],
        { encoding: 'utf8', cwd: RESYNC_DIR },
      );
      const ms = performance.now() - t0;
      say(
        `resync --baseline (Python reference client), ${rtt} ms: ${p.status === 0 ? `${ms.toFixed(0)} ms wall, ${(FILES / (ms / 1000)).toFixed(0)}/s` : `failed: ${p.stderr.slice(-500)}`}`,
      );
    }
  }
  if (flag('--json')) process.stdout.write(`${JSON.stringify(summary)}\n`);
  serve.child.kill('SIGTERM');
  server.close();
  server.closeAllConnections();
  await staticProxy.close();
  await serveProxy.close();
}

try {
  await main();
} finally {
  for (const d of cleanup) await rm(d, { recursive: true, force: true });
}
