// Redeploying a Source (issue 12): a restart with another base URL or port, a second process on the same state.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { runPublish } from '../../src/cli/publish.js';
import { isResourceSyncError } from '../../src/core/errors.js';
import { openDirectorySource } from '../../src/source/index.js';
import { killChildren, runCli, waitForEvent } from '../cli/cli-child.js';
import { crawl, tempDir } from './helpers.js';
import { startOaiServer } from './oai-server.js';

after(killChildren);

/** Polls `check` (every 20 ms, at most `timeoutMs`) until it returns true. */
async function until(what: string, check: () => Promise<boolean> | boolean, timeoutMs = 30_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('redeploying a directory Source', () => {
  it('a restart with another base URL: every document carries the new URLs (none of the old)', async () => {
    const { dir, cleanup } = await tempDir();
    try {
      const coll = join(dir, 'coll');
      await mkdir(coll, { recursive: true });
      for (let i = 0; i < 3; i++) await writeFile(join(coll, `f${i}.txt`), `file ${i}`);
      const opts = { dir: coll, stateDir: join(dir, 'state'), fsync: false, regenerateAfterMs: Infinity };
      const oldBase = 'http://127.0.0.1:8081/';
      const first = await openDirectorySource({ ...opts, baseUrl: oldBase });
      try {
        await writeFile(join(coll, 'f0.txt'), 'changed');
        await first.scan();
        await first.source.generateAll();
      } finally {
        await first.close();
      }
      for (const newBase of ['http://127.0.0.1:9090/', 'https://example.org/']) {
        const second = await openDirectorySource({ ...opts, baseUrl: newBase });
        try {
          const { docs } = await crawl(second, second.sourceDescriptionUrl);
          const kinds = new Set(docs.map((d) => d.doc.kind));
          for (const k of ['source-description', 'capability-list', 'resource-list', 'change-list'])
            assert.ok(kinds.has(k as never), `${k} crawled`);
          for (const d of docs) {
            const text = await readFile(d.path, 'utf8');
            assert.ok(!text.includes(oldBase), `${d.url} (${d.doc.kind}) has no URL of the old base`);
            assert.ok(text.includes(newBase), `${d.url} (${d.doc.kind}) has URLs of the new base`);
          }
        } finally {
          await second.close();
        }
      }
    } finally {
      await cleanup();
    }
  });

  it('a state directory that cannot be created: exit 2, the message names it and --state (serve and publish)', async () => {
    const { dir, cleanup } = await tempDir();
    try {
      const coll = join(dir, 'coll');
      await mkdir(coll, { recursive: true });
      await writeFile(join(coll, 'a.txt'), 'a');
      // A regular file where the state directory must go (works even as root, unlike chmod).
      await writeFile(join(dir, '.coll-resourcesync'), 'x');
      await writeFile(join(dir, 'a-file'), 'x');
      const given = join(dir, 'a-file', 'state');
      const runs = [
        {
          r: runCli(['serve', coll, '--port', '0', '--no-watch', '--no-notify']),
          path: join(dir, '.coll-resourcesync'),
        },
        { r: runCli(['serve', coll, '--port', '0', '--no-watch', '--state', given]), path: given },
      ];
      for (const { r, path } of runs) {
        assert.equal(await r.exit, 2, r.stderr());
        assert.ok(r.stderr().includes(path), r.stderr());
        assert.match(r.stderr(), /--state/);
      }
      await writeFile(join(dir, '.site.resourcesync-state'), 'x');
      for (const stateDir of [undefined, given]) {
        const err: string[] = [];
        const code = await runPublish({
          dir: coll,
          out: join(dir, 'site'),
          baseUrl: 'https://example.org/',
          ...(stateDir === undefined ? {} : { stateDir }),
          stdout: () => undefined,
          stderr: (t) => void err.push(t),
          progress: false,
        });
        assert.equal(code, 2, err.join(''));
        assert.match(err.join(''), /--state/);
        assert.ok(err.join('').includes(stateDir ?? join(dir, '.site.resourcesync-state')), err.join(''));
      }
    } finally {
      await cleanup();
    }
  });

  it('serve keeps its gzip cache in the state directory, and removes it when it stops', async () => {
    const { dir, cleanup } = await tempDir();
    try {
      const coll = join(dir, 'coll');
      await mkdir(coll, { recursive: true });
      await writeFile(join(coll, 'a.txt'), 'a');
      const state = join(dir, 'state');
      const r = runCli(['serve', coll, '--port', '0', '--state', state, '--json', '--no-watch', '--no-notify']);
      const ev = await waitForEvent(r, 'listening');
      const cache = join(state, 'gzip-cache');
      assert.ok(existsSync(cache), 'the cache directory is in the state directory');
      const res = await fetch(ev.sourceDescription as string, { headers: { 'accept-encoding': 'gzip' } });
      assert.equal(res.status, 200);
      await res.arrayBuffer();
      await until('a compressed copy in the cache', async () => (await readdir(cache)).some((f) => f.endsWith('.gz')));
      r.child.kill('SIGTERM');
      assert.equal(await r.exit, 0, r.stderr());
      assert.ok(!existsSync(cache), 'removed at stop');
    } finally {
      await cleanup();
    }
  });

  it("a second serve on the same state directory is refused (exit 2) naming the first one's pid", async () => {
    const { dir, cleanup } = await tempDir();
    try {
      const coll = join(dir, 'coll');
      await mkdir(coll, { recursive: true });
      await writeFile(join(coll, 'a.txt'), 'a');
      const state = join(dir, 'state');
      const args = ['serve', coll, '--port', '0', '--state', state, '--json', '--no-watch', '--no-notify'];
      const first = runCli(args);
      await waitForEvent(first, 'listening');
      const second = runCli(args);
      // Without the lock it would start serving: fail then instead of waiting for an exit that never comes.
      const outcome = await Promise.race([
        second.exit,
        waitForEvent(second, 'listening').then(
          () => 'listening',
          () => 'exited',
        ),
      ]);
      if (outcome === 'listening') second.child.kill('SIGTERM');
      assert.equal(await second.exit, 2, second.stderr());
      assert.ok(second.stderr().includes(`pid ${first.child.pid}`), second.stderr());
      assert.ok(second.stderr().includes(state), second.stderr());
      // The first one goes on serving, then stops cleanly and frees the state.
      first.child.kill('SIGTERM');
      assert.equal(await first.exit, 0, first.stderr());
      const third = runCli(args);
      await waitForEvent(third, 'listening');
      third.child.kill('SIGTERM');
      assert.equal(await third.exit, 0, third.stderr());
    } finally {
      await cleanup();
    }
  });

  it('in one process: a second directory Source on the same state is refused until the first is closed', async () => {
    const { dir, cleanup } = await tempDir();
    try {
      const coll = join(dir, 'coll');
      await mkdir(coll, { recursive: true });
      await writeFile(join(coll, 'a.txt'), 'a');
      const state = join(dir, 'state');
      const opts = { dir: coll, baseUrl: 'http://localhost/', stateDir: state, fsync: false };
      const first = await openDirectorySource(opts);
      try {
        await assert.rejects(
          openDirectorySource(opts),
          (e) => isResourceSyncError(e, 'RS_CONFIG') && e.message.includes(state),
        );
      } finally {
        await first.close();
      }
      // A lock left by a process that is gone is taken over.
      const gone = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], {
        encoding: 'utf8',
      });
      await writeFile(join(state, 'lock'), `${gone.stdout}\n`);
      const second = await openDirectorySource(opts);
      await second.close();
      assert.ok(!existsSync(join(state, 'lock')), 'released at close');
    } finally {
      await cleanup();
    }
  });

  it('rescans say each warning once: only new ones, and again one that went away and came back', async () => {
    const { dir, cleanup } = await tempDir();
    try {
      const coll = join(dir, 'coll');
      await mkdir(coll, { recursive: true });
      await writeFile(join(coll, 'a.txt'), 'a');
      for (let i = 0; i < 5; i++) await symlink(join(dir, `missing-${i}`), join(coll, `broken-${i}`));
      const warnings: string[] = [];
      const site = await openDirectorySource({
        dir: coll,
        baseUrl: 'http://localhost/',
        stateDir: join(dir, 'state'),
        fsync: false,
        onWarning: (m) => void warnings.push(m),
      });
      try {
        assert.equal(warnings.length, 5, warnings.join('\n'));
        await site.scan();
        await site.scan();
        assert.equal(warnings.length, 5, `nothing said again: ${warnings.join('\n')}`);
        await symlink(join(dir, 'missing-new'), join(coll, 'broken-new'));
        await site.scan();
        assert.equal(warnings.length, 6, warnings.join('\n'));
        assert.match(warnings[5]!, /broken-new/);
        await rm(join(coll, 'broken-0'));
        await site.scan();
        assert.equal(warnings.length, 6);
        await symlink(join(dir, 'missing-0'), join(coll, 'broken-0'));
        await site.scan();
        assert.equal(warnings.length, 7, warnings.join('\n'));
        assert.match(warnings[6]!, /broken-0/);
      } finally {
        await site.close();
      }
    } finally {
      await cleanup();
    }
  });

  it('a second serve --oai-pmh on the same state directory is refused (exit 2) naming the first one', async () => {
    const { dir, cleanup } = await tempDir();
    const provider = await startOaiServer({ pageSize: 5 });
    try {
      provider.now = Date.parse('2024-03-01T10:00:00Z');
      for (let i = 1; i <= 3; i++) provider.put(`oai:t:${i}`, `Title ${i}`, []);
      const state = join(dir, 'state');
      const args = ['serve', '--oai-pmh', provider.url, '--port', '0', '--json', '--no-notify', '--state', state];
      const first = runCli(args);
      await waitForEvent(first, 'listening');
      const second = runCli(args);
      const outcome = await Promise.race([
        second.exit,
        waitForEvent(second, 'listening').then(
          () => 'listening',
          () => 'exited',
        ),
      ]);
      if (outcome === 'listening') second.child.kill('SIGTERM');
      assert.equal(await second.exit, 2, second.stderr());
      assert.ok(second.stderr().includes(`pid ${first.child.pid}`), second.stderr());
      first.child.kill('SIGTERM');
      assert.equal(await first.exit, 0, first.stderr());
      assert.ok(!existsSync(join(state, 'lock')), 'released at stop');
    } finally {
      await provider.close();
      await cleanup();
    }
  });
});
