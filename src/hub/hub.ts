/**
 * A WebSub hub (W3C WebSub Recommendation, 2018) for ResourceSync notification topics, usable alone
 * (`resourcesync hub`) or mounted inside `serve` under a path.
 *
 * - Subscribe / unsubscribe (WebSub §5.1): a form-encoded POST with `hub.mode`, `hub.topic`, `hub.callback`,
 *   optional `hub.lease_seconds` and `hub.secret`; the hub answers `202 Accepted`, then verifies the intent of
 *   the subscriber (§5.3) with a GET to the callback carrying `hub.mode`, `hub.topic`, `hub.challenge` and
 *   `hub.lease_seconds`; only a 2xx answer echoing the challenge makes (or ends) the subscription.
 * - Leases expire (§5.1); subscriptions live in SQLite, so a restart loses none.
 * - Content distribution (§7): a POST of the published body to each subscriber with
 *   `Link: <hub>; rel="hub", <topic>; rel="self"` and, when a secret was given, `X-Hub-Signature: sha256=<hmac>`
 *   (§8); retries with backoff, a bound, then dropped (see `delivery.ts`).
 * - Publishing (not defined by WebSub; the usual conventions): either a direct content POST (any content type
 *   other than a form) with `Link: <topic>; rel="self"`, as the ResourceSync Change Notification specification
 *   has the Source do, or a form POST `hub.mode=publish&hub.url=<url>` after which the hub fetches the URL.
 *   Only configured topics may be published to (otherwise 403), optionally only with a bearer token.
 *
 * Safety: callback URLs must be absolute http(s) without credentials; request bodies, secrets, challenges
 * answers and fetched content are bounded; every outgoing request has a timeout and follows no redirect.
 *
 * @module
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Agent } from 'undici';
import { isResourceSyncError, ResourceSyncError } from '../core/errors.js';
import { findLink, formatWebSubLinks } from '../http/link.js';
import { createOutboundAgent, sendRequest } from '../http/outbound.js';
import { isHttpUrl, readBody } from '../notify/http-util.js';
import { Deliverer, type DeliveryEvent, type DeliveryOptions } from './delivery.js';
import { type Subscription, SubscriptionStore } from './store.js';

export interface HubOptions {
  /** SQLite file of the subscriptions (`':memory:'` for none that survive). */
  readonly db: string;
  /** Topic URLs publishers may publish to and subscribers may subscribe to. */
  readonly topics: readonly string[];
  /**
   * Topics beyond `topics`, decided per URL (e.g. every `…/resourcesync/<set>/changelist.xml` of a Source whose
   * sets appear while it runs). Only absolute http(s) URLs are ever asked.
   */
  readonly acceptTopic?: (topic: string) => boolean;
  /** Public URL of the hub, sent as `Link: <hub>; rel="hub"` on deliveries. Default: the listening address + `path`. */
  readonly hubUrl?: string;
  /** Request path the hub answers on (default `/`); other paths are left to the caller (`handle` returns false). */
  readonly path?: string;
  /** Lease granted when none is asked (default 10 days), and the bounds a requested lease is clamped to. */
  readonly defaultLeaseSeconds?: number;
  readonly minLeaseSeconds?: number;
  readonly maxLeaseSeconds?: number;
  /** When set, publish requests must carry `Authorization: Bearer <token>`. */
  readonly publisherToken?: string;
  /** Largest published body (default 8 MiB) and largest subscription request (64 KiB is fixed). */
  readonly maxContentBytes?: number;
  /** Timeout of a verification-of-intent request (default 10 s) and of fetching `hub.url` (default 10 s). */
  readonly verifyTimeoutMs?: number;
  readonly fetchTimeoutMs?: number;
  /** Verifications in progress at once (default 256); more -> 503. */
  readonly maxPendingVerifications?: number;
  /** Unexpired subscriptions in all (default 100,000); a new subscription past it is answered 503. */
  readonly maxSubscriptions?: number;
  /**
   * Callback URLs allowed (default: any absolute http(s) URL without credentials). A hub open to the Internet
   * should refuse private and loopback addresses here (server-side request forgery).
   */
  readonly allowCallback?: (callback: URL) => boolean;
  /** Delivery retries, timeouts, concurrency and queue bounds. */
  readonly delivery?: DeliveryOptions;
  /** How often expired subscriptions are purged (default 60 s). */
  readonly purgeIntervalMs?: number;
  /** Connections per subscriber origin (default 32). */
  readonly connectionsPerOrigin?: number;
  /** Everything that happens, for logs and tests. */
  readonly onEvent?: (event: HubEvent) => void;
}

