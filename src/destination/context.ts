/**
 * What the three operations share: the HTTP client, the path mapper, the state (or a read-only view of it in
 * a dry run), batched and durable recording of installed resources, counts, failures and events.
 *
 * @module
 */
import { existsSync, rmSync, stat } from 'node:fs';
import { open, rm } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';
import { type ErrorCode, ResourceSyncError, isResourceSyncError } from '../core/errors.js';
import type { Hashes } from '../core/hash.js';
import { syncDir } from '../io/atomic.js';
import { syncFileSystem } from '../io/syncfs.js';
import { type Concurrency, forEachConcurrent } from './concurrent.js';
import { sharedFileWriter } from './file-writer.js';
import { hashFile } from '../io/hashing.js';
import {
  type Operation,
  type ResourceAction,
  SUMMARY_SAMPLE_LIMIT,
  type SyncCounts,
  type SyncEvent,
  type SyncFailure,
  emptyCounts,
} from './events.js';
import { type HttpClient, isRetriable } from '../http/client.js';
import { downloadAndInstall, installFromStream, verify } from './install.js';
import type { PathMapper } from './paths.js';
import { type ExpectedContent, algorithmsFor } from './plan.js';
import { SMALL_RESOURCE_BYTES, downloadSmall, smallTempPath, stageSmallFile, writeSmallFile } from './small.js';
import type { SparePool } from './spares.js';
import type { DestinationState, ResourceRecord } from './state.js';
import { createMultiHasher } from '../io/hashing.js';
import { SELF_NAME, ensureParentDirectory, placeFileSync, resourceFile } from './paths.js';
import { type DumpPackage, type PendingPackage, startPackage } from './dump.js';
import type { UriFilter } from './filter.js';

/** The part of {@link DestinationState} the operations use. */
export type StateLike = Pick<
  DestinationState,
  | 'get'
  | 'getMany'
  | 'put'
  | 'markDeleted'
  | 'remove'
  | 'all'
  | 'deletedRecords'
  | 'count'
  | 'transaction'
  | 'getWatermark'
  | 'setWatermark'
  | 'journalBegin'
  | 'journalEnd'
  | 'journal'
  | 'getMeta'
  | 'setMeta'
  | 'fileOwner'
>;

/** A read-only view for dry runs: reads go to the real state when there is one, writes are dropped. */
export function dryState(real: StateLike | undefined): StateLike {
  return {
    get: (uri) => real?.get(uri),
    getMany: (uris) => real?.getMany(uris) ?? new Map(),
    put: () => undefined,
    markDeleted: () => undefined,
    remove: () => undefined,
    all: () => real?.all() ?? [][Symbol.iterator](),
    deletedRecords: () => real?.deletedRecords() ?? [][Symbol.iterator](),
    count: () => real?.count() ?? 0,
    transaction: <T>(fn: () => T): T => fn(),
    getWatermark: () => real?.getWatermark(),
    setWatermark: () => undefined,
    journalBegin: () => undefined,
    journalEnd: () => undefined,
    journal: () => real?.journal(),
    getMeta: (key) => real?.getMeta(key),
    setMeta: () => undefined,
    fileOwner: (path) => real?.fileOwner(path),
  };
}

/**
 * How installed files are made durable before the state records them. Both `file` and `batch` keep the rules
 * "a record never names a file a power loss could take away" and "a file's final name only ever holds a
 * complete, verified version, even after a power loss"; they differ in cost.
 * - `batch` (default): small resources (≤ 256 KiB) are written to temporary files without fsync and staged;
 *   before the transaction that records a batch commits, the whole file system is flushed once (`syncfs`,
 *   see {@link syncFileSystem}), the staged files are renamed into place, and the file system is flushed again
 *   (the renames). Larger files are fsynced before their rename, as in `file`. Where syncfs is not available,
 *   each staged file is fsynced (32 at a time) before the renames and the directories after them. Files become
 *   visible under their final names when their batch commits (every 512 records or 250 ms, and at the end of a run).
 *   Costs: two syncfs per batch, which also wait for anything else dirty on that file system (measured
 *   cheaper than an fsync per directory, each of which flushes the device's cache).
 * - `file`: each file is fdatasync'ed before its rename (on the thread pool, so several at once); the
 *   directories of a batch of records are fsynced before the transaction that records the batch commits.
 * - `none`: no fsync at all (tests and throwaway copies); a process crash loses nothing, a power loss may.
 */
