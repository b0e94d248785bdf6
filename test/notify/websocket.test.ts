import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import WebSocket from 'ws';
import type { NotificationEvent } from '../../src/notify/events.js';
import { createChangeNotifications } from '../../src/notify/payloads.js';
import {
  CLOSE_TOO_SLOW,
  type ChannelEvent,
  ChannelServer,
  type ChannelServerOptions,
  TOO_SLOW_REASON,
} from '../../src/notify/websocket.js';
import { ChannelClient } from '../../src/notify/websocket-client.js';
import { drain, EventLog } from './helpers.js';

const PATH = '/resourcesync/default/change-notification';
const CAP = 'http://source.test/resourcesync/default/capabilitylist.xml';

function payload(tag: string, entries = 1): string {
  const changes = Array.from({ length: entries }, (_, i) => ({
    uri: `http://source.test/${tag}/${i}`,
    change: 'updated' as const,
    datetime: '2026-01-01T00:00:00Z',
    length: i,
    type: 'text/plain',
  }));
  return createChangeNotifications(changes, { capabilityListUrl: CAP, maxEntries: 50_000, maxBytes: 50_000_000 })[0]!;
}

async function startChannels(
  options: ChannelServerOptions = {},
  port = 0,
): Promise<{
  server: Server;
  channels: ChannelServer;
  url: string;
  log: EventLog<ChannelEvent>;
  stop(): Promise<void>;
}> {
  const log = new EventLog<ChannelEvent>();
  const server = createServer((_req, res) => res.writeHead(200).end('ok'));
  const channels = new ChannelServer({ onEvent: log.push, ...options });
  channels.addChannel(PATH);
  channels.attach(server);
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', () => resolve()));
  const { port: p } = server.address() as AddressInfo;
  return {
    server,
    channels,
    log,
    url: `ws://127.0.0.1:${p}${PATH}`,
    stop: async () => {
      await channels.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function uris(e: NotificationEvent): string[] {
  return e.type === 'notification' ? e.notification.changes.map((c) => c.uri) : [];
}

describe('WebSocket channels', () => {
  it('broadcasts each payload to every client, in order, and parses it', async () => {
    const s = await startChannels();
    const clients = [0, 1, 2].map(() => new ChannelClient({ url: s.url }));
    const logs = clients.map(() => new EventLog<NotificationEvent>());
    const pumps = clients.map((c, i) => drain(c.events(), logs[i]!));
    try {
      await Promise.all(logs.map((l) => l.waitFor((e) => e.type === 'connected' && !e.reconnect)));
      await s.log.waitFor((e) => e.type === 'open' && e.clients === 3);
      const ch = s.channels.channel(PATH)!;
      assert.equal(ch.clients, 3);
      for (let i = 0; i < 5; i++) assert.equal(ch.publish(payload(`p${i}`)), 3);
      for (const log of logs) {
        await log.waitFor((e) => uris(e)[0] === 'http://source.test/p4/0');
        assert.deepEqual(
          log.events.filter((e) => e.type === 'notification').map((e) => uris(e)[0]),
          [0, 1, 2, 3, 4].map((i) => `http://source.test/p${i}/0`),
        );
      }
      // A malformed frame is refused and reported; the next good one still arrives.
      ch.publish('<urlset><oops>');
      ch.publish(payload('after'));
      for (const log of logs) {
        await log.waitFor((e) => e.type === 'refused' && e.reason === 'malformed');
        await log.waitFor((e) => uris(e)[0] === 'http://source.test/after/0');
      }
    } finally {
      await Promise.all(clients.map((c) => c.close()));
      await Promise.all(pumps);
      await s.stop();
    }
  });

  it('closes a slow consumer with 4000 and a reason while the others keep receiving everything', async () => {
    const s = await startChannels({ maxBufferedBytes: 256 * 1024, closeGraceMs: 20_000 });
    const good = new ChannelClient({ url: s.url });
    const goodLog = new EventLog<NotificationEvent>();
    const pump = drain(good.events(), goodLog);
    const slow = new WebSocket(s.url);
    const slowClosed = new Promise<{ code: number; reason: string }>((resolve) => {
      slow.on('close', (code, reason) => resolve({ code, reason: reason.toString() }));
    });
    try {
      await new Promise<void>((resolve) => slow.once('open', () => resolve()));
      slow.pause(); // stops reading: the kernel buffers fill, then the server's backlog grows
      await goodLog.waitFor((e) => e.type === 'connected');
      await s.log.waitFor((e) => e.type === 'open' && e.clients === 2);
      const ch = s.channels.channel(PATH)!;
      const big = payload('big', 400); // ~40 KB
      let published = 0;
      while (s.log.count((e) => e.type === 'slow-consumer') === 0 && published < 2000) {
        ch.publish(big);
        published++;
        await new Promise((resolve) => setImmediate(resolve));
        // Pace on the good client (it must not fall behind itself on a loaded machine); the slow one reads nothing.
        while (goodLog.count((e) => e.type === 'notification') < published - 8)
          await new Promise((r) => setTimeout(r, 1));
      }
      assert.equal(s.channels.stats.slowClosed, 1, `no slow consumer detected after ${published} publishes`);
      assert.equal(ch.clients, 1, 'only the good client is left');
      ch.publish(payload('last'));
      slow.resume(); // read what was queued, then the close frame
      const closed = await slowClosed;
      assert.equal(closed.code, CLOSE_TOO_SLOW);
      assert.equal(closed.reason, TOO_SLOW_REASON);
      await goodLog.waitFor((e) => uris(e)[0] === 'http://source.test/last/0', 20_000, 'the last notification');
      assert.equal(
        goodLog.count((e) => e.type === 'notification'),
        published + 1,
        'the good client missed nothing',
      );
      assert.equal(
        goodLog.count((e) => e.type === 'disconnected'),
        0,
      );
    } finally {
      slow.terminate();
      await good.close();
      await pump;
      await s.stop();
    }
  });

  it('terminates a peer that does not answer pings', async () => {
    const s = await startChannels({ pingIntervalMs: 50 });
    const mute = new WebSocket(s.url);
    try {
      await new Promise<void>((resolve) => mute.once('open', () => resolve()));
      mute.pause(); // never reads the pings, so never answers them
      await s.log.waitFor((e) => e.type === 'dead-peer');
      assert.equal(s.channels.channel(PATH)!.clients, 0);
    } finally {
      mute.terminate();
      await s.stop();
    }
  });

  it('refuses upgrades on other paths', async () => {
    const s = await startChannels();
    try {
      const other = new WebSocket(s.url.replace('change-notification', 'nope'));
      const err = await new Promise<Error>((resolve) => other.once('error', resolve));
      assert.match(err.message, /404/);
    } finally {
      await s.stop();
    }
  });

  it('reconnects with backoff after a server restart and reports it so the consumer can catch up', async () => {
    const first = await startChannels();
    const port = Number(new URL(first.url).port);
    const client = new ChannelClient({ url: first.url, minDelayMs: 20, maxDelayMs: 200 });
    const log = new EventLog<NotificationEvent>();
    const pump = drain(client.events(), log);
    let second: Awaited<ReturnType<typeof startChannels>> | undefined;
    try {
      await log.waitFor((e) => e.type === 'connected');
      await first.log.waitFor((e) => e.type === 'open');
      first.channels.channel(PATH)!.publish(payload('before'));
      await log.waitFor((e) => uris(e)[0] === 'http://source.test/before/0');
      await first.stop();
      const gone = await log.waitFor((e) => e.type === 'disconnected');
      assert.ok(gone.type === 'disconnected' && gone.code === 1001);
      second = await startChannels({}, port);
      const back = await log.waitFor((e) => e.type === 'connected' && e.reconnect, 10_000, 'reconnection');
      assert.ok(back.type === 'connected');
      await second.log.waitFor((e) => e.type === 'open');
      second.channels.channel(PATH)!.publish(payload('after'));
      await log.waitFor((e) => uris(e)[0] === 'http://source.test/after/0');
      assert.ok(client.stats.connects >= 2);
    } finally {
      await client.close();
      await pump;
      await second?.stop();
    }
  });
});
