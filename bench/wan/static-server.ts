/**
 * A plain static file server for the benchmark's `publish` site, standing in for the web server a published
 * Source would sit behind: keep-alive, `Content-Type` from the extension, `Content-Length`, `Last-Modified`,
 * small files read whole, large ones streamed. GET and HEAD only; no directory listings.
 *
 * @module
 */
import { createReadStream } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { extname, join, normalize, sep } from 'node:path';

const TYPES: Record<string, string> = {
  '.xml': 'application/xml',
  '.zip': 'application/zip',
  '.txt': 'text/plain',
  '.json': 'application/json',
};

/** Serves `root` on 127.0.0.1 (port 0); resolves to the server and its port. */
export async function startStaticServer(root: string): Promise<{ server: Server; port: number }> {
  const base = normalize(root) + sep;
  const server = createServer({ keepAliveTimeout: 30_000 }, (req, res) => {
    void (async () => {
      const path = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
      const file = normalize(join(base, path));
      if (!file.startsWith(base) || (req.method !== 'GET' && req.method !== 'HEAD')) {
        res.writeHead(req.method === 'GET' || req.method === 'HEAD' ? 404 : 405).end();
        return;
      }
      let size: number;
      let mtime: Date;
      try {
        const s = await stat(file);
        if (!s.isFile()) throw new Error('not a file');
        size = s.size;
        mtime = s.mtime;
      } catch {
        res.writeHead(404, { 'content-length': 0 }).end();
        return;
      }
      const type =
        TYPES[extname(file)] ?? (file.endsWith('resourcesync') ? 'application/xml' : 'application/octet-stream');
      res.writeHead(200, { 'content-type': type, 'content-length': size, 'last-modified': mtime.toUTCString() });
      if (req.method === 'HEAD') res.end();
      else if (size <= 256 * 1024) res.end(await readFile(file));
      else createReadStream(file).pipe(res);
    })().catch(() => res.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('static server: no port');
  return { server, port: address.port };
}
