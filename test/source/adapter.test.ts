import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { createSourceHandler } from '../../src/source/http/handler.js';
import {
  openRepositorySource,
  type Repository,
  type RepositoryChange,
  type RepositorySource,
} from '../../src/source/index.js';
import { readDocument } from '../../src/xml/index.js';
import { crawl, tempDir } from './helpers.js';

const md5 = (s: string): string => createHash('md5').update(s).digest('hex');

/** A repository held in a Map (uri -> text), with a feed of the changes made through `put` / `remove`. */
function memoryRepository(initial: Record<string, string>): Repository & {
  data: Map<string, string>;
  put(uri: string, text: string): void;
  remove(uri: string): void;
  opened: string[];
} {
  const data = new Map(Object.entries(initial));
  const feed: RepositoryChange[] = [];
  const opened: string[] = [];
  return {
    data,
    opened,
    put(uri, text) {
      const had = data.has(uri);
      data.set(uri, text);
      feed.push({ uri, change: had ? 'updated' : 'created', type: 'text/plain' });
    },
    remove(uri) {
      data.delete(uri);
      feed.push({ uri, change: 'deleted' });
    },
    async *list() {
      for (const uri of data.keys()) yield { uri, type: 'text/plain' };
    },
    async changes(cursor) {
      const from = cursor === undefined ? 0 : Number(cursor);
      return { changes: feed.slice(from), cursor: String(feed.length) };
    },
    async *open(r) {
      opened.push(r.uri);
      const text = data.get(r.uri);
      if (text !== undefined) yield Buffer.from(text);
    },
  };
}

async function withSource(
  repository: Repository,
  fn: (site: RepositorySource, warnings: string[]) => Promise<void>,
  options: { blobMaxBytes?: number } = {},
): Promise<void> {
  const { dir, cleanup } = await tempDir();
  const warnings: string[] = [];
  const site = await openRepositorySource({
    repository,
    baseUrl: 'http://repo.example.org/',
    stateDir: join(dir, 'state'),
    fsync: false,
    onWarning: (m) => warnings.push(m),
    ...options,
  });
  try {
    await fn(site, warnings);
  } finally {
    await site.close();
    await cleanup();
  }
}

