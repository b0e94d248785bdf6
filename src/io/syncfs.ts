/**
 * Flushing a whole file system at once: `syncfs(2)` through coreutils' `sync -f` (Node has no binding for
 * it). One call makes every file written, renamed or removed on that file system durable. Measured on this
 * machine's ext4 (`BENCH_ONLY=floor node dist/bench/destination-sync.js`): 10,000 new 2 KB files written and
 * made durable by one syncfs at 15,200–15,700 files/s (the syncfs 270–300 ms, flushing the earlier floor runs'
 * files too), against 6,000–7,300 files/s with an fsync each. The price: it also waits for whatever else is
 * dirty on that file system.
 *
 * The `sync` commands are run by one long-lived `sh` co-process: starting a child from a Node process with a
 * ~200 MB heap cost ~9 ms of CPU each here (fork copies the page tables), a line written to the co-process
 * 0.07 ms (a throwaway script, 50 calls each).
 *
 * @module
 */
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import type { Socket } from 'node:net';
import { ResourceSyncError } from '../core/errors.js';

/** How long one flush may take before it is reported as failed (a hung device must not hang the run). */
const SYNCFS_TIMEOUT_MS = 120_000;

/** Reads paths, one a line, runs `sync -f` on each, answers `ok` or `fail <message>` on one line. */
const SCRIPT =
  'while IFS= read -r p; do if out=$(sync -f -- "$p" 2>&1); then echo ok; else echo "fail $out" | tr "\\n" " "; echo; fi; done';

interface Pending {
  readonly path: string;
  readonly resolve: (ok: boolean) => void;
  readonly reject: (e: unknown) => void;
}

/** Whether `sync -f` works here: unknown until the first call, then remembered for the process. */
let available: boolean | undefined;
let worker: SyncWorker | undefined;

/** The `sh` co-process and its queue of requests (answered in order). */
class SyncWorker {
  readonly #proc: ChildProcessWithoutNullStreams;
  readonly #queue: Pending[] = [];
  #buffer = '';
  #timer: NodeJS.Timeout | undefined;
  #dead = false;

  constructor() {
    this.#proc = spawn('sh', ['-c', SCRIPT], { stdio: ['pipe', 'pipe', 'pipe'], windowsHide: true });
    this.#proc.on('error', (e) => this.#fail(e, (e as NodeJS.ErrnoException).code === 'ENOENT'));
    this.#proc.on('exit', (code, signal) =>
      this.#fail(new Error(`the sync co-process exited (${signal ?? `code ${code}`})`), false),
    );
    this.#proc.stdin.on('error', () => undefined); // reported by 'exit'
    this.#proc.stdout.setEncoding('utf8');
    this.#proc.stdout.on('data', (d: string) => this.#onData(d));
    this.#proc.stderr.resume();
    this.#idle();
  }

  request(path: string): Promise<boolean> {
    return new Promise<boolean>((resolve, reject) => {
      if (this.#dead) {
        reject(new Error('the sync co-process is gone'));
        return;
      }
      this.#queue.push({ path, resolve, reject });
      if (this.#queue.length === 1) this.#busy();
      this.#proc.stdin.write(`${path}\n`);
    });
  }

  #onData(d: string): void {
    this.#buffer += d;
    let nl = this.#buffer.indexOf('\n');
    while (nl >= 0) {
      const line = this.#buffer.slice(0, nl);
      this.#buffer = this.#buffer.slice(nl + 1);
      nl = this.#buffer.indexOf('\n');
      const p = this.#queue.shift();
      if (p === undefined) continue;
      if (line === 'ok') p.resolve(true);
      else if (available !== true && /invalid option|unrecognized option|usage/i.test(line)) {
        // An old `sync` without -f: fall back for the rest of the process.
        available = false;
        p.resolve(false);
      } else p.reject(new Error(line.replace(/^fail\s*/, '').trim() || 'sync -f failed'));
      if (this.#queue.length === 0) this.#idle();
      else this.#busy();
    }
  }

  /** Something is waiting: keep the process alive, and bound the wait for the oldest request. */
  #busy(): void {
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.#fail(new Error(`timed out after ${SYNCFS_TIMEOUT_MS / 1000} s`), false);
      this.#proc.kill('SIGKILL');
    }, SYNCFS_TIMEOUT_MS);
    pipe(this.#proc.stdout).ref();
    this.#proc.ref();
  }

  /** Nothing waiting: the co-process must not keep the Node process alive. */
  #idle(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    pipe(this.#proc.stdout).unref();
    pipe(this.#proc.stdin).unref();
    pipe(this.#proc.stderr).unref();
    this.#proc.unref();
  }

  #fail(e: unknown, missing: boolean): void {
    if (this.#dead) return;
    this.#dead = true;
    if (worker === this) worker = undefined;
    clearTimeout(this.#timer);
    if (missing) available = false;
    for (const p of this.#queue.splice(0)) {
      if (missing) p.resolve(false);
      else p.reject(e);
    }
  }
}

/** A child's stdio stream is a socket over a pipe (Node types it as a plain stream). */
function pipe(stream: NodeJS.ReadableStream | NodeJS.WritableStream): Socket {
  return stream as unknown as Socket;
}

/** Whether `sync -f` is known not to work here (a function, so that it is read again after an await). */
function unavailable(): boolean {
  return available === false;
}

/**
 * Starts the co-process {@link syncFileSystem} uses, so that the first flush does not wait for it (a fork of a
 * Node process with a large heap costs milliseconds). Does nothing where syncfs is known not to be available.
 */
export function prepareSyncFileSystem(): void {
  if (available === false || process.platform !== 'linux') return;
  worker ??= new SyncWorker();
}

/**
 * Flushes the file system holding `path` (data, metadata and directory entries of every file on it) and
 * waits for the device to acknowledge. Returns false, without doing anything, when `sync -f` is not available
 * (no `sh`, no coreutils `sync` with `-f`, or not Linux): the caller must then fsync each file itself.
 * Memory: constant (one co-process for the whole Node process, started on first use, never keeping the
 * process alive while idle).
 *
 * @throws ResourceSyncError RS_IO when the flush fails (a write-back error is reported by syncfs since Linux
 *   5.8) or takes longer than two minutes.
 */
export async function syncFileSystem(path: string): Promise<boolean> {
  if (available === false || process.platform !== 'linux' || path.includes('\n')) return false;
  try {
    worker ??= new SyncWorker();
    const ok = await worker.request(path);
    if (ok) available = true;
    return ok;
  } catch (e) {
    if (unavailable()) return false;
    throw new ResourceSyncError('RS_IO', `cannot flush the file system holding ${path}: ${(e as Error).message}`, {
      cause: e,
    });
  }
}
