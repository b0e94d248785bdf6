/**
 * `resourcesync sync --follow <url> <dir>`: a baseline or incremental run first, then the copy stays in step
 * through change notifications: the WebSocket channel the Capability List advertises (N-§3), or WebSub with
 * `--callback <url>` (a listener of its own at that URL's port and path; hub and topic from the Capability List or
 * the Change List's `Link` header).
 *
 * Each notification, (re)connection or refused delivery triggers an incremental run from the watermark, so a
 * change is never lost (changes made while the follower was away or disconnected are in the Change Lists),
 * duplicates cost nothing (a change already applied is skipped by the incremental run), and a burst of
 * notifications arriving during a run causes one more run, not one per notification; a run also happens after
 * `catchUpIntervalMs` without any (a safety net for dropped deliveries). Signatures are verified by
 * the WebSub subscriber (a bad one is refused and answered by a catch-up). Ctrl-C (SIGINT/SIGTERM) stops after
 * the run in progress reaches a consistent state.
 *
 * @module
 */
import { rm } from 'node:fs/promises';
import { relative, resolve, sep } from 'node:path';
import { parseDatetime } from '../core/datetime.js';
import { type Hashes, isKnownHashAlgorithm, parseHashes } from '../core/hash.js';
import type { DocumentHeader, Entry } from '../core/model.js';
import { isResourceSyncError, ResourceSyncError } from '../core/errors.js';
import { Destination, type DestinationOptions } from '../destination/destination.js';
import { discover, openRemoteDocument } from '../destination/discovery.js';
import type { SyncSummary } from '../destination/events.js';
import { HttpClient } from '../destination/http.js';
import { downloadAndInstall } from '../destination/install.js';
import { createPathMapper, type PathMapper } from '../destination/paths.js';
import { DestinationState, type ResourceRecord } from '../destination/state.js';
import type { NotificationEvent } from '../notify/events.js';
import { findNotificationEndpoints, type NotificationEndpoints, noChannelError } from '../notify/follow.js';
import { findLink } from '../notify/http-util.js';
import type { ResourceChange } from '../notify/payloads.js';
import { ChannelClient } from '../notify/websocket-client.js';
import { WebSubSubscriber } from '../notify/websub-subscriber.js';
import { EXIT } from './exit.js';

export interface FollowCommandOptions {
  readonly destination: Omit<DestinationOptions, 'url' | 'dir' | 'signal' | 'client'>;
  /** WebSub callback URL (the follower listens on its port and path); WebSocket when absent. */
  readonly callback?: string;
  /** Address the WebSub callback listener binds (default: 127.0.0.1 for a loopback callback, else 0.0.0.0). */
  readonly listenHost?: string;
  readonly json?: boolean;
  /**
   * A catch-up run this long after the last run even without any notification (default 60 s; 0 = never): the
   * safety net for notifications a hub dropped or a Source restart that WebSub subscribers cannot see.
   */
  readonly catchUpIntervalMs?: number;
  /**
   * Apply each notified change directly (download, verify against the notified hash and length, install,
   * record), leaving the watermark to catch-up runs (default true). false: every notification triggers an
   * incremental run instead.
   */
  readonly direct?: boolean;
  /** Stops the follower (default: the first SIGINT or SIGTERM). */
  readonly signal?: AbortSignal;
  /** Where lines go (default stdout / stderr). */
  readonly write?: (line: string) => void;
  readonly warn?: (line: string) => void;
}

interface Receiver {
  readonly channel: string;
  events(): AsyncIterableIterator<NotificationEvent>;
  close(): Promise<void>;
}

function summaryLine(s: SyncSummary): Record<string, unknown> {
  return { operation: s.operation, ...s.counts, watermark: s.watermarkAfter, complete: s.complete, ms: s.elapsedMs };
}

