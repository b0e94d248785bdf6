/**
 * Following a Source (`Destination.follow()`, `resourcesync sync --follow`): a baseline or incremental run first, then the copy stays in step
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
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseDatetime } from '../core/datetime.js';
import type { DocumentHeader, Entry } from '../core/model.js';
import { isResourceSyncError, ResourceSyncError } from '../core/errors.js';
import type { HttpClient } from '../http/client.js';
import { backoffDelay, sleep } from '../http/backoff.js';
import { findLink } from '../http/link.js';
import { mergeEvents, type NotificationEvent } from '../notify/events.js';
import {
  assessFrameworkNotification,
  findNotificationEndpoints,
  type NotificationEndpoints,
  noChannelError,
} from '../notify/follow.js';
import type { ResourceChange } from '../notify/payloads.js';
import { ChannelClient } from '../notify/websocket-client.js';
import { WebSubSubscriber } from '../notify/websub-subscriber.js';
import type { SyncContext } from './context.js';
import { discover, openRemoteDocument } from './discovery.js';
import type { SyncEvent, SyncSummary } from './events.js';
import { applyChange } from './incremental.js';
import { ChangeCoalescer } from './plan.js';
import { forEachConcurrent } from './concurrent.js';

/** Options of {@link followCopy} (`Destination.follow`). */
export interface FollowOptions {
  /** WebSub callback URL (the follower listens on its port and path); WebSocket when absent. */
  readonly callback?: string;
  /** Address the WebSub callback listener binds (default: 127.0.0.1 for a loopback callback, else 0.0.0.0). */
  readonly listenHost?: string;
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
  /** Each event of the follower (`event` names it; `message`, when present, is a line for people). */
  readonly onEvent?: (event: FollowEvent) => void;
  /** Warnings and channel logs, one line each. */
  readonly onLog?: (line: string) => void;
}

/** An event of the follower: `synced`, `following`, `connected`, `applied`, `caught-up`, `framework`, `stopped`... */
export interface FollowEvent {
  readonly event: string;
  /** The event as a line for people (absent: nothing to print in text mode). */
  readonly message?: string;
  readonly [field: string]: unknown;
}

/** What a follower did, when it stopped. */
export interface FollowStats {
  readonly transports: readonly string[];
  catchUps: number;
  frameworkNotifications: number;
  frameworkCatchUps: number;
  frameworkIgnored: number;
  /** Change List updates whose catch-up was delayed (the change stream was intact). */
  frameworkDeferred: number;
}

/** The Destination operations a follower uses (see `Destination`). */
export interface FollowTarget {
  readonly options: { readonly url: string; readonly set?: string; readonly signal?: AbortSignal };
  sync(): Promise<SyncSummary>;
  incremental(): Promise<SyncSummary>;
  applyNotified(changes: readonly ResourceChange[]): Promise<SyncSummary>;
  on(listener: (e: SyncEvent) => void): () => void;
}

/**
 * Applies notified changes in a run of the Destination (see `Destination.applyNotified`): coalesced per resource
 * (the last change wins), those at or before the watermark dropped, each through `applyChange` (the rules of
 * `applyResource`). Changes without a datetime are left out. Memory: the changes given.
 */
export async function applyNotifiedChanges(
  ctx: SyncContext,
  changes: readonly ResourceChange[],
  watermark: string | undefined,
): Promise<void> {
  const coalescer = new ChangeCoalescer(watermark === undefined ? undefined : parseDatetime(watermark)?.ms);
  for (const c of changes) {
    if (c.datetime === undefined) continue;
    const md: { change: string; datetime: string; hash?: string; length?: number } = {
      change: c.change,
      datetime: c.datetime,
    };
    if (c.hash !== undefined && c.change !== 'deleted') md.hash = c.hash;
    if (c.length !== undefined && c.change !== 'deleted') md.length = c.length;
    const entry: Entry = { element: 'url', loc: c.uri, md, links: [] };
    if (c.lastmod !== undefined) entry.lastmod = c.lastmod;
    coalescer.add(entry);
  }
  const plan = coalescer.finish();
  ctx.total = plan.changes.length;
  ctx.state.journalBegin('notification', { changes: plan.changes.length });
  const records = ctx.state.getMany(plan.changes.map((c) => c.uri));
  await forEachConcurrent(
    plan.changes,
    ctx.options.concurrency,
    (change) => applyChange(ctx, change, undefined, records.get(change.uri)),
    ctx.options.signal,
  );
  await ctx.recorder.flush();
  if (!ctx.options.dryRun) ctx.state.journalEnd();
}

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
 * Follows a Source until `dest.options.signal` aborts (then resolves with what it did, after the run in progress
 * reaches a consistent state). Every run goes through `dest` (its lock, state and writer): the first run,
 * catch-up runs, and notified changes (`applyNotified`). `client` reads the Capability List and the Change
 * List's `Link` header.
 *
 * @throws ResourceSyncError when the Source or its notifications cannot be used at all (no Capability List,
 *   `--callback` without a hub, no channel and polling off), or a first run that fails.
 */
