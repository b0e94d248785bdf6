import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { isResourceSyncError } from '../../src/core/errors.js';
import type { Entry } from '../../src/core/model.js';
import {
  BlobStore,
  type ChangeRecord,
  openSqliteStore,
  type ResourceLink,
  SCHEMA_VERSION,
  Source,
  type SourceStore,
} from '../../src/source/index.js';
import { bytes, crawl, tempDir } from './helpers.js';

async function withStore(fn: (store: SourceStore, dir: string) => Promise<void>): Promise<void> {
  const { dir, cleanup } = await tempDir();
  const store = await openSqliteStore({ path: join(dir, 'source.db') });
  try {
    await fn(store, dir);
  } finally {
    await store.close();
    await cleanup();
  }
}

async function allChanges(store: SourceStore): Promise<ChangeRecord[]> {
  const snap = await store.snapshot();
  const out: ChangeRecord[] = [];
  try {
    for await (const c of snap.changes()) out.push(c);
  } finally {
    await snap.close();
  }
  return out;
}

const LINKS: ResourceLink[] = [
  {
    rel: 'describedby',
    href: 'items/1/dc.xml',
    type: 'application/xml',
    length: 12,
    hashes: { md5: 'a'.repeat(32) },
    modifiedMs: Date.UTC(2024, 0, 2, 3, 4, 5),
  },
  { rel: 'duplicate', href: 'https://mirror.example.net/items/1/a.pdf', pri: 1 },
  { rel: 'duplicate', href: 'gsiftp://grid.example.net/items/1/a.pdf', pri: 2, encoding: 'gzip' },
  { rel: 'collection', href: 'https://repo.example.org/collections/7' },
];

describe('per-resource links (§14) in the SQLite store', () => {
  it('keeps links with the inventory and the change log, in order, through every read path', async () => {
    await withStore(async (store) => {
      const input = {
        uri: 'items/1/a.pdf',
        change: 'created' as const,
        setName: 's',
        length: 3,
        lastmodMs: 1_700_000_000_000,
        links: LINKS,
      };
      const [rec] = await store.recordChanges([input, { uri: 'plain', change: 'created', setName: 's', length: 1 }]);
      assert.deepEqual(rec?.links, LINKS);
      const got = await store.getResource('items/1/a.pdf');
      assert.deepEqual(got?.links, LINKS);
      assert.deepEqual(store.recordOf?.(input), got, 'recordOf predicts the stored record, links included');
      assert.equal((await store.getResource('plain'))?.links, undefined, 'no links: the field is absent');
      assert.deepEqual(store.resourcesFromSync?.('items/1/a.pdf', 1)[0]?.links, LINKS);
      const paged = [];
      for await (const r of store.resources()) paged.push(r);
      assert.deepEqual(paged[0]?.links, LINKS);
      const snap = await store.snapshot();
      try {
        const viaSnap = [];
        for await (const r of snap.resources('s')) viaSnap.push(r);
        assert.deepEqual(viaSnap[0]?.links, LINKS);
        const viaSync = [...(snap.resourcesSync?.('s') ?? [])];
        assert.deepEqual(viaSync[0]?.links, LINKS);
        assert.equal(viaSync[1]?.links, undefined);
      } finally {
        await snap.close();
      }
      // An update replaces the links (none given: none kept); a deletion carries none.
      await store.recordChanges([{ uri: 'items/1/a.pdf', change: 'updated', setName: 's', length: 4 }]);
      assert.equal((await store.getResource('items/1/a.pdf'))?.links, undefined);
      await store.recordChanges([{ uri: 'plain', change: 'deleted', setName: 's', links: LINKS }]);
      const changes = await allChanges(store);
      assert.deepEqual(
        changes.map((c) => c.links),
        [LINKS, undefined, undefined, undefined],
      );
    });
  });

  it('refuses bad links with the resource, link and field named, recording nothing', async () => {
    await withStore(async (store) => {
      const cases: [ResourceLink[], RegExp][] = [
        [[{ rel: '', href: 'x' }], /a: link 1: rel must be a non-empty string/],
        [
          [
            { rel: 'via', href: 'x' },
            { rel: 'via', href: '' },
          ],
          /a: link 2: href/,
        ],
        [[{ rel: 'duplicate', href: 'x', pri: 0 }], /pri must be an integer 1\.\.999999, not 0/],
        [[{ rel: 'duplicate', href: 'x', length: -1 }], /length must be an integer >= 0/],
        [[{ rel: 'via', href: 'x\ny' }], /href must be a non-empty string/],
        [[{ rel: 'via', href: 'x', hashes: { md5: 'zz' } }], /hash md5 must be hex digits/],
        [Array.from({ length: 65 }, () => ({ rel: 'via', href: 'x' })), /65 links, at most 64/],
      ];
      for (const [links, message] of cases)
        await assert.rejects(
          store.recordChanges([{ uri: 'a', change: 'created', setName: 's', length: 1, links }]),
          (e) => isResourceSyncError(e, 'RS_INVALID_VALUE') && message.test((e as Error).message),
          String(message),
        );
      assert.equal((await store.head()).seq, 0);
      assert.equal(await store.countResources(), 0);
    });
  });

  it('migrates a database of the schema before links (version 1) and refuses a newer one', async () => {
    const { dir, cleanup } = await tempDir();
    try {
      const path = join(dir, 'old.db');
      // The schema as written before migrations existed (user_version 0), with a resource and a change.
      const db = new Database(path);
      db.exec(`
        CREATE TABLE resources (uri TEXT PRIMARY KEY, set_name TEXT NOT NULL, length INTEGER NOT NULL, type TEXT,
          md5 TEXT, sha1 TEXT, sha256 TEXT, lastmod_ms INTEGER NOT NULL, file_id TEXT) WITHOUT ROWID;
        CREATE INDEX resources_by_set ON resources(set_name, uri);
        CREATE TABLE changes (seq INTEGER PRIMARY KEY, uri TEXT NOT NULL, change TEXT NOT NULL, datetime_ms INTEGER NOT NULL,
          set_name TEXT NOT NULL, length INTEGER, type TEXT, md5 TEXT, sha1 TEXT, sha256 TEXT, lastmod_ms INTEGER);
        CREATE INDEX changes_by_set ON changes(set_name, seq);
        CREATE TABLE change_lists (set_name TEXT NOT NULL, number INTEGER NOT NULL, from_ms INTEGER NOT NULL,
          until_ms INTEGER, count INTEGER NOT NULL DEFAULT 0, last_seq INTEGER NOT NULL DEFAULT 0,
          PRIMARY KEY (set_name, number)) WITHOUT ROWID;
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
        INSERT INTO resources VALUES ('old.txt', 's', 5, 'text/plain', NULL, NULL, NULL, 1000, NULL);
        INSERT INTO changes VALUES (1, 'old.txt', 'created', 2000, 's', 5, 'text/plain', NULL, NULL, NULL, 1000);
        INSERT INTO change_lists VALUES ('s', 1, 2000, NULL, 1, 1);
      `);
      db.close();
      const store = await openSqliteStore({ path });
      try {
        assert.deepEqual(await store.getResource('old.txt'), {
          uri: 'old.txt',
          setName: 's',
          length: 5,
          type: 'text/plain',
          hashes: {},
          lastmodMs: 1000,
        });
        await store.recordChanges([{ uri: 'new.txt', change: 'created', setName: 's', length: 1, links: LINKS }]);
        assert.deepEqual((await store.getResource('new.txt'))?.links, LINKS);
        assert.deepEqual(
          (await allChanges(store)).map((c) => [c.seq, c.uri, c.links]),
          [
            [1, 'old.txt', undefined],
            [2, 'new.txt', LINKS],
          ],
        );
      } finally {
        await store.close();
      }
      const check = new Database(path, { readonly: true });
      assert.equal(check.pragma('user_version', { simple: true }), SCHEMA_VERSION);
      check.close();
      // Opening again does not migrate twice.
      await (await openSqliteStore({ path })).close();

      const newer = new Database(path);
      newer.pragma(`user_version = ${SCHEMA_VERSION + 1}`);
      newer.close();
      await assert.rejects(
        openSqliteStore({ path }),
        (e) => isResourceSyncError(e, 'RS_STORE') && /schema version 3 is newer/.test((e as Error).message),
      );
    } finally {
      await cleanup();
    }
  });
});

