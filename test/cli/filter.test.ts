// --include / --exclude (src/destination/filter.ts): the patterns, and the same filter applied by baseline (list
// and dump), incremental, audit and the CLI, against a real HTTP Source.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Destination } from '../../src/destination/destination.js';
import { createUriFilter, globToRegExp } from '../../src/destination/filter.js';
import { StaticSource, cliCommand, localPathOf, repoRoot, type ResourceSpec } from '../destination/static-source.js';
import { spawn } from 'node:child_process';

const AT = '2024-06-01T00:00:00Z';
const HTTP = { retries: 0 } as const;

describe('URI filter patterns', () => {
  const keeps = (o: { include?: string[]; exclude?: string[] }, uri: string): boolean =>
    createUriFilter(o).accepts(uri);
  it('globs match the decoded path: segment globs anywhere, anchored globs from the root, directories cover their subtree', () => {
    assert.equal(keeps({ exclude: ['*.pdf'] }, 'http://h/a/b/c.pdf'), false);
    assert.equal(keeps({ exclude: ['*.pdf'] }, 'http://h/a/b/c.pdfx'), true);
    assert.equal(keeps({ exclude: ['drafts'] }, 'http://h/x/drafts/y.txt'), false);
    assert.equal(keeps({ exclude: ['drafts'] }, 'http://h/x/olddrafts/y.txt'), true);
    assert.equal(keeps({ exclude: ['/private'] }, 'http://h/private/a/b'), false);
    assert.equal(keeps({ exclude: ['/private'] }, 'http://h/private'), false);
    assert.equal(keeps({ exclude: ['/private/'] }, 'http://h/private'), true);
    assert.equal(keeps({ exclude: ['/private'] }, 'http://h/x/private/a'), true, 'anchored at the root');
    assert.equal(keeps({ exclude: ['docs/*.xml'] }, 'http://h/docs/a.xml'), false);
    assert.equal(keeps({ exclude: ['docs/*.xml'] }, 'http://h/docs/sub/a.xml'), true, '* stays in a segment');
    assert.equal(keeps({ exclude: ['/docs/**/*.xml'] }, 'http://h/docs/a.xml'), false, '**/ matches no directory');
    assert.equal(keeps({ exclude: ['/docs/**/*.xml'] }, 'http://h/docs/s/t/a.xml'), false);
    assert.equal(keeps({ exclude: ['/C++/a b?.txt'] }, 'http://h/C%2B%2B/a%20b1.txt'), false, 'decoded path');
    assert.equal(keeps({ exclude: ['r[0-2].txt'] }, 'http://h/res/r1.txt'), false);
    assert.equal(keeps({ exclude: ['r[!0-2].txt'] }, 'http://h/res/r1.txt'), true);
    assert.equal(keeps({ exclude: ['a.b'] }, 'http://h/axb'), true, '. is literal');
    assert.equal(globToRegExp('*.txt').test('/a/b.txt'), true);
  });

  it('re: patterns search the whole URI; include keeps only matches; exclude wins', () => {
    assert.equal(keeps({ exclude: ['re:^http://other/'] }, 'http://h/a'), true);
    assert.equal(keeps({ exclude: ['re:\\?v=2$'] }, 'http://h/a?v=2'), false);
    assert.equal(keeps({ include: ['/docs'] }, 'http://h/img/a.png'), false);
    assert.equal(keeps({ include: ['/docs', '*.png'] }, 'http://h/img/a.png'), true);
    assert.equal(keeps({ include: ['/docs'], exclude: ['*.tmp'] }, 'http://h/docs/a.tmp'), false);
    const none = createUriFilter({});
    assert.equal(none.active, false);
    assert.equal(none.accepts('http://h/anything'), true);
    assert.equal(createUriFilter({ exclude: ['x'] }).description, '--exclude x');
  });

  it('malformed patterns are refused with RS_CONFIG naming them', () => {
    for (const p of ['re:(', 're:', '', '/', '[abc'])
      assert.throws(
        () => createUriFilter({ exclude: [p] }),
        (e: Error & { code?: string }) => e.code === 'RS_CONFIG' && e.message.includes('--exclude'),
        p,
      );
  });
});

