/**
 * Change detection for a directory tree: walk it in the store's key order, merge it with the stored inventory
 * (size + mtime + inode quick check, then md5 + sha-256 in one read), and produce `created` / `updated` /
 * `deleted` changes (a rename is a delete plus a create, as the standard models it, §12.1).
 *
 * Never fatal on one file: unreadable files, files vanishing mid-scan, FIFOs and symlinks leaving the tree are
 * reported through `onWarning` and skipped (an unreadable file or directory keeps its inventory entry).
 *
 * @module
 */
import type { BigIntStats, Dirent } from 'node:fs';
import * as fs from 'node:fs';
import { lstat, readdir, realpath, stat } from 'node:fs/promises';
import { join, sep } from 'node:path';
import { promisify } from 'node:util';
import mime from 'mime-types';
import type { HashAlgorithm } from '../core/constants.js';
import { ResourceSyncError } from '../core/errors.js';
import type { Hashes } from '../core/hash.js';
import { createMultiHasher } from '../io/hashing.js';
import type { BlobStore, BlobWriter } from './blobs.js';
import type { ChangeInput, ResourceRecord, SourceStore } from './store.js';

/** The algorithms computed for every file (§4.1.1). */
export const SCAN_ALGORITHMS: readonly HashAlgorithm[] = ['md5', 'sha-256'];

/** Everything a scan needs. */
export interface ScanContext {
  /** Absolute real path of the collection root. */
  readonly root: string;
  readonly store: SourceStore;
  /** Set of a relative path; undefined excludes the file from the collection. */
  readonly setOf: (relPath: string) => string | undefined;
  /** Absolute real paths (directories) never walked: the state dir, an output dir inside the tree. */
  readonly exclude: readonly string[];
  readonly onWarning: (message: string) => void;
  /** Copy each new version into the blob store (for Change Dumps). */
  readonly blobs?: BlobStore;
  /** Read size (default 1 MiB). */
  readonly bufferSize?: number;
  /** Files hashed at once (default 8). */
  readonly concurrency?: number;
  /** Observer called after each read of a file being hashed (progress; tests change a file mid-read with it). */
  readonly onRead?: (abs: string, attempt: number, bytesSoFar: number) => Promise<void> | void;
  /** Called every 1,000 files walked with the count so far (progress display). */
  readonly onProgress?: (files: number) => void;
  /** Stops a scan between files (`RS_ABORTED`); what was recorded so far stays recorded. */
  readonly signal?: AbortSignal;
}

/** Figures of a scan. */
export interface ScanStats {
  files: number;
  hashed: number;
  bytesHashed: number;
  created: number;
  updated: number;
  deleted: number;
  skipped: number;
  /** True for the first scan of a new store: an inventory only, no change recorded. */
  baseline?: boolean;
}

/** A sink for the changes a scan finds, in key order; `log: false` is an inventory-only update. */
export type RecordBatch = (changes: ChangeInput[], log: boolean) => Promise<void>;

/** Identity of a file's current state, for the quick check. */
export function fileIdOf(st: BigIntStats): string {
  return `${st.size}:${st.mtimeNs}:${st.ino}`;
}

/** A file modified this recently may change again within the same mtime tick (a few ms) unseen. */
const RACY_MS = 3000;

/**
 * The identity to store after hashing a file. A file modified less than {@link RACY_MS} ago is marked racy (as
 * git does): a second write within the same timestamp tick and of the same size would leave size, mtime and
 * inode unchanged, so the next scan re-hashes it instead of trusting the quick check.
 */
export function storedFileId(st: BigIntStats, now = Date.now()): string {
  const id = fileIdOf(st);
  return now - Number(st.mtimeNs / 1_000_000n) < RACY_MS ? `${id}:racy` : id;
}

/** True when a stored identity describes this state (a racy mark ignored): for reading, not for change detection. */
export function sameFileState(stored: string | undefined, st: BigIntStats): boolean {
  if (stored === undefined) return false;
  const id = fileIdOf(st);
  return stored === id || stored === `${id}:racy`;
}

