/**
 * `resourcesync sync <source-url> <dir>`: a local copy of a Source that stays current (§5.2): a baseline the
 * first time, incremental runs afterwards, audits on demand. See `resourcesync sync --help`.
 *
 * @module
 */
import { type Command, InvalidArgumentError } from 'commander';
import { parseDuration } from './options.js';
import { parseDatetime } from '../core/datetime.js';
import { type ErrorCode, ResourceSyncError } from '../core/errors.js';
import type { Durability } from '../destination/context.js';
import { Destination, type DestinationOptions } from '../destination/destination.js';
import { type SyncSummary, hasChanges } from '../destination/events.js';
import type { HttpClientOptions } from '../http/client.js';
import { createUriFilter } from '../destination/filter.js';
import { EXIT } from './exit.js';
import { type CommandOutput, processOutput } from './output.js';
import { ProgressLine, formatBytes } from './progress.js';

/** Options of {@link runSync}, as parsed from the command line. */
export interface SyncCommandOptions {
  readonly mode: 'auto' | 'baseline' | 'incremental' | 'audit';
  readonly json?: boolean;
  /** Show a progress line on stderr (see progress.ts; the CLI sets it when stderr is a TTY and not --json, or --progress). */
  readonly progress?: boolean;
  /** Exit with {@link EXIT.CHANGED} (3) instead of 0 when changes were applied (`--detailed-exit-code`). */
  readonly detailedExitCode?: boolean;
  readonly destination: Omit<DestinationOptions, 'url' | 'dir'>;
}

/** Codes that mean the Source could not be used at all (exit 2). */
const UNREACHABLE: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'RS_CONFIG',
  'RS_DISCOVERY',
  'RS_HTTP',
  'RS_TIMEOUT',
  'RS_NOT_RESOURCESYNC',
  'RS_XML_SYNTAX',
  'RS_XML_DTD',
]);

/**
 * The exit code of a finished run (see the help text): 0 success, 1 failures or an audit that found
 * differences; with `detailed`, 3 instead of 0 when changes were applied (or would be, in a dry run).
 */
export function exitCodeOf(s: SyncSummary, detailed = false): number {
  if (s.operation === 'audit') return s.inSync === true ? EXIT.OK : EXIT.FAILED;
  if (s.counts.failed + s.counts.refused > 0) return EXIT.FAILED;
  return detailed && hasChanges(s) ? EXIT.CHANGED : EXIT.OK;
}

/** Runs one sync and prints its summary; returns the exit code. */
export async function runSync(
  url: string,
  dir: string,
  options: SyncCommandOptions,
  out: CommandOutput = processOutput,
): Promise<number> {
  const abort = new AbortController();
  const onSignal = (): void => abort.abort(new ResourceSyncError('RS_ABORTED', 'interrupted'));
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const bar =
    options.progress === true
      ? new ProgressLine(out, out === processOutput ? { columns: process.stderr.columns ?? 0 } : {})
      : undefined;
  try {
    const d = new Destination({ ...options.destination, url, dir, signal: abort.signal });
    if (bar !== undefined) d.on((e) => bar.update(e));
    let summary: SyncSummary;
    switch (options.mode) {
      case 'baseline':
        summary = await d.baseline();
        break;
      case 'incremental':
        summary = await d.incremental();
        break;
      case 'audit':
        summary = await d.audit();
        break;
      default:
        summary = await d.sync();
    }
    bar?.clear();
    if (options.json === true) out.stdout(`${JSON.stringify(summary, null, 2)}\n`);
    else out.stdout(formatSummary(summary));
    return exitCodeOf(summary, options.detailedExitCode === true);
  } catch (e) {
    bar?.clear();
    const rs = e instanceof ResourceSyncError ? e : undefined;
    const code = rs?.code ?? 'RS_IO';
    const message = rs?.message ?? (e instanceof Error ? e.message : String(e));
    if (options.json === true) out.stdout(`${JSON.stringify({ error: { code, message } }, null, 2)}\n`);
    out.stderr(`resourcesync sync: ${message} [${code}]\n`);
    if (code === 'RS_ABORTED' || abort.signal.aborted) return EXIT.INTERRUPTED;
    if (rs === undefined) throw e;
    return UNREACHABLE.has(rs.code) ? EXIT.USAGE : EXIT.FAILED;
  } finally {
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
  }
}

