/**
 * Small-file writes on a worker thread: the file operations that replace files (a temporary file written or a
 * spare rewritten, then renamed over the old file) would hold the event loop (a rename that frees the old file
 * costs 80-104 µs here: this ext4 sends a discard for each freed extent at once, see spares.ts), and as
 * separate trips to libuv's thread pool (open, write, close, rename) each costs a thread wake-up and a
 * completion on the loop. Here, jobs go to one thread up to 16 in a message (after at most 1 ms) and come back in one message,
 * while the loop goes on parsing, verifying and fetching.
 *
 * One process-wide thread ({@link sharedFileWriter}), started on first use, keeping the process alive only
 * while it has jobs. Jobs run one after the other, in the order they were given (two versions staged for one
 * file keep their order). If the thread cannot start, its jobs are done on the calling thread; if it dies,
 * the jobs it had are failed (their outcome is unknown) and later ones are done on the calling thread.
 *
 * Memory: the bodies of the jobs not done yet (the callers await them, so at most their concurrency), copied
 * once to the thread.
 *
 * @module
 */
import {
  closeSync,
  constants,
  copyFileSync,
  fstatSync,
  fsyncSync,
  ftruncateSync,
  linkSync,
  lstatSync,
  openSync,
  renameSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { type ResourceLimits, Worker } from 'node:worker_threads';
import { ResourceSyncError } from '../core/errors.js';
import { SELF_NAME } from './paths.js';

/** One file operation; each leaves nothing of its own behind when it fails. */
type Job =
  /** Creates `path` (it must not exist) holding `body`; a partly written file is removed. */
  | { readonly kind: 'create'; readonly path: string; readonly body: Uint8Array }
  /** Creates `tmp` holding `body` and renames it over `target`; `tmp` is removed on failure. */
  | {
      readonly kind: 'install';
      readonly tmp: string;
      readonly target: string;
      readonly body: Uint8Array;
      /** Where the file goes when `target` is a directory (resources below it exist: paths.ts SELF_NAME). */
      readonly self: string;
    }
  /**
   * Rewrites the spare file `path` (see spares.ts) to hold exactly `body`, in place: its blocks are reused, so
   * none is freed or allocated for a body of the same size. Refused (`ENOTSPARE`) unless `path` is a regular
   * file with a single link: a spare must never share its inode with a file of the copy. `path` is removed on
   * failure (a spare is scratch).
   */
  | { readonly kind: 'refill'; readonly path: string; readonly body: Uint8Array }
  /**
   * Renames `from` over `to`, first keeping the replaced file as the spare `keep` (a hard link, so its inode
   * and blocks are not freed) when it is a regular file of at most `keepMax` bytes. Answers the kept size, or
   * -1. `from` is removed on failure, and `keep` whenever `to` was not replaced. When `from` and `to` are on
   * different file systems (EXDEV), `from` is copied to `xdevTmp` next to `to`, which is fsynced, renamed
   * over `to`, and `toDir` fsynced.
   */
  | {
      readonly kind: 'replace';
      readonly from: string;
      readonly to: string;
      readonly keep: string | undefined;
      readonly keepMax: number;
      readonly xdevTmp: string;
      readonly toDir: string;
      /** Where the file goes when `to` is a directory (resources below it exist: paths.ts SELF_NAME). */
      readonly self: string;
    };

type Numbered = Job & { readonly id: number };

/** The worker's loop, in plain CommonJS (an `eval` worker: no file to resolve, under tsx or from dist/). */
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const fs = require('node:fs');
${runJob.toString()}
${createFile.toString()}
${refillFile.toString()}
${replaceFile.toString()}
${removeQuietly.toString()}
parentPort.on('message', (jobs) => {
  const out = [];
  for (const job of jobs) {
    try {
      out.push({ id: job.id, value: runJob(job, fs) });
    } catch (e) {
      out.push({ id: job.id, code: String(e && e.code || ''), message: String(e && e.message || e) });
    }
  }
  parentPort.postMessage(out);
});
`;

/** The file system calls {@link runJob} uses (node:fs, on either thread). */
interface SyncFs {
  openSync: typeof openSync;
  writeSync: typeof writeSync;
  closeSync: typeof closeSync;
  renameSync: typeof renameSync;
  unlinkSync: typeof unlinkSync;
  fstatSync: typeof fstatSync;
  lstatSync: typeof lstatSync;
  ftruncateSync: typeof ftruncateSync;
  linkSync: typeof linkSync;
  copyFileSync: typeof copyFileSync;
  fsyncSync: typeof fsyncSync;
  constants: typeof constants;
}

// The next functions run in the worker as their source text (see WORKER_SOURCE): they must not use anything
// outside their parameters and each other.

/** Runs one job; answers the `replace` job's kept size (else undefined). */
function runJob(job: Job, fs: SyncFs): number | undefined {
  if (job.kind === 'create') createFile(job.path, job.body, fs);
  else if (job.kind === 'refill') refillFile(job.path, job.body, fs);
  else if (job.kind === 'replace') return replaceFile(job, fs);
  else {
    createFile(job.tmp, job.body, fs);
    try {
      try {
        fs.renameSync(job.tmp, job.target);
      } catch (e) {
        if (!fs.lstatSync(job.target, { throwIfNoEntry: false })?.isDirectory()) throw e;
        fs.renameSync(job.tmp, job.self);
      }
    } catch (e) {
      removeQuietly(job.tmp, fs);
      throw e;
    }
  }
  return undefined;
}

function createFile(path: string, body: Uint8Array, fs: SyncFs): void {
  const fd = fs.openSync(path, 'wx', 0o644);
  try {
    let off = 0;
    while (off < body.byteLength) off += fs.writeSync(fd, body, off, body.byteLength - off);
    fs.closeSync(fd);
  } catch (e) {
    try {
      fs.closeSync(fd);
    } catch {
      // closed already, or failing anyway
    }
    removeQuietly(path, fs);
    throw e;
  }
}

function refillFile(path: string, body: Uint8Array, fs: SyncFs): void {
  let fd: number | undefined;
  try {
    fd = fs.openSync(path, fs.constants.O_WRONLY | fs.constants.O_NOFOLLOW);
    const st = fs.fstatSync(fd);
    if (!st.isFile() || st.nlink !== 1)
      throw Object.assign(new Error(`${path} is not a spare file (${st.nlink} links)`), { code: 'ENOTSPARE' });
    let off = 0;
    while (off < body.byteLength) off += fs.writeSync(fd, body, off, body.byteLength - off, off);
    if (st.size > body.byteLength) fs.ftruncateSync(fd, body.byteLength);
    fs.closeSync(fd);
  } catch (e) {
    if (fd !== undefined)
      try {
        fs.closeSync(fd);
      } catch {
        // closed already, or failing anyway
      }
    removeQuietly(path, fs);
    throw e;
  }
}

function replaceFile(
  job: {
    from: string;
    to: string;
    keep: string | undefined;
    keepMax: number;
    xdevTmp: string;
    toDir: string;
    self: string;
  },
  fs: SyncFs,
): number {
  // Resources below `to` arrived (it is a directory): the file is `<to>/%%self` now.
  const intoSelf = (): number => replaceFile({ ...job, to: job.self, toDir: job.to, self: '' }, fs);
  const isDir = (): boolean =>
    job.self !== '' && fs.lstatSync(job.to, { throwIfNoEntry: false })?.isDirectory() === true;
  if (isDir()) return intoSelf();
  let kept = -1;
  if (job.keep !== undefined) {
    try {
      const st = fs.lstatSync(job.to);
      if (st.isFile() && st.size <= job.keepMax) {
        fs.linkSync(job.to, job.keep);
        kept = st.size;
      }
    } catch {
      // nothing to keep (a new file), or the link failed: the old file is freed as usual
    }
  }
  try {
    fs.renameSync(job.from, job.to);
    return kept;
  } catch (e) {
    // `keep` links the file still at `to`: it must not stay a spare.
    if (kept >= 0) removeQuietly(job.keep as string, fs);
    if (isDir()) return intoSelf();
    if ((e as { code?: string }).code !== 'EXDEV') {
      removeQuietly(job.from, fs);
      throw e;
    }
  }
  // Another file system: a copy, made durable there, then renamed.
  try {
    fs.copyFileSync(job.from, job.xdevTmp, fs.constants.COPYFILE_EXCL);
    const fd = fs.openSync(job.xdevTmp, 'r');
    try {
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(job.xdevTmp, job.to);
    const dir = fs.openSync(job.toDir, 'r');
    try {
      fs.fsyncSync(dir);
    } finally {
      fs.closeSync(dir);
    }
  } catch (e) {
    removeQuietly(job.xdevTmp, fs);
    throw e;
  } finally {
    removeQuietly(job.from, fs);
  }
  return -1;
}

function removeQuietly(path: string, fs: SyncFs): void {
  try {
    fs.unlinkSync(path);
  } catch {
    // not there
  }
}

const LOCAL_FS: SyncFs = {
  openSync,
  writeSync,
  closeSync,
  renameSync,
  unlinkSync,
  fstatSync,
  lstatSync,
  ftruncateSync,
  linkSync,
  copyFileSync,
  fsyncSync,
  constants,
};

interface Waiter {
  readonly resolve: (value: number | undefined) => void;
  readonly reject: (e: Error) => void;
  readonly what: string;
}

/** Options of a {@link FileWriter}. */
export interface FileWriterOptions {
  /** Heap bounds of the thread (default Node's). A thread that cannot start leaves the jobs to the caller's. */
  readonly resourceLimits?: ResourceLimits;
}

/** See the module comment. */
export class FileWriter {
  constructor(private readonly options: FileWriterOptions = {}) {}

  #worker: Worker | undefined;
  /** Why the thread is not used (it could not start, or died): jobs run on the calling thread. */
  #broken: Error | undefined;
  #queue: Numbered[] = [];
  readonly #waiting = new Map<number, Waiter>();
  #nextId = 1;
  /** Jobs posted to the thread and not answered yet. */
  readonly #sent = new Map<number, Numbered>();
  /** Called once no job is waiting. */
  #drained: (() => void)[] = [];
  /** The pending post of the queue, if any. */
  #timer: ReturnType<typeof setTimeout> | undefined;

  /**
   * Creates `path` (which must not exist) holding `body`. @throws ResourceSyncError RS_IO, naming `what` (the
   * file the caller is installing: `path` by default)
   */
  async create(path: string, body: Uint8Array, what = path): Promise<void> {
    await this.#submit({ kind: 'create', path, body: ownBytes(body) }, what);
  }

  /** Writes `body` to the new file `tmp` and renames it over `target`. @throws ResourceSyncError RS_IO */
  async install(tmp: string, target: string, body: Uint8Array): Promise<void> {
    await this.#submit({ kind: 'install', tmp, target, body: ownBytes(body), self: join(target, SELF_NAME) }, target);
  }

  /**
   * Rewrites the spare file `path` in place to hold `body` (see the `refill` job).
   * @throws ResourceSyncError RS_IO (its cause's code `ENOTSPARE` for a file that is not a spare)
   */
  async refill(path: string, body: Uint8Array): Promise<void> {
    await this.#submit({ kind: 'refill', path, body: ownBytes(body) }, path);
  }

  /**
   * Renames `from` over `to`, keeping the replaced file as the spare `keep` (see the `replace` job); answers
   * the kept file's size, or -1 when nothing was kept. @throws ResourceSyncError RS_IO
   */
  async replace(from: string, to: string, keep: string | undefined, keepMax: number, xdevTmp: string): Promise<number> {
    const job: Job = {
      kind: 'replace',
      from,
      to,
      keep,
      keepMax,
      xdevTmp,
      toDir: dirname(to),
      self: join(to, SELF_NAME),
    };
    return (await this.#submit(job, to)) ?? -1;
  }

  /**
   * Starts the thread now, so that it has booted when the first job comes (a Node worker is online ~22-23 ms
   * after `new Worker` here): a run calls it before discovery, whose network round trips then hide the boot. The thread does not keep the
   * process alive while it has no job. A thread that cannot start leaves the jobs to the calling thread.
   */
  warm(): void {
    if (this.#broken !== undefined || this.#worker !== undefined) return;
    try {
      this.#start();
    } catch (e) {
      this.#breakDown(e as Error, []);
    }
  }

  /** Stops the thread once its jobs are done (a later job starts a new one). */
  async close(): Promise<void> {
    if (this.#waiting.size > 0) await new Promise<void>((resolve) => this.#drained.push(resolve));
    const w = this.#worker;
    this.#worker = undefined;
    await w?.terminate();
  }

  #settled(): void {
    if (this.#waiting.size > 0) return;
    this.#worker?.unref();
    const d = this.#drained;
    this.#drained = [];
    for (const f of d) f();
  }

  #submit(job: Job, what: string): Promise<number | undefined> {
    if (this.#broken !== undefined) return runHere(job, what);
    const id = this.#nextId++;
    return new Promise<number | undefined>((resolve, reject) => {
      this.#waiting.set(id, { resolve, reject, what });
      this.#queue.push({ ...job, id });
      // Jobs wait up to 1 ms for company, unless a full message's worth is there: every message costs the loop
      // a thread wake-up (~30 µs here under load), and jobs that trickle in one per HTTP response (an
      // incremental run over Change Lists) went one per message with a post per loop turn. Measured there:
      // 310-360 against 325-510 ms per 1,000 changes; no change when jobs come in bursts (a Change Dump).
      if (this.#queue.length >= MESSAGE_JOBS) this.#post();
      else this.#timer ??= setTimeout(() => this.#post(), 1);
    });
  }

  #post(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const jobs = this.#queue;
    this.#queue = [];
    if (jobs.length === 0) return;
    let worker: Worker;
    try {
      worker = this.#start();
      // Copied, not transferred: a thread that fails to start leaves its jobs to be done here.
      worker.postMessage(jobs);
      for (const j of jobs) this.#sent.set(j.id, j);
    } catch (e) {
      this.#breakDown(e as Error, jobs);
      return;
    }
    worker.ref();
  }

  #start(): Worker {
    if (this.#worker !== undefined) return this.#worker;
    // No flags of this process: `--input-type=module` would make the worker's script a module without `require`.
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      execArgv: [],
      ...(this.options.resourceLimits === undefined ? {} : { resourceLimits: this.options.resourceLimits }),
    });
    let answered = false;
    worker.on('message', (results: { id: number; value?: number; code?: string; message?: string }[]) => {
      answered = true;
      for (const r of results) {
        this.#sent.delete(r.id);
        const w = this.#waiting.get(r.id);
        if (w === undefined) continue;
        this.#waiting.delete(r.id);
        if (r.message === undefined) w.resolve(r.value);
        else {
          const cause = Object.assign(new Error(r.message), { code: r.code });
          w.reject(new ResourceSyncError('RS_IO', `cannot write ${w.what}: ${r.message}`, { cause }));
        }
      }
      this.#settled();
    });
    const fail = (e: Error): void => {
      if (this.#worker !== worker) return;
      this.#worker = undefined;
      // A thread that never answered failed to start: none of its jobs ran, so all are done here.
      this.#breakDown(e, answered ? [] : [...this.#sent.values()]);
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`the file writer thread exited (code ${code})`)));
    // After the listeners: adding a 'message' listener refs the thread again (a thread started by warm(), which
    // no job then used, kept the process from exiting).
    worker.unref();
    this.#worker = worker;
    return worker;
  }

  /**
   * The thread failed. The jobs in `redo` (known not to have run) and those not posted yet are done on the
   * calling thread, as are later ones; the others it was given are failed (their outcome is unknown, so the
   * callers count them as failures and a later run retries them).
   */
  #breakDown(e: Error, redo: readonly Numbered[]): void {
    this.#broken = e;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const here = [...redo, ...this.#queue];
    this.#queue = [];
    this.#sent.clear();
    for (const j of here) {
      const w = this.#waiting.get(j.id);
      this.#waiting.delete(j.id);
      if (w !== undefined) runHere(j, w.what).then(w.resolve, w.reject);
    }
    for (const [id, w] of this.#waiting) {
      this.#waiting.delete(id);
      w.reject(new ResourceSyncError('RS_IO', `cannot write ${w.what}: ${e.message}`, { cause: e }));
    }
    this.#settled();
  }
}

/** A job on the calling thread (when the worker is unavailable). */
function runHere(job: Job, what: string): Promise<number | undefined> {
  try {
    return Promise.resolve(runJob(job, LOCAL_FS));
  } catch (e) {
    return Promise.reject(
      new ResourceSyncError('RS_IO', `cannot write ${what}: ${(e as Error).message}`, { cause: e }),
    );
  }
}

/**
 * `body` as an array owning its whole buffer: a view on a larger buffer (a socket read, a ZIP block) would be
 * cloned with all of that buffer when posted to the thread.
 */
function ownBytes(body: Uint8Array): Uint8Array {
  return body.byteOffset === 0 && body.byteLength === body.buffer.byteLength ? body : new Uint8Array(body);
}

/** Jobs that make a message at once (see FileWriter's submit). */
const MESSAGE_JOBS = 16;

let shared: FileWriter | undefined;

/** The process-wide {@link FileWriter}. */
export function sharedFileWriter(): FileWriter {
  shared ??= new FileWriter();
  return shared;
}
