// Progress of long phases (src/cli/progress.ts): on a terminal, a line with count, rate, bytes, ETA and package
// downloads, redrawn by a timer through silent phases; nothing extra when stderr is not a terminal.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ProgressLine, formatDuration } from '../../src/cli/progress.js';
import { Destination } from '../../src/destination/destination.js';
import type { SyncEvent } from '../../src/destination/events.js';
import { StaticSource, cliCommand, makeResources, repoRoot } from '../destination/static-source.js';

const AT = '2024-06-01T00:00:00Z';

function sink(): { out: { stdout: (t: string) => void; stderr: (t: string) => void }; err: () => string } {
  let e = '';
  return { out: { stdout: () => undefined, stderr: (t) => void (e += t) }, err: () => e };
}

async function until(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 400; i++) {
    if (cond()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  assert.fail(`timed out waiting for ${what}`);
}

describe('progress line', () => {
  it('shows downloads (bytes, share, rate, ETA), counts with a bar and ETA when the total is known, elapsed time', () => {
    const s = sink();
    const p = new ProgressLine(s.out, { intervalMs: 60_000 });
    try {
      assert.match(p.text(), /^discovering · 0s$/);
      p.update({ type: 'start', operation: 'baseline', source: 'http://h/', dryRun: false });
      p.update({ type: 'download', url: 'http://h/dump/part-1.zip', bytes: 1024 * 1024, total: 4 * 1024 * 1024 });
      assert.match(p.text(), /baseline · downloading part-1\.zip 1\.0 MiB of 4\.0 MiB \(25%\)/);
      p.update({ type: 'package', url: 'http://h/dump/part-1.zip', files: 5000 });
      p.update({ type: 'progress', done: 10, bytes: 2048 });
      assert.match(p.text(), /installing 5000 files of part-1\.zip · 10 resources \(\d+\/s\), 2\.0 KiB · \d+s$/);
      p.update({ type: 'start', operation: 'incremental', source: 'http://h/', dryRun: false });
      p.update({ type: 'progress', done: 5, total: 20, bytes: 0 });
      assert.match(p.text(), /incremental · .*\[#####\.+\] 5\/20, ETA \d+s \(\d+\/s\)/);
      p.update({ type: 'resource', uri: 'http://h/x', action: 'failed' });
      assert.match(p.text(), /1 failed/);
    } finally {
      p.clear();
    }
    assert.ok(s.err().endsWith('\r\x1b[K'), 'cleared');
    assert.equal(formatDuration(185), '3m05s');
    assert.equal(formatDuration(3720), '1h02m');
  });

  it('is redrawn through silences (a timer), and cut to the terminal width', async () => {
    const s = sink();
    const p = new ProgressLine(s.out, { intervalMs: 10, columns: 30 });
    try {
      await until(() => s.err().split('\r').length > 3, 'three redraws without any event');
      const draws = s
        .err()
        .split('\r')
        .filter((l) => l !== '');
      for (const l of draws) assert.ok(l.replace('\x1b[K', '').length <= 29, l);
    } finally {
      p.clear();
    }
    const after = s.err();
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(s.err(), after, 'no redraw after clear');
  });
});

describe('progress of a sync', { timeout: 120_000 }, () => {
  let src: StaticSource;
  let dir: string;
  before(async () => {
    src = await StaticSource.start();
    dir = await mkdtemp(join(tmpdir(), 'rs-progress-'));
    const resources = makeResources(30, 200, 'progress');
    src.publishResourceList(resources, AT, 1);
    await src.publishResourceDump(resources, AT, 2);
    src.publishChangeLists([{ from: AT, changes: [] }]);
    src.publishCapabilities();
  });
  after(async () => {
    await src.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('a baseline via dumps reports each package download and its installs', async () => {
    const d = await mkdtemp(join(tmpdir(), 'rs-progress-lib-'));
    try {
      const events: SyncEvent[] = [];
      const dest = new Destination({ url: src.url('/'), dir: d, durability: 'none', http: { retries: 0 } });
      dest.on((e) => events.push(e));
      const s = await dest.baseline();
      assert.deepEqual(s.via, ['dump']);
      const downloads = events.filter((e) => e.type === 'download');
      const urls = new Set(downloads.map((e) => (e.type === 'download' ? e.url : '')));
      assert.equal(urls.size, 2, JSON.stringify(downloads));
      for (const e of downloads) if (e.type === 'download' && e.total !== undefined) assert.ok(e.bytes <= e.total);
      // An audit reports progress too (it compared every resource).
      const audited: SyncEvent[] = [];
      const auditor = new Destination({ url: src.url('/'), dir: d, http: { retries: 0 } });
      auditor.on((e) => audited.push(e));
      assert.equal((await auditor.audit()).inSync, true);
      const last = audited.filter((e) => e.type === 'progress').pop();
      assert.equal(last?.type === 'progress' ? last.done : -1, 30, JSON.stringify(last));
      // The last event of each download says it is complete.
      const p = new ProgressLine(sink().out, { intervalMs: 60_000 });
      try {
        for (const e of events.slice(
          0,
          events.findIndex((x) => x.type === 'package'),
        ))
          p.update(e);
        assert.match(p.text(), /downloading .*\.zip .* \(100%\)/);
      } finally {
        p.clear();
      }
    } finally {
      await rm(d, { recursive: true, force: true });
    }
  });

  it('nothing extra on stderr when it is not a terminal; --progress forces the line', async () => {
    const { cmd, args } = cliCommand();
    const run = (a: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> =>
      new Promise((resolve) => {
        const child = spawn(cmd, [...args, ...a], { cwd: repoRoot(), stdio: ['ignore', 'pipe', 'pipe'] });
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
        child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
        child.on('close', (code) => resolve({ code, stdout, stderr }));
      });
    const quiet = await run(['sync', '--durability', 'none', src.url('/'), dir]);
    assert.equal(quiet.code, 0, quiet.stderr);
    assert.equal(quiet.stderr, '', 'nothing on stderr');
    assert.match(quiet.stdout, /^baseline of /);
    const forced = await run(['sync', '--progress', '--baseline', '--durability', 'none', src.url('/'), dir]);
    assert.equal(forced.code, 0, forced.stderr);
    assert.match(forced.stderr, /\rbaseline · .*resources/);
    assert.ok(forced.stderr.endsWith('\r\x1b[K'), 'the line is erased before the summary');
  });

  it('on a pseudo-terminal (script -qc): the progress line, then the summary', {
    skip: !existsSync('/usr/bin/script'),
  }, async () => {
    const d = await mkdtemp(join(tmpdir(), 'rs-progress-tty-'));
    try {
      const { cmd, args } = cliCommand();
      const quote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;
      const line = [cmd, ...args, 'sync', '--durability', 'none', src.url('/'), d].map(quote).join(' ');
      const child = spawn('/usr/bin/script', ['-qfec', line, '/dev/null'], {
        cwd: repoRoot(),
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      child.stdout.on('data', (c: Buffer) => (out += c.toString()));
      child.stderr.on('data', (c: Buffer) => (out += c.toString()));
      const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
      assert.equal(code, 0, out);
      assert.match(out, /\r(discovering|baseline) · /, out);
      assert.match(out, /baseline of .*: 30 created/, out);
    } finally {
      await rm(d, { recursive: true, force: true });
    }
  });
});