export type Durability = 'batch' | 'file' | 'none';

/** Options of {@link Recorder}. */
export interface RecorderOptions {
  readonly durability: Durability;
  /** The copy's directory (the file system `batch` durability flushes). */
  readonly root: string;
  /** Records per transaction (default 512). */
  readonly batchSize?: number;
  /**
   * A batch is also committed as soon as no commit is running and this many records wait (group commit;
   * default: `batchSize`, i.e. off). Batches then follow the pace of the flushes, so the last one, which the run
   * waits for, is small. Measured: on incremental runs from a Change Dump (1,000 replaced files) at 64, the wait
   * after the last file went from ~55 to ~12 ms; on a 10,000-resource list baseline it cost ~10% (6,270 against
   * 5,560/s, two runs each), so operations choose (see SyncContext).
   */
  readonly groupSize?: number;
  /**
   * Where replaced files are kept as spares instead of freed, in `batch` durability (see spares.ts); without
   * it, they are freed.
   */
  readonly spares?: SparePool;
  /**
   * A batch is also committed once its first record or staged file is this old (default 250 ms in `batch`
   * durability, 1,000 ms otherwise), by a timer when nothing more arrives (a stalled download), so a crash
   * loses at most about this much finished work, and a run's last batch (whose commit the run waits for)
   * stays small.
   */
  readonly flushIntervalMs?: number;
}

type Pending =
  | { readonly kind: 'put'; readonly rec: ResourceRecord; readonly file?: string }
  | { readonly kind: 'delete'; readonly uri: string; readonly datetime: string; readonly removed: boolean };

/** A verified file written under a temporary name, renamed to `target` when its batch is durable. */
interface Staged {
  readonly tmp: string;
  readonly target: string;
  /** Whether `target` exists (its rename replaces a file); undefined: not known, looked at when renamed. */
  readonly replacing: boolean | undefined;
  /** `tmp` is a spare of the pool (see spares.ts). */
  readonly spare: boolean;
}

/**
 * Batches state writes: one SQLite transaction per `batchSize` records, each preceded by what makes the files
 * it records durable (see {@link Durability}). Memory: one batch of records and staged files.
 */
export class Recorder {
  private pending: Pending[] = [];
  private staged: Staged[] = [];
  private flushing: Promise<void> = Promise.resolve();
  private readonly batchSize: number;
  private readonly groupSize: number;
  private readonly flushIntervalMs: number;
  /** When the first record or staged file of the current batch arrived (0: the batch is empty). */
  private batchStarted = 0;
  /** Commits started and not finished (see {@link flush}). */
  private committing = 0;
  /** Commits the batch once it is `flushIntervalMs` old even when nothing more arrives (a stalled download). */
  private timer: NodeJS.Timeout | undefined;
  /** A commit the timer started failed: reported by the next {@link put}, {@link delete} or {@link flush}. */
  private failure: { error: unknown } | undefined;

  constructor(
    private readonly state: StateLike,
    private readonly options: RecorderOptions,
  ) {
    this.batchSize = options.batchSize ?? 512;
    this.groupSize = options.groupSize ?? this.batchSize;
    this.flushIntervalMs = options.flushIntervalMs ?? (options.durability === 'batch' ? 250 : 1000);
  }

  /** True when the current batch is full or old enough to commit. */
  private due(): boolean {
    const now = Date.now();
    if (this.batchStarted === 0) this.started(now);
    return (
      this.pending.length >= this.batchSize ||
      now - this.batchStarted >= this.flushIntervalMs ||
      (this.committing === 0 && this.pending.length >= this.groupSize)
    );
  }

  /**
   * Stages a verified temporary file (`batch` durability): it is renamed to `target` by the next flush, after
   * the file system has been flushed. A record of it may come before or after that flush.
   */
  stage(tmp: string, target: string, replacing?: boolean, spare = false): void {
    this.staged.push({ tmp, target, replacing, spare });
    if (this.batchStarted === 0) this.started(Date.now());
  }

