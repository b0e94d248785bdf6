/**
 * A Source for tests of the client's connection use: a Resource List of `n` resources, each answered after
 * `delayMs`, counting the connections and requests it sees at once. Not a test file itself.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { makeResources, resourceListXml } from '../destination/static-source.js';

/** A Source serving a Resource List of `n` resources, each answered after `delayMs`, counting connections. */
export interface CountingSource {
  readonly url: string;
  /** Most connections open at once, most requests in flight at once, request start times. */
  readonly seen: { maxOpen: number; maxInFlight: number; starts: number[] };
  reset(): void;
  close(): Promise<void>;
}

export async function countingSource(n: number, delayMs: number): Promise<CountingSource> {
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
