/**
 * Serving a large Resource List Index from a live Source server (issue 3, "Speed and memory"):
 * - 100,000 resources: time to first byte and whole-body time of a 50,000-entry part: on the first request
 *   ever (generation from the store), on the first request after a change (the previous complete version is
 *   served while a new one is generated when the list is big, see `backgroundAfterMs`), and warm (generated
 *   file served from the cache); the index too.
 *   Targets: first byte of a part <= 50 ms, whole part <= 300 ms.
 * - 1,000,000 resources in the store: peak RSS of the server process while it generates and serves the
 *   index and all 20 parts. Target <= 250 MB.
 *
 * The store is populated through the library API (`Source.record`, inventory only: the baseline), not with
 * real files; the server is a child process (so its RSS is its own), driven over loopback by this process.
 *
 * Run: `node --import tsx bench/source-serve.ts [--sizes 100000,1000000] [--runs 5]`
 *
 * @module
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { get } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { openSqliteStore, Source, type SourceSite } from '../src/source/index.js';
import { openGzipCache } from '../src/source/http/gzip-cache.js';
import { createSourceServer } from '../src/source/server.js';

const SELF = fileURLToPath(import.meta.url);
const NODE_ARGS = SELF.endsWith('.ts') ? ['--import', 'tsx'] : [];

async function openBenchSource(dir: string): Promise<Source> {
  const store = await openSqliteStore({ path: join(dir, 'source.db') });
  return Source.open({ store, baseUrl: 'http://bench.test/', siteDir: join(dir, 'site') });
}

function input(i: number, lastmodMs: number) {
  const hex = i.toString(16).padStart(8, '0');
  return {
    uri: `items/${hex.slice(0, 3)}/${hex}/bitstream-${i}.pdf`,
    change: 'created' as const,
    setName: 'default',
    length: 1000 + (i % 9000),
    type: 'application/pdf',
    hashes: { md5: hex.repeat(4), 'sha-256': hex.repeat(8) },
    lastmodMs,
  };
}

/** Child: records `n` resources (inventory only) in batches. */
async function populate(dir: string, n: number): Promise<void> {
  const source = await openBenchSource(dir);
  const t0 = Date.now();
  const batch = 10_000;
  for (let i = 0; i < n; i += batch) {
    const inputs = [];
    for (let k = i; k < Math.min(n, i + batch); k++) inputs.push(input(k, t0 - k * 1000));
    await source.record(inputs, false);
  }
  await source.close();
  process.stdout.write(`${JSON.stringify({ populated: n, ms: Date.now() - t0 })}\n`);
}

/** Child: serves the Source; a line "touch <i>" on stdin records one update (invalidating the documents). */
async function serve(dir: string): Promise<void> {
  const source = await openBenchSource(dir);
  const site: SourceSite = {
    baseUrl: source.baseUrl,
    sourceDescriptionUrl: source.sourceDescriptionUrl,
    document: (p) => source.document(p),
    resource: async () => undefined,
    capabilityListUrl: () => undefined,
    robotsTxt: () => source.robotsTxt(),
    onChange: (l) => source.onChange(l),
    close: () => source.close(),
  };
  const gzipCache = await openGzipCache({ dir: join(dir, 'gzip-cache') });
  const server = createSourceServer(site, { gzipCache });
  const { port } = await server.listen(0);
  process.stdout.write(`${JSON.stringify({ port })}\n`);
  for await (const line of createInterface({ input: process.stdin })) {
    const [cmd, arg] = line.split(' ');
    if (cmd === 'touch') {
      await source.record([{ ...input(Number(arg), Date.now()), change: 'updated' }], false);
      process.stdout.write(`${JSON.stringify({ touched: Number(arg) })}\n`);
    }
  }
  await server.close();
  await gzipCache.close();
  await source.close();
}

interface Timing {
  readonly status: number;
  readonly ttfbMs: number;
  readonly totalMs: number;
  readonly bytes: number;
  readonly body?: string;
}

function fetchTimed(port: number, path: string, keepBody = false, gzip = false): Promise<Timing & { cached: boolean }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const headers = gzip ? { 'Accept-Encoding': 'gzip' } : {};
    get({ host: '127.0.0.1', port, path, agent: false, headers }, (res) => {
      let ttfb = -1;
      let bytes = 0;
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => {
        if (ttfb < 0) ttfb = performance.now() - t0;
        bytes += c.length;
        if (keepBody) chunks.push(c);
      });
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          ttfbMs: ttfb < 0 ? performance.now() - t0 : ttfb,
          totalMs: performance.now() - t0,
          bytes,
          cached: res.headers['content-length'] !== undefined,
          ...(keepBody ? { body: Buffer.concat(chunks).toString() } : {}),
        }),
      );
      res.on('error', reject);
    }).on('error', reject);
  });
}

function lines(child: ChildProcess): AsyncIterator<string> {
  return createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
}

async function nextJson(it: AsyncIterator<string>): Promise<Record<string, unknown>> {
  const r = await it.next();
  if (r.done) throw new Error('child ended');
  return JSON.parse(r.value) as Record<string, unknown>;
}

