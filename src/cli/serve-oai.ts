/**
 * `resourcesync serve --oai-pmh <base-url>`: a live ResourceSync Source over an OAI-PMH 2.0 repository (the
 * bridge of `src/source/oai/`). Listens first (503 until the first, full harvest is done), harvests, serves,
 * and harvests again every `--oai-interval` until SIGINT or SIGTERM.
 *
 * @module
 */
import { rm } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { ResourceSyncError } from '../core/errors.js';
import { lockFile } from '../io/lock.js';
import { attachSourceNotifications, type SourceNotifications } from '../hub/attach.js';
import { openGzipCache } from '../source/http/gzip-cache.js';
import { type OaiBridge, openOaiBridge } from '../source/oai/bridge.js';
import type { HarvestEvent, HarvestReport } from '../source/oai/harvest.js';
import { createSourceServer, type RequestLogEntry } from '../source/server.js';
import { EXIT } from './exit.js';
import { checkBaseUrl, checkStateDir, formatRequest, readAdvertisedUrls, waitForSignal } from './serve.js';

/** What {@link runOaiSource} needs: the `serve --oai-pmh` options, parsed and checked. */
export interface OaiSourceOptions {
  /** The OAI-PMH provider's base URL. */
  readonly provider: string;
  readonly metadataPrefixes: readonly string[];
  /** An OAI set (setSpec) to harvest alone. */
  readonly set?: string;
  readonly port: number;
  readonly host: string;
  readonly baseUrl?: string;
  /** Default `./resourcesync-oai-state`. */
  readonly stateDir?: string;
  readonly json: boolean;
  readonly log: boolean;
  readonly notify?: boolean;
  readonly hub?: boolean;
  readonly hubUrl?: string;
  /** Time between harvests while serving (default 10 min). */
  readonly intervalMs?: number;
  readonly overlapMs?: number;
  /** Time between reconciles; 0: never (default by the provider's deletedRecord policy). */
  readonly reconcileEveryMs?: number;
  readonly changeListMaxEntries?: number;
  readonly changeListPeriodMs?: number;
  /** Show progress of the first harvest on stderr (the CLI sets it when stderr is a TTY and not --json). */
  readonly progress?: boolean;
  /** Resolves when the server should stop; default: the first SIGINT or SIGTERM. */
  readonly until?: Promise<void>;
}

/** Default state directory of `serve --oai-pmh`. */
export const DEFAULT_OAI_STATE_DIR = 'resourcesync-oai-state';

function summary(r: HarvestReport): string {
  return `${r.created} created, ${r.updated} updated, ${r.deleted} deleted, ${r.unchanged} unchanged (${r.records} records in ${r.pages} responses${r.restarts > 0 ? `, ${r.restarts} list restart(s)` : ''})`;
}

/**
 * Runs the bridge behind our HTTP server until SIGINT/SIGTERM (or `until`). A Ctrl-C during the first harvest
 * stops it at once: the harvest goes on from the last page done at the next start.
 *
 * @throws ResourceSyncError RS_CONFIG for bad URLs, a state directory of another provider, a format the
 *   provider does not offer, a port in use; the first harvest's failure otherwise (RS_HTTP, RS_OAI_PMH ...).
 */
export async function runOaiSource(o: OaiSourceOptions): Promise<void> {
  const stateDir = resolve(o.stateDir ?? DEFAULT_OAI_STATE_DIR);
  await checkStateDir(stateDir, o.stateDir !== undefined);
  // One bridge per state: a second one would harvest and record every change again.
  const lock = lockFile(join(stateDir, 'lock'), { what: `the state directory ${stateDir}` });
  try {
    await runLocked(o, stateDir);
  } finally {
    lock.release();
  }
}

