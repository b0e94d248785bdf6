/**
 * A real HTTP server on 127.0.0.1:0 for the Destination's transport tests, with a request log.
 * Not a test file itself (no tests are declared here).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

export interface TestServer {
  readonly url: string;
  readonly server: Server;
  /** Every request seen: method, URL path and headers. */
  readonly log: { method: string; url: string; headers: IncomingMessage['headers'] }[];
  close(): Promise<void>;
}

export type Handler = (req: IncomingMessage, res: ServerResponse, n: number) => unknown;

/** Starts a server calling `handler` with the request, the response and the 1-based request count. */
export async function startServer(handler: Handler): Promise<TestServer> {
  const log: TestServer['log'] = [];
  const sockets = new Set<Socket>();
  const server = createServer((req, res) => {
    log.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
    Promise.resolve(handler(req, res, log.length)).catch((e: unknown) => {
      res.destroy(e as Error);
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    server,
    log,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** Collects an async iterable of bytes into a string. */
export async function text(body: AsyncIterable<Uint8Array>): Promise<string> {
  const chunks: Uint8Array[] = [];
  for await (const c of body) chunks.push(c);
  return Buffer.concat(chunks).toString('utf8');
}
