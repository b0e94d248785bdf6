// What the WAN benchmark scripts (run.ts, dumps-ab.ts) share: the test collection, its rounds of changes, a
// `resourcesync sync --json` child, a `serve` child, medians and the load average.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

/** The fields of `sync --json`'s summary the scripts read. */
export interface Summary {
  operation: string;
  via: string[];
  elapsedMs: number;
  counts: { created: number; updated: number; failed: number };
}

/** `files` files of `size` random bytes, 100 per directory (`d<k>/f<i>.txt`). */
export async function makeCollection(dir: string, files: number, size: number): Promise<void> {
  for (let d = 0; d < Math.ceil(files / 100); d++) await mkdir(join(dir, `d${d}`), { recursive: true });
  for (let i = 0; i < files; i++) await writeFile(join(dir, `d${Math.floor(i / 100)}`, `f${i}.txt`), randomBytes(size));
}

/** Rewrites `changes` files of a collection made by {@link makeCollection}: round `round`'s slice. */
export async function changeFiles(dir: string, round: number, files: number, changes: number, size: number) {
  const start = (round * changes) % files;
  for (let k = 0; k < changes; k++) {
    const i = (start + k) % files;
    await writeFile(join(dir, `d${Math.floor(i / 100)}`, `f${i}.txt`), randomBytes(size));
  }
}

/**
 * Runs `<cli> sync --json <extra> <url> <dir>` in a child and returns its summary and wall time (ms).
 * @throws Error with the child's output when it printed no summary.
 */
export async function runSync(
  cli: string,
  url: string,
  dir: string,
  extra: readonly string[],
): Promise<{ summary: Summary; wall: number }> {
  const t0 = performance.now();
  const p = await new Promise<{ code: number | null; out: string; err: string }>((res) => {
    const child = spawn(process.execPath, [cli, 'sync', '--json', ...extra, url, dir]);
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    child.on('close', (code) => res({ code, out, err }));
  });
  const wall = performance.now() - t0;
  try {
    return { summary: JSON.parse(p.out) as Summary, wall };
  } catch {
    throw new Error(`sync ${extra.join(' ')} exited ${p.code}: ${p.out.slice(0, 500)}${p.err.slice(0, 2000)}`);
  }
}

/** Starts `<cli> serve <collection>` on a free port (no notifications) and returns it once it listens. */
export async function startServe(
  cli: string,
  collection: string,
  state: string,
  baseUrl: string,
): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(
    process.execPath,
    [cli, 'serve', collection, '--port', '0', '--json', '--no-notify', '--state', state, '--base-url', baseUrl],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const lines = createInterface({ input: child.stdout! });
  for await (const line of lines) {
    const m = JSON.parse(line) as { port?: number; url?: string };
    const port = m.port ?? (m.url === undefined ? undefined : Number(new URL(m.url).port));
    if (port !== undefined && !Number.isNaN(port)) {
      lines.removeAllListeners('line');
      child.stdout!.resume();
      return { child, port };
    }
  }
  throw new Error('serve ended before listening');
}

export const median = (xs: readonly number[]): number =>
  [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

/** The load averages, for the record beside each figure. */
export const load = (): string =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
