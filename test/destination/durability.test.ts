// `batch` durability: staged files stay under temporary names until their batch is flushed (file system
// flushed, renamed, flushed again), then the records commit; a failed rename fails the batch.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Recorder } from '../../src/destination/context.js';
import { Destination } from '../../src/destination/destination.js';
import { writeSmallTemp } from '../../src/destination/small.js';
import { DestinationState } from '../../src/destination/state.js';
import { syncFileSystem } from '../../src/io/syncfs.js';
import { StaticSource, localPathOf, makeResources, readTree } from './static-source.js';

describe('syncFileSystem', () => {
  it('flushes the file system of an existing path, and names a path it cannot open', async () => {
    assert.equal(await syncFileSystem(tmpdir()), process.platform === 'linux');
    if (process.platform !== 'linux') return;
    await assert.rejects(syncFileSystem('/nonexistent/rs-syncfs'), (e: Error & { code?: string }) => {
      assert.equal(e.code, 'RS_IO');
      assert.match(e.message, /\/nonexistent\/rs-syncfs/);
      return true;
    });
  });
});

describe('Recorder in batch durability', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rs-durability-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('renames staged files only when their batch flushes, then commits their records', async () => {
    const state = DestinationState.open(dir);
    try {
      const rec = new Recorder(state, { durability: 'batch', root: dir, batchSize: 1000, flushIntervalMs: 60_000 });
      mkdirSync(join(dir, 'a'), { recursive: true });
      const targets = [0, 1, 2].map((i) => join(dir, 'a', `f${i}.txt`));
      for (const [i, t] of targets.entries()) {
        rec.stage(writeSmallTemp(t, Buffer.from(`body ${i}`)), t);
        await rec.put({ uri: `http://x/a/f${i}.txt`, path: `a/f${i}.txt`, length: 6 }, t);
      }
      // Not flushed yet: nothing under its final name, nothing recorded, the bodies are in temporary files.
      assert.deepEqual(
        targets.map((t) => existsSync(t)),
        [false, false, false],
      );
      assert.equal(state.get('http://x/a/f0.txt'), undefined);
      assert.equal(readdirSync(join(dir, 'a')).length, 3);
      await rec.flush();
      assert.deepEqual(
        targets.map((t) => readFileSync(t, 'utf8')),
        ['body 0', 'body 1', 'body 2'],
      );
      assert.deepEqual(readdirSync(join(dir, 'a')).sort(), ['f0.txt', 'f1.txt', 'f2.txt']);
      assert.equal(state.get('http://x/a/f2.txt')?.path, 'a/f2.txt');
    } finally {
      state.close();
    }
  });

  it('commits a group as soon as no commit is running (groupSize), and renames replacements over old files', async () => {
    const state = DestinationState.open(dir);
    try {
      const rec = new Recorder(state, {
        durability: 'batch',
        root: dir,
        batchSize: 1000,
        flushIntervalMs: 60_000,
        groupSize: 4,
      });
      mkdirSync(join(dir, 'g'), { recursive: true });
      const targets = [0, 1, 2, 3].map((i) => join(dir, 'g', `f${i}.txt`));
      for (const t of targets) writeFileSync(t, 'old');
      for (const [i, t] of targets.entries()) {
        // Files replacing existing ones: renamed by the file writer thread when the batch commits.
        rec.stage(writeSmallTemp(`${t}.new`, Buffer.from(`new ${i}`)), t, true);
        if (i < 3) {
          await rec.put({ uri: `http://x/g/f${i}.txt`, path: `g/f${i}.txt`, length: 5 }, t);
          assert.equal(state.get(`http://x/g/f${i}.txt`), undefined, 'below the group size: not committed');
          assert.equal(readFileSync(t, 'utf8'), 'old');
        }
      }
      // The fourth record makes a group with no commit running: committed now, not after 60 s or 1,000 records.
      await rec.put({ uri: 'http://x/g/f3.txt', path: 'g/f3.txt', length: 5 }, targets[3]);
      assert.deepEqual(
        targets.map((t) => readFileSync(t, 'utf8')),
        ['new 0', 'new 1', 'new 2', 'new 3'],
      );
      assert.equal(state.get('http://x/g/f0.txt')?.path, 'g/f0.txt');
      assert.deepEqual(readdirSync(join(dir, 'g')).sort(), ['f0.txt', 'f1.txt', 'f2.txt', 'f3.txt']);
    } finally {
      state.close();
    }
  });

  it('fails the batch without committing its records when a staged file cannot be renamed', async () => {
    const state = DestinationState.open(dir);
    try {
      const rec = new Recorder(state, { durability: 'batch', root: dir, batchSize: 1000, flushIntervalMs: 60_000 });
      mkdirSync(join(dir, 'b'), { recursive: true });
      const good = join(dir, 'b', 'good.txt');
      const bad = join(dir, 'b', 'dir-in-the-way');
      // A file onto a directory goes to <dir>/%%self (nested resources): a non-empty directory there fails it.
      mkdirSync(join(bad, '%%self', 'child'), { recursive: true });
      rec.stage(writeSmallTemp(bad, Buffer.from('x')), bad);
      rec.stage(writeSmallTemp(good, Buffer.from('good')), good);
      await rec.put({ uri: 'http://x/b/good.txt', path: 'b/good.txt', length: 4 }, good);
      await assert.rejects(rec.flush(), (e: Error & { code?: string }) => {
        assert.equal(e.code, 'RS_IO');
        assert.match(e.message, /dir-in-the-way/);
        return true;
      });
      assert.equal(readFileSync(good, 'utf8'), 'good', 'the other staged files of the batch are installed');
      assert.equal(state.get('http://x/b/good.txt'), undefined, 'the failed batch recorded nothing');
      assert.deepEqual(readdirSync(join(dir, 'b')).sort(), ['dir-in-the-way', 'good.txt'], 'no temporary file left');
    } finally {
      state.close();
    }
  });

  it('commits a batch once it is flushIntervalMs old when nothing more comes, and reports a timed failure', async () => {
    const state = DestinationState.open(dir);
    try {
      const rec = new Recorder(state, { durability: 'batch', root: dir, batchSize: 1000, flushIntervalMs: 50 });
      mkdirSync(join(dir, 't'), { recursive: true });
      const t = join(dir, 't', 'one.txt');
      rec.stage(writeSmallTemp(t, Buffer.from('one')), t);
      await rec.put({ uri: 'http://x/t/one.txt', path: 't/one.txt', length: 3 }, t);
      assert.equal(existsSync(t), false, 'not yet');
      // No other record arrives (a stalled download): the batch is committed all the same.
      await new Promise((r) => setTimeout(r, 400));
      assert.equal(readFileSync(t, 'utf8'), 'one');
      assert.equal(state.get('http://x/t/one.txt')?.path, 't/one.txt');
      // A commit the timer started that fails is reported by the next call.
      const bad = join(dir, 't', 'in-the-way');
      mkdirSync(join(bad, '%%self', 'child'), { recursive: true });
      rec.stage(writeSmallTemp(bad, Buffer.from('x')), bad);
      await new Promise((r) => setTimeout(r, 400));
      await assert.rejects(rec.put({ uri: 'http://x/t/two.txt', path: 't/two.txt', length: 1 }), /in-the-way/);
      await rec.flush();
    } finally {
      state.close();
    }
  });

  it('a baseline in batch durability leaves an exact copy, recorded, and no temporary file', async () => {
    const src = await StaticSource.start();
    const copy = await mkdtemp(join(tmpdir(), 'rs-durability-copy-'));
    try {
      const at = '2024-05-01T00:00:00Z';
      const resources = makeResources(300, 700, 'durable');
      src.publishResourceList(resources, at, 2);
      for (const r of resources) src.set(r.path, r.body, 'text/plain');
      src.publishChangeLists([{ from: at, changes: [] }]);
      src.publishCapabilities();
      const url = src.url('/capabilitylist.xml');
      const s = await new Destination({ url, dir: copy, durability: 'batch' }).sync();
      assert.equal(s.counts.created, 300);
      const tree = readTree(copy);
      assert.equal(tree.size, 300);
      for (const r of resources) assert.deepEqual(tree.get(localPathOf(src, r.path)), r.body);
      const st = DestinationState.open(copy, { readonly: true });
      assert.equal(st.count(), 300);
      assert.equal(st.getWatermark()?.at, at);
      st.close();
    } finally {
      await src.close();
      await rm(copy, { recursive: true, force: true });
    }
  });
});
