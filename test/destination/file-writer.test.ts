import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { isResourceSyncError } from '../../src/core/errors.js';
import { FileWriter } from '../../src/destination/file-writer.js';
import { stageSmallFile } from '../../src/destination/small.js';

describe('FileWriter (small-file writes on a worker thread)', () => {
  let dir: string;
  const writer = new FileWriter();
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rs-fw-'));
  });
  after(async () => {
    await writer.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('creates, installs over an existing file and renames, in the order given', async () => {
    const target = join(dir, 'a.txt');
    writeFileSync(target, 'old');
    await writer.create(join(dir, 'new.txt'), Buffer.from('created'));
    assert.equal(readFileSync(join(dir, 'new.txt'), 'utf8'), 'created');
    await writer.install(join(dir, '.a.tmp1'), target, Buffer.from('v2'));
    assert.equal(readFileSync(target, 'utf8'), 'v2');
    // Two versions staged for one target, renamed in order: the later one stays.
    await writer.create(join(dir, '.a.tmp2'), Buffer.from('v3'));
    await writer.create(join(dir, '.a.tmp3'), Buffer.from('v4'));
    await Promise.all([
      writer.replace(join(dir, '.a.tmp2'), target, undefined, 0, join(dir, '.a.x2.tmp')),
      writer.replace(join(dir, '.a.tmp3'), target, undefined, 0, join(dir, '.a.x3.tmp')),
    ]);
    assert.equal(readFileSync(target, 'utf8'), 'v4');
    assert.deepEqual(readdirSync(dir).sort(), ['a.txt', 'new.txt']);
  });

  it('writes the bytes of a view, not its whole buffer', async () => {
    const big = Buffer.alloc(65536, 0x61);
    big.write('hello', 1000);
    const view = big.subarray(1000, 1005);
    await writer.create(join(dir, 'view.txt'), view);
    assert.equal(readFileSync(join(dir, 'view.txt'), 'utf8'), 'hello');
  });

  it('fails with RS_IO naming the file, and leaves nothing of its own behind', async () => {
    const existing = join(dir, 'exists.txt');
    writeFileSync(existing, 'keep me');
    // create refuses an existing path and does not remove it.
    await assert.rejects(writer.create(existing, Buffer.from('x')), (e: unknown) => {
      assert.ok(isResourceSyncError(e, 'RS_IO'));
      assert.match((e as Error).message, /exists\.txt/);
      return true;
    });
    assert.equal(readFileSync(existing, 'utf8'), 'keep me');
    // install into a missing directory: nothing is created.
    await assert.rejects(writer.install(join(dir, 'no', '.t.tmp'), join(dir, 'no', 't'), Buffer.from('x')), /no\/t/);
    // rename onto a directory goes to <dir>/%%self (nested resources); where that is a non-empty directory it
    // fails, and the temporary file is removed.
    mkdirSync(join(dir, 'adir', '%%self'), { recursive: true });
    writeFileSync(join(dir, 'adir', '%%self', 'inside'), '');
    writeFileSync(join(dir, '.r.tmp'), 'r');
    await assert.rejects(
      writer.replace(join(dir, '.r.tmp'), join(dir, 'adir'), undefined, 0, join(dir, '.x')),
      (e: unknown) => isResourceSyncError(e, 'RS_IO'),
    );
    assert.equal(existsSync(join(dir, '.r.tmp')), false);
    // The thread is still usable after failures.
    await writer.create(join(dir, 'after.txt'), Buffer.from('ok'));
    assert.equal(readFileSync(join(dir, 'after.txt'), 'utf8'), 'ok');
  });

  it('batches many concurrent jobs and completes them all', async () => {
    const sub = join(dir, 'many');
    mkdirSync(sub);
    await Promise.all(
      Array.from({ length: 500 }, (_, i) => writer.create(join(sub, `f${i}`), Buffer.from(`body ${i}`))),
    );
    const names = readdirSync(sub);
    assert.equal(names.length, 500);
    assert.equal(readFileSync(join(sub, 'f321'), 'utf8'), 'body 321');
  });

  it('does the jobs on the calling thread when the thread cannot start', async () => {
    // A heap far too small for the thread to start: it fails before answering anything.
    const starved = new FileWriter({
      resourceLimits: { maxOldGenerationSizeMb: 0.01, maxYoungGenerationSizeMb: 0.01 },
    });
    const sub = join(dir, 'starved');
    mkdirSync(sub);
    await Promise.all([1, 2, 3].map((i) => starved.create(join(sub, `s${i}`), Buffer.from(`s${i}`))));
    writeFileSync(join(sub, '.t.tmp'), 'renamed');
    assert.equal(await starved.replace(join(sub, '.t.tmp'), join(sub, 's1'), undefined, 0, join(sub, '.x')), -1);
    assert.deepEqual(readdirSync(sub).sort(), ['s1', 's2', 's3']);
    assert.equal(readFileSync(join(sub, 's1'), 'utf8'), 'renamed');
    await starved.close();
  });

  it('a replacement that cannot be staged is reported under the file being installed, not its temporary name', async () => {
    const target = join(dir, 'no-such-dir', 'r.txt');
    await assert.rejects(stageSmallFile(target, Buffer.from('x'), true), (e: Error) => {
      assert.ok(isResourceSyncError(e, 'RS_IO'));
      assert.ok(e.message.startsWith(`cannot write ${target}:`), e.message);
      return true;
    });
  });

  it('keeps a process alive while jobs are pending, and lets it exit once they are done', async () => {
    // A script whose only pending work is the writer's job: it must finish the job and then exit by itself.
    const moduleUrl = new URL('../../src/destination/file-writer.js', import.meta.url).href;
    const out = join(dir, 'child.txt');
    const script = `import(${JSON.stringify(moduleUrl)}).then(async ({ sharedFileWriter }) => {
      await sharedFileWriter().create(${JSON.stringify(out)}, Buffer.from('from child'));
      process.stdout.write('done');
    });`;
    const args = fileURLToPath(import.meta.url).endsWith('.ts') ? ['--import', 'tsx'] : [];
    const stdout = execFileSync(process.execPath, [...args, '--input-type=module', '-e', script], {
      timeout: 20_000,
      encoding: 'utf8',
    });
    assert.equal(stdout, 'done');
    assert.equal(readFileSync(out, 'utf8'), 'from child');
  });

  it('a thread started ahead (warm) does the later jobs, and keeps no process alive when none comes', () => {
    const moduleUrl = new URL('../../src/destination/file-writer.js', import.meta.url).href;
    const out = join(dir, 'warm.txt');
    const args = fileURLToPath(import.meta.url).endsWith('.ts') ? ['--import', 'tsx'] : [];
    const run = (script: string): string =>
      execFileSync(process.execPath, [...args, '--input-type=module', '-e', script], {
        timeout: 20_000,
        encoding: 'utf8',
      });
    // Warmed and never used: the process exits on its own (it hung before the thread was unreferenced last).
    assert.equal(
      run(`import(${JSON.stringify(moduleUrl)}).then(({ sharedFileWriter }) => {
        sharedFileWriter().warm();
        process.stdout.write('warmed');
      });`),
      'warmed',
    );
    // Warmed, then used once the thread is up.
    assert.equal(
      run(`import(${JSON.stringify(moduleUrl)}).then(async ({ sharedFileWriter }) => {
        const w = sharedFileWriter();
        w.warm();
        await new Promise((r) => setTimeout(r, 200));
        await w.create(${JSON.stringify(out)}, Buffer.from('after warm'));
        process.stdout.write('done');
      });`),
      'done',
    );
    assert.equal(readFileSync(out, 'utf8'), 'after warm');
  });
});
