// The Source Description Index (§8) of our Source, over real HTTP: past the entry limit (injected small here) the
// Source writes several Source Descriptions and the Index that groups them at the well-known URI; the validator
// walks it, and a Destination discovers the sets of all its Source Descriptions and synchronizes one.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runValidate } from '../../src/cli/validate.js';
import { isResourceSyncError } from '../../src/core/errors.js';
import { Destination } from '../../src/destination/destination.js';
import type { DirectorySource } from '../../src/source/directory.js';
import type { SourceServer } from '../../src/source/server.js';
import { readDocument } from '../../src/xml/index.js';
import { tempDir } from './helpers.js';
import { SETS, serveSets } from './sets-source.js';

async function get(url: string) {
  const res = await fetch(url);
  assert.equal(res.status, 200, url);
  return readDocument(Buffer.from(await res.arrayBuffer()), { url });
}

function capture() {
  let out = '';
  let err = '';
  return {
    stdout: (t: string) => void (out += t),
    stderr: (t: string) => void (err += t),
    out: () => out,
    err: () => err,
  };
}

describe('Source Description Index of our Source (§8)', { timeout: 60_000 }, () => {
  let work: { dir: string; cleanup: () => Promise<void> };
  let site: DirectorySource;
  let server: SourceServer;
  let base: string;
  before(async () => {
    work = await tempDir();
    ({ site, server, base } = await serveSets(work.dir, { maxEntriesPerDocument: 2, describedBy: true }));
  });
  after(async () => {
    await server?.close();
    await site?.close();
    await work?.cleanup();
  });

  it('groups its Source Descriptions under an Index at the well-known URI once the sets exceed one document', async () => {
    const index = await get(`${base}.well-known/resourcesync`);
    assert.equal(index.kind, 'source-description-index');
    assert.equal(index.root, 'sitemapindex');
    assert.deepEqual(index.links, [{ rel: 'describedby', href: `${base}about.html` }]);
    const parts = index.entries.map((e) => e.loc);
    assert.deepEqual(
      parts,
      [1, 2, 3].map((n) => `${base}resourcesync/description-000${n}.xml`),
    );
    const listed: string[] = [];
    for (const part of parts) {
      const sd = await get(part);
      assert.equal(sd.kind, 'source-description');
      assert.deepEqual(
        sd.links.find((l) => l.rel === 'index'),
        { rel: 'index', href: `${base}.well-known/resourcesync` },
        'each Source Description points to its Index (§6.2)',
      );
      assert.ok(sd.entries.length <= 2);
      for (const e of sd.entries) {
        listed.push(e.loc);
        // The Capability List points up to the Source Description that lists it (§9).
        const cl = await get(e.loc);
        assert.deepEqual(
          cl.links.find((l) => l.rel === 'up'),
          { rel: 'up', href: part },
          e.loc,
        );
      }
    }
    assert.deepEqual(
      listed,
      SETS.map((s) => `${base}resourcesync/${s}/capabilitylist.xml`),
    );
  });

  it('validate --walk from the Source root goes through the Index, every Source Description and on, without an issue', async () => {
    const io = capture();
    const code = await runValidate([base], { walk: true, json: true, maxDocuments: 200 }, io);
    const lines = io
      .out()
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { source?: string; kind?: string; issues?: { code: string }[] });
    const docs = lines.filter((l) => l.source !== undefined && l.kind !== undefined);
    assert.equal(docs[0]?.kind, 'source-description-index', io.out());
    assert.equal(docs.filter((d) => d.kind === 'source-description').length, 3);
    assert.equal(docs.filter((d) => d.kind === 'capability-list').length, 5);
    assert.deepEqual(
      docs.flatMap((d) => (d.issues ?? []).map((i) => `${d.source}: ${i.code}`)),
      [],
    );
    assert.equal(code, 0, io.err());
  });

  it('the explorer shows the Index at the root of its tree, with its Source Descriptions below', async () => {
    const { mountExplorer } = await import('../../src/web/mount.js');
    const explorer = mountExplorer(server.handler, { baseUrl: base, listenUrl: base });
    try {
      const api = async (name: string, params: Record<string, string> = {}) => {
        const res = await fetch(`${base}explorer/api/${name}?${new URLSearchParams(params)}`);
        assert.equal(res.status, 200, name);
        return (await res.json()) as Record<string, unknown>;
      };
      const found = await api('discover');
      assert.equal(found['sourceDescriptionIndex'], `${base}.well-known/resourcesync`);
      assert.equal((found['sets'] as unknown[]).length, SETS.length);
      const page = await api('document', { url: `${base}.well-known/resourcesync` });
      assert.equal((page['header'] as { kind: string }).kind, 'source-description-index');
      const children = (page['entries'] as { children?: { url: string; context: { capability: string } }[] }[]).flatMap(
        (e) => e.children ?? [],
      );
      assert.deepEqual(
        children.map((c) => [c.url, c.context.capability]),
        [1, 2, 3].map((n) => [`${base}resourcesync/description-000${n}.xml`, 'description']),
      );
    } finally {
      await explorer.close();
    }
  });

  it('a Destination picks a set among the Capability Lists of all the Source Descriptions (--set)', async () => {
    const mirror = join(work.dir, 'mirror');
    await assert.rejects(
      new Destination({ url: base, dir: mirror, durability: 'none' }).sync(),
      (e: unknown) => isResourceSyncError(e, 'RS_CONFIG') && /5 Capability Lists.*s1.*s5/.test(e.message),
    );
    for (const [url, set] of [
      [base, 's4'],
      [`${base}.well-known/resourcesync`, 's2'],
    ] as const) {
      const s = await new Destination({ url, set, dir: mirror, durability: 'none' }).sync();
      assert.equal(s.counts.failed, 0, JSON.stringify(s.failures));
      assert.equal(s.counts.created, 1, `${set}: ${JSON.stringify(s.counts)}`);
      const host = new URL(base);
      const copy = await readFile(join(mirror, `${host.hostname}_${host.port}`, set, 'a.txt'), 'utf8');
      assert.equal(copy, `a of ${set}\n`);
    }
  });
});

describe('Source Description of our Source under the limit', () => {
  it('stays one Source Description at the well-known URI (no Index)', async () => {
    const work = await tempDir();
    const { site, server, base } = await serveSets(work.dir, { describedBy: true });
    try {
      const sd = await get(`${base}.well-known/resourcesync`);
      assert.equal(sd.kind, 'source-description');
      assert.equal(sd.entries.length, SETS.length);
      assert.equal((await fetch(`${base}resourcesync/description-0001.xml`)).status, 404);
      const cl = await get(`${base}resourcesync/s3/capabilitylist.xml`);
      assert.deepEqual(
        cl.links.find((l) => l.rel === 'up'),
        { rel: 'up', href: `${base}.well-known/resourcesync` },
      );
    } finally {
      await server.close();
      await site.close();
      await work.cleanup();
    }
  });
});
