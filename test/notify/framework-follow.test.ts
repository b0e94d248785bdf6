// What a follower of one set does with framework notifications (assessFrameworkNotification), on the spec's
// examples and on payloads built by the notifier's builder; and the merged event stream of several receivers.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { EventQueue, mergeEvents, type NotificationEvent } from '../../src/notify/events.js';
import { assessFrameworkNotification } from '../../src/notify/follow.js';
import {
  createFrameworkNotification,
  type FrameworkChange,
  type FrameworkNotification,
  readNotification,
} from '../../src/notify/payloads.js';
import { specExample } from './helpers.js';

const CAP = 'http://example.com/dataset1/capabilitylist.xml';

async function framework(changes: FrameworkChange[], up = CAP): Promise<FrameworkNotification> {
  const n = await readNotification(createFrameworkNotification(changes, up));
  assert.equal(n.kind, 'framework-notification');
  return n;
}

describe('assessFrameworkNotification', () => {
  it('catches up for the spec examples 5.1 and 5.2 (our set), ignores them for another set', async () => {
    for (const name of ['notification-example-5-1.xml', 'notification-example-5-2.xml']) {
      const n = (await readNotification(specExample(name))) as FrameworkNotification;
      const ours = assessFrameworkNotification(n, CAP);
      assert.equal(ours.action, 'catch-up', name);
      assert.equal(ours.relevant.length, n.changes.length);
      const other = assessFrameworkNotification(n, 'http://example.com/dataset2/capabilitylist.xml');
      assert.equal(other.action, 'ignore', name);
      assert.match(other.reason, /another set/);
      assert.deepEqual(other.relevant, []);
    }
    const n52 = (await readNotification(specExample('notification-example-5-2.xml'))) as FrameworkNotification;
    assert.equal(
      assessFrameworkNotification(n52, CAP).reason,
      'resourcelist created http://example.com/dataset1/resourcelist.xml (+2 more)',
    );
  });

  it('Change Lists and Dumps created or updated, Resource Lists and Dumps created, the Source Description: catch up', async () => {
    const docs: FrameworkChange[] = [
      { uri: 'http://example.com/dataset1/changelist-2.xml', capability: 'changelist', change: 'created' },
      { uri: 'http://example.com/dataset1/changelist-2.xml', capability: 'changelist', change: 'updated' },
      { uri: 'http://example.com/dataset1/changedump.xml', capability: 'changedump', change: 'created' },
      { uri: 'http://example.com/dataset1/changedump.xml', capability: 'changedump', change: 'updated' },
      { uri: 'http://example.com/dataset1/resourcelist.xml', capability: 'resourcelist', change: 'created' },
      { uri: 'http://example.com/dataset1/resourcedump.xml', capability: 'resourcedump', change: 'created' },
      { uri: 'http://example.com/.well-known/resourcesync', capability: 'description', change: 'updated' },
      { uri: 'http://example.com/.well-known/resourcesync', capability: 'description', change: 'deleted' },
      { uri: CAP, capability: 'capabilitylist', change: 'updated' },
      { uri: CAP, capability: 'capabilitylist', change: 'created' },
    ];
    for (const d of docs) {
      const a = assessFrameworkNotification(await framework([d]), CAP);
      assert.equal(a.action, 'catch-up', JSON.stringify(d));
      assert.equal(a.reason, `${d.capability} ${d.change} ${d.uri}`);
    }
  });

  it("another set's Capability List (created or deleted, sent on every channel) is nothing for this set", async () => {
    const other = 'http://example.com/dataset2/capabilitylist.xml';
    for (const change of ['created', 'deleted'] as const) {
      const a = assessFrameworkNotification(
        await framework([{ uri: other, capability: 'capabilitylist', change }]),
        CAP,
      );
      assert.equal(a.action, 'ignore');
      assert.equal(a.reason, 'nothing of this set');
    }
  });

  it('our Capability List deleted: set-deleted, unless re-created later in the same payload', async () => {
    const del: FrameworkChange = { uri: CAP, capability: 'capabilitylist', change: 'deleted' };
    const a = assessFrameworkNotification(await framework([del]), CAP);
    assert.equal(a.action, 'set-deleted');
    assert.equal(a.reason, `capabilitylist deleted ${CAP}`);
    const withList = assessFrameworkNotification(
      await framework([
        { uri: 'http://example.com/dataset1/changelist.xml', capability: 'changelist', change: 'updated' },
        del,
      ]),
      CAP,
    );
    assert.equal(withList.action, 'set-deleted', 'the set is gone: its Change List does not matter');
    const recreated = assessFrameworkNotification(
      await framework([del, { uri: CAP, capability: 'capabilitylist', change: 'created' }]),
      CAP,
    );
    assert.equal(recreated.action, 'catch-up');
  });

  it('compares URLs as URLs; a payload without `up` is taken as this set’s', async () => {
    const n = await framework(
      [{ uri: 'http://example.com/dataset1/changelist.xml', capability: 'changelist', change: 'updated' }],
      'HTTP://EXAMPLE.COM:80/dataset1/capabilitylist.xml',
    );
    assert.equal(assessFrameworkNotification(n, CAP).action, 'catch-up');
    const noUp: FrameworkNotification = { ...n, capabilityListUrl: undefined };
    assert.equal(assessFrameworkNotification(noUp, CAP).action, 'catch-up');
  });
});

function connected(channel: string): NotificationEvent {
  return { type: 'connected', channel, reconnect: false };
}

describe('mergeEvents', () => {
  it("keeps each source's order, interleaves by arrival, ends when every source ended", async () => {
    const a = new EventQueue('a');
    const b = new EventQueue('b');
    const merged = mergeEvents([a.iterator(), b.iterator()]);
    a.push(connected('a1'));
    b.push(connected('b1'));
    a.push(connected('a2'));
    const first = [await merged.next(), await merged.next(), await merged.next()].map((r) => r.value?.channel);
    assert.deepEqual(
      first.filter((c) => c?.startsWith('a')),
      ['a1', 'a2'],
    );
    assert.ok(first.includes('b1'));
    a.close();
    b.push(connected('b2'));
    assert.equal((await merged.next()).value?.channel, 'b2');
    const pending = merged.next();
    b.close();
    assert.equal((await pending).done, true);
  });

  it('stops pulling while its queue is above half its bound (memory bound), and loses nothing', async () => {
    const a = new EventQueue('a', 100_000);
    for (let i = 0; i < 1000; i++) a.push(connected(`a${i}`));
    a.close();
    const merged = mergeEvents([a.iterator()], 20);
    await new Promise((r) => setTimeout(r, 20));
    assert.ok(a.size >= 1000 - 12, `the source keeps what the merge does not take: ${a.size} left`);
    const got: string[] = [];
    for await (const e of merged) got.push(e.channel);
    assert.equal(got.length, 1000);
    assert.deepEqual(got.slice(0, 3), ['a0', 'a1', 'a2']);
    assert.equal(got.at(-1), 'a999');
  });

  it('with no sources, ends at once', async () => {
    assert.equal((await mergeEvents([]).next()).done, true);
  });
});
