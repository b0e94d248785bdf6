/**
 * Change Dump packages are append-only (§13: "As new packages are published, new entries are added to the
 * Change Dump that points at them"): a generation reuses the open Change List's packages already published and
 * adds a package of the changes since; a small last package is merged with the new changes (trickle); a closed
 * list keeps its packages; the state survives a restart. Real Source (library API, SQLite store, blob copies),
 * real ZIP packages read back with yauzl, every document validated.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFile, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { formatDatetime } from '../../src/core/datetime.js';
import type { Entry, ResourceSyncDocument } from '../../src/core/model.js';
import { BlobStore, openSqliteStore, Source, type SourceChange, type SourceLimits } from '../../src/source/index.js';
import type { SourceStore } from '../../src/source/store.js';
import { readDocument } from '../../src/xml/index.js';
import { bytes, checkPackage, crawl, readZip, tempDir } from './helpers.js';

const SET = 'default';
const BASE = 'https://repo.example.org/';

interface Opened {
  readonly store: SourceStore;
  readonly source: Source;
  close(): Promise<void>;
}

async function openSource(dir: string, limits: SourceLimits = {}, blobMaxBytes?: number): Promise<Opened> {
  const store = await openSqliteStore({ path: join(dir, 'source.db') });
  const blobs = await BlobStore.open({
    dir: join(dir, 'blobs'),
    ...(blobMaxBytes === undefined ? {} : { maxBytes: blobMaxBytes }),
  });
  const source = await Source.open({
    store,
    baseUrl: BASE,
    siteDir: join(dir, 'site'),
    blobs,
    sets: [{ name: SET }],
    limits,
    fsync: false,
  });
  return {
    store,
    source,
    close: async () => {
      await source.close();
      await store.close();
    },
  };
}

let tag = 0;
/** `n` changes of resources `r/<first>` ... with new content (or deletions), recorded in batches. */
async function record(
  source: Source,
  first: number,
  n: number,
  change: 'created' | 'updated' | 'deleted' = 'created',
): Promise<void> {
  tag++;
  const batch: SourceChange[] = [];
  for (let i = first; i < first + n; i++) {
    batch.push(
      change === 'deleted'
        ? { uri: `r/${i}`, change }
        : { uri: `r/${i}`, change, type: 'text/plain', content: () => bytes(`version ${tag} of r/${i}`) },
    );
    if (batch.length === 500) await source.recordChanges(batch.splice(0));
  }
  if (batch.length > 0) await source.recordChanges(batch);
}

interface Package {
  readonly name: string;
  readonly path: string;
  readonly entry: Entry;
  readonly manifest: ResourceSyncDocument;
  /** ino, size, mtime of the ZIP file. */
  readonly identity: string;
  readonly sha256: string;
}

/**
 * Generates the Change Dump (waiting for it: a request may be served a big stale one meanwhile) and reads back
 * every package it lists.
 */
async function changeDump(source: Source): Promise<{ doc: ResourceSyncDocument; packages: Package[] }> {
  await source.ensure('changedump', SET);
  const file = await source.document(`/resourcesync/${SET}/changedump.xml`);
  assert.ok(file !== undefined, 'changedump.xml is served');
  const doc = await readDocument(await readFile(file.path));
  assert.equal(doc.kind, 'change-dump');
  const packages: Package[] = [];
  for (const e of doc.entries) {
    const served = await source.document(new URL(e.loc).pathname);
    assert.ok(served !== undefined, `${e.loc} is served`);
    const zip = await readZip(served.path);
    assert.equal(zip[0]?.name, 'manifest.xml');
    const st = await stat(served.path, { bigint: true });
    packages.push({
      name: e.loc.slice(e.loc.lastIndexOf('/') + 1),
      path: served.path,
      entry: e,
      manifest: await readDocument(zip[0]!.data),
      identity: `${st.ino}:${st.size}:${st.mtimeNs}`,
      sha256: createHash('sha256')
        .update(await readFile(served.path))
        .digest('hex'),
    });
  }
  return { doc, packages };
}

/** What identifies a change in a Change List or manifest: loc, change, datetime, hash. */
function changeKey(e: Entry): string {
  return `${e.loc} ${e.md?.change} ${e.md?.datetime} ${e.md?.hash ?? ''}`;
}

