/**
 * CPU cost of our Source's HTTP server per GET of a small resource file, as a Destination harvests them: an
 * undici Pool of 16 keep-alive connections (pipelining 1), 32 requests in flight, every resource fetched once.
 *
 * The server runs in a child process (`serve` mode of this script) exactly as `bench/destination-server.ts real`
 * starts it (listening first, the directory Source resolved into it). The child reports its own
 * `process.cpuUsage()` over stdin/stdout, so the figure is the server's CPU (all threads: the libuv pool too).
 * Baselines in the same run: a bare `node:http` server answering each path with `fs.readFile` (4 round trips
 * through the thread pool), and one with `fs.readFileSync` (the floor of any node:http server: no checks, no
 * validators, two headers).
 *
 * The tree holds R+1 disjoint sets of N files (2 KB, in folders of 1,000, as the Destination benchmark): one set
 * warms the server up; each timed run then fetches a set never requested before ("first GET" of each path, what a
 * harvest does), and fetches it a second time ("repeat GET", e.g. a later audit).
 *
 * Paths are asked for in the Resource List's order (binary order of the path, which is the store's), as a
 * Destination harvests a list; `--order numeric` asks r0, r1, r2, ... instead, `--order random` in a fixed
 * shuffle (no relation to the store's order: the record cache's read-ahead soon stops).
 *
 * The incremental pattern (a Destination reading Change Lists GETs the files that just changed): R more sets of
 * N files; in each run, C = min(1,000, N/7) files of one of them, every 7th (`bench/destination-server.ts real`
 * changes files `(k*7) % n`), are rewritten with new bytes of the same length, the whole tree is rescanned
 * (`site.scan()`, then `site.source.settled()`: the Change Lists regenerated), and exactly those files are then
 * fetched in the list's order ("just-changed"), and once more ("just-changed, repeat"). Baselines of the same
 * run: C files of the same set, never rewritten, in the same sparse pattern ("sparse unchanged"), and the
 * same two at one request in flight (a Destination that writes every file is much slower than this client:
 * the Source then answers one request per wake-up), so that what comes from the files having just changed is
 * told apart from what comes from the sparse pattern and from the request rate; with the harvest part, the
 * bare `fs.readFileSync` server at one request in flight too (the floor of any node:http server at that rate).
 *
 * Run: `node --import tsx bench/source-get.ts [--files 10000] [--runs 3] [--size 2048] [--order list|numeric|random]
 *   [--part all|harvest|incremental]`
 * Profile the Source: `SOURCE_GET_PROFILE='--cpu-prof --cpu-prof-dir=/tmp/prof' node --import tsx bench/source-get.ts`,
 * or one profile per measured phase (`<dir>/<phase>-<run>.cpuprofile`, sampling every 100 µs):
 * `SOURCE_GET_PROFILE_PHASES=/tmp/prof node --import tsx bench/source-get.ts`
 *
 * @module
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { createServer, type ServerResponse } from 'node:http';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { handleProfileCommand } from './profiler.js';

const SELF = fileURLToPath(import.meta.url);
const NODE_ARGS = SELF.endsWith('.ts') ? ['--import', 'tsx'] : [];

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}

const N = arg('files', 10_000);
const RUNS = arg('runs', 3);
const SIZE = arg('size', 2048);
/**
 * `list`: the Resource List's order (binary on the path), as a Destination harvests; `numeric`: r0, r1, r2, ...;
 * `random`: shuffled (the same shuffle every run).
 */
const ORDER = process.argv.includes('--order') ? process.argv[process.argv.indexOf('--order') + 1] : 'list';
/** `--part harvest` or `--part incremental` measures only that part (default both). */
const PART = process.argv.includes('--part') ? process.argv[process.argv.indexOf('--part') + 1] : 'all';
const CONNECTIONS = 16;
const IN_FLIGHT = 32;

/** The path (relative to the collection) of file i of set s. */
function relPath(s: number, i: number): string {
  return `res${s}/${Math.floor(i / 1000)}/r${i}.txt`;
}

// ---------------------------------------------------------------------------------------------- child modes

