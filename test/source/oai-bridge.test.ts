/**
 * The OAI-PMH bridge against our own OAI-PMH server over real HTTP: incremental harvesting, watermarks and
 * granularity, resuming after a crash, and every bad-provider case (badResumptionToken, 503 + Retry-After,
 * malformed XML, DTDs, noRecordsMatch, no deleted-record support, timeouts, a looping token).
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { after, afterEach, beforeEach, describe, it } from 'node:test';
import { ResourceSyncError } from '../../src/core/errors.js';
import { type OaiBridge, type OaiBridgeOptions, openOaiBridge } from '../../src/source/oai/bridge.js';
import { oaiErrorCodeOf } from '../../src/source/oai/client.js';
import { parseRecordKey, recordKey } from '../../src/source/oai/model.js';
import { createSourceServer } from '../../src/source/server.js';
import { crawl, tempDir } from './helpers.js';
import { type OaiTestServer, startOaiServer } from './oai-server.js';

const FAST_HTTP = { retries: 2, retryBaseDelayMs: 10, maxRetryDelayMs: 50 } as const;

interface Ctx {
  server: OaiTestServer;
  dir: string;
  cleanup: () => Promise<void>;
  bridges: OaiBridge[];
}

async function open(ctx: Ctx, extra: Partial<OaiBridgeOptions> = {}): Promise<OaiBridge> {
  const b = await openOaiBridge({
    provider: ctx.server.url,
    baseUrl: 'http://127.0.0.1:9/',
    stateDir: ctx.dir,
    metadataPrefixes: ['oai_dc', 'mods'],
    httpOptions: FAST_HTTP,
    fsync: false,
    regenerateAfterMs: Number.POSITIVE_INFINITY,
    batchSize: 4,
    ...extra,
  });
  ctx.bridges.push(b);
  return b;
}

/** The change log as "change key" lines, in order. */
async function changeLog(b: OaiBridge): Promise<string[]> {
  const snap = await b.store.snapshot();
  try {
    const out: string[] = [];
    for await (const c of snap.changes()) out.push(`${c.change} ${c.uri}`);
    return out;
  } finally {
    await snap.close();
  }
}

async function inventory(b: OaiBridge): Promise<Map<string, { sha: string; lastmodMs: number }>> {
  const out = new Map<string, { sha: string; lastmodMs: number }>();
  for await (const r of b.store.resources()) out.set(r.uri, { sha: r.hashes['sha-256'] ?? '', lastmodMs: r.lastmodMs });
  return out;
}

function fill(server: OaiTestServer, n: number): void {
  for (let i = 1; i <= n; i++)
    server.put(`oai:test:${String(i).padStart(3, '0')}`, `Title ${i}`, [i % 2 === 0 ? 'even' : 'odd']);
}

const key = (i: number, prefix = 'oai_dc'): string => recordKey(`oai:test:${String(i).padStart(3, '0')}`, prefix);