/** A human summary of a run. */
export function formatSummary(s: SyncSummary): string {
  const c = s.counts;
  const lines: string[] = [];
  const what = s.dryRun ? `${s.operation} (dry run)` : s.operation;
  if (s.operation === 'audit' && s.audit !== undefined) {
    const a = s.audit;
    lines.push(
      `audit of ${s.dir} against ${s.source}: ${a.missing} missing, ${a.extra} extra, ${a.changed} changed, ${a.same} same — ${s.inSync === true ? 'in sync' : 'NOT in sync'}`,
    );
    for (const k of ['missing', 'extra', 'changed'] as const)
      for (const uri of a.samples[k]) lines.push(`  ${k}: ${uri}`);
  } else {
    const verb = s.dryRun ? 'would be ' : '';
    lines.push(
      `${what} of ${s.source} into ${s.dir}${s.via.length > 0 ? ` (via ${s.via.join(' + ')})` : ''}: ` +
        `${c.created} ${verb}created, ${c.updated} ${verb}updated, ${c.deleted} ${verb}deleted, ` +
        `${c.deletionsRecorded} deletions recorded (files kept), ${c.skipped} unchanged, ${c.failed} failed, ${c.refused} refused` +
        `${c.excluded > 0 ? `, ${c.excluded} excluded (--include/--exclude)` : ''}; ` +
        `${formatBytes(c.bytes)} in ${(s.elapsedMs / 1000).toFixed(1)} s`,
    );
    if (s.watermarkAfter !== undefined && s.watermarkAfter !== s.watermarkBefore)
      lines.push(`watermark: ${s.watermarkBefore ?? '(none)'} -> ${s.watermarkAfter}`);
    else if (s.watermarkAfter !== undefined) lines.push(`watermark: ${s.watermarkAfter}`);
    if (!s.complete) lines.push('incomplete: the watermark was not advanced; run again to finish');
  }
  for (const f of s.failures) lines.push(`  failed: ${f.uri}: ${f.message} [${f.code}]`);
  for (const w of s.warnings) lines.push(`  warning: ${w}`);
  return `${lines.join('\n')}\n`;
}

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0) throw new InvalidArgumentError('expected a whole number > 0');
  return n;
}

function nonNegativeInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError('expected a whole number >= 0');
  return n;
}

function secondsToMs(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError('expected a number of seconds > 0');
  return Math.round(n * 1000);
}

function datetime(value: string): string {
  if (parseDatetime(value) === undefined)
    throw new InvalidArgumentError('expected a W3C Datetime, e.g. 2024-01-31 or 2024-01-31T12:00:00Z');
  return value;
}

/** Parses `Name: value` into a header pair. */
export function parseHeader(value: string): [string, string] {
  const colon = value.indexOf(':');
  const name = colon > 0 ? value.slice(0, colon).trim() : '';
  if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name))
    throw new InvalidArgumentError(`expected 'Name: value', got ${JSON.stringify(value)}`);
  return [name, value.slice(colon + 1).trim()];
}

