/**
 * `resourcesync serve <dir>`: a live ResourceSync Source for a directory tree. Also the engine of
 * `resourcesync demo` ({@link runLiveSource}).
 *
 * @module
 */
import { constants as fsConstants, readFileSync } from 'node:fs';
import { access, mkdir, rm, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { type Command, Option } from 'commander';
import { ResourceSyncError } from '../core/errors.js';
import { fileSource, openDocument } from '../xml/index.js';
import { type DirectorySource, type DirectorySourceOptions, openDirectorySource } from '../source/index.js';
import { defaultStateDir } from '../source/directory.js';
import { openGzipCache } from '../source/http/gzip-cache.js';
import { createIngestRoute, directoryIngest, INGEST_PATH } from '../source/ingest.js';
import { createSourceServer, type RequestLogEntry } from '../source/server.js';
import { attachSourceNotifications, type SourceNotifications } from '../hub/attach.js';
import { EXIT } from './exit.js';
import { parseDuration, positiveInteger } from './options.js';
import { runOaiSource } from './serve-oai.js';

/** What {@link runLiveSource} needs; the CLI options, parsed and checked. */
export interface LiveSourceOptions {
  readonly dir: string;
  readonly port: number;
  readonly host: string;
  readonly baseUrl?: string;
  readonly stateDir?: string;
  /** `--store`: a postgres:// URL (default: RESOURCESYNC_STORE, else SQLite in the state directory). */
  readonly store?: string;
  /**
   * `--site-dir`: where generated documents and dump packages are written (default `<state>/site`). Several
   * processes on one store given one shared directory generate each document and dump once (see `source.ts`).
   */
  readonly siteDir?: string;
  readonly sets?: 'top-level';
  readonly watch: boolean;
  readonly rescanSeconds?: number;
  readonly json: boolean;
  readonly log: boolean;
  /** Heading printed before the URLs (text mode). */
  readonly title?: string;
  /**
   * URL (absolute, or relative to the base URL) of a human-readable description of the Source, linked with
   * `rel="describedby"` from the Source Description and, with the default single set, from its entry and
   * Capability List (§8, §9).
   */
  readonly describedBy?: string;
  /** File served for paths ending in `/` (e.g. `index.html`). */
  readonly directoryIndex?: string;
  /** Lines printed after the URLs (text mode); `{url}` is replaced by the listening URL. */
  readonly hints?: readonly string[];
  /** Resolves when the server should stop; default: the first SIGINT or SIGTERM. */
  readonly until?: Promise<void>;
  /** Change notifications on WebSocket channels (default true; issue 5). */
  readonly notify?: boolean;
  /** Serve the explorer of this Source at `/explorer/` (default true; `src/web/mount.ts`). */
  readonly explorer?: boolean;
  /** Run a WebSub hub at `<base>hub`, subscriptions kept in the state directory. */
  readonly hub?: boolean;
  /** Publish change notifications to this external WebSub hub instead. */
  readonly hubUrl?: string;
  /** Changes per Change List before a new one opens (the Source's `changeListMaxEntries`; default 50,000). */
  readonly changeListMaxEntries?: number;
  /** Open a new Change List once a change comes this long after the open one's `from` (default: never). */
  readonly changeListPeriodMs?: number;
  /** `--ingest-token`: accept pushed changes at `<base>resourcesync/ingest` with this bearer token (`ingest.ts`). */
  readonly ingestToken?: string;
  /** `--tls-cert` / `--tls-key`: serve HTTPS, HTTP/2 and HTTP/1.1 by ALPN (see `NodeServerOptions.tls`). */
  readonly tls?: { readonly cert: Buffer; readonly key: Buffer };
}

/** URLs a running Source advertises, read from its own Source Description and Capability Lists. */
export interface AdvertisedUrls {
  readonly sourceDescription: string;
  readonly capabilityLists: readonly string[];
  readonly resourceLists: readonly string[];
}

interface ServeCliOptions {
  readonly ingestToken?: string;
  readonly tlsCert?: string;
  readonly tlsKey?: string;
  readonly baseUrl?: string;
  readonly port: string;
  readonly host: string;
  readonly state?: string;
  readonly store?: string;
  readonly siteDir?: string;
  readonly sets?: string;
  readonly htmlLinks?: boolean;
  readonly watch: boolean;
  readonly rescan?: string;
  readonly json?: boolean;
  readonly log?: boolean;
  readonly describedBy?: string;
  readonly index?: string;
  readonly notify: boolean;
  readonly explorer: boolean;
  readonly hub?: boolean;
  readonly hubUrl?: string;
  readonly changelistMaxEntries?: number;
  readonly changelistPeriod?: number;
  readonly oaiPmh?: string;
  readonly metadataPrefix?: string[];
  readonly set?: string;
  readonly oaiInterval?: number;
  readonly oaiOverlap?: number;
  readonly oaiReconcile?: number;
}

/**
 * Why `--html-links` does nothing any more: a `<link>` written into a page changes its bytes, which then no
 * longer match the length and hash its Resource List, Change List and dumps give (a Destination's fixity check
 * fails). The same discovery link (§6.3.3) is in the HTTP `Link` header of every resource response.
 */
export const HTML_LINKS_IGNORED =
  '--html-links is ignored: HTML pages are served unaltered (so they match their listed length and hash); ' +
  'every resource response carries Link: <capability list>; rel="resourcesync" (§6.3.3)';

/** Parses a whole number option; RS_CONFIG naming the option otherwise. */
export function parseWholeNumber(name: string, text: string, min: number, max: number): number {
  if (!/^\d+$/.test(text) || Number(text) < min || Number(text) > max) {
    throw new ResourceSyncError('RS_CONFIG', `--${name} must be a whole number from ${min} to ${max}, not "${text}"`);
  }
  return Number(text);
}

/** Checks a base URL given on the command line: absolute http(s). */
export function checkBaseUrl(text: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new ResourceSyncError('RS_CONFIG', `--base-url ${JSON.stringify(text)} is not an absolute URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ResourceSyncError('RS_CONFIG', `--base-url ${JSON.stringify(text)} is not an http(s) URL`);
  }
  return url.href;
}

/** Checks --hub-url: an absolute http(s) URL. */
function checkHubUrl(text: string): string {
  let url: URL | undefined;
  try {
    url = new URL(text);
  } catch {
    url = undefined;
  }
  if (url === undefined || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
    throw new ResourceSyncError('RS_CONFIG', `--hub-url ${JSON.stringify(text)} is not an absolute http(s) URL`);
  }
  return url.href;
}

/** The collection directory must exist and be a directory. */
async function checkCollectionDir(dir: string): Promise<void> {
  let st: Awaited<ReturnType<typeof stat>>;
  try {
    st = await stat(dir);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new ResourceSyncError(
      'RS_CONFIG',
      code === 'ENOENT'
        ? `collection directory ${dir} does not exist`
        : `cannot read collection directory ${dir}: ${code}`,
      { cause: e },
    );
  }
  if (!st.isDirectory()) throw new ResourceSyncError('RS_CONFIG', `${dir} is not a directory`);
}

/**
 * The state directory must be creatable and writable (a read-only disk is refused up front, naming it and the
 * option that chooses it: `given` false for a default the user never typed).
 */
export async function checkStateDir(dir: string, given = true): Promise<void> {
  try {
    await mkdir(dir, { recursive: true });
    await access(dir, fsConstants.W_OK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why =
      code === 'EROFS'
        ? 'is on a read-only file system'
        : code === 'EACCES'
          ? 'is not writable'
          : `cannot be used (${code})`;
    throw new ResourceSyncError(
      'RS_CONFIG',
      given
        ? `--state ${dir}: the state directory ${why}`
        : `the default state directory ${dir} ${why}; choose another with --state <dir>`,
      { cause: e },
    );
  }
}

/** `--site-dir` must be creatable and writable (RS_CONFIG naming it otherwise). */
async function checkSiteDir(dir: string): Promise<void> {
  try {
    await mkdir(dir, { recursive: true });
    await access(dir, fsConstants.W_OK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new ResourceSyncError('RS_CONFIG', `--site-dir ${dir}: the directory cannot be used (${code})`, {
      cause: e,
    });
  }
}

/** The Source Description, Capability Lists and Resource Lists (or indexes) the Source currently offers. */
export async function readAdvertisedUrls(
  site: Pick<DirectorySource, 'sourceDescriptionUrl' | 'document'>,
): Promise<AdvertisedUrls> {
  const sourceDescription = site.sourceDescriptionUrl;
  const capabilityLists: string[] = [];
  const resourceLists: string[] = [];
  for await (const e of entriesOf(site, sourceDescription)) capabilityLists.push(e.loc);
  for (const cl of capabilityLists) {
    for await (const e of entriesOf(site, cl)) {
      if (e.md?.capability === 'resourcelist') resourceLists.push(e.loc);
    }
  }
  return { sourceDescription, capabilityLists, resourceLists };
}

async function* entriesOf(site: Pick<DirectorySource, 'document'>, url: string) {
  const file = await site.document(new URL(url).pathname);
  if (file === undefined) return;
  const doc = await openDocument(fileSource(file.path), { url });
  yield* doc.entries;
}

/** One line of the request log (`--log`). */
export function formatRequest(e: RequestLogEntry): string {
  return `${new Date().toISOString()} ${e.method} ${e.target} ${e.status} ${e.bytes} ${e.ms}ms${e.aborted ? ' aborted' : ''}`;
}

/** Resolves at the first SIGINT or SIGTERM. */
export function waitForSignal(): Promise<void> {
  return new Promise<void>((done) => {
    const stop = (): void => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      done();
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
}

/**
 * Runs a live Source until SIGINT/SIGTERM (or `until`): listens first (so that port 0 can give the default base
 * URL `http://<host>:<port>/`; requests meanwhile get 503), opens the directory Source, scans the tree against
 * the stored inventory, prints the URLs, then watches the tree. Shutdown: the server stops accepting and
 * finishes in-flight responses, then the Source closes its watcher and store.
 *
 * @throws ResourceSyncError RS_CONFIG for a missing directory, an unusable state directory, a bad base URL or
 *   a port in use (each naming the path or port).
 */
export async function runLiveSource(o: LiveSourceOptions): Promise<void> {
  const dir = resolve(o.dir);
  await checkCollectionDir(dir);
  const stateDir = o.stateDir === undefined ? await defaultStateDir(dir) : resolve(o.stateDir);
  await checkStateDir(stateDir, o.stateDir !== undefined);
  if (o.siteDir !== undefined) await checkSiteDir(resolve(o.siteDir));
  const baseUrlGiven = o.baseUrl === undefined ? undefined : checkBaseUrl(o.baseUrl);
  const print = (obj: Record<string, unknown>, text: string): void => {
    process.stdout.write(o.json ? `${JSON.stringify(obj)}\n` : `${text}\n`);
  };
  const warn = (message: string): void => {
    if (o.json) process.stdout.write(`${JSON.stringify({ event: 'warning', message })}\n`);
    else process.stderr.write(`resourcesync: warning: ${message}\n`);
  };

  let resolveSite: (s: DirectorySource) => void = () => {};
  let rejectSite: (e: unknown) => void = () => {};
  const sitePromise = new Promise<DirectorySource>((res, rej) => {
    resolveSite = res;
    rejectSite = rej;
  });
  sitePromise.catch(() => {}); // handled below; the server only needs to know it failed
  // Compressed copies of documents live in the state directory (emptied at start and removed at stop; nothing
  // is left in /tmp, and a killed server's copies go with its state).
  const gzipDir = join(stateDir, 'gzip-cache');
  const gzipCache = await openGzipCache({ dir: gzipDir, onError: (e) => warn(`gzip cache: ${String(e)}`) });
  const dropGzipCache = async () => {
    await gzipCache.close();
    await rm(gzipDir, { recursive: true, force: true });
  };
  const server = createSourceServer(sitePromise, {
    ...(o.directoryIndex === undefined ? {} : { directoryIndex: o.directoryIndex }),
    ...(o.tls === undefined ? {} : { tls: o.tls }),
    gzipCache,
    ...(o.log
      ? {
          onRequest: (e: RequestLogEntry) =>
            o.json
              ? process.stdout.write(`${JSON.stringify({ event: 'request', ...e })}\n`)
              : process.stdout.write(`${formatRequest(e)}\n`),
        }
      : {}),
    onError: (e, req) => warn(`${req.method} ${req.target}: ${e instanceof Error ? e.message : String(e)}`),
  });
  const stopSignal = o.until ?? waitForSignal();
  let started = false;
  void stopSignal.then(() => {
    // The initial scan cannot be interrupted without losing its work; say so (a second Ctrl-C kills the
    // process, which the store survives).
    if (!started)
      process.stderr.write('resourcesync: stopping once the initial scan is done (Ctrl-C again to abort)\n');
  });
  let address: Awaited<ReturnType<typeof server.listen>>;
  try {
    address = await server.listen(o.port, o.host);
  } catch (e) {
    await dropGzipCache();
    throw e;
  }
  let site: DirectorySource | undefined;
  let notifications: SourceNotifications | undefined;
  let explorer: { readonly url: string; close(): Promise<void> } | undefined;
  try {
    const host = o.host === '0.0.0.0' || o.host === '::' ? 'localhost' : address.host;
    const scheme = o.tls === undefined ? 'http' : 'https';
    const baseUrl = baseUrlGiven ?? `${scheme}://${host.includes(':') ? `[${host}]` : host}:${address.port}/`;
    let options: DirectorySourceOptions = {
      dir,
      baseUrl,
      watch: false,
      onWarning: warn,
      stateDir,
      ...(o.store === undefined ? {} : { store: o.store }),
      // A shared site directory: generation locks beside the documents when the store has none (SQLite).
      ...(o.siteDir === undefined ? {} : { siteDir: resolve(o.siteDir), lockDir: join(resolve(o.siteDir), '.locks') }),
      ...(o.sets === 'top-level' ? { sets: 'top-level' as const } : {}),
      ...(o.rescanSeconds === undefined ? {} : { rescanIntervalMs: o.rescanSeconds * 1000 }),
      limits: {
        ...(o.changeListMaxEntries === undefined ? {} : { changeListMaxEntries: o.changeListMaxEntries }),
        ...(o.changeListPeriodMs === undefined ? {} : { changeListPeriodMs: o.changeListPeriodMs }),
      },
    };
    if (o.describedBy !== undefined) {
      const describedBy = new URL(o.describedBy, baseUrl).href;
      options = {
        ...options,
        describedBy,
        ...(o.sets === undefined ? { sets: [{ name: 'default', describedBy }] } : {}),
      };
    }
    if (o.notify !== false) {
      // Each Capability List advertises the set's notification channels (N-§3) and hub; generated on request,
      // after `notifications` is attached below.
      options = {
        ...options,
        capabilityListExtras: (set) =>
          notifications === undefined
            ? undefined
            : {
                extraEntries: notifications.notifier.capabilityListEntries(set),
                ...(notifications.hubUrl === undefined ? {} : { hubUrl: notifications.hubUrl }),
              },
      };
    }
    // Opening scans the tree against the stored inventory (the first scan of a new state is the baseline).
    site = await openDirectorySource(options);
    // With --log, each document group generated (or taken over from another process sharing --site-dir).
    if (o.log && o.json)
      site.source.onGeneration((e) => process.stdout.write(`${JSON.stringify({ event: 'generated', ...e })}\n`));
    resolveSite(site);
    started = true;
    if (o.explorer !== false)
      explorer = (await import('../web/mount.js')).mountExplorer(server.handler, { baseUrl, listenUrl: address.url });
    // Under the base URL, as the help says (`<base>resourcesync/ingest`): behind a proxy that forwards the base
    // path, the route is reachable where the documents are.
    const ingestUrl = o.ingestToken === undefined ? undefined : new URL(INGEST_PATH.slice(1), site.baseUrl);
    if (o.ingestToken !== undefined && ingestUrl !== undefined)
      server.handler.mount(
        ingestUrl.pathname,
        createIngestRoute({ token: o.ingestToken, baseUrl: site.baseUrl, apply: directoryIngest(site) }),
        { methods: ['POST'] },
      );
    if (o.notify !== false) {
      notifications = attachSourceNotifications({
        server: server.httpServer,
        baseUrl,
        site,
        ...(o.hub === true
          ? { hub: { db: join(site.stateDir, 'hub.db') } }
          : o.hubUrl === undefined
            ? {}
            : { hub: { url: o.hubUrl } }),
        onError: (m) => warn(m),
      });
    }
    const stats = await site.stats();
    if (o.watch) await site.watch();
    const urls = await readAdvertisedUrls(site);
    const channels =
      notifications === undefined ? [] : stats.sets.map((s) => notifications!.notifier.urls(s).changeChannel);
    const hubUrl = notifications?.hubUrl;
    if (o.json) {
      print(
        {
          event: 'listening',
          url: address.url,
          baseUrl,
          dir,
          ...urls,
          ...stats,
          channels,
          ...(hubUrl === undefined ? {} : { hub: hubUrl }),
          ...(explorer === undefined ? {} : { explorer: explorer.url }),
          ...(ingestUrl === undefined ? {} : { ingest: ingestUrl.href }),
        },
        '',
      );
    } else {
      const lines = [
        o.title ?? `Serving ${dir} as a ResourceSync Source`,
        `  listening on        ${address.url}`,
        `  base URL            ${baseUrl}`,
        `  resources           ${stats.resources} in ${stats.sets.length} set(s), change log at ${stats.seq}`,
        `  Source Description  ${urls.sourceDescription}`,
        ...urls.capabilityLists.map((u) => `  Capability List     ${u}`),
        ...urls.resourceLists.map((u) => `  Resource List       ${u}`),
        ...channels.map((u) => `  Change channel      ${u}`),
        ...(hubUrl === undefined ? [] : [`  WebSub hub          ${hubUrl}`]),
        ...(explorer === undefined ? [] : [`  Explorer            ${explorer.url}`]),
        ...(ingestUrl === undefined ? [] : [`  Push (ingest)       ${ingestUrl.href}`]),
        o.watch ? '  watching for changes; Ctrl-C to stop' : '  not watching (--no-watch); Ctrl-C to stop',
        ...(o.hints ?? []).map((h) => h.replaceAll('{url}', address.url)),
      ];
      print({}, lines.join('\n'));
    }
    await stopSignal;
  } catch (e) {
    rejectSite(e);
    await explorer?.close();
    await notifications?.close();
    await server.close();
    await site?.close();
    await dropGzipCache();
    throw e;
  }
  if (!o.json) process.stdout.write('stopping...\n');
  await explorer?.close();
  await notifications?.close();
  await server.close();
  await site.close();
  await dropGzipCache();
  print({ event: 'stopped' }, 'stopped');
}

/** Registers `serve` on the program. */
export function register(program: Command): void {
  program
    .command('serve')
    .description('Serve a directory tree as a live ResourceSync Source (documents, dumps, resources over HTTP).')
    .argument('[dir]', 'the collection: every file under it is a resource (hidden files are not); none with --oai-pmh')
    .option('--base-url <url>', 'public base URL of the resources (default: http://<host>:<port>/)')
    .option('--port <n>', 'port to listen on (0 = any free port)', '8080')
    .option('--host <addr>', 'address to listen on', '127.0.0.1')
    .option('--tls-cert <file>', 'serve HTTPS with this certificate (PEM), HTTP/2 and HTTP/1.1 (with --tls-key)')
    .option('--tls-key <file>', 'the private key (PEM) of --tls-cert')
    .option('--state <dir>', 'where the inventory and change log are kept (default: next to <dir>)')
    .option(
      '--store <url>',
      'keep the inventory and change log in PostgreSQL, shared by several serve processes: postgres://user@host:port/db?schema=name (default: $RESOURCESYNC_STORE, else SQLite in --state)',
    )
    .option(
      '--site-dir <dir>',
      'where generated documents and dumps are written (default: <state>/site); give several serve processes on one --store the same shared directory so that each is generated once',
    )
    .option('--sets <mode>', 'resource sets: "top-level" gives one Capability List per top-level folder')
    // Kept so that scripts using it still run: HTML is served unaltered (see the warning).
    .addOption(new Option('--html-links').hideHelp())
    .option('--no-watch', 'do not watch the tree (scan on start only)')
    .option('--rescan <seconds>', 'periodic full rescan while watching, as a safety net')
    .option('--json', 'one JSON object per line on stdout (listening + URLs, requests with --log, warnings)')
    .option('--log', 'print one line per request')
    .option('--index <name>', 'file served for paths ending in / (e.g. index.html)')
    .option(
      '--described-by <url>',
      'description of the Source (absolute, or relative to the base URL), rel="describedby"',
    )
    .option('--no-notify', 'no change notifications (WebSocket channels /resourcesync/<set>/change-notification)')
    .option('--no-explorer', 'do not serve the explorer page at /explorer/')
    .option('--hub', 'also run a WebSub hub at <base>hub (subscriptions kept in the state directory)')
    .option('--hub-url <url>', 'publish change notifications to this external WebSub hub')
    .option(
      '--changelist-max-entries <n>',
      'changes per Change List before a new one opens (default 50000; a Destination polling the open list reads all of it)',
      positiveInteger,
    )
    .option('--changelist-period <duration>', 'open a new Change List after this long (e.g. 24h, 7d)', parseDuration)
    .option(
      '--ingest-token <token>',
      'accept changes POSTed to <base>resourcesync/ingest (a Change List or JSON lines) with "Authorization: Bearer <token>"; ' +
        'the paths named are re-checked at once (default: RESOURCESYNC_INGEST_TOKEN)',
    )
    .option('--oai-pmh <base-url>', 'serve an OAI-PMH 2.0 repository instead of a directory (see docs/oai-pmh.md)')
    .option(
      '--metadata-prefix <prefix>',
      'with --oai-pmh: a metadata format to publish, one resource per item and format (repeatable; default oai_dc)',
      (v: string, prev: string[] | undefined) => [...(prev ?? []), v],
    )
    .option('--set <setSpec>', 'with --oai-pmh: harvest this OAI set only')
    .option(
      '--oai-interval <duration>',
      'with --oai-pmh: time between harvests while serving (default 10m)',
      parseDuration,
    )
    .option(
      '--oai-overlap <duration>',
      'with --oai-pmh: each harvest starts this long before the last one did (default 5m; see docs/oai-pmh.md)',
      parseDuration,
    )
    .option(
      '--oai-reconcile <duration>',
      'with --oai-pmh: full ListIdentifiers reconcile this often, "off" for never (default 24h, 7d for providers that keep deletions)',
      (v: string) => (v === 'off' ? 0 : parseDuration(v)),
    )
    .addHelpText(
      'after',
      '\nScans the tree against the stored inventory on start, then watches it; runs until SIGINT or SIGTERM.\n' +
        'Exit codes: 0 stopped cleanly, 2 bad arguments, missing directory, unusable state directory or port in use.\n' +
        '\nWith --oai-pmh <base-url> (no <dir>): harvests the repository (first a full harvest, during which the server\n' +
        'answers 503), serves what it harvested, and harvests again every --oai-interval; state in --state (default\n' +
        `./resourcesync-oai-state). Exit codes then: 1 the first harvest failed (the provider's error is printed),\n` +
        '2 bad arguments or a format the provider does not offer, 130 stopped during the first harvest (it goes on\n' +
        'from there at the next start).',
    )
    .action(async (dir: string | undefined, opts: ServeCliOptions) => {
      if (opts.oaiPmh !== undefined) {
        if (dir !== undefined)
          throw new ResourceSyncError('RS_CONFIG', 'serve takes a directory or --oai-pmh <base-url>, not both');
        if (opts.ingestToken !== undefined)
          throw new ResourceSyncError('RS_CONFIG', '--ingest-token goes with a directory, not --oai-pmh');
        await runOaiSource({
          provider: opts.oaiPmh,
          metadataPrefixes: opts.metadataPrefix ?? ['oai_dc'],
          port: parseWholeNumber('port', opts.port, 0, 65_535),
          host: opts.host,
          json: opts.json === true,
          log: opts.log === true,
          notify: opts.notify,
          hub: opts.hub === true,
          progress: process.stderr.isTTY === true && opts.json !== true,
          ...(opts.hubUrl === undefined ? {} : { hubUrl: checkHubUrl(opts.hubUrl) }),
          ...(opts.baseUrl === undefined ? {} : { baseUrl: opts.baseUrl }),
          ...(opts.state === undefined ? {} : { stateDir: opts.state }),
          ...(opts.set === undefined ? {} : { set: opts.set }),
          ...(opts.oaiInterval === undefined ? {} : { intervalMs: opts.oaiInterval }),
          ...(opts.oaiOverlap === undefined ? {} : { overlapMs: opts.oaiOverlap }),
          ...(opts.oaiReconcile === undefined ? {} : { reconcileEveryMs: opts.oaiReconcile }),
          ...(opts.changelistMaxEntries === undefined ? {} : { changeListMaxEntries: opts.changelistMaxEntries }),
          ...(opts.changelistPeriod === undefined ? {} : { changeListPeriodMs: opts.changelistPeriod }),
        });
        return;
      }
      if (dir === undefined)
        throw new ResourceSyncError('RS_CONFIG', 'serve needs a directory (or --oai-pmh <base-url>)');
      const oaiOnly = (['metadataPrefix', 'set', 'oaiInterval', 'oaiOverlap', 'oaiReconcile'] as const).find(
        (k) => opts[k] !== undefined,
      );
      if (oaiOnly !== undefined)
        throw new ResourceSyncError(
          'RS_CONFIG',
          `--${oaiOnly.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} goes with --oai-pmh`,
        );
      if (opts.sets !== undefined && opts.sets !== 'top-level') {
        throw new ResourceSyncError('RS_CONFIG', `--sets must be "top-level", not "${opts.sets}"`);
      }
      if (opts.htmlLinks === true) {
        if (opts.json === true)
          process.stdout.write(`${JSON.stringify({ event: 'warning', message: HTML_LINKS_IGNORED })}\n`);
        else process.stderr.write(`resourcesync: warning: ${HTML_LINKS_IGNORED}\n`);
      }
      const ingestToken = opts.ingestToken ?? process.env['RESOURCESYNC_INGEST_TOKEN'];
      if (ingestToken !== undefined && ingestToken.length < 16)
        throw new ResourceSyncError('RS_CONFIG', '--ingest-token must have at least 16 characters');
      if ((opts.tlsCert === undefined) !== (opts.tlsKey === undefined))
        throw new ResourceSyncError('RS_CONFIG', '--tls-cert and --tls-key go together');
      let tls: { cert: Buffer; key: Buffer } | undefined;
      if (opts.tlsCert !== undefined && opts.tlsKey !== undefined) {
        const read = (what: string, file: string): Buffer => {
          try {
            return readFileSync(file);
          } catch (e) {
            throw new ResourceSyncError('RS_CONFIG', `cannot read the TLS ${what} ${file}: ${(e as Error).message}`);
          }
        };
        tls = { cert: read('certificate', opts.tlsCert), key: read('key', opts.tlsKey) };
      }
      await runLiveSource({
        ...(tls === undefined ? {} : { tls }),
        dir,
        port: parseWholeNumber('port', opts.port, 0, 65_535),
        host: opts.host,
        watch: opts.watch,
        json: opts.json === true,
        log: opts.log === true,
        notify: opts.notify,
        explorer: opts.explorer,
        hub: opts.hub === true,
        ...(opts.hubUrl === undefined ? {} : { hubUrl: checkHubUrl(opts.hubUrl) }),
        ...(opts.baseUrl === undefined ? {} : { baseUrl: opts.baseUrl }),
        ...(opts.describedBy === undefined ? {} : { describedBy: opts.describedBy }),
        ...(opts.index === undefined ? {} : { directoryIndex: opts.index }),
        ...(opts.state === undefined ? {} : { stateDir: opts.state }),
        ...(opts.store === undefined ? {} : { store: opts.store }),
        ...(opts.siteDir === undefined ? {} : { siteDir: opts.siteDir }),
        ...(opts.sets === 'top-level' ? { sets: 'top-level' as const } : {}),
        ...(opts.rescan === undefined ? {} : { rescanSeconds: parseWholeNumber('rescan', opts.rescan, 1, 86_400) }),
        ...(opts.changelistMaxEntries === undefined ? {} : { changeListMaxEntries: opts.changelistMaxEntries }),
        ...(opts.changelistPeriod === undefined ? {} : { changeListPeriodMs: opts.changelistPeriod }),
        ...(ingestToken === undefined ? {} : { ingestToken }),
      });
      process.exitCode = EXIT.OK;
    });
}
