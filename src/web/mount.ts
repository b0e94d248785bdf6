/**
 * The explorer inside a Source server (`serve`, `npm start`): mounted at `/explorer/`, exploring the server's
 * own Source. It fetches only the Source's own origin (the API cannot be used to make the server fetch
 * anything else), through the listening address when the public base URL differs from it (a base URL behind a
 * proxy, or `--base-url` naming a host name).
 *
 * @module
 */
import type { SourceHandler } from '../source/http/handler.js';
import { ConfinedClient } from './client.js';
import { createExplorer } from './explorer.js';
import { EXPLORER_PATH } from './server.js';

/** Options of {@link mountExplorer}. */
export interface MountExplorerOptions {
  /** The Source's base URL (what its documents name). */
  readonly baseUrl: string;
  /** Where the server listens (`http://127.0.0.1:8080/`): fetched instead of `baseUrl` when they differ. */
  readonly listenUrl: string;
}

/** A mounted explorer. */
export interface MountedExplorer {
  /** The page's URL under the base URL. */
  readonly url: string;
  /** Unmounts the route and closes the explorer's connections. */
  close(): Promise<void>;
}

/**
 * Mounts the explorer of the handler's own Source at `/explorer/`.
 *
 * @example
 * ```ts
 * const explorer = mountExplorer(server.handler, { baseUrl, listenUrl: address.url });
 * // ... at shutdown
 * await explorer.close();
 * ```
 */
export function mountExplorer(handler: SourceHandler, options: MountExplorerOptions): MountedExplorer {
  const base = new URL(options.baseUrl);
  const local = new URL(options.listenUrl);
  const from = base.origin + '/';
  const to = local.origin + '/';
  const client = new ConfinedClient({
    credentialsOrigin: base.origin,
    ...(from === to ? {} : { via: { from, to } }),
  });
  const explorer = createExplorer({
    client,
    start: base.href,
    allowUrl: (u) => new URL(u).origin === base.origin,
    ...(from === to
      ? {}
      : {
          rewriteChannel: (u: string) => {
            const http = new URL(u);
            return `${http.protocol}//${local.host}${http.pathname}${http.search}`;
          },
        }),
  });
  const unmount = handler.mount(EXPLORER_PATH, (req) => explorer.route(req));
  return {
    url: new URL(EXPLORER_PATH, base.origin).href,
    async close() {
      unmount();
      await client.close();
    },
  };
}
