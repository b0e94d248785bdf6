// Framework notifications end to end (N-§5, Table 2.1): a directory Source served over loopback, with
// `attachSourceNotifications`; a WebSocket client on the framework channel sees a new Change List `created` after
// rotation, the open one `updated`, a Resource Dump `created` once built, and a new set's Capability List `created`
// with the Source Description `updated`. Every payload validates.
import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { request } from 'undici';
import { validateDocument } from '../../src/core/validate.js';
import { attachSourceNotifications } from '../../src/hub/attach.js';
import type { NotificationEvent } from '../../src/notify/events.js';
import type { FrameworkChange } from '../../src/notify/payloads.js';
import { ChannelClient } from '../../src/notify/websocket-client.js';
import { type DirectorySource, openDirectorySource } from '../../src/source/index.js';
import { createSourceServer } from '../../src/source/server.js';
import { drain, EventLog, withTempDir } from '../notify/helpers.js';

describe('framework notifications of a live directory Source', () => {
  it('announces Change Lists (created on rotation, updated), a built Resource Dump and a new set', async () => {
    await withTempDir(async (dir) => {
      const col = join(dir, 'col');
      await mkdir(col);
      await writeFile(join(col, 'a.txt'), 'alpha');
      let resolveSite: (s: DirectorySource) => void = () => {};
      const server = createSourceServer(new Promise<DirectorySource>((r) => (resolveSite = r)));
      const { url: baseUrl } = await server.listen(0, '127.0.0.1');
      const site = await openDirectorySource({
        dir: col,
        baseUrl,
        watch: false,
        sets: 'top-level',
        stateDir: join(dir, 'state'),
        fsync: false,
        limits: { changeListMaxEntries: 2 },
      });
      resolveSite(site);
      await site.source.prepare();
      const errors: string[] = [];
      const wired = attachSourceNotifications({
        server: server.httpServer,
        baseUrl,
        site,
        frameworkIntervalMs: 50,
        onError: (m) => errors.push(m),
      });
      const urls = wired.notifier.urls('default');
      const fw = new ChannelClient({ url: urls.frameworkChannel });
      const log = new EventLog<NotificationEvent>();
      const pump = drain(fw.events(), log);
      const seen: FrameworkChange[] = [];
      const waitChange = async (pred: (c: FrameworkChange) => boolean, what: string): Promise<FrameworkChange> => {
        const e = await log.waitFor(
          (ev) => ev.type === 'notification' && ev.notification.changes.some((c) => pred(c as FrameworkChange)),
          10_000,
          what,
        );
        assert.ok(e.type === 'notification');
        return e.notification.changes.find((c) => pred(c as FrameworkChange)) as FrameworkChange;
      };
      try {
        await log.waitFor((e) => e.type === 'connected');
        while (wired.notifier.channels!.channel(new URL(urls.frameworkChannel).pathname)?.clients !== 1)
          await new Promise((r) => setTimeout(r, 5));
        const part = (n: number): string => urls.changeList.replace(/changelist\.xml$/, `changelist-000${n}.xml`);

        // Two changes fill the first Change List; the third opens a new one (rotation).
        for (const name of ['b', 'c', 'd']) {
          await writeFile(join(col, `${name}.txt`), name);
          await site.scanPaths([`${name}.txt`]);
        }
        // The closed list moves from changelist.xml (a plain list while alone) to changelist-0001.xml: both created.
        const created = await waitChange(
          (c) => c.capability === 'changelist' && c.change === 'created' && c.uri === part(2),
          'a created Change List',
        );
        assert.equal(created.uri, part(2));
        assert.equal(created.indexUrl, urls.changeList);
        assert.notEqual(created.uri, urls.changeList, 'never the index (N-section 5)');

        // One more change goes to the open list: updated.
        const before = log.events.length;
        await writeFile(join(col, 'e.txt'), 'echo');
        await site.scanPaths(['e.txt']);
        const updated = await waitChange(
          (c) => c.capability === 'changelist' && c.change === 'updated' && c.uri === part(2),
          'the open Change List updated',
        );
        assert.equal(updated.indexUrl, urls.changeList);
        assert.ok(log.events.length > before);

        // The Resource Dump is built on its first request: created.
        const res = await request(urls.capabilityList.replace(/capabilitylist\.xml$/, 'resourcedump.xml'));
        assert.equal(res.statusCode, 200);
        await res.body.text();
        const dump = await waitChange((c) => c.capability === 'resourcedump', 'a created Resource Dump');
        assert.equal(dump.change, 'created');
        assert.equal(dump.uri, urls.capabilityList.replace(/capabilitylist\.xml$/, 'resourcedump.xml'));
        assert.equal(dump.indexUrl, undefined);

        // A new top-level folder is a new set: its Capability List created, the Source Description updated.
        await mkdir(join(col, 'extra'));
        await writeFile(join(col, 'extra', 'x.txt'), 'x');
        await site.scanPaths(['extra']);
        const capList = await waitChange(
          (c) => c.capability === 'capabilitylist' && c.change === 'created',
          'a created Capability List',
        );
        assert.equal(capList.uri, wired.notifier.urls('extra').capabilityList);
        const description = await waitChange((c) => c.capability === 'description', 'the Source Description');
        assert.equal(description.change, 'updated');
        assert.equal(description.uri, site.sourceDescriptionUrl);

        // Every payload is a valid framework notification pointing up to the set's Capability List.
        for (const e of log.events) {
          if (e.type !== 'notification') continue;
          assert.equal(e.notification.kind, 'framework-notification');
          assert.equal(e.notification.capabilityListUrl, urls.capabilityList);
          assert.deepEqual(
            validateDocument(e.notification.document, { expectedKind: 'framework-notification' }).issues,
            [],
          );
          for (const c of e.notification.changes) seen.push(c as FrameworkChange);
        }
        // At most one entry per document per notification.
        for (const e of log.events)
          if (e.type === 'notification') {
            const locs = e.notification.changes.map((c) => c.uri);
            assert.equal(new Set(locs).size, locs.length);
          }
        assert.ok(seen.length >= 4);
        assert.deepEqual(errors, []);
      } finally {
        await fw.close();
        await pump;
        await wired.close();
        await server.close();
        await site.close();
      }
    });
  });
});
