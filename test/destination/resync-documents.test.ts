// The Destination against documents shaped like those of the Python reference implementation (resync 2.0.x,
// resync-build): Change Lists without `datetime` (optional in 1.1), deletions carrying the old <lastmod>, and
// Resource Lists giving only a length. Fixtures: test/fixtures/resync/ (hand-written, see its README).
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import { Destination } from '../../src/destination/destination.js';
import { StaticSource, localPathOf, repoRoot } from './static-source.js';

const NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/"';

describe('Destination against resync-style documents', () => {
  let src: StaticSource;
  let dir: string;
  const fixture = async (name: string): Promise<string> =>
    (await readFile(join(repoRoot(), 'test', 'fixtures', 'resync', name), 'utf8')).replaceAll(
      'http://example.org',
      src.base,
    );
  /** A Capability List as resync-build --write-capabilitylist writes it (no `up` link). */
  const capabilities = (caps: Record<string, string>): void =>
    src.set(
      '/capabilitylist.xml',
      `<?xml version='1.0' encoding='UTF-8'?>\n<urlset ${NS}>\n<rs:md capability="capabilitylist" />\n${Object.entries(
        caps,
      )
        .map(([c, p]) => `<url><loc>${src.url(p)}</loc><rs:md capability="${c}" /></url>`)
        .join('\n')}\n</urlset>`,
      'application/xml',
    );
  const dest = (options: { delete?: boolean; checksum?: boolean } = {}): Destination =>
    new Destination({
      url: src.url('/capabilitylist.xml'),
      dir,
      durability: 'none',
      http: { retries: 0 },
      ...options,
    });

  before(async () => {
    src = await StaticSource.start();
  });
  beforeEach(async () => {
    src.routes.clear();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    dir = await mkdtemp(join(tmpdir(), 'rs-resync-docs-'));
  });
  after(async () => {
    await src.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('applies the deletions of a Change List without datetimes (old lastmods), and a later run fetches nothing', async () => {
    for (let i = 1; i <= 4; i++) src.set(`/res/f${i}.txt`, `file ${i}\n`);
    src.set('/resourcelist.xml', await fixture('resourcelist.xml'), 'application/xml');
    capabilities({ resourcelist: '/resourcelist.xml', changelist: '/changelist.xml' });
    const base = await dest().sync();
    assert.equal(base.counts.created, 4);

    // The Source changes: f1-f3 deleted, f4 updated, f5 created; resync-build writes the Change List.
    for (let i = 1; i <= 3; i++) src.remove(`/res/f${i}.txt`);
    src.set('/res/f4.txt', 'file 4\nupdated\n');
    src.set('/res/f5.txt', 'new\n');
    src.set('/changelist.xml', await fixture('changelist.xml'), 'application/xml');

    const inc = await dest({ delete: true }).sync();
    assert.equal(inc.operation, 'incremental');
    assert.deepEqual(
      [inc.counts.created, inc.counts.updated, inc.counts.deleted, inc.counts.failed],
      [1, 1, 3, 0],
      JSON.stringify(inc.counts),
    );
    for (let i = 1; i <= 3; i++) assert.equal(existsSync(join(dir, localPathOf(src, `/res/f${i}.txt`))), false);
    assert.equal(await readFile(join(dir, localPathOf(src, '/res/f4.txt')), 'utf8'), 'file 4\nupdated\n');
    assert.equal(
      inc.warnings.filter((w) => w.includes('out of chronological order')).length,
      0,
      'lastmods are not change times',
    );

    // The open list is read again: everything in it is already here, nothing is fetched or recorded anew.
    const hits = new Map(src.hits);
    const again = await dest({ delete: true }).sync();
    assert.deepEqual(
      [again.counts.created, again.counts.updated, again.counts.deleted, again.counts.failed],
      [0, 0, 0, 0],
    );
    assert.equal(src.hits.get('/res/f4.txt'), hits.get('/res/f4.txt'));
    assert.equal(src.hits.get('/res/f5.txt'), hits.get('/res/f5.txt'));

    const audit = await dest({ checksum: true }).audit();
    assert.equal(audit.inSync, true, JSON.stringify(audit.audit));
    assert.equal(audit.audit?.same, 2);
  });

  it('records the deletions without --delete; the audit then reports the kept files as extra', async () => {
    for (let i = 1; i <= 4; i++) src.set(`/res/f${i}.txt`, `file ${i}\n`);
    src.set('/resourcelist.xml', await fixture('resourcelist.xml'), 'application/xml');
    capabilities({ resourcelist: '/resourcelist.xml', changelist: '/changelist.xml' });
    await dest().sync();
    for (let i = 1; i <= 3; i++) src.remove(`/res/f${i}.txt`);
    src.set('/res/f4.txt', 'file 4\nupdated\n');
    src.set('/res/f5.txt', 'new\n');
    src.set('/changelist.xml', await fixture('changelist.xml'), 'application/xml');
    const inc = await dest().sync();
    assert.equal(inc.counts.deletionsRecorded, 3, JSON.stringify(inc.counts));
    const audit = await dest().audit();
    assert.deepEqual(audit.audit?.samples.extra.length, 3, 'kept files of deleted resources are extra');
  });

  it('audits a Resource List giving only lengths as in sync right after a baseline (also --checksum)', async () => {
    src.set('/res/f1.txt', 'file 1\n');
    src.set('/res/f2.txt', 'file 2\n');
    src.set('/resourcelist.xml', await fixture('resourcelist-length-only.xml'), 'application/xml');
    capabilities({ resourcelist: '/resourcelist.xml' });
    await dest().sync();
    for (const checksum of [false, true]) {
      const audit = await dest({ checksum }).audit();
      assert.equal(audit.inSync, true, `checksum ${checksum}: ${JSON.stringify(audit.audit)}`);
      assert.equal(audit.audit?.same, 2);
    }
    // A length that no longer matches is a difference.
    src.set(
      '/resourcelist.xml',
      (await fixture('resourcelist-length-only.xml')).replace(
        'length="7" /></url>\n</urlset>',
        'length="8" /></url>\n</urlset>',
      ),
      'application/xml',
    );
    const audit = await dest().audit();
    assert.deepEqual(audit.audit?.samples.changed, [src.url('/res/f2.txt')]);
  });

  it('audits a loc written with a raw space (resync-build does not escape paths) as the file it was copied to', async () => {
    src.set('/res/names/with%20space.txt', 'a space\n');
    src.set('/res/f1.txt', 'file 1\n');
    src.set('/resourcelist.xml', await fixture('resourcelist-unescaped.xml'), 'application/xml');
    capabilities({ resourcelist: '/resourcelist.xml' });
    const base = await dest().sync();
    assert.equal(base.counts.created, 2, JSON.stringify(base.failures));
    const audit = await dest().audit();
    assert.equal(audit.inSync, true, JSON.stringify(audit.audit));
    assert.equal(audit.audit?.same, 2);
  });
});
