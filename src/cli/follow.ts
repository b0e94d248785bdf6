/**
 * `resourcesync sync --follow <url> <dir>`: a baseline or incremental run first, then the copy stays in step
 * through change notifications: the WebSocket channel the Capability List advertises (N-§3), or WebSub with
 * `--callback <url>` (a listener of its own at that URL's port and path; hub and topic from the Capability List or
 * the Change List's `Link` header). Only advertised channels are used, never one guessed from a URL: with none
 * advertised, and while any channel is down (not yet connected, or reconnecting), the follower polls (a catch-up
 * run every `catchUpIntervalMs`, `--poll`).
 *
 * Framework notifications (N-§5) are followed too, when the Capability List advertises them: the
 * `framework-notification` WebSocket channel, or with `--callback` the framework topic (the Capability List) at the
 * same hub, both subscribers behind the one callback URL (the framework one at `<path>/framework`). The two event
 * streams are merged; a framework notification about a document of this set (a Change List or Change Dump created
 * or updated, a Resource List or Dump created, the Capability List or Source Description) triggers a catch-up run,
 * one of another set is ignored, and this set's Capability List deleted is reported (`set-deleted`; the copy is
 * kept, the follower keeps listening). While the framework connection is up, the periodic catch-up is only a long
 * safety net (`frameworkCatchUpIntervalMs`, default 15 min); without it, every `catchUpIntervalMs` (60 s).
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
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { relative, resolve, sep } from 'node:path';
import { parseDatetime } from '../core/datetime.js';
import { type Hashes, isKnownHashAlgorithm, parseHashes } from '../core/hash.js';
import type { DocumentHeader, Entry } from '../core/model.js';
import { isResourceSyncError, ResourceSyncError } from '../core/errors.js';
import { Destination, type DestinationOptions, sourceHttpOptions } from '../destination/destination.js';
import { type UriFilter, createUriFilter } from '../destination/filter.js';
import { discover, openRemoteDocument } from '../destination/discovery.js';
import type { SyncSummary } from '../destination/events.js';
import { HttpClient } from '../http/client.js';
import { downloadAndInstall } from '../destination/install.js';
import { createPathMapper, type PathMapper, resourceFile } from '../destination/paths.js';
import { DestinationState, type ResourceRecord } from '../destination/state.js';
import { mergeEvents, type NotificationEvent } from '../notify/events.js';
import {
  assessFrameworkNotification,
  findNotificationEndpoints,
  type NotificationEndpoints,
  noChannelError,
} from '../notify/follow.js';
import { backoffDelay, sleep } from '../http/backoff.js';
import { findLink } from '../http/link.js';
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
   * A catch-up run this long after the last run even without any notification, while no framework notification
   * connection is up (default 60 s; 0 = never): the poll that tells a follower of new Change Lists when nothing
   * else does, and the safety net for notifications a hub dropped or a Source restart that WebSub subscribers
   * cannot see.
   */
  readonly catchUpIntervalMs?: number;
  /**
   * The same while the framework channel (or topic) is connected: framework notifications announce new and
   * updated Change Lists, so the poll is only a long safety net (default: `catchUpIntervalMs` when that is given,
   * else 15 min; 0 = never).
   */
  readonly frameworkCatchUpIntervalMs?: number;
  /**
   * A framework notification that only says a Change List or Change Dump was created or updated, while every change
   * notification since the last catch-up was received and applied (the change connection stayed up, nothing
   * was left over), delays its catch-up by about this much (default 60,000 ms, drawn between half and one and a half times it so
   * that followers of one Source do not all catch up at once; one pending at a time): the changes it
   * announces have normally been applied already, and a catch-up per Change List update would make every
   * follower read the Change List again after each change. Anything else triggers a catch-up at once.
   */
  readonly frameworkVerifyDelayMs?: number;
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

/** What a receiver carries: change notifications (N-§4) or framework notifications (N-§5). */
type Transport = 'change' | 'framework';

interface Receiver {
  readonly transport: Transport;
  /** The channel URL (WebSocket) or topic URL (WebSub): the `channel` of its events. */
  readonly channel: string;
  events(): AsyncIterableIterator<NotificationEvent>;
  close(): Promise<void>;
}

