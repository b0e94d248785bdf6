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
import { parseDatetime } from '../core/datetime.js';
import type { DocumentHeader, Entry } from '../core/model.js';
import { isResourceSyncError, ResourceSyncError } from '../core/errors.js';
import { Destination, type DestinationOptions } from '../destination/destination.js';
import { discover, openRemoteDocument } from '../destination/discovery.js';
import type { SyncSummary } from '../destination/events.js';
import { HttpClient } from '../destination/http.js';
import type { NotificationEvent } from '../notify/events.js';
import { findNotificationEndpoints, type NotificationEndpoints, noChannelError } from '../notify/follow.js';
import { findLink } from '../notify/http-util.js';
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

    // One incremental run at a time; triggers arriving meanwhile cause one more run.
    let dirty = false;
    let running: Promise<void> | undefined;
    /** Record times (the changes' `datetime`, epoch ms) of notified changes not yet covered by a finished run. */
    const awaiting: number[] = [];
    const runLoop = async (): Promise<void> => {
      while (dirty && !abort.signal.aborted) {
        dirty = false;
        const covered = awaiting.splice(0);
        try {
          const s = await dest.incremental();
          const now = Date.now();
          if (
            s.counts.created + s.counts.updated + s.counts.deleted + s.counts.deletionsRecorded + s.counts.failed >
            0
          ) {
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
      }
    };
    const catchUpMs = options.catchUpIntervalMs ?? 60_000;
    let safetyNet: NodeJS.Timeout | undefined;
    const trigger = (): void => {
      dirty = true;
      running ??= runLoop().finally(() => {
        running = undefined;
        if (catchUpMs > 0 && !abort.signal.aborted) {
          clearTimeout(safetyNet);
          safetyNet = setTimeout(trigger, catchUpMs);
          safetyNet.unref();
        }
      });
    };
    const it = receiver.events();
    const stopped = new Promise<IteratorResult<NotificationEvent>>((resolve) => {
      abort.signal.addEventListener('abort', () => resolve({ value: undefined, done: true }), { once: true });
    });
    for (;;) {
      const r = await Promise.race([it.next(), stopped]);
      if (r.done === true) break;
      const e = r.value;
      if (e.type === 'notification' && e.notification.kind === 'change-notification') {
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
    await client.close();
  }
}
