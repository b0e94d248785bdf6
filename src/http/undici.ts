/**
 * The three undici dispatchers the Destination's client uses, loaded without the rest of undici.
 *
 * `import 'undici'` evaluates its whole index (fetch, WebSocket, caches, mocks, interceptors): 60-69 ms of
 * every CLI run's start-up here, against 25-26 ms for the dispatcher modules alone (three runs each, a fresh
 * process each). undici has no `exports` map, so its modules can be required by path; the index adds the
 * request API (`request`, `stream`, ...) to `Dispatcher.prototype`, which is done here the same way. Should a
 * later undici move these files, the whole package is loaded instead (the same classes, only slower).
 *
 * @module
 */
import { createRequire } from 'node:module';
import type * as Undici from 'undici';

/** The dispatcher classes of undici that {@link loadAgents} provides. */
export type UndiciAgents = Pick<typeof Undici, 'Agent' | 'EnvHttpProxyAgent' | 'ProxyAgent'>;

let loaded: UndiciAgents | undefined;

/** undici's `Agent`, `EnvHttpProxyAgent` and `ProxyAgent`, loaded on first use (see the module comment). */
export function loadAgents(): UndiciAgents {
  loaded ??= loadLean() ?? (createRequire(import.meta.url)('undici') as UndiciAgents);
  return loaded;
}

let client: { Client: typeof Undici.Client; buildConnector: typeof Undici.buildConnector } | undefined;

/** undici's `Client` and `buildConnector`, loaded as {@link loadAgents} loads the agents. */
export function loadClient(): { Client: typeof Undici.Client; buildConnector: typeof Undici.buildConnector } {
  client ??= leanOrWhole(
    (require) => ({
      Client: require('undici/lib/dispatcher/client.js') as typeof Undici.Client,
      buildConnector: require('undici/lib/core/connect.js') as typeof Undici.buildConnector,
    }),
    (u) => ({ Client: u.Client, buildConnector: u.buildConnector }),
  );
  return client;
}

let pool: typeof Undici.Pool | undefined;

/** undici's `Pool` (the per-origin pool an `Agent` makes), loaded as {@link loadAgents} loads the agents. */
export function loadPool(): typeof Undici.Pool {
  pool ??= leanOrWhole(
    (require) => require('undici/lib/dispatcher/pool.js') as typeof Undici.Pool,
    (u) => u.Pool,
  );
  return pool;
}

/**
 * Modules of undici by path, after the agents (whose loading prepares the dispatcher prototype); from the
 * whole package should a later undici move them.
 */
function leanOrWhole<T>(lean: (require: NodeJS.Require) => T, whole: (u: typeof Undici) => T): T {
  loadAgents();
  const require = createRequire(import.meta.url);
  try {
    return lean(require);
  } catch {
    return whole(require('undici') as typeof Undici);
  }
}

function loadLean(): UndiciAgents | undefined {
  const require = createRequire(import.meta.url);
  try {
    const dispatcher = require('undici/lib/dispatcher/dispatcher.js') as { prototype: Record<string, unknown> };
    const api = require('undici/lib/api/index.js') as Record<string, unknown>;
    if (typeof api['request'] !== 'function') return undefined;
    if (typeof dispatcher.prototype['request'] !== 'function') Object.assign(dispatcher.prototype, api);
    const agents: UndiciAgents = {
      Agent: require('undici/lib/dispatcher/agent.js') as UndiciAgents['Agent'],
      EnvHttpProxyAgent: require('undici/lib/dispatcher/env-http-proxy-agent.js') as UndiciAgents['EnvHttpProxyAgent'],
      ProxyAgent: require('undici/lib/dispatcher/proxy-agent.js') as UndiciAgents['ProxyAgent'],
    };
    return Object.values(agents).every((c) => typeof c === 'function') ? agents : undefined;
  } catch {
    return undefined;
  }
}
