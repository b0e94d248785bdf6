import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { request } from 'undici';
import type { NotificationEvent } from '../../src/notify/events.js';
import { signBody } from '../../src/notify/http-util.js';
import { createChangeNotifications } from '../../src/notify/payloads.js';
import { WebSubSubscriber } from '../../src/notify/websub-subscriber.js';
import { bodyText, drain, EventLog, startServer } from './helpers.js';

const TOPIC = 'http://source.test/resourcesync/default/change-notification';
const CAP = 'http://source.test/resourcesync/default/capabilitylist.xml';
const SECRET = 'a-shared-secret';

function payload(): string {
  return createChangeNotifications(
    [{ uri: 'http://source.test/a', change: 'deleted', datetime: '2026-01-01T00:00:00Z' }],
    {
      capabilityListUrl: CAP,
    },
  )[0]!;
}

/** A minimal hub that verifies intent right away and lets the test POST deliveries itself. */
async function fakeHub() {
  const verifications = new EventLog<string>();
  const hub = await startServer((req, res) => {
    void bodyText(req).then(async (text) => {
      const f = new URLSearchParams(text);
      res.writeHead(202).end();
      const u = new URL(f.get('hub.callback')!);
      u.searchParams.set('hub.mode', f.get('hub.mode')!);
      u.searchParams.set('hub.topic', f.get('hub.topic')!);
      u.searchParams.set('hub.challenge', 'ch4llenge');
      u.searchParams.set('hub.lease_seconds', '3600');
      const r = await request(u);
      verifications.push(`${r.statusCode} ${await r.body.text()}`);
    });
  });
  return { hub, verifications };
}

async function deliver(url: string, body: string, headers: Record<string, string>): Promise<number> {
  const res = await request(url, { method: 'POST', body, headers: { 'content-type': 'application/xml', ...headers } });
  await res.body.text();
  return res.statusCode;
}

describe('WebSub subscriber', () => {
  it('accepts a signed delivery, ignores bad, missing and malformed ones (2xx, refused events)', async () => {
    const { hub, verifications } = await fakeHub();
    const logs: string[] = [];
    const sub = await WebSubSubscriber.start({
      hubUrl: hub.url,
      topicUrl: TOPIC,
      secret: SECRET,
      onLog: (m) => logs.push(m),
    });
    const events = new EventLog<NotificationEvent>();
    const pump = drain(sub.events(), events);
    try {
      assert.equal(await verifications.waitFor(() => true), '200 ch4llenge');
      await events.waitFor((e) => e.type === 'connected');
      const cb = sub.callbackUrl!;
      const body = payload();
      const link = `<${hub.url}>; rel="hub", <${TOPIC}>; rel="self"`;

      // A bad signature: acknowledged (WebSub §8) but ignored.
      assert.equal(await deliver(cb, body, { link, 'x-hub-signature': signBody('wrong-secret', body) }), 202);
      await events.waitFor((e) => e.type === 'refused' && e.reason === 'signature');
      // A signature of another body.
      assert.equal(await deliver(cb, body, { link, 'x-hub-signature': signBody(SECRET, `${body} `) }), 202);
      // Garbage signature header.
      assert.equal(await deliver(cb, body, { link, 'x-hub-signature': 'sha256=zz' }), 202);
      // No signature although a secret was given.
      assert.equal(await deliver(cb, body, { link }), 202);
      await events.waitFor((e) => e.type === 'refused' && e.reason === 'unsigned');
      // Signed, but not a notification payload.
      const bad = '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>x</loc>';
      assert.equal(await deliver(cb, bad, { link, 'x-hub-signature': signBody(SECRET, bad) }), 202);
      const malformed = await events.waitFor((e) => e.type === 'refused' && e.reason === 'malformed');
      assert.ok(malformed.type === 'refused' && malformed.error?.code === 'RS_NOTIFICATION');
      const index =
        '<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><sitemap><loc>http://x/</loc></sitemap></sitemapindex>';
      assert.equal(await deliver(cb, index, { link, 'x-hub-signature': signBody(SECRET, index) }), 202);
      assert.equal(
        events.count((e) => e.type === 'notification'),
        0,
      );

      // Finally a good one, with sha512 for variety.
      assert.equal(await deliver(cb, body, { link, 'x-hub-signature': signBody(SECRET, body, 'sha512') }), 202);
      const got = await events.waitFor((e) => e.type === 'notification');
      assert.ok(got.type === 'notification');
      assert.deepEqual(got.notification.changes, [
        { uri: 'http://source.test/a', change: 'deleted', datetime: '2026-01-01T00:00:00Z' },
      ]);
      assert.equal(sub.stats.refused, 6);
      assert.equal(sub.stats.received, 1);
      assert.equal(logs.length, 6);
    } finally {
      await sub.close();
      await hub.close();
      await pump;
    }
  });

  it('answers verification of intent only for what it asked, and refuses a delivery for another topic', async () => {
    const { hub } = await fakeHub();
    const sub = await WebSubSubscriber.start({ hubUrl: hub.url, topicUrl: TOPIC, secret: false });
    const events = new EventLog<NotificationEvent>();
    const pump = drain(sub.events(), events);
    try {
      const cb = new URL(sub.callbackUrl!);
      const probe = async (params: Record<string, string>, path = cb.pathname): Promise<number> => {
        const u = new URL(path, cb);
        for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
        const r = await request(u);
        await r.body.text();
        return r.statusCode;
      };
      assert.equal(
        await probe({ 'hub.mode': 'subscribe', 'hub.topic': 'http://evil.test/t', 'hub.challenge': 'c' }),
        404,
      );
      assert.equal(
        await probe({ 'hub.mode': 'unsubscribe', 'hub.topic': TOPIC, 'hub.challenge': 'c' }),
        404,
        'never asked to unsubscribe',
      );
      assert.equal(
        await probe({ 'hub.mode': 'subscribe', 'hub.topic': TOPIC, 'hub.challenge': 'c' }, '/websub/other'),
        404,
      );
      assert.equal(
        await probe({ 'hub.mode': 'subscribe', 'hub.topic': TOPIC, 'hub.challenge': 'c', 'hub.lease_seconds': '60' }),
        200,
      );

      const body = payload();
      assert.equal(await deliver(cb.href, body, { link: '<http://evil.test/t>; rel="self"' }), 202);
      await events.waitFor((e) => e.type === 'refused' && e.reason === 'malformed');
      assert.equal(await deliver(cb.href, body, {}), 202);
      await events.waitFor((e) => e.type === 'notification');
    } finally {
      await sub.close();
      await hub.close();
      await pump;
    }
  });

  it('fails subscribe() with RS_HTTP when the hub refuses, and RS_TIMEOUT when no verification comes', async () => {
    const refusing = await startServer((req, res) => {
      req.resume();
      res.writeHead(404).end('no such topic');
    });
    const silent = await startServer((req, res) => {
      req.resume();
      res.writeHead(202).end();
    });
    try {
      await assert.rejects(
        WebSubSubscriber.start({ hubUrl: refusing.url, topicUrl: TOPIC }),
        (e: Error & { code?: string }) => {
          assert.equal(e.code, 'RS_HTTP');
          assert.match(e.message, /404/);
          return true;
        },
      );
      await assert.rejects(WebSubSubscriber.start({ hubUrl: silent.url, topicUrl: TOPIC, verifyTimeoutMs: 200 }), {
        code: 'RS_TIMEOUT',
      });
    } finally {
      await refusing.close();
      await silent.close();
    }
  });
});