async function serveSource(dir: string): Promise<void> {
  const { openDirectorySource } = await import('../src/source/directory.js');
  const { createSourceServer } = await import('../src/source/server.js');
  type Site = Awaited<ReturnType<typeof openDirectorySource>>;
  let resolveSite: (s: Site) => void = () => undefined;
  const server = createSourceServer(new Promise<Site>((r) => (resolveSite = r)));
  const { url } = await server.listen(0, '127.0.0.1');
  const site = await openDirectorySource({
    dir: join(dir, 'collection'),
    baseUrl: url,
    stateDir: join(dir, 'state'),
    fsync: false,
  });
  resolveSite(site);
  const collection = join(dir, 'collection');
  let round = 0;
  await answer(
    url,
    async () => {
      await server.close();
      await site.close();
    },
    async (cmd) => {
      if (cmd.cmd !== 'rewrite') return false;
      // New bytes, same length (a changed file as bench/destination-server.ts makes them), then a full rescan
      // and the background regeneration of the documents, as before a Destination's incremental run.
      round++;
      await Promise.all(
        (cmd.paths ?? []).map((rel) => {
          const body = Buffer.alloc(SIZE, 'x');
          body.write(`round ${round} `, 0);
          return writeFile(join(collection, rel), body);
        }),
      );
      const stats = await site.scan();
      await site.source.settled();
      process.stdout.write(`${JSON.stringify({ ok: true, updated: stats.updated })}\n`);
      return true;
    },
  );
}

async function serveBare(dir: string, sync: boolean): Promise<void> {
  const root = join(dir, 'collection');
  const send = (res: ServerResponse, data: Buffer): void => {
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': data.length });
    res.end(data);
  };
  const missing = (res: ServerResponse): void => {
    res.writeHead(404, { 'content-length': 0 });
    res.end();
  };
  const server = createServer((req, res) => {
    const path = join(root, decodeURIComponent((req.url ?? '/').split('?')[0]!));
    if (sync) {
      let data: Buffer;
      try {
        data = readFileSync(path);
      } catch {
        missing(res);
        return;
      }
      send(res, data);
    } else
      readFile(path).then(
        (data) => send(res, data),
        () => missing(res),
      );
  });
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  await answer(`http://127.0.0.1:${port}/`, async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });
}

/** A command of the parent to a child (one JSON object a line; `cpu` is the plain word). */
interface Command {
  readonly cmd: string;
  /** `rewrite`: paths relative to the collection. */
  readonly paths?: readonly string[];
  /** `profile-stop`: where to write the profile. */
  readonly file?: string;
}

/**
 * Prints the base URL, then answers `cpu` with this process's CPU time (µs), `profile-start` / `profile-stop`,
 * and what `other` takes, until stdin closes.
 */
async function answer(
  url: string,
  close: () => Promise<void>,
  other: (cmd: Command) => Promise<boolean> = async () => false,
): Promise<void> {
  process.stdout.write(`${JSON.stringify({ url })}\n`);
  for await (const line of createInterface({ input: process.stdin })) {
    if (line === 'cpu') {
      const c = process.cpuUsage();
      process.stdout.write(`${JSON.stringify({ cpu: c.user + c.system, sys: c.system })}\n`);
      continue;
    }
    const cmd = JSON.parse(line) as Command;
    if (!(await handleProfileCommand(cmd, 100))) {
      if (!(await other(cmd))) throw new Error(`unknown command ${line}`);
      continue;
    }
    process.stdout.write(`${JSON.stringify({ ok: true })}\n`);
  }
  await close();
}

// ---------------------------------------------------------------------------------------------- parent

interface Child {
  readonly process: ChildProcess;
  readonly url: string;
  cpu(): Promise<{ cpu: number; sys: number }>;
  /** Sends a command and waits for its answer line. */
  send(cmd: Command): Promise<unknown>;
}

