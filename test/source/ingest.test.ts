import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { createSourceHandler, type SourceHandler } from '../../src/source/http/handler.js';
import { openRepositorySource, type Repository, type RepositorySource } from '../../src/source/index.js';
import { createSourceServer } from '../../src/source/server.js';
import { createIngestRoute, INGEST_PATH } from '../../src/source/ingest.js';
import { tempDir } from './helpers.js';
import { spawn } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

const TOKEN = 'a-long-enough-test-token';
const MD5_A = '0cc175b9c0f1b6a831c399e269772661';

async function withIngest(
  fn: (handler: SourceHandler, site: RepositorySource) => Promise<void>,
  maxBodyBytes?: number,
): Promise<void> {
  const { dir, cleanup } = await tempDir();
  const site = await openRepositorySource({
    repository: { async *list() {} },
    baseUrl: 'http://repo.example.org/base/',
    stateDir: join(dir, 'state'),
    fsync: false,
  });
  try {
    await site.sync();
    const handler = createSourceHandler(site);
    handler.mount(
      INGEST_PATH,
      createIngestRoute({
        token: TOKEN,
        baseUrl: site.baseUrl,
        apply: async (changes) => ({ recorded: changes.length, ...(await site.record(changes)) }),
        ...(maxBodyBytes === undefined ? {} : { maxBodyBytes }),
      }),
      { methods: ['POST'] },
    );
    await fn(handler, site);
  } finally {
    await site.close();
    await cleanup();
  }
}

function post(handler: SourceHandler, body: string, type: string, token: string | null = TOKEN) {
  return handler.request(INGEST_PATH, {
    method: 'POST',
    headers: { 'content-type': type, ...(token === null ? {} : { authorization: `Bearer ${token}` }) },
    body,
  });
}

const CHANGE_LIST = `<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">
  <rs:md capability="changelist" from="2024-01-01T00:00:00Z"/>
  <url>
    <loc>http://repo.example.org/base/items/1/a%20b.pdf</loc>
    <lastmod>2024-01-02T00:00:00Z</lastmod>
    <rs:md change="created" length="1" hash="md5:${MD5_A}" type="application/pdf"/>
    <rs:ln rel="describedby" href="http://repo.example.org/base/items/1/dc.xml" type="application/xml" modified="2024-01-02T00:00:00Z"/>
  </url>
  <url>
    <loc>https://elsewhere.example.net/x</loc>
    <rs:md change="created" length="1" hash="md5:${MD5_A}"/>
  </url>
</urlset>
`;

