/**
 * The explorer: a page that shows any ResourceSync Source (discovery path, document tree, entries, validator
 * issues, search, resources with a fixity check, a plot of changes, dumps and manifests, live notifications),
 * served as a route of our Source server (`serve` mounts it at `/explorer/`) or by `resourcesync explore <url>`.
 *
 * The page is static (`assets/`: HTML, one ES module, CSS; no build step, no CDN, no framework); it asks the
 * JSON API (`api.ts`) under the same path, which fetches through our own HTTP client. So CORS is never in
 * the way, and credentials (`--token`) stay on the server side and go only to the Source's origin
 * (`client.ts`).
 *
 * Safety of the API (it makes the server fetch URLs): requests from another site are refused
 * (`Sec-Fetch-Site: cross-site`, or an `Origin` other than the page's), `allowedHosts` guards against DNS
 * rebinding when the explorer listens on loopback, and `allowUrl` confines what may be fetched (serve: its own
 * origin only).
 *
 * @module
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ResourceSyncError } from '../core/errors.js';
import type { HttpClient } from '../http/client.js';
import type { RouteRequest, SourceResponse } from '../source/http/handler.js';
import {
  apiChanges,
  apiDiscover,
  apiDocument,
  apiFixity,
  apiSearch,
  apiSummary,
  type ExplorerContext,
  errorJson,
} from './api.js';
import { channelEvents } from './live.js';

/** Options of {@link createExplorer}. */
export interface ExplorerOptions {
  /** The client every fetch goes through (a {@link ConfinedClient} to confine credentials). */
  readonly client: HttpClient;
  /** The URL explored first (a Source root, Source Description, Capability List or any document). */
  readonly start: string;
  /** URLs the API may fetch (default: any http(s) URL). */
  readonly allowUrl?: (url: string) => boolean;
  /** `Host` header values accepted (default any): `['127.0.0.1:8080', 'localhost:8080']` on loopback. */
  readonly allowedHosts?: readonly string[];
  /** Headers for the WebSocket channels of `channelOrigin` (the token, as for the documents). */
  readonly channelHeaders?: Readonly<Record<string, string>>;
  /** Host (`host:port`) whose channels get `channelHeaders`. */
  readonly channelHost?: string;
  /** The address a channel is connected at (default: as advertised); see `mount.ts`. */
  readonly rewriteChannel?: (url: string) => string;
}

/** A mounted explorer: its route (for {@link SourceHandler.mount}) and a way to free its client. */
export interface Explorer {
  /** Answers the requests under the mount path (`subpath` `''`: the page; `app.js`, `app.css`, `api/...`). */
  route(request: RouteRequest): Promise<SourceResponse | undefined>;
}

const TYPES: Readonly<Record<string, string>> = {
  'index.html': 'text/html; charset=utf-8',
  'app.js': 'text/javascript; charset=utf-8',
  'app.css': 'text/css; charset=utf-8',
  'favicon.svg': 'image/svg+xml',
};

/**
 * The directory of the page's files: `<package root>/src/web/assets`, found from this module (under tsx from
 * `src/web/`, compiled from `dist/src/web/`; shipped in the package through package.json `files`).
 */
export function findAssetsDir(from: string = fileURLToPath(import.meta.url)): string {
  let dir = dirname(from);
  for (;;) {
    const candidate = join(dir, 'src', 'web', 'assets');
    if (existsSync(join(dir, 'package.json')) && existsSync(join(candidate, 'index.html'))) return candidate;
    const parent = dirname(dir);
    if (parent === dir) throw new ResourceSyncError('RS_CONFIG', 'cannot find the explorer page (src/web/assets)');
    dir = parent;
  }
}

const API: Readonly<Record<string, (ctx: ExplorerContext, q: URLSearchParams) => Promise<unknown>>> = {
  'api/discover': apiDiscover,
  'api/document': apiDocument,
  'api/summary': apiSummary,
  'api/search': apiSearch,
  'api/changes': apiChanges,
  'api/fixity': apiFixity,
};

/**
 * Creates the explorer's route. Files are read once, at the first request of each.
 *
 * @example
 * ```ts
 * const explorer = createExplorer({ client: new HttpClient(), start: 'https://example.org/' });
 * server.handler.mount('/explorer/', (req) => explorer.route(req));
 * ```
 */
