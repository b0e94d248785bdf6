import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { isResourceSyncError } from '../../src/core/errors.js';
import { writeFileAtomic } from '../../src/io/atomic.js';
import { hashFile, hashStream } from '../../src/io/hashing.js';

let dir = '';
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rs-io-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('hashing', () => {
  it('computes md5, sha-1 and sha-256 in one pass, across buffer boundaries', async () => {
    const data = Buffer.alloc(3 * 1024 * 1024 + 17);
    for (let i = 0; i < data.length; i++) data[i] = (i * 31) & 0xff;
    const path = join(dir, 'big.bin');
    await writeFile(path, data);
    const r = await hashFile(path, ['md5', 'sha-1', 'sha-256'], { bufferSize: 1 << 20 });
    assert.equal(r.length, data.length);
    assert.equal(r.hashes.md5, createHash('md5').update(data).digest('hex'));
    assert.equal(r.hashes['sha-1'], createHash('sha1').update(data).digest('hex'));
    assert.equal(r.hashes['sha-256'], createHash('sha256').update(data).digest('hex'));
    async function* chunks() {
      for (let i = 0; i < data.length; i += 100_000) yield data.subarray(i, i + 100_000);
    }
    const s = await hashStream(chunks(), ['sha-256']);
    assert.equal(s.hashes['sha-256'], r.hashes['sha-256']);
    assert.equal(s.hashes.md5, undefined);
  });
  it('names the path of an unreadable file', async () => {
    const missing = join(dir, 'nope');
    await assert.rejects(
      hashFile(missing, ['md5']),
      (e) => isResourceSyncError(e, 'RS_IO') && e.message.includes(missing),
    );
  });
});

describe('writeFileAtomic', () => {
  it('replaces the target and leaves no temporary file', async () => {
    const path = join(dir, 'sub', 'a.txt');
    assert.equal(await writeFileAtomic(path, 'one'), 3);
    async function* parts() {
      yield Buffer.from('two ');
      yield Buffer.from('parts');
    }
    assert.equal(await writeFileAtomic(path, parts()), 9);
    assert.equal(await readFile(path, 'utf8'), 'two parts');
    assert.deepEqual(await readdir(join(dir, 'sub')), ['a.txt']);
  });
  it('keeps the old file when the data source fails midway', async () => {
    const path = join(dir, 'keep.txt');
    await writeFileAtomic(path, 'original');
    async function* failing() {
      yield Buffer.from('partial');
      throw new Error('source broke');
    }
    await assert.rejects(writeFileAtomic(path, failing()), (e) => isResourceSyncError(e, 'RS_IO'));
    assert.equal(await readFile(path, 'utf8'), 'original');
    assert.deepEqual(
      (await readdir(dir)).filter((n) => n.startsWith('.keep')),
      [],
    );
  });
});