describe('push API (ingest route)', () => {
  it('refuses requests without the right bearer token (401), and other methods (405)', async () => {
    await withIngest(async (handler, site) => {
      for (const token of [null, 'wrong-token-wrong-token', `${TOKEN}x`, TOKEN.toUpperCase()]) {
        const res = await post(handler, CHANGE_LIST, 'application/xml', token);
        assert.equal(res.status, 401);
        assert.match(res.headers.get('www-authenticate') ?? '', /^Bearer /);
        await res.body?.cancel();
      }
      const get = await handler.request(INGEST_PATH);
      assert.equal(get.status, 405);
      await get.body?.cancel();
      assert.equal((await site.store.head()).seq, 0, 'nothing recorded');
    });
  });

  it('records a Change List: keys under the base URL, links, metadata', async () => {
    await withIngest(async (handler, site) => {
      const res = await post(handler, CHANGE_LIST, 'application/xml; charset=utf-8');
      assert.equal(res.status, 200, await res.clone().text());
      assert.deepEqual(await res.json(), { recorded: 2, created: 2, updated: 0, deleted: 0, unchanged: 0 });
      const r = await site.store.getResource('items/1/a b.pdf');
      assert.equal(r?.type, 'application/pdf');
      assert.equal(r?.lastmodMs, Date.UTC(2024, 0, 2));
      assert.deepEqual(r?.links, [
        {
          rel: 'describedby',
          href: 'http://repo.example.org/base/items/1/dc.xml',
          type: 'application/xml',
          modifiedMs: Date.UTC(2024, 0, 2),
        },
      ]);
      assert.equal((await site.store.getResource('https://elsewhere.example.net/x'))?.length, 1);
    });
  });

  it('records JSON lines, and names the line of bad input (nothing of the request recorded)', async () => {
    await withIngest(async (handler, site) => {
      const ok = [
        JSON.stringify({
          uri: 'a.txt',
          change: 'created',
          length: 1,
          hash: `md5:${MD5_A}`,
          lastmod: '2024-01-01T00:00:00Z',
        }),
        '',
        JSON.stringify({
          uri: 'http://repo.example.org/base/b.txt',
          change: 'created',
          length: 1,
          hashes: { md5: MD5_A },
          links: [{ rel: 'via', href: 'https://origin.example.net/b' }],
        }),
      ].join('\n');
      const res = await post(handler, ok, 'application/x-ndjson');
      assert.equal(res.status, 200, await res.clone().text());
      assert.deepEqual((await site.store.getResource('b.txt'))?.links, [
        { rel: 'via', href: 'https://origin.example.net/b' },
      ]);
      const head = (await site.store.head()).seq;
      const cases: [string, RegExp][] = [
        [
          `${JSON.stringify({ uri: 'c', change: 'created', length: 1, hash: `md5:${MD5_A}` })}\n{"uri": "d", "change": "moved"}`,
          /line 2: "change" must be created, updated or deleted/,
        ],
        ['{"uri": "c", "change": "created"\n', /line 1: not JSON/],
        ['{"change": "deleted"}', /line 1: "uri" is missing/],
        ['{"uri": "c", "change": "created", "length": -3}', /line 1: "length" must be an integer >= 0/],
        [
          '{"uri": "c", "change": "created", "lastmod": "yesterday"}',
          /line 1: "lastmod": "yesterday" is not a W3C Datetime/,
        ],
        [
          '{"uri": "c", "change": "created", "length": 1, "hash": "md5:0cc175b9c0f1b6a831c399e269772661", "links": [{"rel": "via"}]}',
          /c: link 1: href must be a non-empty string/,
        ],
        // Values that were taken as they came (a number as a digest answered 500; "../x" named a set directory).
        [
          '{"uri": "c", "change": "updated", "length": 1, "hashes": {"md5": 5}}',
          /^line 1: "hashes": 5 is not a md5 hex digest/,
        ],
        [
          '{"uri": "c", "change": "updated", "hashes": {"md5": "zz"}}',
          /^line 1: "hashes": "zz" is not a md5 hex digest/,
        ],
        [
          '{"uri": "c", "change": "updated", "hashes": {"crc": "00"}}',
          /^line 1: "hashes": "crc" is not md5, sha-1 or sha-256/,
        ],
        [
          '{"uri": "c", "change": "updated", "hash": "foo:bar"}',
          /^line 1: "hash": hash "foo:bar" is not a foo hex digest/,
        ],
        ['{"uri": "c", "change": "updated", "hash": "sha-512:00"}', /^line 1: "hash": no md5, sha-1 or sha-256 digest/],
        [
          '{"uri": "c", "change": "created", "setName": "../x"}',
          /^line 1: "setName" "\.\.\/x" is not a safe path segment/,
        ],
        [
          '{"uri": "c", "change": "created", "type": "not a type"}',
          /^line 1: "type": "not a type" is not a media type/,
        ],
        ['{"uri": "c", "change": "created", "lastmod": 1e300}', /^line 1: "lastmod" 1e\+300 is not epoch ms/],
      ];
      for (const [body, message] of cases) {
        const bad = await post(handler, body, 'application/x-ndjson');
        assert.equal(bad.status, 400, body);
        assert.match(((await bad.json()) as { error: string }).error, message);
      }
      assert.equal((await site.store.head()).seq, head);
    });
  });

  it('names the entry of a bad Change List, refuses DTDs, other media types and bodies over the bound', async () => {
    await withIngest(async (handler, site) => {
      const noChange = CHANGE_LIST.replace('change="created" length="1"', 'length="1"');
      let res = await post(handler, noChange, 'application/xml');
      assert.equal(res.status, 400);
      assert.match(((await res.json()) as { error: string }).error, /line 4: <url> <rs:md change>: missing/);
      const dtd = `<?xml version="1.0"?>\n<!DOCTYPE urlset [<!ENTITY x "y">]>\n${CHANGE_LIST.split('\n').slice(1).join('\n')}`;
      res = await post(handler, dtd, 'application/xml');
      assert.equal(res.status, 400);
      assert.match(((await res.json()) as { error: string }).error, /DTD|DOCTYPE/i);
      res = await post(handler, CHANGE_LIST.replace('changelist', 'resourcelist'), 'application/xml');
      assert.equal(res.status, 400);
      res = await post(handler, '{}', 'text/plain');
      assert.equal(res.status, 415);
      await res.body?.cancel();
      res = await post(
        handler,
        `${'\n'.repeat(5000)}${JSON.stringify({ uri: 'x', change: 'deleted' })}`,
        'application/x-ndjson',
      );
      assert.equal(res.status, 413);
      await res.body?.cancel();
      assert.equal((await site.store.head()).seq, 0);
    }, 4096);
  });
});

