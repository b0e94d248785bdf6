import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { HttpClient } from '../../src/http/client.js';
import { killChildren, runCli } from '../cli/cli-child.js';
import { makeResources, resourceListXml } from '../destination/static-source.js';
import { text } from '../destination/http-testserver.js';

/** A Source serving a Resource List of `n` resources, each answered after `delayMs`, counting connections. */
interface CountingSource {
  readonly url: string;
  /** Most connections open at once, most requests in flight at once, request start times. */
  readonly seen: { maxOpen: number; maxInFlight: number; starts: number[] };
  reset(): void;
  close(): Promise<void>;
}

async function countingSource(n: number, delayMs: number): Promise<CountingSource> {
  const resources = makeResources(n, 256);
  let base = '';
  let open = 0;
  let inFlight = 0;
  const seen = { maxOpen: 0, maxInFlight: 0, starts: [] as number[] };
  const server: Server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', base).pathname;
    inFlight++;
    seen.maxInFlight = Math.max(seen.maxInFlight, inFlight);
    seen.starts.push(Date.now());
    const done = (status: number, body: string | Buffer, type: string): void => {
      inFlight--;
      res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(body) });
      res.end(body);
    };
    if (path === '/resourcelist.xml')
      return done(200, resourceListXml(base, resources, '2024-06-01T00:00:00Z'), 'application/xml');
    const r = resources.find((x) => x.path === path);
    setTimeout(() => (r === undefined ? done(404, 'no', 'text/plain') : done(200, r.body, 'text/plain')), delayMs);
  });
  server.on('connection', (socket) => {
    open++;
    seen.maxOpen = Math.max(seen.maxOpen, open);
    socket.on('close', () => open--);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: `${base}/resourcelist.xml`,
    seen,
    reset() {
      seen.maxOpen = open;
      seen.maxInFlight = 0;
      seen.starts = [];
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

describe('politeness caps', { timeout: 120_000 }, () => {
  const cleanup: (() => Promise<void>)[] = [];
  after(async () => {
    killChildren();
    for (const c of cleanup) await c();
  });

  async function sync(src: CountingSource, flags: string[]): Promise<void> {
    const dir = await mkdtemp(join(tmpdir(), 'rs-polite-'));
    cleanup.push(() => rm(dir, { recursive: true, force: true }));
    const r = runCli(['sync', src.url, dir, '--json', '--durability', 'none', ...flags]);
    const code = await r.exit;
    assert.equal(code, 0, r.stderr());
  }

  it('sync --max-connections 2: the Source never sees more than 2 connections (it sees more without)', async () => {
    const src = await countingSource(60, 25);
    cleanup.push(() => src.close());
    await sync(src, []);
    assert.ok(src.seen.maxOpen > 2, `without the cap: ${src.seen.maxOpen} connections (the test needs more than 2)`);
    await src.close();

    const capped = await countingSource(60, 25);
    cleanup.push(() => capped.close());
    await sync(capped, ['--max-connections', '2', '--concurrency', '32']);
    assert.ok(capped.seen.maxOpen <= 2, `--max-connections 2: the Source saw ${capped.seen.maxOpen} connections`);
    assert.ok(capped.seen.maxInFlight <= 2, `--max-connections 2: ${capped.seen.maxInFlight} requests at once`);
    assert.ok(capped.seen.maxOpen >= 1);
  });

  it('sync --delay spaces every request to one host', async () => {
    const src = await countingSource(6, 0);
    cleanup.push(() => src.close());
    await sync(src, ['--delay', '60']);
    const starts = [...src.seen.starts].sort((a, b) => a - b);
    assert.ok(starts.length >= 7, `${starts.length} requests`); // the list, discovery's, and the 6 resources
    // Arrival times carry the loopback's and a loaded machine's jitter (a first request on a new connection
    // arrives later than it was sent; a stalled event loop sends two at once): the median gap is the delay, and so
    // is the average over the run. Without --delay the gaps are a few ms.
    const at = `arrivals ${starts.map((t) => t - starts[0]!)}`;
    const gaps = starts.slice(1).map((t, i) => t - (starts[i] as number));
    const median = [...gaps].sort((a, b) => a - b)[Math.floor(gaps.length / 2)] as number;
    assert.ok(median >= 50, `median gap ${median} ms; ${at}`);
    assert.ok(((starts.at(-1) as number) - (starts[0] as number)) / gaps.length >= 54, at);
  });

  it('maxConnections caps the library client over connectionsPerHost', async () => {
    const src = await countingSource(24, 20);
    cleanup.push(() => src.close());
    const client = new HttpClient({ connectionsPerHost: 8, maxConnections: 2 });
    cleanup.push(() => client.close());
    const base = src.url.replace('/resourcelist.xml', '');
    await Promise.all(
      Array.from({ length: 24 }, async (_, i) => text((await client.get(`${base}/res/r${i}.txt`)).body)),
    );
    assert.ok(src.seen.maxOpen <= 2, `maxConnections 2: ${src.seen.maxOpen} connections`);
    assert.equal(src.seen.maxInFlight, 2);
  });

  it('--help names --max-connections and --delay', async () => {
    const r = runCli(['sync', '--help']);
    assert.equal(await r.exit, 0);
    assert.match(r.stdout(), /--max-connections <n>/);
    assert.match(r.stdout(), /--delay <ms>/);
  });
});