async function runLocked(o: OaiSourceOptions, stateDir: string): Promise<void> {
  const baseUrlGiven = o.baseUrl === undefined ? undefined : checkBaseUrl(o.baseUrl);
  const print = (obj: Record<string, unknown>, text: string): void => {
    process.stdout.write(o.json ? `${JSON.stringify(obj)}\n` : `${text}\n`);
  };
  const warn = (message: string): void => {
    if (o.json) process.stdout.write(`${JSON.stringify({ event: 'warning', message })}\n`);
    else process.stderr.write(`resourcesync: warning: ${message}\n`);
  };
  let resolveSite: (s: OaiBridge) => void = () => {};
  let rejectSite: (e: unknown) => void = () => {};
  const sitePromise = new Promise<OaiBridge>((res, rej) => {
    resolveSite = res;
    rejectSite = rej;
  });
  sitePromise.catch(() => {}); // the server only needs to know it failed
  // In the state directory, not /tmp (emptied at start, removed at stop).
  const gzipDir = join(stateDir, 'gzip-cache');
  const gzipCache = await openGzipCache({ dir: gzipDir, onError: (e) => warn(`gzip cache: ${String(e)}`) });
  const server = createSourceServer(sitePromise, {
    gzipCache,
    ...(o.log
      ? {
          onRequest: (e: RequestLogEntry) =>
            process.stdout.write(o.json ? `${JSON.stringify({ event: 'request', ...e })}\n` : `${formatRequest(e)}\n`),
        }
      : {}),
    onError: (e, req) => warn(`${req.method} ${req.target}: ${e instanceof Error ? e.message : String(e)}`),
  });
  const stop = new AbortController();
  void (o.until ?? waitForSignal()).then(() => stop.abort(new ResourceSyncError('RS_ABORTED', 'stopped by a signal')));
  let bridge: OaiBridge | undefined;
  let notifications: SourceNotifications | undefined;
  try {
    const address = await server.listen(o.port, o.host);
    const host = o.host === '0.0.0.0' || o.host === '::' ? 'localhost' : address.host;
    const baseUrl = baseUrlGiven ?? `http://${host.includes(':') ? `[${host}]` : host}:${address.port}/`;
    let progressShown = false;
    const onEvent = (e: HarvestEvent): void => {
      if (o.json) {
        if (e.type !== 'page') process.stdout.write(`${JSON.stringify({ event: `harvest-${e.type}`, ...e })}\n`);
        return;
      }
      if (o.progress === true && e.type === 'page') {
        const of = e.completeListSize === undefined ? '' : ` of ${e.completeListSize}`;
        const at = e.cursor === undefined ? '' : ` at ${e.cursor + e.records}`;
        process.stderr.write(`\r\x1b[K${e.verb} ${e.metadataPrefix}: ${e.records} records${at}${of}`);
        progressShown = true;
      }
    };
    bridge = await openOaiBridge({
      provider: o.provider,
      baseUrl,
      stateDir,
      metadataPrefixes: o.metadataPrefixes,
      ...(o.set === undefined ? {} : { set: o.set }),
      ...(o.intervalMs === undefined ? {} : { intervalMs: o.intervalMs }),
      ...(o.overlapMs === undefined ? {} : { overlapMs: o.overlapMs }),
      ...(o.reconcileEveryMs === undefined ? {} : { reconcileEveryMs: o.reconcileEveryMs }),
      limits: {
        ...(o.changeListMaxEntries === undefined ? {} : { changeListMaxEntries: o.changeListMaxEntries }),
        ...(o.changeListPeriodMs === undefined ? {} : { changeListPeriodMs: o.changeListPeriodMs }),
      },
      onWarning: warn,
      onEvent,
      onHarvest: ({ report, error, reconcile }) => {
        const what = reconcile ? 'reconcile' : 'harvest';
        if (error !== undefined) {
          if (stop.signal.aborted) return;
          warn(
            `${what} failed (tried again in the next round): ${error instanceof Error ? error.message : String(error)}`,
          );
        } else if (report !== undefined && (reconcile || report.created + report.updated + report.deleted > 0))
          print({ event: what, ...report }, `${new Date().toISOString()} ${what}: ${summary(report)}`);
      },
      ...(o.notify === false
        ? {}
        : {
            capabilityListExtras: (set: string) =>
              notifications === undefined
                ? undefined
                : {
                    extraEntries: notifications.notifier.capabilityListEntries(set),
                    ...(notifications.hubUrl === undefined ? {} : { hubUrl: notifications.hubUrl }),
                  },
          }),
    });
    const ready = bridge.ready;
    if (!ready) {
      print(
        { event: 'harvesting', provider: o.provider, metadataPrefixes: o.metadataPrefixes, url: address.url },
        `Harvesting ${o.provider} (${o.metadataPrefixes.join(', ')}${o.set === undefined ? '' : `, set ${o.set}`}) ` +
          `for the first time; ${address.url} answers 503 until it is done`,
      );
      let report: HarvestReport;
      try {
        report = await bridge.harvest(stop.signal);
      } finally {
        if (progressShown) process.stderr.write('\r\x1b[K');
      }
      print({ event: 'harvest', ...report }, `first harvest: ${summary(report)}`);
    }
    resolveSite(bridge);
    if (o.notify !== false)
      notifications = attachSourceNotifications({
        server: server.httpServer,
        baseUrl,
        site: bridge,
        ...(o.hub === true
          ? { hub: { db: join(stateDir, 'hub.db') } }
          : o.hubUrl === undefined
            ? {}
            : { hub: { url: o.hubUrl } }),
        onError: (m) => warn(m),
      });
    // After a first harvest just done, the next one comes after the interval; on a restart, at once.
    bridge.start({ immediately: ready });
    const urls = await readAdvertisedUrls(bridge);
    const resources = await bridge.store.countResources();
    const channels = notifications === undefined ? [] : [notifications.notifier.urls('default').changeChannel];
    const hubUrl = notifications?.hubUrl;
    const identify = bridge.harvester.identify;
    if (o.json)
      print(
        {
          event: 'listening',
          url: address.url,
          baseUrl,
          provider: o.provider,
          stateDir,
          resources,
          ...urls,
          channels,
          ...(hubUrl === undefined ? {} : { hub: hubUrl }),
        },
        '',
      );
    else
      print(
        {},
        [
          `Serving ${identify?.repositoryName || o.provider} (OAI-PMH ${o.provider}) as a ResourceSync Source`,
          `  listening on        ${address.url}`,
          `  base URL            ${baseUrl}`,
          `  resources           ${resources} (${o.metadataPrefixes.join(', ')})`,
          `  state               ${stateDir}`,
          `  Source Description  ${urls.sourceDescription}`,
          ...urls.capabilityLists.map((u) => `  Capability List     ${u}`),
          ...urls.resourceLists.map((u) => `  Resource List       ${u}`),
          ...channels.map((u) => `  Change channel      ${u}`),
          ...(hubUrl === undefined ? [] : [`  WebSub hub          ${hubUrl}`]),
          `  harvesting again every ${Math.round((o.intervalMs ?? 600_000) / 1000)} s; Ctrl-C to stop`,
        ].join('\n'),
      );
    if (!stop.signal.aborted) await new Promise<void>((r) => stop.signal.addEventListener('abort', () => r()));
  } catch (e) {
    rejectSite(e);
    await notifications?.close();
    await server.close();
    await bridge?.close();
    await gzipCache.close();
    await rm(gzipDir, { recursive: true, force: true });
    // A Ctrl-C during the first harvest: stopped cleanly, the harvest goes on next time.
    if (stop.signal.aborted && e instanceof ResourceSyncError && e.code === 'RS_ABORTED') {
      print({ event: 'stopped' }, 'stopped (the first harvest goes on from where it was at the next start)');
      process.exitCode = EXIT.INTERRUPTED;
      return;
    }
    throw e;
  }
  if (!o.json) process.stdout.write('stopping...\n');
  await notifications?.close();
  await server.close();
  await bridge.close();
  await gzipCache.close();
  await rm(gzipDir, { recursive: true, force: true });
  print({ event: 'stopped' }, 'stopped');
  process.exitCode = EXIT.OK;
}
