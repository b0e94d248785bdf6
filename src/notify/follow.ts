/**
 * The loop a follower (`sync --follow`) runs over a notification receiver (WebSocket `ChannelClient` or WebSub
 * `WebSubSubscriber`): catch up from the Change Lists on every (re)connection and after every refused or lost
 * notification, apply each change notification in order, skip duplicates, stop cleanly on abort.
 *
 * Catch-ups and applications never overlap (one at a time, in arrival order), and several catch-up triggers in
 * a row cause one catch-up. Duplicates: a change (uri, change, datetime) seen in the last `dedupeWindow`
 * changes is not applied twice; `apply` should still be idempotent (a change applied by a catch-up may arrive
 * again as a notification), e.g. by comparing the hash with the local state.
 *
 * @module
 */
import { ResourceSyncError } from '../core/errors.js';
import type { Entry, Link } from '../core/model.js';
import type { NotificationEvent } from './events.js';
import type { ChangeNotification, FrameworkChange, FrameworkNotification, ResourceChange } from './payloads.js';

export interface FollowOptions {
  readonly events: AsyncIterable<NotificationEvent>;
  /** Brings the copy up to date from the Change Lists since its watermark. */
  readonly catchUp: (reason: string) => Promise<void>;
  /** Applies the (not yet seen) changes of one change notification, in order. */
  readonly apply: (changes: readonly ResourceChange[], notification: ChangeNotification) => Promise<void>;
  /** A framework notification (a capability document changed); default: nothing. */
  readonly onFramework?: (notification: FrameworkNotification) => Promise<void>;
  /** Stops the loop (after the step in progress). */
  readonly signal?: AbortSignal;
  /** Changes remembered for the duplicate check (default 10,000). */
  readonly dedupeWindow?: number;
  /** Each event as it is handled (logging). */
  readonly onEvent?: (event: NotificationEvent) => void;
  /**
   * When `apply` throws: return true to catch up instead (default), false to stop with the error.
   */
  readonly onApplyError?: (error: unknown) => boolean;
}

export interface FollowStats {
  catchUps: number;
  notifications: number;
  applied: number;
  duplicates: number;
}

/**
 * Runs until the events end or `signal` aborts; resolves with counts. Memory bound: `dedupeWindow` keys.
 *
 * @example
 * ```ts
 * const client = new ChannelClient({ url: channelUrl });
 * const ac = new AbortController();
 * process.once('SIGINT', () => ac.abort());
 * await followNotifications({ events: client.events(), catchUp: () => dest.incremental(), apply, signal: ac.signal });
 * await client.close();
 * ```
 */
export async function followNotifications(options: FollowOptions): Promise<FollowStats> {
  const stats: FollowStats = { catchUps: 0, notifications: 0, applied: 0, duplicates: 0 };
  const window = Math.max(1, options.dedupeWindow ?? 10_000);
  const seen = new Set<string>();
  const remember = (key: string): void => {
    seen.add(key);
    if (seen.size > window) {
      const oldest = seen.values().next().value;
      if (oldest !== undefined) seen.delete(oldest);
    }
  };
  const it = options.events[Symbol.asyncIterator]();
  const aborted = new Promise<IteratorResult<NotificationEvent>>((resolve) => {
    if (options.signal?.aborted === true) resolve({ value: undefined, done: true });
    options.signal?.addEventListener('abort', () => resolve({ value: undefined, done: true }), { once: true });
  });
  let pendingCatchUp: string | undefined;
  for (;;) {
    if (pendingCatchUp !== undefined) {
      const reason = pendingCatchUp;
      pendingCatchUp = undefined;
      stats.catchUps++;
      await options.catchUp(reason);
      seen.clear(); // the copy is now at least as new as anything notified before
    }
    const r = await Promise.race([it.next(), aborted]);
    if (r.done === true || options.signal?.aborted === true) break;
    const e = r.value;
    options.onEvent?.(e);
    switch (e.type) {
      case 'connected':
        pendingCatchUp = e.reconnect ? 'reconnected' : 'connected';
        break;
      case 'refused':
        pendingCatchUp = `notification refused (${e.reason})`;
        break;
      case 'disconnected':
        break;
      case 'notification': {
        stats.notifications++;
        const n = e.notification;
        if (n.kind === 'framework-notification') {
          await options.onFramework?.(n);
          break;
        }
        const fresh: ResourceChange[] = [];
        for (const c of n.changes) {
          const key = `${c.uri}\n${c.change}\n${c.datetime ?? c.lastmod ?? ''}`;
          if (seen.has(key)) stats.duplicates++;
          else {
            remember(key);
            fresh.push(c);
          }
        }
        if (fresh.length === 0) break;
        try {
          await options.apply(fresh, n);
          stats.applied += fresh.length;
        } catch (err) {
          if (options.onApplyError?.(err) === false) throw err;
          for (const c of fresh) seen.delete(`${c.uri}\n${c.change}\n${c.datetime ?? c.lastmod ?? ''}`);
          pendingCatchUp = `apply failed: ${err instanceof Error ? err.message : String(err)}`;
        }
        break;
      }
    }
  }
  if (options.signal?.aborted === true) void it.return?.();
  return stats;
}

