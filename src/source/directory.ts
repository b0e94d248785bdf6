/**
 * The directory-backed Source (`serve`, `publish`): files of a tree are the resources. Built on {@link Source}
 * with a SQLite store in a state directory, a scanner (start-up and periodic) and an optional watcher.
 *
 * @module
 */
import {
  type BigIntStats,
  closeSync,
  constants as fsConstants,
  fstatSync,
  openSync,
  readlinkSync,
  readSync,
} from 'node:fs';
import { lstat, mkdir, readdir, realpath, stat } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { ResourceSyncError } from '../core/errors.js';
import { type FileLock, lockFile } from '../io/lock.js';
import { BlobStore } from './blobs.js';
import { fileContent } from './dumps.js';
import { isSafeRelativePath, requestRelativePath } from './paths.js';
import { sameFileState, type ScanContext, type ScanStats, scanPaths, scanTree } from './scan.js';
import {
  type DocumentEvent,
  type RecordedChange,
  type SiteFile,
  Source,
  type SourceLimits,
  type SourceOptions,
} from './source.js';
import { RecordCache } from './record-cache.js';
import { openStore } from './open-store.js';
import type { ChangeInput, ResourceRecord, SourceStore } from './store.js';
import { startWatching, type WatchHandle } from './watch.js';

/** A set of resources (one Capability List). */
export interface SetConfig {
  readonly name: string;
  /**
   * Which files belong to the set: a path prefix (`'images/'`), a RegExp over the relative path, or a
   * function. A file goes to the first set that matches. Default: every file.
   */
  readonly match?: string | RegExp | ((relPath: string) => boolean);
  readonly describedBy?: string;
}

/** Options of {@link openDirectorySource}. */
export interface DirectorySourceOptions {
  readonly dir: string;
  readonly baseUrl: string;
  /** State directory (store, blobs, generated documents). Default `<dir>/../.<name>-resourcesync`. */
  readonly stateDir?: string;
  /**
   * The inventory and change log: a `postgres://…?schema=name` URL (shared by several processes), or `sqlite`
   * (the file in the state directory). Default: `RESOURCESYNC_STORE`, else SQLite. See {@link openStore}.
   */
  readonly store?: string;
  /** Sets: configured list, or `'top-level'` (one per top-level folder; top-level files go to `default`). */
  readonly sets?: readonly SetConfig[] | 'top-level';
  readonly limits?: SourceLimits;
  /** Watch the tree for changes (default false). */
  readonly watch?: boolean;
  /** Periodic full rescan while watching (default 60,000 ms; 0 disables). */
  readonly rescanIntervalMs?: number;
  /** Debounce of watch events per path (default 100 ms). */
  readonly debounceMs?: number;
  /** Where generated documents go (default `<stateDir>/site`; `publish` points it at the output). */
  readonly siteDir?: string;
  /**
   * Generation locks as files, for a `siteDir` shared by several processes over a store without locks of its
   * own (see {@link SourceOptions.lockDir}; a PostgreSQL store locks in the database). Default: none.
   */
  readonly lockDir?: string;
  /** Directories inside the tree never scanned (besides hidden ones and the state dir). */
  readonly exclude?: readonly string[];
  /** Bound of kept bitstream versions for Change Dumps (default 1 GiB; 0 keeps none). */
  readonly blobMaxBytes?: number;
  readonly describedBy?: string;
  /** Capabilities each set offers (default: all four). */
  readonly capabilities?: SourceOptions['capabilities'];
  /** What a set's Capability List advertises besides the four capabilities (notification channels, hub). */
  readonly capabilityListExtras?: SourceOptions['capabilityListExtras'];
  /** fsync generated files (default true). */
  readonly fsync?: boolean;
  /** See {@link SourceOptions.regenerateAfterMs} (default 1,000 ms). */
  readonly regenerateAfterMs?: number;
  /** Unreadable files, vanished files, refused symlinks. */
  readonly onWarning?: (message: string) => void;
  /** Scan the tree when opening (default true). */
  readonly scanOnOpen?: boolean;
  /** Progress of scans: files walked so far (every 1,000). */
  readonly onScanProgress?: (files: number) => void;
}

