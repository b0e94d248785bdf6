// `sync --follow` keeps to --include / --exclude (notifications applied directly and catch-up runs alike), and
// stops cleanly when the reader of its output goes away (`sync --follow --json | head`), against `serve`.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { describe, it } from 'node:test';
import { cliCommand, EventLog, freePort, repoRoot, withTempDir } from '../notify/helpers.js';

interface Cli {
  readonly child: ChildProcess;
  readonly json: EventLog<Record<string, unknown>>;
  readonly exit: Promise<number | null>;
}

function startCli(args: string[], closeStdout = false): Cli {
  const child = spawn(process.execPath, [...cliCommand(), ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    cwd: repoRoot(),
  });
  const json = new EventLog<Record<string, unknown>>();
  const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  if (closeStdout) child.stdout!.destroy();
  else
    createInterface({ input: child.stdout! }).on('line', (l) => {
      try {
        json.push(JSON.parse(l) as Record<string, unknown>);
      } catch {
        json.push({ text: l });
      }
    });
  createInterface({ input: child.stderr! }).on('line', (l) => json.push({ stderr: l }));
  return { child, json, exit };
}

async function stop(cli: Cli, signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
  if (cli.child.exitCode !== null || cli.child.signalCode !== null) return cli.child.exitCode;
  cli.child.kill(signal);
  return cli.exit;
}

/** Every file name of the copy (resources only). */
async function names(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true }).catch(() => []);
  return entries.filter((e) => e.isFile() && !e.parentPath.includes('.resourcesync')).map((e) => e.name);
}

async function waitFor(what: string, cond: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('sync --follow with filters and a closed output', { timeout: 120_000 }, () => {
  it('excluded resources never reach the copy; a closed stdout stops the follower with exit 0', async () => {
    await withTempDir(async (dir) => {
      const col = join(dir, 'col');
      const copy = join(dir, 'copy');
      await mkdir(col);
      await writeFile(join(col, 'a.txt'), 'alpha');
      await writeFile(join(col, 'a.tmp'), 'alpha temp');
      const port = await freePort();
      const serve = startCli(['serve', col, '--port', String(port), '--json', '--state', join(dir, 'state')]);
      let follow: Cli | undefined;
      let closed: Cli | undefined;
      try {
        await serve.json.waitFor((e) => e.event === 'listening', 30_000, 'serve listening');
        const url = `http://127.0.0.1:${port}/`;
        follow = startCli(['sync', '--follow', '--exclude', '*.tmp', url, copy, '--json']);
        await follow.json.waitFor((e) => e.event === 'connected', 30_000, 'connected');
        assert.deepEqual((await names(copy)).sort(), ['a.txt'], 'the baseline left a.tmp out');
        // Changes while following: the excluded one first, then one kept; notifications are applied in order.
        await writeFile(join(col, 'b.tmp'), 'bravo temp');
        await writeFile(join(col, 'a.tmp'), 'alpha temp 2');
        await writeFile(join(col, 'b.txt'), 'bravo');
        await waitFor('b.txt in the copy', async () => (await names(copy)).includes('b.txt'));
        // One more change, so that the notifications before it have been handled.
        await writeFile(join(col, 'c.txt'), 'charlie');
        await waitFor('c.txt in the copy', async () => (await names(copy)).includes('c.txt'));
        assert.deepEqual((await names(copy)).sort(), ['a.txt', 'b.txt', 'c.txt'], 'no .tmp file reached the copy');
        assert.equal(await stop(follow), 0);

        // `sync --follow --json | head`: the reader goes away; the follower stops by itself, quietly.
        closed = startCli(['sync', '--follow', '--exclude', '*.tmp', url, copy, '--json'], true);
        const code = await Promise.race([
          closed.exit,
          new Promise<string>((r) => setTimeout(() => r('still running'), 60_000).unref()),
        ]);
        assert.equal(code, 0, JSON.stringify(closed.json.events));
        assert.ok(
          !closed.json.events.some((e) => typeof e.stderr === 'string' && /EPIPE|Error/.test(e.stderr)),
          JSON.stringify(closed.json.events),
        );
      } finally {
        if (follow !== undefined) await stop(follow, 'SIGKILL');
        if (closed !== undefined) await stop(closed, 'SIGKILL');
        await stop(serve, 'SIGKILL');
      }
    });
  });
});