/** The notification endpoints of the Source: from the Capability List, else by the URL conventions of `serve`. */
async function findEndpoints(
  url: string,
  client: HttpClient,
  set: string | undefined,
  signal: AbortSignal,
): Promise<NotificationEndpoints & { capabilityList: string }> {
  const found = await discover(url, client, { ...(set === undefined ? {} : { set }), signal });
  const capabilityList = found.set?.url;
  if (capabilityList === undefined) {
    throw new ResourceSyncError('RS_DISCOVERY', 'no Capability List found: cannot follow notifications', { url });
  }
  const stream = await openRemoteDocument(capabilityList, client, { signal });
  const entries: Entry[] = [];
  for await (const e of stream.entries) if (entries.length < 1000) entries.push(e);
  const header: DocumentHeader = stream.header;
  const endpoints = findNotificationEndpoints({ links: header.links, entries }, capabilityList);
  const result: { -readonly [K in keyof NotificationEndpoints]: NotificationEndpoints[K] } & {
    capabilityList: string;
  } = {
    ...endpoints,
    capabilityList,
  };
  // Conventions of `resourcesync serve` when the Capability List does not advertise the channels.
  if (result.changeChannel === undefined && /\/capabilitylist\.xml$/.test(capabilityList)) {
    result.changeChannel = capabilityList.replace(/^http/, 'ws').replace(/capabilitylist\.xml$/, 'change-notification');
  }
  const changeList = entries.find((e) => e.md?.capability === 'changelist')?.loc;
  if (result.hub === undefined && changeList !== undefined) {
    // WebSub discovery (WebSub §4): the Change List response's Link header.
    const res = await client.get(changeList, { signal });
    await res.discard();
    const hub = findLink(res.headers.link as string | string[] | undefined, 'hub');
    const self = findLink(res.headers.link as string | string[] | undefined, 'self');
    if (hub !== undefined) {
      result.hub = hub;
      result.changeTopic = self ?? changeList;
    }
  }
  return result;
}

/**
 * Follows a Source until stopped. Returns the exit code: 0 when stopped by the signal, 2 when the Source or its
 * notifications cannot be used at all, 1 on an unexpected failure.
 */
