import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { UriSet } from '../../src/destination/uri-set.js';

describe('UriSet', () => {
  let parent: string;
  before(async () => {
    parent = await mkdtemp(join(tmpdir(), 'rs-uriset-'));
  });
  after(async () => {
    await rm(parent, { recursive: true, force: true });
  });

  it('answers the same in memory and after moving to disk, and removes its scratch database', () => {
    const set = new UriSet({ memoryLimit: 50, tmpDir: parent });
    for (let i = 0; i < 40; i++) set.add(`http://x/r${i}`);
    assert.equal(set.onDisk, false);
    assert.equal(set.has('http://x/r39'), true);
    for (let i = 40; i < 25_000; i++) set.add(`http://x/r${i}`);
    set.add('http://x/r7'); // a duplicate
    assert.equal(set.onDisk, true);
    assert.equal(readdirSync(parent).length, 1);
    for (const i of [0, 39, 40, 49, 50, 51, 12_345, 24_999]) assert.equal(set.has(`http://x/r${i}`), true, `r${i}`);
    assert.equal(set.has('http://x/r25000'), false);
    assert.equal(set.has('http://x/'), false);
    set.add('http://x/late'); // added after lookups
    assert.equal(set.has('http://x/late'), true);
    set.close();
    assert.equal(readdirSync(parent).length, 0);
  });

  it('reports a scratch directory it cannot create', () => {
    const set = new UriSet({ memoryLimit: 1, tmpDir: join(parent, 'missing', 'deeper') });
    set.add('a');
    assert.throws(
      () => set.add('b'),
      (e: Error & { code?: string }) => e.code === 'RS_IO' && e.message.includes('missing'),
    );
    assert.equal(existsSync(join(parent, 'missing')), false);
  });
});