describe('--include / --exclude in every operation', { timeout: 120_000 }, () => {
  let src: StaticSource;
  let dir: string;
  before(async () => {
    src = await StaticSource.start();
    dir = await mkdtemp(join(tmpdir(), 'rs-filter-'));
  });
  after(async () => {
    await src.close();
    await rm(dir, { recursive: true, force: true });
  });

  const res = (path: string, text: string): ResourceSpec => ({
    path,
    body: Buffer.from(text),
    lastmod: '2024-01-01T00:00:00Z',
  });
  const resources = [
    res('/docs/a.txt', 'doc a'),
    res('/docs/b.tmp', 'doc b temp'),
    res('/docs/sub/c.txt', 'doc c'),
    res('/img/d.png', 'image d'),
  ];
  const dest = (d: string, extra: Record<string, unknown> = {}): Destination =>
    new Destination({
      url: src.url('/'),
      dir: d,
      http: HTTP,
      durability: 'none',
      include: ['/docs'],
      exclude: ['*.tmp'],
      ...extra,
    });
  const file = (d: string, path: string): string => join(d, localPathOf(src, path));

  it('baseline from the list, incremental, audit: excluded resources are not fetched, deleted, retired or reported', async () => {
    src.publishResourceList(resources, AT, 1);
    src.publishChangeLists([{ from: AT, changes: [] }]);
    src.publishCapabilities();
    // A file of an excluded resource is already in the copy (put there by hand): it must be left alone.
    await mkdir(dirname(file(dir, '/img/d.png')), { recursive: true });
    await writeFile(file(dir, '/img/d.png'), 'local only');
    const b = await dest(dir).baseline();
    assert.equal(b.counts.created, 2, JSON.stringify(b));
    assert.equal(b.counts.excluded, 2);
    assert.equal(b.complete, true);
    assert.ok(existsSync(file(dir, '/docs/a.txt')));
    assert.ok(existsSync(file(dir, '/docs/sub/c.txt')));
    assert.ok(!existsSync(file(dir, '/docs/b.tmp')));
    assert.equal(src.hits.get('/docs/b.tmp'), undefined, 'never requested');
    assert.equal(src.hits.get('/img/d.png'), undefined, 'never requested');

    const audit = await dest(dir).audit();
    assert.equal(audit.inSync, true, JSON.stringify(audit.audit));
    // Without the filter the same copy is not in sync (the test can fail).
    const unfiltered = await dest(dir, { include: [], exclude: [] }).audit();
    assert.equal(unfiltered.inSync, false);

    // Changes: one inside the filter, one outside (created and deleted).
    src.publishChangeLists([
      {
        from: AT,
        changes: [
          { path: '/docs/a.txt', change: 'updated', datetime: '2024-06-02T00:00:00Z', body: Buffer.from('doc a v2') },
          { path: '/img/e.png', change: 'created', datetime: '2024-06-02T00:00:01Z', body: Buffer.from('e') },
          { path: '/img/d.png', change: 'deleted', datetime: '2024-06-02T00:00:02Z' },
        ],
      },
    ]);
    const inc = await dest(dir, { delete: true }).incremental();
    assert.equal(inc.counts.updated, 1, JSON.stringify(inc));
    assert.equal(inc.counts.created, 0);
    assert.equal(inc.counts.deleted, 0);
    assert.equal(inc.counts.excluded, 2);
    assert.equal(inc.complete, true);
    assert.equal(src.hits.get('/img/e.png'), undefined);
    assert.ok(existsSync(file(dir, '/img/d.png')), 'an excluded file is not deleted');

    // A new baseline (the Source no longer lists b.tmp): nothing outside the filter is retired.
    const again = await dest(dir, { delete: true }).baseline();
    assert.equal(again.counts.deleted + again.counts.deletionsRecorded, 0, JSON.stringify(again));
    assert.ok(existsSync(file(dir, '/img/d.png')));
  });

  it('baseline from a Resource Dump: excluded bitstreams are not installed', async () => {
    const d2 = await mkdtemp(join(tmpdir(), 'rs-filter-dump-'));
    try {
      src.publishResourceList(resources, AT, 1);
      await src.publishResourceDump(resources, AT, 1);
      src.publishCapabilities();
      const s = await dest(d2).baseline();
      assert.deepEqual(s.via, ['dump'], JSON.stringify(s));
      assert.equal(s.counts.created, 2);
      assert.equal(s.counts.excluded, 2);
      assert.ok(!existsSync(file(d2, '/docs/b.tmp')));
      assert.ok(!existsSync(file(d2, '/img/d.png')));
    } finally {
      await rm(d2, { recursive: true, force: true });
    }
  });

  it('the CLI takes --include / --exclude and refuses a malformed pattern with exit 2', async () => {
    const { cmd, args } = cliCommand();
    const run = (a: string[]): Promise<{ code: number; stdout: string; stderr: string }> =>
      new Promise((resolve) => {
        const child = spawn(cmd, [...args, ...a], { cwd: repoRoot(), stdio: ['ignore', 'pipe', 'pipe'] });
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
        child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
        child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
      });
    const d3 = await mkdtemp(join(tmpdir(), 'rs-filter-cli-'));
    try {
      src.publishResourceList(resources, AT, 1);
      src.publishCapabilities();
      const bad = await run(['sync', '--exclude', 're:(', src.url('/'), d3]);
      assert.equal(bad.code, 2, bad.stderr);
      assert.match(bad.stderr, /--exclude re:\(/);
      const r = await run([
        'sync',
        '--json',
        '--no-dumps',
        '--exclude',
        '/img',
        '--exclude',
        '*.tmp',
        src.url('/'),
        d3,
      ]);
      assert.equal(r.code, 0, r.stderr);
      const s = JSON.parse(r.stdout) as { counts: { created: number; excluded: number } };
      assert.equal(s.counts.created, 2);
      assert.equal(s.counts.excluded, 2);
      const help = await run(['sync', '--help']);
      assert.match(help.stdout, /--include <pattern>/);
      assert.match(help.stdout, /--exclude <pattern>/);
    } finally {
      await rm(d3, { recursive: true, force: true });
    }
  });
});
