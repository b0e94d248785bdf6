// Small GETs per second on loopback: the Destination's pooled client (undici Agent, keep-alive) against a
// `fetch` per request, in the same run. The server is a child process (its own event loop and core).
//
//   node --import tsx bench/http-pool.ts [seconds-per-run=2] [runs=3] [concurrency=64] [bodyBytes=256]
//
// Prints requests/s for each client (median of runs) and the ratio.
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { Agent } from 'undici';
import { HttpClient } from '../src/http/client.js';

const seconds = Number(process.argv[2] ?? 2);
const runs = Number(process.argv[3] ?? 3);
const concurrency = Number(process.argv[4] ?? 64);
const bodyBytes = Number(process.argv[5] ?? 256);

const SERVER = `
const http = require('node:http');
const body = Buffer.alloc(${bodyBytes}, 120);
const s = http.createServer((req, res) => { res.setHeader('content-type', 'application/octet-stream'); res.setHeader('content-length', body.length); res.end(body); });
s.keepAliveTimeout = 60000;
s.listen(0, '127.0.0.1', () => console.log(s.address().port));
`;

async function startServer(): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, ['-e', SERVER], { stdio: ['ignore', 'pipe', 'inherit'] });
  const rl = createInterface({ input: child.stdout as NonNullable<typeof child.stdout> });
  for await (const line of rl) {
    rl.close();
    return { url: `http://127.0.0.1:${line.trim()}`, child };
  }
  throw new Error('server did not start');
}

/** Client CPU time per request (µs) of the last measure: less sensitive to other load than the rate. */
let lastCpuPerRequest = 0;

async function measure(get: (url: string) => Promise<number>, base: string): Promise<number> {
  const cpu0 = process.cpuUsage();
  const deadline = performance.now() + seconds * 1000;
  let done = 0;
  let bytes = 0;
  const worker = async (w: number): Promise<void> => {
    let i = 0;
    while (performance.now() < deadline) {
      const n = await get(`${base}/r/${w}/${i++}`);
      bytes += n;
      done++;
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: concurrency }, (_, w) => worker(w)));
  const elapsed = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  lastCpuPerRequest = (cpu.user + cpu.system) / done;
  if (bytes !== done * bodyBytes) throw new Error(`bad byte count ${bytes} for ${done} requests`);
  return done / elapsed;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
}

const { url, child } = await startServer();
try {
  const client = new HttpClient({ connectionsPerHost: concurrency });
  const pooled = async (u: string): Promise<number> => {
    const res = await client.get(u, { decompress: false });
    let n = 0;
    for await (const c of res.body) n += c.byteLength;
    return n;
  };
  const viaFetch = async (u: string): Promise<number> => {
    const res = await fetch(u);
    return (await res.arrayBuffer()).byteLength;
  };
  const agent = new Agent({ connections: concurrency, keepAliveTimeout: 10_000 });
  const raw = async (u: string): Promise<number> => {
    const parsed = new URL(u);
    const res = await agent.request({ origin: parsed.origin, path: parsed.pathname, method: 'GET' });
    let n = 0;
    for await (const c of res.body) n += (c as Buffer).byteLength;
    return n;
  };
  // Warm up.
  await measure(pooled, url);
  await measure(viaFetch, url);
  await measure(raw, url);
  const a: number[] = [];
  const b: number[] = [];
  const c: number[] = [];
  const cpuA: number[] = [];
  const cpuB: number[] = [];
  const cpuC: number[] = [];
  for (let r = 0; r < runs; r++) {
    a.push(await measure(pooled, url));
    cpuA.push(lastCpuPerRequest);
    b.push(await measure(viaFetch, url));
    cpuB.push(lastCpuPerRequest);
    c.push(await measure(raw, url));
    cpuC.push(lastCpuPerRequest);
  }
  await client.close();
  await agent.close();
  const ma = median(a);
  const mb = median(b);
  const mc = median(c);
  const line = (label: string, rates: number[], cpu: number[]): string =>
    `  ${label.padEnd(32)} ${Math.round(median(rates))} req/s, ${median(cpu).toFixed(1)} µs client CPU/request  (runs: ${rates.map(Math.round).join(', ')})`;
  console.log(
    `small GETs on loopback: ${bodyBytes}-byte bodies, concurrency ${concurrency}, ${runs} runs of ${seconds}s`,
  );
  console.log(line('HttpClient (undici Agent pool):', a, cpuA));
  console.log(line('fetch per request:', b, cpuB));
  console.log(line('raw undici Agent.request:', c, cpuC));
  console.log(
    `  ratio HttpClient / fetch: ${(ma / mb).toFixed(2)}x; HttpClient / raw undici: ${(ma / mc).toFixed(2)}; CPU per request HttpClient / raw undici: ${(median(cpuA) / median(cpuC)).toFixed(2)}`,
  );
} finally {
  child.kill();
}
