// `resourcesync ... | head`: every command ends quietly when the reader of its stdout goes away (output.ts).
// The CLI runs as a child whose stdout is a pipe the test closes before the child writes anything, so every
// write meets EPIPE; and once through a real `| head -1` in a shell.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { StaticSource, cliCommand, makeResources, readTree, repoRoot } from '../destination/static-source.js';

function fixture(): string {
  return join(repoRoot(), 'test', 'fixtures', 'spec-examples', 'example-01.xml');
}

/** Runs the CLI with its stdout closed by the reader at once; resolves with the exit code and stderr. */
function runClosedStdout(args: readonly string[]): Promise<{ code: number | null; stderr: string }> {
  const { cmd, args: base } = cliCommand();
  const child = spawn(cmd, [...base, ...args], { cwd: repoRoot(), stdio: ['ignore', 'pipe', 'pipe'] });
  // The reader goes away before the child has written anything.
  child.stdout.destroy();
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stderr })));
}

function assertQuiet(r: { code: number | null; stderr: string }, expected: number, what: string): void {
  assert.doesNotMatch(r.stderr, /EPIPE|Error|\n\s+at /, `${what}: no stack trace (stderr: ${r.stderr})`);
  assert.equal(r.code, expected, `${what}: exit code (stderr: ${r.stderr})`);
}

describe('a closed stdout ends every command quietly', { timeout: 120_000 }, () => {
  let src: StaticSource;
  let dir: string;
  before(async () => {
    src = await StaticSource.start();
    dir = await mkdtemp(join(tmpdir(), 'rs-epipe-'));
    src.publishResourceList(makeResources(5, 50, 'epipe'), '2024-06-01T00:00:00Z', 1);
    src.publishChangeLists([{ from: '2024-06-01T00:00:00Z', changes: [] }]);
    src.publishCapabilities();
  });
  after(async () => {
    await src.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('help, validate (one and many documents, --list-rules), inspect', async () => {
    assertQuiet(await runClosedStdout(['--help']), 0, '--help');
    assertQuiet(await runClosedStdout(['sync', '--help']), 0, 'sync --help');
    assertQuiet(await runClosedStdout(['validate', '--list-rules']), 0, 'validate --list-rules');
    const many = Array.from({ length: 40 }, () => fixture());
    assertQuiet(await runClosedStdout(['validate', ...many]), 1, 'validate x40 (example 1 lacks its up link: 1)');
    assertQuiet(await runClosedStdout(['validate', '--json', ...many]), 1, 'validate --json x40');
    assertQuiet(await runClosedStdout(['inspect', fixture()]), 0, 'inspect');
    assertQuiet(
      await runClosedStdout(['inspect', '--walk', src.url('/.well-known/resourcesync')]),
      0,
      'inspect --walk',
    );
  });

  it('sync: the run completes (the copy is made) and exits with its own code', async () => {
    const r = await runClosedStdout(['sync', '--json', '--durability', 'none', src.url('/'), dir]);
    assertQuiet(r, 0, 'sync --json');
    assert.equal(readTree(dir).size, 5, 'the copy was made');
    const audit = await runClosedStdout(['sync', '--audit', src.url('/'), dir]);
    assertQuiet(audit, 0, 'sync --audit');
  });

  it('through a shell: resourcesync validate ... | head -1', { skip: !existsSync('/bin/sh') }, async () => {
    const { cmd, args } = cliCommand();
    const quote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;
    const line = `${[cmd, ...args, 'validate', ...Array.from({ length: 40 }, () => fixture())].map(quote).join(' ')} | head -1`;
    const child = spawn('/bin/sh', ['-c', line], { cwd: repoRoot(), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    assert.equal(code, 0);
    assert.equal(stdout.split('\n').length, 2, stdout);
    assert.doesNotMatch(stderr, /EPIPE|Error|\n\s+at /, stderr);
  });
});