describe('push API: changes without length or hash (a repository Source over real HTTP)', () => {
  /** A repository Source served on 127.0.0.1 with the ingest route; `origin` is a real HTTP server too. */
  async function withServedRepository(
    repository: Repository,
    fn: (
      push: (body: string, type?: string) => Promise<{ status: number; body: string }>,
      site: RepositorySource,
    ) => Promise<void>,
  ): Promise<void> {
    const { dir, cleanup } = await tempDir();
    const site = await openRepositorySource({
      repository,
      baseUrl: 'http://repo.example.org/base/',
      stateDir: join(dir, 'state'),
      fsync: false,
    });
    const errors: unknown[] = [];
    const server = createSourceServer(site, { onError: (e) => errors.push(e) });
    try {
      await site.sync();
      server.handler.mount(
        INGEST_PATH,
        createIngestRoute({
          token: TOKEN,
          baseUrl: site.baseUrl,
          apply: (changes) => site.record(changes).then((r) => ({ ...r })),
        }),
        { methods: ['POST'] },
      );
      const { url } = await server.listen(0, '127.0.0.1');
      const push = async (body: string, type = 'application/x-ndjson') => {
        const res = await fetch(new URL(INGEST_PATH, url), {
          method: 'POST',
          headers: { authorization: `Bearer ${TOKEN}`, 'content-type': type },
          body,
        });
        return { status: res.status, body: await res.text() };
      };
      await fn(push, site);
      assert.deepEqual(errors, [], 'no request ended in a 500');
    } finally {
      await server.close();
      await site.close();
      await cleanup();
    }
  }

  const clOf = (loc: string) =>
    `<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">\n` +
    `<rs:md capability="changelist" from="2024-01-01T00:00:00Z"/>\n<url><loc>${loc}</loc><rs:md change="updated"/></url>\n</urlset>\n`;

  it('learns length and hashes from the bytes the repository opens (JSON lines and a Change List entry)', async () => {
    const content = new Map([
      ['a.txt', 'a'],
      ['b.txt', 'bb'],
    ]);
    await withServedRepository(
      {
        async *list() {},
        open: (r) => {
          const text = content.get(r.uri);
          return text === undefined
            ? undefined
            : (async function* () {
                yield Buffer.from(text);
              })();
        },
      },
      async (push, site) => {
        let res = await push(`${JSON.stringify({ uri: 'a.txt', change: 'updated' })}\n`);
        assert.equal(res.status, 200, res.body);
        assert.deepEqual(JSON.parse(res.body), { created: 1, updated: 0, deleted: 0, unchanged: 0 });
        const a = await site.store.getResource('a.txt');
        assert.equal(a?.length, 1);
        assert.equal(a?.hashes.md5, MD5_A);
        res = await push(clOf('http://repo.example.org/base/b.txt'), 'application/xml');
        assert.equal(res.status, 200, res.body);
        assert.equal((await site.store.getResource('b.txt'))?.length, 2);
        // The repository has no bytes for c.txt: nothing to learn its fixity from, nothing recorded (all or nothing).
        const head = (await site.store.head()).seq;
        res = await push(
          [
            JSON.stringify({ uri: 'a.txt', change: 'deleted' }),
            JSON.stringify({ uri: 'c.txt', change: 'created' }),
          ].join('\n'),
        );
        assert.equal(res.status, 400, res.body);
        assert.match(
          JSON.parse(res.body).error,
          /^line 2: no length and hashes given, and the repository has no bytes/,
        );
        assert.equal((await site.store.head()).seq, head);
        assert.ok(await site.store.getResource('a.txt'), 'the deletion of line 1 was not recorded');
      },
    );
  });

  it('answers 400 naming the line when the repository cannot give bytes at all, 502 when its origin fails', async () => {
    await withServedRepository({ async *list() {} }, async (push, site) => {
      const res = await push(clOf('http://repo.example.org/base/x.txt'), 'application/xml');
      assert.equal(res.status, 400, res.body);
      assert.match(
        JSON.parse(res.body).error,
        /^line 3: no length and hashes given, and the repository has neither open\(\) nor origin\(\)/,
      );
      // With fixity the same change needs no bytes.
      const ok = await push(
        `${JSON.stringify({ uri: 'x.txt', change: 'created', length: 1, hash: `md5:${MD5_A}` })}\n`,
      );
      assert.equal(ok.status, 200, ok.body);
      assert.equal((await site.store.getResource('x.txt'))?.length, 1);
    });
    const origin = createServer((req, res) => {
      if (req.url === '/ok.txt') res.end('a');
      else if (req.url === '/gone.txt') res.writeHead(404).end();
      else res.writeHead(500).end('boom');
    });
    await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
    const port = (origin.address() as AddressInfo).port;
    try {
      await withServedRepository(
        { async *list() {}, origin: (r) => `http://127.0.0.1:${port}/${r.uri}` },
        async (push, site) => {
          let res = await push(`${JSON.stringify({ uri: 'ok.txt', change: 'created' })}\n`);
          assert.equal(res.status, 200, res.body);
          assert.equal((await site.store.getResource('ok.txt'))?.hashes.md5, MD5_A);
          res = await push(`\n${JSON.stringify({ uri: 'gone.txt', change: 'created' })}\n`);
          assert.equal(res.status, 400, res.body);
          assert.match(JSON.parse(res.body).error, /^line 2: no length and hashes given/);
          res = await push(`${JSON.stringify({ uri: 'broken.txt', change: 'updated' })}\n`);
          assert.equal(res.status, 502, res.body);
          assert.match(JSON.parse(res.body).error, /broken\.txt: the origin .* answered 500/);
        },
      );
    } finally {
      await new Promise((r) => origin.close(r));
    }
  });
});