export function createExplorer(options: ExplorerOptions): Explorer {
  const assetsDir = findAssetsDir();
  const files = new Map<string, Promise<Buffer>>();
  const allowUrl = options.allowUrl ?? (() => true);

  function json(method: string, status: number, value: unknown): SourceResponse {
    const body = Buffer.from(JSON.stringify(value));
    const headers = {
      'content-type': 'application/json; charset=utf-8',
      'content-length': body.length,
      'cache-control': 'no-store',
    };
    return method === 'HEAD' ? { status, headers } : { status, headers, body };
  }

  /** The reason to refuse an API request from elsewhere, or undefined. */
  function refusal(request: RouteRequest): string | undefined {
    const h = request.headers;
    const host = single(h.host);
    if (
      options.allowedHosts !== undefined &&
      (host === undefined || !options.allowedHosts.includes(host.toLowerCase()))
    )
      return `Host ${host ?? '(none)'} is not served here`;
    if (single(h['sec-fetch-site']) === 'cross-site') return 'cross-site requests are refused';
    const origin = single(h.origin);
    if (origin !== undefined && origin !== 'null' && host !== undefined) {
      let originHost: string | undefined;
      try {
        originHost = new URL(origin).host;
      } catch {
        originHost = undefined;
      }
      if (originHost !== host.toLowerCase()) return `requests from ${origin} are refused`;
    }
    return undefined;
  }

  async function serveFile(method: string, name: string): Promise<SourceResponse | undefined> {
    const type = TYPES[name];
    if (type === undefined) return undefined;
    let p = files.get(name);
    if (p === undefined) {
      p = readFile(join(assetsDir, name));
      files.set(name, p);
      p.catch(() => files.delete(name));
    }
    const body = await p;
    const headers = {
      'content-type': type,
      'content-length': body.length,
      'cache-control': 'no-cache',
      'content-security-policy':
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'",
      'referrer-policy': 'no-referrer',
    };
    return method === 'HEAD' ? { status: 200, headers } : { status: 200, headers, body };
  }

  async function route(request: RouteRequest): Promise<SourceResponse | undefined> {
    const { method, subpath } = request;
    const name = subpath === '' ? 'index.html' : subpath;
    if (!name.startsWith('api/'))
      return (
        (await serveFile(method, name)) ??
        json(method, 404, { error: { code: 'RS_CONFIG', message: `no such file: ${name}` } })
      );
    const refused = refusal(request);
    if (refused !== undefined) return json(method, 403, { error: { code: 'RS_CONFIG', message: refused } });
    const q = new URLSearchParams(request.query ?? '');
    if (name === 'api/notifications') return notifications(request, q);
    const api = API[name];
    if (api === undefined) return json(method, 404, { error: { code: 'RS_CONFIG', message: `no such API: ${name}` } });
    const ctx: ExplorerContext = {
      client: options.client,
      start: options.start,
      allowUrl,
      ...(request.signal === undefined ? {} : { signal: request.signal }),
    };
    try {
      return json(method, 200, await api(ctx, q));
    } catch (e) {
      if (!(e instanceof ResourceSyncError)) throw e;
      return json(method, e.code === 'RS_CONFIG' ? 400 : 502, { error: errorJson(e) });
    }
  }

  function notifications(request: RouteRequest, q: URLSearchParams): SourceResponse {
    const url = q.get('url') ?? '';
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      return json(request.method, 400, { error: { code: 'RS_CONFIG', message: `not a URL: ${JSON.stringify(url)}` } });
    }
    const httpEquivalent = `${u.protocol === 'wss:' ? 'https:' : 'http:'}//${u.host}${u.pathname}${u.search}`;
    if ((u.protocol !== 'ws:' && u.protocol !== 'wss:') || !allowUrl(httpEquivalent))
      return json(request.method, 400, {
        error: { code: 'RS_CONFIG', message: `not a channel this explorer connects to: ${u.href}` },
      });
    const headers = {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      'x-accel-buffering': 'no',
    };
    if (request.method === 'HEAD') return { status: 200, headers };
    const channelHeaders = u.host === options.channelHost ? (options.channelHeaders ?? {}) : {};
    const target = options.rewriteChannel?.(u.href) ?? u.href;
    return { status: 200, headers, body: channelEvents(target, request.signal, channelHeaders) };
  }

  return { route };
}

function single(v: string | readonly string[] | undefined): string | undefined {
  return typeof v === 'object' ? v[0] : v;
}