/** A {@link Receiver} over a channel client or a WebSub subscriber. */
function receiverOf(transport: Transport, channel: string, source: Pick<Receiver, 'events' | 'close'>): Receiver {
  return { transport, channel, events: () => source.events(), close: () => source.close() };
}

/** How long a due catch-up may wait behind queued notifications that are being applied straight (ms). */
const CATCH_UP_MAX_DEFER_MS = 1000;

/** Default delay of the catch-up a Change List update triggers while the change stream is intact (ms). */
const FRAMEWORK_VERIFY_DELAY_MS = 60_000;

/** Default safety-net poll while framework notifications are connected (ms). */
const FRAMEWORK_SAFETY_NET_MS = 15 * 60_000;
/** Catch-up reasons kept for the next run's report (memory bound). */
const MAX_REASONS = 20;

function summaryLine(s: SyncSummary): Record<string, unknown> {
  return { operation: s.operation, ...s.counts, watermark: s.watermarkAfter, complete: s.complete, ms: s.elapsedMs };
}

/**
 * The notification endpoints the Source advertises: WebSocket channels in its Capability List (no channel is ever
 * guessed from a URL), the WebSub hub there or in the Change List response's `Link` header.
 */
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
  const client = new HttpClient(sourceHttpOptions(url, options.destination.http));
  const dest = new Destination({ ...options.destination, url, dir, client, signal: abort.signal });
  const receivers: Receiver[] = [];
  let router: CallbackRouter | undefined;
  let applierRef: DirectApplier | undefined;
  const stats = {
    catchUps: 0,
    frameworkNotifications: 0,
    frameworkCatchUps: 0,
    frameworkIgnored: 0,
    /** Change List updates whose catch-up was delayed (the change stream was intact). */
    frameworkDeferred: 0,
  };
  const stoppedEvent = (): Record<string, unknown> => ({
    event: 'stopped',
    transports: receivers.map((r) => r.transport),
    ...stats,
  });
  const stoppedText = (): string =>
    receivers.some((r) => r.transport === 'framework')
      ? `stopped (${stats.frameworkNotifications} framework notifications, ${stats.frameworkCatchUps} catch-ups triggered by them)`
      : 'stopped';
  try {
    const first = await dest.sync();
    emit({ event: 'synced', ...summaryLine(first) }, `${first.operation}: ${JSON.stringify(first.counts)}`);
    const ep = await findEndpoints(url, client, options.destination.set, abort.signal);
    const fwLog = (m: string): void => warn(`framework notifications: ${m}`);
    if (options.callback !== undefined) {
      if (ep.hub === undefined || ep.changeTopic === undefined) throw noChannelError(ep.capabilityList);
      const cb = new URL(options.callback);
      const loopback = cb.hostname === 'localhost' || cb.hostname === '127.0.0.1' || cb.hostname === '[::1]';
      const host = options.listenHost ?? (loopback ? '127.0.0.1' : '0.0.0.0');
      const port = Number(cb.port || (cb.protocol === 'https:' ? 443 : 80));
      const subscriber = (topicUrl: string, path: string, internal: number | undefined, log: (m: string) => void) =>
        new WebSubSubscriber({
          hubUrl: ep.hub!,
          topicUrl,
          callbackUrl: withPath(cb, path),
          path,
          // Behind the callback router: a loopback listener of its own; else the callback's port itself.
          port: internal ?? port,
          host: internal === undefined ? host : '127.0.0.1',
          onLog: log,
        });
      if (ep.frameworkTopic === undefined) {
        const sub = subscriber(ep.changeTopic, cb.pathname, undefined, warn);
        receivers.push(receiverOf('change', ep.changeTopic, sub));
        await sub.listen();
        await sub.subscribe();
      } else {
        // Two topics, one callback URL: the router listens there and hands each path to its subscriber.
        const fwPath = `${cb.pathname.replace(/\/$/, '')}/framework`;
        const [changePort, fwPort] = (await freeLoopbackPorts(2)) as [number, number];
        const sub = subscriber(ep.changeTopic, cb.pathname, changePort, warn);
        const fw = subscriber(ep.frameworkTopic, fwPath, fwPort, fwLog);
        receivers.push(receiverOf('change', ep.changeTopic, sub));
        receivers.push(receiverOf('framework', ep.frameworkTopic, fw));
        await sub.listen();
        await fw.listen();
        router = await startCallbackRouter(
          host,
          port,
          new Map([
            [cb.pathname, changePort],
            [fwPath, fwPort],
          ]),
        );
        await sub.subscribe();
        // A framework subscription the hub refuses is not fatal: the follower polls instead, and retries.
        void subscribeWithRetry(fw, abort.signal, fwLog);
      }
    } else if (ep.changeChannel !== undefined) {
      const ws = new ChannelClient({ url: ep.changeChannel, onLog: warn });
      receivers.push(receiverOf('change', ep.changeChannel, ws));
      if (ep.frameworkChannel !== undefined) {
        // Same reconnection backoff as the change channel (ChannelClient defaults).
        const fw = new ChannelClient({ url: ep.frameworkChannel, onLog: fwLog });
        receivers.push(receiverOf('framework', ep.frameworkChannel, fw));
      }
    }
    const framework = receivers.find((r) => r.transport === 'framework');
    const pollMs = options.catchUpIntervalMs ?? 60_000;
    const frameworkPollMs = options.frameworkCatchUpIntervalMs ?? options.catchUpIntervalMs ?? FRAMEWORK_SAFETY_NET_MS;
    const channels: Record<string, string> = {};
    for (const r of receivers) channels[r.transport] = r.channel;
    if (receivers.length === 0 && pollMs <= 0) {
      throw new ResourceSyncError(
        'RS_CONFIG',
        'the Source advertises no change-notification channel, and --poll 0 turns polling off: nothing to follow',
        { url: ep.capabilityList },
      );
    }
    emit(
      {
        event: 'following',
        ...(receivers[0] === undefined ? {} : { channel: receivers[0].channel }),
        transport: receivers.length === 0 ? 'poll' : options.callback === undefined ? 'websocket' : 'websub',
        transports: receivers.map((r) => r.transport),
        channels,
        capabilityList: ep.capabilityList,
        catchUpIntervalMs: pollMs,
        ...(framework === undefined ? {} : { frameworkCatchUpIntervalMs: frameworkPollMs }),
      },
      receivers[0] === undefined
        ? `the Source advertises no notification channel: catching up from the Change Lists every ${pollMs / 1000} s`
        : framework === undefined
          ? `following ${receivers[0]!.channel} (change notifications); no framework notifications advertised: ` +
            `catching up from the Change Lists every ${pollMs / 1000} s`
          : `following ${receivers[0]!.channel} (change notifications) and ${framework.channel} (framework ` +
            `notifications: catch-ups on new or updated Change Lists, a safety-net catch-up every ${frameworkPollMs / 1000} s)`,
    );

    // One worker: catch-up runs (incremental from the watermark) and direct applications of notified changes,
    // never at the same time. A catch-up is due after a (re)connection, a refusal, a change the direct path
    // could not apply, a framework notification about a document of this set, and after the safety-net interval
    // without a run; triggers arriving during a run cause one more.
    let changeConnected = false;
    /**
     * Possible gaps in the change stream so far (a disconnection, or any catch-up trigger but a framework
     * notification), and how many of them the last catch-up run covered. The stream is intact (every change
     * since the last catch-up was notified and applied) when the change connection is up and the run covered
     * them all.
     */
    let gaps = 0;
    let gapsCovered = -1;
    const changeStreamIntact = (): boolean => changeConnected && gapsCovered === gaps;
    let verifyTimer: NodeJS.Timeout | undefined;
    const verifyDelayMs = options.frameworkVerifyDelayMs ?? FRAMEWORK_VERIFY_DELAY_MS;
    let dirty = false;
    /** When `dirty` was last set (a catch-up has been due since). */
    let dirtySince = 0;
    const reasons = new Set<string>();
    const direct: (readonly ResourceChange[])[] = [];
    let running: Promise<void> | undefined;
    /** Record times (the changes' `datetime`, epoch ms) of notified changes left to the next catch-up. */
    const awaiting: number[] = [];
    const applier = options.direct === false ? undefined : new DirectApplier(dir, url, options.destination, client);
    applierRef = applier;
    const runLoop = async (): Promise<void> => {
      while ((dirty || direct.length > 0) && !abort.signal.aborted) {
        // Notified changes already queued go first: applied straight, they reach the copy sooner, and the
        // catch-up that follows finds them done instead of fetching them itself. A catch-up waits at most
        // CATCH_UP_MAX_DEFER_MS behind a steady stream of notifications.
        if (dirty && (direct.length === 0 || Date.now() - dirtySince >= CATCH_UP_MAX_DEFER_MS)) {
          dirty = false;
          const covered = awaiting.splice(0);
          const why = [...reasons];
          reasons.clear();
          const byFramework = why.some((r) => r.startsWith('framework:'));
          stats.catchUps++;
          if (byFramework) stats.frameworkCatchUps++;
          try {
            const wasConnected = changeConnected;
            const gapsAtStart = gaps;
            const s = await dest.incremental();
            // The copy now holds everything the Change Lists had; if the change connection was up all along
            // (and nothing since signalled a gap), the notifications that follow carry every later change.
            if (wasConnected && gaps === gapsAtStart) gapsCovered = gaps;
            const now = Date.now();
            const c = s.counts;
            const news = c.created + c.updated + c.deleted + c.deletionsRecorded + c.failed > 0;
            if (news) {
              // From each notified change being recorded at the Source to the end of the run that applied it.
              const recordToAppliedMs = covered.slice(0, 1000).map((t) => now - t);
              emit(
                {
                  event: 'applied',
                  ...summaryLine(s),
                  reasons: why,
                  ...(covered.length > 0 ? { recordToAppliedMs } : {}),
                },
                `applied${byFramework ? ' (after a framework notification)' : ''}: ${JSON.stringify(s.counts)}`,
              );
            }
            // Every catch-up and what triggered it (JSON); in text, the framework-triggered ones that found nothing.
            if (options.json === true) write(JSON.stringify({ event: 'caught-up', reasons: why, ...summaryLine(s) }));
            else if (byFramework && !news) write('caught up after a framework notification: nothing new');
          } catch (e) {
            if (abort.signal.aborted) break;
            warn(`incremental run (${why.join('; ')}) failed: ${e instanceof Error ? e.message : String(e)}`);
          }
          continue;
        }
        const batch = direct.shift()!;
        try {
          const r = await applier!.apply(batch, abort.signal);
          if (r.leftOver.length > 0) {
            markDirty('changes left over by the direct path');
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
          markDirty('a notification could not be applied');
        }
      }
    };
    // The safety net: a catch-up after the current interval without a run. Long while the framework connection is
    // up (framework notifications announce new Change Lists), short otherwise.
    let frameworkUp = false;
    let safetyNet: NodeJS.Timeout | undefined;
    const armSafetyNet = (): void => {
      clearTimeout(safetyNet);
      safetyNet = undefined;
      // The long interval only while every channel is up: a channel down (or none advertised) may miss changes.
      const ms = frameworkUp && changeConnected ? frameworkPollMs : pollMs;
      if (ms <= 0 || abort.signal.aborted) return;
      safetyNet = setTimeout(() => trigger('safety net'), ms);
      safetyNet.unref();
    };
    const schedule = (): void => {
      running ??= runLoop().finally(() => {
        running = undefined;
        armSafetyNet();
      });
    };
    const markDirty = (reason: string): void => {
      // Anything but a framework notification means the change stream may have a gap.
      if (!reason.startsWith('framework:')) gaps++;
      if (!dirty) dirtySince = Date.now();
      dirty = true;
      if (reasons.size < MAX_REASONS) reasons.add(reason);
    };
    const trigger = (reason: string): void => {
      markDirty(reason);
      schedule();
    };
    const transportOf = (e: NotificationEvent): Transport =>
      framework !== undefined && e.channel === framework.channel ? 'framework' : 'change';
    // Until a channel connects (or with none advertised), the safety net is the poll at --poll.
    armSafetyNet();
    const it: AsyncIterator<NotificationEvent> =
      receivers.length === 0
        ? { next: () => new Promise<IteratorResult<NotificationEvent>>(() => undefined) }
        : mergeEvents(receivers.map((r) => r.events()));
    const stopped = new Promise<IteratorResult<NotificationEvent>>((resolve) => {
      abort.signal.addEventListener('abort', () => resolve({ value: undefined, done: true }), { once: true });
    });
    for (;;) {
      const r = await Promise.race([it.next(), stopped]);
      if (r.done === true) break;
      const e = r.value;
      const transport = transportOf(e);
      if (e.type === 'notification') {
        const n = e.notification;
        if (n.kind === 'framework-notification') {
          stats.frameworkNotifications++;
          const verdict = assessFrameworkNotification(n, ep.capabilityList);
          const documents = n.changes
            .slice(0, 100)
            .map((c) => ({ capability: c.capability, change: c.change, uri: c.uri }));
          if (verdict.action === 'ignore') stats.frameworkIgnored++;
          emit(
            { event: 'framework', action: verdict.action, reason: verdict.reason, documents },
            `framework notification: ${verdict.reason}: ${verdict.action === 'catch-up' ? 'catching up' : verdict.action === 'ignore' ? 'ignored' : 'set deleted'}`,
          );
          const onlyChangeLists =
            verdict.relevant.length > 0 &&
            verdict.relevant.every(
              (c) =>
                (c.capability === 'changelist' || c.capability === 'changedump') &&
                (c.change === 'created' || c.change === 'updated'),
            );
          if (verdict.action === 'catch-up' && onlyChangeLists && changeStreamIntact() && verifyDelayMs > 0) {
            stats.frameworkDeferred++;
            const delay = Math.round(verifyDelayMs * (0.5 + Math.random()));
            verifyTimer ??= setTimeout(() => {
              verifyTimer = undefined;
              trigger(`framework: ${verdict.reason} (checked ${delay} ms later)`);
            }, delay);
            verifyTimer.unref();
          } else if (verdict.action === 'catch-up') trigger(`framework: ${verdict.reason}`);
          else if (verdict.action === 'set-deleted') {
            // The copy is kept as it is and the follower stays connected: a Source that re-creates the set
            // announces its Capability List `created`, which resumes catch-ups; meanwhile runs (safety net,
            // reconnections) fail with a warning each.
            emit(
              { event: 'set-deleted', capabilityList: ep.capabilityList },
              `the Source deleted the Capability List ${ep.capabilityList}`,
            );
            warn(
              `the Source deleted the Capability List ${ep.capabilityList}: the local copy is kept as it is; still ` +
                'following (a re-created Capability List resumes catch-ups); stop with Ctrl-C',
            );
          }
          continue;
        }
        if (applier !== undefined) {
          if (direct.length >= 1000) {
            // Too far behind to apply one by one (memory bound): one catch-up run covers them all.
            direct.length = 0;
            trigger('too many notifications queued');
            continue;
          }
          direct.push(n.changes);
          schedule();
          continue;
        }
        for (const c of n.changes) {
          const t = c.datetime === undefined ? undefined : parseDatetime(c.datetime)?.ms;
          if (t !== undefined && awaiting.length < 10_000) awaiting.push(t);
        }
        trigger('change notification');
      } else if (e.type === 'disconnected') {
        if (transport === 'change') {
          changeConnected = false;
          gaps++;
        }
        emit(
          { event: 'disconnected', transport, reason: e.reason },
          `disconnected (${transport} notifications): ${e.reason}`,
        );
        // Notifications may be missed meanwhile: back to the short poll until reconnected.
        if (transport === 'framework') frameworkUp = false;
        if (running === undefined) armSafetyNet();
      } else if (e.type === 'refused') {
        emit(
          { event: 'refused', transport, reason: e.reason },
          `notification refused (${transport}, ${e.reason}): catching up`,
        );
        trigger(`refused (${transport}, ${e.reason})`);
      } else {
        if (e.reconnect)
          emit({ event: 'reconnected', transport }, `reconnected (${transport} notifications): catching up`);
        else emit({ event: 'connected', transport, channel: e.channel }, `connected (${transport} notifications)`);
        if (transport === 'framework') frameworkUp = true;
        else changeConnected = true;
        trigger(`${e.reconnect ? 'reconnected' : 'connected'}: ${transport}`);
      }
    }
    clearTimeout(safetyNet);
    clearTimeout(verifyTimer);
    await running;
    clearTimeout(safetyNet);
    clearTimeout(verifyTimer);
    emit(stoppedEvent(), stoppedText());
    return EXIT.OK;
  } catch (e) {
    if (abort.signal.aborted && isResourceSyncError(e, 'RS_ABORTED')) {
      emit(stoppedEvent(), stoppedText());
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
    await Promise.all(receivers.map((r) => r.close()));
    await router?.close();
    applierRef?.close();
    await client.close();
  }
}

/** `url` with another path (query kept). */
function withPath(url: URL, path: string): string {
  const u = new URL(url.href);
  u.pathname = path;
  return u.href;
}

/** `n` distinct free TCP ports on the loopback interface (for the listeners behind {@link startCallbackRouter}). */
async function freeLoopbackPorts(n: number): Promise<number[]> {
  const servers = Array.from({ length: n }, () => createServer());
  try {
    for (const s of servers) {
      await new Promise<void>((resolve, reject) => {
        s.once('error', reject);
        s.listen(0, '127.0.0.1', () => resolve());
      });
    }
    return servers.map((s) => (s.address() as AddressInfo).port);
  } finally {
    await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  }
}

interface CallbackRouter {
  close(): Promise<void>;
}

/**
 * One public WebSub callback listener for several subscribers (the change and framework topics share the
 * `--callback` URL's port): a request whose path is a key of `routes` is passed, streamed both ways, to the
 * subscriber's own listener on that loopback port; anything else is 404. Memory bound: streamed (socket buffers).
 */
async function startCallbackRouter(
  host: string,
  port: number,
  routes: ReadonlyMap<string, number>,
): Promise<CallbackRouter> {
  const server: Server = createServer((req, res) => {
    let path: string;
    try {
      path = new URL(req.url ?? '/', 'http://callback.invalid').pathname;
    } catch {
      path = '';
    }
    const target = routes.get(path);
    if (target === undefined) {
      res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('not found');
      return;
    }
    const up = httpRequest(
      { host: '127.0.0.1', port: target, method: req.method, path: req.url, headers: req.headers, timeout: 30_000 },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    up.on('timeout', () => up.destroy(new Error('timeout')));
    up.on('error', () => {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
    req.pipe(up);
  });
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', (e) =>
      reject(
        new ResourceSyncError('RS_CONFIG', `cannot listen for WebSub callbacks on ${host}:${port}: ${e.message}`, {
          cause: e,
        }),
      ),
    );
    server.listen(port, host, () => resolve());
  });
  return {
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * Subscribes until the hub verifies (backoff 1 s → 60 s, as lease renewals), or until `signal` aborts or the
 * subscriber is closed. Failures are logged; the follower meanwhile polls at the short interval.
 */
async function subscribeWithRetry(
  sub: WebSubSubscriber,
  signal: AbortSignal,
  log: (message: string) => void,
): Promise<void> {
  for (let attempt = 0; !signal.aborted; attempt++) {
    try {
      await sub.subscribe();
      return;
    } catch (e) {
      if (signal.aborted || isResourceSyncError(e, 'RS_ABORTED')) return;
      const retryInMs = backoffDelay(attempt, 1000, 60_000);
      log(
        `subscription to ${sub.topicUrl} failed: ${e instanceof Error ? e.message : String(e)}; retrying in ${retryInMs} ms`,
      );
      try {
        await sleep(retryInMs, signal, true);
      } catch {
        return;
      }
    }
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
  readonly #filter: UriFilter;

  constructor(dir: string, url: string, options: FollowCommandOptions['destination'], client: HttpClient) {
    this.#root = resolve(dir);
    this.#filter = createUriFilter(options);
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
      // Left out by --include / --exclude: not this copy's (a catch-up run leaves it out too).
      if (!this.#filter.accepts(c.uri)) {
        r.skipped++;
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
        if (this.#options.delete === true) await rm(await resourceFile(target), { force: true });
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