  /**
   * A batch began at `now`: it is committed once `flushIntervalMs` old, by the next record, or by a timer when
   * none comes (the timer does not keep the process alive).
   */
  private started(now: number): void {
    this.batchStarted = now;
    if (this.timer !== undefined) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (this.batchStarted === 0) return;
      this.flush().catch((error: unknown) => {
        this.failure ??= { error };
      });
    }, this.flushIntervalMs);
    this.timer.unref();
  }

  /** Throws the failure of a commit the timer started, once. */
  private rethrow(): void {
    const f = this.failure;
    if (f === undefined) return;
    this.failure = undefined;
    throw f.error;
  }

  /** Records a resource installed at `file` (fsynced before the record commits, in batch durability). */
  async put(rec: ResourceRecord, file?: string): Promise<void> {
    this.rethrow();
    this.pending.push(file === undefined ? { kind: 'put', rec } : { kind: 'put', rec, file });
    if (this.due()) await this.flush();
  }

  /** Records a deletion (`removed`: the local file was removed, its directory is fsynced first). */
  async delete(uri: string, datetime: string, removed: boolean): Promise<void> {
    this.rethrow();
    this.pending.push({ kind: 'delete', uri, datetime, removed });
    if (this.due()) await this.flush();
  }

  /**
   * Makes every pending record durable. Concurrent callers wait for the same flushes, in order. Rejects with
   * the failure of an earlier commit the timer started, if any.
   */
  flush(): Promise<void> {
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    const batch = this.pending;
    const staged = this.staged;
    this.pending = [];
    this.staged = [];
    this.batchStarted = 0;
    this.committing++;
    const run = this.flushing.then(() => this.commit(batch, staged)).finally(() => this.committing--);
    this.flushing = run.catch(() => undefined);
    const f = this.failure;
    if (f === undefined) return run;
    this.failure = undefined;
    return run.then(() => Promise.reject(f.error));
  }

  private async commit(batch: Pending[], staged: Staged[]): Promise<void> {
    if (batch.length === 0 && staged.length === 0) return;
    if (this.options.durability === 'batch') {
      await this.commitStaged(batch, staged);
    } else if (this.options.durability !== 'none') {
      const files = new Set<string>();
      const dirs = new Set<string>();
      for (const p of batch) {
        if (p.kind === 'put' && p.file !== undefined) {
          files.add(p.file);
          dirs.add(dirname(p.file));
        }
      }
      // `file` durability fsynced each file before its rename; the renames still need their directories.
      await forEachConcurrent([...dirs], 32, syncDir);
    }
    this.state.transaction(() => {
      for (const p of batch) {
        if (p.kind === 'put') this.state.put(p.rec);
        else this.state.markDeleted(p.uri, p.datetime);
      }
    });
  }

  /**
   * `batch` durability: flush the staged files' contents (syncfs), rename them into place, flush the renames
   * (and any other file installed since the last flush) with a second syncfs, in that order; the caller
   * commits the records after. A staged file that cannot be renamed fails the batch (its records are not
   * committed) once every other staged file of the batch has been renamed.
   */
  private async commitStaged(batch: readonly Pending[], staged: readonly Staged[]): Promise<void> {
    const root = this.options.root;
    if (staged.length > 0 && !(await syncFileSystem(root))) {
      await forEachConcurrent(
        staged.map((s) => s.tmp),
        32,
        fsyncFile,
      );
    }
    // New files are renamed in line, letting the event loop run every 64 (measured against renames on the
    // thread pool, 16 at a time: 6,360/s against 5,930-6,050/s for a list baseline: the pool's round trips cost
    // more than they overlap). Files replacing existing ones are renamed by the file writer thread meanwhile
    // (see file-writer.ts), each replaced file kept as a spare when there is room (see spares.ts): such a
    // rename frees the old file's blocks otherwise, 80-104 µs per file here. Staged versions of one target keep
    // their order.
    let failure: unknown;
    const fail = (target: string, e: unknown): void => {
      failure ??= isResourceSyncError(e, 'RS_IO')
        ? e
        : new ResourceSyncError('RS_IO', `cannot install ${target}: ${(e as Error).message}`, { cause: e });
    };
    const byTarget = new Map<string, Staged[]>();
    for (const s of staged) {
      const group = byTarget.get(s.target);
      if (group === undefined) byTarget.set(s.target, [s]);
      else group.push(s);
    }
    const inline: [string, Staged[]][] = [];
    const renames: Promise<void>[] = [];
    const writer = sharedFileWriter();
    const pool = this.options.spares;
    const replace = async ({ tmp, target, spare }: Staged): Promise<void> => {
      const keep = pool?.reserve();
      let kept = -1;
      try {
        kept = await writer.replace(tmp, target, keep, pool?.keepMax ?? 0, smallTempPath(target));
      } catch (e) {
        fail(target, e);
      } finally {
        if (keep !== undefined) pool?.released(keep, kept >= 0);
        if (spare) pool?.dropped();
      }
    };
    for (const [target, group] of byTarget) {
      if (!((group[0] as Staged).replacing ?? existsSync(target))) inline.push([target, group]);
      // One target's versions go to the thread in order; it runs them in order.
      else for (const s of group) renames.push(replace(s));
    }
    const pooledDone = Promise.all(renames);
    let n = 0;
    for (const [target, group] of inline) {
      for (const { tmp } of group) {
        try {
          placeFileSync(tmp, target);
        } catch (e) {
          rmSync(tmp, { force: true });
          fail(target, e);
        }
        if (++n % 64 === 0) await new Promise((r) => setImmediate(r));
      }
    }
    await pooledDone;
    if (failure !== undefined) throw failure;
    // The renames (and the files other paths installed, fsynced before their rename) need their directories
    // on disk. A second syncfs does it with one device flush; an fsync per directory measured slower here (each
    // directory fsync flushes the device's cache on its own).
    if (!(await syncFileSystem(root))) {
      const dirs = new Set<string>();
      for (const s of staged) dirs.add(dirname(s.target));
      for (const p of batch) if (p.kind === 'put' && p.file !== undefined) dirs.add(dirname(p.file));
      await forEachConcurrent([...dirs], 32, syncDir);
    }
  }
}

