import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { HttpClient } from '../../src/http/client.js';
import { killChildren, runCli } from '../cli/cli-child.js';
import { type CountingSource, countingSource } from './counting-source.js';
import { text } from '../destination/http-testserver.js';

describe('politeness caps', { timeout: 120_000 }, () => {
  const cleanup: (() => Promise<void>)[] = [];
  after(async () => {
    killChildren();
    for (const c of cleanup) await c();
  });

  async function sync(src: CountingSource, flags: string[]): Promise<void> {
    const dir = await mkdtemp(join(tmpdir(), 'rs-polite-'));
    cleanup.push(() => rm(dir, { recursive: true, force: true }));
    const r = runCli(['sync', src.url, dir, '--json', '--durability', 'none', ...flags]);
    const code = await r.exit;
    assert.equal(code, 0, r.stderr());
  }

  it('sync --max-connections 2: the Source never sees more than 2 connections (it sees more without)', async () => {
    const src = await countingSource(60, 25);
    cleanup.push(() => src.close());
    await sync(src, []);
    assert.ok(src.seen.maxOpen > 2, `without the cap: ${src.seen.maxOpen} connections (the test needs more than 2)`);
    await src.close();

    // Over the adaptive window (default) and over a fixed --concurrency alike.
    for (const extra of [[], ['--concurrency', '32']]) {
      const capped = await countingSource(60, 25);
      cleanup.push(() => capped.close());
      await sync(capped, ['--max-connections', '2', ...extra]);
      const what = ['--max-connections 2', ...extra].join(' ');
      assert.ok(capped.seen.maxOpen <= 2, `${what}: the Source saw ${capped.seen.maxOpen} connections`);
      assert.ok(capped.seen.maxInFlight <= 2, `${what}: ${capped.seen.maxInFlight} requests at once`);
      assert.ok(capped.seen.maxOpen >= 1);
      await capped.close();
    }
  });

  it('sync --delay spaces every request to one host', async () => {
    const src = await countingSource(6, 0);
    cleanup.push(() => src.close());
    await sync(src, ['--delay', '60']);
    const starts = [...src.seen.starts].sort((a, b) => a - b);
    assert.ok(starts.length >= 7, `${starts.length} requests`); // the list, discovery's, and the 6 resources
    // Arrival times carry the loopback's and a loaded machine's jitter (a first request on a new connection
    // arrives later than it was sent; a stalled event loop sends two at once): the median gap is the delay, and so
    // is the average over the run. Without --delay the gaps are a few ms.
    const at = `arrivals ${starts.map((t) => t - starts[0]!)}`;
    const gaps = starts.slice(1).map((t, i) => t - (starts[i] as number));
    const median = [...gaps].sort((a, b) => a - b)[Math.floor(gaps.length / 2)] as number;
    assert.ok(median >= 50, `median gap ${median} ms; ${at}`);
    assert.ok(((starts.at(-1) as number) - (starts[0] as number)) / gaps.length >= 54, at);
  });

  it('maxConnections caps the library client over connectionsPerHost', async () => {
    const src = await countingSource(24, 20);
    cleanup.push(() => src.close());
    const client = new HttpClient({ connectionsPerHost: 8, maxConnections: 2 });
    cleanup.push(() => client.close());
    const base = src.url.replace('/resourcelist.xml', '');
    await Promise.all(
      Array.from({ length: 24 }, async (_, i) => text((await client.get(`${base}/res/r${i}.txt`)).body)),
    );
    assert.ok(src.seen.maxOpen <= 2, `maxConnections 2: ${src.seen.maxOpen} connections`);
    assert.equal(src.seen.maxInFlight, 2);
  });

  it('--help names --max-connections and --delay', async () => {
    const r = runCli(['sync', '--help']);
    assert.equal(await r.exit, 0);
    assert.match(r.stdout(), /--max-connections <n>/);
    assert.match(r.stdout(), /--delay <ms>/);
  });
});
