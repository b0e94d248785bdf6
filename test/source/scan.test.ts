import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { appendFile, chmod, mkdir, readFile, rename, rm, symlink, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { openSqliteStore } from '../../src/source/index.js';
import { readFileStable, type ScanContext, scanPaths, scanTree } from '../../src/source/scan.js';
import type { ChangeInput, ChangeRecord, SourceStore } from '../../src/source/store.js';
import { tempDir } from './helpers.js';

const sha256 = (b: Buffer | string): string => createHash('sha256').update(b).digest('hex');

describe('change detection (scan)', () => {
  let dir: string;
  let root: string;
  let cleanup: () => Promise<void>;
  let store: SourceStore;
  const warnings: string[] = [];
  let ctx: ScanContext;
  const record = async (changes: ChangeInput[], log: boolean): Promise<void> => {
    await store.recordChanges(changes, { log });
  };
  const logSince = async (seq: number): Promise<[string, string][]> => {
    const snap = await store.snapshot();
    const out: [string, string][] = [];
    try {
      for await (const c of snap.changes({ afterSeq: seq })) out.push([c.uri, c.change]);
    } finally {
      await snap.close();
    }
    return out;
  };

  before(async () => {
    ({ dir, cleanup } = await tempDir());
    root = join(dir, 'root');
    await mkdir(join(root, 'd'), { recursive: true });
    await writeFile(join(root, 'a.txt'), 'a');
    await writeFile(join(root, 'd', 'b.txt'), 'b');
    await writeFile(join(root, 'd', 'c.txt'), 'c');
    store = await openSqliteStore({ path: join(dir, 'state', 'source.db') });
    ctx = { root, store, setOf: () => 'default', exclude: [join(dir, 'state')], onWarning: (m) => warnings.push(m) };
    const stats = await scanTree(ctx, record, { log: false });
    assert.equal(stats.files, 3);
    assert.equal((await store.head()).seq, 0, 'the baseline records no change');
    assert.equal(await store.countResources(), 3);
  });

  after(async () => {
    await store?.close();
    await cleanup?.();
  });

  it('records create, update, delete; a rename is a delete plus a create', async () => {
    const seq = (await store.head()).seq;
    await writeFile(join(root, 'a.txt'), 'a, version 2');
    await writeFile(join(root, 'd', 'new.txt'), 'new');
    await rm(join(root, 'd', 'c.txt'));
    await rename(join(root, 'd', 'b.txt'), join(root, 'b-moved.txt'));
    await scanTree(ctx, record);
    assert.deepEqual(await logSince(seq), [
      ['a.txt', 'updated'],
      ['b-moved.txt', 'created'],
      ['d/b.txt', 'deleted'],
      ['d/c.txt', 'deleted'],
      ['d/new.txt', 'created'],
    ]);
    const a = await store.getResource('a.txt');
    assert.equal(a?.hashes['sha-256'], sha256('a, version 2'));
    assert.equal(a?.length, 12);
    assert.equal(a?.type, 'text/plain');
    assert.equal(await store.getResource('d/c.txt'), undefined);
  });

  it('records nothing when a file is only touched (same bytes), but refreshes its identity', async () => {
    const seq = (await store.head()).seq;
    const before = await store.getResource('a.txt');
    const earlier = new Date(Date.now() - 60_000);
    await utimes(join(root, 'a.txt'), earlier, earlier);
    const stats = await scanTree(ctx, record);
    assert.ok(stats.hashed >= 1);
    assert.deepEqual(await logSince(seq), []);
    const after = await store.getResource('a.txt');
    assert.notEqual(after?.fileId, before?.fileId);
    // Modified a minute ago: not racy, so the next scan trusts the quick check for it.
    assert.ok(after?.fileId !== undefined && !after.fileId.endsWith(':racy'));
  });

  it('re-hashes a file modified very recently, even when size, mtime and inode are unchanged (racy)', async () => {
    const p = join(root, 'racy.txt');
    const t = new Date();
    await writeFile(p, 'AAAA');
    await utimes(p, t, t);
    await scanTree(ctx, record);
    const seq = (await store.head()).seq;
    await writeFile(p, 'BBBB'); // same size, same inode
    await utimes(p, t, t); // and the same mtime: the quick check alone would miss it
    await scanTree(ctx, record);
    assert.deepEqual(await logSince(seq), [['racy.txt', 'updated']]);
    assert.equal((await store.getResource('racy.txt'))?.hashes['sha-256'], sha256('BBBB'));
  });

  it('detects a file that changes while it is hashed, and reads it again', async () => {
    const big = join(root, 'growing.bin');
    await writeFile(big, Buffer.alloc(300_000, 1));
    let changed = false;
    const res = await readFileStable(big, Buffer.alloc(64 * 1024), {
      onRead: async (_abs, attempt, bytes) => {
        if (attempt === 0 && bytes === 64 * 1024 && !changed) {
          changed = true;
          await appendFile(big, Buffer.alloc(1000, 2));
        }
      },
    });
    assert.ok(changed);
    assert.ok(res.ok);
    const now = await readFile(big);
    assert.equal(res.length, 301_000);
    assert.equal(res.hashes['sha-256'], sha256(now));
  });

  it('skips a file that keeps changing while it is hashed, with a warning, and keeps its entry', async () => {
    await scanTree(ctx, record);
    const seq = (await store.head()).seq;
    const p = join(root, 'busy.bin');
    await writeFile(p, Buffer.alloc(200_000, 3));
    await scanPaths(ctx, ['busy.bin'], record);
    const known = await store.getResource('busy.bin');
    assert.ok(known !== undefined);
    await appendFile(p, 'x');
    warnings.length = 0;
    const busy: ScanContext = {
      ...ctx,
      bufferSize: 64 * 1024,
      onRead: async (abs, _attempt, bytes) => {
        if (abs === p && bytes === 64 * 1024) await appendFile(p, 'y');
      },
    };
    const stats = await scanTree(busy, record);
    assert.equal(stats.skipped, 1);
    assert.ok(warnings.some((w) => w.includes('changed while it was read')));
    assert.deepEqual(await store.getResource('busy.bin'), known, 'entry kept as it was');
    assert.deepEqual(await logSince(seq), [['busy.bin', 'created']]);
    // Once it settles, the next scan records it.
    await scanTree(ctx, record);
    assert.deepEqual((await logSince(seq)).at(-1), ['busy.bin', 'updated']);
  });

  it('skips FIFOs, broken symlinks and symlinks leaving the tree with a warning, never hanging', async () => {
    await scanTree(ctx, record);
    execFileSync('mkfifo', [join(root, 'pipe')]);
    await symlink(join(dir, 'nowhere'), join(root, 'broken-link'));
    await writeFile(join(dir, 'outside.txt'), 'secret');
    await symlink(join(dir, 'outside.txt'), join(root, 'escape-link'));
    await symlink(join(root, 'a.txt'), join(root, 'inside-link'));
    warnings.length = 0;
    const seq = (await store.head()).seq;
    await scanTree(ctx, record);
    assert.ok(
      warnings.some((w) => w.includes('pipe') && w.includes('not a regular file')),
      warnings.join('\n'),
    );
    assert.ok(warnings.some((w) => w.includes('broken-link') && w.includes('broken symbolic link')));
    assert.ok(warnings.some((w) => w.includes('escape-link') && w.includes('leaving the collection')));
    assert.deepEqual(await logSince(seq), [['inside-link', 'created']]);
    await rm(join(root, 'pipe'));
    await rm(join(root, 'broken-link'));
    await rm(join(root, 'escape-link'));
  });

  it('reports a file that vanishes before it is read and records it deleted', async () => {
    const res = await readFileStable(join(root, 'no-such-file'), Buffer.alloc(1024));
    assert.equal(res.ok, false);
    assert.equal(res.ok === false && res.reason, 'vanished');
    await writeFile(join(root, 'short-lived.txt'), 'x');
    await scanTree(ctx, record);
    const seq = (await store.head()).seq;
    let removed = false;
    const vanishing: ScanContext = {
      ...ctx,
      onRead: async (abs) => {
        // Removed while being read: the re-check after the read fails, the retry finds it gone.
        if (abs.endsWith('short-lived.txt') && !removed) {
          removed = true;
          await rm(join(root, 'short-lived.txt'));
        }
      },
    };
    await writeFile(join(root, 'short-lived.txt'), 'x, version 2');
    await scanTree(vanishing, record);
    assert.ok(removed);
    assert.deepEqual(await logSince(seq), [['short-lived.txt', 'deleted']]);
    assert.ok(warnings.some((w) => w.includes('vanished')));
  });

  it('keeps the entries of an unreadable directory', {
    skip:
      process.getuid?.() === 0
        ? 'running as root: chmod 000 does not stop root from reading a directory (covered by FIFO and symlink cases)'
        : false,
  }, async () => {
    const seq = (await store.head()).seq;
    await chmod(join(root, 'd'), 0o000);
    try {
      await scanTree(ctx, record);
      assert.deepEqual(await logSince(seq), []);
      assert.ok(warnings.some((w) => w.includes('cannot read directory')));
    } finally {
      await chmod(join(root, 'd'), 0o755);
    }
  });

  it('re-checks single paths: a file, a new directory, a removed directory', async () => {
    await mkdir(join(root, 'nd', 'deeper'), { recursive: true });
    await writeFile(join(root, 'nd', 'x.txt'), 'x');
    await writeFile(join(root, 'nd', 'deeper', 'y.txt'), 'y');
    const seq = (await store.head()).seq;
    await scanPaths(ctx, ['nd'], record);
    assert.deepEqual(await logSince(seq), [
      ['nd/deeper/y.txt', 'created'],
      ['nd/x.txt', 'created'],
    ]);
    await rm(join(root, 'nd'), { recursive: true });
    const seq2 = (await store.head()).seq;
    await scanPaths(ctx, ['nd'], record);
    assert.deepEqual(await logSince(seq2), [
      ['nd/deeper/y.txt', 'deleted'],
      ['nd/x.txt', 'deleted'],
    ]);
  });

  it('records a file replaced by a directory as deleted, and the files under it as created', async () => {
    await writeFile(join(root, 'shape'), 'a file');
    await scanTree(ctx, record);
    const seq = (await store.head()).seq;
    await rm(join(root, 'shape'));
    await mkdir(join(root, 'shape'));
    await writeFile(join(root, 'shape', 'inner.txt'), 'inner');
    await scanTree(ctx, record);
    assert.deepEqual(await logSince(seq), [
      ['shape', 'deleted'],
      ['shape/inner.txt', 'created'],
    ]);
  });

  it('keeps seq gapless and datetimes non-decreasing', async () => {
    const snap = await store.snapshot();
    const all: ChangeRecord[] = [];
    try {
      for await (const c of snap.changes()) all.push(c);
    } finally {
      await snap.close();
    }
    all.forEach((c, i) => {
      assert.equal(c.seq, i + 1);
      if (i > 0) assert.ok(c.datetimeMs >= all[i - 1]!.datetimeMs);
    });
  });
});
