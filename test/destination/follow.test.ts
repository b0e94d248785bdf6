// `sync --follow` against Sources that advertise no notification channel, or one that is down: the follower
// uses only advertised channels and polls (catch-up runs) at the --poll interval meanwhile, so changes made
// while following reach the copy.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import { runFollow } from '../../src/cli/follow.js';
import { StaticSource, localPathOf, makeResources } from './static-source.js';

const T0 = '2024-03-01T00:00:00Z';
const FAST_HTTP = { retries: 1, retryBaseDelayMs: 5, maxRetryDelayMs: 20 };

type Line = Record<string, unknown>;

async function waitFor(what: string, check: () => Promise<boolean>, lines: Line[], timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}; saw ${JSON.stringify(lines).slice(0, 3000)}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('sync --follow without a working notification channel', () => {
  let src: StaticSource;
  let dir: string;
  const dirs: string[] = [];
  before(async () => {
    src = await StaticSource.start();
  });
  after(async () => {
    await src.close();
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rs-follow-'));
    dirs.push(dir);
    for (const p of [...src.routes.keys()]) src.remove(p);
    src.clearFaults();
  });

  async function followAndChange(channel: string | undefined): Promise<Line[]> {
    const resources = makeResources(3, 32, 'base');
    src.publishResourceList(resources, T0, 1);
    src.publishChangeLists([{ from: T0, changes: [] }]);
    src.publishCapabilities();
    if (channel !== undefined) {
      const cap = src.routes.get('/capabilitylist.xml')!.body.toString();
      src.set(
        '/capabilitylist.xml',
        cap.replace(
          '</urlset>',
          `  <url><loc>${channel}</loc><rs:md capability="change-notification"/></url>\n</urlset>`,
        ),
        'application/xml',
      );
    }
    const lines: Line[] = [];
    const ac = new AbortController();
    const done = runFollow(src.url('/capabilitylist.xml'), dir, {
      destination: { durability: 'none', http: FAST_HTTP },
      json: true,
      signal: ac.signal,
      catchUpIntervalMs: 200,
      write: (l) => lines.push(JSON.parse(l) as Line),
      warn: (l) => lines.push({ stderr: l }),
    });
    let exit: number | undefined;
    void done.then((code) => {
      exit = code;
    });
    try {
      const local = (p: string): string => join(dir, localPathOf(src, p));
      const content = (p: string): Promise<string | undefined> => readFile(local(p), 'utf8').catch(() => undefined);
      await waitFor(
        'the first run',
        async () => lines.some((l) => l.event === 'following') || exit !== undefined,
        lines,
      );
      assert.equal(exit, undefined, `the follower stopped: ${JSON.stringify(lines)}`);
      // Changes made while following, announced by no notification.
      src.publishChangeLists([
        {
          from: T0,
          changes: [
            { path: '/res/new.txt', change: 'created', datetime: '2024-03-01T10:00:00Z', body: Buffer.from('new\n') },
            { path: '/res/r0.txt', change: 'updated', datetime: '2024-03-01T11:00:00Z', body: Buffer.from('r0 v2\n') },
          ],
        },
      ]);
      await waitFor(
        'the copy to catch up',
        async () => (await content('/res/new.txt')) === 'new\n' && (await content('/res/r0.txt')) === 'r0 v2\n',
        lines,
      );
      // No channel was invented: the follower only asked for what the Source published.
      assert.ok(!src.log.some((p) => p.endsWith('/change-notification')), src.log.join(' '));
      return lines;
    } finally {
      ac.abort();
      assert.equal(await done, 0);
    }
  }

  it('polls at --poll when the Capability List advertises no channel (and invents none)', async () => {
    const lines = await followAndChange(undefined);
    const following = lines.find((l) => l.event === 'following');
    assert.equal(following?.transport, 'poll');
  });

  it('polls at --poll while the advertised channel is down', async () => {
    await followAndChange(`${src.base.replace(/^http/, 'ws')}/no-such-channel`);
  });
});
