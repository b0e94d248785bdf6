/**
 * `resourcesync explore <url> [--port N] [--token T]`: serves the explorer for any Source on a local port (the
 * page fetches the Source through our own client, so CORS does not apply and credentials stay here, sent only
 * to the Source's origin). Runs until Ctrl-C.
 *
 * @module
 */
import type { Command } from 'commander';
import { ResourceSyncError } from '../core/errors.js';
import { ConfinedClient } from '../web/client.js';
import { createExplorer } from '../web/explorer.js';
import { createExplorerServer, EXPLORER_PATH } from '../web/server.js';
import { EXIT } from './exit.js';
import { parseWholeNumber, waitForSignal } from './serve.js';
import { parseHeader } from './sync.js';

/** What {@link runExplore} needs. */
export interface ExploreOptions {
  readonly url: string;
  readonly port: number;
  readonly host: string;
  readonly token?: string;
  readonly headers?: Readonly<Record<string, string>>;
  /** More hosts that get `token` and `headers` (`--token-host`), besides the Source's origin. */
  readonly tokenHosts?: readonly string[];
  readonly json?: boolean;
  /** Resolves when the explorer should stop (default: SIGINT or SIGTERM). */
  readonly until?: Promise<void>;
  /** Called once listening, with the page's URL. */
  readonly onListening?: (pageUrl: string) => void;
}

/** Hosts that name the loopback interface: the API then answers only requests addressed to them. */
const LOOPBACK = new Set(['127.0.0.1', 'localhost', '::1', '[::1]']);

/** Runs the explorer until `until` (or a signal); returns when the server has closed. */
export async function runExplore(o: ExploreOptions): Promise<void> {
  let start: URL;
  try {
    start = new URL(o.url);
  } catch {
    throw new ResourceSyncError('RS_CONFIG', `not a URL: ${JSON.stringify(o.url)}`);
  }
  if (start.protocol !== 'http:' && start.protocol !== 'https:')
    throw new ResourceSyncError('RS_CONFIG', `only http and https Sources can be explored: ${o.url}`);
  const client = new ConfinedClient({
    credentialsOrigin: start.origin,
    ...(o.tokenHosts === undefined ? {} : { credentialHosts: o.tokenHosts }),
    ...(o.token === undefined ? {} : { bearerToken: o.token }),
    ...(o.headers === undefined ? {} : { headers: o.headers }),
  });
  // The page's API answers only requests addressed to the port it listens on (DNS rebinding), known after listen.
  const allowedHosts: string[] = [];
  const channelHeaders: Record<string, string> = { ...o.headers };
  if (o.token !== undefined) channelHeaders.authorization = `Bearer ${o.token}`;
  const explorer = createExplorer({
    client,
    start: start.href,
    ...(LOOPBACK.has(o.host) ? { allowedHosts } : {}),
    channelHost: start.host,
    channelHeaders,
  });
  const server = createExplorerServer(explorer);
  try {
    const address = await server.listen(o.port, o.host);
    for (const h of LOOPBACK) allowedHosts.push(`${h}:${address.port}`);
    const pageUrl = new URL(EXPLORER_PATH, address.url).href;
    if (o.json === true)
      process.stdout.write(`${JSON.stringify({ event: 'listening', url: pageUrl, source: start.href })}\n`);
    else process.stdout.write(`resourcesync explore: ${start.href}\n  open ${pageUrl}\n  Ctrl-C to stop\n`);
    o.onListening?.(pageUrl);
    await (o.until ?? waitForSignal());
  } finally {
    await server.close();
    await client.close();
  }
}

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

/** Registers `explore` on the program. */
export function register(program: Command): void {
  program
    .command('explore')
    .description('Explore any ResourceSync Source in the browser: discovery, documents, issues, changes, resources.')
    .argument('<url>', 'a Source root, Source Description, Capability List or any of its documents')
    .option('--port <n>', 'port to listen on (0 = any free port)', '8090')
    .option(
      '--host <addr>',
      'address to listen on (keep it loopback: the page fetches URLs for its visitors)',
      '127.0.0.1',
    )
    .option('--token <token>', "bearer token sent to the Source's origin (see --token-host)")
    .option('--header <header>', "extra request header 'Name: value' for the Source's origin (repeatable)", collect, [])
    .option(
      '--token-host <host>',
      'send --token and --header to this host too (host, host:port or origin; repeatable); by default they go only to the origin of <url>, as for sync',
      collect,
      [],
    )
    .option('--json', 'print the listening line as JSON')
    .addHelpText(
      'after',
      '\nOpens nothing by itself: open the printed URL. Runs until Ctrl-C.\nExit codes: 0 stopped cleanly, 2 bad arguments or port in use.',
    )
    .action(async (url: string, o: Record<string, unknown>) => {
      let port: number;
      let headers: Record<string, string>;
      try {
        port = parseWholeNumber('port', String(o['port']), 0, 65535);
        headers = Object.fromEntries((o['header'] as string[]).map(parseHeader));
      } catch (e) {
        process.stderr.write(`resourcesync explore: ${(e as Error).message}\n`);
        process.exitCode = EXIT.USAGE;
        return;
      }
      try {
        await runExplore({
          url,
          port,
          host: String(o['host']),
          headers,
          tokenHosts: o['tokenHost'] as string[],
          ...(typeof o['token'] === 'string' ? { token: o['token'] } : {}),
          json: o['json'] === true,
        });
      } catch (e) {
        if (e instanceof ResourceSyncError && e.code === 'RS_CONFIG') {
          process.stderr.write(`resourcesync explore: ${e.message}\n`);
          process.exitCode = EXIT.USAGE;
          return;
        }
        throw e;
      }
    });
}