export async function followCopy(dest: FollowTarget, client: HttpClient, options: FollowOptions): Promise<FollowStats> {
  const warn = options.onLog ?? (() => undefined);
  const emit = (obj: Record<string, unknown>, text: string | undefined): void =>
    options.onEvent?.({ ...(obj as { event: string }), ...(text === undefined ? {} : { message: text }) });
  const signal = dest.options.signal ?? new AbortController().signal;
  const url = dest.options.url;
  const receivers: Receiver[] = [];
  let router: CallbackRouter | undefined;
  const stats: FollowStats = {
    get transports() {
      return receivers.map((r) => r.transport);
    },
    catchUps: 0,
    frameworkNotifications: 0,
    frameworkCatchUps: 0,
    frameworkIgnored: 0,
    frameworkDeferred: 0,
  };
  const stoppedEvent = (): Record<string, unknown> => ({
    event: 'stopped',
    transports: receivers.map((r) => r.transport),
    catchUps: stats.catchUps,
    frameworkNotifications: stats.frameworkNotifications,
    frameworkCatchUps: stats.frameworkCatchUps,
    frameworkIgnored: stats.frameworkIgnored,
    frameworkDeferred: stats.frameworkDeferred,
  });
  const stoppedText = (): string =>
    receivers.some((r) => r.transport === 'framework')
      ? `stopped (${stats.frameworkNotifications} framework notifications, ${stats.frameworkCatchUps} catch-ups triggered by them)`
      : 'stopped';
  try {
    const first = await dest.sync();
    emit({ event: 'synced', ...summaryLine(first) }, `${first.operation}: ${JSON.stringify(first.counts)}`);
    const ep = await findEndpoints(url, client, dest.options.set, signal);
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
        void subscribeWithRetry(fw, signal, fwLog);
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
    const directPath = options.direct !== false;
    const runLoop = async (): Promise<void> => {
      while ((dirty || direct.length > 0) && !signal.aborted) {
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
            emit(
              { event: 'caught-up', reasons: why, ...summaryLine(s) },
              byFramework && !news ? 'caught up after a framework notification: nothing new' : undefined,
            );
          } catch (e) {
            if (signal.aborted) break;
            warn(`incremental run (${why.join('; ')}) failed: ${e instanceof Error ? e.message : String(e)}`);
          }
          continue;
        }
        const batch = direct.shift()!;
        try {
          // Applied as a run of the Destination (its lock, state and writer), the watermark left to catch-ups.
          const times = new Map<string, number>();
          for (const c of batch) {
            const ms = c.datetime === undefined ? undefined : parseDatetime(c.datetime)?.ms;
            times.set(c.uri, ms ?? Date.now());
          }
          const latencies: number[] = [];
          const leftOver: number[] = [];
          const off = dest.on((e) => {
            if (e.type !== 'resource') return;
            const t = times.get(e.uri) ?? Date.now();
            if (e.action === 'failed' || e.action === 'refused') leftOver.push(t);
            else if (e.action !== 'skipped' && latencies.length < 1000) latencies.push(Date.now() - t);
          });
          let r: SyncSummary;
          try {
            r = await dest.applyNotified(batch);
          } finally {
            off();
          }
          // Undated changes, and those that failed (gone, changed again, unreachable): a catch-up run knows more.
          for (const c of batch) if (c.datetime === undefined) leftOver.push(Date.now());
          if (leftOver.length > 0) {
            markDirty('changes left over by the direct path');
            awaiting.push(...leftOver.slice(0, 10_000 - awaiting.length));
          }
          const c = r.counts;
          if (c.created + c.updated + c.deleted + c.deletionsRecorded > 0) {
            emit(
              {
                event: 'applied',
                operation: 'notification',
                created: c.created,
                updated: c.updated,
                deleted: c.deleted,
                deletionsRecorded: c.deletionsRecorded,
                skipped: c.skipped,
                recordToAppliedMs: latencies,
              },
              `applied from a notification: ${c.created} created, ${c.updated} updated, ${c.deleted + c.deletionsRecorded} deleted`,
            );
          }
        } catch (e) {
          if (signal.aborted) break;
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
      if (ms <= 0 || signal.aborted) return;
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
      signal.addEventListener('abort', () => resolve({ value: undefined, done: true }), { once: true });
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
        if (directPath) {
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
        // The interval follows the channels now, not at the end of the next run: a short poll armed while a
        // channel was still connecting would otherwise fire once more after every channel is up.
        armSafetyNet();
        trigger(`${e.reconnect ? 'reconnected' : 'connected'}: ${transport}`);
      }
    }
    clearTimeout(safetyNet);
    clearTimeout(verifyTimer);
    await running;
    clearTimeout(safetyNet);
    clearTimeout(verifyTimer);
    emit(stoppedEvent(), stoppedText());
    return stats;
  } catch (e) {
    if (signal.aborted && isResourceSyncError(e, 'RS_ABORTED')) {
      emit(stoppedEvent(), stoppedText());
      return stats;
    }
    throw e;
  } finally {
    await Promise.all(receivers.map((r) => r.close()));
    await router?.close();
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
