// Helpers for the explorer's tests: a static site of hand-written documents over real HTTP (loopback, port 0),
// recording what each request carried; and the explorer itself on its own port.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ConfinedClient } from '../../src/web/client.js';
import { createExplorer, type ExplorerOptions } from '../../src/web/explorer.js';
import { createExplorerServer } from '../../src/web/server.js';

export interface StaticFile {
  readonly body: string | Buffer;
  readonly type?: string;
  readonly status?: number;
  readonly headers?: Record<string, string>;
}

export interface StaticSite {
  /** `http://127.0.0.1:port/` */
  readonly url: string;
  readonly requests: { path: string; headers: IncomingHttpHeaders }[];
  /** Files by path (`/a.xml`), changeable while serving. */
  readonly files: Map<string, StaticFile>;
  close(): Promise<void>;
}

/** Serves `files` (path -> content); XML by default, 404 for the rest. */
export async function startStatic(files: Record<string, string | StaticFile>): Promise<StaticSite> {
  const map = new Map<string, StaticFile>();
  for (const [path, f] of Object.entries(files)) map.set(path, typeof f === 'string' ? { body: f } : f);
  const requests: { path: string; headers: IncomingHttpHeaders }[] = [];
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').replace(/\?.*$/, '');
    requests.push({ path, headers: req.headers });
    const f = map.get(path);
    if (f === undefined) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
      return;
    }
    res.writeHead(f.status ?? 200, { 'content-type': f.type ?? 'application/xml', ...f.headers }).end(f.body);
  });
  server.keepAliveTimeout = 500;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    requests,
    files: map,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The API's JSON: checked field by field by the tests' assertions. */
// biome-ignore lint/suspicious/noExplicitAny: test code reads arbitrary JSON paths and asserts on them
export type Json = any;

export interface RunningExplorer {
  /** `http://127.0.0.1:port/explorer/` */
  readonly page: string;
  readonly port: number;
  /** GETs `api/<name>` with the parameters; the status and the parsed JSON. */
  api(
    name: string,
    params?: Record<string, string>,
    headers?: Record<string, string>,
  ): Promise<{ status: number; body: Json }>;
  close(): Promise<void>;
}

/** The explorer for `start` on a port of its own, through a {@link ConfinedClient}. */
export async function startExplorer(
  start: string,
  options: Partial<ExplorerOptions> & { token?: string } = {},
): Promise<RunningExplorer> {
  const client = new ConfinedClient({
    credentialsOrigin: start,
    retries: 0,
    ...(options.token === undefined ? {} : { bearerToken: options.token }),
  });
  const explorer = createExplorer({ client, start, ...options });
  const server = createExplorerServer(explorer);
  const address = await server.listen(0, '127.0.0.1');
  const page = `${address.url}explorer/`;
  return {
    page,
    port: address.port,
    async api(name, params = {}, headers = {}) {
      const res = await fetch(`${page}api/${name}?${new URLSearchParams(params)}`, { headers });
      return { status: res.status, body: await res.json() };
    },
    async close() {
      await server.close();
      await client.close();
    },
  };
}

const NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/"';

/** A `<urlset>` document with a root `rs:md` and entries given as XML. */
export function urlset(md: string, links: string, entries: readonly string[]): string {
  return `<?xml version="1.0" encoding="UTF-8"?>\n<urlset ${NS}>\n<rs:md ${md}/>\n${links}\n${entries.join('\n')}\n</urlset>\n`;
}

/** A `<sitemapindex>` document. */
export function sitemapindex(md: string, links: string, entries: readonly string[]): string {
  return `<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex ${NS}>\n<rs:md ${md}/>\n${links}\n${entries.join('\n')}\n</sitemapindex>\n`;
}