/** The directory Source: a {@link SourceSite} plus scanning and watching. */
export interface DirectorySource {
  readonly baseUrl: URL;
  readonly sourceDescriptionUrl: string;
  readonly source: Source;
  readonly store: SourceStore;
  readonly root: string;
  readonly stateDir: string;
  document(pathname: string): Promise<SiteFile | undefined>;
  resource(pathname: string): Promise<SiteFile | undefined>;
  capabilityListUrl(pathname: string): string | undefined;
  robotsTxt(): Promise<string>;
  onChange(listener: (changes: readonly RecordedChange[]) => void): () => void;
  /** Documents published (framework notifications' material): {@link Source.onDocuments}. */
  onDocuments(listener: (events: readonly DocumentEvent[]) => void): () => void;
  /** Scans the whole tree against the inventory (the first scan of a new store is the baseline). */
  scan(): Promise<ScanStats>;
  /** Re-checks some relative paths (files or directories). */
  scanPaths(relPaths: readonly string[]): Promise<ScanStats>;
  /** Starts watching (if not already). */
  watch(): Promise<void>;
  unwatch(): Promise<void>;
  /** Resolves once every watch event seen so far has been recorded. */
  settled(): Promise<void>;
  stats(): Promise<{ resources: number; seq: number; sets: string[] }>;
  close(): Promise<void>;
}

function setResolver(sets: DirectorySourceOptions['sets']): (rel: string) => string | undefined {
  if (sets === undefined || (Array.isArray(sets) && sets.length === 0)) return () => 'default';
  if (sets === 'top-level') return (rel) => (rel.includes('/') ? rel.slice(0, rel.indexOf('/')) : 'default');
  const list = sets as readonly SetConfig[];
  return (rel) => {
    for (const s of list) {
      const m = s.match;
      if (m === undefined) return s.name;
      if (typeof m === 'string' ? rel.startsWith(m) : m instanceof RegExp ? m.test(rel) : m(rel)) return s.name;
    }
    return undefined;
  };
}

const SET_NAME = /^[A-Za-z0-9][A-Za-z0-9._~-]*$/;

/** The default state directory of a collection whose real path is `root`: `<parent>/.<name>-resourcesync`. */
function defaultStateDirOf(root: string): string {
  return join(dirname(root), `.${basename(root)}-resourcesync`);
}

/**
 * The state directory {@link openDirectorySource} uses for `dir` when none is given (next to the collection,
 * hidden). @throws ResourceSyncError `RS_CONFIG` when `dir` cannot be resolved.
 */
export async function defaultStateDir(dir: string): Promise<string> {
  const dirAbs = resolve(dir);
  try {
    return defaultStateDirOf(await realpath(dirAbs));
  } catch (e) {
    throw new ResourceSyncError(
      'RS_CONFIG',
      `cannot read the collection directory ${dirAbs}: ${(e as Error).message}`,
      {
        cause: e,
      },
    );
  }
}

/**
 * Opens a directory Source: checks the directory and base URL, opens (or creates) the state, and runs the
 * start-up scan (the first one is the baseline inventory; later ones record what changed while we were away).
 *
 * @throws ResourceSyncError `RS_CONFIG` (bad base URL, directory missing or unreadable), `RS_STORE` (state
 *   directory not writable), each naming the path.
 */
