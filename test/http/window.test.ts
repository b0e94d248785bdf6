import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { forEachConcurrent } from '../../src/destination/concurrent.js';
import { HttpClient, INITIAL_WINDOW } from '../../src/http/client.js';
import { OriginWindow } from '../../src/http/window.js';
import { killChildren, runCli } from '../cli/cli-child.js';
import { startServer, text } from '../destination/http-testserver.js';
import { countingSource } from './counting-source.js';

/**
 * Drives a window with a simulated Source (fake clock, always more requests waiting than slots): `latency(n)`
 * is how long a request takes with n in flight. Returns the limits seen at each completion.
 */
function simulate(w: OriginWindow, clock: { t: number }, latency: (inFlight: number) => number, ms: number): number[] {
  const pending: { end: number; slot: number }[] = [];
  const fill = (): void => {
    for (;;) {
      const slot = w.tryAcquire(); // a failed try marks the window as the limit, as waiting requests do
      if (slot === undefined) return;
      pending.push({ end: clock.t + latency(w.inFlight), slot });
    }
  };
  const limits: number[] = [];
  fill();
  while (clock.t < ms) {
    pending.sort((a, b) => a.end - b.end);
    const next = pending.shift() as { end: number; slot: number };
    clock.t = next.end;
    w.release(next.slot);
    limits.push(w.limit);
    fill();
  }
  return limits;
}

describe('OriginWindow (adaptive window)', () => {
  it('grows to its ceiling on a long round trip (latency does not grow with the window)', () => {
    const clock = { t: 0 };
    const w = new OriginWindow({ initial: 8, ceiling: 64, now: () => clock.t });
    const limits = simulate(w, clock, () => 100, 5_000);
    assert.equal(w.limit, 64, `limits ${[...new Set(limits)]}`);
  });

  it('stays at its start when the Source is CPU-bound (latency grows with the window: loopback)', () => {
    const clock = { t: 0 };
    const w = new OriginWindow({ initial: 8, ceiling: 64, now: () => clock.t });
    // 700 requests/s whatever the window: n in flight take n/700 s each.
    const limits = simulate(w, clock, (n) => (n * 1000) / 700, 20_000);
    assert.equal(w.limit, 8, `limits ${[...new Set(limits)]}`);
    // Probes are brief: most of the time at the start.
    assert.ok(limits.filter((l) => l === 8).length / limits.length > 0.8);
  });

  it('grows until the rate stops growing (a Source that serves at most 300/s at 100 ms)', () => {
    const clock = { t: 0 };
    const w = new OriginWindow({ initial: 8, ceiling: 64, now: () => clock.t });
    simulate(w, clock, (n) => Math.max(100, (n * 1000) / 300), 20_000);
    // 30 in flight fill it: 32 is the doubling that reaches it, 64 only queues.
    assert.ok(w.limit >= 30 && w.limit <= 40, `limit ${w.limit}`);
  });

  it('halves on 429/503, and pauses for Retry-After', () => {
    const clock = { t: 0 };
    const w = new OriginWindow({ initial: 8, ceiling: 64, now: () => clock.t });
    const seen: number[] = [];
    w.onLimit = (l) => seen.push(l);
    w.overloaded(undefined);
    assert.equal(w.limit, 4);
    w.overloaded(undefined);
    w.overloaded(undefined);
    w.overloaded(undefined);
    assert.equal(w.limit, 1);
    assert.deepEqual(seen, [4, 2, 1]);
    const w2 = new OriginWindow({ initial: 8, ceiling: 64 });
    w2.overloaded(60_000);
    assert.equal(w2.tryAcquire(), undefined, 'paused by Retry-After');
  });

  it('never exceeds a ceiling below its start', () => {
    const w = new OriginWindow({ initial: 8, ceiling: 2 });
    assert.equal(w.limit, 2);
    assert.notEqual(w.tryAcquire(), undefined);
    assert.notEqual(w.tryAcquire(), undefined);
    assert.equal(w.tryAcquire(), undefined);
  });

  it('forEachConcurrent follows a moving bound', async () => {
    let bound = 2;
    let running = 0;
    let max = 0;
    await forEachConcurrent(
      Array.from({ length: 40 }, (_, i) => i),
      () => bound,
      async (i) => {
        running++;
        max = Math.max(max, running);
        if (i === 10) bound = 6;
        await new Promise((r) => setTimeout(r, 5));
        running--;
      },
    );
    assert.equal(max, 6);
  });
});

describe('HttpClient adaptive window (real Source)', { timeout: 120_000 }, () => {
  const cleanup: (() => Promise<void>)[] = [];
  after(async () => {
    killChildren();
    for (const c of cleanup) await c();
  });

  it('a Source answering after 150 ms sees more than the first window of requests at once, and sync follows it', async () => {
    const src = await countingSource(600, 150);
    cleanup.push(() => src.close());
    const dir = await mkdtemp(join(tmpdir(), 'rs-window-'));
    cleanup.push(() => rm(dir, { recursive: true, force: true }));
    const r = runCli(['sync', src.url, dir, '--json', '--durability', 'none']);
    assert.equal(await r.exit, 0, r.stderr());
    // The destination's workers (16 at first) would hold it to 16 if they did not follow the window.
    assert.ok(src.seen.maxInFlight > 2 * INITIAL_WINDOW, `at most ${src.seen.maxInFlight} requests at once`);
  });

  it('a 503 with Retry-After halves the window and holds the origin back that long', async () => {
    let n = 0;
    const times: number[] = [];
    const s = await startServer((_req, res) => {
      times.push(Date.now());
      if (n++ === 0) {
        res.writeHead(503, { 'retry-after': '1' });
        res.end('busy');
      } else res.end('ok');
    });
    cleanup.push(() => s.close());
    const client = new HttpClient({ retryBaseDelayMs: 5 });
    cleanup.push(() => client.close());
    assert.equal(await text((await client.get(`${s.url}/a`)).body), 'ok');
    assert.equal(client.concurrency, INITIAL_WINDOW, 'halved: 4 in flight, 8 callers');
    assert.ok((times[1] as number) - (times[0] as number) >= 900, `retried after ${times[1]! - times[0]!} ms`);
  });

  it('the library client grows the window under enough callers, and reports its concurrency', async () => {
    const src = await countingSource(400, 150);
    cleanup.push(() => src.close());
    const client = new HttpClient();
    cleanup.push(() => client.close());
    assert.equal(client.concurrency, 2 * INITIAL_WINDOW);
    const base = src.url.replace('/resourcelist.xml', '');
    let most = 0;
    await forEachConcurrent(
      Array.from({ length: 400 }, (_, i) => i),
      () => client.concurrency,
      async (i) => {
        most = Math.max(most, client.concurrency);
        await text((await client.get(`${base}/res/r${i}.txt`)).body);
      },
    );
    assert.ok(most > 2 * INITIAL_WINDOW, `concurrency at most ${most}`);
    assert.ok(src.seen.maxInFlight > INITIAL_WINDOW, `at most ${src.seen.maxInFlight} requests at once`);
  });
});
