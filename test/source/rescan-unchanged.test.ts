// An unchanged collection keeps its documents across rescans: a file hashed within 3 s of its last write is
// stored as racy, the next (periodic) rescan hashes it again and clears the mark; that inventory-only write
// changes nothing a document shows, so the Resource List keeps its `at`, bytes and ETag (it used to be
// regenerated once, about a rescan period after `serve` started on a freshly written tree).
import assert from 'node:assert/strict';
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { openDirectorySource } from '../../src/source/index.js';
import { openSqliteStore } from '../../src/source/sqlite-store.js';
import { killChildren, runCli, waitForEvent } from '../cli/cli-child.js';
import { tempDir } from './helpers.js';
import { fetchRaw, sleep } from './server-helpers.js';

after(killChildren);

const LIST = '/resourcesync/default/resourcelist.xml';
/** The scan's racy window (scan.ts RACY_MS) plus a margin. */
const RACY_PAST_MS = 3200;

/** Writes `n` small files now; returns the newest mtime (ms). */
async function writeFiles(coll: string, n: number): Promise<number> {
  await mkdir(coll, { recursive: true });
  let newest = 0;
  for (let i = 0; i < n; i++) {
    const p = join(coll, `f${i}.txt`);
    await writeFile(p, `file ${i}\n`);
    newest = Math.max(newest, (await stat(p)).mtimeMs);
  }
  return newest;
}

describe('an unchanged collection keeps its documents across rescans', () => {
  it('a rescan re-hashing racy files (same bytes) leaves the set version and the Resource List as they were', async () => {
    const { dir, cleanup } = await tempDir();
    try {
      const coll = join(dir, 'coll');
      const newest = await writeFiles(coll, 5);
      const site = await openDirectorySource({
        dir: coll,
        stateDir: join(dir, 'state'),
        baseUrl: 'http://127.0.0.1:8080/',
        fsync: false,
      });
      try {
        // Scanned within 3 s of the writes: stored as racy (else this test proves nothing).
        const rec = await site.store.getResource('f0.txt');
        assert.ok(rec?.fileId?.endsWith(':racy'), `f0.txt stored as racy (${rec?.fileId})`);
        const doc1 = await site.document(LIST);
        assert.ok(doc1 !== undefined);
        const bytes1 = await readFile(doc1.path);
        const version1 = await site.store.setVersion('default');
        await sleep(Math.max(0, newest + RACY_PAST_MS - Date.now()));
        const stats = await site.scan();
        assert.equal(stats.hashed, 5, 'the rescan re-hashed the racy files');
        assert.equal(stats.created + stats.updated + stats.deleted, 0);
        const after = await site.store.getResource('f0.txt');
        assert.ok(after?.fileId !== undefined && !after.fileId.endsWith(':racy'), 'racy mark cleared');
        assert.equal(await site.store.setVersion('default'), version1, 'set version unchanged');
        await site.source.settled();
        const doc2 = await site.document(LIST);
        assert.ok(doc2 !== undefined);
        assert.equal(doc2.etag, doc1.etag);
        assert.deepEqual(await readFile(doc2.path), bytes1);
        // A touched file (same bytes, new mtime) moves its lastmod: that is a new Resource List.
        await writeFile(join(coll, 'f1.txt'), 'file 1\n');
        await site.scan();
        const doc3 = await site.document(LIST);
        assert.notEqual(doc3?.etag, doc1.etag, 'a new lastmod is a new Resource List');
      } finally {
        await site.close();
      }
    } finally {
      await cleanup();
    }
  });

  it('serve over a freshly written tree: the Resource List keeps its at, bytes and ETag past the periodic rescans', async () => {
    const { dir, cleanup } = await tempDir();
    try {
      const coll = join(dir, 'coll');
      const state = join(dir, 'state');
      const newest = await writeFiles(coll, 20);
      // --rescan 1: the periodic rescan (60 s by default) every second.
      const r = runCli(['serve', coll, '--port', '0', '--json', '--no-notify', '--state', state, '--rescan', '1']);
      try {
        const listening = await waitForEvent(r, 'listening');
        const racy = Date.now() - newest < 3000;
        const port = Number(new URL(String(listening.url)).port);
        const first = await fetchRaw(port, LIST);
        assert.equal(first.status, 200);
        // Past the racy window, then two more rescan periods: a rescan has re-hashed the files.
        await sleep(Math.max(0, newest + RACY_PAST_MS - Date.now()) + 2200);
        const second = await fetchRaw(port, LIST);
        assert.equal(second.status, 200);
        assert.equal(second.headers.etag, first.headers.etag, 'same ETag');
        assert.equal(second.body.toString(), first.body.toString(), 'same bytes (same at)');
        const conditional = await fetchRaw(port, LIST, { headers: { 'if-none-match': String(first.headers.etag) } });
        assert.equal(conditional.status, 304);
        r.child.kill('SIGTERM');
        assert.equal(await r.exit, 0);
        const store = await openSqliteStore({ path: join(state, 'source.db'), readonly: true });
        try {
          const rec = await store.getResource('f0.txt');
          assert.ok(
            rec?.fileId !== undefined && !rec.fileId.endsWith(':racy'),
            `re-hashed by a rescan (${rec?.fileId})`,
          );
          if (racy) assert.equal(await store.setVersion('default'), 1, 'only the baseline moved the set version');
        } finally {
          await store.close();
        }
      } finally {
        r.child.kill('SIGKILL');
      }
    } finally {
      await cleanup();
    }
  });
});
