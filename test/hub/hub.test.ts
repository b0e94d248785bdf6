import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { request } from 'undici';
import { createHub, type Hub, type HubEvent, type HubOptions } from '../../src/hub/index.js';
import type { NotificationEvent } from '../../src/notify/events.js';
import { createChangeNotifications } from '../../src/notify/payloads.js';
import { WebSubPublisher } from '../../src/notify/websub-publisher.js';
import { WebSubSubscriber } from '../../src/notify/websub-subscriber.js';
import { bodyText, delay, drain, EventLog, type RawServer, startServer, withTempDir } from '../notify/helpers.js';

const TOPIC = 'http://source.test/resourcesync/default/change-notification';
const CAP = 'http://source.test/resourcesync/default/capabilitylist.xml';

function payload(n = 1): string {
  const changes = Array.from({ length: n }, (_, i) => ({
    uri: `http://source.test/r${i}`,
    change: 'updated' as const,
    datetime: '2026-01-01T00:00:00Z',
    hash: 'md5:1584abdf8ebdc9802ac0c6a7402c03b6',
    length: 8876,
    type: 'text/plain',
  }));
  return createChangeNotifications(changes, { capabilityListUrl: CAP })[0]!;
}

async function startHub(extra: Partial<HubOptions> = {}): Promise<{ hub: Hub; url: string; log: EventLog<HubEvent> }> {
  const log = new EventLog<HubEvent>();
  const hub = createHub({ db: ':memory:', topics: [TOPIC], minLeaseSeconds: 1, onEvent: log.push, ...extra });
  const url = await hub.listen(0);
  return { hub, url, log };
}

async function post(
  url: string,
  body: string,
  headers: Record<string, string>,
): Promise<{ status: number; text: string }> {
  const res = await request(url, { method: 'POST', body, headers });
  return { status: res.statusCode, text: await res.body.text() };
}

/** Starts a subscriber and waits until the hub has stored its subscription (the hub commits it right after the
 * subscriber answered the challenge, so `start()` resolving is not enough to publish at once). */
async function startSubscriber(
  log: EventLog<HubEvent>,
  options: ConstructorParameters<typeof WebSubSubscriber>[0],
): Promise<WebSubSubscriber> {
  const sub = await WebSubSubscriber.start(options);
  await log.waitFor((e) => e.type === 'subscribed' && e.callback === sub.callbackUrl);
  return sub;
}

function form(fields: Record<string, string>): string {
  return new URLSearchParams(fields).toString();
}

const FORM = { 'content-type': 'application/x-www-form-urlencoded' };