describe('serve <dir> --ingest-token (the push API of the directory Source)', () => {
  /**
   * `serve <coll>` (a collection holding `a.txt`, no watcher) in a child with `args`, once it listens; `stop`
   * ends it and removes its directory.
   */
  async function serveChild(
    args: readonly string[],
    env: NodeJS.ProcessEnv = process.env,
  ): Promise<{ coll: string; listening: { url: string; ingest?: string }; stop: () => Promise<void> }> {
    const main = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'src', 'cli', 'main.js');
    const { dir, cleanup } = await tempDir();
    const coll = join(dir, 'coll');
    await mkdir(coll);
    await writeFile(join(coll, 'a.txt'), 'a');
    const child = spawn(
      process.execPath,
      [
        main,
        'serve',
        coll,
        '--port',
        '0',
        '--json',
        '--no-watch',
        '--no-notify',
        '--state',
        join(dir, 'state'),
        ...args,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], env },
    );
    const stop = async (): Promise<void> => {
      if (child.exitCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        await exited;
      }
      await cleanup();
    };
    let out = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
    });
    const end = Date.now() + 60_000;
    for (;;) {
      const line = out.split('\n').find((l) => l.includes('"listening"'));
      if (line !== undefined) return { coll, listening: JSON.parse(line) as { url: string; ingest?: string }, stop };
      if (Date.now() > end || child.exitCode !== null) {
        await stop();
        throw new Error(`serve did not start: ${out}`);
      }
      await sleep(50);
    }
  }

  it('re-checks the pushed paths at once (no watcher), and refuses a wrong token', async () => {
    const serve = await serveChild([], { ...process.env, RESOURCESYNC_INGEST_TOKEN: TOKEN });
    const { coll } = serve;
    const url = serve.listening.url;
    try {
      await writeFile(join(coll, 'pushed.txt'), 'pushed');
      const push = (token: string) =>
        fetch(`${url}resourcesync/ingest`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/x-ndjson' },
          body: `${JSON.stringify({ uri: 'pushed.txt', change: 'created' })}\n`,
        });
      const refused = await push('not-the-token-at-all');
      assert.equal(refused.status, 401);
      await refused.body?.cancel();
      const res = await push(TOKEN);
      assert.equal(res.status, 200);
      assert.deepEqual(await res.json(), { checked: 1, created: 1, updated: 0, deleted: 0 });
      const cl = await (await fetch(`${url}resourcesync/default/changelist.xml`)).text();
      const lists = [
        cl,
        ...(await Promise.all(
          [...cl.matchAll(/<loc>([^<]*changelist-\d+\.xml)<\/loc>/g)].map(async (m) => (await fetch(m[1]!)).text()),
        )),
      ];
      assert.ok(
        lists.some((l) => l.includes(`<loc>${url}pushed.txt</loc>`)),
        'the pushed file is in the Change List',
      );
      // Bad input: a clear 400 naming the line, and no resource made up from a path the tree does not name
      // (before: "/a.txt" and "sub/" were recorded as the phantom resources "//a.txt" and "sub//x.txt").
      await mkdir(join(coll, 'sub'));
      await writeFile(join(coll, 'sub', 'x.txt'), 'x');
      const pushBody = (body: string, type = 'application/x-ndjson') =>
        fetch(`${url}resourcesync/ingest`, {
          method: 'POST',
          headers: { authorization: `Bearer ${TOKEN}`, 'content-type': type },
          body,
        });
      const bad: [string, RegExp, string?][] = [
        ['{"uri": "/a.txt", "change": "updated"}', /^line 1: "uri": "\/a\.txt" is not a resource path/],
        ['\n{"uri": "sub/", "change": "updated"}', /^line 2: "uri": "sub\/" is not a resource path/],
        ['{"uri": "sub//x.txt", "change": "updated"}', /^line 1: "uri": "sub\/\/x\.txt" is not a resource path/],
        ['{"uri": "../a.txt", "change": "updated"}', /^line 1: "uri": "\.\.\/a\.txt" is not a resource path/],
        ['{"uri": "a.txt", "change": "moved"}', /^line 1: "change" must be created, updated or deleted, not "moved"/],
        ['{"uri": "a.txt", "change": "updated"}\n{"uri": "a.txt", "change"', /^line 2: not JSON/],
        [
          '{"uri": "a.txt", "change": "updated"}\n{"uri": "http://elsewhere.example.net/a.txt", "change": "updated"}',
          /^line 2: not under the Source's base URL \(http:\/\/elsewhere\.example\.net\/a\.txt\)/,
        ],
        [
          `<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">\n<rs:md capability="changelist" from="2024-01-01T00:00:00Z"/>\n<url><loc>${url}sub/x.txt</loc><rs:md change="renamed"/></url>\n</urlset>`,
          /^line 3: <url> <rs:md change>: "renamed"/,
          'application/xml',
        ],
      ];
      for (const [body, message, type] of bad) {
        const r = await pushBody(body, type);
        assert.equal(r.status, 400, body);
        assert.match(((await r.json()) as { error: string }).error, message, body);
      }
      const rl = await (await fetch(`${url}resourcesync/default/resourcelist.xml`)).text();
      assert.deepEqual(
        [...rl.matchAll(/<loc>([^<]*)<\/loc>/g)].map((m) => m[1]),
        [`${url}a.txt`, `${url}pushed.txt`],
        'nothing recorded from the bad requests',
      );
      // A change without length or hash, as a Change List entry (loc + rs:md change only): the file tells.
      const cl2 = await pushBody(
        `<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">\n<rs:md capability="changelist" from="2024-01-01T00:00:00Z"/>\n<url><loc>${url}sub/x.txt</loc><rs:md change="created"/></url>\n</urlset>`,
        'application/xml',
      );
      assert.equal(cl2.status, 200);
      assert.deepEqual(await cl2.json(), { checked: 1, created: 1, updated: 0, deleted: 0 });
    } finally {
      await serve.stop();
    }
  });

  it('mounts the route under the base URL with a path (<base>resourcesync/ingest), as the help says', async () => {
    const serve = await serveChild([
      '--no-explorer',
      '--base-url',
      'http://repo.example.org/pub/',
      '--ingest-token',
      TOKEN,
    ]);
    const { coll, listening } = serve;
    try {
      assert.equal(listening.ingest, 'http://repo.example.org/pub/resourcesync/ingest');
      await writeFile(join(coll, 'b.txt'), 'b');
      const push = (path: string) =>
        fetch(`${listening.url}${path}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/x-ndjson' },
          body: `${JSON.stringify({ uri: 'http://repo.example.org/pub/b.txt', change: 'created' })}\n`,
        });
      const res = await push('pub/resourcesync/ingest');
      assert.equal(res.status, 200, await res.clone().text());
      assert.deepEqual(await res.json(), { checked: 1, created: 1, updated: 0, deleted: 0 });
      const outside = await push('resourcesync/ingest');
      assert.notEqual(outside.status, 200, 'not mounted outside the base path');
      await outside.body?.cancel();
    } finally {
      await serve.stop();
    }
  });
});
