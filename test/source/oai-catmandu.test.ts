/**
 * The OAI-PMH bridge against a real, independent OAI-PMH 2.0 provider: Debian's Catmandu OAI provider
 * (Dancer::Plugin::Catmandu::OAI) over an SQLite store we add to, change and delete from between harvests
 * (see test/fixtures/oai-catmandu/). Then our Destination copies the bridge's Source over HTTP.
 *
 * Skipped, saying how to install it, where the provider is not installed (`.ci/run` installs it).
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Destination } from '../../src/destination/destination.js';
import { type OaiBridge, type OaiBridgeOptions, openOaiBridge } from '../../src/source/oai/bridge.js';
import { recordKey } from '../../src/source/oai/model.js';
import { createSourceServer, type SourceServer } from '../../src/source/server.js';
import {
  CatmanduDb,
  type CatmanduProvider,
  type CatmanduRecord,
  catmanduDatestamp,
  catmanduMissing,
  startCatmanduProvider,
} from './catmandu-provider.js';
import { crawl, tempDir } from './helpers.js';

const missing = catmanduMissing();
const NS = 'oai:catmandu.test:';

async function changeLog(b: OaiBridge): Promise<string[]> {
  const snap = await b.store.snapshot();
  try {
    const out: string[] = [];
    for await (const c of snap.changes()) out.push(`${c.change} ${c.uri}`);
    return out.sort();
  } finally {
    await snap.close();
  }
}

function record(i: number, datestampMs: number, extra: Partial<CatmanduRecord> = {}): CatmanduRecord {
  return {
    id: String(i),
    datestamp: catmanduDatestamp(datestampMs),
    sets: [i % 2 === 0 ? 'even' : 'odd'],
    title: `Title ${i} & <more>`,
    creator: `Crëator ${i} काठमांडू`,
    ...extra,
  };
}

/** Every file of a directory tree (the Destination's copy), but its own state. */
function files(dir: string): Buffer[] {
  const out: Buffer[] = [];
  const walk = (d: string): void => {
    for (const name of readdirSync(d)) {
      if (name === '.resourcesync') continue;
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else out.push(readFileSync(p));
    }
  };
  walk(dir);
  return out;
}

const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