export async function openDirectorySource(options: DirectorySourceOptions): Promise<DirectorySource> {
  const dirAbs = resolve(options.dir);
  let root: string;
  try {
    root = await realpath(dirAbs);
    const st = await stat(root);
    if (!st.isDirectory()) throw new Error('not a directory');
    await readdir(root);
  } catch (e) {
    throw new ResourceSyncError(
      'RS_CONFIG',
      `cannot read the collection directory ${dirAbs}: ${(e as Error).message}`,
      {
        cause: e,
      },
    );
  }
  const stateDir = resolve(options.stateDir ?? defaultStateDirOf(root));
  try {
    await mkdir(stateDir, { recursive: true });
  } catch (e) {
    throw new ResourceSyncError('RS_STORE', `cannot create the state directory ${stateDir}: ${(e as Error).message}`, {
      cause: e,
    });
  }
  // One Source per state: a second `serve` (or a `publish`) on it would record every change twice.
  const lock = lockFile(join(stateDir, 'lock'), { what: `the state directory ${stateDir}` });
  let stateReal: string;
  try {
    stateReal = await realpath(stateDir);
  } catch (e) {
    lock.release();
    throw e;
  }
  if (Array.isArray(options.sets))
    for (const s of options.sets as readonly SetConfig[])
      if (!SET_NAME.test(s.name))
        throw new ResourceSyncError('RS_CONFIG', `set name ${JSON.stringify(s.name)} is not a safe path segment`);
  const onWarning = options.onWarning ?? (() => undefined);
  let store: SourceStore;
  try {
    store = await openStore(options.store, stateDir);
  } catch (e) {
    lock.release();
    throw e;
  }
  let site: DirectorySourceImpl | undefined;
  try {
    const blobs = await BlobStore.open({
      dir: join(stateDir, 'blobs'),
      ...(options.blobMaxBytes === undefined ? {} : { maxBytes: options.blobMaxBytes }),
    });
    const siteDir = resolve(options.siteDir ?? join(stateDir, 'site'));
    const exclude = [stateReal];
    const siteReal = await realpath(siteDir).catch(() => siteDir);
    exclude.push(siteReal);
    for (const x of options.exclude ?? []) exclude.push(await realpath(resolve(x)).catch(() => resolve(x)));
    const resolveSet = setResolver(options.sets);
    const topLevel = options.sets === 'top-level';
    const setOf = (rel: string): string | undefined => {
      // The first segment `resourcesync` is where the generated documents live under the base URL.
      if (rel.startsWith('resourcesync/') || rel === 'resourcesync') return undefined;
      const s = resolveSet(rel);
      if (s !== undefined && topLevel && !SET_NAME.test(s)) return undefined;
      return s;
    };

    const source = await Source.open({
      store,
      baseUrl: options.baseUrl,
      siteDir,
      blobs,
      ...(Array.isArray(options.sets)
        ? {
            sets: (options.sets as readonly SetConfig[]).map((s) =>
              s.describedBy === undefined ? { name: s.name } : { name: s.name, describedBy: s.describedBy },
            ),
          }
        : options.sets === undefined
          ? { sets: [{ name: 'default' }] }
          : {}),
      ...(options.describedBy === undefined ? {} : { describedBy: options.describedBy }),
      ...(options.capabilities === undefined ? {} : { capabilities: options.capabilities }),
      ...(options.capabilityListExtras === undefined ? {} : { capabilityListExtras: options.capabilityListExtras }),
      ...(options.limits === undefined ? {} : { limits: options.limits }),
      ...(options.fsync === undefined ? {} : { fsync: options.fsync }),
      ...(options.regenerateAfterMs === undefined ? {} : { regenerateAfterMs: options.regenerateAfterMs }),
      ...(options.lockDir === undefined ? {} : { lockDir: resolve(options.lockDir) }),
      onWarning,
      currentContent: async (r) => {
        const abs = join(root, r.uri);
        return fileContent(
          abs,
          r.fileId === undefined ? { length: r.length } : { length: r.length, fileId: r.fileId },
          sameFileState,
        );
      },
      refresh: async (uris) => {
        await site?.scanPaths(uris);
      },
    });
    const stop = new AbortController();
    const ctx: ScanContext = {
      signal: stop.signal,
      root,
      store,
      setOf,
      exclude,
      onWarning,
      blobs,
      ...(options.onScanProgress === undefined ? {} : { onProgress: options.onScanProgress }),
    };
    site = new DirectorySourceImpl(source, ctx, stateDir, options, stop, lock);
    if (options.scanOnOpen !== false) await site.scan();
    if (options.watch === true) await site.watch();
    return site;
  } catch (e) {
    if (site !== undefined) await site.close();
    else {
      await store.close();
      lock.release();
    }
    throw e;
  }
}

/** Collection files up to this size are read whole when they are looked up through {@link DirectorySourceImpl.resource}. */
const SMALL_FILE_BYTES = 64 * 1024;
/** Read-only, no final symlink followed, no blocking open of a FIFO (O_NONBLOCK has no effect on regular files). */
const OPEN_CHECKED_FLAGS = fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK;