async function startChild(mode: 'source' | 'bare' | 'bare-sync', dir: string): Promise<Child> {
  // e.g. SOURCE_GET_PROFILE='--cpu-prof --cpu-prof-dir=/tmp/prof' to profile the Source's process.
  const extra = mode === 'source' ? (process.env.SOURCE_GET_PROFILE ?? '').split(' ').filter((x) => x !== '') : [];
  const child = spawn(process.execPath, [...extra, ...NODE_ARGS, SELF, mode, dir], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const first = await lines.next();
  if (first.done === true) throw new Error(`${mode} server did not start`);
  const { url } = JSON.parse(String(first.value)) as { url: string };
  return {
    process: child,
    url,
    async cpu() {
      child.stdin!.write('cpu\n');
      const next = await lines.next();
      return JSON.parse(String(next.value)) as { cpu: number; sys: number };
    },
    async send(cmd) {
      child.stdin!.write(`${JSON.stringify(cmd)}\n`);
      const next = await lines.next();
      if (next.done === true) throw new Error(`${mode} server exited`);
      return JSON.parse(String(next.value)) as unknown;
    },
  };
}

async function stopChild(c: Child): Promise<void> {
  const exited = new Promise((r) => c.process.once('exit', r));
  c.process.stdin!.end();
  await exited;
}

/** GETs every path once (`inFlight` at a time); returns seconds. Throws on a status other than 200 or a short body. */
async function fetchAll(pool: Pool, paths: readonly string[], inFlight = IN_FLIGHT): Promise<number> {
  let next = 0;
  const t0 = performance.now();
  const worker = async (): Promise<void> => {
    while (next < paths.length) {
      const path = paths[next++]!;
      const res = await pool.request({ method: 'GET', path });
      const body = Buffer.from(await res.body.arrayBuffer());
      if (res.statusCode !== 200 || body.length !== SIZE)
        throw new Error(`${path}: ${res.statusCode}, ${body.length} bytes`);
    }
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
  return (performance.now() - t0) / 1000;
}

interface Figures {
  rps: number;
  cpuUs: number;
  sysUs: number;
}

/** Where the Source child writes one profile per measured phase (SOURCE_GET_PROFILE_PHASES), if anywhere. */
const PROFILE_PHASES = process.env.SOURCE_GET_PROFILE_PHASES;

/**
 * CPU of `c` per GET of `paths`. `warm`: paths fetched first, untimed, to open the connections (default: the
 * first few of `paths`, for sets fetched whole). `profile`: name of the phase's profile (with PROFILE_PHASES).
 */
async function measure(
  c: Child,
  paths: readonly string[],
  options: { inFlight?: number; warm?: readonly string[]; profile?: string } = {},
): Promise<Figures> {
  const inFlight = options.inFlight ?? IN_FLIGHT;
  const pool = new Pool(c.url, { connections: Math.min(CONNECTIONS, inFlight), pipelining: 1 });
  try {
    // Connections opened before the clock starts.
    await fetchAll(pool, options.warm ?? paths.slice(0, CONNECTIONS * 2));
    const profiled = PROFILE_PHASES !== undefined && options.profile !== undefined;
    if (profiled) await c.send({ cmd: 'profile-start' });
    const cpu0 = await c.cpu();
    const seconds = await fetchAll(pool, paths, inFlight);
    const cpu1 = await c.cpu();
    if (profiled) await c.send({ cmd: 'profile-stop', file: join(PROFILE_PHASES, `${options.profile}.cpuprofile`) });
    return {
      rps: paths.length / seconds,
      cpuUs: (cpu1.cpu - cpu0.cpu) / paths.length,
      sysUs: (cpu1.sys - cpu0.sys) / paths.length,
    };
  } finally {
    await pool.close();
  }
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

function fmt(f: { rps: number[]; cpuUs: number[]; sysUs: number[] }): string {
  return `${Math.round(median(f.rps))} req/s, ${median(f.cpuUs).toFixed(1)} µs CPU/GET of which system ${median(f.sysUs).toFixed(1)}  (runs: ${f.cpuUs.map((x) => x.toFixed(0)).join(' / ')} µs)`;
}

type Series = { rps: number[]; cpuUs: number[]; sysUs: number[] };
const series = (): Series => ({ rps: [], cpuUs: [], sysUs: [] });
function push(s: Series, f: Figures): void {
  s.rps.push(f.rps);
  s.cpuUs.push(f.cpuUs);
  s.sysUs.push(f.sysUs);
}

async function main(): Promise<void> {
  const work = await mkdtemp(join(tmpdir(), 'rs-bench-get-'));
  try {
    // Sets 0..RUNS: harvests (0 warms up); sets RUNS+1..2*RUNS: the incremental pattern, one a run.
    const harvest = PART !== 'incremental';
    const incremental = PART !== 'harvest';
    const sets = 2 * RUNS + 1;
    const body = Buffer.alloc(SIZE, 'x');
    for (let s = 0; s < sets; s++)
      for (let k = 0; k < Math.ceil(N / 1000); k++)
        await mkdir(join(work, 'collection', `res${s}`, String(k)), { recursive: true });
    for (let s = 0; s < sets; s++) {
      const writes: Promise<void>[] = [];
      for (let i = 0; i < N; i++) writes.push(writeFile(join(work, 'collection', relPath(s, i)), body));
      await Promise.all(writes);
    }
    const order = (paths: string[], s: number): string[] => {
      if (ORDER === 'numeric') return paths;
      if (ORDER === 'random') {
        // Fisher-Yates with a fixed LCG: the same order every run.
        let x = 12345 + s;
        for (let i = paths.length - 1; i > 0; i--) {
          x = (Math.imul(x, 1103515245) + 12345) >>> 0;
          const j = x % (i + 1);
          [paths[i], paths[j]] = [paths[j]!, paths[i]!];
        }
        return paths;
      }
      return paths.sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
    };
    const pathsOf = (s: number) =>
      order(
        Array.from({ length: N }, (_, i) => `/${relPath(s, i)}`),
        s,
      );
    /** C files of set s: i = 7k + offset (k < C), as the changes of bench/destination-server.ts. */
    const changed = Math.max(1, Math.min(1000, Math.floor(N / 7)));
    const sparseOf = (s: number, offset: number) =>
      order(
        Array.from({ length: changed }, (_, k) => `/${relPath(s, 7 * k + offset)}`),
        s,
      );
    const t0 = performance.now();
    const source = await startChild('source', work);
    // The start-up scan runs after listening: wait until a resource is served.
    for (;;) {
      const r = await fetch(`${source.url}${relPath(0, 0)}`).catch(() => undefined);
      await r?.arrayBuffer();
      if (r?.status === 200) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const load = () =>
      loadavg()
        .map((x) => x.toFixed(2))
        .join(' ');
    process.stdout.write(
      `# Source GET of ${SIZE} B resources: ${N} per run, ${RUNS} runs (median), undici Pool ${CONNECTIONS} connections, ${IN_FLIGHT} in flight, ${ORDER} order; ${sets * N} files scanned in ${((performance.now() - t0) / 1000).toFixed(1)} s; load average ${load()}\n`,
    );
    const bare = harvest ? await startChild('bare', work) : undefined;
    const bareSync = harvest ? await startChild('bare-sync', work) : undefined;
    if (bare !== undefined && bareSync !== undefined) {
      await measure(bare, pathsOf(0)); // warm-up
      await measure(bareSync, pathsOf(0));
    }
    await measure(source, pathsOf(0));
    const warm = pathsOf(0).slice(0, CONNECTIONS * 2);
    const first = series();
    const repeat = series();
    const floor = series();
    const floorSync = series();
    const sparse = series();
    const sparseOne = series();
    const fresh = series();
    const freshOne = series();
    const freshRepeat = series();
    const floorSyncOne = series();
    let rescanMs = 0;
    for (let run = 1; run <= RUNS; run++) {
      if (harvest && bare !== undefined && bareSync !== undefined) {
        const paths = pathsOf(run);
        push(first, await measure(source, paths, { profile: `harvest-${run}` }));
        push(repeat, await measure(source, paths));
        push(floor, await measure(bare, paths));
        push(floorSync, await measure(bareSync, paths));
      }
      if (incremental) {
        const s = RUNS + run;
        push(sparse, await measure(source, sparseOf(s, 3), { warm, profile: `sparse-${run}` }));
        push(sparseOne, await measure(source, sparseOf(s, 4), { warm, inFlight: 1, profile: `sparse1-${run}` }));
        const rewrite = [...sparseOf(s, 0), ...sparseOf(s, 1)].map((p) => p.slice(1));
        const r0 = performance.now();
        const done = (await source.send({ cmd: 'rewrite', paths: rewrite })) as { updated: number };
        rescanMs = performance.now() - r0;
        if (done.updated !== rewrite.length)
          throw new Error(`rescan found ${done.updated} of ${rewrite.length} updates`);
        push(fresh, await measure(source, sparseOf(s, 0), { warm, profile: `changed-${run}` }));
        push(freshOne, await measure(source, sparseOf(s, 1), { warm, inFlight: 1, profile: `changed1-${run}` }));
        push(freshRepeat, await measure(source, sparseOf(s, 0), { warm }));
        if (bareSync !== undefined) push(floorSyncOne, await measure(bareSync, sparseOf(s, 5), { warm, inFlight: 1 }));
      }
    }
    await stopChild(source);
    if (bare !== undefined) await stopChild(bare);
    if (bareSync !== undefined) await stopChild(bareSync);
    const ratio = (a: Series, b: Series) => (median(a.cpuUs) / median(b.cpuUs)).toFixed(2);
    if (harvest) {
      process.stdout.write(`our Source, first GET of each path: ${fmt(first)}\n`);
      process.stdout.write(`our Source, repeat GET:             ${fmt(repeat)}\n`);
      process.stdout.write(`bare node:http + fs.readFile:       ${fmt(floor)}\n`);
      process.stdout.write(`bare node:http + fs.readFileSync:   ${fmt(floorSync)}\n`);
      process.stdout.write(
        `ratio of CPU per GET, ours / bare readFile: first ${ratio(first, floor)}x, repeat ${ratio(repeat, floor)}x; ours / bare readFileSync: first ${ratio(first, floorSync)}x, repeat ${ratio(repeat, floorSync)}x\n`,
      );
    }
    if (incremental) {
      process.stdout.write(
        `# incremental pattern: ${changed} files of a fresh set, every 7th, list order; rewrite + rescan of ${sets * N} files + regeneration took ${(rescanMs / 1000).toFixed(1)} s (last run)\n`,
      );
      process.stdout.write(`sparse unchanged, ${IN_FLIGHT} in flight:       ${fmt(sparse)}\n`);
      process.stdout.write(`just-changed, ${IN_FLIGHT} in flight:           ${fmt(fresh)}\n`);
      process.stdout.write(`just-changed, repeat, ${IN_FLIGHT} in flight:   ${fmt(freshRepeat)}\n`);
      process.stdout.write(`sparse unchanged, 1 in flight:         ${fmt(sparseOne)}\n`);
      process.stdout.write(`just-changed, 1 in flight:             ${fmt(freshOne)}\n`);
      if (harvest) process.stdout.write(`bare node:http + fs.readFileSync, 1 in flight: ${fmt(floorSyncOne)}\n`);
      process.stdout.write(
        `ratio of CPU per GET: just-changed / sparse unchanged ${ratio(fresh, sparse)}x (1 in flight: ${ratio(freshOne, sparseOne)}x); just-changed repeat / just-changed ${ratio(freshRepeat, fresh)}x${harvest ? `; sparse unchanged / list-order harvest ${ratio(sparse, first)}x, just-changed / list-order harvest ${ratio(fresh, first)}x; just-changed / bare readFileSync, 1 in flight ${ratio(freshOne, floorSyncOne)}x` : ''}\n`,
      );
    }
    process.stdout.write(`# load average now ${load()}\n`);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

const [mode, dir] = process.argv.slice(2);
if (mode === 'source') await serveSource(dir!);
else if (mode === 'bare') await serveBare(dir!, false);
else if (mode === 'bare-sync') await serveBare(dir!, true);
else await main();
