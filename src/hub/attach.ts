/**
 * Everything `serve` needs for notifications in one call: WebSocket channels on the server's upgrades, a WebSub
 * hub mounted under a path of the same server (or an external hub to publish to), WebSub discovery `Link`
 * headers on the Capability List and Change List responses, and the Source's recorded changes published as
 * change notifications on both.
 *
 * @module
 */
import type { Server } from 'node:http';
import type { ChangeType } from '../core/constants.js';
import type { FrameworkCapability, FrameworkChange } from '../notify/payloads.js';
import { fileSource, openDocument } from '../xml/index.js';
import { mountRequestHandler, type SetChange, SourceNotifier } from '../notify/notifier.js';
import type { ChannelServerOptions } from '../notify/websocket.js';
import { createHub, type Hub, type HubOptions } from './hub.js';

export interface SourceNotificationsOptions {
  /** The Source's HTTP server (e.g. `SourceServer.httpServer`). */
  readonly server: Server;
  /** The Source's base URL (what its documents use). */
  readonly baseUrl: string;
  /** Anything with the `SourceSite.onChange` shape. */
  readonly site: {
    onChange(listener: (changes: readonly SetChange[]) => void): () => void;
    /** When given, framework notifications tell which Change List was updated (see `framework`). */
    document?(pathname: string): Promise<{ readonly path: string } | undefined>;
    /**
     * Documents the Source published (`Source.onDocuments`). When given (with `document`), every framework
     * document is announced: Resource Lists and Dumps, Change Lists and Dumps, Capability Lists, the Source
     * Description (Table 2.1); after changes the set's Change List is regenerated (throttled) so the open one is
     * announced `updated` and a new one `created`.
     */
    onDocuments?(listener: (events: readonly PublishedDocument[]) => void): () => void;
    /** The Source (its set names: where Source Description events go). */
    readonly source?: { setNames(): string[] };
  };
  /**
   * Framework notifications (N-§5) on each set's framework channel and topic: after changes, the Change List
   * that received them is announced as `updated` (`created` when a new one was opened), with its Change List Index as
   * `rs:ln rel="index"`; at most one per set per `frameworkIntervalMs` (default 1,000 ms). Default on when
   * `site.document` is given.
   */
  readonly framework?: boolean;
  readonly frameworkIntervalMs?: number;
  /** WebSocket channels (default on). */
  readonly websocket?: boolean | ChannelServerOptions;
  /**
   * WebSub: `{ db, path? }` mounts a hub of our own at `<base>hub` (or `path`), with subscriptions in `db`;
   * `{ url }` publishes to an external hub (which must accept the topics); absent: no WebSub.
   */
  readonly hub?:
    | ({ readonly db: string; readonly path?: string } & Omit<
        HubOptions,
        'db' | 'topics' | 'path' | 'hubUrl' | 'acceptTopic'
      >)
    | { readonly url: string; readonly token?: string };
  readonly onError?: (message: string, error?: unknown) => void;
}

/** A published document (structurally `source`'s `DocumentEvent`). */
export interface PublishedDocument {
  readonly capability: FrameworkCapability;
  readonly uri: string;
  readonly change: ChangeType;
  readonly setName?: string;
  readonly indexUrl?: string;
  readonly datetime?: string;
}

export interface SourceNotifications {
  readonly notifier: SourceNotifier;
  /** The hub mounted in the server, when one was asked for. */
  readonly hub: Hub | undefined;
  /** The hub URL advertised (own or external). */
  readonly hubUrl: string | undefined;
  /** Stops publishing, closes the channels (1001) and the hub, restores the server's request listeners. */
  close(): Promise<void>;
}

/**
 * Wires notifications into a running Source server. Call after the server's request listener is installed
 * (`createSourceServer`), before or after `listen`.
 *
 * @example
 * ```ts
 * const n = attachSourceNotifications({ server: server.httpServer, baseUrl, site, hub: { db: join(stateDir, 'hub.db') } });
 * // Capability List: add n.notifier.capabilityListEntries(set) and n.notifier.hubLinks()
 * // shutdown: await n.close(); await server.close();
 * ```
 */