/** The changes of the set as the store has them, oldest first. */
async function storeChanges(store: SourceStore): Promise<{ seq: number; key: string; datetimeMs: number }[]> {
  const snap = await store.snapshot();
  try {
    const out: { seq: number; key: string; datetimeMs: number }[] = [];
    for await (const c of snap.changes({ setName: SET })) {
      const hash = c.change === 'deleted' ? '' : `md5:${c.hashes.md5} sha-256:${c.hashes['sha-256']}`;
      out.push({
        seq: c.seq,
        datetimeMs: c.datetimeMs,
        key: `${BASE}${c.uri} ${c.change} ${formatDatetime(c.datetimeMs)} ${hash}`,
      });
    }
    return out;
  } finally {
    await snap.close();
  }
}

/**
 * The packages together list every change of the store exactly once, in order; intervals are contiguous from
 * the dump's `from`; each package's manifest has the interval of its dump entry; every change's datetime is
 * inside its package's interval.
 */
async function checkCoverage(
  store: SourceStore,
  doc: ResourceSyncDocument,
  packages: readonly Package[],
): Promise<void> {
  const all = packages.flatMap((p) => p.manifest.entries.map(changeKey));
  assert.deepEqual(
    all,
    (await storeChanges(store)).map((c) => c.key),
    'every change exactly once, in order',
  );
  let from = doc.md?.from;
  for (const p of packages) {
    assert.equal(p.entry.md?.from, from, `${p.name}: from is the previous package's until`);
    assert.equal(p.manifest.md?.from, p.entry.md?.from, `${p.name}: manifest from`);
    assert.equal(p.manifest.md?.until, p.entry.md?.until, `${p.name}: manifest until`);
    for (const e of p.manifest.entries) {
      const t = Date.parse(e.md!.datetime!);
      assert.ok(t >= Date.parse(p.entry.md!.from!), `${p.name}: change at or after from`);
      assert.ok(t <= Date.parse(p.entry.md!.until!), `${p.name}: change at or before until`);
    }
    from = p.entry.md?.until;
  }
}

function seqRange(p: Package): [number, number] {
  const m = /^changedump-(\d+)-(\d+)\.zip$/.exec(p.name);
  assert.ok(m !== null, p.name);
  return [Number(m[1]), Number(m[2])];
}

async function exists(path: string): Promise<boolean> {
  return (await stat(path).catch(() => undefined)) !== undefined;
}

