import assert from 'node:assert/strict';
import { mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { runPublish } from '../../src/cli/publish.js';
import { main } from '../../src/cli/program.js';
import { checkPackage, crawl, type DocumentServer, tempDir } from './helpers.js';

/** Serves a published site directory the way a static web server would. */
function staticSite(out: string): DocumentServer {
  return {
    async document(pathname) {
      const path = join(out, decodeURIComponent(pathname));
      const st = await stat(path).catch(() => undefined);
      if (st?.isFile() !== true) return undefined;
      return { path, contentType: path.endsWith('.zip') ? 'application/zip' : 'application/xml' };
    },
  };
}

interface Captured {
  readonly text: { out: string[]; err: string[] };
  readonly stdout: (t: string) => void;
  readonly stderr: (t: string) => void;
}
function capture(): Captured {
  const text = { out: [] as string[], err: [] as string[] };
  return { text, stdout: (t) => void text.out.push(t), stderr: (t) => void text.err.push(t) };
}
const sink = (c: Captured) => ({ stdout: c.stdout, stderr: c.stderr });

describe('resourcesync publish', () => {
  it('writes a valid static site, and a second run extends the change lists', async () => {
    const { dir, cleanup } = await tempDir();
    try {
      const coll = join(dir, 'coll');
      await mkdir(join(coll, 'a'), { recursive: true });
      await mkdir(join(coll, 'b'), { recursive: true });
      for (let i = 0; i < 5; i++) await writeFile(join(coll, 'a', `${i}.txt`), `a${i}`);
      await writeFile(join(coll, 'b', 'x y.html'), '<p>x</p>');
      const out = join(dir, 'site');
      const c = capture();
      const base = { dir: coll, out, baseUrl: 'https://example.org/data/', sets: 'top-level' as const, maxEntries: 3 };
      assert.equal(await runPublish({ ...base, ...sink(c), progress: false }), 0, c.text.err.join(''));
      assert.match(c.text.out.join(''), /first run: inventory of 6 resources/);
      const site = staticSite(out);
      const first = await crawl(site, 'https://example.org/.well-known/resourcesync');
      assert.ok(first.docs.some((d) => d.doc.kind === 'resource-list-index'));
      for (const p of first.packages) await checkPackage(site, p);
      // The state is next to the output, not in it.
      await stat(join(dir, '.site.resourcesync-state', 'source.db'));

      await writeFile(join(coll, 'a', '0.txt'), 'a0, version 2');
      await rm(join(coll, 'a', '1.txt'));
      await writeFile(join(coll, 'b', 'new.txt'), 'new');
      const io2 = capture();
      assert.equal(await runPublish({ ...base, ...sink(io2), json: true }), 0, io2.text.err.join(''));
      const report = JSON.parse(io2.text.out.join('')) as Record<string, unknown>;
      assert.equal(report['created'], 1);
      assert.equal(report['updated'], 1);
      assert.equal(report['deleted'], 1);
      assert.equal(report['seq'], 3);
      const second = await crawl(site, 'https://example.org/.well-known/resourcesync');
      const changes = second.docs
        .filter((d) => d.doc.kind === 'change-list')
        .flatMap((d) => d.doc.entries.map((e) => `${e.md?.change} ${e.loc}`))
        .sort();
      assert.deepEqual(changes, [
        'created https://example.org/data/b/new.txt',
        'deleted https://example.org/data/a/1.txt',
        'updated https://example.org/data/a/0.txt',
      ]);
      for (const p of second.packages) await checkPackage(site, p);

      // --copy-resources: the resources land at their URL path.
      const io3 = capture();
      assert.equal(await runPublish({ ...base, ...sink(io3), copyResources: true }), 0);
      assert.equal(await readFile(join(out, 'data', 'b', 'x y.html'), 'utf8'), '<p>x</p>');
    } finally {
      await cleanup();
    }
  });

  it('refuses bad input with exit 2 and a message naming it, losing nothing recorded', async () => {
    const { dir, cleanup } = await tempDir();
    try {
      const coll = join(dir, 'coll');
      await mkdir(coll);
      await writeFile(join(coll, 'f.txt'), 'f');
      const out = join(dir, 'site');
      const ok = { dir: coll, out, baseUrl: 'http://localhost/', progress: false };
      assert.equal(await runPublish({ ...ok, ...sink(capture()) }), 0);
      await writeFile(join(coll, 'g.txt'), 'g');

      let c = capture();
      assert.equal(await runPublish({ ...ok, ...sink(c), baseUrl: 'localhost/x' }), 2);
      assert.match(c.text.err.join(''), /base URL "localhost\/x" is not an absolute URL/);
      c = capture();
      assert.equal(await runPublish({ ...ok, ...sink(c), baseUrl: 'ftp://localhost/' }), 2);
      assert.match(c.text.err.join(''), /not http\(s\)/);

      c = capture();
      assert.equal(await runPublish({ ...ok, ...sink(c), dir: join(dir, 'missing') }), 2);
      assert.ok(c.text.err.join('').includes(join(dir, 'missing')));

      await writeFile(join(dir, 'a-file'), 'x');
      c = capture();
      assert.equal(await runPublish({ ...ok, ...sink(c), stateDir: join(dir, 'a-file', 'state') }), 2);
      assert.ok(c.text.err.join('').includes(join(dir, 'a-file', 'state')), c.text.err.join(''));

      c = capture();
      assert.equal(await runPublish({ ...ok, ...sink(c), out: join(dir, 'a-file') }), 2);
      assert.ok(c.text.err.join('').includes(join(dir, 'a-file')));

      // Nothing recorded was lost: the next good run records g.txt as the only change.
      c = capture();
      assert.equal(await runPublish({ ...ok, ...sink(c), json: true }), 0);
      const report = JSON.parse(c.text.out.join('')) as Record<string, unknown>;
      assert.equal(report['created'], 1);
      assert.equal(report['resources'], 2);
    } finally {
      await cleanup();
    }
  });

  it('with --no-dumps, advertises and writes no dump', async () => {
    const { dir, cleanup } = await tempDir();
    try {
      const coll = join(dir, 'coll');
      await mkdir(coll);
      await writeFile(join(coll, 'f.txt'), 'f');
      const out = join(dir, 'site');
      const args = { dir: coll, out, baseUrl: 'http://localhost/', dumps: false, progress: false, ...sink(capture()) };
      assert.equal(await runPublish(args), 0);
      const { docs, packages } = await crawl(staticSite(out), 'http://localhost/.well-known/resourcesync');
      const cap = docs.find((d) => d.doc.kind === 'capability-list')!;
      assert.deepEqual(
        cap.doc.entries.map((e) => e.md?.capability),
        ['resourcelist', 'changelist'],
      );
      assert.equal(packages.length, 0);
      assert.equal(
        await stat(join(out, 'resourcesync', 'default', 'resourcedump.xml')).catch(() => undefined),
        undefined,
      );
    } finally {
      await cleanup();
    }
  });

  it('has complete --help and is registered in the program', async () => {
    const chunks: string[] = [];
    const write = process.stdout.write.bind(process.stdout);
    process.stdout.write = ((c: string | Uint8Array) => {
      chunks.push(String(c));
      return true;
    }) as typeof process.stdout.write;
    let code: number;
    try {
      code = await main(['node', 'resourcesync', 'publish', '--help']);
    } finally {
      process.stdout.write = write;
    }
    assert.equal(code, 0);
    const help = chunks.join('');
    for (const opt of [
      '--out',
      '--base-url',
      '--state',
      '--sets',
      '--max-entries',
      '--copy-resources',
      '--json',
      'Exit status',
    ])
      assert.ok(help.includes(opt), `help mentions ${opt}`);
  });
});