export function attachSourceNotifications(options: SourceNotificationsOptions): SourceNotifications {
  const base = new URL(options.baseUrl);
  if (!base.pathname.endsWith('/')) base.pathname += '/';
  const own = options.hub !== undefined && 'db' in options.hub ? options.hub : undefined;
  const external = options.hub !== undefined && 'url' in options.hub ? options.hub : undefined;
  const hubPath = own === undefined ? undefined : (own.path ?? `${base.pathname}hub`);
  const hubUrl = own !== undefined ? new URL(hubPath!, base.origin).href : external?.url;
  const notifier = new SourceNotifier({
    baseUrl: base.href,
    ...(hubUrl === undefined ? {} : { hubUrl }),
    ...(external?.token === undefined ? {} : { publisher: { token: external.token } }),
    ...(options.websocket === undefined ? {} : { websocket: options.websocket }),
    ...(options.onError === undefined ? {} : { onError: options.onError }),
  });
  let hub: Hub | undefined;
  if (own !== undefined) {
    const { db, path: _path, ...rest } = own;
    hub = createHub({
      ...rest,
      db,
      topics: [],
      acceptTopic: (t) => notifier.isTopic(t),
      path: hubPath!,
      hubUrl: hubUrl!,
    });
  }
  const detachChannels = notifier.attach(options.server);
  const unmount = mountRequestHandler(options.server, (req, res) => {
    if (hub?.handle(req, res) === true) return true;
    const target = req.url ?? '/';
    const q = target.indexOf('?');
    const link = notifier.linkHeader(q < 0 ? target : target.slice(0, q));
    if (link !== undefined) res.setHeader('link', link);
    return false;
  });
  let closed = false;
  // Someone to tell: a client on the set's framework channel, a subscriber of its framework topic on our hub, or
  // an external hub (whose subscribers we cannot see).
  const hasAudience = (setName: string): boolean => {
    const u = notifier.urls(setName);
    if (external !== undefined) return true;
    if ((notifier.channels?.channel(new URL(u.frameworkChannel).pathname)?.clients ?? 0) > 0) return true;
    return hub !== undefined && hub.subscriptions(u.frameworkTopic).length > 0;
  };
  const announce =
    options.site.onDocuments !== undefined
      ? createFrameworkPublisher(options, notifier, () => closed, hasAudience)
      : createFrameworkAnnouncer(options, notifier, () => closed);
  const stop = options.site.onChange((changes) => {
    notifier.notifyChanges(changes);
    if (announce !== undefined) for (const set of new Set(changes.map((c) => c.setName))) announce(set);
  });
  return {
    notifier,
    hub,
    hubUrl,
    async close() {
      if (closed) return;
      closed = true;
      stop();
      announce?.cancel();
      detachChannels();
      await notifier.close();
      await hub?.close();
      unmount();
    },
  };
}

/** Delay before a first framework notification leaves, so documents of one generation go together (ms). */
const FRAMEWORK_COALESCE_MS = 20;

/**
 * Framework notifications of every published document (`site.onDocuments`), coalesced per set: at most one
 * notification per set per `frameworkIntervalMs` (so at most one entry per document), the first after
 * {@link FRAMEWORK_COALESCE_MS}. Within a window, a document `created` then `updated` stays `created`, and a
 * `deleted` wins. Source Description events, and Capability Lists created or deleted, go to every set's channel.
 * After changes of a set, its Change List is asked for (which regenerates it when stale), at most once per interval,
 * when the set's framework notifications have an audience (`hasAudience`).
 * Memory: pending entries per set, at most one per document.
 */