async function fsyncFile(path: string): Promise<void> {
  let fh: Awaited<ReturnType<typeof open>> | undefined;
  try {
    fh = await open(path, 'r');
    await fh.sync();
  } catch (e) {
    throw new ResourceSyncError('RS_IO', `cannot fsync ${path}: ${(e as Error).message}`, { cause: e });
  } finally {
    await fh?.close().catch(() => undefined);
  }
}

/** Group commit size of incremental runs (see {@link RecorderOptions.groupSize}). */
const INCREMENTAL_GROUP_SIZE = 64;

/** Settings every operation reads. */
export interface ContextOptions {
  readonly source: string;
  readonly dir: string;
  readonly dryRun: boolean;
  readonly deleteFiles: boolean;
  /** Resources fetched or installed at once: fixed, or following the HTTP client's window (see concurrent.ts). */
  readonly concurrency: Concurrency;
  readonly checksum: boolean;
  readonly noDumps: boolean;
  readonly autoBaseline: boolean;
  readonly durability: Durability;
  readonly maxPackageBytes?: number;
  /**
   * Apply a dump package's files while the package arrives, where its layout allows (manifest first, sizes in
   * the local headers; see `baseline.ts` and `incremental.ts`); default true. False: only once it is in.
   */
  readonly applyArriving?: boolean;
  readonly tmpDir: string;
  /**
   * The previous run was interrupted (the journal says so): files may have been installed without being
   * recorded, so local files are hashed to adopt them instead of fetching them again.
   */
  readonly resumed?: boolean;
  /** Small resources (declared length ≤ 256 KiB) are received in memory (default true). */
  readonly smallFastPath?: boolean;
  /** Spare files for replacements in `batch` durability (see spares.ts). */
  readonly spares?: SparePool;
  /** Which resources the copy holds (`--include` / `--exclude`, see filter.ts); all when absent. */
  readonly filter?: UriFilter;
  /** The time bound of one resource, all attempts together (see `DestinationOptions.resourceTimeoutMs`). */
  readonly resourceTimeoutMs?: number;
  readonly signal?: AbortSignal;
}

/** Progress events are throttled to one per this many milliseconds (resource events are not). */
const PROGRESS_INTERVAL_MS = 100;

/** State of one running operation. */
export class SyncContext {
  readonly counts: SyncCounts = emptyCounts();
  readonly failures: SyncFailure[] = [];
  readonly warnings: string[] = [];
  readonly recorder: Recorder;
  private done = 0;
  private lastProgress = 0;
  total: number | undefined;
  /**
   * The state held no record at all when the current phase started (and the previous run was not
   * interrupted): lookups of URIs the phase has not recorded itself can be skipped. Set by the phase.
   */
  stateWasEmpty = false;

