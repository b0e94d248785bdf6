/**
 * The Source side of notifications, in one object: recorded changes in, change notifications out on the
 * WebSocket channel of their set (at once, synchronously) and to a WebSub hub (in order per topic, retried).
 *
 * URL scheme (matching `source/layout.ts`: documents under `<base>resourcesync/<set>/`):
 *
 * | what | URL |
 * |---|---|
 * | WebSocket change channel (N-§3) | `ws(s)://…/resourcesync/<set>/change-notification` |
 * | WebSocket framework channel | `ws(s)://…/resourcesync/<set>/framework-notification` |
 * | WebSub topic of change notifications | the set's Change List: `…/resourcesync/<set>/changelist.xml` |
 * | WebSub topic of framework notifications | the set's Capability List: `…/resourcesync/<set>/capabilitylist.xml` |
 *
 * A WebSub subscriber discovers both from the `Link: <hub>; rel="hub", <topic>; rel="self"` header of the
 * Change List and Capability List responses (WebSub §4), or from the Capability List itself: the document-level
 * and the `changelist` entry's `<rs:ln rel="hub">` name the hub; the channels' entries follow Example 3.1.
 *
 * This module knows nothing of the Source: it takes changes shaped like `RecordedChange` (absolute `uri`,
 * `setName`). Wiring (in `serve`):
 *
 * ```ts
 * const notifier = new SourceNotifier({ baseUrl: site.baseUrl.href, hubUrl });
 * notifier.attach(server.httpServer);                    // WebSocket upgrades on the channel paths
 * site.onChange((changes) => notifier.notifyChanges(changes));
 * ```
 *
 * @module
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { ResourceSyncError } from '../core/errors.js';
import type { Entry, Link } from '../core/model.js';
import { formatWebSubLinks } from '../http/link.js';
import { isHttpUrl } from './http-util.js';
import {
  createChangeNotifications,
  createFrameworkNotification,
  type FrameworkChange,
  type ResourceChange,
} from './payloads.js';
import { ChannelServer, type ChannelServerOptions, channelEntries, channelUrls } from './websocket.js';
import { WebSubPublisher, type WebSubPublisherOptions } from './websub-publisher.js';

/** A recorded change of a set (structurally a `source` `RecordedChange`). */
export interface SetChange extends ResourceChange {
  readonly setName: string;
  readonly datetime: string;
}

export interface SourceNotifierOptions {
  /** The Source's base URL (absolute http(s)). */
  readonly baseUrl: string;
  /** WebSocket channels (default on, with default options); `false` for none. */
  readonly websocket?: boolean | ChannelServerOptions;
  /** A WebSub hub to publish to (and to advertise). */
  readonly hubUrl?: string;
  /** Options of the WebSub publisher (token, retries, timeouts). */
  readonly publisher?: Omit<WebSubPublisherOptions, 'hubUrl'>;
  /** Bounds of one change notification (a larger burst is split, N-§4). */
  readonly maxEntries?: number;
  readonly maxBytes?: number;
  /** Payloads waiting per WebSub topic (default 1,000); past it the oldest is dropped (followers catch up). */
  readonly maxQueuedPublishes?: number;
  readonly onError?: (message: string, error?: unknown) => void;
}

/** Every URL of a set's notifications. */
export interface NotificationUrls {
  readonly capabilityList: string;
  readonly changeList: string;
  /** WebSocket channel URLs (`ws:`/`wss:`). */
  readonly changeChannel: string;
  readonly frameworkChannel: string;
  /** WebSub topics. */
  readonly changeTopic: string;
  readonly frameworkTopic: string;
}

const SET_NAME = /^[A-Za-z0-9][A-Za-z0-9._~-]*$/;

/** Ordered publishing to one WebSub topic: one request in flight, a bounded backlog. */
class TopicQueue {
  readonly #items: string[] = [];
  #running = false;
  idle: Promise<void> = Promise.resolve();
  constructor(
    readonly topic: string,
    readonly publisher: WebSubPublisher,
    readonly max: number,
    readonly onError: (message: string, error?: unknown) => void,
  ) {}
  push(payload: string): void {
    this.#items.push(payload);
    if (this.#items.length > this.max) {
      this.#items.shift();
      this.onError(`WebSub backlog of ${this.topic} full: oldest notification dropped`);
    }
    if (!this.#running) {
      this.#running = true;
      this.idle = this.#run();
    }
  }
  clear(): void {
    this.#items.length = 0;
  }
  async #run(): Promise<void> {
    try {
      for (let p = this.#items.shift(); p !== undefined; p = this.#items.shift()) {
        try {
          await this.publisher.publish(this.topic, p);
        } catch (e) {
          this.onError(`publishing to the hub failed for ${this.topic}: ${(e as Error).message}`, e);
        }
      }
    } finally {
      this.#running = false;
    }
  }
}

