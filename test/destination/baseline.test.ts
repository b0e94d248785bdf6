import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Destination, type DestinationOptions } from '../../src/destination/destination.js';
import type { SyncEvent } from '../../src/destination/events.js';
import { DestinationState } from '../../src/destination/state.js';
import { StaticSource, localPathOf, makeResources, readTree, resourceListXml } from './static-source.js';

const AT = '2024-01-02T00:00:00Z';
const FAST_HTTP = {
  retries: 3,
  retryBaseDelayMs: 5,
  maxRetryDelayMs: 20,
  bodyIdleTimeoutMs: 1500,
  headersTimeoutMs: 3000,
};

function expectedTree(src: StaticSource, resources: ReturnType<typeof makeResources>): Map<string, Buffer> {
  const m = new Map<string, Buffer>();
  for (const r of resources) m.set(localPathOf(src, r.path), r.body);
  return new Map([...m.entries()].sort(([a], [b]) => (a < b ? -1 : 1)));
}

function sorted(m: Map<string, Buffer>): Map<string, Buffer> {
  return new Map([...m.entries()].sort(([a], [b]) => (a < b ? -1 : 1)));
}

describe('baseline', () => {
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
  async function newDir(): Promise<string> {
    const d = await mkdtemp(join(tmpdir(), 'rs-dest-'));
    dirs.push(d);
    return d;
  }
  function dest(extra: Partial<DestinationOptions> = {}): Destination {
    return new Destination({ url: src.url('/capabilitylist.xml'), dir, http: FAST_HTTP, durability: 'none', ...extra });
  }

  it('copies a Resource List Index with parts, records the watermark, then skips everything on a rerun', async () => {
    dir = await newDir();
    const resources = makeResources(40);
    src.publishResourceList(resources, AT, 3);
    src.publishCapabilities();
    const events: SyncEvent[] = [];
    const d = dest();
    d.on((e) => events.push(e));
    const s = await d.baseline();
    assert.equal(s.counts.created, 40);
    assert.equal(s.counts.failed, 0);
    assert.equal(s.complete, true);
    assert.equal(s.watermarkAfter, AT);
    assert.deepEqual(s.via, ['list']);
    assert.deepEqual(sorted(readTree(dir)), expectedTree(src, resources));
    assert.ok(events.some((e) => e.type === 'start'));
    assert.ok(events.some((e) => e.type === 'end'));
    assert.equal(events.filter((e) => e.type === 'resource' && e.action === 'created').length, 40);
    const st = DestinationState.open(dir, { readonly: true });
    try {
      assert.equal(st.getWatermark()?.at, AT);
      assert.equal(st.count(), 40);
      assert.equal(st.journal(), undefined);
    } finally {
      st.close();
    }
    const before = src.log.length;
    const s2 = await dest().baseline();
    assert.equal(s2.counts.skipped, 40);
    assert.equal(s2.counts.created + s2.counts.updated, 0);
    // Only documents were fetched, no resource.
    assert.ok(src.log.slice(before).every((p) => !p.startsWith('/res/')));
  });

  it('a new baseline retires local resources the Source no longer lists (kept, or removed with --delete)', async () => {
    dir = await newDir();
    const resources = makeResources(6, 20, 'retire');
    src.publishResourceList(resources, AT, 2);
    src.publishCapabilities();
    await dest().baseline();
    src.publishResourceList(resources.slice(0, 4), '2024-01-03T00:00:00Z', 1);
    const s = await dest().baseline();
    assert.equal(s.counts.skipped, 4);
    assert.equal(s.counts.deletionsRecorded, 2);
    assert.equal(readTree(dir).size, 6, 'files kept without --delete');
    const st = DestinationState.open(dir, { readonly: true });
    try {
      assert.equal(st.get(src.url('/res/r5.txt'))?.deleted, true);
      assert.equal(st.count(), 4);
    } finally {
      st.close();
    }
    src.publishResourceList(resources.slice(0, 3), '2024-01-04T00:00:00Z', 1);
    const s2 = await dest({ delete: true }).baseline();
    // r3 is retired now; r4 and r5, recorded as deleted before and kept, are removed too.
    assert.equal(s2.counts.deleted, 3);
    assert.deepEqual(
      [...readTree(dir).keys()].sort(),
      ['r0', 'r1', 'r2'].map((r) => localPathOf(src, `/res/${r}.txt`)).sort(),
    );
  });

  it('retries 500s and connection resets mid-body, and finishes', async () => {
    dir = await newDir();
    const resources = makeResources(20, 4096, 'faults');
    src.publishResourceList(resources, AT, 2);
    src.publishCapabilities();
    src.fault('/res/r3.txt', 'status-500', 2);
    src.fault('/res/r7.txt', 'reset-mid-body', 1);
    src.fault('/res/r11.txt', 'status-503', 1);
    src.fault('/resourcelist-2.xml', 'status-500', 1);
    const s = await dest().baseline();
    assert.equal(s.counts.failed, 0, JSON.stringify(s.failures));
    assert.equal(s.counts.created, 20);
    assert.deepEqual(sorted(readTree(dir)), expectedTree(src, resources));
    assert.ok((src.hits.get('/res/r3.txt') ?? 0) >= 3);
    assert.ok((src.hits.get('/res/r7.txt') ?? 0) >= 2);
  });

  it('reports a hash mismatch, installs nothing for it, keeps no watermark, and completes once the Source is fixed', async () => {
    dir = await newDir();
    const resources = makeResources(10, 100, 'mismatch');
    src.publishResourceList(resources, AT, 1);
    src.publishCapabilities();
    src.set('/res/r4.txt', Buffer.alloc(100, 'z')); // same length, other content
    const s = await dest().baseline();
    assert.equal(s.counts.failed, 1);
    assert.equal(s.failures[0]?.code, 'RS_HASH_MISMATCH');
    assert.equal(s.complete, false);
    assert.equal(s.watermarkAfter, undefined);
    const tree = readTree(dir);
    assert.equal(tree.has(localPathOf(src, '/res/r4.txt')), false);
    assert.equal(tree.size, 9);
    const st = DestinationState.open(dir, { readonly: true });
    try {
      assert.equal(st.getWatermark(), undefined);
      assert.equal(st.count(), 9);
      assert.equal(st.journal()?.op, 'baseline');
    } finally {
      st.close();
    }
    // Fixed: the next run (sync = baseline again, no watermark) fetches only the missing one.
    src.set('/res/r4.txt', resources[4]!.body);
    const hitsBefore = src.log.filter((p) => p.startsWith('/res/')).length;
    const s2 = await dest().sync();
    assert.equal(s2.operation, 'baseline');
    assert.equal(s2.counts.created, 1);
    assert.equal(s2.counts.skipped, 9);
    assert.equal(s2.complete, true);
    assert.equal(src.log.filter((p) => p.startsWith('/res/')).length - hitsBefore, 1);
    assert.deepEqual(sorted(readTree(dir)), expectedTree(src, resources));
  });

  it('times out a resource that stalls forever, reports it, and finishes the rest', async () => {
    dir = await newDir();
    const resources = makeResources(12, 200, 'stall');
    src.publishResourceList(resources, AT, 1);
    src.publishCapabilities();
    src.fault('/res/r5.txt', 'stall', 10);
    const s = await dest({ http: { ...FAST_HTTP, bodyIdleTimeoutMs: 300, retries: 0 } }).baseline();
    assert.equal(s.counts.failed, 1);
    assert.equal(s.failures[0]?.uri, src.url('/res/r5.txt'));
    assert.equal(s.failures[0]?.code, 'RS_TIMEOUT');
    assert.equal(s.counts.created, 11);
    src.clearFaults();
  });

  it('tries duplicate mirrors by pri before the loc', async () => {
    dir = await newDir();
    const body = Buffer.from('mirrored content\n');
    src.set('/mirror-a/m.txt', body);
    src.remove('/mirror-b/m.txt');
    const resources = [
      {
        path: '/res/m.txt',
        body,
        extra: `<rs:ln rel="duplicate" pri="2" href="${src.url('/mirror-a/m.txt')}"/><rs:ln rel="duplicate" pri="1" href="${src.url('/mirror-b/m.txt')}"/>`,
      },
    ];
    src.publishResourceList(resources, AT, 1, false);
    src.remove('/res/m.txt');
    src.publishCapabilities();
    const start = src.log.length;
    const s = await dest().baseline();
    assert.equal(s.counts.created, 1, JSON.stringify(s.failures));
    const order = src.log.slice(start).filter((p) => p.includes('m.txt'));
    assert.deepEqual(order, ['/mirror-b/m.txt', '/mirror-a/m.txt']);
    assert.deepEqual(readTree(dir).get(localPathOf(src, '/res/m.txt')), body);
  });

  it('refuses resources outside the Source authority unless allowed', async () => {
    dir = await newDir();
    const resources = makeResources(3, 10, 'auth');
    src.publishResourceList(resources, AT, 1);
    // Add an off-host entry by hand.
    const list = src.routes.get('/resourcelist-1.xml')!.body.toString();
    src.set(
      '/resourcelist-1.xml',
      list.replace('</urlset>', '<url><loc>http://elsewhere.invalid/x.txt</loc></url></urlset>'),
      'application/xml',
    );
    src.publishCapabilities();
    const s = await dest().baseline();
    assert.equal(s.counts.refused, 1);
    assert.equal(s.counts.created, 3);
    assert.equal(s.failures[0]?.code, 'RS_AUTHORITY');
    assert.equal(s.complete, true);
    // The same server under another name: refused, unless allowed.
    const port = new URL(src.base).port;
    const other = `http://localhost:${port}/res/r0.txt`;
    src.set(
      '/resourcelist-1.xml',
      list.replace(
        '</urlset>',
        `<url><loc>${other}</loc><rs:md length="${resources[0]!.body.length}"/></url></urlset>`,
      ),
      'application/xml',
    );
    const refused = await dest().baseline();
    assert.equal(refused.counts.refused, 1);
    const allowed = await dest({ allowHosts: [`localhost:${port}`] }).baseline();
    assert.equal(allowed.counts.refused, 0);
    assert.equal(allowed.counts.created, 1);
    assert.ok(readTree(dir).has(`localhost_${port}/res/r0.txt`));
  });

  it('picks a Capability List with --set when the Source has several, and says so when none is chosen', async () => {
    dir = await newDir();
    const NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/"';
    const setA = makeResources(2, 10, 'setA').map((r) => ({ ...r, path: r.path.replace('/res/', '/a/') }));
    const setB = makeResources(3, 10, 'setB').map((r) => ({ ...r, path: r.path.replace('/res/', '/b/') }));
    for (const [name, res] of [
      ['a', setA],
      ['b', setB],
    ] as const) {
      for (const r of res) src.set(r.path, r.body);
      src.set(`/${name}/resourcelist.xml`, resourceListXml(src.base, res, AT), 'application/xml');
      src.set(
        `/${name}/capabilitylist.xml`,
        `<urlset ${NS}><rs:ln rel="up" href="${src.url('/.well-known/resourcesync')}"/><rs:md capability="capabilitylist"/><url><loc>${src.url(`/${name}/resourcelist.xml`)}</loc><rs:md capability="resourcelist"/></url></urlset>`,
        'application/xml',
      );
    }
    src.set(
      '/.well-known/resourcesync',
      `<urlset ${NS}><rs:md capability="description"/>${['a', 'b']
        .map((n) => `<url><loc>${src.url(`/${n}/capabilitylist.xml`)}</loc><rs:md capability="capabilitylist"/></url>`)
        .join('')}</urlset>`,
      'application/xml',
    );
    await assert.rejects(
      new Destination({ url: src.url('/'), dir, http: FAST_HTTP }).baseline(),
      (e: Error & { code?: string }) => /--set/.test(e.message) && /a\/capabilitylist/.test(e.message),
    );
    const s = await new Destination({
      url: src.url('/'),
      dir,
      http: FAST_HTTP,
      set: 'b',
      durability: 'none',
    }).baseline();
    assert.equal(s.counts.created, 3);
    assert.deepEqual([...readTree(dir).keys()].sort(), setB.map((r) => localPathOf(src, r.path)).sort());
    src.publishCapabilities();
  });

  it('refuses a second writer on the same copy, and takes over a lock left by a dead process', async () => {
    dir = await newDir();
    src.publishResourceList(makeResources(2, 10, 'lock'), AT, 1);
    src.publishCapabilities();
    await dest().baseline();
    const lockPath = join(dir, '.resourcesync', 'lock');
    // A live process (the parent of this test runner) holds it.
    await writeFile(lockPath, `${process.ppid}\n`);
    await assert.rejects(
      dest().sync(),
      (e: Error & { code?: string }) => e.code === 'RS_CONFIG' && /pid/.test(e.message),
    );
    // Audits and dry runs do not write: no lock needed.
    assert.equal((await dest().audit()).inSync, true);
    // A dead process: taken over, and released at the end.
    await writeFile(lockPath, '999999999\n');
    const s = await dest().baseline();
    assert.equal(s.complete, true);
    assert.equal(existsSync(lockPath), false);
  });

  it('fails clearly when the document is not ResourceSync at all', async () => {
    dir = await newDir();
    src.set('/not-rs.html', '<html><body>hello</body></html>', 'text/html');
    src.set('/not-rs.xml', '<?xml version="1.0"?><rss version="2.0"><channel/></rss>', 'application/xml');
    // A Capability List whose Resource List is an RSS feed: named in the error.
    src.publishResourceList([], AT, 1);
    src.publishCapabilities();
    src.set('/resourcelist-index.xml', src.routes.get('/not-rs.xml')!.body, 'application/xml');
    await assert.rejects(dest().baseline(), (e: Error & { code?: string }) => {
      assert.equal(e.code, 'RS_NOT_RESOURCESYNC');
      assert.match(e.message, /resourcelist-index\.xml/);
      return true;
    });
    // A URL that is not ResourceSync, on a host with nothing to discover.
    src.remove('/.well-known/resourcesync');
    src.remove('/capabilitylist.xml');
    await assert.rejects(
      new Destination({ url: src.url('/not-rs.xml'), dir, http: FAST_HTTP }).baseline(),
      (e: Error & { code?: string }) => {
        assert.match(String(e.code), /RS_(NOT_RESOURCESYNC|DISCOVERY)/);
        assert.match(e.message, /not-rs\.xml/);
        return true;
      },
    );
  });

  it('dry run reports what it would fetch and writes nothing', async () => {
    dir = await newDir();
    const resources = makeResources(5, 10, 'dry');
    src.publishResourceList(resources, AT, 1);
    src.publishCapabilities();
    const before = src.log.length;
    const s = await dest({ dryRun: true }).baseline();
    assert.equal(s.counts.created, 5);
    assert.equal(readTree(dir).size, 0);
    assert.deepEqual(readTree(join(dir)).size, 0);
    assert.ok(src.log.slice(before).every((p) => !p.startsWith('/res/')));
  });
});