  constructor(
    readonly operation: Operation,
    readonly client: HttpClient,
    readonly mapper: PathMapper,
    readonly state: StateLike,
    readonly options: ContextOptions,
    private readonly listener: (e: SyncEvent) => void,
  ) {
    this.recorder = new Recorder(state, {
      durability: options.dryRun ? 'none' : options.durability,
      root: options.dir,
      ...(options.spares === undefined ? {} : { spares: options.spares }),
      // Group commit where the last batch's wait weighs on the run: changes are usually few.
      ...(operation === 'incremental' || operation === 'notification' ? { groupSize: INCREMENTAL_GROUP_SIZE } : {}),
    });
  }

  emit(e: SyncEvent): void {
    try {
      this.listener(e);
    } catch {
      // A listener that throws must not break the operation.
    }
  }

  warn(code: string, message: string, url?: string): void {
    if (this.warnings.length < SUMMARY_SAMPLE_LIMIT) this.warnings.push(`${message} [${code}]`);
    this.emit(url === undefined ? { type: 'warning', code, message } : { type: 'warning', code, message, url });
  }

  /** Counts one resource outcome and emits its events. */
  count(uri: string, action: ResourceAction, from: 'list' | 'dump' | 'change', error?: unknown): void {
    switch (action) {
      case 'created':
        this.counts.created++;
        break;
      case 'updated':
        this.counts.updated++;
        break;
      case 'deleted':
        this.counts.deleted++;
        break;
      case 'deletion-recorded':
        this.counts.deletionsRecorded++;
        break;
      case 'skipped':
        this.counts.skipped++;
        break;
      case 'failed':
        this.counts.failed++;
        break;
      case 'refused':
        this.counts.refused++;
        break;
    }
    if (error !== undefined) {
      const f = describeError(uri, error);
      if (this.failures.length < SUMMARY_SAMPLE_LIMIT) this.failures.push(f);
      this.emit({ type: 'resource', uri, action, from, error: { code: f.code, message: f.message } });
    } else {
      this.emit({ type: 'resource', uri, action, from });
    }
    this.done++;
    const now = Date.now();
    if (now - this.lastProgress >= PROGRESS_INTERVAL_MS) {
      this.lastProgress = now;
      this.progress();
    }
  }

  /**
   * Marks the start of a phase that looks up each URI once: when the state is empty (and the last run was not
   * interrupted), {@link lookup} answers without querying it.
   */
  beginPhase(): void {
    this.stateWasEmpty = this.options.resumed !== true && this.state.all(1).next().done === true;
  }

  /** The record of `uri`; undefined without a query when the phase started with an empty state. */
  lookup(uri: string): ResourceRecord | undefined {
    return this.stateWasEmpty ? undefined : this.state.get(uri);
  }

  /** True when the copy holds `uri` by its `--include` / `--exclude` patterns (see filter.ts). */
  accepts(uri: string): boolean {
    return this.options.filter?.accepts(uri) !== false;
  }

  /** Counts one resource looked at without an action of its own (an audit's comparison), for progress. */
  advance(): void {
    this.done++;
    const now = Date.now();
    if (now - this.lastProgress >= PROGRESS_INTERVAL_MS) {
      this.lastProgress = now;
      this.progress();
    }
  }

  private lastDownload = 0;

  /** Progress of a package download (throttled like progress events); pass as `onBytes` of fetchPackage. */
  downloadProgress(url: string, bytes: number, total: number | undefined): void {
    const now = Date.now();
    if (now - this.lastDownload < PROGRESS_INTERVAL_MS && bytes !== total) return;
    this.lastDownload = now;
    this.emit(total === undefined ? { type: 'download', url, bytes } : { type: 'download', url, bytes, total });
  }

  /** Emits a progress event now. */
  progress(): void {
    const e: { type: 'progress'; done: number; bytes: number; total?: number } = {
      type: 'progress',
      done: this.done,
      bytes: this.counts.bytes,
    };
    if (this.total !== undefined) e.total = this.total;
    this.emit(e);
  }

  /** The local path of `uri`, relative to the copy's directory, as stored in the state. */
  relativePath(target: string): string {
    return relative(this.options.dir, target).split(sep).join('/');
  }