describe('OAI-PMH bridge against the Catmandu OAI provider (Debian)', { skip: missing, timeout: 300_000 }, () => {
  let work: { dir: string; cleanup: () => Promise<void> };
  let db: CatmanduDb;
  let provider: CatmanduProvider;
  const bridges: OaiBridge[] = [];
  const open = async (stateDir: string, extra: Partial<OaiBridgeOptions> = {}): Promise<OaiBridge> => {
    const b = await openOaiBridge({
      provider: provider.url,
      baseUrl: 'http://127.0.0.1:9/',
      stateDir: join(work.dir, stateDir),
      metadataPrefixes: ['oai_dc', 'mods'],
      fsync: false,
      regenerateAfterMs: Number.POSITIVE_INFINITY,
      ...extra,
    });
    bridges.push(b);
    return b;
  };

  before(async () => {
    work = await tempDir('rs-oai-catmandu-');
    db = new CatmanduDb(join(work.dir, 'provider.db'));
    const day = Date.now() - 86_400_000;
    db.put(Array.from({ length: 250 }, (_, k) => record(k + 1, day + k * 1000)));
    provider = await startCatmanduProvider({ db: db.path, limit: 100 });
  });
  after(async () => {
    for (const b of bridges) await b.close();
    await provider?.stop();
    db?.close();
    await work?.cleanup();
  });

  it('harvests, then publishes exactly what was added, changed and deleted; a Destination copies it', async () => {
    // Listen first, so the bridge's base URL is where it is served.
    let serve: (b: OaiBridge) => void = () => undefined;
    const server: SourceServer = createSourceServer(new Promise<OaiBridge>((r) => (serve = r)));
    const { url } = await server.listen(0, '127.0.0.1');
    try {
      const b = await open('state', { baseUrl: url });
      const r1 = await b.harvest();
      serve(b);
      assert.equal(r1.created, 500, provider.stderr());
      assert.equal(r1.pages, 6);
      assert.equal(b.harvester.identify?.deletedRecord, 'persistent');
      // A record as served: the oai_dc of the provider's template, with its values.
      const path = (i: number, prefix: string): string =>
        recordKey(`${NS}${i}`, prefix).split('/').map(encodeURIComponent).join('/');
      const res = await fetch(`${url}${path(7, 'oai_dc')}`);
      assert.equal(res.status, 200);
      const text = await res.text();
      assert.match(text, /^<\?xml version="1.0" encoding="UTF-8"\?>\n<oai_dc:dc /);
      assert.match(text, /<dc:title>Title 7 &amp; &lt;more&gt;<\/dc:title>/);
      assert.match(text, /<dc:creator>Crëator 7 काठमांडू<\/dc:creator>/);
      const mods = await (await fetch(`${url}${path(7, 'mods')}`)).text();
      assert.match(mods, /<mods xmlns:xsi="[^"]+" xmlns="http:\/\/www.loc.gov\/mods\/v3" version="3.7">/);

      // Our Destination takes a baseline.
      const mirror = join(work.dir, 'mirror');
      const d = (): Destination => new Destination({ url, dir: mirror, durability: 'none', delete: true });
      const s1 = await d().sync();
      assert.equal(s1.counts.failed, 0, JSON.stringify(s1.failures));
      assert.equal(s1.counts.created, 500);

      // The provider's repository changes: 5 changed, 3 deleted (kept as deleted records), 4 added.
      const now = Date.now();
      db.put([1, 2, 3, 4, 5].map((i) => record(i, now, { title: `Title ${i} revised` })));
      db.put([10, 11, 12].map((i) => record(i, now, { deleted: true })));
      db.put([301, 302, 303, 304].map((i) => record(i, now)));
      const r2 = await b.harvest();
      assert.deepEqual(
        { created: r2.created, updated: r2.updated, deleted: r2.deleted },
        { created: 8, updated: 10, deleted: 6 },
        provider.stderr(),
      );
      const log = await changeLog(b);
      assert.equal(log.length, 24);
      assert.ok(log.includes(`deleted ${recordKey(`${NS}11`, 'mods')}`));
      assert.ok(log.includes(`created ${recordKey(`${NS}304`, 'oai_dc')}`));
      assert.ok(log.includes(`updated ${recordKey(`${NS}3`, 'oai_dc')}`));
      // Again with nothing new: nothing recorded.
      const r3 = await b.harvest();
      assert.equal(r3.created + r3.updated + r3.deleted, 0);

      const s2 = await d().sync();
      assert.equal(s2.operation, 'incremental');
      assert.equal(s2.counts.failed, 0, JSON.stringify(s2.failures));
      assert.equal(s2.counts.created + s2.counts.updated + s2.counts.deleted, 24);
      // The copy holds exactly the bytes the bridge serves.
      const want: string[] = [];
      for await (const r of b.store.resources()) want.push(r.hashes['sha-256'] ?? '');
      assert.equal(want.length, 502);
      assert.deepEqual(files(mirror).map(sha).sort(), want.sort());
      await crawl(b, b.sourceDescriptionUrl);
    } finally {
      await server.close();
    }
  });

  it('harvests one set only', async () => {
    const b = await open('state-even', { set: 'even', metadataPrefixes: ['oai_dc'] });
    const r = await b.harvest();
    const even = db.records().filter((x) => x.sets.includes('even') && !x.deleted);
    assert.ok(even.length >= 125);
    assert.equal(r.created, even.length);
    for await (const res of b.store.resources()) assert.equal(Number(res.uri.split(':').pop()?.split('/')[0]) % 2, 0);
  });

  it('catches deletions of a provider without deleted-record support by a reconcile', async () => {
    const noDel = await startCatmanduProvider({ db: db.path, deletedRecord: 'no', limit: 100 });
    try {
      const b = await openOaiBridge({
        provider: noDel.url,
        baseUrl: 'http://127.0.0.1:9/',
        stateDir: join(work.dir, 'state-nodel'),
        metadataPrefixes: ['oai_dc'],
        fsync: false,
        regenerateAfterMs: Number.POSITIVE_INFINITY,
      });
      bridges.push(b);
      await b.harvest();
      assert.equal(b.harvester.reconcileEveryMs(), 86_400_000, 'deletedRecord no: a reconcile every day by default');
      db.purge(['20', '21']);
      const r = await b.harvest();
      assert.equal(r.deleted, 0);
      const rec = await b.reconcile();
      assert.equal(rec.deleted, 2, noDel.stderr());
      assert.deepEqual(await changeLog(b), [
        `deleted ${recordKey(`${NS}20`, 'oai_dc')}`,
        `deleted ${recordKey(`${NS}21`, 'oai_dc')}`,
      ]);
    } finally {
      await noDel.stop();
    }
  });

  it('keeps a day-granularity provider right', async () => {
    db.put([record(41, Date.now(), { title: 'changed today, before the harvest' })]);
    const daily = await startCatmanduProvider({ db: db.path, granularity: 'YYYY-MM-DD', limit: 100 });
    try {
      const b = await openOaiBridge({
        provider: daily.url,
        baseUrl: 'http://127.0.0.1:9/',
        stateDir: join(work.dir, 'state-daily'),
        metadataPrefixes: ['oai_dc'],
        fsync: false,
        regenerateAfterMs: Number.POSITIVE_INFINITY,
      });
      bridges.push(b);
      await b.harvest();
      db.put([record(40, Date.now(), { title: 'changed today' })]);
      const before = Date.now();
      const r = await b.harvest();
      assert.equal(r.updated, 1, daily.stderr());
      assert.ok(r.unchanged >= 1, `the day is read again: ${JSON.stringify(r)}`);
      assert.equal(r.created + r.deleted, 0);
      assert.ok(Date.now() - before < 60_000);
    } finally {
      await daily.stop();
    }
  });
});
