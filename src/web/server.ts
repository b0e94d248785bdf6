/**
 * The explorer on its own (`resourcesync explore <url>`): a handler that serves the explorer at `/explorer/`
 * (`/` redirects there, so the page's relative links are the same as under `serve`), over our Node adapter
 * (keep-alive, timeouts, graceful close).
 *
 * @module
 */
import type { SourceHandler, SourceRequest, SourceResponse } from '../source/http/handler.js';
import { text, toWebResponse } from '../source/http/handler.js';
import { createNodeServer, type NodeServerOptions, type SourceServer } from '../source/http/node.js';
import { checkRequestTarget } from '../source/http/request-target.js';
import type { Explorer } from './explorer.js';

/** Where the explorer is served, by `explore` as by `serve`. */
export const EXPLORER_PATH = '/explorer/';

/**
 * A request handler serving only the explorer (see the module comment). `mount` is not supported.
 */
export function createExplorerHandler(explorer: Explorer): SourceHandler {
  async function handle(request: SourceRequest): Promise<SourceResponse> {
    const { method } = request;
    const checked = checkRequestTarget(request.target);
    if (!checked.ok) return text(method, 400, `Bad Request: ${checked.reason}`);
    const { pathname, query } = checked;
    if (pathname === '/' || pathname === EXPLORER_PATH.slice(0, -1)) {
      const location = query === undefined ? EXPLORER_PATH : `${EXPLORER_PATH}?${query}`;
      const r = text(method, 308, `Permanent Redirect: ${location}`);
      r.headers['location'] = location;
      return r;
    }
    if (!pathname.startsWith(EXPLORER_PATH)) return text(method, 404, `Not Found: ${pathname}`);
    if (method !== 'GET' && method !== 'HEAD') {
      const r = text(method, 405, `Method Not Allowed: ${method} (allowed: GET, HEAD)`);
      r.headers['allow'] = 'GET, HEAD';
      return r;
    }
    const answered = await explorer.route({
      method,
      target: request.target,
      headers: request.headers,
      body: request.body,
      get signal() {
        return request.signal;
      },
      pathname,
      query,
      subpath: pathname.slice(EXPLORER_PATH.length),
    });
    const response = answered ?? text(method, 404, `Not Found: ${pathname}`);
    response.headers['x-content-type-options'] = 'nosniff';
    return response;
  }
  async function fetchWeb(request: Request): Promise<Response> {
    const url = new URL(request.url);
    const headers: Record<string, string> = {};
    request.headers.forEach((value, name) => {
      headers[name] = value;
    });
    return toWebResponse(
      await handle({ method: request.method, target: `${url.pathname}${url.search}`, headers, signal: request.signal }),
    );
  }
  return {
    handle,
    mount: () => {
      throw new Error('the explorer server takes no other routes');
    },
    fetch: fetchWeb,
    request: (target, init) => fetchWeb(new Request(new URL(target, 'http://localhost/'), init)),
  };
}

/**
 * The explorer's HTTP server. Listen on loopback (the API fetches URLs for whoever can reach it).
 *
 * @example
 * ```ts
 * const server = createExplorerServer(createExplorer({ client, start: 'https://example.org/' }));
 * const { url } = await server.listen(0, '127.0.0.1'); // open `${url}explorer/`
 * ```
 */
export function createExplorerServer(explorer: Explorer, options: NodeServerOptions = {}): SourceServer {
  return createNodeServer(createExplorerHandler(explorer), options);
}