describe('per-resource links in the published documents', () => {
  it('emits rs:ln in Resource Lists, Change Lists and both dump manifests, hrefs resolved', async () => {
    const { dir, cleanup } = await tempDir();
    const store = await openSqliteStore({ path: join(dir, 'source.db') });
    try {
      const source = await Source.open({
        store,
        baseUrl: 'https://repo.example.org/base/',
        siteDir: join(dir, 'site'),
        blobs: await BlobStore.open({ dir: join(dir, 'blobs') }),
        fsync: false,
      });
      await source.recordChanges([
        { uri: 'items/1/a.pdf', change: 'created', type: 'application/pdf', content: () => bytes('pdf'), links: LINKS },
        {
          uri: 'items/1/dc.xml',
          change: 'created',
          type: 'application/xml',
          content: () => bytes('<dc/>'),
          links: [{ rel: 'describes', href: 'items/1/a.pdf', type: 'application/pdf' }],
        },
        { uri: 'items/2/b c.txt', change: 'created', content: () => bytes('b'), links: [{ rel: 'via', href: 'b c' }] },
      ]);
      const { docs } = await crawl(source, source.sourceDescriptionUrl);
      const expected = [
        {
          rel: 'describedby',
          href: 'https://repo.example.org/base/items/1/dc.xml',
          hash: `md5:${'a'.repeat(32)}`,
          length: 12,
          modified: '2024-01-02T03:04:05Z',
          type: 'application/xml',
        },
        { rel: 'duplicate', href: 'https://mirror.example.net/items/1/a.pdf', pri: 1 },
        { rel: 'duplicate', href: 'gsiftp://grid.example.net/items/1/a.pdf', pri: 2, encoding: 'gzip' },
        { rel: 'collection', href: 'https://repo.example.org/collections/7' },
      ];
      const kinds = ['resource-list', 'change-list', 'resource-dump-manifest', 'change-dump-manifest'] as const;
      for (const kind of kinds) {
        const entries = docs.filter((d) => d.doc.kind === kind).flatMap((d) => d.doc.entries);
        const byLoc = new Map<string, Entry>(entries.map((e) => [e.loc, e]));
        const a = byLoc.get('https://repo.example.org/base/items/1/a.pdf');
        assert.ok(a !== undefined, `${kind} lists a.pdf`);
        assert.deepEqual(a.links, expected, `${kind}: links of a.pdf`);
        assert.deepEqual(
          byLoc.get('https://repo.example.org/base/items/1/dc.xml')?.links,
          [{ rel: 'describes', href: 'https://repo.example.org/base/items/1/a.pdf', type: 'application/pdf' }],
          `${kind}: links of dc.xml`,
        );
        assert.deepEqual(
          byLoc.get('https://repo.example.org/base/items/2/b%20c.txt')?.links,
          [{ rel: 'via', href: 'https://repo.example.org/base/b%20c' }],
          `${kind}: a relative href is encoded like a resource key`,
        );
      }
      await source.close();
    } finally {
      await store.close();
      await cleanup();
    }
  });
});
