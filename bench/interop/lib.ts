// Helpers of the interop harness (see run.ts): processes (our CLI, the Python reference implementation, its
// simulator), a static file server, collections and their comparison, and the verdict table.
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { mkdir, utimes, writeFile } from 'node:fs/promises';
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root (from dist/bench/interop/ or bench/interop/). */
export const REPO = (() => {
  let d = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(d, 'package.json'))) {
    const up = dirname(d);
    if (up === d) return process.cwd();
    d = up;
  }
  return d;
})();

/** Where the reference implementation and its simulator are checked out (read-only). */
export const PEERS = {
  resync: process.env['RESYNC_DIR'] ?? '/work/peers/resync',
  simulator: process.env['RESYNC_SIMULATOR_DIR'] ?? '/work/peers/resync-simulator',
  python: process.env['RESYNC_PYTHON'] ?? '/usr/bin/python3',
};

/** This harness's own Python helpers (ours, not the reference implementation's). */
export const HERE = join(REPO, 'bench', 'interop');

export interface RunResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  /** stdout + stderr, for matching the reference client's log lines. */
  readonly out: string;
  readonly ms: number;
}

/** Runs a command to its end (killed after `timeoutMs`). */
export function run(
  cmd: string,
  args: readonly string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number; input?: string } = {},
): Promise<RunResult> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, {
      cwd: options.cwd ?? REPO,
      env: options.env ?? process.env,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 120_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, out: stdout + stderr, ms: Date.now() - started });
    });
    child.stdin.end(options.input ?? '');
  });
}

const pythonEnv = (): NodeJS.ProcessEnv => ({ ...process.env, PYTHONPATH: PEERS.resync, PYTHONDONTWRITEBYTECODE: '1' });

/** Runs a script of the reference implementation (`resync-sync`, `resync-build`) with Debian's python3. */
export function resync(tool: 'resync-sync' | 'resync-build', args: readonly string[], cwd: string): Promise<RunResult> {
  return run(PEERS.python, [join(PEERS.resync, tool), ...args], { cwd, env: pythonEnv(), timeoutMs: 180_000 });
}

/** Runs a Python helper of this harness (bench/interop/*.py) with the reference implementation importable. */
export function pythonHelper(script: string, args: readonly string[], input?: string): Promise<RunResult> {
  const opts: { env: NodeJS.ProcessEnv; timeoutMs: number; input?: string } = {
    env: pythonEnv(),
    timeoutMs: 180_000,
  };
  if (input !== undefined) opts.input = input;
  return run(PEERS.python, [join(HERE, script), ...args], opts);
}

/** Runs our CLI (the compiled one in dist/). */
export function ours(args: readonly string[], cwd = REPO): Promise<RunResult> {
  return run(process.execPath, [join(REPO, 'dist', 'src', 'cli', 'main.js'), ...args], { cwd, timeoutMs: 180_000 });
}

/** A long-running child process, stopped by {@link Background.stop}. */
export interface Background {
  readonly child: ChildProcess;
  readonly output: () => string;
  stop(): Promise<void>;
}

function background(
  cmd: string,
  args: readonly string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv },
): Background {
  const child = spawn(cmd, args, { cwd: options.cwd ?? REPO, env: options.env ?? process.env, stdio: 'pipe' });
  let out = '';
  child.stdout?.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr?.setEncoding('utf8').on('data', (d: string) => (out += d));
  return {
    child,
    output: () => out,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        const t = setTimeout(() => child.kill('SIGKILL'), 5_000);
        child.once('close', () => {
          clearTimeout(t);
          resolve();
        });
        child.kill('SIGTERM');
      }),
  };
}

