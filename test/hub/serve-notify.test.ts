// `resourcesync serve --hub` end to end: a file written into the served directory reaches a WebSocket client and
// a WebSub subscriber (hub and topic discovered from the Change List's Link header) as a change notification.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { describe, it } from 'node:test';
import { request } from 'undici';
import type { NotificationEvent } from '../../src/notify/events.js';
import { findNotificationEndpoints } from '../../src/notify/follow.js';
import { findLink } from '../../src/http/link.js';
import { validateDocument } from '../../src/core/validate.js';
import { readDocument } from '../../src/xml/index.js';
import { ChannelClient } from '../../src/notify/websocket-client.js';
import { WebSubSubscriber } from '../../src/notify/websub-subscriber.js';
import { cliCommand, drain, EventLog, repoRoot, withTempDir, freePort } from '../notify/helpers.js';

function startCli(args: string[]): { child: ChildProcess; json: EventLog<Record<string, unknown>> } {
  const root = repoRoot();
  const argv = cliCommand();
  const child = spawn(process.execPath, [...argv, ...args], { stdio: ['ignore', 'pipe', 'inherit'], cwd: root });
  const json = new EventLog<Record<string, unknown>>();
  createInterface({ input: child.stdout! }).on('line', (l) => {
    try {
      json.push(JSON.parse(l) as Record<string, unknown>);
    } catch {
      // not JSON: ignore
    }
  });
  return { child, json };
}

describe('resourcesync serve --hub', () => {
  it('pushes a file change over the WebSocket channel and through the WebSub hub', async () => {
    await withTempDir(async (dir) => {
      const col = join(dir, 'col');
      await mkdir(col);
      await writeFile(join(col, 'a.txt'), 'alpha');
      const { child, json } = startCli(['serve', col, '--port', '0', '--json', '--hub', '--state', join(dir, 'state')]);
      const ws: ChannelClient[] = [];
      let sub: WebSubSubscriber | undefined;
      const pumps: Promise<void>[] = [];
      try {
        const listening = await json.waitFor((e) => e.event === 'listening', 20_000, 'listening');
        const channels = listening.channels as string[];
        assert.equal(channels.length, 1);
        assert.match(channels[0]!, /^ws:\/\/127\.0\.0\.1:\d+\/resourcesync\/[^/]+\/change-notification$/);
        const hubUrl = String(listening.hub);
        const changeList = channels[0]!.replace(/^ws:/, 'http:').replace(/change-notification$/, 'changelist.xml');
        const res = await request(changeList);
        await res.body.text();
        assert.equal(findLink(res.headers.link as string | undefined, 'hub'), hubUrl);
        assert.equal(findLink(res.headers.link as string | undefined, 'self'), changeList);

        // The Capability List advertises the channels (Example 3.1) and the hub, and is valid.
        const capabilityList = changeList.replace(/changelist\.xml$/, 'capabilitylist.xml');
        const capRes = await request(capabilityList);
        const capDoc = await readDocument(new Uint8Array(await capRes.body.arrayBuffer()));
        assert.equal(findLink(capRes.headers.link as string | undefined, 'self'), capabilityList);
        assert.deepEqual(findNotificationEndpoints(capDoc, capabilityList), {
          changeChannel: channels[0],
          frameworkChannel: channels[0]!.replace(/change-notification$/, 'framework-notification'),
          hub: hubUrl,
          changeTopic: changeList,
          frameworkTopic: capabilityList,
        });
        assert.deepEqual(
          validateDocument(capDoc, { expectedKind: 'capability-list' }).issues.filter((i) => i.severity === 'error'),
          [],
        );

        const client = new ChannelClient({ url: channels[0]! });
        ws.push(client);
        const wsLog = new EventLog<NotificationEvent>();
        pumps.push(drain(client.events(), wsLog));
        sub = await WebSubSubscriber.start({ hubUrl, topicUrl: changeList });
        const subLog = new EventLog<NotificationEvent>();
        pumps.push(drain(sub.events(), subLog));
        await wsLog.waitFor((e) => e.type === 'connected');
        await subLog.waitFor((e) => e.type === 'connected');

        const t0 = Date.now();
        await writeFile(join(col, 'b.txt'), 'bravo');
        for (const log of [wsLog, subLog]) {
          const got = await log.waitFor(
            (e) => e.type === 'notification' && e.notification.changes.some((c) => c.uri.endsWith('/b.txt')),
            15_000,
            'notification of b.txt',
          );
          assert.ok(got.type === 'notification');
          const c = got.notification.changes.find((x) => x.uri.endsWith('/b.txt'))!;
          assert.equal(c.change, 'created');
          assert.ok(got.receivedAt - t0 < 15_000);
        }
      } finally {
        await Promise.all(ws.map((c) => c.close()));
        await sub?.close();
        await Promise.all(pumps);
        child.kill('SIGTERM');
        const code = await new Promise<number | null>((resolve) => {
          if (child.exitCode !== null) resolve(child.exitCode);
          else child.once('exit', (c) => resolve(c));
        });
        assert.equal(code, 0);
      }
    });
  });
  it('publishes to an external hub (hub --topic-prefix, serve --hub-url)', async () => {
    await withTempDir(async (dir) => {
      const col = join(dir, 'col');
      await mkdir(col);
      await writeFile(join(col, 'a.txt'), 'alpha');
      const port = await freePort();
      const base = `http://127.0.0.1:${port}/`;
      const hubCli = startCli([
        'hub',
        '--port',
        '0',
        '--db',
        join(dir, 'hub.db'),
        '--json',
        '--topic-prefix',
        `${base}resourcesync/`,
      ]);
      const hubListening = await hubCli.json.waitFor((e) => e.event === 'listening', 20_000, 'hub listening');
      const hubUrl = String(hubListening.url);
      const serve = startCli([
        'serve',
        col,
        '--port',
        String(port),
        '--json',
        '--hub-url',
        hubUrl,
        '--state',
        join(dir, 'state'),
      ]);
      let sub: WebSubSubscriber | undefined;
      let pump: Promise<void> | undefined;
      try {
        const listening = await serve.json.waitFor((e) => e.event === 'listening', 20_000, 'serve listening');
        assert.equal(listening.hub, hubUrl);
        const changeList = `${base}resourcesync/default/changelist.xml`;
        const res = await request(changeList);
        await res.body.text();
        assert.equal(findLink(res.headers.link as string | undefined, 'hub'), hubUrl);
        sub = await WebSubSubscriber.start({ hubUrl, topicUrl: changeList });
        const log = new EventLog<NotificationEvent>();
        pump = drain(sub.events(), log);
        await hubCli.json.waitFor((e) => e.type === 'subscribed', 10_000, 'subscribed');
        await writeFile(join(col, 'b.txt'), 'bravo');
        const got = await log.waitFor(
          (e) => e.type === 'notification' && e.notification.changes.some((c) => c.uri === `${base}b.txt`),
          15_000,
          'notification through the external hub',
        );
        assert.equal(got.type, 'notification');
      } finally {
        await sub?.close();
        await pump;
        for (const c of [serve.child, hubCli.child]) {
          const exited = new Promise<void>((resolve) => {
            if (c.exitCode !== null) resolve();
            else c.once('exit', () => resolve());
          });
          c.kill('SIGTERM');
          await exited;
        }
      }
    });
  });
});