function createFrameworkPublisher(
  options: SourceNotificationsOptions,
  notifier: SourceNotifier,
  isClosed: () => boolean,
  hasAudience: (setName: string) => boolean,
): ((setName: string) => void) & { cancel(): void } {
  const site = options.site;
  const interval = options.frameworkIntervalMs ?? 1000;
  const known = new Set<string>(site.source?.setNames() ?? []);
  const pending = new Map<string, Map<string, FrameworkChange>>();
  const flushTimers = new Map<string, NodeJS.Timeout>();
  const lastFlush = new Map<string, number>();
  const refreshTimers = new Map<string, NodeJS.Timeout>();
  const lastRefresh = new Map<string, number>();
  const onError = (m: string, e?: unknown): void => options.onError?.(m, e);
  const delayFor = (last: number | undefined): number =>
    Math.max(FRAMEWORK_COALESCE_MS, last === undefined ? 0 : last + interval - Date.now());

  const flush = (setName: string): void => {
    flushTimers.delete(setName);
    const list = pending.get(setName);
    pending.delete(setName);
    if (list === undefined || list.size === 0 || isClosed()) return;
    lastFlush.set(setName, Date.now());
    notifier.notifyFramework(setName, [...list.values()]);
  };
  const add = (setName: string, c: FrameworkChange): void => {
    let list = pending.get(setName);
    if (list === undefined) pending.set(setName, (list = new Map()));
    const prev = list.get(c.uri);
    const keepCreated = prev?.change === 'created' && c.change === 'updated';
    list.set(c.uri, keepCreated ? { ...c, change: 'created' } : c);
    if (!flushTimers.has(setName)) {
      const t = setTimeout(() => flush(setName), delayFor(lastFlush.get(setName)));
      t.unref();
      flushTimers.set(setName, t);
    }
  };
  const stopDocuments = site.onDocuments!((events) => {
    if (isClosed()) return;
    for (const e of events) {
      const change: FrameworkChange = {
        uri: e.uri,
        capability: e.capability,
        change: e.change,
        ...(e.indexUrl === undefined ? {} : { indexUrl: e.indexUrl }),
        ...(e.datetime === undefined ? {} : { datetime: e.datetime }),
      };
      if (e.setName !== undefined) known.add(e.setName);
      const everywhere = e.setName === undefined || (e.capability === 'capabilitylist' && e.change !== 'updated');
      const targets = everywhere ? new Set([...known, ...(e.setName === undefined ? [] : [e.setName])]) : [e.setName!];
      for (const s of targets) add(s, change);
    }
  });
  const refresh = (setName: string): void => {
    refreshTimers.delete(setName);
    // Regenerating the open Change List after every burst costs the Source: only when someone listens.
    if (isClosed() || site.document === undefined || !hasAudience(setName)) return;
    lastRefresh.set(setName, Date.now());
    site.document(new URL(notifier.urls(setName).changeList).pathname).catch((e: unknown) => {
      onError(`framework notification for set ${setName}: ${(e as Error).message}`, e);
    });
  };
  const announce = (setName: string): void => {
    known.add(setName);
    if (refreshTimers.has(setName) || isClosed()) return;
    const t = setTimeout(() => refresh(setName), delayFor(lastRefresh.get(setName)));
    t.unref();
    refreshTimers.set(setName, t);
  };
  return Object.assign(announce, {
    cancel: () => {
      stopDocuments();
      for (const t of [...flushTimers.values(), ...refreshTimers.values()]) clearTimeout(t);
      flushTimers.clear();
      refreshTimers.clear();
      pending.clear();
    },
  });
}

/**
 * Throttled framework notifications about the Change List of a set (for a site without `onDocuments`): reads the set's `changelist.xml` (an index
 * or a single Change List) from the Source to name the document that changed (never the index, N-§5).
 */
function createFrameworkAnnouncer(
  options: SourceNotificationsOptions,
  notifier: SourceNotifier,
  isClosed: () => boolean,
): (((setName: string) => void) & { cancel(): void }) | undefined {
  const site = options.site;
  const document = site.document?.bind(site);
  if (options.framework === false || document === undefined) return undefined;
  const interval = options.frameworkIntervalMs ?? 1000;
  const timers = new Map<string, NodeJS.Timeout>();
  const lastPart = new Map<string, string>();
  const announceNow = async (setName: string): Promise<void> => {
    const urls = notifier.urls(setName);
    const file = await document(new URL(urls.changeList).pathname);
    if (file === undefined || isClosed()) return;
    const doc = await openDocument(fileSource(file.path), { url: urls.changeList });
    let last: string | undefined;
    for await (const e of doc.entries) last = e.loc;
    const isIndex = doc.header.root === 'sitemapindex';
    const uri = isIndex ? last : urls.changeList;
    if (uri === undefined || isClosed()) return;
    // A part not seen at the previous announcement of the set is new; the first one seen is taken as updated.
    const previous = lastPart.get(setName);
    const change: ChangeType = previous === undefined || previous === uri ? 'updated' : 'created';
    lastPart.set(setName, uri);
    notifier.notifyFramework(setName, [
      { uri, capability: 'changelist', change, ...(isIndex ? { indexUrl: urls.changeList } : {}) },
    ]);
  };
  const announce = (setName: string): void => {
    if (timers.has(setName) || isClosed()) return;
    const timer = setTimeout(() => {
      timers.delete(setName);
      announceNow(setName).catch((e: unknown) => {
        options.onError?.(`framework notification for set ${setName}: ${(e as Error).message}`, e);
      });
    }, interval);
    timer.unref();
    timers.set(setName, timer);
  };
  return Object.assign(announce, {
    cancel: () => {
      for (const t of timers.values()) clearTimeout(t);
      timers.clear();
    },
  });
}
