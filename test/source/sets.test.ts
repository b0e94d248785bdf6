import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { runPublish } from '../../src/cli/publish.js';
import { isResourceSyncError } from '../../src/core/errors.js';
import { openDirectorySource } from '../../src/source/index.js';
import { crawl, tempDir } from './helpers.js';

describe('sets of resources', () => {
  it('splits a directory into sets by configured path patterns, each with its Capability List', async () => {
    const { dir, cleanup } = await tempDir();
    try {
      const coll = join(dir, 'coll');
      await mkdir(join(coll, 'images'), { recursive: true });
      await mkdir(join(coll, 'docs'), { recursive: true });
      await writeFile(join(coll, 'images', 'a.png'), 'png');
      await writeFile(join(coll, 'docs', 'b.pdf'), 'pdf');
      await writeFile(join(coll, 'docs', 'c.txt'), 'txt');
      await writeFile(join(coll, 'readme.md'), 'not in any set');
      const source = await openDirectorySource({
        dir: coll,
        baseUrl: 'http://localhost/',
        stateDir: join(dir, 'state'),
        sets: [
          { name: 'pictures', match: 'images/', describedBy: 'http://localhost/about-pictures.html' },
          { name: 'pdfs', match: /\.pdf$/ },
          { name: 'texts', match: (p: string) => p.endsWith('.txt') },
        ],
        fsync: false,
      });
      try {
        const { docs } = await crawl(source, source.sourceDescriptionUrl);
        const sd = docs.find((d) => d.doc.kind === 'source-description')!;
        assert.deepEqual(
          sd.doc.entries.map((e) => e.loc),
          ['pdfs', 'pictures', 'texts'].map((s) => `http://localhost/resourcesync/${s}/capabilitylist.xml`),
        );
        assert.deepEqual(sd.doc.entries[1]?.links, [
          { rel: 'describedby', href: 'http://localhost/about-pictures.html' },
        ]);
        const lists = Object.fromEntries(
          docs
            .filter((d) => d.doc.kind === 'resource-list')
            .map((d) => [d.url.split('/').at(-2), d.doc.entries.map((e) => e.loc)]),
        );
        assert.deepEqual(lists, {
          pdfs: ['http://localhost/docs/b.pdf'],
          pictures: ['http://localhost/images/a.png'],
          texts: ['http://localhost/docs/c.txt'],
        });
        assert.equal(await source.resource('/readme.md'), undefined, 'a file in no set is not a resource');
        assert.equal(source.capabilityListUrl('/docs/b.pdf'), 'http://localhost/resourcesync/pdfs/capabilitylist.xml');
      } finally {
        await source.close();
      }
      await assert.rejects(
        openDirectorySource({
          dir: coll,
          baseUrl: 'http://localhost/',
          stateDir: join(dir, 'state2'),
          sets: [{ name: '../x' }],
        }),
        (e) => isResourceSyncError(e, 'RS_CONFIG'),
      );
    } finally {
      await cleanup();
    }
  });

  it('never publishes its own output or state when they are inside the collection', async () => {
    const { dir, cleanup } = await tempDir();
    try {
      const coll = join(dir, 'coll');
      await mkdir(coll);
      await writeFile(join(coll, 'f.txt'), 'f');
      const out = join(coll, 'site');
      const args = {
        dir: coll,
        out,
        baseUrl: 'http://localhost/',
        stateDir: join(coll, 'state'),
        progress: false,
        stdout: () => undefined,
        stderr: () => undefined,
      };
      assert.equal(await runPublish(args), 0);
      assert.equal(await runPublish({ ...args, json: true }), 0);
      const source = await openDirectorySource({
        dir: coll,
        baseUrl: 'http://localhost/',
        stateDir: join(coll, 'state'),
        siteDir: out,
      });
      try {
        assert.deepEqual((await source.stats()).resources, 1);
        assert.equal((await source.stats()).seq, 0, 'no change recorded from the output or the state');
      } finally {
        await source.close();
      }
    } finally {
      await cleanup();
    }
  });
});
