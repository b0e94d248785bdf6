/**
 * `resourcesync hub`: a standalone WebSub hub for ResourceSync notification topics.
 *
 * @module
 */
import type { Command } from 'commander';
import { ResourceSyncError } from '../core/errors.js';
import { createHub, type HubEvent } from '../hub/index.js';
import { EXIT } from './exit.js';

interface HubCliOptions {
  readonly port: string;
  readonly host: string;
  readonly db: string;
  readonly topic?: string[];
  readonly topicPrefix?: string[];
  readonly hubUrl?: string;
  readonly path: string;
  readonly publisherToken?: string;
  readonly minLease: string;
  readonly maxLease: string;
  readonly json?: boolean;
  readonly quiet?: boolean;
}

function wholeNumber(name: string, text: string, min: number, max: number): number {
  if (!/^\d+$/.test(text) || Number(text) < min || Number(text) > max) {
    throw new ResourceSyncError('RS_CONFIG', `--${name} must be a whole number from ${min} to ${max}, not "${text}"`);
  }
  return Number(text);
}

function describe(e: HubEvent): string {
  switch (e.type) {
    case 'subscribed':
      return `subscribed ${e.callback} to ${e.topic} for ${e.leaseSeconds ?? '?'} s`;
    case 'unsubscribed':
      return `unsubscribed ${e.callback} from ${e.topic}`;
    case 'verify-failed':
      return `verification of ${e.mode} failed for ${e.callback}: ${e.reason}`;
    case 'expired':
      return `lease expired: ${e.callback} on ${e.topic}`;
    case 'published':
      return `published ${e.bytes} bytes on ${e.topic} to ${e.subscribers} subscriber(s)`;
    case 'delivered':
      return `delivered to ${e.callback} in ${e.ms} ms (${e.attempts} attempt(s))`;
    case 'retry':
      return `retry ${e.attempt} to ${e.callback} in ${e.delayMs} ms: ${e.error}`;
    case 'dropped':
      return `dropped a delivery to ${e.callback}: ${e.reason}`;
    case 'subscription-dropped':
      return `dropped subscription ${e.callback} on ${e.topic}: ${e.reason}`;
  }
}

/** Registers `hub` on the program. */
export function register(program: Command): void {
  program
    .command('hub')
    .description('Run a WebSub hub for ResourceSync change / framework notification topics (W3C WebSub).')
    .option('--topic <url...>', 'topic URL(s) publishers may publish to and subscribers subscribe to (repeatable)')
    .option(
      '--topic-prefix <url...>',
      'accept every topic under this URL, e.g. http://localhost:8080/resourcesync/ for all sets of a Source',
    )
    .option('--port <n>', 'port to listen on (0 = any free port)', '8090')
    .option('--host <addr>', 'address to listen on', '127.0.0.1')
    .option('--db <path>', 'SQLite file keeping the subscriptions', 'hub.db')
    .option('--path <path>', 'request path of the hub', '/')
    .option('--hub-url <url>', 'public URL of the hub (default: the listening address)')
    .option('--publisher-token <token>', 'require Authorization: Bearer <token> on publish requests')
    .option('--min-lease <s>', 'shortest lease granted, seconds', '60')
    .option('--max-lease <s>', 'longest lease granted, seconds', String(30 * 86_400))
    .option('--json', 'one JSON object per line on stdout (listening address, then events)')
    .option('--quiet', 'print only the listening address')
    .addHelpText(
      'after',
      '\nRuns until SIGINT or SIGTERM. Subscriptions are kept in --db and survive a restart.\n' +
        'Exit codes: 0 stopped cleanly, 2 bad arguments or the port/database cannot be used.',
    )
    .action(async (opts: HubCliOptions) => {
      const port = wholeNumber('port', opts.port, 0, 65_535);
      const minLease = wholeNumber('min-lease', opts.minLease, 1, 2 ** 31);
      const maxLease = wholeNumber('max-lease', opts.maxLease, minLease, 2 ** 31);
      if (!opts.path.startsWith('/')) throw new ResourceSyncError('RS_CONFIG', '--path must start with /');
      const prefixes = opts.topicPrefix ?? [];
      if ((opts.topic ?? []).length === 0 && prefixes.length === 0) {
        throw new ResourceSyncError('RS_CONFIG', 'give at least one --topic or --topic-prefix');
      }
      for (const p of prefixes) {
        if (!/^https?:\/\/[^/]+\/.*$/.test(p)) {
          throw new ResourceSyncError('RS_CONFIG', `--topic-prefix must be an absolute http(s) URL with a path: ${p}`);
        }
      }
      const out = (obj: Record<string, unknown>, text: string): void => {
        process.stdout.write(opts.json === true ? `${JSON.stringify(obj)}\n` : `${text}\n`);
      };
      const hub = createHub({
        db: opts.db,
        topics: opts.topic ?? [],
        ...(prefixes.length === 0
          ? {}
          : { acceptTopic: (t: string) => prefixes.some((p) => t.startsWith(p) && !t.slice(p.length).includes('..')) }),
        path: opts.path,
        minLeaseSeconds: minLease,
        maxLeaseSeconds: maxLease,
        ...(opts.hubUrl === undefined ? {} : { hubUrl: opts.hubUrl }),
        ...(opts.publisherToken === undefined ? {} : { publisherToken: opts.publisherToken }),
        onEvent: (e) => {
          if (opts.quiet !== true) out({ time: new Date().toISOString(), ...e }, describe(e));
        },
      });
      let url: string;
      try {
        url = await hub.listen(port, opts.host);
      } catch (e) {
        await hub.close();
        throw new ResourceSyncError('RS_CONFIG', `cannot listen on ${opts.host}:${port}: ${(e as Error).message}`, {
          cause: e,
        });
      }
      out(
        { event: 'listening', url, hubUrl: hub.url, topics: [...hub.topics], topicPrefixes: prefixes },
        `hub listening on ${url}`,
      );
      await new Promise<void>((resolve) => {
        const stop = (): void => {
          process.off('SIGINT', stop);
          process.off('SIGTERM', stop);
          resolve();
        };
        process.on('SIGINT', stop);
        process.on('SIGTERM', stop);
      });
      await hub.close();
      process.exitCode = EXIT.OK;
    });
}
