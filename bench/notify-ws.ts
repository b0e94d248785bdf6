// WebSocket broadcast latency: a ChannelServer publishes change notifications to N clients on loopback;
// latency from publish() to each client having parsed the payload. Server and clients share this process
// (one clock), so the figure includes the clients' parsing on the same event loop.
//
//   node --import tsx bench/notify-ws.ts [clients=10] [messages=200] [runs=5] [entries=10]
//
// Prints p50 / p99 per run (over clients x messages), then the median over runs.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { NotificationEvent } from '../src/notify/events.js';
import { createChangeNotifications } from '../src/notify/payloads.js';
import { ChannelServer } from '../src/notify/websocket.js';
import { ChannelClient } from '../src/notify/websocket-client.js';

const PATH = '/resourcesync/default/change-notification';

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}
function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

const nClients = Number(process.argv[2] ?? 10);
const messages = Number(process.argv[3] ?? 200);
const runs = Number(process.argv[4] ?? 5);
const entries = Number(process.argv[5] ?? 10);

const server = createServer();
const channels = new ChannelServer();
const channel = channels.addChannel(PATH);
channels.attach(server);
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
const url = `ws://127.0.0.1:${(server.address() as AddressInfo).port}${PATH}`;
const clients = Array.from({ length: nClients }, () => new ChannelClient({ url }));
const iterators = clients.map((c) => c.events());
for (const it of iterators) await it.next(); // 'connected'
while (channel.clients < nClients) await new Promise((r) => setTimeout(r, 5));

const payloads = Array.from(
  { length: messages },
  (_, m) =>
    createChangeNotifications(
      Array.from({ length: entries }, (_, i) => ({
        uri: `http://bench.test/m${m}/r${i}`,
        change: 'updated' as const,
        datetime: '2026-01-01T00:00:00Z',
        hash: 'md5:1584abdf8ebdc9802ac0c6a7402c03b6',
        length: 1000 + i,
        type: 'text/plain',
      })),
      { capabilityListUrl: 'http://bench.test/cap.xml' },
    )[0]!,
);

const p50s: number[] = [];
const p99s: number[] = [];
for (let run = 0; run < runs; run++) {
  const sentAt: number[] = [];
  const latencies: number[] = [];
  const done = Promise.all(
    iterators.map(async (it) => {
      for (let m = 0; m < messages; m++) {
        const r = await it.next();
        const e = r.value as NotificationEvent;
        if (r.done === true || e.type !== 'notification') throw new Error(`unexpected ${JSON.stringify(e)}`);
        latencies.push(performance.now() - sentAt[m]!);
      }
    }),
  );
  for (let m = 0; m < messages; m++) {
    sentAt.push(performance.now());
    channel.publish(payloads[m]!);
    await new Promise((r) => setTimeout(r, 2)); // ~500 notifications per second
  }
  await done;
  latencies.sort((a, b) => a - b);
  const p50 = percentile(latencies, 50);
  const p99 = percentile(latencies, 99);
  p50s.push(p50);
  p99s.push(p99);
  console.log(
    `run ${run + 1}: ${nClients} clients x ${messages} notifications  p50 ${p50.toFixed(2)} ms  p99 ${p99.toFixed(2)} ms  max ${latencies.at(-1)!.toFixed(2)} ms`,
  );
}
console.log(`median of ${runs} runs: p50 ${median(p50s).toFixed(2)} ms, p99 ${median(p99s).toFixed(2)} ms`);
await Promise.all(clients.map((c) => c.close()));
await channels.close();
server.close();
