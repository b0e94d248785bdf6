/**
 * The Source's HTTP server (ANSI/NISO Z39.99-2017 §6.3): the request handler (`http/handler.ts`: routing,
 * discovery, conditional requests, Range, gzip) served over `node:http` by the Node adapter (`http/node.ts`:
 * keep-alive, timeouts, request log, graceful close). It serves the Source Description at
 * `/.well-known/resourcesync`, every generated document and dump, `/robots.txt`, and the resources of the
 * collection with the discovery `Link` header (§6.3.3, Example 10); more routes mount on
 * {@link SourceServer.handler} (`server.handler.mount('/explorer/', route)`).
 *
 * Cost: a GET of a small resource of the directory Source is a few synchronous system calls (open, fstat,
 * readlink of the descriptor, read, close; no thread-pool round trip), an inventory record mostly from a cache,
 * and one write (`bench/source-get.ts`).
 *
 * @module
 */
import type { SourceSite } from './index.js';
import { createSourceHandler, type SourceHandlerOptions } from './http/handler.js';
import { createNodeServer, type NodeServerOptions, type SourceServer } from './http/node.js';

export type {
  MountOptions,
  RouteHandler,
  RouteRequest,
  SourceHandler,
  SourceHandlerOptions,
  SourceRequest,
  SourceResponse,
} from './http/handler.js';
export { createSourceHandler } from './http/handler.js';
export type { ListeningAddress, NodeServerOptions, RequestLogEntry, SourceServer } from './http/node.js';
export { createNodeServer } from './http/node.js';

/** Options of {@link createSourceServer}: the handler's and the Node adapter's. */
export interface SourceServerOptions extends SourceHandlerOptions, NodeServerOptions {}

/**
 * Creates the HTTP server of a Source: {@link createSourceHandler} served by {@link createNodeServer}.
 *
 * `site` may be a promise (the server can listen before the Source is open, e.g. to learn the port for the
 * base URL); requests get 503 with `Retry-After` until it resolves.
 *
 * @example
 * ```ts
 * const site = await openDirectorySource({ dir: './collection', baseUrl: 'http://localhost:8080/' });
 * const server = createSourceServer(site, { directoryIndex: 'index.html' });
 * server.handler.mount('/explorer/', (req) => explorer.serve(req.subpath));
 * const { url } = await server.listen(8080, '127.0.0.1');
 * // ... later
 * await server.close();
 * await site.close();
 * ```
 */
export function createSourceServer(
  site: SourceSite | Promise<SourceSite>,
  options: SourceServerOptions = {},
): SourceServer {
  const handler = createSourceHandler(site, {
    ...(options.directoryIndex === undefined ? {} : { directoryIndex: options.directoryIndex }),
    ...(options.resourceMaxAgeSeconds === undefined ? {} : { resourceMaxAgeSeconds: options.resourceMaxAgeSeconds }),
    ...(options.gzipLevel === undefined ? {} : { gzipLevel: options.gzipLevel }),
    ...(options.gzipCache === undefined ? {} : { gzipCache: options.gzipCache }),
    ...(options.onError === undefined ? {} : { onError: options.onError }),
  });
  return createNodeServer(handler, options);
}
