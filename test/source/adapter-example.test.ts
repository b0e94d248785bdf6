import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { validateDocument } from '../../src/core/validate.js';
import type { ResourceSyncDocument } from '../../src/core/model.js';
import { readDocument } from '../../src/xml/index.js';
import { tempDir } from './helpers.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const EXAMPLE = join(ROOT, 'examples', 'database-collection.mjs');

/** Polls `check` until it returns a value (not undefined), at most `ms`. */
async function until<T>(what: string, check: () => Promise<T | undefined>, ms = 60_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await check().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

async function doc(url: string): Promise<ResourceSyncDocument> {
  const res = await fetch(url);
  assert.equal(res.status, 200, url);
  const d = await readDocument(Buffer.from(await res.arrayBuffer()), { url });
  assert.deepEqual(
    validateDocument(d).issues.filter((i) => i.severity === 'error'),
    [],
    `${url} validates`,
  );
  return d;
}

/** The entries of a Change List, or of every list of a Change List Index. */
async function changeEntries(url: string): Promise<{ loc: string; change: string }[]> {
  const d = await doc(url);
  const lists = d.kind === 'change-list-index' ? await Promise.all(d.entries.map((e) => doc(e.loc))) : [d];
  return lists.flatMap((l) => l.entries.map((e) => ({ loc: e.loc, change: e.md?.change ?? '' })));
}

describe('examples/database-collection.mjs (the adapter API over a SQLite-backed collection)', () => {
  it('runs: publishes the rows with linked metadata records, serves their bytes, follows edits', async () => {
    const { dir, cleanup } = await tempDir();
    const dbPath = join(dir, 'items.db');
    let child: ChildProcess | undefined;
    let stderr = '';
    try {
      child = spawn(
        process.execPath,
        [EXAMPLE, '--db', dbPath, '--state', join(dir, 'state'), '--port', '0', '--poll-ms', '200', '--seed', '3'],
        { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let stdout = '';
      child.stdout?.on('data', (c: Buffer) => {
        stdout += c.toString();
      });
      child.stderr?.on('data', (c: Buffer) => {
        stderr += c.toString();
      });
      const base = await until('the example to listen', async () => {
        const line = stdout.split('\n')[0];
        return line !== undefined && stdout.includes('\n') ? (JSON.parse(line) as { url: string }).url : undefined;
      });
      await until('the Source to open', async () => {
        const res = await fetch(`${base}.well-known/resourcesync`);
        await res.body?.cancel();
        return res.status === 200 ? true : undefined;
      });
      const rl = await doc(`${base}resourcesync/default/resourcelist.xml`);
      assert.deepEqual(
        rl.entries.map((e) => e.loc),
        [1, 2, 3].flatMap((i) => [`${base}items/${i}.txt`, `${base}items/${i}.xml`]),
      );
      const text1 = rl.entries[0]!;
      assert.deepEqual(text1.links, [{ rel: 'describedby', href: `${base}items/1.xml`, type: 'application/xml' }]);
      assert.equal(rl.entries[1]?.links[0]?.rel, 'describes');
      // The bytes served are the ones listed.
      const res = await fetch(text1.loc);
      const body = Buffer.from(await res.arrayBuffer());
      assert.equal(res.status, 200);
      assert.equal(body.toString(), 'The text of item 1.\n');
      assert.equal(body.length, text1.md?.length);
      assert.match(text1.md?.hash ?? '', new RegExp(`md5:${createHash('md5').update(body).digest('hex')}`));
      const meta = await fetch(`${base}items/1.xml`);
      assert.match(await meta.text(), /<dc:title>Item 1<\/dc:title>/);

      // The repository's own writes reach the Change List through the adapter's feed.
      const db = new Database(dbPath);
      db.prepare("UPDATE items SET body = 'edited' WHERE id = 2").run();
      db.prepare('DELETE FROM items WHERE id = 3').run();
      db.close();
      const changes = await until('the edits in the Change List', async () => {
        const all = await changeEntries(`${base}resourcesync/default/changelist.xml`);
        return all.length >= 4 ? all : undefined;
      });
      assert.deepEqual(changes, [
        { loc: `${base}items/2.txt`, change: 'updated' },
        { loc: `${base}items/2.xml`, change: 'updated' },
        { loc: `${base}items/3.txt`, change: 'deleted' },
        { loc: `${base}items/3.xml`, change: 'deleted' },
      ]);
      assert.equal(await (await fetch(`${base}items/2.txt`)).text(), 'edited');
      assert.equal((await fetch(`${base}items/3.txt`)).status, 404);
    } catch (e) {
      if (stderr !== '') console.error(`example's stderr:\n${stderr}`);
      throw e;
    } finally {
      if (child !== undefined && child.exitCode === null) {
        const exited = new Promise((resolve) => child!.once('exit', resolve));
        child.kill('SIGTERM');
        await exited;
      }
      await cleanup();
    }
  });
});
