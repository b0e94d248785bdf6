// publish --copy-resources copies what changed and only that: a second run without changes copies nothing (the
// copies' mtimes were compared after float rounding, so about half were copied again on every run), and a
// change within the same millisecond and size is still copied.
import assert from 'node:assert/strict';
import { mkdir, readFile, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { runPublish } from '../../src/cli/publish.js';
import { tempDir } from './helpers.js';

const N = 300;

async function publish(options: { dir: string; out: string }): Promise<{ copied: number; updated: number }> {
  const out: string[] = [];
  const code = await runPublish({
    ...options,
    baseUrl: 'http://localhost/c/',
    progress: false,
    json: true,
    copyResources: true,
    stdout: (t) => void out.push(t),
    stderr: () => undefined,
  });
  assert.equal(code, 0);
  return JSON.parse(out.join('')) as { copied: number; updated: number };
}

describe('resourcesync publish --copy-resources', () => {
  it('copies every resource once, then only changed ones, compared exactly', async () => {
    const { dir, cleanup } = await tempDir();
    try {
      const coll = join(dir, 'coll');
      await mkdir(coll);
      // Millisecond mtimes with a sub-millisecond part, as file systems keep them.
      const base = Date.UTC(2024, 4, 1) / 1000;
      for (let i = 0; i < N; i++) {
        const f = join(coll, `f${i}.txt`);
        await writeFile(f, `file ${String(i).padStart(4, '0')}`);
        const t = base + i * 3.917 + 0.000_25;
        await utimes(f, t, t);
      }
      const opts = { dir: coll, out: join(dir, 'site') };
      assert.equal((await publish(opts)).copied, N);
      assert.equal((await publish(opts)).copied, 0, 'nothing changed: nothing copied');

      // Same size, same millisecond (another microsecond): a change all the same.
      const f7 = join(coll, 'f7.txt');
      await writeFile(f7, 'FILE 0007');
      const t7 = base + 7 * 3.917 + 0.000_75;
      await utimes(f7, t7, t7);
      const third = await publish(opts);
      assert.equal(third.updated, 1);
      assert.equal(third.copied, 1);
      assert.equal(await readFile(join(opts.out, 'c', 'f7.txt'), 'utf8'), 'FILE 0007');
      assert.equal((await publish(opts)).copied, 0);
    } finally {
      await cleanup();
    }
  });
});
