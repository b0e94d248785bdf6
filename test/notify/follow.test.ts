import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { findNotificationEndpoints } from '../../src/notify/follow.js';
import { SourceNotifier } from '../../src/notify/notifier.js';
import { createChangeNotifications } from '../../src/notify/payloads.js';
import { ChannelServer } from '../../src/notify/websocket.js';
import { readDocument } from '../../src/xml/index.js';
import { specExample } from './helpers.js';

const PATH = '/resourcesync/default/change-notification';
const CAP = 'http://source.test/resourcesync/default/capabilitylist.xml';

function _payload(...uris: string[]): string {
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

async function _listen(
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

describe('notification endpoints', () => {
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
