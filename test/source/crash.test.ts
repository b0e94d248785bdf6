import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { openDirectorySource, openSqliteStore } from '../../src/source/index.js';
import type { ChangeRecord } from '../../src/source/store.js';
import { crawl, tempDir } from './helpers.js';

const ext = import.meta.url.endsWith('.ts') ? '.ts' : '.js';
const CHILD = fileURLToPath(new URL(`./fixtures/crash-child${ext}`, import.meta.url));

/** Runs the child until it has recorded `rounds` rounds of changes, then kills it with SIGKILL mid-work. */
async function runAndKill(dir: string, state: string, rounds: number): Promise<number> {
  const child = spawn(process.execPath, [...process.execArgv, CHILD, dir, state], {
    env: { ...process.env, RS_CRASH_CHILD: '1' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let seen = 0;
  await new Promise<void>((resolve, reject) => {
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      if (signal !== 'SIGKILL') reject(new Error(`child ended on its own: ${code} ${signal}`));
    });
    child.stdout.on('data', (b: Buffer) => {
      seen += b
        .toString()
        .split('\n')
        .filter((l) => l.startsWith('round')).length;
      if (seen >= rounds) {
        // Let it get into the next round (writing files, hashing, or inside a transaction), then kill.
        setTimeout(() => child.kill('SIGKILL'), 5 + Math.floor(Math.random() * 40));
        resolve();
      }
    });
  });
  await new Promise((r) => child.once('exit', r));
  return seen;
}

async function treeHashes(root: string, rel = ''): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const e of await readdir(join(root, rel), { withFileTypes: true })) {
    const r = rel === '' ? e.name : `${rel}/${e.name}`;
    if (e.isDirectory()) for (const [k, v] of await treeHashes(root, r)) out.set(k, v);
    else
      out.set(
        r,
        createHash('sha256')
          .update(await readFile(join(root, r)))
          .digest('hex'),
      );
  }
  return out;
}

describe('crash safety', () => {
  it('keeps a consistent store when the recording process is killed with SIGKILL, twice', async () => {
    const { dir, cleanup } = await tempDir();
    try {
      const root = join(dir, 'coll');
      const state = join(dir, 'state');
      for (let d = 0; d < 10; d++) await mkdir(join(root, `d${d}`), { recursive: true });
      for (const rounds of [3, 2]) {
        await runAndKill(root, state, rounds);
        const db = new Database(join(state, 'source.db'));
        assert.equal(db.pragma('integrity_check', { simple: true }), 'ok');
        db.close();
        const store = await openSqliteStore({ path: join(state, 'source.db') });
        const snap = await store.snapshot();
        const last = new Map<string, ChangeRecord>();
        let n = 0;
        try {
          for await (const c of snap.changes()) {
            n++;
            assert.equal(c.seq, n, 'no gap in seq');
            last.set(c.uri, c);
          }
          const parts = await snap.changeListParts('default');
          assert.equal(
            parts.reduce((a, p) => a + p.count, 0),
            n,
            'change lists account for every change',
          );
        } finally {
          await snap.close();
        }
        assert.ok(n > 0, 'changes were recorded before the kill');
        for (const [uri, c] of last) {
          const r = await store.getResource(uri);
          if (c.change === 'deleted') assert.equal(r, undefined, `${uri} deleted in the log and the inventory`);
          else assert.equal(r?.hashes['sha-256'], c.hashes['sha-256'], `${uri}: inventory agrees with the log`);
        }
        await store.close();
      }
      // Restart: the start-up scan brings the store to the tree; the documents agree with the tree.
      const source = await openDirectorySource({
        dir: root,
        baseUrl: 'http://localhost/',
        stateDir: state,
        fsync: false,
      });
      try {
        const { docs } = await crawl(source, source.sourceDescriptionUrl);
        const listed = new Map<string, string>();
        for (const d of docs.filter((x) => x.doc.kind === 'resource-list'))
          for (const e of d.doc.entries) {
            const sha = /sha-256:([0-9a-f]{64})/.exec(e.md?.hash ?? '')?.[1];
            listed.set(decodeURIComponent(new URL(e.loc).pathname.slice(1)), sha ?? '');
          }
        assert.deepEqual(listed, await treeHashes(root));
      } finally {
        await source.close();
      }
    } finally {
      await cleanup();
    }
  });
});
