// `resourcesync sync --follow` against `resourcesync serve`, both as child processes: changes reach the copy
// through notifications (WebSocket, and WebSub with --callback); a follower killed with SIGKILL and restarted
// converges; a Source restarted under a connected follower: it reconnects and catches up.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { describe, it } from 'node:test';
import { cliCommand, EventLog, repoRoot, withTempDir, freePort } from '../notify/helpers.js';

interface Cli {
  readonly child: ChildProcess;
  readonly json: EventLog<Record<string, unknown>>;
}

function startCli(args: string[]): Cli {
  const root = repoRoot();
  const argv = cliCommand();
  const child = spawn(process.execPath, [...argv, ...args], { stdio: ['ignore', 'pipe', 'pipe'], cwd: root });
  const json = new EventLog<Record<string, unknown>>();
  createInterface({ input: child.stdout! }).on('line', (l) => {
    try {
      json.push(JSON.parse(l) as Record<string, unknown>);
    } catch {
      json.push({ text: l });
    }
  });
  createInterface({ input: child.stderr! }).on('line', (l) => json.push({ stderr: l }));
  return { child, json };
}

async function stop(cli: Cli, signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
  if (cli.child.exitCode !== null || cli.child.signalCode !== null) return cli.child.exitCode;
  const exited = new Promise<number | null>((resolve) => cli.child.once('exit', (code) => resolve(code)));
  cli.child.kill(signal);
  return exited;
}

/** Finds a file by name anywhere under `dir` (the copy's layout puts resources under a host folder). */
async function findFile(dir: string, name: string): Promise<string | undefined> {
  // The follower creates and removes temporary files meanwhile: a vanished directory is not an error.
  const entries = await readdir(dir, { withFileTypes: true, recursive: true }).catch(() => []);
  for (const e of entries) {
    if (e.isFile() && e.name === name && !e.parentPath.includes('.resourcesync')) return join(e.parentPath, e.name);
  }
  return undefined;
}

