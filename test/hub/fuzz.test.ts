// Untrusted input: random forms and bodies to the hub and random deliveries to a subscriber never crash them or
// get a 5xx, and never create a subscription or a notification.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { request } from 'undici';
import { createHub } from '../../src/hub/index.js';
import type { NotificationEvent } from '../../src/notify/events.js';
import { signBody } from '../../src/notify/http-util.js';
import { WebSubSubscriber } from '../../src/notify/websub-subscriber.js';
import { bodyText, drain, EventLog, startServer } from '../notify/helpers.js';

const TOPIC = 'http://source.test/resourcesync/default/changelist.xml';

describe('untrusted input', () => {
  it('the hub answers random requests with 2xx/4xx and stores nothing unverified', async () => {
    const hub = createHub({ db: ':memory:', topics: [TOPIC], verifyTimeoutMs: 500 });
    const url = await hub.listen(0);
    try {
      const field = fc.oneof(
        fc.constantFrom('hub.mode', 'hub.topic', 'hub.callback', 'hub.lease_seconds', 'hub.secret', 'hub.url'),
        fc.string({ maxLength: 12 }),
      );
      const value = fc.oneof(
        fc.constantFrom(
          'subscribe',
          'unsubscribe',
          'publish',
          TOPIC,
          'http://127.0.0.1:9/x',
          'javascript:alert(1)',
          '-1',
          '99999999999',
        ),
        fc.string({ maxLength: 40 }),
      );
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.tuple(field, value), { maxLength: 8 }),
          fc.constantFrom('application/x-www-form-urlencoded', 'application/xml', 'text/plain', ''),
          fc.option(fc.string({ maxLength: 80 })),
          async (pairs, type, link) => {
            const body = new URLSearchParams(pairs).toString();
            const headers: Record<string, string> = {};
            if (type !== '') headers['content-type'] = type;
            if (link !== null) headers.link = link.replace(/[\r\n]/g, '');
            const res = await request(url, { method: 'POST', body, headers });
            await res.body.text();
            assert.ok(res.statusCode < 500, `status ${res.statusCode} for ${body}`);
          },
        ),
        { numRuns: 150 },
      );
      assert.equal(hub.subscriptions(TOPIC).length, 0);
    } finally {
      await hub.close();
    }
  });

  it('a subscriber acknowledges random deliveries without yielding a notification', async () => {
    const fakeHub = await startServer((req, res) => {
      void bodyText(req).then(async (text) => {
        res.writeHead(202).end();
        const f = new URLSearchParams(text);
        const u = new URL(f.get('hub.callback')!);
        u.searchParams.set('hub.mode', 'subscribe');
        u.searchParams.set('hub.topic', TOPIC);
        u.searchParams.set('hub.challenge', 'c');
        u.searchParams.set('hub.lease_seconds', '600');
        await (await request(u)).body.text();
      });
    });
    const sub = await WebSubSubscriber.start({ hubUrl: fakeHub.url, topicUrl: TOPIC, secret: 's' });
    const log = new EventLog<NotificationEvent>();
    const pump = drain(sub.events(), log);
    try {
      await fc.assert(
        fc.asyncProperty(fc.uint8Array({ maxLength: 600 }), fc.boolean(), async (bytes, signed) => {
          const headers: Record<string, string> = { 'content-type': 'application/xml' };
          if (signed) headers['x-hub-signature'] = signBody('s', bytes);
          const res = await request(sub.callbackUrl!, { method: 'POST', body: bytes, headers });
          await res.body.text();
          assert.ok(res.statusCode >= 200 && res.statusCode < 300);
        }),
        { numRuns: 150 },
      );
      assert.equal(
        log.count((e) => e.type === 'notification'),
        0,
      );
      assert.equal(sub.stats.refused, 150);
    } finally {
      await sub.close();
      await fakeHub.close();
      await pump;
    }
  });
});
