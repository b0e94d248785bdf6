// End to end: our own Source (a directory served by createSourceServer) and our Destination.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Destination } from '../../src/destination/destination.js';
import { type DirectorySource, openDirectorySource } from '../../src/source/directory.js';
import { type SourceServer, createSourceServer } from '../../src/source/server.js';
import { readTree } from './static-source.js';

describe('end to end with our Source', { timeout: 60_000 }, () => {
  let work: string;
  let collection: string;
  let mirror: string;
  let site: DirectorySource;
  let server: SourceServer;
  let base: string;

  before(async () => {
    work = await mkdtemp(join(tmpdir(), 'rs-e2e-'));
    collection = join(work, 'collection');
    mirror = join(work, 'mirror');
    await mkdir(join(collection, 'docs', 'sub'), { recursive: true });
    for (let i = 0; i < 25; i++) await writeFile(join(collection, 'docs', `f${i}.txt`), `file ${i}\n`.repeat(i + 1));
    await writeFile(join(collection, 'docs', 'sub', 'name with space.txt'), 'spaced\n');
    await writeFile(join(collection, 'top.bin'), Buffer.from([0, 1, 2, 3, 255]));
    let resolveSite: (s: DirectorySource) => void = () => undefined;
    let rejectSite: (e: unknown) => void = () => undefined;
    const pending = new Promise<DirectorySource>((res, rej) => {
      resolveSite = res;
      rejectSite = rej;
    });
    server = createSourceServer(pending);
    base = (await server.listen(0, '127.0.0.1')).url;
    try {
      site = await openDirectorySource({
        dir: collection,
        baseUrl: base,
        stateDir: join(work, 'source-state'),
        fsync: false,
      });
      resolveSite(site);
    } catch (e) {
      rejectSite(e);
      throw e;
    }
  });
  after(async () => {
    await server?.close();
    await site?.close();
    await rm(work, { recursive: true, force: true });
  });

  function mirrored(): Map<string, Buffer> {
    const host = new URL(base);
    const prefix = `${host.hostname}_${host.port}/`;
    const out = new Map<string, Buffer>();
    for (const [k, v] of readTree(mirror)) {
      assert.ok(k.startsWith(prefix), k);
      out.set(decodeURIComponent(k.slice(prefix.length)), v);
    }
    return new Map([...out].sort(([a], [b]) => (a < b ? -1 : 1)));
  }

  it('baseline, then incremental after changes, then audit in sync', async () => {
    const d = (): Destination => new Destination({ url: base, dir: mirror, durability: 'none', delete: true });
    const s1 = await d().sync();
    assert.equal(s1.operation, 'baseline');
    assert.equal(s1.counts.failed, 0, JSON.stringify(s1.failures));
    assert.equal(s1.counts.created, 27);
    assert.deepEqual(s1.via, ['dump'], 'our Source offers a Resource Dump');
    assert.equal(s1.complete, true);
    assert.deepEqual(mirrored(), new Map([...readTree(collection)].sort(([a], [b]) => (a < b ? -1 : 1))));

    // Change the collection: update, create, delete; the Source records them on a scan.
    await writeFile(join(collection, 'docs', 'f1.txt'), 'changed\n');
    await writeFile(join(collection, 'docs', 'new.txt'), 'new\n');
    await rm(join(collection, 'docs', 'f2.txt'));
    await site.scan();
    const s2 = await d().sync();
    assert.equal(s2.operation, 'incremental', JSON.stringify(s2));
    assert.equal(s2.counts.failed, 0, JSON.stringify(s2.failures));
    assert.equal(s2.counts.created + s2.counts.updated, 2);
    assert.equal(s2.counts.deleted, 1);
    assert.equal(s2.via[0], 'dump', 'our Source offers Change Dumps');
    assert.deepEqual(mirrored(), new Map([...readTree(collection)].sort(([a], [b]) => (a < b ? -1 : 1))));

    const a = await new Destination({ url: base, dir: mirror, checksum: true }).audit();
    assert.equal(a.inSync, true, JSON.stringify(a.audit));
    const s3 = await d().sync();
    assert.equal(s3.counts.created + s3.counts.updated + s3.counts.deleted, 0);

    // The same through the Resource List and Change Lists only, into another copy.
    const other = join(work, 'mirror-lists');
    const l = (): Destination =>
      new Destination({ url: base, dir: other, durability: 'none', delete: true, noDumps: true });
    const b = await l().sync();
    assert.deepEqual(b.via, ['list']);
    assert.equal(b.counts.failed, 0, JSON.stringify(b.failures));
    await writeFile(join(collection, 'docs', 'f3.txt'), 'changed again\n');
    await rm(join(collection, 'docs', 'new.txt'));
    await site.scan();
    const i = await l().sync();
    assert.equal(i.operation, 'incremental');
    assert.deepEqual(i.via, ['list']);
    assert.equal(i.counts.updated, 1);
    assert.equal(i.counts.deleted, 1);
    const host = new URL(base);
    const prefix = `${host.hostname}_${host.port}/`;
    const copy = new Map([...readTree(other)].map(([k, v]) => [decodeURIComponent(k.slice(prefix.length)), v]));
    assert.deepEqual(
      new Map([...copy].sort(([a], [b]) => (a < b ? -1 : 1))),
      new Map([...readTree(collection)].sort(([a], [b]) => (a < b ? -1 : 1))),
    );
  });
});