export async function runFollow(url: string, dir: string, options: FollowCommandOptions): Promise<number> {
  const write = options.write ?? ((l: string) => process.stdout.write(`${l}\n`));
  const warn = options.warn ?? ((l: string) => process.stderr.write(`resourcesync sync --follow: ${l}\n`));
  const emit = (obj: Record<string, unknown>, text: string): void =>
    write(options.json === true ? JSON.stringify(obj) : text);
  const abort = new AbortController();
  const onSignal = (): void => abort.abort(new ResourceSyncError('RS_ABORTED', 'interrupted'));
  if (options.signal === undefined) {
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
  } else if (options.signal.aborted) abort.abort();
  else options.signal.addEventListener('abort', onSignal, { once: true });
  const client = new HttpClient(options.destination.http ?? {});
  const dest = new Destination({ ...options.destination, url, dir, client, signal: abort.signal });
  let receiver: Receiver | undefined;
  let applierRef: DirectApplier | undefined;
  try {
    const first = await dest.sync();
    emit({ event: 'synced', ...summaryLine(first) }, `${first.operation}: ${JSON.stringify(first.counts)}`);
    const ep = await findEndpoints(url, client, options.destination.set, abort.signal);
    if (options.callback !== undefined) {
      if (ep.hub === undefined || ep.changeTopic === undefined) throw noChannelError(ep.capabilityList);
      const cb = new URL(options.callback);
      const loopback = cb.hostname === 'localhost' || cb.hostname === '127.0.0.1' || cb.hostname === '[::1]';
      const sub = new WebSubSubscriber({
        hubUrl: ep.hub,
        topicUrl: ep.changeTopic,
        callbackUrl: cb.href,
        path: cb.pathname,
        port: Number(cb.port || (cb.protocol === 'https:' ? 443 : 80)),
        host: options.listenHost ?? (loopback ? '127.0.0.1' : '0.0.0.0'),
        onLog: warn,
      });
      receiver = { channel: ep.changeTopic, events: () => sub.events(), close: () => sub.close() };
      await sub.listen();
      await sub.subscribe();
    } else {
      if (ep.changeChannel === undefined) throw noChannelError(ep.capabilityList);
      const ws = new ChannelClient({ url: ep.changeChannel, onLog: warn });
      receiver = { channel: ep.changeChannel, events: () => ws.events(), close: () => ws.close() };
    }
    emit(
      {
        event: 'following',
        channel: receiver.channel,
        transport: options.callback === undefined ? 'websocket' : 'websub',
      },
      `following ${receiver.channel}`,
    );

    // One worker: catch-up runs (incremental from the watermark) and direct applications of notified changes,
    // never at the same time. A catch-up is due after a (re)connection, a refusal, a change the direct path
    // could not apply, and after `catchUpIntervalMs` without a run; triggers arriving during a run cause one more.
    let dirty = false;
    const direct: (readonly ResourceChange[])[] = [];
    let running: Promise<void> | undefined;
    /** Record times (the changes' `datetime`, epoch ms) of notified changes left to the next catch-up. */
    const awaiting: number[] = [];
    const applier = options.direct === false ? undefined : new DirectApplier(dir, url, options.destination, client);
    applierRef = applier;
    const runLoop = async (): Promise<void> => {
      while ((dirty || direct.length > 0) && !abort.signal.aborted) {
        if (dirty) {
          dirty = false;
          const covered = awaiting.splice(0);
          try {
            const s = await dest.incremental();
            const now = Date.now();
            const c = s.counts;
            if (c.created + c.updated + c.deleted + c.deletionsRecorded + c.failed > 0) {
              // From each notified change being recorded at the Source to the end of the run that applied it.
              const recordToAppliedMs = covered.slice(0, 1000).map((t) => now - t);
              emit(
                { event: 'applied', ...summaryLine(s), ...(covered.length > 0 ? { recordToAppliedMs } : {}) },
                `applied: ${JSON.stringify(s.counts)}`,
              );
            }
          } catch (e) {
            if (abort.signal.aborted) break;
            warn(`incremental run failed: ${e instanceof Error ? e.message : String(e)}`);
          }
          continue;
        }
        const batch = direct.shift()!;
        try {
          const r = await applier!.apply(batch, abort.signal);
          if (r.leftOver.length > 0) {
            dirty = true;
            awaiting.push(...r.leftOver.slice(0, 10_000 - awaiting.length));
          }
          if (r.created + r.updated + r.deleted > 0) {
            emit(
              {
                event: 'applied',
                operation: 'notification',
                created: r.created,
                updated: r.updated,
                deleted: options.destination.delete === true ? r.deleted : 0,
                deletionsRecorded: options.destination.delete === true ? 0 : r.deleted,
                skipped: r.skipped,
                recordToAppliedMs: r.latencies,
              },
              `applied from a notification: ${r.created} created, ${r.updated} updated, ${r.deleted} deleted`,
            );
          }
        } catch (e) {
          if (abort.signal.aborted) break;
          warn(`applying a notification failed: ${e instanceof Error ? e.message : String(e)}; catching up`);
          dirty = true;
        }
      }
    };
    const catchUpMs = options.catchUpIntervalMs ?? 60_000;
    let safetyNet: NodeJS.Timeout | undefined;
    const schedule = (): void => {
      running ??= runLoop().finally(() => {
        running = undefined;
        if (catchUpMs > 0 && !abort.signal.aborted) {
          clearTimeout(safetyNet);
          safetyNet = setTimeout(trigger, catchUpMs);
          safetyNet.unref();
        }
      });
    };
    const trigger = (): void => {
      dirty = true;
      schedule();
    };
    const it = receiver.events();
    const stopped = new Promise<IteratorResult<NotificationEvent>>((resolve) => {
      abort.signal.addEventListener('abort', () => resolve({ value: undefined, done: true }), { once: true });
    });
    for (;;) {
      const r = await Promise.race([it.next(), stopped]);
      if (r.done === true) break;
      const e = r.value;
      if (e.type === 'notification') {
        if (e.notification.kind !== 'change-notification') continue; // capability documents: nothing to poll
        if (applier !== undefined) {
          if (direct.length >= 1000) {
            // Too far behind to apply one by one (memory bound): one catch-up run covers them all.
            direct.length = 0;
            trigger();
            continue;
          }
          direct.push(e.notification.changes);
          schedule();
          continue;
        }
        for (const c of e.notification.changes) {
          const t = c.datetime === undefined ? undefined : parseDatetime(c.datetime)?.ms;
          if (t !== undefined && awaiting.length < 10_000) awaiting.push(t);
        }
      }
      if (e.type === 'disconnected') emit({ event: 'disconnected', reason: e.reason }, `disconnected: ${e.reason}`);
      else if (e.type === 'refused')
        emit({ event: 'refused', reason: e.reason }, `notification refused (${e.reason}): catching up`);
      else if (e.type === 'connected') {
        if (e.reconnect) emit({ event: 'reconnected' }, 'reconnected: catching up');
        else emit({ event: 'connected' }, 'connected');
      }
      if (e.type !== 'disconnected') trigger();
    }
    clearTimeout(safetyNet);
    await running;
    clearTimeout(safetyNet);
    emit({ event: 'stopped' }, 'stopped');
    return EXIT.OK;
  } catch (e) {
    if (abort.signal.aborted && isResourceSyncError(e, 'RS_ABORTED')) {
      emit({ event: 'stopped' }, 'stopped');
      return EXIT.OK;
    }
    if (isResourceSyncError(e)) {
      warn(`${e.message} [${e.code}]`);
      return EXIT.USAGE;
    }
    throw e;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await receiver?.close();
    applierRef?.close();
    await client.close();
  }
}