  /**
   * Fetches a resource from its candidate URLs (mirrors first, §12.3) and installs it at `target`, verified
   * against `expected`. Returns undefined and counts a failure when every candidate fails.
   */
  async fetchResource(
    urls: readonly string[],
    target: string,
    expected: ExpectedContent,
  ): Promise<{ length: number; hashes: Hashes } | { error: unknown }> {
    let lastError: unknown;
    const exp: { length?: number; hashes?: Hashes } = {};
    if (expected.length !== undefined) exp.length = expected.length;
    if (expected.hashes !== undefined) exp.hashes = expected.hashes;
    const small =
      (this.options.smallFastPath ?? true) && expected.length !== undefined && expected.length <= SMALL_RESOURCE_BYTES;
    // One deadline for every attempt of this resource: mirrors, whole-download retries and the client's own.
    const started = Date.now();
    const boundMs = this.options.resourceTimeoutMs;
    const retryUntil = boundMs === undefined ? undefined : started + boundMs;
    let attempted = 0;
    for (const url of urls) {
      if (retryUntil !== undefined && attempted > 0 && Date.now() >= retryUntil) break;
      attempted++;
      try {
        if (small) {
          const opts: {
            root: string;
            signal?: AbortSignal;
            retryUntil?: number;
            place: (target: string, body: Uint8Array) => Promise<void>;
          } = { root: this.options.dir, place: (t, b) => this.placeSmall(t, b) };
          if (this.options.signal !== undefined) opts.signal = this.options.signal;
          if (retryUntil !== undefined) opts.retryUntil = retryUntil;
          return await downloadSmall(this.client, url, target, { ...exp, length: expected.length as number }, opts);
        }
        const init: { signal?: AbortSignal; fsync: boolean; root: string; retryUntil?: number } = {
          fsync: this.options.durability !== 'none',
          root: this.options.dir,
        };
        if (this.options.signal !== undefined) init.signal = this.options.signal;
        if (retryUntil !== undefined) init.retryUntil = retryUntil;
        const r = await downloadAndInstall(this.client, url, target, exp, init);
        return { length: r.length, hashes: r.hashes };
      } catch (e) {
        if (isResourceSyncError(e, 'RS_ABORTED') || this.options.signal?.aborted === true) throw e;
        if (isResourceSyncError(e, 'RS_IO') || isResourceSyncError(e, 'RS_UNSAFE_PATH')) return { error: e };
        lastError = e;
      }
    }
    if (retryUntil !== undefined && boundMs !== undefined && Date.now() >= retryUntil && isRetriable(lastError)) {
      const last = lastError instanceof Error ? lastError.message : String(lastError);
      return {
        error: new ResourceSyncError(
          'RS_TIMEOUT',
          `gave up after ${((Date.now() - started) / 1000).toFixed(1)} s: the time bound of one resource ` +
            `(${boundMs / 1000} s, all attempts together; --resource-timeout) was reached; last error: ${last}`,
          { cause: lastError }, // the last error names the URL
        ),
      };
    }
    return { error: lastError };
  }

  /**
   * Starts downloading a dump package (see `startPackage` in dump.ts) with this run's options: the temporary
   * directory, the size bound, the signal, progress, applying its files as it arrives (`applyArriving`), and
   * the length and hashes its dump declares (§11.1, §13.1), checked once it is in.
   */
  startPackage(url: string, declared: ExpectedContent | undefined): PendingPackage {
    const o = this.options;
    return startPackage(this.client, url, {
      tmpDir: o.tmpDir,
      onBytes: (b, t) => this.downloadProgress(url, b, t),
      arriving: o.applyArriving ?? true,
      ...(o.maxPackageBytes === undefined ? {} : { maxBytes: o.maxPackageBytes }),
      ...(declared?.length === undefined ? {} : { length: declared.length }),
      ...(declared?.hashes === undefined ? {} : { hashes: declared.hashes }),
      ...(o.signal === undefined ? {} : { signal: o.signal }),
    });
  }

  /**
   * Installs a file of a dump package at `target`, verified against `expected`: small files are read whole
   * ({@link DumpPackage.readSmallBitstream}), others streamed.
   */
  async installFromPackage(
    pkg: DumpPackage,
    path: string | undefined,
    target: string,
    expected: ExpectedContent,
  ): Promise<{ length: number; hashes: Hashes }> {
    const small = (this.options.smallFastPath ?? true) ? await pkg.readSmallBitstream(path) : undefined;
    if (small !== undefined) return this.installBytes(small, target, expected);
    const exp: { length?: number; hashes?: Hashes } = {};
    if (expected.length !== undefined) exp.length = expected.length;
    if (expected.hashes !== undefined) exp.hashes = expected.hashes;
    return installFromStream(await pkg.openBitstream(path), target, exp, {
      fsync: this.options.durability !== 'none',
      root: this.options.dir,
    });
  }