/** The {@link SiteFile} of a stored collection file found at `path` (with its bytes when they were read). */
function siteFileOf(rec: ResourceRecord, path: string, data: Buffer | undefined): SiteFile {
  const etag = `"${rec.hashes['sha-256'] ?? rec.hashes.md5 ?? rec.fileId ?? ''}"`;
  const contentType = rec.type ?? 'application/octet-stream';
  const lastModified = new Date(rec.lastmodMs);
  return data === undefined
    ? { path, contentType, length: rec.length, etag, lastModified }
    : { path, contentType, length: rec.length, etag, lastModified, data };
}

/** Most warnings remembered as already said (past it, the oldest may be said again). */
const MAX_REMEMBERED_WARNINGS = 100_000;

/**
 * Says each scan warning once: a full scan repeats every warning of the last one (the same skipped symlinks,
 * the same unreadable folder), and only the new ones are passed on. A warning that a complete full scan no
 * longer gives is forgotten, so it is said again if it comes back. Memory: at most
 * {@link MAX_REMEMBERED_WARNINGS} messages (twice while a full scan runs).
 */
class RepeatedWarnings {
  readonly onWarning: (message: string) => void;
  #said = new Set<string>();
  /** Warnings of the full scan in progress. */
  #current: Set<string> | undefined;

  constructor(onWarning: (message: string) => void) {
    this.onWarning = onWarning;
  }

  report(message: string): void {
    if (this.#current !== undefined && this.#current.size < MAX_REMEMBERED_WARNINGS) this.#current.add(message);
    if (this.#said.has(message)) return;
    if (this.#said.size >= MAX_REMEMBERED_WARNINGS) this.#said.delete(this.#said.values().next().value!);
    this.#said.add(message);
    this.onWarning(message);
  }

  beginScan(): void {
    this.#current = new Set();
  }

  /** A full scan completed: what it did not warn about is forgotten (a scan that failed forgets nothing). */
  endScan(): void {
    if (this.#current === undefined) return;
    if (this.#current.size < MAX_REMEMBERED_WARNINGS) this.#said = this.#current;
    this.#current = undefined;
  }
}

class DirectorySourceImpl implements DirectorySource {
  readonly source: Source;
  readonly store: SourceStore;
  readonly root: string;
  readonly stateDir: string;
  readonly #ctx: ScanContext;
  readonly #options: DirectorySourceOptions;
  /** Scans and records run one at a time (the merge with the inventory needs a still inventory). */
  #queue: Promise<unknown> = Promise.resolve();
  #watcher: WatchHandle | undefined;
  #closed = false;
  /**
   * Inventory records of recently served files: all forgotten on every write through the Source that is not a
   * scan's own; a scan's write replaces just the records of its changes (see {@link DirectorySourceImpl.#record}).
   */
  readonly #records: RecordCache;
  readonly #unsubscribe: () => void;
  /** False once `/proc/self/fd` turned out not to exist (the checked open is then never tried). */
  #procFd = true;

  readonly #stop: AbortController;
  /** Warnings of scans, each said once while it lasts. */
  readonly #warnings: RepeatedWarnings;
  /** The state directory's lock, released when closed. */
  readonly #lock: FileLock;

  constructor(
    source: Source,
    ctx: ScanContext,
    stateDir: string,
    options: DirectorySourceOptions,
    stop: AbortController,
    lock: FileLock,
  ) {
    this.#stop = stop;
    this.#lock = lock;
    this.source = source;
    this.store = source.store;
    this.root = ctx.root;
    this.stateDir = stateDir;
    this.#warnings = new RepeatedWarnings(ctx.onWarning);
    // Scans report through the filter: what a full scan found before (55 skipped symlinks) is not said again.
    this.#ctx = { ...ctx, onWarning: (m) => this.#warnings.report(m) };
    this.#options = options;
    this.#records = new RecordCache(source.store);
    // A write through the Source other than a scan's own (recordChanges) forgets every record at once.
    this.#unsubscribe = source.onChange((_changes, origin) => {
      if (origin !== this) this.#records.invalidate();
    });
  }

  get baseUrl(): URL {
    return this.source.baseUrl;
  }

  get sourceDescriptionUrl(): string {
    return this.source.sourceDescriptionUrl;
  }

  #serial<T>(fn: () => Promise<T>): Promise<T> {
    const p = this.#queue.then(fn, fn);
    this.#queue = p.catch(() => undefined);
    return p;
  }

  /**
   * Records a scan's changes. The record cache then holds the records just written (the files a Destination
   * reading the Change Lists asks for next), unless another write went through the Source meanwhile (a
   * notification other than this write's own: then it is only cleared, as by every write).
   */
  #record = async (changes: ChangeInput[], log: boolean): Promise<void> => {
    // Records of other resources stay: a scan's later batches (its silent one, e.g. racy files hashed again,
    // follows the logged ones) keep what the earlier ones wrote. Scans and records run one at a time (#serial).
    const token = this.#records.writing(changes);
    try {
      await this.source.record(changes, log, this);
    } catch (e) {
      this.#records.invalidate();
      throw e;
    }
    // Cleared instead when another write went through the Source meanwhile (its notification invalidated).
    this.#records.written(changes, token);
  };

  scan(): Promise<ScanStats> {
    return this.#serial(async () => {
      const baseline = (await this.store.getMeta('baseline_done')) === undefined;
      this.#warnings.beginScan();
      const stats = await scanTree(this.#ctx, this.#record, { log: !baseline });
      this.#warnings.endScan();
      if (baseline) await this.store.setMeta('baseline_done', String(Date.now()));
      return { ...stats, baseline };
    });
  }

