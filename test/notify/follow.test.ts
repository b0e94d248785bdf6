import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { findNotificationEndpoints, followNotifications } from '../../src/notify/follow.js';
import { SourceNotifier } from '../../src/notify/notifier.js';
import { createChangeNotifications, type ResourceChange } from '../../src/notify/payloads.js';
import { ChannelServer } from '../../src/notify/websocket.js';
import { ChannelClient } from '../../src/notify/websocket-client.js';
import { readDocument } from '../../src/xml/index.js';
import { EventLog, specExample } from './helpers.js';

const PATH = '/resourcesync/default/change-notification';
const CAP = 'http://source.test/resourcesync/default/capabilitylist.xml';

function payload(...uris: string[]): string {
  return createChangeNotifications(
    uris.map((u) => ({
      uri: `http://source.test/${u}`,
      change: 'updated' as const,
      datetime: '2026-01-01T00:00:00Z',
      length: 1,
    })),
    { capabilityListUrl: CAP },
  )[0]!;
}

async function listen(
  port = 0,
): Promise<{ server: Server; channels: ChannelServer; port: number; stop(): Promise<void> }> {
  const server = createServer();
  const channels = new ChannelServer();
  channels.addChannel(PATH);
  channels.attach(server);
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', () => resolve()));
  return {
    server,
    channels,
    port: (server.address() as AddressInfo).port,
    stop: async () => {
      await channels.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('followNotifications', () => {
  it('catches up on connect, reconnect and refusal, applies in order, skips duplicates, stops on abort', async () => {
    let s = await listen();
    const port = s.port;
    const client = new ChannelClient({ url: `ws://127.0.0.1:${port}${PATH}`, minDelayMs: 20, maxDelayMs: 100 });
    const catchUps = new EventLog<string>();
    const applied = new EventLog<string>();
    const ac = new AbortController();
    const done = followNotifications({
      events: client.events(),
      signal: ac.signal,
      catchUp: async (reason) => {
        await new Promise((r) => setTimeout(r, 20)); // a catch-up takes time; nothing overlaps it
        catchUps.push(reason);
      },
      apply: async (changes: readonly ResourceChange[]) => {
        for (const c of changes) applied.push(c.uri);
      },
    });
    try {
      await catchUps.waitFor((r) => r === 'connected');
      while (s.channels.channel(PATH)!.clients === 0) await new Promise((r) => setTimeout(r, 5));
      const ch = s.channels.channel(PATH)!;
      ch.publish(payload('a', 'b'));
      ch.publish(payload('b', 'c')); // b is a duplicate
      await applied.waitFor((u) => u.endsWith('/c'));
      assert.deepEqual(
        applied.events.map((u) => u.slice(-1)),
        ['a', 'b', 'c'],
      );
      ch.publish('<not a payload');
      await catchUps.waitFor((r) => r.includes('refused'));
      await s.stop();
      s = await listen(port);
      await catchUps.waitFor((r) => r === 'reconnected', 10_000);
      while (s.channels.channel(PATH)!.clients === 0) await new Promise((r) => setTimeout(r, 5));
      s.channels.channel(PATH)!.publish(payload('a'));
      await applied.waitFor((u) => applied.events.length === 4 && u.endsWith('/a'));
      ac.abort();
      const stats = await done;
      assert.equal(stats.duplicates, 1);
      assert.equal(stats.applied, 4, 'after a catch-up a change is applied again (the catch-up forgot nothing older)');
      assert.equal(stats.catchUps, 3);
    } finally {
      ac.abort();
      await client.close();
      await done;
      await s.stop();
    }
  });

  it('finds the notification endpoints in a Capability List', async () => {
    const ex = await readDocument(specExample('notification-example-3-1.xml'));
    assert.deepEqual(findNotificationEndpoints(ex, 'http://example.com/dataset1/capabilitylist.xml'), {
      changeChannel: 'ws://example.com/channels/dataset1/change_notification_channel',
      frameworkChannel: 'ws://example.com/channels/dataset1/framework_notification_channel',
    });
    const notifier = new SourceNotifier({ baseUrl: 'http://example.com/', hubUrl: 'http://hub.example.com/' });
    try {
      const urls = notifier.urls('set1');
      const doc = {
        links: notifier.hubLinks(),
        entries: [
          {
            element: 'url' as const,
            loc: urls.changeList,
            md: { capability: 'changelist' },
            links: notifier.hubLinks(),
          },
          ...notifier.capabilityListEntries('set1'),
        ],
      };
      assert.deepEqual(findNotificationEndpoints(doc, urls.capabilityList), {
        changeChannel: 'ws://example.com/resourcesync/set1/change-notification',
        frameworkChannel: 'ws://example.com/resourcesync/set1/framework-notification',
        hub: 'http://hub.example.com/',
        changeTopic: 'http://example.com/resourcesync/set1/changelist.xml',
        frameworkTopic: 'http://example.com/resourcesync/set1/capabilitylist.xml',
      });
      assert.equal(notifier.isTopic(urls.changeList), true);
      assert.equal(notifier.isTopic('http://example.com/resourcesync/set1/resourcelist.xml'), false);
      assert.equal(notifier.isTopic('http://other.example/resourcesync/set1/changelist.xml'), false);
      assert.equal(
        notifier.linkHeader('/resourcesync/set1/capabilitylist.xml'),
        `<http://hub.example.com/>; rel="hub", <${urls.capabilityList}>; rel="self"`,
      );
      assert.equal(notifier.linkHeader('/a.txt'), undefined);
    } finally {
      await notifier.close();
    }
  });
});
