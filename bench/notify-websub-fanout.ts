// WebSub fan-out: one publish to N subscribers on loopback; latency from the publisher's POST to each
// subscriber having verified the signature and parsed the payload. The hub runs in a child process (its own
// event loop), the publisher and the subscribers in this one (one clock for both ends).
//
//   node --import tsx bench/notify-websub-fanout.ts [subscribers=100] [runs=7] [entries=10]
//
// Prints p50 / p99 / max per run, then the median over runs. Target (issue 5): p99 <= 200 ms for 100.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { createHub } from '../src/hub/index.js';
import { createChangeNotifications } from '../src/notify/payloads.js';
import { WebSubPublisher } from '../src/notify/websub-publisher.js';
import { WebSubSubscriber } from '../src/notify/websub-subscriber.js';

const TOPIC = 'http://bench.test/resourcesync/default/change-notification';

async function hubMode(db: string): Promise<void> {
  const hub = createHub({ db, topics: [TOPIC], delivery: { maxConcurrent: 128 } });
  const url = await hub.listen(0);
  process.stdout.write(`${JSON.stringify({ url })}\n`);
  for await (const _ of createInterface({ input: process.stdin })) {
    // any line: nothing; stdin closing ends the hub
  }
  await hub.close();
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}
function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

async function main(): Promise<void> {
  const n = Number(process.argv[2] ?? 100);
  const runs = Number(process.argv[3] ?? 7);
  const entries = Number(process.argv[4] ?? 10);
  const dir = await mkdtemp(join(tmpdir(), 'rs-bench-hub-'));
  const child: ChildProcess = spawn(
    process.execPath,
    [...process.execArgv, fileURLToPath(import.meta.url), 'hub', join(dir, 'hub.db')],
    {
      stdio: ['pipe', 'pipe', 'inherit'],
    },
  );
  const lines = createInterface({ input: child.stdout! });
  const first = await new Promise<string>((resolve) => lines.once('line', resolve));
  const hubUrl = (JSON.parse(first) as { url: string }).url;

  const subs: WebSubSubscriber[] = [];
  for (let i = 0; i < n; i++) subs.push(await WebSubSubscriber.start({ hubUrl, topicUrl: TOPIC }));
  await new Promise((r) => setTimeout(r, 200)); // let the hub commit the last verifications
  const publisher = new WebSubPublisher({ hubUrl });
  const changes = Array.from({ length: entries }, (_, i) => ({
    uri: `http://bench.test/r/${i}`,
    change: 'updated' as const,
    datetime: '2026-01-01T00:00:00Z',
    hash: 'md5:1584abdf8ebdc9802ac0c6a7402c03b6',
    length: 1000 + i,
    type: 'text/plain',
  }));
  const payload = createChangeNotifications(changes, { capabilityListUrl: 'http://bench.test/cap.xml' })[0]!;
  const iterators = subs.map((s) => s.events());
  // Skip the 'connected' events.
  for (const it of iterators) await it.next();

  const p50s: number[] = [];
  const p99s: number[] = [];
  for (let run = 0; run < runs; run++) {
    const t0 = performance.now();
    const startedAt = Date.now();
    await publisher.publish(TOPIC, payload);
    const latencies = await Promise.all(
      iterators.map(async (it) => {
        const r = await it.next();
        if (r.done === true || r.value.type !== 'notification')
          throw new Error(`unexpected ${JSON.stringify(r.value)}`);
        return r.value.receivedAt - startedAt;
      }),
    );
    const wall = performance.now() - t0;
    latencies.sort((a, b) => a - b);
    const p50 = percentile(latencies, 50);
    const p99 = percentile(latencies, 99);
    p50s.push(p50);
    p99s.push(p99);
    console.log(
      `run ${run + 1}: ${n} subscribers  p50 ${p50} ms  p99 ${p99} ms  max ${latencies.at(-1)} ms  (all done in ${wall.toFixed(1)} ms)`,
    );
    await new Promise((r) => setTimeout(r, 100));
  }
  console.log(`median of ${runs} runs: p50 ${median(p50s)} ms, p99 ${median(p99s)} ms (target p99 <= 200 ms)`);
  await publisher.close();
  await Promise.all(subs.map((s) => s.close()));
  child.stdin!.end();
  await new Promise((r) => child.once('exit', r));
  await rm(dir, { recursive: true, force: true });
}

if (process.argv[2] === 'hub') await hubMode(process.argv[3]!);
else await main();
