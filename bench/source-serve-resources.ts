/**
 * Serving small resources of a live directory Source: requests per second and latency over keep-alive
 * connections, plain GET and conditional GET (304), with the discovery Link header on every response.
 *
 * The server is a child process (`serve` mode of this script) over a temp dir of 1,000 files of 4 KB; this
 * process is the client (C concurrent keep-alive connections, each a loop of requests).
 *
 * Run: `node --import tsx bench/source-serve-resources.ts [--seconds 3] [--connections 8]`
 *
 * @module
 */
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { Agent, get } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { openDirectorySource } from '../src/source/index.js';
import { createSourceServer } from '../src/source/server.js';

const SELF = fileURLToPath(import.meta.url);
const NODE_ARGS = SELF.endsWith('.ts') ? ['--import', 'tsx'] : [];
const FILES = 1000;

async function serve(dir: string): Promise<void> {
  const site = await openDirectorySource({
    dir: join(dir, 'c'),
    baseUrl: 'http://bench.test/',
    stateDir: join(dir, 'state'),
    fsync: false,
  });
  const server = createSourceServer(site);
  const { port } = await server.listen(0);
  process.stdout.write(`${JSON.stringify({ port })}\n`);
  for await (const _ of createInterface({ input: process.stdin })) {
    // runs until stdin closes
  }
  await server.close();
  await site.close();
}

function request(agent: Agent, port: number, path: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    get({ host: '127.0.0.1', port, path, agent, headers }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    }).on('error', reject);
  });
}

async function load(
  port: number,
  seconds: number,
  connections: number,
  headersFor: (i: number) => Record<string, string>,
): Promise<{ rps: number; p50: number; p99: number; statuses: Map<number, number> }> {
  const agent = new Agent({ keepAlive: true, maxSockets: connections });
  const latencies: number[] = [];
  const statuses = new Map<number, number>();
  const end = performance.now() + seconds * 1000;
  let n = 0;
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (performance.now() < end) {
        const i = n++ % FILES;
        const t0 = performance.now();
        const status = await request(agent, port, `/f/${i}.txt`, headersFor(i));
        latencies.push(performance.now() - t0);
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
      }
    }),
  );
  agent.destroy();
  latencies.sort((a, b) => a - b);
  return {
    rps: latencies.length / seconds,
    p50: latencies[Math.floor(latencies.length * 0.5)]!,
    p99: latencies[Math.floor(latencies.length * 0.99)]!,
    statuses,
  };
}

async function main(): Promise<void> {
  const [cmd, a] = process.argv.slice(2);
  if (cmd === 'serve') return serve(a!);
  const arg = (name: string, def: string) => {
    const i = process.argv.indexOf(`--${name}`);
    return i > 0 ? process.argv[i + 1]! : def;
  };
  const seconds = Number(arg('seconds', '3'));
  const connections = Number(arg('connections', '8'));
  const dir = await mkdtemp(join(tmpdir(), 'rs-bench-res-'));
  try {
    await mkdir(join(dir, 'c', 'f'), { recursive: true });
    const body = Buffer.alloc(4096, 0x61);
    for (let i = 0; i < FILES; i++) await writeFile(join(dir, 'c', 'f', `${i}.txt`), body);
    const child = spawn(process.execPath, [...NODE_ARGS, SELF, 'serve', dir], { stdio: ['pipe', 'pipe', 'inherit'] });
    const first = await createInterface({ input: child.stdout })[Symbol.asyncIterator]().next();
    const { port } = JSON.parse(first.value as string) as { port: number };
    // ETags, for the conditional run.
    const etags: string[] = [];
    const agent = new Agent({ keepAlive: true, maxSockets: 4 });
    for (let i = 0; i < FILES; i++) {
      etags.push(
        await new Promise<string>((resolve, reject) => {
          get({ host: '127.0.0.1', port, path: `/f/${i}.txt`, agent, method: 'HEAD' }, (res) => {
            res.resume();
            res.on('end', () => resolve(String(res.headers.etag)));
          }).on('error', reject);
        }),
      );
    }
    agent.destroy();
    console.log(
      `bench/source-serve-resources: Node ${process.version}, ${FILES} files of 4 KB, ${connections} keep-alive connections, ${seconds} s each`,
    );
    const plain = await load(port, seconds, connections, () => ({}));
    console.log(
      `  GET 200:         ${plain.rps.toFixed(0)} req/s, p50 ${plain.p50.toFixed(2)} ms, p99 ${plain.p99.toFixed(2)} ms ${JSON.stringify([...plain.statuses])}`,
    );
    const cond = await load(port, seconds, connections, (i) => ({ 'If-None-Match': etags[i]! }));
    console.log(
      `  conditional 304: ${cond.rps.toFixed(0)} req/s, p50 ${cond.p50.toFixed(2)} ms, p99 ${cond.p99.toFixed(2)} ms ${JSON.stringify([...cond.statuses])}`,
    );
    child.stdin.end();
    await new Promise((r) => child.on('exit', r));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
