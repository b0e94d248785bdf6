import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { isResourceSyncError } from '../../src/core/errors.js';
import { openDirectorySource } from '../../src/source/index.js';
import { tempDir } from './helpers.js';

describe('directory Source lifecycle', () => {
  it('close() stops a scan in progress; the next start-up scan completes the inventory', async () => {
    const { dir, cleanup } = await tempDir();
    try {
      const coll = join(dir, 'coll');
      for (let d = 0; d < 20; d++) {
        await mkdir(join(coll, `d${d}`), { recursive: true });
        await Promise.all(Array.from({ length: 100 }, (_, i) => writeFile(join(coll, `d${d}`, `f${i}`), `${d}/${i}`)));
      }
      const opts = { dir: coll, baseUrl: 'http://localhost/', stateDir: join(dir, 'state'), fsync: false };
      const first = await openDirectorySource({ ...opts, scanOnOpen: false });
      const scanning = first.scan();
      await first.close();
      await assert.rejects(scanning, (e) => isResourceSyncError(e, 'RS_ABORTED'));
      const second = await openDirectorySource(opts);
      try {
        const stats = await second.stats();
        assert.equal(stats.resources, 2000);
        assert.equal(stats.seq, 0, 'still the baseline: no change recorded');
      } finally {
        await second.close();
      }
    } finally {
      await cleanup();
    }
  });

  it('refuses a collection directory that does not exist, naming it', async () => {
    const { dir, cleanup } = await tempDir();
    try {
      await assert.rejects(
        openDirectorySource({ dir: join(dir, 'nope'), baseUrl: 'http://localhost/', stateDir: join(dir, 's') }),
        (e) => isResourceSyncError(e, 'RS_CONFIG') && e.message.includes(join(dir, 'nope')),
      );
    } finally {
      await cleanup();
    }
  });
});