async function waitForContent(
  dir: string,
  name: string,
  content: string | undefined,
  timeoutMs = 20_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const path = await findFile(dir, name);
    const text = path === undefined ? undefined : await readFile(path, 'utf8').catch(() => undefined);
    if (text === content) return;
    if (Date.now() > deadline)
      throw new Error(`${name}: expected ${JSON.stringify(content)}, found ${JSON.stringify(text)}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function startServe(col: string, state: string, port: number, extra: string[] = []): Promise<Cli> {
  const serve = startCli(['serve', col, '--port', String(port), '--json', '--state', state, ...extra]);
  await serve.json.waitFor((e) => e.event === 'listening', 30_000, 'serve listening');
  return serve;
}

describe('resourcesync sync --follow', () => {
  it('follows over WebSocket; survives SIGKILL of the follower and a restart of the Source', async () => {
    await withTempDir(async (dir) => {
      const col = join(dir, 'col');
      const copy = join(dir, 'copy');
      await mkdir(col);
      await writeFile(join(col, 'a.txt'), 'alpha');
      const port = await freePort();
      let serve = await startServe(col, join(dir, 'state'), port);
      const url = `http://127.0.0.1:${port}/`;
      let follow = startCli(['sync', '--follow', url, copy, '--json']);
      try {
        await follow.json.waitFor((e) => e.event === 'connected', 30_000, 'connected');
        await waitForContent(copy, 'a.txt', 'alpha');
        // A change while following.
        await writeFile(join(col, 'b.txt'), 'bravo');
        await waitForContent(copy, 'b.txt', 'bravo');
        await writeFile(join(col, 'a.txt'), 'alpha 2');
        await waitForContent(copy, 'a.txt', 'alpha 2');

        // kill -9 the follower, change things while it is away, restart: it converges.
        await stop(follow, 'SIGKILL');
        await writeFile(join(col, 'c.txt'), 'charlie');
        await writeFile(join(col, 'b.txt'), 'bravo 2');
        follow = startCli(['sync', '--follow', url, copy, '--json']);
        await follow.json.waitFor((e) => e.event === 'connected', 30_000, 'connected again');
        await waitForContent(copy, 'c.txt', 'charlie');
        await waitForContent(copy, 'b.txt', 'bravo 2');

        // Restart the Source under the connected follower; a change made while it was down arrives.
        assert.equal(await stop(serve), 0);
        await writeFile(join(col, 'd.txt'), 'delta');
        serve = await startServe(col, join(dir, 'state'), port);
        await follow.json.waitFor((e) => e.event === 'reconnected', 30_000, 'reconnected');
        await waitForContent(copy, 'd.txt', 'delta');
        await writeFile(join(col, 'e.txt'), 'echo');
        await waitForContent(copy, 'e.txt', 'echo');

        // The direct path: a change made while the follower is idle is applied straight from its notification.
        // Under heavy load a catch-up run can pick a change up first (also correct, and all of them did in some
        // runs with four copies of this file in parallel), so a few more changes give the direct path its chance;
        // a follower that never applies a notification still fails here.
        const direct = (from: number): boolean =>
          follow.json.events.slice(from).some((e) => e.event === 'applied' && e.operation === 'notification');
        let applied = direct(0);
        for (let i = 0; !applied && i < 5; i++) {
          const from = follow.json.events.length;
          await writeFile(join(col, `f${i}.txt`), `fox ${i}`);
          await waitForContent(copy, `f${i}.txt`, `fox ${i}`);
          // Its event is printed after the file is in place: wait (up to 5 s) for the run that applied it.
          const deadline = Date.now() + 5_000;
          while (
            Date.now() < deadline &&
            !follow.json.events.slice(from).some((e) => e.event === 'applied' || e.event === 'caught-up')
          )
            await new Promise((r) => setTimeout(r, 25));
          applied = direct(from);
        }
        assert.ok(applied, 'changes applied straight from notifications');

        assert.equal(await stop(follow), 0, 'Ctrl-C stops cleanly');
        assert.ok(follow.json.events.some((e) => e.event === 'stopped'));
        // What the direct path recorded is what an incremental run would have: an audit finds the copy in sync,
        // and a further incremental run has nothing to do.
        const audit = startCli(['sync', '--audit', url, copy, '--json']);
        assert.equal(
          await new Promise((resolve) => audit.child.once('exit', resolve)),
          0,
          JSON.stringify(audit.json.events),
        );
        const again = startCli(['sync', '--incremental', url, copy, '--json']);
        assert.equal(
          await new Promise((resolve) => again.child.once('exit', resolve)),
          0,
          JSON.stringify(again.json.events),
        );
      } finally {
        await stop(follow, 'SIGKILL');
        await stop(serve, 'SIGKILL');
      }
    });
  });

  it('follows over WebSub with --callback, through the hub of serve --hub', async () => {
    await withTempDir(async (dir) => {
      const col = join(dir, 'col');
      const copy = join(dir, 'copy');
      await mkdir(col);
      await writeFile(join(col, 'a.txt'), 'alpha');
      const port = await freePort();
      const serve = await startServe(col, join(dir, 'state'), port, ['--hub']);
      const cbPort = await freePort();
      const follow = startCli([
        'sync',
        '--follow',
        `http://127.0.0.1:${port}/`,
        copy,
        '--json',
        '--callback',
        `http://127.0.0.1:${cbPort}/cb/x1`,
      ]);
      try {
        const following = await follow.json.waitFor((e) => e.event === 'following', 30_000, 'following');
        assert.equal(following.transport, 'websub');
        await waitForContent(copy, 'a.txt', 'alpha');
        await writeFile(join(col, 'b.txt'), 'bravo');
        await waitForContent(copy, 'b.txt', 'bravo');
        await rm(join(col, 'a.txt'));
        await follow.json.waitFor(
          (e) => e.event === 'applied' && Number(e.deleted) + Number(e.deletionsRecorded) > 0,
          20_000,
          'deletion',
        );
        assert.equal(await stop(follow), 0);
      } finally {
        await stop(follow, 'SIGKILL');
        await stop(serve, 'SIGKILL');
      }
    });
  });
});