function run(args: string[]): ChildProcess {
  return spawn(process.execPath, [...NODE_ARGS, SELF, ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
}

async function peakRssMb(pid: number): Promise<{ peak: number; now: number }> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kb = (k: string) => Number(new RegExp(`^${k}:\\s*(\\d+)`, 'm').exec(status)?.[1] ?? Number.NaN);
  return { peak: kb('VmHWM') / 1024, now: kb('VmRSS') / 1024 };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
};
const f = (x: number) => x.toFixed(1);

async function benchSize(n: number, runs: number): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'rs-bench-serve-'));
  try {
    const pop = run(['populate', dir, String(n)]);
    const popOut = await nextJson(lines(pop));
    console.log(`${n.toLocaleString('en')} resources recorded in ${popOut.ms} ms (inventory only)`);
    const server = run(['serve', dir]);
    const out = lines(server);
    const { port } = (await nextJson(out)) as { port: number };
    const pid = server.pid!;
    const part = '/resourcesync/default/resourcelist-0001.xml';
    const index = '/resourcesync/default/resourcelist.xml';

    // Cold: each run invalidates the documents (one update recorded), then asks for part 1 first.
    const cold: Timing[] = [];
    for (let r = 0; r < runs; r++) {
      if (r > 0) {
        server.stdin!.write(`touch ${r}\n`);
        await nextJson(out);
      }
      cold.push(await fetchTimed(port, part));
    }
    const warm: Timing[] = [];
    for (let r = 0; r < runs; r++) warm.push(await fetchTimed(port, part));
    const idx: Timing[] = [];
    for (let r = 0; r < runs; r++) idx.push(await fetchTimed(port, index, r === 0));
    console.log('  index timings', idx.map((t) => `${f(t.ttfbMs)}/${f(t.totalMs)}`).join(' '));
    const parts = [...(idx[0]!.body ?? '').matchAll(/<loc>([^<]+)<\/loc>/g)].map((m) => new URL(m[1]!).pathname);
    // Every part once (all generated by now), for the memory figure.
    let total = 0;
    const t0 = performance.now();
    for (const p of parts) total += (await fetchTimed(port, p)).bytes;
    const allMs = performance.now() - t0;
    // gzip: the first request compresses on the fly (and queues a cached copy), later ones read the copy.
    const gzFirst = await fetchTimed(port, part, false, true);
    let gzCached = gzFirst;
    for (let i = 0; i < 100 && !gzCached.cached; i++) {
      await new Promise((r) => setTimeout(r, 100));
      gzCached = await fetchTimed(port, part, false, true);
    }
    const gzWarm: Timing[] = [];
    for (let r = 0; r < runs; r++) gzWarm.push(await fetchTimed(port, part, false, true));
    const rss = await peakRssMb(pid);
    // The first run is the first generation ever; later ones follow a change (the previous, complete version
    // may be served while the new one is generated: see SourceOptions.backgroundAfterMs).
    const after = cold.length > 1 ? cold.slice(1) : cold;
    console.log(
      `  part 1 (${f(cold[0]!.bytes / 1e6)} MB, status ${cold[0]!.status}) first request ever: first byte ${f(cold[0]!.ttfbMs)} ms, ` +
        `whole ${f(cold[0]!.totalMs)} ms; first request after a change: first byte ${f(median(after.map((t) => t.ttfbMs)))} ms, ` +
        `whole ${f(median(after.map((t) => t.totalMs)))} ms (median of ${after.length})`,
    );
    console.log(
      `  part 1 warm: first byte ${f(median(warm.map((t) => t.ttfbMs)))} ms, whole ${f(median(warm.map((t) => t.totalMs)))} ms`,
    );
    console.log(
      `  index (${parts.length} parts) warm: first byte ${f(median(idx.slice(1).map((t) => t.ttfbMs)))} ms; ` +
        `all parts served in ${f(allMs)} ms (${f(total / 1e6)} MB)`,
    );
    console.log(
      `  part 1 gzip (${f(gzFirst.bytes / 1e6)} MB): on the fly first byte ${f(gzFirst.ttfbMs)} ms, whole ${f(gzFirst.totalMs)} ms; ` +
        `cached copy first byte ${f(median(gzWarm.map((t) => t.ttfbMs)))} ms, whole ${f(median(gzWarm.map((t) => t.totalMs)))} ms`,
    );
    console.log(`  server RSS: peak ${f(rss.peak)} MB, now ${f(rss.now)} MB`);
    server.stdin!.end();
    await new Promise((r) => server.on('exit', r));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const [cmd, a, b] = process.argv.slice(2);
  if (cmd === 'populate') return populate(a!, Number(b));
  if (cmd === 'serve') return serve(a!);
  const arg = (name: string, def: string) => {
    const i = process.argv.indexOf(`--${name}`);
    return i > 0 ? process.argv[i + 1]! : def;
  };
  const sizes = arg('sizes', '100000,1000000').split(',').map(Number);
  const runs = Number(arg('runs', '5'));
  console.log(`bench/source-serve: Node ${process.version}`);
  for (const n of sizes) await benchSize(n, n >= 1_000_000 ? Math.min(runs, 2) : runs);
}

await main();