describe('adapter API (openRepositorySource)', () => {
  it('takes a baseline from list(), learning length and hashes from the bytes, and serves them', async () => {
    const repo = memoryRepository({ 'a.txt': 'alpha', 'dir/b c.txt': 'beta' });
    await withSource(repo, async (site) => {
      assert.deepEqual(await site.sync(), { created: 2, updated: 0, deleted: 0, unchanged: 0 });
      assert.equal((await site.store.head()).seq, 0, 'the baseline is inventory only');
      const a = await site.store.getResource('a.txt');
      assert.equal(a?.length, 5);
      assert.equal(a?.hashes.md5, md5('alpha'));
      const handler = createSourceHandler(site);
      const res = await handler.request('/dir/b%20c.txt');
      assert.equal(res.status, 200);
      assert.equal(await res.text(), 'beta');
      assert.equal(res.headers.get('content-length'), '4');
      // A second sync with nothing changed records nothing.
      assert.deepEqual(await site.sync(), { created: 0, updated: 0, deleted: 0, unchanged: 2 });
      const { docs } = await crawl(site, site.sourceDescriptionUrl);
      assert.ok(docs.some((d) => d.doc.kind === 'resource-list' && d.doc.entries.length === 2));
    });
  });

  it('records what the feed reports (skipping what is already stored) and what a sync finds missing', async () => {
    const repo = memoryRepository({ 'a.txt': 'alpha' });
    await withSource(repo, async (site) => {
      await site.sync();
      repo.put('b.txt', 'beta');
      repo.put('a.txt', 'alpha 2');
      assert.deepEqual(await site.pull(), { created: 1, updated: 1, deleted: 0, unchanged: 0 });
      assert.deepEqual(await site.pull(), { created: 0, updated: 0, deleted: 0, unchanged: 0 }, 'cursor kept');
      repo.remove('b.txt');
      await site.pull();
      // A change the feed never reported: found by a sync (reconcile), deletions included.
      repo.data.delete('a.txt');
      repo.data.set('c.txt', 'gamma');
      assert.deepEqual(await site.sync(), { created: 1, updated: 0, deleted: 1, unchanged: 0 });
      const snap = await site.store.snapshot();
      const log: [string, string][] = [];
      for await (const c of snap.changes()) log.push([c.uri, c.change]);
      await snap.close();
      assert.deepEqual(log, [
        ['b.txt', 'created'],
        ['a.txt', 'updated'],
        ['b.txt', 'deleted'],
        ['c.txt', 'created'],
        ['a.txt', 'deleted'],
      ]);
    });
  });

  it('takes pushed records with their metadata and links as given, and refuses bad links', async () => {
    const repo = memoryRepository({});
    await withSource(repo, async (site) => {
      await site.sync();
      const links = [{ rel: 'describedby', href: 'meta/x.xml', type: 'application/xml' }];
      repo.data.set('x.pdf', 'pdf!');
      const r = await site.record([
        { uri: 'x.pdf', change: 'created', length: 4, hashes: { md5: md5('pdf!') }, type: 'application/pdf', links },
      ]);
      assert.deepEqual(r, { created: 1, updated: 0, deleted: 0, unchanged: 0 });
      assert.deepEqual(repo.opened, [], 'length and hashes given: the bytes are not read to record it');
      assert.deepEqual((await site.store.getResource('x.pdf'))?.links, links);
      // The same record again is no change; new links are.
      assert.equal(
        (
          await site.record([
            {
              uri: 'x.pdf',
              change: 'updated',
              length: 4,
              hashes: { md5: md5('pdf!') },
              type: 'application/pdf',
              links,
            },
          ])
        ).unchanged,
        1,
      );
      assert.equal(
        (
          await site.record([
            { uri: 'x.pdf', change: 'updated', length: 4, hashes: { md5: md5('pdf!') }, type: 'application/pdf' },
          ])
        ).updated,
        1,
      );
      await assert.rejects(
        site.record([
          { uri: 'y', change: 'created', length: 1, hashes: { md5: md5('y') }, links: [{ rel: 'via', href: '' }] },
        ]),
        /y: link 1: href must be a non-empty string/,
      );
    });
  });

  it('does not serve bytes that no longer match the list (the repository changed without telling)', async () => {
    const repo = memoryRepository({ 'a.txt': 'alpha' });
    await withSource(
      repo,
      async (site, warnings) => {
        await site.sync();
        repo.data.set('a.txt', 'ALPHA');
        const handler = createSourceHandler(site);
        assert.equal((await handler.request('/a.txt')).status, 404);
        assert.match(warnings.join('\n'), /not serving a\.txt: .*do not match the listed sha-256/);
        await site.sync();
        const res = await handler.request('/a.txt');
        assert.equal(await res.text(), 'ALPHA');
      },
      { blobMaxBytes: 0 },
    );
  });

  it('proxies the bytes from an origin when the repository does not open them', async () => {
    const files: Record<string, string> = { '/files/a.txt': 'from the origin' };
    const origin = createServer((req, res) => {
      const body = files[req.url ?? ''];
      res.writeHead(body === undefined ? 404 : 200, { 'content-type': 'text/plain' });
      res.end(body);
    });
    await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
    const port = (origin.address() as AddressInfo).port;
    try {
      const repo: Repository = {
        async *list() {
          yield { uri: 'a.txt', type: 'text/plain' };
        },
        origin: (r) => `http://127.0.0.1:${port}/files/${r.uri}`,
      };
      await withSource(
        repo,
        async (site) => {
          await site.sync();
          assert.equal((await site.store.getResource('a.txt'))?.length, 15);
          const handler = createSourceHandler(site);
          assert.equal(await (await handler.request('/a.txt')).text(), 'from the origin');
          // The Resource Dump gets the proxied bytes too.
          const { packages } = await crawl(site, site.sourceDescriptionUrl);
          assert.equal(packages.length, 1);
          const rl = await site.document('/resourcesync/default/resourcelist.xml');
          const doc = await readDocument(await import('node:fs/promises').then((f) => f.readFile(rl!.path)));
          assert.equal(doc.entries[0]?.md?.length, 15);
        },
        { blobMaxBytes: 0 },
      );
    } finally {
      await new Promise((resolve) => origin.close(resolve));
    }
  });
});
