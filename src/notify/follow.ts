/**
 * What a follower learns from a Source's Capability List and its framework notifications: where notifications
 * can be had ({@link findNotificationEndpoints}: WebSocket channels, WebSub hub and topics, only as advertised),
 * and what a framework notification means for one set ({@link assessFrameworkNotification}). The follower's loop
 * itself is `Destination.follow()` (src/destination/follow.ts).
 *
 * @module
 */
import { ResourceSyncError } from '../core/errors.js';
import type { Entry, Link } from '../core/model.js';
import type { FrameworkChange, FrameworkNotification } from './payloads.js';

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
