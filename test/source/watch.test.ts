import assert from 'node:assert/strict';
import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { type DirectorySource, openDirectorySource } from '../../src/source/index.js';
import type { ChangeRecord } from '../../src/source/store.js';
import { tempDir } from './helpers.js';

/** Waits until `value()` stops changing and satisfies `done`, without fixed timing assumptions. */
async function converge<T>(value: () => Promise<T>, done: (v: T) => boolean, timeoutMs = 60_000): Promise<T> {
  const start = Date.now();
  let v = await value();
  while (!done(v)) {
    if (Date.now() - start > timeoutMs) return v;
    await sleep(50);
    v = await value();
  }
  return v;
}

async function changesSince(source: DirectorySource, seq: number): Promise<ChangeRecord[]> {
  const snap = await source.store.snapshot();
  const out: ChangeRecord[] = [];
  try {
    for await (const c of snap.changes({ afterSeq: seq })) out.push(c);
  } finally {
    await snap.close();
  }
  return out;
}

describe('watching a directory', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let source: DirectorySource;
  let root: string;

  before(async () => {
    ({ dir, cleanup } = await tempDir());
    root = join(dir, 'coll');
    await mkdir(root);
    await writeFile(join(root, 'seed.txt'), 'seed');
    source = await openDirectorySource({
      dir: root,
      baseUrl: 'http://localhost/',
      stateDir: join(dir, 'state'),
      watch: true,
      debounceMs: 30,
      rescanIntervalMs: 0,
      fsync: false,
    });
  });

  after(async () => {
    await source?.close();
    await cleanup?.();
  });

  it('records 1,000 files created within one second, all of them, in the order they were written', async () => {
    const seq = (await source.store.head()).seq;
    // Names in reverse order so the creation order differs from the key order of a rescan.
    const names = Array.from({ length: 1000 }, (_, i) => `burst/f${String(999 - i).padStart(4, '0')}.txt`);
    await mkdir(join(root, 'burst'));
    // Let the new directory's event settle first (its subtree scan would record in key order).
    await sleep(100);
    await source.settled();
    const t0 = Date.now();
    for (let k = 0; k < 10; k++) {
      await Promise.all(names.slice(k * 100, k * 100 + 100).map((n) => writeFile(join(root, n), n)));
      await sleep(Math.max(0, t0 + (k + 1) * 90 - Date.now()));
    }
    const changes = await converge(
      () => changesSince(source, seq),
      (c) => c.length >= 1000,
    );
    await source.settled();
    const final = await changesSince(source, seq);
    assert.equal(final.length, 1000, 'every file recorded once');
    assert.equal(changes.length, 1000);
    assert.ok(final.every((c) => c.change === 'created'));
    assert.deepEqual(new Set(final.map((c) => c.uri)), new Set(names));
    // Order: within each batch of 100 written together any order is fine; batches must be in order.
    const batchOf = new Map(names.map((n, i) => [n, Math.floor(i / 100)]));
    let lastBatch = 0;
    for (const c of final) {
      const b = batchOf.get(c.uri)!;
      assert.ok(b >= lastBatch, `${c.uri} recorded after a later batch`);
      lastBatch = b;
    }
  });

  it('records an update, a delete and a directory renamed into place', async () => {
    const seq = (await source.store.head()).seq;
    await writeFile(join(root, 'seed.txt'), 'seed, version 2');
    await rm(join(root, 'burst', 'f0000.txt'));
    await mkdir(join(dir, 'outside-dir'));
    await writeFile(join(dir, 'outside-dir', 'moved-in.txt'), 'moved in');
    await rename(join(dir, 'outside-dir'), join(root, 'moved'));
    const changes = await converge(
      () => changesSince(source, seq),
      (c) => c.length >= 3,
    );
    await source.settled();
    const got = (await changesSince(source, seq)).map((c) => `${c.change} ${c.uri}`).sort();
    assert.deepEqual(got, ['created moved/moved-in.txt', 'deleted burst/f0000.txt', 'updated seed.txt']);
    assert.ok(changes.length >= 3);
  });

  it('ignores hidden files and the state directory', async () => {
    const seq = (await source.store.head()).seq;
    await writeFile(join(root, '.hidden'), 'x');
    await writeFile(join(root, 'visible.txt'), 'x');
    await converge(
      () => changesSince(source, seq),
      (c) => c.length >= 1,
    );
    await source.settled();
    assert.deepEqual(
      (await changesSince(source, seq)).map((c) => c.uri),
      ['visible.txt'],
    );
  });
});