describe('WebSub hub', () => {
  it('subscribes with verification of intent and delivers a signed payload the subscriber checks and parses', async () => {
    const { hub, url, log } = await startHub();
    const sub = await startSubscriber(log, { hubUrl: url, topicUrl: TOPIC, leaseSeconds: 3600 });
    const events = new EventLog<NotificationEvent>();
    const pump = drain(sub.events(), events);
    try {
      const subscribed = await log.waitFor((e) => e.type === 'subscribed');
      assert.equal(subscribed.type === 'subscribed' && subscribed.leaseSeconds, 3600);
      assert.equal(hub.subscriptions(TOPIC).length, 1);
      assert.equal(hub.subscriptions(TOPIC)[0]!.callback, sub.callbackUrl);
      await events.waitFor((e) => e.type === 'connected');

      const publisher = new WebSubPublisher({ hubUrl: url });
      const result = await publisher.publish(TOPIC, payload(2));
      assert.equal(result.status, 202);
      await publisher.close();

      const got = await events.waitFor((e) => e.type === 'notification');
      assert.ok(got.type === 'notification');
      assert.equal(got.notification.kind, 'change-notification');
      assert.equal(got.notification.capabilityListUrl, CAP);
      assert.deepEqual(
        got.notification.changes.map((c) => c.uri),
        ['http://source.test/r0', 'http://source.test/r1'],
      );
      assert.equal(sub.stats.refused, 0);
      await log.waitFor((e) => e.type === 'delivered');
      assert.equal(hub.stats.delivered, 1);
    } finally {
      await sub.close();
      await hub.close();
      await pump;
    }
  });

  it('sends the challenge, the lease, Link headers and an HMAC signature the way WebSub says', async () => {
    const { hub, url } = await startHub();
    const seen: { verify?: URLSearchParams; delivery?: { headers: Record<string, unknown>; body: string } } = {};
    const delivered = new EventLog<string>();
    const cb: RawServer = await startServer((req, res) => {
      const u = new URL(req.url ?? '/', 'http://x');
      if (req.method === 'GET') {
        seen.verify = u.searchParams;
        res.end(u.searchParams.get('hub.challenge') ?? '');
        return;
      }
      void bodyText(req).then((body) => {
        seen.delivery = { headers: req.headers, body };
        res.writeHead(204).end();
        delivered.push('x');
      });
    });
    try {
      const r = await post(
        url,
        form({
          'hub.mode': 'subscribe',
          'hub.topic': TOPIC,
          'hub.callback': `${cb.url}/cb?x=1`,
          'hub.lease_seconds': '999999999',
          'hub.secret': 's3cret',
        }),
        FORM,
      );
      assert.equal(r.status, 202);
      await delay(10);
      while (hub.subscriptions(TOPIC).length === 0) await delay(10);
      assert.equal(seen.verify!.get('hub.mode'), 'subscribe');
      assert.equal(seen.verify!.get('hub.topic'), TOPIC);
      assert.equal(seen.verify!.get('x'), '1', 'the callback query string is kept');
      assert.ok((seen.verify!.get('hub.challenge') ?? '').length >= 16);
      assert.equal(seen.verify!.get('hub.lease_seconds'), String(30 * 86_400), 'lease clamped to the maximum');

      const body = payload();
      assert.equal(hub.publish(TOPIC, Buffer.from(body)), 1);
      await delivered.waitFor(() => true);
      const { createHmac } = await import('node:crypto');
      assert.equal(seen.delivery!.body, body);
      assert.equal(
        seen.delivery!.headers['x-hub-signature'],
        `sha256=${createHmac('sha256', 's3cret').update(body).digest('hex')}`,
      );
      assert.equal(seen.delivery!.headers.link, `<${url}>; rel="hub", <${TOPIC}>; rel="self"`);
      assert.equal(seen.delivery!.headers['content-type'], 'application/xml');
    } finally {
      await hub.close();
      await cb.close();
    }
  });

  it('refuses bad requests: callback, topic, lease, secret, size, publish to an unknown topic', async () => {
    const { hub, url } = await startHub({
      maxContentBytes: 1000,
      maxSubscriptions: 0,
      allowCallback: (u) => u.hostname !== 'blocked.test',
    });
    try {
      const base = { 'hub.mode': 'subscribe', 'hub.topic': TOPIC, 'hub.callback': 'http://127.0.0.1:9/cb' };
      assert.equal((await post(url, form({ ...base, 'hub.callback': 'ftp://x/cb' }), FORM)).status, 400);
      assert.equal((await post(url, form({ ...base, 'hub.callback': '/relative' }), FORM)).status, 400);
      assert.equal((await post(url, form({ ...base, 'hub.callback': 'http://u:p@x/cb' }), FORM)).status, 400);
      assert.equal((await post(url, form({ ...base, 'hub.topic': 'http://other.test/t' }), FORM)).status, 404);
      assert.equal((await post(url, form({ ...base, 'hub.lease_seconds': '-5' }), FORM)).status, 400);
      assert.equal((await post(url, form({ ...base, 'hub.secret': 'x'.repeat(200) }), FORM)).status, 400);
      assert.equal((await post(url, form({ ...base, 'hub.mode': 'bogus' }), FORM)).status, 400);
      assert.equal((await post(url, form({ ...base, 'hub.callback': 'http://blocked.test/cb' }), FORM)).status, 403);
      assert.equal((await post(url, form(base), FORM)).status, 503, 'subscription limit');
      assert.equal((await post(url, form({ ...base, pad: 'x'.repeat(70_000) }), FORM)).status, 413);
      // Publishing: only configured topics.
      const xml = { 'content-type': 'application/xml' };
      assert.equal((await post(url, payload(), { ...xml, link: '<http://other.test/t>; rel="self"' })).status, 403);
      assert.equal((await post(url, payload(), xml)).status, 400, 'no rel="self"');
      assert.equal((await post(url, 'x'.repeat(2000), { ...xml, link: `<${TOPIC}>; rel="self"` })).status, 413);
      assert.equal(
        (await post(url, form({ 'hub.mode': 'publish', 'hub.url': 'http://other.test/t' }), FORM)).status,
        403,
      );
      const publisher = new WebSubPublisher({ hubUrl: url, retries: 3, retryBaseMs: 1 });
      await assert.rejects(publisher.publish('http://other.test/t', payload()), (e: Error & { code?: string }) => {
        assert.equal(e.code, 'RS_HTTP');
        assert.match(e.message, /403/);
        return true;
      });
      assert.equal(publisher.stats.retries, 0, 'a 403 is not retried');
      await publisher.close();
      assert.equal(hub.stats.verifications, 0);
    } finally {
      await hub.close();
    }
  });

  it('requires the publisher token when one is configured', async () => {
    const { hub, url } = await startHub({ publisherToken: 't0ken' });
    try {
      const bad = new WebSubPublisher({ hubUrl: url, retries: 0 });
      await assert.rejects(bad.publish(TOPIC, payload()), /401/);
      await bad.close();
      const good = new WebSubPublisher({ hubUrl: url, token: 't0ken' });
      assert.equal((await good.publish(TOPIC, payload())).status, 202);
      await good.close();
    } finally {
      await hub.close();
    }
  });

  it('does not subscribe a callback that fails verification of intent', async () => {
    const { hub, url, log } = await startHub();
    const cb = await startServer((req, res) => {
      res.end(req.url?.includes('wrong') === true ? 'not-the-challenge' : '');
    });
    try {
      assert.equal(
        (
          await post(
            url,
            form({ 'hub.mode': 'subscribe', 'hub.topic': TOPIC, 'hub.callback': `${cb.url}/wrong` }),
            FORM,
          )
        ).status,
        202,
      );
      const failed = await log.waitFor((e) => e.type === 'verify-failed');
      assert.ok(failed.type === 'verify-failed');
      assert.match(failed.reason, /challenge/);
      assert.equal(hub.subscriptions(TOPIC).length, 0);
    } finally {
      await hub.close();
      await cb.close();
    }
  });

  it('fetches hub.url on a form publish and distributes it', async () => {
    const body = payload(3);
    const origin = await startServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/xml' }).end(body);
    });
    const topic = `${origin.url}/resourcesync/default/change-notification`;
    const { hub, url, log } = await startHub({ topics: [topic] });
    const sub = await startSubscriber(log, { hubUrl: url, topicUrl: topic });
    const events = new EventLog<NotificationEvent>();
    const pump = drain(sub.events(), events);
    try {
      assert.equal((await post(url, form({ 'hub.mode': 'publish', 'hub.url': topic }), FORM)).status, 202);
      const got = await events.waitFor((e) => e.type === 'notification');
      assert.ok(got.type === 'notification' && got.notification.changes.length === 3);
      assert.equal(
        log.count((e) => e.type === 'published'),
        1,
      );
    } finally {
      await sub.close();
      await hub.close();
      await origin.close();
      await pump;
    }
  });

  it('lets a lease expire', async () => {
    const { hub, url, log } = await startHub({ purgeIntervalMs: 50 });
    const sub = await startSubscriber(log, { hubUrl: url, topicUrl: TOPIC, leaseSeconds: 1, renewAt: 0.95 });
    try {
      const s = hub.subscriptions(TOPIC)[0]!;
      assert.equal(s.leaseSeconds, 1);
      await sub.close(); // no renewal
      await log.waitFor((e) => e.type === 'expired', 5000, 'expiry');
      assert.ok(Date.now() >= s.expiresAt);
      assert.equal(hub.subscriptions(TOPIC).length, 0);
      assert.equal(hub.publish(TOPIC, Buffer.from(payload())), 0);
    } finally {
      await sub.close();
      await hub.close();
    }
  });

  it('renews a lease before it expires', async () => {
    const { hub, url, log } = await startHub();
    const sub = await startSubscriber(log, { hubUrl: url, topicUrl: TOPIC, leaseSeconds: 1, renewAt: 0.5 });
    const events = new EventLog<NotificationEvent>();
    const pump = drain(sub.events(), events);
    try {
      const first = hub.subscriptions(TOPIC)[0]!;
      await events.waitFor((e) => e.type === 'connected' && e.reconnect, 5000, 'renewal');
      while (log.count((e) => e.type === 'subscribed') < 2) await delay(5);
      const renewed = hub.subscriptions(TOPIC)[0]!;
      assert.ok(renewed.expiresAt > first.expiresAt);
      assert.equal(renewed.createdAt, first.createdAt);
    } finally {
      await sub.close();
      await hub.close();
      await pump;
    }
  });

  it('unsubscribes with verification of intent', async () => {
    const { hub, url, log } = await startHub();
    const sub = await startSubscriber(log, { hubUrl: url, topicUrl: TOPIC });
    try {
      assert.equal(hub.subscriptions(TOPIC).length, 1);
      await sub.unsubscribe();
      await log.waitFor((e) => e.type === 'unsubscribed');
      assert.equal(hub.subscriptions(TOPIC).length, 0);
      assert.equal(hub.publish(TOPIC, Buffer.from(payload())), 0);
    } finally {
      await sub.close();
      await hub.close();
    }
  });

  it('keeps its subscriptions across a restart (same SQLite file)', async () => {
    await withTempDir(async (dir) => {
      const db = join(dir, 'hub.db');
      const first = await startHub({ db });
      const sub = await startSubscriber(first.log, { hubUrl: first.url, topicUrl: TOPIC });
      const events = new EventLog<NotificationEvent>();
      const pump = drain(sub.events(), events);
      try {
        await first.hub.close();
        const second = await startHub({ db });
        try {
          assert.equal(second.hub.subscriptions(TOPIC).length, 1);
          const publisher = new WebSubPublisher({ hubUrl: second.url });
          await publisher.publish(TOPIC, payload());
          await publisher.close();
          const got = await events.waitFor((e) => e.type === 'notification');
          assert.equal(got.type, 'notification');
          assert.equal(sub.stats.refused, 0, 'the secret survived the restart: the signature checks');
        } finally {
          await second.hub.close();
        }
      } finally {
        await sub.close();
        await pump;
      }
    });
  });

  it('retries then drops a hanging and a failing subscriber without delaying a good one', async () => {
    const hung: { res: unknown }[] = [];
    let failures = 0;
    const bad = await startServer((req, res) => {
      const u = new URL(req.url ?? '/', 'http://x');
      if (req.method === 'GET') {
        res.end(u.searchParams.get('hub.challenge') ?? '');
        return;
      }
      req.resume();
      if (u.pathname === '/hang')
        hung.push({ res }); // never answered
      else {
        failures++;
        res.writeHead(500).end('boom');
      }
    });
    const { hub, url, log } = await startHub({
      delivery: { timeoutMs: 1000, maxAttempts: 3, retryBaseMs: 20, retryMaxMs: 50, dropSubscriptionAfter: 1 },
    });
    try {
      for (const p of ['/hang', '/fail']) {
        await post(url, form({ 'hub.mode': 'subscribe', 'hub.topic': TOPIC, 'hub.callback': `${bad.url}${p}` }), FORM);
        await log.waitFor((e) => e.type === 'subscribed' && e.callback.endsWith(p));
      }
      const good = await startSubscriber(log, { hubUrl: url, topicUrl: TOPIC });
      const events = new EventLog<NotificationEvent>();
      const pump = drain(good.events(), events);
      try {
        assert.equal(hub.subscriptions(TOPIC).length, 3);
        const t0 = Date.now();
        assert.equal(hub.publish(TOPIC, Buffer.from(payload())), 3);
        await events.waitFor((e) => e.type === 'notification');
        const goodMs = Date.now() - t0;
        // The good subscriber got its delivery before the hanging one's first attempt even timed out.
        assert.equal(
          log.count((e) => e.type === 'retry' && e.callback.endsWith('/hang')),
          0,
        );
        assert.ok(goodMs < 1000, `good subscriber waited ${goodMs} ms`);
        await log.waitFor((e) => e.type === 'subscription-dropped' && e.callback.endsWith('/fail'), 8000);
        await log.waitFor((e) => e.type === 'subscription-dropped' && e.callback.endsWith('/hang'), 8000);
        assert.equal(failures, 3, 'three attempts, then dropped');
        assert.equal(
          log.count((e) => e.type === 'retry' && e.callback.endsWith('/hang')),
          2,
        );
        assert.deepEqual(
          hub.subscriptions(TOPIC).map((s) => s.callback),
          [good.callbackUrl],
        );
        // Later publishes still reach the good one.
        hub.publish(TOPIC, Buffer.from(payload(2)));
        await events.waitFor((e) => e.type === 'notification' && e.notification.changes.length === 2);
      } finally {
        await good.close();
        await pump;
      }
    } finally {
      await hub.close();
      await bad.close();
    }
  });

  it('drops a subscription whose callback answers 410 Gone', async () => {
    const cb = await startServer((req, res) => {
      const u = new URL(req.url ?? '/', 'http://x');
      if (req.method === 'GET') res.end(u.searchParams.get('hub.challenge') ?? '');
      else res.writeHead(410).end();
    });
    const { hub, url, log } = await startHub();
    try {
      await post(url, form({ 'hub.mode': 'subscribe', 'hub.topic': TOPIC, 'hub.callback': `${cb.url}/gone` }), FORM);
      await log.waitFor((e) => e.type === 'subscribed');
      hub.publish(TOPIC, Buffer.from(payload()));
      const dropped = await log.waitFor((e) => e.type === 'subscription-dropped');
      assert.ok(dropped.type === 'subscription-dropped' && /410/.test(dropped.reason));
      assert.equal(hub.subscriptions(TOPIC).length, 0);
    } finally {
      await hub.close();
      await cb.close();
    }
  });

  it('can be mounted under a path of another server', async () => {
    const log = new EventLog<HubEvent>();
    const hub = createHub({
      db: ':memory:',
      topics: [TOPIC],
      path: '/hub',
      onEvent: log.push,
      hubUrl: 'http://placeholder/hub',
    });
    const host = await startServer((req, res) => {
      if (!hub.handle(req, res)) res.writeHead(200).end('site');
    });
    try {
      const r = await request(`${host.url}/other`);
      assert.equal(await r.body.text(), 'site');
      const sub = await startSubscriber(log, { hubUrl: `${host.url}/hub`, topicUrl: TOPIC });
      assert.equal(hub.subscriptions(TOPIC).length, 1);
      await sub.close();
    } finally {
      await hub.close();
      await host.close();
    }
  });
});