  scanPaths(relPaths: readonly string[]): Promise<ScanStats> {
    return this.#serial(() => scanPaths(this.#ctx, relPaths, this.#record));
  }

  async watch(): Promise<void> {
    if (this.#watcher !== undefined || this.#closed) return;
    this.#watcher = await startWatching({
      root: this.root,
      exclude: this.#ctx.exclude,
      debounceMs: this.#options.debounceMs ?? 100,
      rescanIntervalMs: this.#options.rescanIntervalMs ?? 60_000,
      onPaths: (rels) => this.scanPaths(rels).then(() => undefined),
      onRescan: () => this.scan().then(() => undefined),
      // The watcher's own troubles are said each time.
      onWarning: this.#warnings.onWarning,
    });
  }

  async unwatch(): Promise<void> {
    const w = this.#watcher;
    this.#watcher = undefined;
    await w?.close();
  }

  async settled(): Promise<void> {
    await this.#watcher?.settled();
    await this.#queue;
  }

  document(pathname: string): Promise<SiteFile | undefined> {
    return this.source.document(pathname);
  }

  /**
   * A collection file for a request pathname, or undefined (outside the collection, hidden, traversal,
   * symlink leaving the tree, unknown). A file that changed since it was recorded is re-hashed and recorded
   * first, so the ETag (sha-256) and length always describe what is on disk at that moment. A small file
   * comes with its bytes ({@link SiteFile.data}), read from the descriptor that was checked.
   *
   * Memory: the bytes of one small file (at most 64 KiB) per call, plus the shared record cache (4,096
   * inventory records at most).
   */
  async resource(pathname: string): Promise<SiteFile | undefined> {
    const rel = requestRelativePath(this.baseUrl, pathname);
    if (rel === undefined || this.#ctx.setOf(rel) === undefined) return undefined;
    const abs = join(this.root, rel);
    const checked = await this.#openChecked(rel, abs);
    if (checked !== undefined) return checked;
    // Fast path (no realpath): a regular file, not a symlink, in the root directory itself (which is real).
    // Anything else takes the checks below.
    if (!rel.includes('/')) {
      const lst = await lstat(abs, { bigint: true }).catch(() => undefined);
      if (lst?.isFile() === true && isSafeRelativePath(rel) && !this.#ctx.exclude.some((x) => abs === x))
        return this.#resourceFile(rel, abs, lst);
    }
    let real: string;
    try {
      real = await realpath(abs);
    } catch {
      const known = await this.store.getResource(rel);
      if (known !== undefined) await this.scanPaths([rel]);
      return undefined;
    }
    if (!(real === this.root || real.startsWith(`${this.root}/`))) return undefined;
    // Like the scan, a request follows no symlinked directory (no alias paths, no loops recorded on demand),
    // and no link to a hidden file: the parent must be the real directory, the target a safe path.
    const parentReal = await realpath(dirname(abs)).catch(() => undefined);
    if (parentReal !== join(this.root, dirname(rel))) return undefined;
    if (!isSafeRelativePath(real.slice(this.root.length + 1))) return undefined;
    if (this.#ctx.exclude.some((x) => real === x || real.startsWith(`${x}/`))) return undefined;
    const st = await stat(real, { bigint: true }).catch(() => undefined);
    if (st === undefined || !st.isFile()) return undefined;
    return this.#resourceFile(rel, real, st);
  }

  /**
   * The common case in a few synchronous system calls (and a record, mostly cached), no realpath: opens `abs`
   * without following a final symlink (and without blocking on a FIFO), then asks the kernel for the path of
   * what it opened (`/proc/self/fd/N`). When that is exactly `abs` (the root is real and `rel` has no dot segments), no symlink
   * was followed anywhere on the way and the file is the collection file `rel`: the same answer the realpath
   * checks give, decided on the very descriptor that is read, so a symlink created later is never followed (it
   * fails the open or the path comparison, and the realpath checks then refuse it). The identity (size, mtime,
   * inode) comes from the same descriptor and must match the inventory. A small file is read whole from that
   * descriptor ({@link SiteFile.data}). Undefined means "not decided here" (a symlink, a file that changed since
   * it was recorded, no `/proc`, any error): the caller runs the full checks.
   */
  async #openChecked(rel: string, abs: string): Promise<SiteFile | undefined> {
    if (!this.#procFd) return undefined;
    let fd: number;
    try {
      fd = openSync(abs, OPEN_CHECKED_FLAGS);
    } catch {
      return undefined;
    }
    try {
      const st = fstatSync(fd, { bigint: true });
      if (!st.isFile()) return undefined;
      let opened: string;
      try {
        opened = readlinkSync(`/proc/self/fd/${fd}`);
      } catch (e) {
        // Not Linux (or /proc not mounted): always take the realpath checks.
        if ((e as NodeJS.ErrnoException).code === 'ENOENT') this.#procFd = false;
        return undefined;
      }
      if (opened !== abs) return undefined;
      if (this.#ctx.exclude.some((x) => abs === x || abs.startsWith(`${x}/`))) return undefined;
      const rec = await this.#records.get(rel);
      if (rec === undefined || !sameFileState(rec.fileId, st)) return undefined;
      let data: Buffer | undefined;
      if (rec.length <= SMALL_FILE_BYTES) {
        data = Buffer.allocUnsafe(rec.length);
        let at = 0;
        while (at < rec.length) {
          const n = readSync(fd, data, at, rec.length - at, at);
          if (n === 0) return undefined; // shrank since the fstat: the full path looks again
          at += n;
        }
      }
      return siteFileOf(rec, abs, data);
    } catch {
      return undefined;
    } finally {
      closeSync(fd);
    }
  }

  /** The {@link SiteFile} of a checked collection file, recorded first when it changed since the inventory. */
  async #resourceFile(rel: string, real: string, st: BigIntStats): Promise<SiteFile | undefined> {
    let rec = await this.store.getResource(rel);
    if (rec === undefined || !sameFileState(rec.fileId, st)) {
      await this.scanPaths([rel]);
      rec = await this.store.getResource(rel);
      if (rec === undefined) return undefined;
    }
    return siteFileOf(rec, real, undefined);
  }

  capabilityListUrl(pathname: string): string | undefined {
    const rel = requestRelativePath(this.baseUrl, pathname);
    if (rel === undefined) return undefined;
    const set = this.#ctx.setOf(rel);
    return set === undefined ? undefined : this.source.capabilityListUrl(set);
  }

  robotsTxt(): Promise<string> {
    return this.source.robotsTxt();
  }

  onChange(listener: (changes: readonly RecordedChange[]) => void): () => void {
    return this.source.onChange(listener);
  }

  onDocuments(listener: (events: readonly DocumentEvent[]) => void): () => void {
    return this.source.onDocuments(listener);
  }

  async stats(): Promise<{ resources: number; seq: number; sets: string[] }> {
    const head = await this.store.head();
    return { resources: await this.store.countResources(), seq: head.seq, sets: this.source.setNames() };
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#unsubscribe();
    // A scan in progress stops at the next file; what it recorded stays (the next start-up scan resumes).
    this.#stop.abort();
    await this.unwatch();
    await this.#queue;
    try {
      await this.source.close();
      await this.store.close();
    } finally {
      this.#lock.release();
    }
    // Lookups now reach the closed store (RS_STORE), not records cached from before.
    this.#records.invalidate();
  }
}