/** An event of the hub: subscription changes, verifications, publications and deliveries. */
export type HubEvent =
  | DeliveryEvent
  | {
      readonly type: 'subscribed' | 'unsubscribed';
      readonly topic: string;
      readonly callback: string;
      readonly leaseSeconds?: number;
    }
  | {
      readonly type: 'verify-failed';
      readonly mode: string;
      readonly topic: string;
      readonly callback: string;
      readonly reason: string;
    }
  | { readonly type: 'expired'; readonly topic: string; readonly callback: string }
  | { readonly type: 'published'; readonly topic: string; readonly bytes: number; readonly subscribers: number };

export interface Hub {
  /** Handles a request when its path is the hub's; returns false (and does nothing) otherwise. */
  handle(req: IncomingMessage, res: ServerResponse): boolean;
  /** Starts a server of its own. Resolves with the listening URL (the hub URL). */
  listen(port: number, host?: string): Promise<string>;
  /** Distributes a body to the subscribers of a configured topic (what a publish request does). */
  publish(topic: string, body: Uint8Array, contentType?: string): number;
  /** The hub URL advertised in deliveries (after `listen`, or as configured). */
  readonly url: string | undefined;
  /** The configured topics (`acceptTopic` may accept more). */
  readonly topics: ReadonlySet<string>;
  /** Unexpired subscriptions to a topic. */
  subscriptions(topic: string): Subscription[];
  readonly stats: {
    readonly delivered: number;
    readonly retries: number;
    readonly dropped: number;
    readonly subscriptionsDropped: number;
    readonly verifications: number;
  };
  /** Stops accepting, abandons queued deliveries, closes the server (when `listen` started one) and the database. */
  close(): Promise<void>;
}

const MAX_FORM_BYTES = 65_536;
const MAX_SECRET_BYTES = 199; // WebSub §5.1: "MUST be less than 200 bytes"

function send(res: ServerResponse, status: number, text: string, headers: Record<string, string> = {}): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  const body = text.length > 0 ? `${text}\n` : '';
  res.writeHead(status, {
    'content-type': 'text/plain; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    ...headers,
  });
  res.end(body);
}

/**
 * Creates a hub. Throws `RS_CONFIG` for a topic that is not an absolute http(s) URL, `RS_STORE` when the
 * database cannot be opened.
 *
 * @example
 * ```ts
 * const hub = createHub({ db: 'hub.db', topics: ['http://localhost:8080/resourcesync/default/changelist.xml'] });
 * const hubUrl = await hub.listen(8090);
 * ```
 */
