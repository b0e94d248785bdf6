import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runSync, type SyncCommandOptions } from '../../src/cli/sync.js';
import { StaticSource, cliCommand, makeResources, repoRoot } from './static-source.js';

const AT = '2024-06-01T00:00:00Z';

function capture(): {
  out: { stdout: (t: string) => void; stderr: (t: string) => void };
  text: () => string;
  err: () => string;
} {
  let o = '';
  let e = '';
  return {
    out: { stdout: (t) => void (o += t), stderr: (t) => void (e += t) },
    text: () => o,
    err: () => e,
  };
}

async function runCli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const { cmd, args: base } = cliCommand();
  const child = spawn(cmd, [...base, ...args], { stdio: ['ignore', 'pipe', 'pipe'], cwd: repoRoot() });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const code = await new Promise<number>((r) => child.on('close', (c) => r(c ?? -1)));
  return { code, stdout, stderr };
}

describe('resourcesync sync (CLI)', { timeout: 60_000 }, () => {
  let src: StaticSource;
  let dir: string;
  before(async () => {
    src = await StaticSource.start();
    dir = await mkdtemp(join(tmpdir(), 'rs-cli-'));
  });
  after(async () => {
    await src.close();
    await rm(dir, { recursive: true, force: true });
  });
  const opts = (
    mode: SyncCommandOptions['mode'],
    extra: SyncCommandOptions['destination'] = {},
  ): SyncCommandOptions => ({
    mode,
    json: true,
    destination: { durability: 'none', http: { retries: 0 }, ...extra },
  });

  it('--help lists the options and exit codes', async () => {
    const r = await runCli(['sync', '--help']);
    assert.equal(r.code, 0);
    for (const s of [
      '--baseline',
      '--audit',
      '--dry-run',
      '--delete',
      '--from',
      '--checksum',
      '--no-dumps',
      '--allow-host',
      'Exit codes',
      '  3  only with --detailed-exit-code',
      '--detailed-exit-code',
    ])
      assert.ok(r.stdout.includes(s), s);
  });

  it('exit codes: 0 after changes (3 with --detailed-exit-code), 0 when nothing to do, 0/1 for audits, 1 for failures, 2 for an unreachable Source', async () => {
    const resources = makeResources(8, 100, 'cli');
    src.publishResourceList(resources, AT, 2);
    src.publishChangeLists([{ from: AT, changes: [] }]);
    src.publishCapabilities();
    const url = src.url('/');
    // Dry run first: reports, writes nothing.
    let c = capture();
    assert.equal(await runSync(url, dir, { ...opts('auto', { dryRun: true }), detailedExitCode: true }, c.out), 3);
    assert.equal(JSON.parse(c.text()).counts.created, 8);
    c = capture();
    assert.equal(await runSync(url, dir, opts('auto', { dryRun: true }), c.out), 0, 'success is 0 by default');
    c = capture();
    assert.equal(await runSync(url, dir, { ...opts('auto'), progress: true }, c.out), 0);
    assert.match(c.err(), /\rbaseline .*resources/, 'a progress line on stderr');
    assert.ok(c.err().endsWith('\r\x1b[K'), 'the progress line is cleared before the summary');
    const s = JSON.parse(c.text());
    assert.equal(s.operation, 'baseline');
    assert.equal(s.counts.created, 8);
    c = capture();
    assert.equal(await runSync(url, dir, opts('auto'), c.out), 0);
    assert.equal(JSON.parse(c.text()).operation, 'incremental');
    c = capture();
    assert.equal(await runSync(url, dir, opts('audit', { checksum: true }), c.out), 0);
    assert.equal(JSON.parse(c.text()).inSync, true);
    // A resource changes without a Change List entry: the audit finds it.
    src.publishResourceList(makeResources(8, 100, 'cli2'), AT, 2);
    c = capture();
    assert.equal(await runSync(url, dir, opts('audit'), c.out), 1);
    assert.equal(JSON.parse(c.text()).audit.changed, 8);
    // A failure: exit 1, and the human summary names it.
    src.publishChangeLists([
      {
        from: AT,
        changes: [{ path: '/res/r1.txt', change: 'updated', datetime: '2024-06-02T00:00:00Z', body: Buffer.from('x') }],
      },
    ]);
    src.remove('/res/r1.txt');
    c = capture();
    assert.equal(await runSync(url, dir, { ...opts('auto'), json: false }, c.out), 1);
    assert.match(c.text(), /failed: .*r1\.txt.*RS_HTTP/);
    // Unreachable Source: 2.
    c = capture();
    assert.equal(await runSync('http://127.0.0.1:9/', dir, opts('auto'), c.out), 2);
    assert.match(c.err(), /RS_(HTTP|DISCOVERY|TIMEOUT)/);
  });

  it('runs as a command with --json and rejects conflicting modes', async () => {
    const d2 = await mkdtemp(join(tmpdir(), 'rs-cli2-'));
    try {
      const resources = makeResources(3, 10, 'cmd');
      src.publishResourceList(resources, AT, 1);
      src.publishCapabilities();
      const r = await runCli([
        'sync',
        '--json',
        '--no-dumps',
        '--concurrency',
        '2',
        src.url('/capabilitylist.xml'),
        d2,
      ]);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(JSON.parse(r.stdout).counts.created, 3);
      // `&&` sees a successful sync as success; --detailed-exit-code tells changes (3) from none (0).
      const chained = await runCli(['sync', '--baseline', '--no-dumps', src.url('/capabilitylist.xml'), d2]);
      assert.equal(chained.code, 0, chained.stdout + chained.stderr);
      src.publishResourceList(makeResources(3, 10, 'cmd-v2'), AT, 1);
      const detailed = await runCli([
        'sync',
        '--baseline',
        '--detailed-exit-code',
        '--no-dumps',
        src.url('/capabilitylist.xml'),
        d2,
      ]);
      assert.equal(detailed.code, 3, detailed.stderr);
      const none = await runCli([
        'sync',
        '--baseline',
        '--detailed-exit-code',
        '--no-dumps',
        src.url('/capabilitylist.xml'),
        d2,
      ]);
      assert.equal(none.code, 0, none.stderr);
      const bad = await runCli(['sync', '--baseline', '--audit', src.url('/'), d2]);
      assert.equal(bad.code, 2);
      const badFrom = await runCli(['sync', '--from', 'last tuesday', src.url('/'), d2]);
      assert.equal(badFrom.code, 2);
      // Follow-only options: refused without --follow, and a duration must be one.
      const pollAlone = await runCli(['sync', '--poll', '5m', '--framework-check', '10s', src.url('/'), d2]);
      assert.equal(pollAlone.code, 2);
      assert.match(pollAlone.stderr, /--poll, --framework-check only apply with --follow/);
      const badPoll = await runCli(['sync', '--follow', '--framework-poll', 'soon', src.url('/'), d2]);
      assert.equal(badPoll.code, 2);
      assert.match(badPoll.stderr, /--framework-poll.*a duration like/);
    } finally {
      await rm(d2, { recursive: true, force: true });
    }
  });
});
