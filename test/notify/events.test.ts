import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { EventQueue, type NotificationEvent } from '../../src/notify/events.js';
import { readNotification } from '../../src/notify/payloads.js';
import { specExample } from './helpers.js';

describe('EventQueue', () => {
  it('bounds a slow consumer: drops the oldest notifications, queues one overflow event, pauses and resumes', async () => {
    const notification = await readNotification(specExample('notification-example-4-1.xml'));
    const q = new EventQueue('ws://x/ch', 10);
    let high = 0;
    let drained = 0;
    q.onHigh = () => high++;
    q.onDrain = () => drained++;
    q.push({ type: 'connected', channel: 'ws://x/ch', reconnect: false });
    for (let i = 0; i < 20; i++) q.push({ type: 'notification', notification, channel: 'ws://x/ch', receivedAt: i });
    assert.equal(q.size, 10);
    assert.equal(high, 1);
    const got: NotificationEvent[] = [];
    while (q.size > 0) got.push((await q.next()).value as NotificationEvent);
    assert.equal(drained, 1);
    assert.equal(got[0]!.type, 'connected', 'the connection event is kept');
    assert.equal(got.filter((e) => e.type === 'refused' && e.reason === 'overflow').length, 1);
    const kept = got
      .filter((e) => e.type === 'notification')
      .map((e) => (e.type === 'notification' ? e.receivedAt : -1));
    assert.deepEqual(
      kept,
      [...kept].sort((a, b) => a - b),
      'order kept',
    );
    assert.equal(kept.at(-1), 19, 'the newest survive');
    // A waiting consumer gets the next event directly; close ends the iteration.
    const waiting = q.next();
    q.push({ type: 'disconnected', channel: 'ws://x/ch', reason: 'x' });
    assert.equal((await waiting).value?.type, 'disconnected');
    const end = q.next();
    q.close();
    assert.equal((await end).done, true);
  });
});