export const SYNC_HELP = `
Modes: without --baseline / --incremental / --audit, the first run is a baseline (from a Resource Dump when
offered, else the Resource List) and later runs are incremental (Change Dumps or Change Lists since the
watermark). A baseline that did not finish is resumed (resources already present are skipped).

Filters: --include and --exclude choose the resources this copy holds, for every run (baseline, incremental,
audit and --follow alike; give the same patterns each time). A resource left out is neither fetched, nor
deleted, nor reported missing or extra. A pattern is re:<regex> (searched in the whole URI), or a glob on the
URI's decoded path: * (within a segment), ** (across segments), ?, [abc]. A glob without "/" matches any
segment ("*.pdf", "drafts"); one with "/" is anchored at the root ("/docs/**/*.xml"); a glob matching a
directory covers everything below it ("/private").

Exit codes:
  0  success: the copy is in sync, whether changes were applied or not (audit: no difference;
     --follow: stopped by Ctrl-C / SIGTERM, or its output was closed)
  1  errors: some resources failed or were refused, a gap needs a new baseline, or the audit found differences
  2  wrong arguments, or the Source cannot be reached or read (discovery failed, not ResourceSync, HTTP error)
  3  only with --detailed-exit-code: changes were applied (with --dry-run: would be) and the copy is in sync
  130 interrupted (the state stays consistent; run again to finish)

Examples:
  resourcesync sync http://localhost:8080/ ./mirror
  resourcesync sync --audit --checksum http://localhost:8080/ ./mirror
  resourcesync sync --include '/docs/**' --exclude '*.tmp' http://localhost:8080/ ./docs-mirror
  resourcesync sync --dry-run --json https://example.org/.well-known/resourcesync ./mirror
`;