export function createHub(options: HubOptions): Hub {
  const topics = new Set<string>();
  for (const t of options.topics) {
    if (!isHttpUrl(t)) throw new ResourceSyncError('RS_CONFIG', `a topic must be an absolute http(s) URL: ${t}`);
    topics.add(t);
  }
  const isTopic = (t: string): boolean =>
    topics.has(t) || (options.acceptTopic !== undefined && isHttpUrl(t) && options.acceptTopic(t));
  const path = options.path ?? '/';
  const minLease = Math.max(1, options.minLeaseSeconds ?? 60);
  const maxLease = Math.max(minLease, options.maxLeaseSeconds ?? 30 * 86_400);
  const defaultLease = Math.min(maxLease, Math.max(minLease, options.defaultLeaseSeconds ?? 10 * 86_400));
  const maxContentBytes = options.maxContentBytes ?? 8 * 1024 * 1024;
  const verifyTimeoutMs = options.verifyTimeoutMs ?? 10_000;
  const fetchTimeoutMs = options.fetchTimeoutMs ?? 10_000;
  const maxPending = options.maxPendingVerifications ?? 256;
  const maxSubscriptions = options.maxSubscriptions ?? 100_000;
  const onEvent = options.onEvent ?? ((): void => {});
  const store = SubscriptionStore.open(options.db);
  const agent: Agent = createOutboundAgent(options.connectionsPerOrigin ?? 32);
  const deliverer = new Deliverer(agent, options.delivery ?? {}, onEvent, (topic, callback) => {
    store.delete(topic, callback);
  });
  let hubUrl = options.hubUrl;
  let server: Server | undefined;
  let closed = false;
  let pendingVerifications = 0;
  let verifications = 0;
  const inflight = new Set<Promise<void>>();

  const purgeTimer = setInterval(() => {
    for (const { topic, callback } of store.purgeExpired()) {
      deliverer.cancel(topic, callback);
      onEvent({ type: 'expired', topic, callback });
    }
  }, options.purgeIntervalMs ?? 60_000);
  purgeTimer.unref();

  function track(p: Promise<void>): void {
    inflight.add(p);
    void p.finally(() => inflight.delete(p));
  }

  function linkFor(topic: string): string {
    return formatWebSubLinks(hubUrl ?? 'about:blank', topic);
  }

  function publish(topic: string, body: Uint8Array, contentType = 'application/xml'): number {
    if (!isTopic(topic)) throw new ResourceSyncError('RS_CONFIG', `not a topic of this hub: ${topic}`);
    const subs = store.active(topic);
    const buf = Buffer.isBuffer(body) ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
    const link = linkFor(topic);
    for (const sub of subs) deliverer.enqueue(sub, buf, contentType, link);
    onEvent({ type: 'published', topic, bytes: buf.length, subscribers: subs.length });
    return subs.length;
  }

  async function verifyIntent(
    mode: 'subscribe' | 'unsubscribe',
    topic: string,
    callback: string,
    lease: number,
    secret: string | undefined,
  ): Promise<void> {
    const challenge = randomBytes(24).toString('base64url');
    const url = new URL(callback);
    url.searchParams.append('hub.mode', mode);
    url.searchParams.append('hub.topic', topic);
    url.searchParams.append('hub.challenge', challenge);
    if (mode === 'subscribe') url.searchParams.append('hub.lease_seconds', String(lease));
    let reason: string;
    try {
      const res = await sendRequest(agent, url.href, {
        method: 'GET',
        timeoutMs: verifyTimeoutMs,
        maxResponseBytes: challenge.length + 2,
      });
      verifications++;
      if (res.status >= 200 && res.status < 300 && !res.truncated && res.body.toString('utf8').trim() === challenge) {
        if (closed) return;
        if (mode === 'subscribe') {
          const now = Date.now();
          const previous = store.get(topic, callback);
          store.put({
            topic,
            callback,
            secret,
            leaseSeconds: lease,
            expiresAt: now + lease * 1000,
            createdAt: previous?.createdAt ?? now,
          });
          onEvent({ type: 'subscribed', topic, callback, leaseSeconds: lease });
        } else {
          store.delete(topic, callback);
          deliverer.cancel(topic, callback);
          onEvent({ type: 'unsubscribed', topic, callback });
        }
        return;
      }
      reason = res.status >= 200 && res.status < 300 ? 'challenge not echoed' : `HTTP ${res.status}`;
    } catch (e) {
      reason = isResourceSyncError(e) ? `${e.code}: ${e.message}` : String(e);
    }
    onEvent({ type: 'verify-failed', mode, topic, callback, reason });
  }

  async function handleForm(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readBody(req, MAX_FORM_BYTES);
    const form = new URLSearchParams(body.toString('utf8'));
    const mode = form.get('hub.mode');
    if (mode === 'publish') {
      if (!authorizedPublisher(req))
        return send(res, 401, 'publisher token required', { 'www-authenticate': 'Bearer' });
      const topic = form.get('hub.topic') ?? form.get('hub.url') ?? '';
      const contentUrl = form.get('hub.url') ?? topic;
      if (!isTopic(topic)) return send(res, 403, `not a topic of this hub: ${topic}`);
      if (!isHttpUrl(contentUrl) || new URL(contentUrl).origin !== new URL(topic).origin) {
        return send(res, 400, 'hub.url must be an http(s) URL on the origin of the topic');
      }
      send(res, 202, 'accepted');
      track(fetchAndPublish(topic, contentUrl));
      return;
    }
    if (mode !== 'subscribe' && mode !== 'unsubscribe')
      return send(res, 400, 'hub.mode must be subscribe, unsubscribe or publish');
    const topic = form.get('hub.topic') ?? '';
    const callback = form.get('hub.callback') ?? '';
    if (!isHttpUrl(callback)) return send(res, 400, 'hub.callback must be an absolute http(s) URL without credentials');
    if (options.allowCallback !== undefined && !options.allowCallback(new URL(callback))) {
      return send(res, 403, 'hub.callback not allowed by this hub');
    }
    if (!isTopic(topic)) return send(res, 404, `not a topic of this hub: ${topic}`);
    let lease = defaultLease;
    const leaseText = form.get('hub.lease_seconds');
    if (leaseText !== null && leaseText !== '') {
      if (!/^\d{1,10}$/.test(leaseText)) return send(res, 400, 'hub.lease_seconds must be a whole number of seconds');
      lease = Math.min(maxLease, Math.max(minLease, Number(leaseText)));
    }
    const secretText = form.get('hub.secret');
    const secret = secretText === null || secretText === '' ? undefined : secretText;
    if (secret !== undefined && Buffer.byteLength(secret) > MAX_SECRET_BYTES) {
      return send(res, 400, 'hub.secret must be less than 200 bytes');
    }
    if (pendingVerifications >= maxPending)
      return send(res, 503, 'too many verifications in progress', { 'retry-after': '5' });
    if (mode === 'subscribe' && store.get(topic, callback) === undefined && store.count() >= maxSubscriptions) {
      return send(res, 503, 'subscription limit reached', { 'retry-after': '60' });
    }
    pendingVerifications++;
    send(res, 202, 'accepted');
    track(verifyIntent(mode, topic, callback, lease, secret).finally(() => pendingVerifications--));
  }

  async function fetchAndPublish(topic: string, contentUrl: string): Promise<void> {
    try {
      const res = await sendRequest(agent, contentUrl, {
        method: 'GET',
        timeoutMs: fetchTimeoutMs,
        maxResponseBytes: maxContentBytes,
      });
      if (res.status !== 200 || res.truncated || closed) return;
      const type = res.headers['content-type'];
      publish(topic, res.body, typeof type === 'string' ? type : 'application/xml');
    } catch {
      // The publisher is not waiting (202 was sent); the next publish carries the next change.
    }
  }

  function authorizedPublisher(req: IncomingMessage): boolean {
    if (options.publisherToken === undefined) return true;
    const given = Buffer.from(req.headers.authorization ?? '');
    const wanted = Buffer.from(`Bearer ${options.publisherToken}`);
    return given.length === wanted.length && timingSafeEqual(given, wanted);
  }

  async function handleContent(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (!authorizedPublisher(req)) return send(res, 401, 'publisher token required', { 'www-authenticate': 'Bearer' });
    const topic = findLink(req.headers.link, 'self');
    if (topic === undefined) return send(res, 400, 'a content publish needs Link: <topic>; rel="self"');
    if (!isTopic(topic)) return send(res, 403, `not a topic of this hub: ${topic}`);
    const body = await readBody(req, maxContentBytes);
    const type = req.headers['content-type'] ?? 'application/xml';
    const n = publish(topic, body, type);
    send(res, 202, `accepted for ${n} subscriber(s)`);
  }

  async function handleAsync(req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      if (closed) return send(res, 503, 'hub closing');
      if (req.method === 'GET' || req.method === 'HEAD') {
        return send(res, 200, `WebSub hub for ${topics.size} ResourceSync topic(s)`);
      }
      if (req.method !== 'POST') return send(res, 405, 'method not allowed', { allow: 'GET, HEAD, POST' });
      const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
      if (type === 'application/x-www-form-urlencoded') await handleForm(req, res);
      else await handleContent(req, res);
    } catch (e) {
      if (isResourceSyncError(e, 'RS_LIMIT')) send(res, 413, e.message, { connection: 'close' });
      else send(res, 500, 'hub error');
      req.resume();
    }
  }

  function matches(req: IncomingMessage): boolean {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const pathname = q < 0 ? url : url.slice(0, q);
    return pathname === path || (path.endsWith('/') && pathname === path.slice(0, -1) && path !== '/');
  }

  const hub: Hub = {
    handle(req, res) {
      if (!matches(req)) return false;
      track(handleAsync(req, res));
      return true;
    },
    async listen(port, host = '127.0.0.1') {
      server = createServer((req, res) => {
        if (!hub.handle(req, res)) send(res, 404, 'not found');
      });
      server.requestTimeout = 30_000;
      server.headersTimeout = 10_000;
      await new Promise<void>((resolve, reject) => {
        server!.once('error', reject);
        server!.listen(port, host, () => resolve());
      });
      const addr = server.address() as AddressInfo;
      const h = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
      const url = `http://${h}:${addr.port}${path}`;
      hubUrl ??= url;
      return url;
    },
    publish,
    get url() {
      return hubUrl;
    },
    topics,
    subscriptions: (topic) => store.active(topic),
    get stats() {
      return { ...deliverer.stats, verifications };
    },
    async close() {
      if (closed) return;
      closed = true;
      clearInterval(purgeTimer);
      deliverer.close();
      if (server !== undefined) {
        const s = server;
        s.closeAllConnections();
        await new Promise<void>((resolve) => s.close(() => resolve()));
      }
      await agent.destroy().catch(() => undefined);
      await Promise.allSettled([...inflight]);
      store.close();
    },
  };
  return hub;
}
