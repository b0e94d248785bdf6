import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { validateDocument } from '../../src/core/validate.js';
import {
  createChangeNotifications,
  createFrameworkNotification,
  FRAMEWORK_CHANGE_TYPES,
  type FrameworkCapability,
  type ResourceChange,
  readNotification,
} from '../../src/notify/payloads.js';
import { channelEntries, channelUrls } from '../../src/notify/websocket.js';
import { readDocument } from '../../src/xml/index.js';
import { repoRoot } from './helpers.js';

const EXAMPLES = join(repoRoot(), 'test', 'fixtures', 'spec-examples');
const CAP = 'http://example.com/dataset1/capabilitylist.xml';

function change(i: number, kind: 'created' | 'updated' | 'deleted' = 'updated'): ResourceChange {
  return {
    uri: `http://example.com/res${i}`,
    change: kind,
    datetime: `2026-01-02T13:${String(i % 60).padStart(2, '0')}:00Z`,
    hash: 'md5:1584abdf8ebdc9802ac0c6a7402c03b6',
    length: 8876 + i,
    type: 'text/html',
  };
}

describe('notification payloads', () => {
  it('reads the spec examples 4.1, 5.1 and 5.2', async () => {
    const n41 = await readNotification(readFileSync(join(EXAMPLES, 'notification-example-4-1.xml')));
    assert.equal(n41.kind, 'change-notification');
    assert.equal(n41.capabilityListUrl, CAP);
    assert.deepEqual(n41.changes[0], {
      uri: 'http://example.com/res1',
      change: 'updated',
      lastmod: '2013-01-02T13:03:00Z',
      hash: 'md5:1584abdf8ebdc9802ac0c6a7402c03b6',
      length: 8876,
      type: 'text/html',
    });
    const n52 = await readNotification(readFileSync(join(EXAMPLES, 'notification-example-5-2.xml')));
    assert.equal(n52.kind, 'framework-notification');
    assert.deepEqual(n52.changes, [
      {
        uri: 'http://example.com/dataset1/resourcelist.xml',
        capability: 'resourcelist',
        change: 'created',
        indexUrl: 'http://example.com/dataset1/resourcelist-index.xml',
      },
      { uri: 'http://example.com/dataset1/resourcedump.xml', capability: 'resourcedump', change: 'created' },
      { uri: 'http://example.com/dataset1/changelist.xml', capability: 'changelist', change: 'updated' },
    ]);
    const n51 = await readNotification(readFileSync(join(EXAMPLES, 'notification-example-5-1.xml')));
    assert.equal(n51.changes.length, 1);
  });

  it('builds a change notification: up link, no root rs:md, no hash/length/type for deletes; it validates', async () => {
    const [xml, ...rest] = createChangeNotifications([change(1), change(2, 'deleted'), change(3, 'created')], {
      capabilityListUrl: CAP,
    });
    assert.equal(rest.length, 0);
    assert.match(xml!, /<rs:ln rel="up" href="http:\/\/example.com\/dataset1\/capabilitylist.xml"\/>/);
    assert.doesNotMatch(xml!, /<rs:md capability/);
    const doc = await readDocument(new TextEncoder().encode(xml));
    assert.equal(doc.md, undefined);
    assert.deepEqual(doc.entries[1]!.md, { change: 'deleted', datetime: '2026-01-02T13:02:00Z' });
    const result = validateDocument(doc, { expectedKind: 'change-notification' });
    assert.deepEqual(result.issues, []);
    assert.equal(result.kind, 'change-notification');
    const parsed = await readNotification(xml!);
    assert.deepEqual(parsed.changes, [
      change(1),
      { uri: 'http://example.com/res2', change: 'deleted', datetime: '2026-01-02T13:02:00Z' },
      change(3, 'created'),
    ]);
  });

  it('splits a burst into several notifications by count and by bytes, never into an index', async () => {
    const changes = Array.from({ length: 2500 }, (_, i) => change(i));
    const byCount = createChangeNotifications(changes, { capabilityListUrl: CAP, maxEntries: 1000 });
    assert.equal(byCount.length, 3);
    const byBytes = createChangeNotifications(changes, { capabilityListUrl: CAP, maxBytes: 64 * 1024 });
    assert.ok(byBytes.length > 3);
    const uris: string[] = [];
    for (const xml of byBytes) {
      assert.ok(Buffer.byteLength(xml) <= 64 * 1024, `payload of ${Buffer.byteLength(xml)} bytes`);
      assert.doesNotMatch(xml, /sitemapindex/);
      const n = await readNotification(xml);
      uris.push(...n.changes.map((c) => c.uri));
    }
    assert.deepEqual(
      uris,
      changes.map((c) => c.uri),
      'order kept, nothing lost or duplicated',
    );
    assert.throws(
      () =>
        createChangeNotifications([{ ...change(1), uri: `http://example.com/${'x'.repeat(5000)}` }], {
          capabilityListUrl: CAP,
          maxBytes: 2048,
        }),
      { code: 'RS_LIMIT' },
    );
  });

  it('round-trips any burst (property)', async () => {
    const arb = fc.array(
      fc.record({
        path: fc.stringMatching(/^[a-z0-9/_.-]{1,30}$/),
        change: fc.constantFrom('created' as const, 'updated' as const, 'deleted' as const),
        sec: fc.integer({ min: 0, max: 59 }),
        length: fc.nat(),
      }),
      { minLength: 1, maxLength: 40 },
    );
    await fc.assert(
      fc.asyncProperty(arb, fc.integer({ min: 1, max: 10 }), async (items, maxEntries) => {
        const changes: ResourceChange[] = items.map((x) => ({
          uri: `http://example.com/${encodeURI(x.path)}`,
          change: x.change,
          datetime: `2026-01-01T00:00:${String(x.sec).padStart(2, '0')}Z`,
          ...(x.change === 'deleted' ? {} : { length: x.length, type: 'text/plain' }),
        }));
        const payloads = createChangeNotifications(changes, { capabilityListUrl: CAP, maxEntries });
        assert.equal(payloads.length, Math.ceil(changes.length / maxEntries));
        const back: ResourceChange[] = [];
        for (const p of payloads) back.push(...(await readNotification(p)).changes);
        assert.deepEqual(back, changes);
      }),
      { numRuns: 50 },
    );
  });

  it('builds framework notifications per Table 2.1, with the index link; they validate', async () => {
    const xml = createFrameworkNotification(
      [
        {
          uri: 'http://example.com/dataset1/resourcelist-0002.xml',
          capability: 'resourcelist',
          change: 'created',
          indexUrl: 'http://example.com/dataset1/resourcelist-index.xml',
        },
        { uri: 'http://example.com/dataset1/changelist.xml', capability: 'changelist', change: 'updated' },
        { uri: 'http://example.com/.well-known/resourcesync', capability: 'description', change: 'updated' },
      ],
      CAP,
    );
    const doc = await readDocument(new TextEncoder().encode(xml));
    assert.deepEqual(validateDocument(doc, { expectedKind: 'framework-notification' }).issues, []);
    assert.equal(doc.entries[0]!.links[0]!.rel, 'index');
    const n = await readNotification(xml);
    assert.equal(n.kind, 'framework-notification');
    // Every combination Table 2.1 allows builds; the others are refused.
    for (const capability of Object.keys(FRAMEWORK_CHANGE_TYPES) as FrameworkCapability[]) {
      for (const kind of ['created', 'updated', 'deleted'] as const) {
        const build = (): string =>
          createFrameworkNotification([{ uri: 'http://example.com/x.xml', capability, change: kind }], CAP);
        if (FRAMEWORK_CHANGE_TYPES[capability].includes(kind)) assert.doesNotThrow(build);
        else assert.throws(build, { code: 'RS_INVALID_VALUE' }, `${capability} ${kind}`);
      }
    }
    assert.throws(() => createFrameworkNotification([], CAP), { code: 'RS_CONFIG' });
  });

  it('refuses malformed payloads with RS_NOTIFICATION', async () => {
    const ns = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/"';
    const bad = [
      'not xml at all',
      `<urlset ${ns}><url><loc>http://x/a</loc>`,
      `<!DOCTYPE x [<!ENTITY e "x">]><urlset ${ns}/>`,
      `<sitemapindex ${ns}><sitemap><loc>http://x/a.xml</loc></sitemap></sitemapindex>`,
      `<urlset ${ns}></urlset>`,
      `<urlset ${ns}><rs:md capability="changelist"/><url><loc>http://x/a</loc><rs:md change="updated"/></url></urlset>`,
      `<urlset ${ns}><url><loc>http://x/a</loc></url></urlset>`,
      `<urlset ${ns}><url><loc>http://x/a</loc><rs:md change="moved"/></url></urlset>`,
      `<urlset ${ns}><url><loc>http://x/a</loc><rs:md change="updated" length="many"/></url></urlset>`,
      `<urlset ${ns}><url><loc>http://x/a.xml</loc><rs:md change="created" capability="resourcelist"/></url><url><loc>http://x/b</loc><rs:md change="updated"/></url></urlset>`,
      `<urlset ${ns}><url><loc>http://x/a.xml</loc><rs:md change="created" capability="changedump-manifest"/></url></urlset>`,
    ];
    for (const text of bad) {
      await assert.rejects(readNotification(text, { url: 'ws://x/ch' }), (e: Error & { code?: string }) => {
        assert.equal(e.code, 'RS_NOTIFICATION', `${text}: ${e.message}`);
        assert.match(e.message, /ws:\/\/x\/ch/);
        return true;
      });
    }
    await assert.rejects(readNotification('x'.repeat(100), { maxBytes: 10 }), { code: 'RS_NOTIFICATION' });
  });

  it('advertises the WebSocket channels in a Capability List (Example 3.1) that validates', async () => {
    const urls = channelUrls('http://example.com/', 'dataset1');
    assert.deepEqual(urls, {
      change: 'ws://example.com/resourcesync/dataset1/change-notification',
      framework: 'ws://example.com/resourcesync/dataset1/framework-notification',
    });
    assert.equal(
      channelUrls('https://example.com/base', 'a b').change,
      'wss://example.com/base/resourcesync/a%20b/change-notification',
    );
    const capList = readDocument(readFileSync(join(EXAMPLES, 'notification-example-3-1.xml')));
    const doc = await capList;
    const ours = channelEntries(urls);
    assert.deepEqual(
      ours.map((e) => e.md?.capability),
      doc.entries.slice(-2).map((e) => e.md?.capability),
    );
    const result = validateDocument(
      { ...doc, entries: [...doc.entries.slice(0, -2), ...ours] },
      { expectedKind: 'capability-list' },
    );
    assert.deepEqual(
      result.issues.filter((i) => i.severity === 'error'),
      [],
    );
  });
});