/** A free TCP port on 127.0.0.1 (for programs that need one given). */
export async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(200);
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Our `serve` over `dir`, on a free port; resolves once it listens (its first JSON line). */
export async function startServe(
  dir: string,
  state: string,
  extra: readonly string[] = [],
): Promise<Background & { url: string }> {
  const bg = background(
    process.execPath,
    [join(REPO, 'dist', 'src', 'cli', 'main.js'), 'serve', dir, '--port', '0', '--state', state, '--json', ...extra],
    {},
  );
  const url = await waitFor('serve to listen', async () => {
    if (bg.child.exitCode !== null) throw new Error(`serve exited: ${bg.output().slice(0, 300)}`);
    const line = bg.output().split('\n')[0];
    if (line === undefined || !line.startsWith('{')) return undefined;
    try {
      return (JSON.parse(line) as { url?: string }).url;
    } catch {
      return undefined;
    }
  });
  return { ...bg, url };
}

/**
 * The reference simulator on a free port, through bench/interop/run_simulator.py (which makes it run on this
 * Python; see there). `config` is the YAML text of its configuration.
 */
export async function startSimulator(
  work: string,
  config: string,
  specVersion: '1.0' | '1.1',
): Promise<Background & { url: string }> {
  const port = await freePort();
  const file = join(work, 'simulator.yaml');
  await writeFile(file, config);
  const url = `http://127.0.0.1:${port}`;
  const bg = background(
    PEERS.python,
    [
      join(HERE, 'run_simulator.py'),
      '-c',
      file,
      '-p',
      String(port),
      '-b',
      url,
      '-l',
      join(PEERS.simulator, 'config', 'logging.yaml'),
      '--spec-version',
      specVersion,
    ],
    { cwd: PEERS.simulator, env: { ...pythonEnv(), PYTHONPATH: `${PEERS.resync}:${PEERS.simulator}` } },
  );
  await waitFor('the simulator to listen', async () => {
    if (bg.child.exitCode !== null) throw new Error(`the simulator exited: ${bg.output().slice(-300)}`);
    return (await fetch(`${url}/capabilitylist.xml`).catch(() => undefined))?.ok === true ? true : undefined;
  });
  return { ...bg, url };
}