/**
 * Change and framework notifications of a Source over WebSocket and WebSub. Memory bound: per topic at most
 * `maxQueuedPublishes` payloads; per WebSocket connection see `ChannelServer`.
 */
export class SourceNotifier {
  readonly baseUrl: URL;
  readonly hubUrl: string | undefined;
  /** The WebSocket channels (undefined when `websocket: false`). */
  readonly channels: ChannelServer | undefined;
  readonly #publisher: WebSubPublisher | undefined;
  readonly #queues = new Map<string, TopicQueue>();
  readonly #options: SourceNotifierOptions;
  readonly #onError: (message: string, error?: unknown) => void;
  readonly #basePath: string;
  readonly stats = { changes: 0, payloads: 0 };

  constructor(options: SourceNotifierOptions) {
    if (!isHttpUrl(options.baseUrl))
      throw new ResourceSyncError('RS_CONFIG', `the base URL must be absolute http(s): ${options.baseUrl}`);
    this.baseUrl = new URL(options.baseUrl);
    if (!this.baseUrl.pathname.endsWith('/')) this.baseUrl.pathname += '/';
    this.#basePath = this.baseUrl.pathname;
    this.#options = options;
    this.#onError = options.onError ?? ((): void => {});
    this.hubUrl = options.hubUrl;
    if (options.hubUrl !== undefined)
      this.#publisher = new WebSubPublisher({ ...options.publisher, hubUrl: options.hubUrl });
    if (options.websocket !== false) {
      const wsOptions = typeof options.websocket === 'object' ? options.websocket : {};
      this.channels = new ChannelServer({ ...wsOptions, acceptPath: (p) => this.#isChannelPath(p) });
    }
  }

  /** The URLs of a set's channels, topics and documents. */
  urls(setName: string): NotificationUrls {
    const set = encodeURIComponent(setName);
    const dir = new URL(`resourcesync/${set}/`, this.baseUrl);
    const ws = channelUrls(this.baseUrl, setName);
    const capabilityList = new URL('capabilitylist.xml', dir).href;
    const changeList = new URL('changelist.xml', dir).href;
    return {
      capabilityList,
      changeList,
      changeChannel: ws.change,
      frameworkChannel: ws.framework,
      changeTopic: changeList,
      frameworkTopic: capabilityList,
    };
  }

  /** True for a WebSub topic of this Source (a set's Change List or Capability List URL): the hub's `acceptTopic`. */
  isTopic(url: string): boolean {
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      return false;
    }
    if (u.origin !== this.baseUrl.origin || u.search !== '' || u.hash !== '') return false;
    const m = this.#matchSetPath(u.pathname, /^(capabilitylist\.xml|changelist\.xml)$/);
    return m !== undefined;
  }

  /**
   * Entries the set's Capability List adds (N-§3, Example 3.1): the two WebSocket channels. The channels' entries
   * carry `<rs:ln rel="hub">` when a hub is configured.
   */
  capabilityListEntries(setName: string): Entry[] {
    if (this.channels === undefined) return [];
    const u = this.urls(setName);
    const entries = channelEntries({ change: u.changeChannel, framework: u.frameworkChannel });
    if (this.hubUrl !== undefined) for (const e of entries) e.links.push({ rel: 'hub', href: this.hubUrl });
    return entries;
  }

  /** Document-level links of the Capability List, and links of its `changelist` entry: `rel="hub"` when a hub is configured. */
  hubLinks(): Link[] {
    return this.hubUrl === undefined ? [] : [{ rel: 'hub', href: this.hubUrl }];
  }

  /**
   * The `Link` header value for a response (WebSub §4 discovery): `<hub>; rel="hub", <topic>; rel="self"` for a
   * set's Capability List and Change List, undefined for anything else or without a hub.
   */
  linkHeader(pathname: string): string | undefined {
    if (this.hubUrl === undefined) return undefined;
    const url = new URL(pathname, this.baseUrl.origin).href;
    return this.isTopic(url) ? formatWebSubLinks(this.hubUrl, url) : undefined;
  }

  /**
   * Publishes change notifications for recorded changes (call from `SourceSite.onChange`). Changes are grouped
   * by set, in order; each group becomes one or more payloads, broadcast at once on the set's WebSocket channel
   * and queued for the hub.
   */
  notifyChanges(changes: readonly SetChange[]): void {
    const bySet = new Map<string, SetChange[]>();
    for (const c of changes) {
      let list = bySet.get(c.setName);
      if (list === undefined) bySet.set(c.setName, (list = []));
      list.push(c);
    }
    for (const [setName, list] of bySet) {
      const u = this.urls(setName);
      let payloads: string[];
      try {
        payloads = createChangeNotifications(list, {
          capabilityListUrl: u.capabilityList,
          ...(this.#options.maxEntries === undefined ? {} : { maxEntries: this.#options.maxEntries }),
          ...(this.#options.maxBytes === undefined ? {} : { maxBytes: this.#options.maxBytes }),
        });
      } catch (e) {
        this.#onError(`cannot build a change notification for set ${setName}: ${(e as Error).message}`, e);
        continue;
      }
      this.stats.changes += list.length;
      this.#send(u.changeChannel, u.changeTopic, payloads);
    }
  }

  /** Publishes one framework notification for a set (N-§5): on its framework channel and topic. */
  notifyFramework(setName: string, changes: readonly FrameworkChange[]): void {
    const u = this.urls(setName);
    let payload: string;
    try {
      payload = createFrameworkNotification(changes, u.capabilityList);
    } catch (e) {
      this.#onError(`cannot build a framework notification for set ${setName}: ${(e as Error).message}`, e);
      return;
    }
    this.#send(u.frameworkChannel, u.frameworkTopic, [payload]);
  }

  /**
   * Attaches the WebSocket channels to an HTTP server (upgrades on the channel paths). Returns a detach function.
   */
  attach(server: Server): () => void {
    return this.channels?.attach(server) ?? ((): void => {});
  }

  /** Resolves when every queued WebSub publish was attempted (or after `timeoutMs`). */
  async flush(timeoutMs = 10_000): Promise<void> {
    const all = Promise.all([...this.#queues.values()].map((q) => q.idle));
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([all, new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
    clearTimeout(timer);
  }

  /** Closes the channels (1001) and, after a bounded flush, the publisher. */
  async close(flushTimeoutMs = 2000): Promise<void> {
    await this.channels?.close();
    await this.flush(flushTimeoutMs);
    for (const q of this.#queues.values()) q.clear();
    await this.#publisher?.close();
  }

  #send(channelUrl: string, topic: string, payloads: readonly string[]): void {
    this.stats.payloads += payloads.length;
    const channel = this.channels?.channel(new URL(channelUrl).pathname);
    if (channel !== undefined) for (const p of payloads) channel.publish(p);
    if (this.#publisher !== undefined) {
      let q = this.#queues.get(topic);
      if (q === undefined) {
        q = new TopicQueue(topic, this.#publisher, this.#options.maxQueuedPublishes ?? 1000, this.#onError);
        this.#queues.set(topic, q);
      }
      for (const p of payloads) q.push(p);
    }
  }

  #isChannelPath(path: string): boolean {
    return this.#matchSetPath(path, /^(change-notification|framework-notification)$/) !== undefined;
  }

  /** The set name when `pathname` is `<base path>resourcesync/<set>/<file>` with `file` matching. */
  #matchSetPath(pathname: string, file: RegExp): string | undefined {
    if (!pathname.startsWith(this.#basePath)) return undefined;
    const parts = pathname.slice(this.#basePath.length).split('/');
    if (parts.length !== 3 || parts[0] !== 'resourcesync' || !file.test(parts[2]!)) return undefined;
    let set: string;
    try {
      set = decodeURIComponent(parts[1]!);
    } catch {
      return undefined;
    }
    return SET_NAME.test(set) ? set : undefined;
  }
}

/**
 * Runs `handle` before the existing `request` listeners of `server` (which only see the requests `handle`
 * declined), e.g. to mount a hub under a path of the Source server, or to add `Link` headers before the Source
 * answers. Returns a function that restores the previous listeners.
 */
export function mountRequestHandler(
  server: Server,
  handle: (req: IncomingMessage, res: ServerResponse) => boolean,
): () => void {
  const previous = server.listeners('request') as ((req: IncomingMessage, res: ServerResponse) => void)[];
  server.removeAllListeners('request');
  const listener = (req: IncomingMessage, res: ServerResponse): void => {
    if (handle(req, res)) return;
    for (const l of previous) l.call(server, req, res);
  };
  server.on('request', listener);
  return () => {
    server.off('request', listener);
    for (const l of previous) server.on('request', l);
  };
}