/** Adds `sync` to the program. */
export function register(program: Command): void {
  program
    .command('sync')
    .description('make or update a local copy of a ResourceSync Source (baseline, incremental, audit)')
    .argument('<source-url>', 'any URL of the Source: its root, Source Description, Capability List, or a list')
    .argument('<dir>', 'the local copy (state in <dir>/.resourcesync/)')
    .option('--baseline', 'force a complete copy')
    .option('--incremental', 'force an incremental run from the watermark (or --from)')
    .option('--audit', 'compare the local copy with the Source; write nothing')
    .option('--dry-run', 'report what would be done; write nothing')
    .option('--delete', 'remove local copies of resources the Source deleted (default: keep, record)')
    .option('--set <name>', 'the Capability List to use when the Source has several')
    .option(
      '--allow-other-source',
      'sync into a copy that belongs to another Source (each Source and set keeps its own watermark)',
    )
    .option('--from <datetime>', 'start the incremental run at this W3C Datetime instead of the watermark', datetime)
    .option('--json', 'print the summary as JSON')
    .option(
      '--progress',
      'show progress on stderr (count, rate, bytes, ETA, downloads) even when stderr is not a terminal or with --json',
    )
    .option('--no-progress', 'no progress line, even on a terminal')
    .option(
      '--detailed-exit-code',
      'exit 3 (instead of 0) when changes were applied, or would be with --dry-run; 0 then means nothing to do',
    )
    .option('--checksum', 'audit: recompute hashes from the files on disk')
    .option('--auto-baseline', 'run a new baseline when the Source no longer offers changes back to the watermark')
    .option(
      '--include <pattern>',
      'hold only resources matching a pattern (repeatable): a glob on the URI path, or re:<regex> on the URI',
      collect,
      [],
    )
    .option(
      '--exclude <pattern>',
      'leave out resources matching a pattern (repeatable; wins over --include)',
      collect,
      [],
    )
    .option('--allow-host <host>', 'accept resources from this host too (repeatable)', collect, [])
    .option('--no-authority-check', 'accept resources from any host')
    .option(
      '--header <header>',
      "extra request header 'Name: value' (repeatable; only to the Source's origin, see --token-host)",
      collect,
      [],
    )
    .option('--token <token>', "bearer token sent on every request to the Source's origin (see --token-host)")
    .option(
      '--token-host <host>',
      'send --token and --header to this host too (host, host:port or origin; repeatable); by default they go only to the origin of <source-url>, never to a mirror or another host',
      collect,
      [],
    )
    .option(
      '--concurrency <n>',
      'resources fetched at once, and a fixed number of connections per host (default: adaptive, 8 connections and 16 resources at first, more while the rate grows with them: long round trips)',
      positiveInt,
    )
    .option(
      '--max-connections <n>',
      'politeness cap: at most this many connections (requests at once) to one host, whatever else is set',
      positiveInt,
    )
    .option('--delay <ms>', 'politeness delay between requests to one host, in ms (default 0)', nonNegativeInt)
    .option(
      '--timeout <seconds>',
      'connect, headers and body-idle timeout of each request (defaults 10, 30, 30)',
      secondsToMs,
    )
    .option(
      '--resource-timeout <seconds>',
      'time bound of one resource, all its attempts together (mirrors and retries): no attempt starts after it, so a resource that never answers fails after at most this plus the connect and headers timeouts (default 3 x the headers timeout: 90 s, or 3 x --timeout)',
      secondsToMs,
    )
    .option('--no-dumps', 'ignore Resource Dumps and Change Dumps')
    .option('--layout <layout>', 'local layout: host-path (default) or path')
    .option(
      '--durability <mode>',
      'batch (default: verified files are staged, then a file-system flush every 512 files or 250 ms makes them durable before they are renamed into place and recorded), file (fsync each file before its rename), or none (no fsync: a power loss may lose recent files)',
    )
    .option(
      '--follow',
      'after syncing, stay in step through change notifications until Ctrl-C (WebSocket, or WebSub with --callback)',
    )
    .option(
      '--callback <url>',
      '--follow over WebSub: the callback URL the hub delivers to (this process listens on its port and path)',
    )
    .option(
      '--poll <duration>',
      '--follow: catch up from the Change Lists after this long without a run while a notification channel is down, none is advertised, or no framework notifications are connected (default 60s; 0 never)',
      parseDuration,
    )
    .option(
      '--framework-poll <duration>',
      '--follow: the same while framework notifications are connected (default 15m, or --poll when given; 0 never)',
      parseDuration,
    )
    .option(
      '--framework-check <duration>',
      '--follow: how long a catch-up announced by a Change List update waits while every change notification was applied (default 60s, jittered; 0 at once)',
      parseDuration,
    )
    .addHelpText('after', SYNC_HELP)
    .action(async (url: string, dir: string, o: Record<string, unknown>) => {
      const modes = (['baseline', 'incremental', 'audit'] as const).filter((m) => o[m] === true);
      if (modes.length > 1) {
        process.stderr.write(`resourcesync sync: choose one of --${modes.join(', --')}\n`);
        process.exitCode = EXIT.USAGE;
        return;
      }
      const layout = o['layout'];
      if (layout !== undefined && layout !== 'host-path' && layout !== 'path') {
        process.stderr.write('resourcesync sync: --layout is host-path or path\n');
        process.exitCode = EXIT.USAGE;
        return;
      }
      const durability = o['durability'];
      if (durability !== undefined && durability !== 'batch' && durability !== 'file' && durability !== 'none') {
        process.stderr.write('resourcesync sync: --durability is file, batch or none\n');
        process.exitCode = EXIT.USAGE;
        return;
      }
      let headers: Record<string, string>;
      try {
        headers = Object.fromEntries((o['header'] as string[]).map(parseHeader));
      } catch (e) {
        process.stderr.write(`resourcesync sync: --header: ${(e as Error).message}\n`);
        process.exitCode = EXIT.USAGE;
        return;
      }
      const http: { -readonly [K in keyof HttpClientOptions]: HttpClientOptions[K] } = {};
      if (Object.keys(headers).length > 0) http.headers = headers;
      if (typeof o['token'] === 'string') http.bearerToken = o['token'];
      if ((o['tokenHost'] as string[]).length > 0) http.credentialHosts = o['tokenHost'] as string[];
      if (typeof o['delay'] === 'number') http.politenessDelayMs = o['delay'];
      if (typeof o['maxConnections'] === 'number') http.maxConnections = o['maxConnections'];
      if (typeof o['timeout'] === 'number') {
        http.connectTimeoutMs = o['timeout'];
        http.headersTimeoutMs = o['timeout'];
        http.bodyIdleTimeoutMs = o['timeout'];
      }
      const concurrency = typeof o['concurrency'] === 'number' ? o['concurrency'] : undefined;
      if (concurrency !== undefined) http.connectionsPerHost = Math.min(concurrency, 64);
      const destination: {
        -readonly [K in keyof SyncCommandOptions['destination']]: SyncCommandOptions['destination'][K];
      } = {
        http,
        dryRun: o['dryRun'] === true,
        delete: o['delete'] === true,
        checksum: o['checksum'] === true,
        autoBaseline: o['autoBaseline'] === true,
        noDumps: o['dumps'] === false,
        authorityCheck: o['authorityCheck'] !== false,
        allowHosts: o['allowHost'] as string[],
      };
      if (typeof o['set'] === 'string') destination.set = o['set'];
      const include = o['include'] as string[];
      const exclude = o['exclude'] as string[];
      try {
        createUriFilter({ include, exclude });
      } catch (e) {
        process.stderr.write(`resourcesync sync: ${(e as Error).message}\n`);
        process.exitCode = EXIT.USAGE;
        return;
      }
      if (include.length > 0) destination.include = include;
      if (exclude.length > 0) destination.exclude = exclude;
      if (o['allowOtherSource'] === true) destination.allowOtherSource = true;
      if (typeof o['from'] === 'string') destination.from = o['from'];
      if (concurrency !== undefined) destination.concurrency = concurrency;
      if (typeof o['resourceTimeout'] === 'number') destination.resourceTimeoutMs = o['resourceTimeout'];
      if (layout !== undefined) destination.layout = layout;
      if (durability !== undefined) destination.durability = durability as Durability;
      const json = o['json'] === true;
      const followOnly = ['poll', 'frameworkPoll', 'frameworkCheck'].filter((k) => o[k] !== undefined);
      if (followOnly.length > 0 && o['follow'] !== true && typeof o['callback'] !== 'string') {
        const flags = followOnly.map((k) => `--${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`);
        process.stderr.write(
          `resourcesync sync: ${flags.join(', ')} only ${flags.length === 1 ? 'applies' : 'apply'} with --follow\n`,
        );
        process.exitCode = EXIT.USAGE;
        return;
      }
      if (o['follow'] === true || typeof o['callback'] === 'string') {
        if (modes.length > 0 || o['dryRun'] === true) {
          process.stderr.write(
            'resourcesync sync: --follow does not combine with --baseline, --incremental, --audit or --dry-run\n',
          );
          process.exitCode = EXIT.USAGE;
          return;
        }
        const callback = o['callback'];
        if (callback !== undefined && !/^https?:\/\/[^/]/i.test(String(callback))) {
          process.stderr.write('resourcesync sync: --callback must be an absolute http(s) URL\n');
          process.exitCode = EXIT.USAGE;
          return;
        }
        const ms = (name: string): number | undefined =>
          typeof o[name] === 'number' ? (o[name] as number) : undefined;
        const poll = ms('poll');
        const frameworkPoll = ms('frameworkPoll');
        const frameworkCheck = ms('frameworkCheck');
        // Loaded only here: following pulls in the notification clients (ws, and all of undici), ~40 ms of
        // start-up that a plain `sync` does not need.
        const { runFollow } = await import('./follow.js');
        process.exitCode = await runFollow(url, dir, {
          destination,
          json,
          ...(typeof callback === 'string' ? { callback } : {}),
          ...(poll === undefined ? {} : { catchUpIntervalMs: poll }),
          ...(frameworkPoll === undefined ? {} : { frameworkCatchUpIntervalMs: frameworkPoll }),
          ...(frameworkCheck === undefined ? {} : { frameworkVerifyDelayMs: frameworkCheck }),
        });
        return;
      }
      process.exitCode = await runSync(url, dir, {
        mode: modes[0] ?? 'auto',
        json,
        progress: typeof o['progress'] === 'boolean' ? o['progress'] : !json && process.stderr.isTTY === true,
        detailedExitCode: o['detailedExitCode'] === true,
        destination,
      });
    });
}