describe('Change Dump packages are append-only', () => {
  it('a second generation keeps the first package as it is and adds one with exactly the new changes', async () => {
    const { dir, cleanup } = await tempDir();
    const s = await openSource(dir);
    try {
      // A: 1,190 creations and 10 deletions (manifest entries without a bitstream).
      await record(s.source, 0, 1190);
      await record(s.source, 0, 10, 'deleted');
      const first = await changeDump(s.source);
      assert.deepEqual(
        first.packages.map((p) => p.name),
        ['changedump-1-1200.zip'],
      );
      const a = first.packages[0]!;
      assert.equal(a.manifest.entries.length, 1200);
      await checkCoverage(s.store, first.doc, first.packages);

      // B: 1,100 updates.
      await record(s.source, 10, 1100, 'updated');
      const second = await changeDump(s.source);
      assert.deepEqual(
        second.packages.map((p) => p.name),
        ['changedump-1-1200.zip', 'changedump-1201-2300.zip'],
      );
      const [a2, b] = second.packages as [Package, Package];
      assert.equal(a2.identity, a.identity, 'the first package file is not rewritten (same inode, size, mtime)');
      assert.equal(a2.sha256, a.sha256);
      assert.deepEqual(a2.entry, a.entry, 'its Change Dump entry is unchanged');
      const changes = await storeChanges(s.store);
      assert.deepEqual(
        b.manifest.entries.map(changeKey),
        changes.slice(1200).map((c) => c.key),
        'the second package holds exactly the changes of B',
      );
      // A non-final package reused ends where the next one starts; the last one ends at the snapshot.
      assert.equal(b.entry.md?.from, a.entry.md?.until);
      assert.ok(Date.parse(b.entry.md!.until!) >= changes.at(-1)!.datetimeMs);
      await checkCoverage(s.store, second.doc, second.packages);

      // Every document validates; every bitstream is in its package with the listed hashes.
      const crawled = await crawl(s.source, s.source.sourceDescriptionUrl);
      const dumps = crawled.packages.filter((p) => p.url.includes('/changedump-'));
      assert.equal(dumps.length, 2);
      for (const p of dumps) await checkPackage(s.source, p);

      // One open list: changelist.xml is the Change List itself (no index), with every change.
      assert.ok(!crawled.docs.some((d) => d.doc.kind === 'change-list-index'));
      const list = crawled.docs.find((d) => d.doc.kind === 'change-list')!;
      assert.equal(list.doc.entries.length, changes.length);
    } finally {
      await s.close();
      await cleanup();
    }
  });

  it('changes that trickle in are merged into one package; merged-away files go one generation later', async () => {
    const { dir, cleanup } = await tempDir();
    const s = await openSource(dir);
    try {
      const names: string[][] = [];
      for (let g = 0; g < 4; g++) {
        await record(s.source, g * 5, 5);
        const { doc, packages } = await changeDump(s.source);
        names.push(packages.map((p) => p.name));
        await checkCoverage(s.store, doc, packages);
      }
      assert.deepEqual(names, [
        ['changedump-1-5.zip'],
        ['changedump-1-10.zip'],
        ['changedump-1-15.zip'],
        ['changedump-1-20.zip'],
      ]);
      const file = (n: string): string => s.source.layout.path(SET, n);
      // 1-5 (listed in generation 1) went at generation 3; 1-10 (generation 2) went at generation 4; 1-15
      // (listed by the previous generation: a Destination may be downloading it) is still there and served.
      assert.equal(await exists(file('changedump-1-5.zip')), false);
      assert.equal(await exists(file('changedump-1-5-manifest.xml')), false);
      assert.equal(await exists(file('changedump-1-10.zip')), false);
      assert.equal(await exists(file('changedump-1-15.zip')), true);
      assert.equal(await exists(file('changedump-1-15-manifest.xml')), true);
      assert.ok((await s.source.document(`/resourcesync/${SET}/changedump-1-15.zip`)) !== undefined);
      assert.equal(await s.source.document(`/resourcesync/${SET}/changedump-1-10.zip`), undefined);
    } finally {
      await s.close();
      await cleanup();
    }
  });

  it('a small last package is not rewritten under the same name when no new change can be packaged', async () => {
    const { dir, cleanup } = await tempDir();
    const s = await openSource(dir);
    try {
      await record(s.source, 0, 5);
      const before = await changeDump(s.source);
      // A change without its bytes (none given, no copy kept): it cannot be in a package.
      await s.source.recordChanges([{ uri: 'r/x', change: 'created', length: 3, hashes: { md5: '0'.repeat(32) } }]);
      const after = await changeDump(s.source);
      assert.deepEqual(
        after.packages.map((p) => p.name),
        ['changedump-1-5.zip'],
      );
      assert.equal(after.packages[0]!.identity, before.packages[0]!.identity, 'kept, not rewritten in place');
    } finally {
      await s.close();
      await cleanup();
    }
  });

  it('a small last package whose bitstream copies are gone is kept, not merged (its changes would be lost)', async () => {
    const { dir, cleanup } = await tempDir();
    // Kept copies bounded to about ten versions (each about 18 bytes): the oldest go as new ones arrive.
    const s = await openSource(dir, {}, 250);
    try {
      await record(s.source, 0, 5);
      const before = await changeDump(s.source);
      await record(s.source, 5, 10);
      const after = await changeDump(s.source);
      assert.deepEqual(
        after.packages.map((p) => p.name),
        ['changedump-1-5.zip', 'changedump-6-15.zip'],
      );
      assert.equal(after.packages[0]!.identity, before.packages[0]!.identity);
      await checkCoverage(s.store, after.doc, after.packages);
    } finally {
      await s.close();
      await cleanup();
    }
  });

  it('a Change List that closes keeps the packages written while it was open', async () => {
    const { dir, cleanup } = await tempDir();
    const s = await openSource(dir, { changeListMaxEntries: 30, dumpMinPackageChanges: 10 });
    try {
      // Nothing recorded yet: an empty plain Change List.
      const empty = await s.source.document(`/resourcesync/${SET}/changelist.xml`);
      const emptyList = await readDocument(await readFile(empty!.path));
      assert.equal(emptyList.kind, 'change-list');
      assert.equal(emptyList.entries.length, 0);

      await record(s.source, 0, 12);
      await changeDump(s.source);
      await record(s.source, 12, 10);
      const open = await changeDump(s.source);
      assert.deepEqual(
        open.packages.map((p) => p.name),
        ['changedump-1-12.zip', 'changedump-13-22.zip'],
      );
      // 10 more: list 1 closes at 30 changes, list 2 opens with 2.
      await record(s.source, 22, 10);
      const parts = await s.store.changeListParts(SET);
      assert.equal(parts.length, 2);
      const rotated = await changeDump(s.source);
      assert.deepEqual(
        rotated.packages.map((p) => p.name),
        ['changedump-1-12.zip', 'changedump-13-22.zip', 'changedump-23-30.zip', 'changedump-31-32.zip'],
      );
      for (let i = 0; i < 2; i++) assert.equal(rotated.packages[i]!.identity, open.packages[i]!.identity);
      // The closed list's last package ends at the list's until, where the next list starts.
      const until1 = formatDatetime(parts[0]!.untilMs!);
      assert.equal(rotated.packages[2]!.entry.md?.until, until1);
      assert.equal(rotated.packages[3]!.entry.md?.from, until1);
      await checkCoverage(s.store, rotated.doc, rotated.packages);

      // One more change: the closed list's packages are reused as they are, the open list's small package grows.
      await record(s.source, 32, 1);
      const later = await changeDump(s.source);
      assert.deepEqual(
        later.packages.map((p) => p.name),
        ['changedump-1-12.zip', 'changedump-13-22.zip', 'changedump-23-30.zip', 'changedump-31-33.zip'],
      );
      for (let i = 0; i < 3; i++) assert.equal(later.packages[i]!.identity, rotated.packages[i]!.identity);
      await checkCoverage(s.store, later.doc, later.packages);

      // Change List Index: <lastmod> of the closed list (not rewritten) and of the open one.
      const changes = await storeChanges(s.store);
      const index = await readDocument(
        await readFile((await s.source.document(`/resourcesync/${SET}/changelist.xml`))!.path),
      );
      assert.deepEqual(
        index.entries.map((e) => e.lastmod),
        [formatDatetime(changes[29]!.datetimeMs), formatDatetime(changes.at(-1)!.datetimeMs)],
      );
      const { docs } = await crawl(s.source, s.source.sourceDescriptionUrl);
      assert.ok(docs.some((d) => d.doc.kind === 'change-list-index'));
    } finally {
      await s.close();
      await cleanup();
    }
  });

  it('a list that closes without a change since the last generation keeps its packages; the next list goes on from them', async () => {
    const { dir, cleanup } = await tempDir();
    const s = await openSource(dir, { changeListMaxEntries: 10, dumpMinPackageChanges: 3 });
    try {
      await record(s.source, 0, 10);
      const full = await changeDump(s.source);
      // The list is full; the next change closes it (until: that change's datetime) and opens list 2.
      await record(s.source, 10, 2);
      const parts = await s.store.changeListParts(SET);
      assert.equal(parts.length, 2);
      const after = await changeDump(s.source);
      assert.deepEqual(
        after.packages.map((p) => p.name),
        ['changedump-1-10.zip', 'changedump-11-12.zip'],
      );
      assert.equal(after.packages[0]!.identity, full.packages[0]!.identity);
      // The reused package keeps its until (the earlier snapshot); the next package starts there.
      assert.equal(after.packages[1]!.entry.md?.from, after.packages[0]!.entry.md?.until);
      await checkCoverage(s.store, after.doc, after.packages);
      const crawled = await crawl(s.source, s.source.sourceDescriptionUrl);
      for (const p of crawled.packages.filter((x) => x.url.includes('/changedump-'))) await checkPackage(s.source, p);
    } finally {
      await s.close();
      await cleanup();
    }
  });

  it('a reopened Source reuses the open packages it persisted; a package whose file is gone is written again', async () => {
    const { dir, cleanup } = await tempDir();
    let s = await openSource(dir, { dumpMinPackageChanges: 3 });
    try {
      await record(s.source, 0, 5);
      const before = await changeDump(s.source);
      await s.close();

      s = await openSource(dir, { dumpMinPackageChanges: 3 });
      await record(s.source, 5, 4);
      const after = await changeDump(s.source);
      assert.deepEqual(
        after.packages.map((p) => p.name),
        ['changedump-1-5.zip', 'changedump-6-9.zip'],
      );
      assert.equal(after.packages[0]!.identity, before.packages[0]!.identity);
      await checkCoverage(s.store, after.doc, after.packages);

      // The second package's ZIP disappears: the next generation writes its changes again.
      await unlink(after.packages[1]!.path);
      await record(s.source, 9, 3);
      const repaired = await changeDump(s.source);
      assert.deepEqual(
        repaired.packages.map((p) => p.name),
        ['changedump-1-5.zip', 'changedump-6-12.zip'],
      );
      assert.equal(repaired.packages[0]!.identity, before.packages[0]!.identity);
      await checkCoverage(s.store, repaired.doc, repaired.packages);
      assert.deepEqual(
        repaired.packages.map((p) => seqRange(p)),
        [
          [1, 5],
          [6, 12],
        ],
      );
    } finally {
      await s.close();
      await cleanup();
    }
  });
});
