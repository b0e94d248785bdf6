// publish's own output passes `validate --strict`: describedby links, robots.txt (issue 12).
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { runPublish } from '../../src/cli/publish.js';
import { validateDocument } from '../../src/core/validate.js';
import { crawl, type DocumentServer, tempDir } from './helpers.js';

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

describe('publish output under --strict', () => {
  it('every document has no warning either; robots.txt and the description page are written', async () => {
    const { dir, cleanup } = await tempDir();
    try {
      const coll = join(dir, 'coll');
      await mkdir(join(coll, 'x'), { recursive: true });
      await writeFile(join(coll, 'a.txt'), 'a');
      await writeFile(join(coll, 'x', 'b.txt'), 'b');
      const out = join(dir, 'site');
      const err: string[] = [];
      const opts = {
        dir: coll,
        out,
        baseUrl: 'https://example.org/data/',
        sets: 'top-level' as const,
        stdout: () => undefined,
        stderr: (t: string) => void err.push(t),
        progress: false,
      };
      assert.equal(await runPublish(opts), 0, err.join(''));
      await writeFile(join(coll, 'x', 'c.txt'), 'c');
      assert.equal(await runPublish(opts), 0, err.join(''));
      const { docs } = await crawl(staticSite(out), 'https://example.org/.well-known/resourcesync');
      assert.ok(docs.length >= 9);
      for (const d of docs) {
        const r = validateDocument(d.doc);
        assert.deepEqual(
          r.issues.map((i) => `${i.code}: ${i.message}`),
          [],
          `${d.url} (${d.doc.kind})`,
        );
      }
      const about = 'https://example.org/data/resourcesync/about.html';
      assert.ok(docs[0]!.doc.links.some((l) => l.rel === 'describedby' && l.href === about));
      assert.match(await readFile(join(out, 'data', 'resourcesync', 'about.html'), 'utf8'), /Capability List/);
      const robots = await readFile(join(out, 'robots.txt'), 'utf8');
      assert.match(robots, /^Sitemap: https:\/\/example\.org\/data\/resourcesync\/default\/resourcelist\.xml$/m);
      assert.match(robots, /^Sitemap: https:\/\/example\.org\/data\/resourcesync\/x\/resourcelist\.xml$/m);
      assert.deepEqual(err, []);

      // A robots.txt publish did not write is left alone (and said); --described-by links elsewhere.
      await writeFile(join(out, 'robots.txt'), 'User-agent: *\nDisallow: /private/\n');
      const out2: string[] = [];
      assert.equal(
        await runPublish({ ...opts, describedBy: '/about-us', stderr: (t) => void out2.push(t) }),
        0,
        out2.join(''),
      );
      assert.equal(await readFile(join(out, 'robots.txt'), 'utf8'), 'User-agent: *\nDisallow: /private/\n');
      assert.match(out2.join(''), /robots\.txt was not written by publish/);
      const sd = await readFile(join(out, '.well-known', 'resourcesync'), 'utf8');
      assert.match(sd, /rel="describedby" href="https:\/\/example\.org\/about-us"/);
      assert.ok(existsSync(join(out, 'data', 'resourcesync', 'about.html')), 'the earlier page stays');
    } finally {
      await cleanup();
    }
  });
});