/** A static file server: URL path prefix -> directory (longest prefix first). */
export async function startStatic(mounts: Record<string, string>): Promise<{ url: string; stop: () => Promise<void> }> {
  const prefixes = Object.keys(mounts).sort((a, b) => b.length - a.length);
  const server: Server = createServer((req, res) => {
    let path: string;
    try {
      path = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
    } catch {
      res.writeHead(400).end();
      return;
    }
    const prefix = prefixes.find((p) => path.startsWith(p));
    const root = prefix === undefined ? undefined : mounts[prefix];
    const file = root === undefined || prefix === undefined ? undefined : join(root, path.slice(prefix.length));
    if (file === undefined || path.includes('/../') || !existsSync(file) || !statSync(file).isFile()) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
      return;
    }
    const body = readFileSync(file);
    const type = file.endsWith('.xml')
      ? 'application/xml'
      : file.endsWith('.zip')
        ? 'application/zip'
        : file.endsWith('resourcesync')
          ? 'application/xml'
          : 'application/octet-stream';
    res.writeHead(200, { 'content-type': type, 'content-length': body.length });
    res.end(req.method === 'HEAD' ? undefined : body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    stop: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** Files under `dir` (relative name with `/` -> sha-256), skipping our state and the reference client's. */
export function treeOf(dir: string, options: { decode?: boolean } = {}): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (d: string): void => {
    if (!existsSync(d)) return;
    for (const name of readdirSync(d)) {
      if (name === '.resourcesync' || name === '.resync-client-status.cfg') continue;
      const p = join(d, name);
      const st = statSync(p);
      if (st.isDirectory()) walk(p);
      else if (st.isFile()) {
        let rel = relative(dir, p).split(sep).join('/');
        if (options.decode === true) rel = rel.split('/').map(safeDecode).join('/');
        out.set(rel, createHash('sha256').update(readFileSync(p)).digest('hex'));
      }
    }
  };
  walk(dir);
  return out;
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/** The differences between an expected tree and a copy. */
export interface TreeDiff {
  readonly missing: string[];
  readonly extra: string[];
  readonly differ: string[];
  readonly same: number;
}

export function diffTrees(expected: Map<string, string>, got: Map<string, string>): TreeDiff {
  const missing: string[] = [];
  const differ: string[] = [];
  let same = 0;
  for (const [k, h] of expected) {
    const g = got.get(k);
    if (g === undefined) missing.push(k);
    else if (g !== h) differ.push(k);
    else same++;
  }
  const extra = [...got.keys()].filter((k) => !expected.has(k));
  return { missing, extra, differ, same };
}

export function describeDiff(d: TreeDiff): string {
  const parts = [`${d.same} same`];
  const list = (xs: string[]): string => xs.slice(0, 3).join(', ') + (xs.length > 3 ? ', ...' : '');
  if (d.missing.length > 0) parts.push(`${d.missing.length} missing (${list(d.missing)})`);
  if (d.extra.length > 0) parts.push(`${d.extra.length} extra (${list(d.extra)})`);
  if (d.differ.length > 0) parts.push(`${d.differ.length} differ (${list(d.differ)})`);
  return parts.join(', ');
}

export const isEqual = (d: TreeDiff): boolean => d.missing.length + d.extra.length + d.differ.length === 0;

/** Names with the characters RFC 3986 allows unescaped in a path segment that Sources tend to over-encode. */
export const SUB_DELIM_NAMES = ['a+b.txt', 'user@host.txt', 'price$5.txt', 'x&y.txt', 'k=v.txt', 'a,b.txt', 'a;b.txt'];

/** Writes a collection: `n` plain files in nested folders, the sub-delim names, and one name with a space. */
export async function makeCollection(dir: string, n = 40): Promise<void> {
  const t0 = Date.UTC(2024, 0, 1) / 1000;
  for (let i = 0; i < n; i++) {
    const f = join(dir, i % 3 === 0 ? 'docs' : i % 3 === 1 ? 'data/sub' : '', `file-${i}.txt`);
    await mkdir(dirname(f), { recursive: true });
    await writeFile(f, `resource ${i}\n${'x'.repeat((i * 37) % 300)}\n`);
    // Sub-millisecond mtimes, as file systems keep them (publish --copy-resources once compared them rounded).
    const t = t0 + i + ((i * 0.1377) % 1);
    await utimes(f, t, t);
  }
  await mkdir(join(dir, 'names'), { recursive: true });
  for (const name of SUB_DELIM_NAMES) await writeFile(join(dir, 'names', name), `named ${name}\n`);
  await writeFile(join(dir, 'names', 'with space.txt'), 'a space\n');
}

/** One row of the verdict table. */
export interface Verdict {
  readonly group: string;
  readonly scenario: string;
  readonly expected: string;
  readonly got: string;
  readonly pass: boolean;
  /** Why a failure is expected for now (another helper's pending work), or other context. */
  readonly note?: string;
}

/** The verdict table as Markdown. */
export function formatTable(rows: readonly Verdict[]): string {
  const esc = (s: string): string =>
    s.replaceAll('|', '\\|').replaceAll('\n', ' ').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
  const lines = [
    '| group | scenario | expected | got | verdict |',
    '|---|---|---|---|---|',
    ...rows.map(
      (r) =>
        `| ${r.group} | ${esc(r.scenario)} | ${esc(r.expected)} | ${esc(r.got)} | ${r.pass ? 'pass' : 'FAIL'}${r.note === undefined ? '' : ` (${esc(r.note)})`} |`,
    ),
  ];
  return lines.join('\n');
}

/** The last "Status:" line the reference client printed, e.g. `Status: IN SYNC (same=3, ...)`. */
export function resyncStatus(r: RunResult): string {
  const lines = r.out
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.startsWith('Status:') || l.includes('FatalError') || l.startsWith('Traceback'));
  const fatal = r.out
    .split('\n')
    .reverse()
    .find((l) => /Error\b/.test(l));
  const last = lines.at(-1);
  if (last === undefined) return fatal?.trim().slice(0, 200) ?? `exit ${r.code}, no status line`;
  return (last.startsWith('Status:') ? last.replace(/\s+/g, ' ') : (fatal ?? last).trim()).slice(0, 200);
}