/** An error for a follow that cannot start (no channel advertised and no callback given). */
export function noChannelError(url: string): ResourceSyncError {
  return new ResourceSyncError(
    'RS_DISCOVERY',
    'the Source advertises no change-notification channel (WebSocket) and no WebSub hub: use --callback with a hub, or poll',
    { url },
  );
}

/** Where a Capability List says notifications can be had (N-§3, Example 3.1; WebSub topics, see `notifier.ts`). */
export interface NotificationEndpoints {
  /** WebSocket channel URLs (`ws:`/`wss:`). */
  readonly changeChannel?: string;
  readonly frameworkChannel?: string;
  /** The WebSub hub (`rs:ln rel="hub"` at document level, on the channel or Change List entries). */
  readonly hub?: string;
  /** WebSub topics: the Change List (change notifications) and the Capability List itself (framework). */
  readonly changeTopic?: string;
  readonly frameworkTopic?: string;
}

/**
 * Reads the notification endpoints from a Capability List's header and entries. `capabilityListUrl` is the
 * URL the document was fetched from (the framework topic when a hub is named).
 */
export function findNotificationEndpoints(
  doc: { readonly links: readonly Link[]; readonly entries: readonly Entry[] },
  capabilityListUrl: string,
): NotificationEndpoints {
  const out: { -readonly [K in keyof NotificationEndpoints]: NotificationEndpoints[K] } = {};
  let hub = doc.links.find((l) => l.rel === 'hub')?.href;
  for (const e of doc.entries) {
    const cap = e.md?.capability;
    const entryHub = e.links.find((l) => l.rel === 'hub')?.href;
    const ws = /^wss?:/i.test(e.loc);
    if (cap === 'change-notification' && ws) out.changeChannel = e.loc;
    else if (cap === 'framework-notification' && ws) out.frameworkChannel = e.loc;
    if (entryHub !== undefined) hub ??= entryHub;
    if (cap === 'changelist' && (entryHub !== undefined || hub !== undefined)) out.changeTopic = e.loc;
  }
  if (hub !== undefined) {
    out.hub = hub;
    out.frameworkTopic = capabilityListUrl;
    if (out.changeTopic === undefined) {
      const cl = doc.entries.find((e) => e.md?.capability === 'changelist');
      if (cl !== undefined) out.changeTopic = cl.loc;
    }
  }
  return out;
}

/** What a follower of one set does about a framework notification ({@link assessFrameworkNotification}). */
export interface FrameworkAssessment {
  /**
   * `catch-up`: a document the follower reads was created or updated (run an incremental catch-up);
   * `ignore`: nothing of this set (another set's notification or Capability List);
   * `set-deleted`: the Source deleted this set's Capability List (and did not re-create it in the same payload).
   */
  readonly action: 'catch-up' | 'ignore' | 'set-deleted';
  /** One line for logs, naming the first relevant document (`changelist updated <url>`, `another set (<up>)`). */
  readonly reason: string;
  /** The changes that concern this set, in payload order. */
  readonly relevant: readonly FrameworkChange[];
}

function sameUrl(a: string, b: string): boolean {
  try {
    return new URL(a).href === new URL(b).href;
  } catch {
    return a === b;
  }
}

/**
 * Decides what a follower of the set whose Capability List is `capabilityListUrl` does about a framework
 * notification (N-§5, Table 2.1):
 * - a payload whose `rs:ln rel="up"` names another Capability List is another set's: ignored (a payload without
 *   `up` came on this set's channel or topic and is taken as this set's);
 * - a Change List or Change Dump created or updated, a Resource List or Resource Dump created (e.g. after a Source
 *   reset), this set's Capability List created or updated, the Source Description created, updated or deleted:
 *   catch up (the incremental run reads them; a reset shows there as a gap, see `--auto-baseline`);
 * - another set's Capability List (created or deleted: sent on every set's channel): nothing for this set;
 * - this set's Capability List deleted (and not re-created later in the same payload): `set-deleted`.
 *
 * Pure; memory bound: the payload's changes.
 */
export function assessFrameworkNotification(
  notification: FrameworkNotification,
  capabilityListUrl: string,
): FrameworkAssessment {
  const up = notification.capabilityListUrl;
  if (up !== undefined && !sameUrl(up, capabilityListUrl)) {
    return { action: 'ignore', reason: `another set (up ${up})`, relevant: [] };
  }
  const relevant: FrameworkChange[] = [];
  let deleted = false;
  for (const c of notification.changes) {
    if (c.capability === 'capabilitylist') {
      if (!sameUrl(c.uri, capabilityListUrl)) continue; // another set's Capability List
      if (c.change === 'deleted') {
        deleted = true;
        continue;
      }
      deleted = false; // re-created (or updated) after a deletion in the same payload
    }
    relevant.push(c);
  }
  if (deleted) {
    return { action: 'set-deleted', reason: `capabilitylist deleted ${capabilityListUrl}`, relevant };
  }
  const first = relevant[0];
  if (first === undefined) return { action: 'ignore', reason: 'nothing of this set', relevant };
  const more = relevant.length > 1 ? ` (+${relevant.length - 1} more)` : '';
  return { action: 'catch-up', reason: `${first.capability} ${first.change} ${first.uri}${more}`, relevant };
}
