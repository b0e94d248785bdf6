import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface, type Interface } from 'node:readline';
import { describe, it } from 'node:test';
import { request } from 'undici';
import type { NotificationEvent } from '../../src/notify/events.js';
import { createChangeNotifications } from '../../src/notify/payloads.js';
import { WebSubPublisher } from '../../src/notify/websub-publisher.js';
import { WebSubSubscriber } from '../../src/notify/websub-subscriber.js';
import { cliCommand, drain, EventLog, repoRoot, withTempDir } from '../notify/helpers.js';

const TOPIC = 'http://source.test/resourcesync/default/change-notification';

/** Runs the CLI from source (tsx) or from the compiled tree, whichever this test file is part of. */
function startCli(args: string[]): { child: ChildProcess; lines: Interface; json: EventLog<Record<string, unknown>> } {
  const root = repoRoot();
  const argv = cliCommand();
  const child = spawn(process.execPath, [...argv, ...args], { stdio: ['ignore', 'pipe', 'pipe'], cwd: root });
  const lines = createInterface({ input: child.stdout! });
  const json = new EventLog<Record<string, unknown>>();
  lines.on('line', (l) => json.push(JSON.parse(l) as Record<string, unknown>));
  return { child, lines, json };
}

function exitOf(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    if (child.exitCode !== null) resolve(child.exitCode);
    else child.once('exit', (code) => resolve(code));
  });
}

describe('resourcesync hub', () => {
  it('serves, keeps subscriptions across a restart in --db, stops cleanly on SIGTERM', async () => {
    await withTempDir(async (dir) => {
      const db = join(dir, 'hub.db');
      const args = ['hub', '--port', '0', '--db', db, '--topic', TOPIC, '--json', '--min-lease', '1'];
      const first = startCli(args);
      let sub: WebSubSubscriber | undefined;
      try {
        const listening = await first.json.waitFor((e) => e.event === 'listening', 15_000, 'listening');
        const url = String(listening.url);
        assert.deepEqual(listening.topics, [TOPIC]);
        const res = await request(url);
        assert.equal(res.statusCode, 200);
        await res.body.text();
        sub = await WebSubSubscriber.start({ hubUrl: url, topicUrl: TOPIC });
        await first.json.waitFor((e) => e.type === 'subscribed');
        first.child.kill('SIGTERM');
        assert.equal(await exitOf(first.child), 0);

        // The restarted hub accepts the topic through a prefix instead.
        const second = startCli([
          'hub',
          '--port',
          '0',
          '--db',
          db,
          '--topic-prefix',
          'http://source.test/resourcesync/',
          '--json',
        ]);
        try {
          const again = await second.json.waitFor((e) => e.event === 'listening', 15_000, 'listening');
          const events = new EventLog<NotificationEvent>();
          const pump = drain(sub.events(), events);
          const publisher = new WebSubPublisher({ hubUrl: String(again.url) });
          const xml = createChangeNotifications(
            [{ uri: 'http://source.test/a', change: 'created', datetime: '2026-01-01T00:00:00Z', length: 1 }],
            {
              capabilityListUrl: 'http://source.test/cap.xml',
            },
          )[0]!;
          await publisher.publish(TOPIC, xml);
          await publisher.close();
          await events.waitFor((e) => e.type === 'notification');
          await sub.close();
          await pump;
        } finally {
          second.child.kill('SIGTERM');
          assert.equal(await exitOf(second.child), 0);
        }
      } finally {
        await sub?.close();
        if (first.child.exitCode === null) first.child.kill('SIGKILL');
      }
    });
  });

  it('exits 2 on bad arguments', async () => {
    const runs = [
      ['hub', '--port', 'x', '--topic', TOPIC, '--db', ':memory:'],
      ['hub', '--port', '0', '--db', ':memory:'],
      ['hub', '--port', '0', '--db', ':memory:', '--topic', 'not-a-url'],
      ['hub', '--port', '0', '--db', ':memory:', '--topic-prefix', 'ftp://x/'],
    ].map((args) => exitOf(startCli(args).child));
    assert.deepEqual(await Promise.all(runs), [2, 2, 2, 2]);
  });
});