  /** Installs bytes held in memory at `target`, verified against `expected` first. */
  async installBytes(
    body: Uint8Array,
    target: string,
    expected: ExpectedContent,
  ): Promise<{ length: number; hashes: Hashes }> {
    const exp: { length?: number; hashes?: Hashes } = {};
    if (expected.length !== undefined) exp.length = expected.length;
    if (expected.hashes !== undefined) exp.hashes = expected.hashes;
    const hasher = createMultiHasher(algorithmsFor(expected));
    hasher.update(body);
    const result = { length: body.byteLength, hashes: hasher.digest() };
    verify(exp, result);
    await ensureParentDirectory(this.options.dir, target);
    await this.placeSmall(target, body);
    return result;
  }

  /**
   * Places a verified small body at `target` (parents exist): staged for the next flush in `batch`
   * durability, written and renamed now otherwise (fsynced first in `file`).
   */
  async placeSmall(target: string, body: Uint8Array): Promise<void> {
    // A baseline into an empty copy creates files; an incremental run mostly replaces them.
    const replacing =
      this.operation === 'incremental' || this.operation === 'notification'
        ? true
        : this.stateWasEmpty
          ? false
          : undefined;
    if (this.options.durability === 'batch' && !this.options.dryRun) {
      const spare = replacing === true ? this.options.spares?.take() : undefined;
      if (spare !== undefined) {
        try {
          await sharedFileWriter().refill(spare, body);
          this.recorder.stage(spare, target, replacing, true);
          return;
        } catch {
          // Not a usable spare (removed by the writer): a new temporary file instead.
          this.options.spares?.dropped();
        }
      }
      this.recorder.stage(await stageSmallFile(target, body, replacing), target, replacing);
      return;
    }
    await writeSmallFile(target, body, this.options.durability === 'file', replacing);
  }

  /** A record for an installed resource. */
  record(
    uri: string,
    target: string,
    result: { length: number; hashes: Hashes },
    lastmod: string | undefined,
    sourceDatetime: string | undefined,
  ): ResourceRecord {
    const rec: {
      -readonly [K in keyof ResourceRecord]: ResourceRecord[K];
    } = { uri, path: this.relativePath(target), length: result.length };
    if (result.hashes.md5 !== undefined) rec.md5 = result.hashes.md5;
    if (result.hashes['sha-256'] !== undefined) rec.sha256 = result.hashes['sha-256'];
    if (lastmod !== undefined) rec.lastmod = lastmod;
    if (sourceDatetime !== undefined) rec.sourceDatetime = sourceDatetime;
    return rec;
  }

  /** Removes a local file (for `--delete`); missing files are fine. */
  async removeFile(target: string): Promise<void> {
    await rm(await resourceFile(target), { force: true });
    if (this.options.durability !== 'none') await syncDir(dirname(target));
  }

  /** True when the run must not go on (aborted). */
  checkAborted(): void {
    if (this.options.signal?.aborted === true)
      throw new ResourceSyncError('RS_ABORTED', 'aborted', { cause: this.options.signal.reason });
  }
}

/** Size of a regular file, or undefined. */
export function regularFileSize(path: string): Promise<number | undefined> {
  // On the thread pool: a synchronous stat would block the event loop while the kernel holds the directory's
  // lock for concurrent creations and renames in it (measured: hundreds of µs per call under load).
  // A directory: resources below it exist, and the file is `<path>/%%self` (see paths.ts).
  return new Promise((resolve) =>
    stat(path, (e, s) => {
      if (e === null && s.isDirectory()) void regularFileSize(join(path, SELF_NAME)).then(resolve);
      else resolve(e === null && s.isFile() ? s.size : undefined);
    }),
  );
}

/** Hashes a local file to compare it with `expected` (md5 + sha-256, sha-1 when expected has it). */
export async function hashLocal(path: string, expected: ExpectedContent): Promise<{ length: number; hashes: Hashes }> {
  return hashFile(await resourceFile(path), algorithmsFor(expected), { bufferSize: 64 * 1024 });
}

/** A failure record from any thrown value. */
export function describeError(uri: string, e: unknown): SyncFailure {
  if (e instanceof ResourceSyncError) return { uri, code: e.code, message: e.message };
  const err = e as { code?: unknown; message?: unknown };
  const code: ErrorCode | string = typeof err?.code === 'string' ? err.code : 'RS_IO';
  return { uri, code, message: typeof err?.message === 'string' ? err.message : String(e) };
}