describe('OAI-PMH bridge (our own test provider)', { timeout: 60_000 }, () => {
  const ctx = { bridges: [] } as unknown as Ctx;
  beforeEach(async () => {
    ctx.server = await startOaiServer({ pageSize: 10 });
    const t = await tempDir('rs-oai-');
    ctx.dir = t.dir;
    ctx.cleanup = t.cleanup;
    ctx.bridges = [];
  });
  afterEach(async () => {
    for (const b of ctx.bridges) await b.close();
    await ctx.server.close();
    await ctx.cleanup();
  });

  it('harvests everything first (not logged), then only what changed, with exact changes', async () => {
    ctx.server.now = Date.parse('2024-03-01T10:00:00Z');
    fill(ctx.server, 25);
    ctx.server.now = Date.parse('2024-03-01T12:00:00Z');
    const b = await open(ctx);
    assert.equal(b.ready, false);
    const r1 = await b.harvest();
    assert.equal(b.ready, true);
    assert.equal(r1.logged, false);
    assert.equal(r1.created, 50);
    assert.equal(r1.pages, 6, '3 pages of each format');
    assert.deepEqual(await changeLog(b), [], 'the first harvest is the baseline, not changes');
    const inv = await inventory(b);
    assert.equal(inv.size, 50);
    // The bytes served are the record, hashed as listed.
    const file = await b.resource(`/${key(7).split('/').map(encodeURIComponent).join('/')}`);
    assert.ok(file?.data !== undefined);
    assert.equal(file.contentType, 'application/xml');
    assert.equal(createHash('sha256').update(file.data).digest('hex'), inv.get(key(7))?.sha);
    assert.equal(
      file.data.toString(),
      '<?xml version="1.0" encoding="UTF-8"?>\n<oai_dc:dc xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" ' +
        'xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" xmlns:dc="http://purl.org/dc/elements/1.1/">' +
        '<dc:title>Title 7</dc:title><dc:identifier>oai:test:007</dc:identifier></oai_dc:dc>\n',
    );
    assert.equal(file.lastModified.getTime(), Date.parse('2024-03-01T10:00:00Z'), 'lastmod is the datestamp');
    assert.equal(await b.resource('/items/nothing/oai_dc.xml'), undefined);

    // An hour later: one changed, one deleted, one added, one touched (new datestamp, same bytes).
    ctx.server.now += 3_600_000;
    ctx.server.put('oai:test:003', 'Title 3 revised', ['odd']);
    ctx.server.remove('oai:test:004');
    ctx.server.put('oai:test:026', 'Title 26', ['even']);
    ctx.server.put('oai:test:005', 'Title 5', ['odd']);
    const before = ctx.server.requests.length;
    const r2 = await b.harvest();
    const lists = ctx.server.requests
      .slice(before)
      .filter((q) => q.get('verb') === 'ListRecords' && q.get('metadataPrefix') !== null);
    // The watermark: the first page's responseDate less 5 minutes.
    assert.deepEqual(
      lists.map((q) => q.get('from')),
      ['2024-03-01T11:55:00Z', '2024-03-01T11:55:00Z'],
    );
    assert.deepEqual(
      { created: r2.created, updated: r2.updated, deleted: r2.deleted, unchanged: r2.unchanged },
      { created: 2, updated: 2, deleted: 2, unchanged: 2 },
    );
    assert.deepEqual((await changeLog(b)).sort(), [
      `created ${key(26, 'mods')}`,
      `created ${key(26)}`,
      `deleted ${key(4, 'mods')}`,
      `deleted ${key(4)}`,
      `updated ${key(3, 'mods')}`,
      `updated ${key(3)}`,
    ]);
    const inv2 = await inventory(b);
    assert.equal(inv2.get(key(5))?.lastmodMs, ctx.server.now, 'a touched record: lastmod follows, no change');
    assert.equal(inv2.get(key(5))?.sha, inv.get(key(5))?.sha);

    // Nothing changed: the overlap brings records back, none is recorded again.
    ctx.server.now += 60_000;
    const r3 = await b.harvest();
    assert.equal(r3.created + r3.updated + r3.deleted, 0);
    assert.ok(r3.unchanged > 0, 'the overlap re-read some records');
    assert.equal((await changeLog(b)).length, 6);

    // The documents validate; the Capability List and the Source Description link the provider's Identify.
    const { docs } = await crawl(b, b.sourceDescriptionUrl);
    const cap = docs.find((d) => d.doc.kind === 'capability-list');
    assert.equal(cap?.doc.links.find((l) => l.rel === 'describedby')?.href, `${ctx.server.url}?verb=Identify`);
    const cl = docs.find((d) => d.doc.kind === 'change-list');
    assert.equal(cl?.doc.entries.length, 6);
    const rl = docs.find((d) => d.doc.kind === 'resource-list');
    assert.equal(rl?.doc.entries.length, 50);
  });

  it('keeps a day-granularity provider right: from is a day, the day is read again, nothing is lost', async () => {
    ctx.server.options.granularity = 'YYYY-MM-DD';
    ctx.server.now = Date.parse('2024-03-01T08:00:00Z');
    fill(ctx.server, 5);
    const b = await open(ctx);
    await b.harvest();
    // Same day, after the harvest: a change with the same datestamp day as the harvest.
    ctx.server.now = Date.parse('2024-03-01T20:00:00Z');
    ctx.server.put('oai:test:002', 'changed later that day', ['even']);
    const before = ctx.server.requests.length;
    const r = await b.harvest();
    const q = ctx.server.requests.slice(before).find((x) => x.get('verb') === 'ListRecords');
    assert.equal(q?.get('from'), '2024-03-01', 'day granularity: from is the day of the first responseDate');
    assert.equal(r.updated, 2);
    assert.equal(r.unchanged, 8, 'the whole day is read again; unchanged records are not changes');
    assert.deepEqual((await changeLog(b)).sort(), [`updated ${key(2, 'mods')}`, `updated ${key(2)}`]);
    // Day datestamps: lastmod is the first instant of the day.
    assert.equal((await inventory(b)).get(key(2))?.lastmodMs, Date.parse('2024-03-01T00:00:00Z'));
    // Across midnight the overlap keeps the previous day.
    ctx.server.now = Date.parse('2024-03-02T00:01:00Z');
    const before2 = ctx.server.requests.length;
    await b.harvest();
    const q2 = ctx.server.requests.slice(before2).find((x) => x.get('verb') === 'ListRecords');
    assert.equal(q2?.get('from'), '2024-03-01');
    // The provider moves to second granularity: the saved day watermark is sent as seconds.
    ctx.server.options.granularity = 'YYYY-MM-DDThh:mm:ssZ';
    const before3 = ctx.server.requests.length;
    await b.harvest();
    const q3 = ctx.server.requests.slice(before3).find((x) => x.get('verb') === 'ListRecords');
    assert.equal(q3?.get('from'), '2024-03-01T00:00:00Z');
    // And back: a seconds watermark is sent as its day.
    ctx.server.options.granularity = 'YYYY-MM-DD';
    ctx.server.now = Date.parse('2024-03-03T10:00:00Z');
    const before4 = ctx.server.requests.length;
    const r4 = await b.harvest();
    const q4 = ctx.server.requests.slice(before4).find((x) => x.get('verb') === 'ListRecords');
    assert.equal(q4?.get('from'), '2024-03-01');
    assert.equal(r4.created + r4.updated + r4.deleted, 0);
  });

  it('resumes from the last page done after a crash between pages: nothing lost, nothing doubled', async () => {
    fill(ctx.server, 25);
    const b1 = await open(ctx);
    await b1.harvest();
    ctx.server.now += 3_600_000;
    for (const i of [2, 12, 22]) ctx.server.put(`oai:test:${String(i).padStart(3, '0')}`, `changed ${i}`, ['even']);
    for (let i = 30; i < 45; i++) ctx.server.put(`oai:test:${String(i).padStart(3, '0')}`, `new ${i}`, ['even']);
    // The provider fails hard on the second page of the first list (not retried: a 404 page of HTML).
    let failed = 0;
    ctx.server.fault = (q) => {
      if (q.get('resumptionToken') !== null && failed === 0) {
        failed++;
        return { status: 404, body: '<html>gone</html>' };
      }
      return undefined;
    };
    await assert.rejects(b1.harvest(), (e: unknown) => e instanceof ResourceSyncError && e.code === 'RS_HTTP');
    const logAfterCrash = await changeLog(b1);
    assert.ok(logAfterCrash.length > 0 && logAfterCrash.length < 36, 'the first page was recorded');
    await b1.close();
    ctx.bridges = [];
    // A new process on the same state directory.
    ctx.server.fault = undefined;
    const before = ctx.server.requests.length;
    const b2 = await open(ctx);
    await b2.harvest();
    const firstList = ctx.server.requests.slice(before).find((q) => q.get('verb') === 'ListRecords');
    assert.ok(firstList?.get('resumptionToken') !== null, 'the list goes on with the saved token');
    const log = await changeLog(b2);
    assert.equal(new Set(log).size, log.length, 'no change recorded twice');
    assert.equal(log.length, 36, '3 updated + 15 created, in two formats');
    assert.equal((await inventory(b2)).size, 80);
  });

  it('re-reads a page that breaks in the middle without recording its records twice', async () => {
    fill(ctx.server, 20);
    const b = await open(ctx);
    await b.harvest();
    ctx.server.now += 3_600_000;
    for (let i = 1; i <= 20; i++) ctx.server.put(`oai:test:${String(i).padStart(3, '0')}`, `v2 ${i}`, ['odd']);
    let cut = 0;
    ctx.server.fault = (q) => {
      if (q.get('verb') !== 'ListRecords' || cut > 0) return undefined;
      cut++;
      const full = ctx.server.render(q);
      const half = full.slice(0, full.indexOf('<record>', full.length / 2));
      return {
        headers: { 'content-type': 'text/xml' },
        body: (res) => {
          res.write(half);
          setTimeout(() => res.destroy(), 50);
        },
      };
    };
    const r = await b.harvest();
    assert.equal(cut, 1);
    assert.equal(r.updated, 40);
    const log = await changeLog(b);
    assert.equal(log.length, 40, 'the records of the broken page are recorded once');
  });

  it('restarts the list from the watermark on badResumptionToken', async () => {
    fill(ctx.server, 25);
    const b = await open(ctx, { metadataPrefixes: ['oai_dc'] });
    const warnings: string[] = [];
    let expired = false;
    ctx.server.fault = (q) => {
      if (q.get('resumptionToken') !== null && !expired) {
        expired = true;
        ctx.server.expireTokens();
      }
      return undefined;
    };
    const b2 = await open(ctx, { metadataPrefixes: ['oai_dc'], onWarning: (m) => warnings.push(m) });
    await b.close();
    const r = await b2.harvest();
    assert.equal(r.restarts, 1);
    assert.equal(r.created, 25);
    assert.ok(
      warnings.some((w) => /refused the resumption token/.test(w)),
      warnings.join('\n'),
    );
    // Refused again and again: a clear error, not a loop.
    ctx.server.now += 3_600_000;
    for (let i = 1; i <= 25; i++) ctx.server.put(`oai:test:${String(i).padStart(3, '0')}`, `v2 ${i}`, []);
    ctx.server.fault = (q) =>
      q.get('resumptionToken') !== null
        ? { body: ctx.server.render(new URLSearchParams({ verb: 'ListRecords', resumptionToken: 'nope' })) }
        : undefined;
    await assert.rejects(b2.harvest(), (e: unknown) => {
      assert.ok(e instanceof ResourceSyncError);
      assert.equal(e.code, 'RS_OAI_PMH');
      assert.match(e.message, /refused its own resumption tokens 4 times/);
      return true;
    });
    // What the failed harvests applied stays (the first page); fixed provider, the harvest completes, and no
    // change is recorded twice.
    ctx.server.fault = undefined;
    const r2 = await b2.harvest();
    assert.equal(r2.updated, 15);
    const log = await changeLog(b2);
    assert.equal(log.length, 25);
    assert.equal(new Set(log).size, 25);
  });

  it('waits for 503 + Retry-After, bounded', async () => {
    fill(ctx.server, 3);
    let unavailable = 2;
    ctx.server.fault = (q) => {
      if (q.get('verb') === 'ListRecords' && unavailable > 0) {
        unavailable--;
        return { status: 503, headers: { 'retry-after': '1' }, body: 'busy' };
      }
      return undefined;
    };
    const b = await open(ctx, { httpOptions: { retries: 3, retryBaseDelayMs: 10, maxRetryDelayMs: 2000 } });
    const t0 = Date.now();
    const r = await b.harvest();
    assert.equal(r.created, 6);
    assert.ok(Date.now() - t0 >= 1900, 'Retry-After was honoured (2 x 1 s)');
    // Retry-After beyond the bound: the client waits the bound only, then gives up with a clear error.
    ctx.server.fault = (q) =>
      q.get('verb') === 'ListRecords' ? { status: 503, headers: { 'retry-after': '3600' }, body: 'busy' } : undefined;
    const b2 = await open(ctx, { httpOptions: { retries: 2, retryBaseDelayMs: 10, maxRetryDelayMs: 100 } });
    await b.close();
    const t1 = Date.now();
    await assert.rejects(b2.harvest(), (e: unknown) => {
      assert.ok(e instanceof ResourceSyncError);
      assert.equal(e.code, 'RS_HTTP');
      assert.match(e.message, /unavailable \(HTTP 503\)/);
      assert.match(e.message, /verb=ListRecords/);
      return true;
    });
    assert.ok(Date.now() - t1 < 5000, 'a one-hour Retry-After is not waited for');
  });

  it('refuses malformed XML and DTDs with URL and line, losing nothing', async () => {
    fill(ctx.server, 15);
    const b = await open(ctx, { metadataPrefixes: ['oai_dc'] });
    ctx.server.fault = (q) =>
      q.get('resumptionToken') !== null
        ? { body: ctx.server.render(q).replace('</dc:title>', '</dc:titel>'), headers: { 'content-type': 'text/xml' } }
        : undefined;
    await assert.rejects(b.harvest(), (e: unknown) => {
      assert.ok(e instanceof ResourceSyncError);
      assert.equal(e.code, 'RS_XML_SYNTAX');
      assert.match(e.url ?? '', /resumptionToken=/);
      assert.equal(typeof e.line, 'number');
      return true;
    });
    ctx.server.fault = (q) =>
      q.get('verb') === 'ListRecords'
        ? {
            body: ctx.server
              .render(q)
              .replace('<OAI-PMH', '<!DOCTYPE OAI-PMH [<!ENTITY e SYSTEM "file:///etc/passwd">]>\n<OAI-PMH'),
          }
        : undefined;
    await assert.rejects(b.harvest(), (e: unknown) => e instanceof ResourceSyncError && e.code === 'RS_XML_DTD');
    ctx.server.fault = undefined;
    const r = await b.harvest();
    assert.equal((await inventory(b)).size, 15);
    assert.equal(r.logged, false, 'still the first harvest');
  });

  it('takes noRecordsMatch as an empty list, and OAI-PMH errors as clear errors', async () => {
    ctx.server.now = Date.parse('2024-03-01T10:00:00Z');
    fill(ctx.server, 3);
    ctx.server.now = Date.parse('2024-03-01T12:00:00Z');
    const b = await open(ctx);
    await b.harvest();
    ctx.server.now += 3_600_000 * 24;
    const r = await b.harvest();
    assert.equal(r.pages, 2);
    assert.equal(r.created + r.updated + r.deleted + r.unchanged, 0);
    ctx.server.fault = (q) =>
      q.get('verb') === 'ListRecords'
        ? { body: ctx.server.render(new URLSearchParams({ verb: 'ListRecords', metadataPrefix: 'nonesuch' })) }
        : undefined;
    await assert.rejects(b.harvest(), (e: unknown) => {
      assert.ok(e instanceof ResourceSyncError);
      assert.equal(e.code, 'RS_OAI_PMH');
      assert.equal(oaiErrorCodeOf(e), 'cannotDisseminateFormat');
      assert.match(e.message, /answered cannotDisseminateFormat/);
      return true;
    });
    // A format the provider does not offer is refused before harvesting.
    const b2 = await open(ctx, { metadataPrefixes: ['marc21'] });
    await b.close();
    await assert.rejects(b2.harvest(), /does not offer metadata format marc21 \(it offers oai_dc, mods\)/);
  });

  it('detects deletions of a provider without deleted-record support by a reconcile, checking each with GetRecord', async () => {
    ctx.server.options.deletedRecord = 'no';
    fill(ctx.server, 12);
    const b = await open(ctx, { metadataPrefixes: ['oai_dc'], reconcileEveryMs: 3_600_000 });
    await b.harvest();
    assert.equal(b.harvester.reconcileEveryMs(), 3_600_000);
    ctx.server.now += 60_000;
    ctx.server.remove('oai:test:003');
    ctx.server.remove('oai:test:011');
    const r = await b.harvest();
    assert.equal(r.deleted, 0, 'the provider does not report deletions');
    // A record the listing skips (a provider paging by offset while records go) must not be deleted.
    ctx.server.fault = (q) => {
      if (q.get('verb') !== 'ListIdentifiers') return undefined;
      return { body: ctx.server.render(q).replace(/<header><identifier>oai:test:007<\/identifier>.*?<\/header>/, '') };
    };
    // A record we lack (missed by the incremental harvest) is fetched.
    ctx.server.items.set('oai:test:050', {
      identifier: 'oai:test:050',
      datestampMs: Date.parse('2020-01-01T00:00:00Z'),
      sets: [],
      deleted: false,
      title: 'old but missed',
    });
    const before = ctx.server.requests.length;
    const rec = await b.reconcile();
    const gets = ctx.server.requests
      .slice(before)
      .filter((q) => q.get('verb') === 'GetRecord')
      .map((q) => q.get('identifier'))
      .sort();
    assert.deepEqual(gets, ['oai:test:003', 'oai:test:007', 'oai:test:011', 'oai:test:050']);
    assert.equal(rec.deleted, 2);
    assert.equal(rec.created, 1);
    assert.deepEqual((await changeLog(b)).sort(), [`created ${key(50)}`, `deleted ${key(3)}`, `deleted ${key(11)}`]);
    assert.ok((await inventory(b)).has(key(7)), 'the skipped record stays');
    // The bytes of the deleted records are dropped; every resource keeps its own.
    const shas = new Set([...(await inventory(b)).values()].map((r) => r.sha));
    const db = new Database(join(ctx.dir, 'oai.db'), { readonly: true });
    try {
      const kept = db
        .prepare<[], { sha256: string }>('SELECT sha256 FROM content')
        .all()
        .map((r) => r.sha256);
      assert.deepEqual(new Set(kept), shas);
    } finally {
      db.close();
    }
    // Due again only after the period.
    assert.equal(b.harvester.reconcileDue(), false);
  });

  it('removes records that leave the harvested set (reconcile checks the set of each record)', async () => {
    fill(ctx.server, 6);
    const b = await open(ctx, { metadataPrefixes: ['oai_dc'], set: 'even' });
    const r = await b.harvest();
    assert.equal(r.created, 3);
    ctx.server.now += 60_000;
    ctx.server.put('oai:test:002', 'Title 2', ['odd']);
    const rec = await b.reconcile();
    assert.equal(rec.deleted, 1);
    assert.deepEqual(await changeLog(b), [`deleted ${key(2)}`]);
    // A set the provider does not have is refused (a provider may answer noRecordsMatch for it).
    const typo = await open(ctx, { metadataPrefixes: ['oai_dc'], set: 'evn', stateDir: join(ctx.dir, 'typo') });
    await assert.rejects(typo.harvest(), /the provider has no set "evn" \(it has even, odd\)/);
    // The state belongs to that provider and set.
    await assert.rejects(
      open(ctx, { metadataPrefixes: ['oai_dc'], set: 'odd' }),
      (e: unknown) =>
        e instanceof ResourceSyncError && e.code === 'RS_CONFIG' && /belongs to the harvest of/.test(e.message),
    );
  });

  it('times out on a provider that stops sending', async () => {
    fill(ctx.server, 3);
    ctx.server.fault = (q) =>
      q.get('verb') === 'ListRecords'
        ? { body: (res) => void res.write('<?xml version="1.0" encoding="UTF-8"?>\n<OAI-PMH') }
        : undefined;
    const b = await open(ctx, {
      httpOptions: { ...FAST_HTTP, bodyIdleTimeoutMs: 200 },
      pageRetries: 0,
    });
    const t0 = Date.now();
    await assert.rejects(b.harvest(), (e: unknown) => e instanceof ResourceSyncError && e.code === 'RS_TIMEOUT');
    assert.ok(Date.now() - t0 < 5000);
  });

  it('refuses a provider that hands back the token it was given', async () => {
    fill(ctx.server, 15);
    ctx.server.fault = (q) => {
      const t = q.get('resumptionToken');
      if (t === null) return undefined;
      return {
        body: ctx.server
          .render(new URLSearchParams({ verb: 'ListRecords', metadataPrefix: 'oai_dc' }))
          .replace(/<resumptionToken([^>]*)>[^<]*</, `<resumptionToken$1>${t}<`),
      };
    };
    const b = await open(ctx, { metadataPrefixes: ['oai_dc'] });
    await assert.rejects(b.harvest(), /returned the resumption token it was given/);
  });

  it('re-harvests on an interval while serving, reports failures and goes on', async () => {
    fill(ctx.server, 3);
    const results: { report?: { created: number; updated: number }; error?: unknown }[] = [];
    let wake: () => void = () => undefined;
    const next = (): Promise<void> => new Promise((r) => (wake = r));
    const b = await open(ctx, {
      metadataPrefixes: ['oai_dc'],
      intervalMs: 50,
      onHarvest: (r) => {
        results.push(r);
        wake();
      },
    });
    let seen = next();
    b.start();
    await seen;
    assert.equal(results[0]?.report?.created, 3);
    // The provider fails once: reported, and the loop goes on.
    let failures = 1;
    ctx.server.fault = (q) =>
      q.get('verb') === 'Identify' && failures-- > 0 ? { status: 400, body: '<html>bad</html>' } : undefined;
    seen = next();
    await seen;
    assert.ok(results[1]?.error instanceof ResourceSyncError);
    ctx.server.now += 3_600_000;
    ctx.server.put('oai:test:002', 'changed while serving', []);
    while (!results.some((r) => (r.report?.updated ?? 0) > 0)) await next();
    await b.stop();
    const count = results.length;
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(results.length, count, 'stopped: no more harvests');
    assert.deepEqual(await changeLog(b), [`updated ${key(2)}`]);
  });

  it('serves 503 until the first harvest completes, then the records over HTTP', async () => {
    fill(ctx.server, 4);
    const b = await open(ctx, { metadataPrefixes: ['oai_dc'] });
    let ready: (x: OaiBridge) => void = () => undefined;
    const http = createSourceServer(new Promise<OaiBridge>((r) => (ready = r)));
    const { url } = await http.listen(0, '127.0.0.1');
    try {
      const early = await fetch(`${url}.well-known/resourcesync`);
      assert.equal(early.status, 503);
      await early.arrayBuffer();
      await b.harvest();
      ready(b);
      const path = key(2).split('/').map(encodeURIComponent).join('/');
      const res = await fetch(`${url}${path}`);
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type'), 'application/xml');
      const body = await res.text();
      assert.match(body, /<dc:title>Title 2<\/dc:title>/);
      assert.equal(parseRecordKey(key(2))?.identifier, 'oai:test:002');
    } finally {
      await http.close();
    }
  });
});

describe('OAI-PMH bridge resource keys', () => {
  it('gives every identifier one safe, reversible path segment', () => {
    for (const id of ['oai:x:1', 'oai:arXiv.org:hep-th/9901001', '..', '.hidden', 'a%2Fb', 'back\\slash', 'sp ace/é']) {
      const k = recordKey(id, 'oai_dc');
      const segs = k.split('/');
      assert.equal(segs.length, 3, k);
      assert.ok(!segs[1]!.startsWith('.'), k);
      assert.deepEqual(parseRecordKey(k), { identifier: id, metadataPrefix: 'oai_dc' });
    }
  });
});

after(() => undefined);