/** Media type of a path from the mime-types database (`application/octet-stream` when unknown). */
export function mediaTypeOf(relPath: string): string {
  return mime.lookup(relPath) || 'application/octet-stream';
}

/** Binary (UTF-8 byte) order, the order of SQLite's BINARY collation. */
export function compareKeys(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

type WalkItem =
  | { readonly kind: 'file'; readonly rel: string; readonly abs: string; readonly stat: BigIntStats }
  /** A path whose inventory entries (itself and anything under it) are kept as they are. */
  | { readonly kind: 'keep'; readonly rel: string };

function isInside(root: string, p: string): boolean {
  return p === root || p.startsWith(root.endsWith(sep) ? root : root + sep);
}

/**
 * Walks `root/relDir` depth first, yielding files in binary order of their relative path (siblings sorted by
 * name, with `/` appended to directory names, which is the order of the full paths). Hidden entries and
 * excluded directories are skipped. Memory: the entries of the directories on the current path.
 */
async function* walk(ctx: ScanContext, relDir: string): AsyncGenerator<WalkItem, void, undefined> {
  const absDir = relDir === '' ? ctx.root : join(ctx.root, relDir);
  let dirents: Dirent[];
  try {
    dirents = await readdir(absDir, { withFileTypes: true });
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return; // vanished: its files are deleted
    ctx.onWarning(`cannot read directory ${absDir}: ${(e as Error).message}; its files are kept as they were`);
    yield { kind: 'keep', rel: relDir };
    return;
  }
  const items: { key: Buffer; name: string; dir: boolean; dirent: Dirent; target?: BigIntStats }[] = [];
  for (const d of dirents) {
    const name = d.name;
    if (name.startsWith('.')) continue;
    if (name.includes('\uFFFD')) {
      ctx.onWarning(`skipped ${join(absDir, name)}: its name is not valid UTF-8`);
      continue;
    }
    const abs = join(absDir, name);
    let isDir = d.isDirectory();
    let target: BigIntStats | undefined;
    if (d.isSymbolicLink()) {
      let real: string;
      try {
        real = await realpath(abs);
        target = await stat(real, { bigint: true });
      } catch (e) {
        ctx.onWarning(`skipped ${abs}: broken symbolic link (${(e as NodeJS.ErrnoException).code ?? 'error'})`);
        continue;
      }
      if (!isInside(ctx.root, real)) {
        ctx.onWarning(`refused ${abs}: symbolic link leaving the collection (to ${real})`);
        continue;
      }
      if (hasHiddenSegment(ctx.root, real)) {
        ctx.onWarning(`refused ${abs}: symbolic link to a hidden file or folder (to ${real})`);
        continue;
      }
      if (target.isDirectory()) {
        ctx.onWarning(`skipped ${abs}: symbolic link to a directory (not followed)`);
        continue;
      }
      isDir = false;
    }
    if (isDir && ctx.exclude.includes(abs)) continue;
    if (!isDir && !d.isFile() && !d.isSymbolicLink()) {
      ctx.onWarning(`skipped ${abs}: not a regular file`);
      continue;
    }
    if (target !== undefined && !target.isFile()) {
      ctx.onWarning(`skipped ${abs}: symbolic link to something that is not a regular file`);
      continue;
    }
    const item: { key: Buffer; name: string; dir: boolean; dirent: Dirent; target?: BigIntStats } = {
      key: Buffer.from(isDir ? `${name}/` : name, 'utf8'),
      name,
      dir: isDir,
      dirent: d,
    };
    if (target !== undefined) item.target = target;
    items.push(item);
  }
  items.sort((a, b) => Buffer.compare(a.key, b.key));
  // The stats of the next files are asked for ahead (a window of STAT_AHEAD), so the thread pool works on
  // several at once while the results are used in order.
  const ahead = new Map<number, Promise<BigIntStats | Error>>();
  const prefetch = (k: number): void => {
    const it = items[k];
    if (it === undefined || it.dir || it.target !== undefined || ahead.has(k)) return;
    ahead.set(
      k,
      statBig(join(absDir, it.name)).catch((e: unknown) => e as Error),
    );
  };
  for (let i = 0; i < items.length; i++) {
    const it = items[i]!;
    for (let k = i; k < Math.min(items.length, i + STAT_AHEAD); k++) prefetch(k);
    const rel = relDir === '' ? it.name : `${relDir}/${it.name}`;
    const abs = join(absDir, it.name);
    if (it.dir) {
      if (ctx.exclude.includes(await realpath(abs).catch(() => abs))) continue;
      yield* walk(ctx, rel);
      continue;
    }
    let st = it.target;
    if (st === undefined) {
      const res = await ahead.get(i)!;
      ahead.delete(i);
      if (res instanceof Error) {
        const code = (res as NodeJS.ErrnoException).code;
        if (code === 'ENOENT') continue; // vanished between readdir and stat
        ctx.onWarning(`cannot stat ${abs}: ${res.message}; kept as it was`);
        yield { kind: 'keep', rel };
        continue;
      }
      st = res;
      if (!st.isFile()) {
        ctx.onWarning(`skipped ${abs}: not a regular file`);
        continue;
      }
    }
    yield { kind: 'file', rel, abs, stat: st };
  }
}

/** Result of reading a file for its hashes. */
export type ReadResult =
  | { readonly ok: true; readonly hashes: Hashes; readonly length: number; readonly stat: BigIntStats }
  | { readonly ok: false; readonly reason: 'vanished' | 'unreadable' | 'unstable'; readonly message: string };

const openFd = promisify(fs.open);
const readFd = (fd: number, buffer: Buffer): Promise<number> =>
  new Promise((resolve, reject) =>
    fs.read(fd, buffer, 0, buffer.byteLength, null, (err, n) => (err === null ? resolve(n) : reject(err))),
  );
const closeFd = promisify(fs.close);
const fstatFd = (fd: number): Promise<BigIntStats> =>
  new Promise((resolve, reject) =>
    fs.fstat(fd, { bigint: true }, (err, st) => (err === null ? resolve(st) : reject(err))),
  );
const statBig = (path: string): Promise<BigIntStats> =>
  new Promise((resolve, reject) =>
    fs.stat(path, { bigint: true }, (err, st) => (err === null ? resolve(st) : reject(err))),
  );
/** Stats asked for ahead of use while walking a directory. */
const STAT_AHEAD = 32;
/** O_NONBLOCK: a file swapped for a FIFO between the stat and the open must not block the scan. */
const OPEN_FLAGS = fs.constants.O_RDONLY | fs.constants.O_NONBLOCK;

function sameState(a: BigIntStats, b: BigIntStats): boolean {
  return a.size === b.size && a.mtimeNs === b.mtimeNs && a.ino === b.ino && a.dev === b.dev;
}

/** Files up to this size are read with synchronous calls (see {@link readSmallFileSync}). */
const SYNC_READ_MAX = 64n * 1024n;

/**
 * The small-file path of {@link readFileStable}: open, read, fstat, close as synchronous calls. For a file of a
 * few KB the four round trips through the libuv thread pool cost several times the I/O itself; synchronous
 * calls on a small regular file block the event loop for microseconds. Same checks as the asynchronous path;
 * undefined when the file is larger than expected (the caller falls back to the asynchronous path).
 */
function readSmallFileSync(
  abs: string,
  buffer: Buffer,
  expectIn: BigIntStats,
  attempts: number,
): (ReadResult & { blob?: BlobWriter }) | undefined {
  let expect = expectIn;
  for (let attempt = 0; attempt < attempts; attempt++) {
    let fd: number | undefined;
    try {
      fd = fs.openSync(abs, OPEN_FLAGS);
      const want = Number(expect.size) + 1;
      if (want > buffer.byteLength) return undefined;
      let n = 0;
      for (;;) {
        const got = fs.readSync(fd, buffer, n, buffer.byteLength - n, null);
        if (got === 0) break;
        n += got;
        if (n >= want || n === buffer.byteLength) break;
      }
      const after = fs.fstatSync(fd, { bigint: true });
      if (after.nlink === 0n) return { ok: false, reason: 'vanished', message: `${abs} vanished while it was read` };
      if (after.isFile() && sameState(after, expect) && BigInt(n) === after.size) {
        const h = createMultiHasher(SCAN_ALGORITHMS);
        h.update(buffer.subarray(0, n));
        return { ok: true, hashes: h.digest(), length: n, stat: after };
      }
      if (after.size > SYNC_READ_MAX) return undefined;
      expect = after;
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') return { ok: false, reason: 'vanished', message: `${abs} vanished while it was read` };
      return { ok: false, reason: 'unreadable', message: `cannot read ${abs}: ${(e as Error).message}` };
    } finally {
      if (fd !== undefined) fs.closeSync(fd);
    }
  }
  return {
    ok: false,
    reason: 'unstable',
    message: `${abs} changed while it was read ${attempts} times; skipped until it settles`,
  };
}

/**
 * Hashes a file (md5 + sha-256 in one read pass with a large buffer), checking it did not change while being
 * read: the state after the read (size, mtime, inode, via fstat) must be the state expected before it (`expect`,
 * e.g. the walk's stat), the byte count must match, and the file must still be linked (a file deleted or
 * replaced by a rename meanwhile has no link left). Retried up to `attempts` times. Four system calls for a
 * small file (open, read, fstat, close), through the callback API, which is markedly cheaper per call than
 * FileHandle. With `blobs`, the bytes are copied there too (the caller commits or discards the copy).
 * Memory: `buffer`.
 */
export async function readFileStable(
  abs: string,
  buffer: Buffer,
  options: {
    readonly attempts?: number;
    readonly blobs?: BlobStore;
    readonly expect?: BigIntStats;
    readonly onRead?: (abs: string, attempt: number, bytesSoFar: number) => Promise<void> | void;
  } = {},
): Promise<ReadResult & { blob?: BlobWriter }> {
  const attempts = options.attempts ?? 3;
  let expect = options.expect;
  if (
    expect !== undefined &&
    expect.size <= SYNC_READ_MAX &&
    options.blobs?.enabled !== true &&
    options.onRead === undefined
  ) {
    const r = readSmallFileSync(abs, buffer, expect, attempts);
    if (r !== undefined) return r;
  }
  let lastMessage = '';
  for (let attempt = 0; attempt < attempts; attempt++) {
    let fd: number | undefined;
    let blob: BlobWriter | undefined;
    try {
      fd = await openFd(abs, OPEN_FLAGS);
      if (expect === undefined) expect = await fstatFd(fd);
      if (!expect.isFile()) return { ok: false, reason: 'unreadable', message: `${abs} is not a regular file` };
      blob = options.blobs?.enabled === true ? await options.blobs.create() : undefined;
      const h = createMultiHasher(SCAN_ALGORITHMS);
      const expected = Number(expect.size);
      for (;;) {
        const bytesRead = await readFd(fd, buffer);
        if (bytesRead === 0) break;
        const chunk = buffer.subarray(0, bytesRead);
        h.update(chunk);
        if (blob !== undefined) await blob.write(chunk);
        await options.onRead?.(abs, attempt, h.length);
        // A short read that reaches the size expected is the end of the file; a file that grew meanwhile is
        // caught by the fstat below. Saves one read call per small file.
        if (bytesRead < buffer.byteLength && h.length >= expected) break;
      }
      const after = await fstatFd(fd);
      if (after.nlink === 0n) {
        await blob?.discard();
        return { ok: false, reason: 'vanished', message: `${abs} vanished while it was read` };
      }
      if (after.isFile() && sameState(after, expect) && BigInt(h.length) === after.size) {
        const out: ReadResult & { blob?: BlobWriter } = { ok: true, hashes: h.digest(), length: h.length, stat: after };
        if (blob !== undefined) out.blob = blob;
        return out;
      }
      await blob?.discard();
      lastMessage = `${abs} changed while it was read`;
      expect = after;
    } catch (e) {
      await blob?.discard();
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') return { ok: false, reason: 'vanished', message: `${abs} vanished while it was read` };
      return { ok: false, reason: 'unreadable', message: `cannot read ${abs}: ${(e as Error).message}` };
    } finally {
      if (fd !== undefined) await closeFd(fd).catch(() => undefined);
    }
  }
  return { ok: false, reason: 'unstable', message: `${lastMessage} ${attempts} times; skipped until it settles` };
}

function sameContent(a: Hashes, b: Hashes): boolean {
  return a['sha-256'] !== undefined ? a['sha-256'] === b['sha-256'] : a.md5 !== undefined && a.md5 === b.md5;
}

/**
 * Scans `relDir` ('' for the whole tree) against the inventory and hands the changes to `record` in key order,
 * in batches of `batchSize` (each batch is one store transaction). Memory: the batch, the hashing buffers
 * (`concurrency` × `bufferSize`) and one page of the inventory.
 */
/** Changes a scan records per batch (per call of its `record`), unless told otherwise. */
export const SCAN_BATCH_SIZE = 2000;

export async function scanTree(
  ctx: ScanContext,
  record: RecordBatch,
  options: { readonly relDir?: string; readonly log?: boolean; readonly batchSize?: number } = {},
): Promise<ScanStats> {
  const relDir = options.relDir ?? '';
  const log = options.log ?? true;
  const batchSize = options.batchSize ?? SCAN_BATCH_SIZE;
  const stats: ScanStats = { files: 0, hashed: 0, bytesHashed: 0, created: 0, updated: 0, deleted: 0, skipped: 0 };
  const prefix = relDir === '' ? '' : `${relDir}/`;
  const inventory = ctx.store.resources(prefix === '' ? {} : { after: prefix });
  const nextInv = async (): Promise<ResourceRecord | undefined> => {
    const r = await inventory.next();
    if (r.done === true) return undefined;
    if (prefix !== '' && !r.value.uri.startsWith(prefix)) {
      await inventory.return(undefined);
      return undefined;
    }
    return r.value;
  };
  const concurrency = ctx.concurrency ?? 8;
  const bufferSize = ctx.bufferSize ?? 1 << 20;
  const freeBuffers: Buffer[] = [];
  const changes: ChangeInput[] = [];
  const silent: ChangeInput[] = [];
  const flush = async (force: boolean): Promise<void> => {
    if (changes.length > 0 && (force || changes.length >= batchSize)) await record(changes.splice(0), log);
    if (silent.length > 0 && (force || silent.length >= batchSize)) await record(silent.splice(0), false);
  };
  type Pending = Promise<() => Promise<void>>;
  const queue: Pending[] = [];
  const drain = async (limit: number): Promise<void> => {
    while (queue.length > limit) {
      const apply = await queue.shift()!;
      await apply();
      await flush(false);
    }
  };
  const push = async (p: Pending): Promise<void> => {
    queue.push(p);
    await drain(concurrency);
  };
  const deleted = (r: ResourceRecord): Pending =>
    Promise.resolve(async () => {
      changes.push({ uri: r.uri, change: 'deleted', setName: r.setName });
      stats.deleted++;
    });
  const hashTask = (file: { rel: string; abs: string; stat: BigIntStats }, setName: string, old?: ResourceRecord) =>
    (async (): Promise<() => Promise<void>> => {
      const buffer = freeBuffers.pop() ?? Buffer.allocUnsafe(bufferSize);
      const opts: { blobs?: BlobStore; onRead?: NonNullable<ScanContext['onRead']>; expect: BigIntStats } = {
        expect: file.stat,
      };
      if (ctx.blobs !== undefined && log) opts.blobs = ctx.blobs;
      if (ctx.onRead !== undefined) opts.onRead = ctx.onRead;
      const res = await readFileStable(file.abs, buffer, opts).finally(() => freeBuffers.push(buffer));
      return async () => {
        stats.hashed++;
        if (!res.ok) {
          ctx.onWarning(res.message);
          stats.skipped++;
          // A vanished file is gone: a known one is deleted. Unreadable/unstable ones keep their entry.
          if (res.reason === 'vanished' && old !== undefined) {
            changes.push({ uri: old.uri, change: 'deleted', setName: old.setName });
            stats.deleted++;
          }
          return;
        }
        stats.bytesHashed += res.length;
        const input: ChangeInput = {
          uri: file.rel,
          change: old === undefined ? 'created' : 'updated',
          setName,
          length: res.length,
          type: mediaTypeOf(file.rel),
          hashes: res.hashes,
          lastmodMs: Number(res.stat.mtimeNs / 1_000_000n),
          fileId: storedFileId(res.stat),
        };
        if (old !== undefined && sameContent(old.hashes, res.hashes) && old.setName === setName) {
          await res.blob?.discard();
          silent.push(input); // touched, same bytes: refresh the identity only
          return;
        }
        const sha = res.hashes['sha-256'];
        if (res.blob !== undefined) {
          if (sha !== undefined) await res.blob.commit(sha);
          else await res.blob.discard();
        }
        changes.push(input);
        if (old === undefined) stats.created++;
        else stats.updated++;
      };
    })();

  let cur = await nextInv();
  try {
    for await (const item of walk(ctx, relDir)) {
      if (ctx.signal?.aborted === true) throw new ResourceSyncError('RS_ABORTED', `scan of ${ctx.root} stopped`);
      while (cur !== undefined && compareKeys(cur.uri, item.rel) < 0) {
        await push(deleted(cur));
        cur = await nextInv();
      }
      if (item.kind === 'keep') {
        const keepPrefix = `${item.rel}/`;
        while (cur !== undefined && (cur.uri === item.rel || cur.uri.startsWith(keepPrefix))) cur = await nextInv();
        continue;
      }
      stats.files++;
      if (stats.files % 1000 === 0) ctx.onProgress?.(stats.files);
      const setName = ctx.setOf(item.rel);
      const old = cur !== undefined && cur.uri === item.rel ? cur : undefined;
      if (old !== undefined) cur = await nextInv();
      if (setName === undefined) {
        if (old !== undefined) await push(deleted(old));
        continue;
      }
      if (old !== undefined && old.fileId === fileIdOf(item.stat) && old.setName === setName) continue;
      await push(hashTask(item, setName, old));
    }
    while (cur !== undefined) {
      await push(deleted(cur));
      cur = await nextInv();
    }
    await drain(0);
    await flush(true);
  } finally {
    await inventory.return(undefined);
    // Let in-flight reads finish so no file handle outlives the scan.
    await Promise.allSettled(queue);
  }
  return stats;
}

/**
 * Re-checks single paths (from a watcher, or before serving a file): a file is compared with its inventory
 * entry, a directory is scanned as a subtree, a missing path deletes its entry and anything under it.
 */
export async function scanPaths(ctx: ScanContext, rels: readonly string[], record: RecordBatch): Promise<ScanStats> {
  const total: ScanStats = { files: 0, hashed: 0, bytesHashed: 0, created: 0, updated: 0, deleted: 0, skipped: 0 };
  const add = (stats: ScanStats): void => {
    for (const k of ['files', 'hashed', 'bytesHashed', 'created', 'updated', 'deleted', 'skipped'] as const)
      total[k] += stats[k];
  };
  // Paths are handled in the order given (the order they settled), so the log follows the order of events.
  const logged: ChangeInput[] = [];
  const silent: ChangeInput[] = [];
  const flush = async (): Promise<void> => {
    if (logged.length > 0) await record(logged.splice(0), true);
    if (silent.length > 0) await record(silent.splice(0), false);
  };
  const collect: RecordBatch = async (changes, log) => {
    (log ? logged : silent).push(...changes);
  };
  for (const rel of new Set(rels)) {
    const st = await lstat(join(ctx.root, rel)).catch(() => undefined);
    if (st?.isDirectory() === true) {
      await flush();
      add(await scanTree(ctx, record, { relDir: rel }));
    } else {
      add(await scanOne(ctx, rel, collect));
    }
  }
  await flush();
  return total;
}

/** One path that is not a directory (or is gone): itself, plus any entries under it (a directory that vanished). */
async function scanOne(ctx: ScanContext, rel: string, record: RecordBatch): Promise<ScanStats> {
  const stats: ScanStats = { files: 0, hashed: 0, bytesHashed: 0, created: 0, updated: 0, deleted: 0, skipped: 0 };
  const changes: ChangeInput[] = [];
  const old = await ctx.store.getResource(rel);
  // Entries under `rel/` (when a directory was replaced by a file or removed).
  for await (const r of ctx.store.resources({ after: `${rel}/`, pageSize: 16 })) {
    if (!r.uri.startsWith(`${rel}/`)) break;
    changes.push({ uri: r.uri, change: 'deleted', setName: r.setName });
    stats.deleted++;
  }
  const abs = join(ctx.root, rel);
  const hidden = rel.split('/').some((s) => s.startsWith('.'));
  let st: BigIntStats | undefined;
  let excluded = hidden;
  try {
    const real = await realpath(abs);
    if (!isInside(ctx.root, real) || hasHiddenSegment(ctx.root, real) || ctx.exclude.some((x) => isInside(x, real)))
      excluded = true;
    st = await stat(real, { bigint: true });
  } catch {
    st = undefined;
  }
  const setName = ctx.setOf(rel);
  if (st === undefined || !st.isFile() || excluded || setName === undefined) {
    if (old !== undefined) {
      changes.push({ uri: rel, change: 'deleted', setName: old.setName });
      stats.deleted++;
    }
  } else if (old === undefined || old.fileId !== fileIdOf(st) || old.setName !== setName) {
    stats.files++;
    stats.hashed++;
    const opts: { blobs?: BlobStore; onRead?: NonNullable<ScanContext['onRead']>; expect: BigIntStats } = {
      expect: st,
    };
    if (ctx.blobs !== undefined) opts.blobs = ctx.blobs;
    if (ctx.onRead !== undefined) opts.onRead = ctx.onRead;
    const res = await readFileStable(
      abs,
      Buffer.allocUnsafe(Math.min(ctx.bufferSize ?? 1 << 20, Number(st.size) + 1)),
      opts,
    );
    if (!res.ok) {
      ctx.onWarning(res.message);
      stats.skipped++;
      if (res.reason === 'vanished' && old !== undefined) {
        changes.push({ uri: rel, change: 'deleted', setName: old.setName });
        stats.deleted++;
      }
    } else {
      stats.bytesHashed += res.length;
      const input: ChangeInput = {
        uri: rel,
        change: old === undefined ? 'created' : 'updated',
        setName,
        length: res.length,
        type: mediaTypeOf(rel),
        hashes: res.hashes,
        lastmodMs: Number(res.stat.mtimeNs / 1_000_000n),
        fileId: storedFileId(res.stat),
      };
      if (old !== undefined && sameContent(old.hashes, res.hashes) && old.setName === setName) {
        await res.blob?.discard();
        await record([input], false);
      } else {
        const sha = res.hashes['sha-256'];
        if (res.blob !== undefined) {
          if (sha !== undefined) await res.blob.commit(sha);
          else await res.blob.discard();
        }
        changes.push(input);
        if (old === undefined) stats.created++;
        else stats.updated++;
      }
    }
  } else {
    stats.files++;
  }
  if (changes.length > 0) await record(changes, true);
  return stats;
}

/** True when the real path of a file under `root` goes through a hidden (dot) file or folder. */
function hasHiddenSegment(root: string, real: string): boolean {
  return real
    .slice(root.length + 1)
    .split('/')
    .some((seg) => seg.startsWith('.'));
}
