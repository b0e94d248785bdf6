/**
 * The `resourcesync` CLI as a child process for tests: its output as it comes, its JSON-line events, its exit
 * code. Not a test file itself.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

// From source (tsx) run src/cli/main.ts through tsx; compiled, run dist/src/cli/main.js.
const fromSource = import.meta.url.endsWith('.ts');
const MAIN = fileURLToPath(new URL(`../../src/cli/main.${fromSource ? 'ts' : 'js'}`, import.meta.url));
const NODE_ARGS = fromSource ? ['--import', 'tsx'] : [];

export interface CliRun {
  readonly child: ChildProcess;
  readonly stdout: () => string;
  readonly stderr: () => string;
  readonly exit: Promise<number | null>;
}

const children = new Set<ChildProcess>();

/** Starts `resourcesync <args>`. */
export function runCli(args: readonly string[]): CliRun {
  const child = spawn(process.execPath, [...NODE_ARGS, MAIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  child.on('exit', () => children.delete(child));
  let out = '';
  let err = '';
  child.stdout!.on('data', (c: Buffer) => {
    out += c.toString();
  });
  child.stderr!.on('data', (c: Buffer) => {
    err += c.toString();
  });
  const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, stdout: () => out, stderr: () => err, exit };
}

/** Kills every child still running (for `after`). */
export function killChildren(): void {
  for (const c of children) c.kill('SIGKILL');
}

/**
 * Resolves with the `n`-th (1-based) JSON line on stdout whose `event` is `name` and that passes `where`;
 * rejects if the process exits first or after `timeoutMs`.
 */
export function waitForEvent(
  r: CliRun,
  name: string,
  where: (e: Record<string, unknown>) => boolean = () => true,
  timeoutMs = 60_000,
): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`no ${name} event; stdout: ${r.stdout()} stderr: ${r.stderr()}`)),
      timeoutMs,
    );
    const check = (): void => {
      // Complete lines only (the last element is the unfinished one).
      for (const line of r.stdout().split('\n').slice(0, -1)) {
        if (!line.startsWith('{')) continue;
        const obj = JSON.parse(line) as Record<string, unknown>;
        if (obj.event === name && where(obj)) {
          clearTimeout(timer);
          r.child.stdout!.off('data', check);
          resolve(obj);
          return;
        }
      }
    };
    r.child.stdout!.on('data', check);
    check();
    void r.exit.then((code) => {
      clearTimeout(timer);
      reject(new Error(`exited ${code} before ${name}; stderr: ${r.stderr()}`));
    });
  });
}
