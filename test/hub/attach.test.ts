// The notification path end to end with the real Source: a directory Source served over HTTP, a WebSub hub
// mounted in the same server, WebSocket channels on its upgrades; a file change reaches a WebSocket client and a
// WebSub subscriber that found the hub and topic from the Change List's Link header.
import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { request } from 'undici';
import { attachSourceNotifications } from '../../src/hub/attach.js';
import type { NotificationEvent } from '../../src/notify/events.js';
import { parseLinkHeader } from '../../src/http/link.js';
import { ChannelClient } from '../../src/notify/websocket-client.js';
import { WebSubSubscriber } from '../../src/notify/websub-subscriber.js';
import { type DirectorySource, openDirectorySource } from '../../src/source/index.js';
import { createSourceServer } from '../../src/source/server.js';
import { drain, EventLog, withTempDir } from '../notify/helpers.js';

describe('attachSourceNotifications with a live directory Source', () => {
  it('pushes a recorded change over WebSocket and WebSub within the same moment', async () => {
    await withTempDir(async (dir) => {
      const col = join(dir, 'col');
      await mkdir(col);
      await writeFile(join(col, 'a.txt'), 'alpha');
      let resolveSite: (s: DirectorySource) => void = () => {};
      const sitePromise = new Promise<DirectorySource>((r) => {
        resolveSite = r;
      });
      const server = createSourceServer(sitePromise);
      const address = await server.listen(0, '127.0.0.1');
      const baseUrl = address.url;
      const site = await openDirectorySource({ dir: col, baseUrl, watch: false, stateDir: join(dir, 'state') });
      resolveSite(site);
      const errors: string[] = [];
      const wired = attachSourceNotifications({
        server: server.httpServer,
        baseUrl,
        site,
        hub: { db: join(dir, 'hub.db') },
        onError: (m) => errors.push(m),
      });
      const { notifier } = wired;
      const hub = wired.hub!;
      const hubUrl = wired.hubUrl;
      assert.equal(hubUrl, `${baseUrl}hub`);
      const urls = notifier.urls('default');
      const fw = new ChannelClient({ url: urls.frameworkChannel });
      const fwLog = new EventLog<NotificationEvent>();
      const fwPump = drain(fw.events(), fwLog);
      const ws = new ChannelClient({ url: urls.changeChannel });
      const wsLog = new EventLog<NotificationEvent>();
      const wsPump = drain(ws.events(), wsLog);
      let sub: WebSubSubscriber | undefined;
      let subPump: Promise<void> | undefined;
      const subLog = new EventLog<NotificationEvent>();
      try {
        // WebSub discovery from the Change List response (WebSub §4).
        const res = await request(urls.changeList);
        await res.body.text();
        const links = parseLinkHeader(res.headers.link as string | string[] | undefined);
        const hubFound = links.find((l) => l.rel.includes('hub'))?.href;
        const topic = links.find((l) => l.rel.includes('self'))?.href;
        assert.equal(hubFound, hubUrl);
        assert.equal(topic, urls.changeList);
        sub = await WebSubSubscriber.start({ hubUrl: hubFound!, topicUrl: topic! });
        subPump = drain(sub.events(), subLog);
        while (hub.subscriptions(topic!).length === 0) await new Promise((r) => setTimeout(r, 5));
        await wsLog.waitFor((e) => e.type === 'connected');
        while (notifier.channels!.channel(new URL(urls.changeChannel).pathname)?.clients !== 1) {
          await new Promise((r) => setTimeout(r, 5));
        }

        await writeFile(join(col, 'b.txt'), 'bravo');
        await site.scanPaths(['b.txt']);
        for (const log of [wsLog, subLog]) {
          const got = await log.waitFor((e) => e.type === 'notification');
          assert.ok(got.type === 'notification' && got.notification.kind === 'change-notification');
          assert.equal(got.notification.capabilityListUrl, urls.capabilityList);
          const c = got.notification.changes[0]!;
          assert.equal(c.uri, `${baseUrl}b.txt`);
          assert.equal(c.change, 'created');
          assert.equal(c.length, 5);
          assert.match(c.hash ?? '', /md5:[0-9a-f]{32}/);
        }
        // A framework notification names the Change List that received the change: while it is the only one,
        // changelist.xml is that Change List itself (a plain list, no index: N-section 5 never names an index).
        const framework = await fwLog.waitFor((e) => e.type === 'notification', 10_000, 'framework notification');
        assert.ok(framework.type === 'notification' && framework.notification.kind === 'framework-notification');
        const fc = framework.notification.changes[0]!;
        assert.equal(fc.capability, 'changelist');
        assert.equal(fc.change, 'updated');
        assert.equal(fc.uri, urls.changeList);
        assert.equal(fc.indexUrl, undefined);
        // The advertised entries for the Capability List (what documents.ts would add).
        assert.deepEqual(
          notifier.capabilityListEntries('default').map((e) => [e.loc, e.md?.capability, e.links[0]?.rel]),
          [
            [urls.changeChannel, 'change-notification', 'hub'],
            [urls.frameworkChannel, 'framework-notification', 'hub'],
          ],
        );
        assert.deepEqual(errors, []);
      } finally {
        await ws.close();
        await fw.close();
        await sub?.close();
        await wsPump;
        await fwPump;
        await subPump;
        await wired.close();
        await server.close();
        await site.close();
      }
    });
  });
});
