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
 * Run: `node --import tsx bench/source-get.ts [--files 10000] [--runs 3] [--size 2048] [--order list|numeric|random]`
 * Profile the Source: `SOURCE_GET_PROFILE='--cpu-prof --cpu-prof-dir=/tmp/prof' node --import tsx bench/source-get.ts`
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
  await answer(url, async () => {
    await server.close();
    await site.close();
  });
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

/** Prints the base URL, then answers `cpu` with this process's CPU time (µs) until stdin closes. */
async function answer(url: string, close: () => Promise<void>): Promise<void> {
  process.stdout.write(`${JSON.stringify({ url })}\n`);
  for await (const line of createInterface({ input: process.stdin })) {
    if (line === 'cpu') {
      const c = process.cpuUsage();
      process.stdout.write(`${JSON.stringify({ cpu: c.user + c.system, sys: c.system })}\n`);
    }
  }
  await close();
}

// ---------------------------------------------------------------------------------------------- parent

interface Child {
  readonly process: ChildProcess;
  readonly url: string;
  cpu(): Promise<{ cpu: number; sys: number }>;
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
  };
}

async function stopChild(c: Child): Promise<void> {
  const exited = new Promise((r) => c.process.once('exit', r));
  c.process.stdin!.end();
  await exited;
}

/** GETs every path once (IN_FLIGHT at a time); returns seconds. Throws on a status other than 200 or a short body. */
async function fetchAll(pool: Pool, paths: readonly string[]): Promise<number> {
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
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
  return (performance.now() - t0) / 1000;
}

interface Figures {
  rps: number;
  cpuUs: number;
  sysUs: number;
}

async function measure(c: Child, paths: readonly string[]): Promise<Figures> {
  const pool = new Pool(c.url, { connections: CONNECTIONS, pipelining: 1 });
  try {
    // Connections opened before the clock starts.
    await fetchAll(pool, paths.slice(0, CONNECTIONS * 2));
    const cpu0 = await c.cpu();
    const seconds = await fetchAll(pool, paths);
    const cpu1 = await c.cpu();
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

async function main(): Promise<void> {
  const work = await mkdtemp(join(tmpdir(), 'rs-bench-get-'));
  try {
    const sets = RUNS + 1;
    const body = Buffer.alloc(SIZE, 'x');
    for (let s = 0; s < sets; s++)
      for (let k = 0; k < Math.ceil(N / 1000); k++)
        await mkdir(join(work, 'collection', `res${s}`, String(k)), { recursive: true });
    for (let s = 0; s < sets; s++) {
      const writes: Promise<void>[] = [];
      for (let i = 0; i < N; i++) writes.push(writeFile(join(work, 'collection', relPath(s, i)), body));
      await Promise.all(writes);
    }
    const pathsOf = (s: number) => {
      const paths = Array.from({ length: N }, (_, i) => `/${relPath(s, i)}`);
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
    const t0 = performance.now();
    const source = await startChild('source', work);
    // The start-up scan runs after listening: wait until a resource is served.
    for (;;) {
      const r = await fetch(`${source.url}${relPath(0, 0)}`).catch(() => undefined);
      await r?.arrayBuffer();
      if (r?.status === 200) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    process.stdout.write(
      `# Source GET of ${SIZE} B resources: ${N} per run, ${RUNS} runs (median), undici Pool ${CONNECTIONS} connections, ${IN_FLIGHT} in flight, ${ORDER} order; ${sets * N} files scanned in ${((performance.now() - t0) / 1000).toFixed(1)} s; load average ${loadavg()
        .map((x) => x.toFixed(2))
        .join(' ')}\n`,
    );
    const bare = await startChild('bare', work);
    const bareSync = await startChild('bare-sync', work);
    await measure(bare, pathsOf(0)); // warm-up
    await measure(bareSync, pathsOf(0));
    await measure(source, pathsOf(0));
    const first = { rps: [] as number[], cpuUs: [] as number[], sysUs: [] as number[] };
    const repeat = { rps: [] as number[], cpuUs: [] as number[], sysUs: [] as number[] };
    const floor = { rps: [] as number[], cpuUs: [] as number[], sysUs: [] as number[] };
    const floorSync = { rps: [] as number[], cpuUs: [] as number[], sysUs: [] as number[] };
    for (let run = 1; run <= RUNS; run++) {
      const paths = pathsOf(run);
      for (const [fig, c] of [
        [first, source],
        [repeat, source],
        [floor, bare],
        [floorSync, bareSync],
      ] as const) {
        const f = await measure(c, paths);
        fig.rps.push(f.rps);
        fig.cpuUs.push(f.cpuUs);
        fig.sysUs.push(f.sysUs);
      }
    }
    await stopChild(source);
    await stopChild(bare);
    await stopChild(bareSync);
    process.stdout.write(`our Source, first GET of each path: ${fmt(first)}\n`);
    process.stdout.write(`our Source, repeat GET:             ${fmt(repeat)}\n`);
    process.stdout.write(`bare node:http + fs.readFile:       ${fmt(floor)}\n`);
    process.stdout.write(`bare node:http + fs.readFileSync:   ${fmt(floorSync)}\n`);
    const ratio = (a: typeof first, b: typeof first) => (median(a.cpuUs) / median(b.cpuUs)).toFixed(2);
    process.stdout.write(
      `ratio of CPU per GET, ours / bare readFile: first ${ratio(first, floor)}x, repeat ${ratio(repeat, floor)}x; ours / bare readFileSync: first ${ratio(first, floorSync)}x, repeat ${ratio(repeat, floorSync)}x; load average now ${loadavg()
        .map((x) => x.toFixed(2))
        .join(' ')}\n`,
    );
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

const [mode, dir] = process.argv.slice(2);
if (mode === 'source') await serveSource(dir!);
else if (mode === 'bare') await serveBare(dir!, false);
else if (mode === 'bare-sync') await serveBare(dir!, true);
else await main();