/** What one direct application did. */
interface DirectResult {
  created: number;
  updated: number;
  deleted: number;
  skipped: number;
  /** Changes whose content had changed again by the time it was fetched (a newer notification follows). */
  superseded: number;
  /** Record times (epoch ms) of the changes it left to a catch-up run. */
  readonly leftOver: number[];
  /** From each applied change being recorded at the Source to its application here, ms. */
  readonly latencies: number[];
}

/**
 * Applies notified changes straight to the copy, the way an incremental run applies Change List entries (same
 * path mapping, same verified install, same state records), so that a later run sees them as applied and skips
 * them. The watermark is not moved: only a complete incremental run moves it. A change it cannot apply (no
 * datetime, outside the Source's authority, a failed or mismatched download) is left to a catch-up run.
 */
class DirectApplier {
  readonly #root: string;
  readonly #state: DestinationState;
  readonly #mapper: PathMapper;
  readonly #options: FollowCommandOptions['destination'];
  readonly #client: HttpClient;

  constructor(dir: string, url: string, options: FollowCommandOptions['destination'], client: HttpClient) {
    this.#root = resolve(dir);
    this.#state = DestinationState.open(this.#root);
    this.#mapper = createPathMapper({
      root: this.#root,
      sourceUrl: url,
      ...(options.layout === undefined ? {} : { layout: options.layout }),
      ...(options.allowHosts === undefined ? {} : { allowHosts: options.allowHosts }),
      ...(options.authorityCheck === undefined ? {} : { authorityCheck: options.authorityCheck }),
    });
    this.#options = options;
    this.#client = client;
  }

  async apply(changes: readonly ResourceChange[], signal: AbortSignal): Promise<DirectResult> {
    const r: DirectResult = {
      created: 0,
      updated: 0,
      deleted: 0,
      skipped: 0,
      superseded: 0,
      leftOver: [],
      latencies: [],
    };
    // The last change of a resource in the notification wins.
    const byUri = new Map<string, ResourceChange>();
    for (const c of changes) {
      byUri.delete(c.uri);
      byUri.set(c.uri, c);
    }
    const one = async (c: ResourceChange): Promise<void> => {
      const ms = c.datetime === undefined ? undefined : parseDatetime(c.datetime)?.ms;
      if (ms === undefined || c.datetime === undefined) {
        r.leftOver.push(Date.now());
        return;
      }
      let target: string;
      try {
        if (!this.#mapper.isAllowed(c.uri)) throw new ResourceSyncError('RS_AUTHORITY', 'outside the Source');
        target = this.#mapper.toLocalPath(c.uri);
      } catch {
        r.leftOver.push(ms); // the catch-up run reports it
        return;
      }
      const rec = this.#state.get(c.uri);
      const recMs = rec?.sourceDatetime === undefined ? undefined : parseDatetime(rec.sourceDatetime)?.ms;
      if (recMs !== undefined && recMs > ms) {
        r.skipped++;
        return;
      }
      if (c.change === 'deleted') {
        if (recMs === ms && rec?.deleted === true) {
          r.skipped++;
          return;
        }
        if (this.#options.delete === true) await rm(target, { force: true });
        this.#state.markDeleted(c.uri, c.datetime);
        r.deleted++;
        r.latencies.push(Date.now() - ms);
        return;
      }
      const hashes: { -readonly [K in keyof Hashes]: Hashes[K] } = {};
      if (c.hash !== undefined) {
        for (const [alg, hex] of parseHashes(c.hash)) if (isKnownHashAlgorithm(alg)) hashes[alg] = hex;
      }
      if (recMs === ms && rec?.deleted !== true && sameHashes(hashes, rec)) {
        r.skipped++;
        return;
      }
      try {
        const result = await downloadAndInstall(
          this.#client,
          c.uri,
          target,
          {
            ...(c.length === undefined ? {} : { length: c.length }),
            ...(Object.keys(hashes).length === 0 ? {} : { hashes }),
          },
          // No retries here: a failure is left to a catch-up run, which has its own.
          { signal, root: this.#root, fsync: this.#options.durability !== 'none', retries: 0 },
        );
        const next: { -readonly [K in keyof ResourceRecord]: ResourceRecord[K] } = {
          uri: c.uri,
          path: relative(this.#root, target).split(sep).join('/'),
          length: result.length,
          sourceDatetime: c.datetime,
        };
        if (result.hashes.md5 !== undefined) next.md5 = result.hashes.md5;
        if (result.hashes['sha-256'] !== undefined) next.sha256 = result.hashes['sha-256'];
        if (c.lastmod !== undefined) next.lastmod = c.lastmod;
        records.push(next);
        if (rec === undefined || rec.deleted === true) r.created++;
        else r.updated++;
        r.latencies.push(Date.now() - ms);
      } catch (e) {
        if (isResourceSyncError(e, 'RS_ABORTED')) throw e;
        if (isResourceSyncError(e, 'RS_HASH_MISMATCH') || isResourceSyncError(e, 'RS_LENGTH_MISMATCH')) {
          // Changed again since: that newer change is recorded too and its notification follows (a lost one is
          // repaired by the periodic catch-up). The old file is untouched.
          r.superseded++;
          return;
        }
        // Gone or unreachable: the Change List knows the outcome.
        r.leftOver.push(ms);
      }
    };
    // Resources of one notification are fetched at once, up to the copy's concurrency (distinct URIs: no races),
    // and recorded together in one state transaction (a record missing after a crash only costs a re-download
    // by the next catch-up run).
    const records: ResourceRecord[] = [];
    const queue = [...byUri.values()];
    const workers = Array.from({ length: Math.min(queue.length, this.#options.concurrency ?? 8) }, async () => {
      for (let c = queue.shift(); c !== undefined; c = queue.shift()) await one(c);
    });
    try {
      await Promise.all(workers);
    } finally {
      if (records.length > 0) this.#state.putMany(records);
    }
    return r;
  }

  close(): void {
    this.#state.close();
  }
}

function sameHashes(expected: Hashes, rec: ResourceRecord | undefined): boolean {
  if (rec === undefined) return false;
  let compared = 0;
  if (expected.md5 !== undefined) {
    if (rec.md5 !== undefined && rec.md5 !== expected.md5.toLowerCase()) return false;
    if (rec.md5 !== undefined) compared++;
  }
  if (expected['sha-256'] !== undefined) {
    if (rec.sha256 !== undefined && rec.sha256 !== expected['sha-256'].toLowerCase()) return false;
    if (rec.sha256 !== undefined) compared++;
  }
  return compared > 0;
}
