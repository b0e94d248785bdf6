/**
 * Resource Dumps (§11) and Change Dumps (§13): ZIP packages (stored, without compression) with the dump
 * manifest as `manifest.xml`, the first entry of the package, and a copy of each manifest next to the package
 * for the `rs:ln rel="contents"` link of the dump document.
 *
 * Bitstreams are read by us (small ones whole with synchronous calls, big ones streamed with 1 MiB reads) and
 * handed as buffers to the stored-ZIP writer of `zip.ts`, or to yazl for packages past 4 GiB / 65,535 entries
 * (a ZIP writer opening each file itself is about ten times slower for small files). Memory: one package's
 * manifest (at most `maxFiles` entries) plus one bitstream (small) or one chunk (big); with yazl, at most
 * {@link ZIP_HIGH_WATER} bytes queued.
 *
 * @module
 */
import { type BigIntStats, closeSync, createReadStream, fstatSync, openSync, readSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { Readable } from 'node:stream';
import yazl from 'yazl';
import { DUMP_MANIFEST_NAME, XML_MEDIA_TYPE, ZIP_MEDIA_TYPE } from '../core/constants.js';
import { ResourceSyncError } from '../core/errors.js';
import { datetimeMs, formatDatetime } from '../core/datetime.js';
import { createHeader, type Entry, type Link, type Metadata } from '../core/model.js';
import { writeFileAtomic } from '../io/atomic.js';
import { writeDocument } from '../xml/writer.js';
import {
  changeEntry,
  type GenerationContext,
  removeFiles,
  resourceEntry,
  writeListOrIndex,
  type WrittenFiles,
} from './documents.js';
import { partName } from './layout.js';
import { STORED_ZIP_MAX_BYTES, STORED_ZIP_MAX_ENTRIES, writeStoredZip } from './zip.js';
import type { ChangeListPart, ChangeRecord, ResourceRecord, StoreSnapshot } from './store.js';

/** Bytes queued in the ZIP writer before we wait for it to drain. */
export const ZIP_HIGH_WATER = 32 << 20;
/** Size of the writes of a package to disk. */
const WRITE_SIZE = 1 << 20;
/** Files up to this size are read whole into one buffer; larger ones are streamed. */
export const WHOLE_READ_MAX = 16 << 20;

/** Bytes of one bitstream: a buffer, or a stream of exactly `length` bytes. */
export type Content =
  | { readonly data: Uint8Array }
  | { readonly stream: () => AsyncIterable<Uint8Array>; readonly length: number };

/**
 * Where bitstreams come from. `current`: a resource as the inventory holds it (Resource Dump), `'stale'` when
 * the bytes at hand no longer match the inventory. `hasVersion` / `version`: the bytes of a recorded change
 * (Change Dump), false / undefined when no copy was kept.
 */
export interface ContentProvider {
  /** Whether the bytes of a resource can be had at all (checked before a package's manifest is written). */
  hasCurrent(r: ResourceRecord): Promise<boolean>;
  current(r: ResourceRecord): Promise<Content | 'stale' | undefined>;
  hasVersion(c: ChangeRecord): Promise<boolean>;
  version(c: ChangeRecord): Promise<Content | undefined>;
}

/** Limits of dump packages. */
export interface DumpLimits {
  /** Bytes of bitstreams per package (default 256 MiB). */
  readonly maxBytes: number;
  /** Bitstreams per package (default and maximum: the document entry limit). */
  readonly maxFiles: number;
}

/** Thrown (internally) when a bitstream changed since it was recorded: the dump is rebuilt after a rescan. */
export class StaleContentError extends ResourceSyncError {
  readonly uri: string;
  constructor(uri: string) {
    super('RS_IO', `${uri} changed since it was recorded`);
    this.uri = uri;
  }
}

interface ZipItem {
  readonly name: string;
  readonly mtime: Date;
  readonly content: Content;
}

/**
 * Writes a ZIP package atomically from items, in order, with yazl (ZIP64 when needed: packages past 4 GiB or
 * 65,535 entries; {@link writePackage} uses the faster stored writer otherwise). Memory: {@link ZIP_HIGH_WATER}
 * plus one item.
 * @returns the package size in bytes.
 */
export async function writeZip(
  path: string,
  items: AsyncIterable<ZipItem>,
  options: { readonly fsync?: boolean } = {},
): Promise<number> {
  const zip = new yazl.ZipFile();
  let added = 0;
  let emitted = 0;
  let failed: unknown;
  let feedError: unknown;
  let wake: (() => void) | undefined;
  const output = zip.outputStream as unknown as AsyncIterable<Buffer> & Readable;
  const abort = (e: unknown): void => {
    feedError ??= e;
    output.destroy();
  };
  zip.on('error', abort);
  // yazl emits many small chunks (headers, descriptors, each bitstream): coalesced into writes of about
  // WRITE_SIZE so a package of 10,000 small files is a few hundred write calls, not 30,000.
  const counted = (async function* () {
    let pending: Buffer[] = [];
    let pendingBytes = 0;
    try {
      for await (const chunk of output) {
        if (feedError !== undefined) throw feedError;
        emitted += chunk.length;
        wake?.();
        pending.push(chunk);
        pendingBytes += chunk.length;
        if (pendingBytes >= WRITE_SIZE) {
          yield pending.length === 1 ? pending[0]! : Buffer.concat(pending, pendingBytes);
          pending = [];
          pendingBytes = 0;
        }
      }
    } catch (e) {
      throw feedError ?? e;
    }
    if (feedError !== undefined) throw feedError;
    if (pendingBytes > 0) yield Buffer.concat(pending, pendingBytes);
  })();
  const writing = writeFileAtomic(path, counted, options.fsync === undefined ? {} : { fsync: options.fsync }).catch(
    (e: unknown) => {
      failed = e;
      wake?.();
      throw e;
    },
  );
  const feeding = (async () => {
    try {
      for await (const item of items) {
        if (failed !== undefined) break;
        const opts = { mtime: item.mtime, compress: false };
        if ('data' in item.content) {
          const data = item.content.data;
          zip.addBuffer(
            Buffer.isBuffer(data) ? data : Buffer.from(data.buffer, data.byteOffset, data.byteLength),
            item.name,
            opts,
          );
          added += data.byteLength;
        } else {
          const stream = Readable.from(item.content.stream());
          stream.on('error', abort);
          zip.addReadStream(stream, item.name, { ...opts, size: item.content.length });
          added += item.content.length;
        }
        while (failed === undefined && added - emitted > ZIP_HIGH_WATER) {
          await new Promise<void>((resolve) => {
            wake = resolve;
          });
          wake = undefined;
        }
      }
      zip.end();
    } catch (e) {
      abort(e);
      throw e;
    }
  })();
  const [bytes] = await Promise.all([writing, feeding]);
  return bytes;
}

/** Files up to this size are read with synchronous calls (four round trips through the thread pool cost more). */
const SYNC_READ_MAX = 256 << 10;

function smallFileContent(
  abs: string,
  expect: { readonly length: number; readonly fileId?: string },
  sameState?: (fileId: string, st: BigIntStats) => boolean,
): Content | 'stale' {
  let fd: number | undefined;
  try {
    fd = openSync(abs, 'r');
    const st = fstatSync(fd, { bigint: true });
    if (Number(st.size) !== expect.length) return 'stale';
    if (expect.fileId !== undefined && sameState !== undefined && !sameState(expect.fileId, st)) return 'stale';
    const buf = Buffer.allocUnsafe(expect.length);
    let off = 0;
    while (off < buf.length) {
      const n = readSync(fd, buf, off, buf.length - off, off);
      if (n === 0) return 'stale';
      off += n;
    }
    return { data: buf };
  } catch {
    return 'stale';
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** Bytes of ZIP headers per entry, name included, assumed when choosing a writer (names are at most ~1 KB). */
const ZIP_OVERHEAD_PER_ENTRY = 2200;

/**
 * Writes a package with the stored-ZIP writer (`zip.ts`, fast) when it fits its limits (4 GiB, 65,535
 * entries), else with yazl (ZIP64). `expected` is the entry count and bitstream bytes, known before writing.
 */
export async function writePackage(
  path: string,
  items: AsyncIterable<ZipItem>,
  options: { readonly fsync?: boolean },
  expected: { readonly entries: number; readonly bytes: number },
): Promise<number> {
  const estimate = expected.bytes + expected.entries * ZIP_OVERHEAD_PER_ENTRY + 1024;
  if (expected.entries <= STORED_ZIP_MAX_ENTRIES && estimate < STORED_ZIP_MAX_BYTES)
    return writeStoredZip(path, items, options);
  return writeZip(path, items, options);
}

/**
 * Reads a file whole (small: synchronous calls; up to {@link WHOLE_READ_MAX}: one buffer) or as a stream
 * (big), checking it is still the version the caller expects (`'stale'` otherwise).
 */
export async function fileContent(
  abs: string,
  expect: { readonly length: number; readonly fileId?: string },
  sameState?: (fileId: string, st: BigIntStats) => boolean,
): Promise<Content | 'stale' | undefined> {
  if (expect.length <= SYNC_READ_MAX) return smallFileContent(abs, expect, sameState);
  let fh: Awaited<ReturnType<typeof open>>;
  try {
    fh = await open(abs, 'r');
  } catch {
    return 'stale';
  }
  try {
    const st = await fh.stat({ bigint: true });
    if (Number(st.size) !== expect.length) return 'stale';
    if (expect.fileId !== undefined && sameState !== undefined && !sameState(expect.fileId, st)) return 'stale';
    if (expect.length <= WHOLE_READ_MAX) {
      const buf = Buffer.allocUnsafe(expect.length);
      let off = 0;
      while (off < buf.length) {
        const { bytesRead } = await fh.read(buf, off, buf.length - off, off);
        if (bytesRead === 0) return 'stale';
        off += bytesRead;
      }
      return { data: buf };
    }
  } finally {
    await fh.close();
  }
  return {
    length: expect.length,
    stream: () => createReadStream(abs, { highWaterMark: 1 << 20, start: 0, end: expect.length - 1 }),
  };
}

function manifestBytes(
  kind: 'resource-dump-manifest' | 'change-dump-manifest',
  md: Metadata,
  up: Link,
  entries: Entry[],
): Promise<Buffer> {
  return (async () => {
    const chunks: Uint8Array[] = [];
    for await (const c of writeDocument(createHeader(kind, md, [up]), entries)) chunks.push(c);
    return Buffer.concat(chunks);
  })();
}

/** Path of a resource inside a package: `/resources/<relative path>` (absolute URIs: host and path). */
function bitstreamPath(prefix: string, uri: string): string {
  let rel = uri;
  const m = /^https?:\/\/([^/]+)\/?(.*)$/i.exec(uri);
  if (m !== null) rel = `${m[1]}/${m[2]}`;
  const safe = rel
    .split('/')
    .filter((s) => s !== '' && s !== '.' && s !== '..')
    .join('/');
  return `/${prefix}/${safe === '' ? 'resource' : safe}`;
}

/** A package written by a dump. */
export interface DumpPackage {
  readonly file: string;
  readonly manifestFile: string;
  readonly length: number;
  readonly md: Metadata;
  readonly lastmod?: string;
}

function dumpEntry(ctx: GenerationContext, setName: string, p: DumpPackage): Entry {
  const e: Entry = {
    element: 'url',
    loc: ctx.layout.url(setName, p.file),
    md: { type: ZIP_MEDIA_TYPE, length: p.length, ...p.md },
    links: [{ rel: 'contents', href: ctx.layout.url(setName, p.manifestFile), type: XML_MEDIA_TYPE }],
  };
  if (p.lastmod !== undefined) e.lastmod = p.lastmod;
  return e;
}

/**
 * Writes a set's Resource Dump (§11): packages of at most `limits` each, named after the snapshot's seq, their
 * manifest copies, then the dump document (a Resource Dump Index past the entry limit).
 *
 * @throws StaleContentError when a file changed since the inventory was taken (rescan and retry).
 */
export async function writeResourceDump(
  ctx: GenerationContext,
  snap: StoreSnapshot,
  setName: string,
  content: ContentProvider,
  limits: DumpLimits,
  onMissing: (r: ResourceRecord) => void = () => undefined,
): Promise<{ files: WrittenFiles; packages: DumpPackage[] }> {
  const l = ctx.layout;
  const base = l.baseUrl;
  const at = formatDatetime(snap.atMs);
  const up: Link = { rel: 'up', href: l.capabilityListUrl(setName) };
  const files: string[] = [];
  const packages: DumpPackage[] = [];
  const maxFiles = Math.min(limits.maxFiles, ctx.limits.maxEntriesPerDocument);
  const version = await snap.setVersion(setName);
  const it = snap.resources(setName)[Symbol.asyncIterator]();
  let pending: ResourceRecord | undefined;
  let n = 0;
  try {
    for (;;) {
      const batch: ResourceRecord[] = [];
      let bytes = 0;
      for (;;) {
        const r = pending ?? (await it.next()).value;
        pending = undefined;
        if (r === undefined) break;
        if (!(await content.hasCurrent(r))) {
          onMissing(r);
          continue;
        }
        if (batch.length > 0 && (batch.length >= maxFiles || bytes + r.length > limits.maxBytes)) {
          pending = r;
          break;
        }
        batch.push(r);
        bytes += r.length;
      }
      if (batch.length === 0) break;
      n++;
      const stem = `resourcedump-v${version}-${partName(n)}`;
      const pkgAt = formatDatetime(Math.max(snap.atMs, Date.now()));
      const entries = batch.map((r) => resourceEntry(base, r, bitstreamPath('resources', r.uri)));
      const manifest = await manifestBytes('resource-dump-manifest', { at, completed: pkgAt }, up, entries);
      const manifestFile = `${stem}-manifest.xml`;
      const zipFile = `${stem}.zip`;
      const items = (async function* (): AsyncGenerator<ZipItem> {
        yield { name: DUMP_MANIFEST_NAME, mtime: new Date(snap.atMs), content: { data: manifest } };
        for (const r of batch) {
          const c = await content.current(r);
          if (c === 'stale' || c === undefined) throw new StaleContentError(r.uri);
          yield { name: bitstreamPath('resources', r.uri).slice(1), mtime: new Date(r.lastmodMs), content: c };
        }
      })();
      const length = await writePackage(l.path(setName, zipFile), items, fsyncOpt(ctx), {
        entries: batch.length + 1,
        bytes: bytes + manifest.length,
      });
      await writeFileAtomic(l.path(setName, manifestFile), manifest, fsyncOpt(ctx));
      files.push(l.path(setName, zipFile), l.path(setName, manifestFile));
      packages.push({
        file: zipFile,
        manifestFile,
        length,
        md: { at, completed: formatDatetime(Math.max(snap.atMs, Date.now())) },
      });
    }
  } catch (e) {
    // Packages of this attempt are listed nowhere: remove them.
    await removeFiles(files);
    throw e;
  } finally {
    await it.return?.(undefined);
  }
  const completed = formatDatetime(Math.max(snap.atMs, Date.now()));
  const docs = await writeListOrIndex(ctx, {
    kind: 'resource-dump',
    indexKind: 'resource-dump-index',
    count: packages.length,
    entries: (async function* () {
      for (const p of packages) yield dumpEntry(ctx, setName, p);
    })(),
    md: { at, completed },
    setName,
    name: 'resourcedump',
  });
  return { files: [...files, ...docs], packages };
}

function fsyncOpt(ctx: GenerationContext): { fsync?: boolean } {
  return ctx.fsync === undefined ? {} : { fsync: ctx.fsync };
}

/** Default of {@link ChangeDumpLimits.minPackageChanges}. */
export const DEFAULT_MIN_PACKAGE_CHANGES = 1000;

/** Limits of Change Dump packages. */
export interface ChangeDumpLimits extends DumpLimits {
  /**
   * The last package of a Change List's packages, reused from an earlier generation, is rewritten together
   * with the changes that arrived since when it holds fewer changes than this (0 never rewrites; the Source
   * passes its `dumpMinPackageChanges`, default {@link DEFAULT_MIN_PACKAGE_CHANGES}). Keeps the number of packages bounded when changes
   * trickle in one at a time: with at least this many new changes between generations nothing already
   * published is rewritten; with fewer, a generation rewrites fewer than this many.
   */
  readonly minPackageChanges: number;
}

/** A Change Dump package with the changes it holds, so that a later generation can reuse it. */
export interface ChangeDumpPackage extends DumpPackage {
  /** Seq of the first and of the last change listed in the package's manifest. */
  readonly firstSeq: number;
  readonly lastSeq: number;
  /** Number of changes listed in the manifest. */
  readonly changes: number;
}

/** A Change Dump package already written for a closed Change List (kept across generations). */
export type ClosedDumpPackages = ReadonlyMap<number, readonly DumpPackage[]>;

/** Packages of earlier generations a Change Dump may reuse, by Change List number (their files exist). */
export interface KnownChangeDumpPackages {
  /** Packages of closed Change Lists: reused whole, never rewritten. */
  readonly closed: ClosedDumpPackages;
  /**
   * Packages written while their Change List was open, in order: reused as long as they still describe the
   * list's first changes (append-only), the last one rewritten when small (see
   * {@link ChangeDumpLimits.minPackageChanges}).
   */
  readonly open: ReadonlyMap<number, readonly ChangeDumpPackage[]>;
}

/** What {@link writeChangeDump} wrote and lists. */
export interface ChangeDumpResult {
  /** Files written by this generation (packages, manifest copies, the dump documents). */
  readonly files: WrittenFiles;
  /** Every package the Change Dump lists, reused or new, in order. */
  readonly packages: DumpPackage[];
  /** Packages of the closed Change Lists, by list number (to pass back as `known.closed`). */
  readonly closed: Map<number, DumpPackage[]>;
  /** Packages of the open Change List(s), by list number (to pass back as `known.open`). */
  readonly open: Map<number, ChangeDumpPackage[]>;
}

/** `until` of a package, in ms (undefined when absent or not a datetime: such a package is not reused). */
function untilMsOf(p: DumpPackage): number | undefined {
  const u = p.md.until;
  if (u === undefined) return undefined;
  try {
    return datetimeMs(u);
  } catch {
    return undefined;
  }
}

/**
 * The packages of a Change List (from an earlier generation, e.g. read back from a saved state) that can be
 * reused: the longest prefix that covers the list's changes in order (the first after `partAfter`, each after
 * the previous one, none past the list's last change), with a valid `until`.
 */
function reusablePrefix(
  pkgs: readonly ChangeDumpPackage[],
  partAfter: number,
  partLastSeq: number,
): ChangeDumpPackage[] {
  const out: ChangeDumpPackage[] = [];
  let prev = partAfter;
  for (const k of pkgs) {
    const ok =
      Number.isSafeInteger(k.firstSeq) &&
      Number.isSafeInteger(k.lastSeq) &&
      Number.isSafeInteger(k.changes) &&
      k.firstSeq > prev &&
      k.lastSeq >= k.firstSeq &&
      k.lastSeq <= partLastSeq &&
      k.changes >= 1 &&
      untilMsOf(k) !== undefined;
    if (!ok) break;
    out.push(k);
    prev = k.lastSeq;
  }
  return out;
}

/**
 * Writes a set's Change Dump (§13): per Change List, packages of its changes (a new version of one resource
 * per change, from the blob copies), named by the seq range they cover, then the Change Dump document.
 *
 * Packages are append-only: those of closed Change Lists in `known.closed` are reused whole; of a list's
 * packages in `known.open` (written while it was open), the prefix that still fits is reused, and one new run
 * of packages (split at `limits`) holds the changes after the last reused one. The last reused package is
 * rewritten with the new changes when it holds fewer than `limits.minPackageChanges` (unless the result would
 * be the very same package). Intervals are contiguous: a package's `from` is the previous package's `until`
 * (the list's `from` for the first package); a new package's `until` is its last change's datetime, or, for
 * the last package of a list, the list's `until` (the snapshot's time for the open list). A reused package
 * keeps the `until` it was written with. Changes whose bytes were not kept are left out (`onMissing`).
 *
 * Memory: one package's manifest (at most `maxFiles` entries) plus what {@link writePackage} holds.
 */
export async function writeChangeDump(
  ctx: GenerationContext,
  snap: StoreSnapshot,
  setName: string,
  content: ContentProvider,
  limits: ChangeDumpLimits,
  known: KnownChangeDumpPackages,
  onMissing: (c: ChangeRecord) => void,
): Promise<ChangeDumpResult> {
  const l = ctx.layout;
  const base = l.baseUrl;
  const up: Link = { rel: 'up', href: l.capabilityListUrl(setName) };
  const parts = await snap.changeListParts(setName);
  const files: string[] = [];
  const all: DumpPackage[] = [];
  const nowClosed = new Map<number, DumpPackage[]>();
  const nowOpen = new Map<number, ChangeDumpPackage[]>();
  const maxFiles = Math.min(limits.maxFiles, ctx.limits.maxEntriesPerDocument);
  const minChanges = limits.minPackageChanges;
  let after = 0;
  /** `until` of the last package listed so far (the next one starts there). */
  let prevUntilMs: number | undefined;
  for (const p of parts) {
    const partAfter = after;
    if (p.lastSeq > after) after = p.lastSeq;
    const isClosed = p.untilMs !== undefined;
    const closed = isClosed ? known.closed.get(p.number) : undefined;
    if (closed !== undefined) {
      all.push(...closed);
      nowClosed.set(p.number, [...closed]);
      const last = closed.at(-1);
      if (last !== undefined) prevUntilMs = untilMsOf(last) ?? p.untilMs;
      continue;
    }
    const through = isClosed ? p.lastSeq : snap.head.seq;
    const reusable = reusablePrefix(known.open.get(p.number) ?? [], partAfter, p.lastSeq);
    let listed: ChangeDumpPackage[];
    try {
      listed = await writePartPackages(p, partAfter, through, reusable, prevUntilMs ?? p.fromMs);
    } catch (e) {
      await removeFiles(files); // packages of this generation are listed nowhere yet
      throw e;
    }
    all.push(...listed);
    if (isClosed) nowClosed.set(p.number, listed);
    else nowOpen.set(p.number, listed);
    const last = listed.at(-1);
    if (last !== undefined) prevUntilMs = untilMsOf(last);
  }

  /**
   * The packages of one Change List: `reusable` (all, or all but a small last one), then new packages of the
   * changes after them, starting at `startMs` when nothing is reused.
   */
  async function writePartPackages(
    p: ChangeListPart,
    partAfter: number,
    through: number,
    reusable: readonly ChangeDumpPackage[],
    startMs: number,
  ): Promise<ChangeDumpPackage[]> {
    const out: ChangeDumpPackage[] = [...reusable];
    const reusedThrough = out.at(-1)?.lastSeq ?? partAfter;
    // Nothing after the reused packages: they are the list's packages as they are.
    if (p.count === 0 || p.lastSeq <= reusedThrough) return out;
    let replaced: ChangeDumpPackage | undefined;
    const lastReused = out.at(-1);
    if (lastReused !== undefined && lastReused.changes < minChanges && (await repackable(lastReused)))
      replaced = out.pop();
    const prev = out.at(-1);
    const afterSeq = prev?.lastSeq ?? partAfter;
    const untilMs = p.untilMs ?? snap.atMs;
    let batch: { c: ChangeRecord; content: boolean }[] = [];
    let bytes = 0;
    let fromMs = prev === undefined ? startMs : untilMsOf(prev)!;
    const flush = async (lastMs: number, final: boolean): Promise<void> => {
      if (batch.length === 0) return;
      const first = batch[0]!.c.seq;
      const last = batch[batch.length - 1]!.c.seq;
      if (replaced !== undefined && first === replaced.firstSeq && last === replaced.lastSeq) {
        // The very package that was to be replaced (no new change fits in it, or none has its bytes): kept,
        // not rewritten under the same name.
        out.push(replaced);
        fromMs = untilMsOf(replaced)!;
        replaced = undefined;
        batch = [];
        bytes = 0;
        return;
      }
      const stem = `changedump-${first}-${last}`;
      const md: Metadata = { from: formatDatetime(fromMs), until: formatDatetime(final ? untilMs : lastMs) };
      const entries = batch.map(({ c, content: k }) =>
        changeEntry(base, c, k ? bitstreamPath(`changes/${c.seq}`, c.uri) : undefined),
      );
      const manifest = await manifestBytes('change-dump-manifest', md, up, entries);
      const current = batch;
      const items = (async function* (): AsyncGenerator<ZipItem> {
        yield { name: DUMP_MANIFEST_NAME, mtime: new Date(untilMs), content: { data: manifest } };
        for (const { c, content: has } of current) {
          if (!has) continue;
          const k = await content.version(c);
          if (k === undefined) throw new StaleContentError(c.uri);
          yield {
            name: bitstreamPath(`changes/${c.seq}`, c.uri).slice(1),
            mtime: new Date(c.lastmodMs ?? c.datetimeMs),
            content: k,
          };
        }
      })();
      const zipFile = `${stem}.zip`;
      const manifestFile = `${stem}-manifest.xml`;
      const length = await writePackage(l.path(setName, zipFile), items, fsyncOpt(ctx), {
        entries: current.length + 1,
        bytes: bytes + manifest.length,
      });
      await writeFileAtomic(l.path(setName, manifestFile), manifest, fsyncOpt(ctx));
      files.push(l.path(setName, zipFile), l.path(setName, manifestFile));
      out.push({
        file: zipFile,
        manifestFile,
        length,
        md,
        lastmod: formatDatetime(lastMs),
        firstSeq: first,
        lastSeq: last,
        changes: current.length,
      });
      fromMs = final ? untilMs : lastMs;
      batch = [];
      bytes = 0;
    };
    let lastMs = fromMs;
    for await (const c of snap.changes({ setName, afterSeq, throughSeq: through })) {
      let has = false;
      if (c.change !== 'deleted') {
        has = await content.hasVersion(c);
        if (!has) {
          // Without its bytes the change cannot be in a package (§13.2: `path` is mandatory): left out.
          onMissing(c);
          lastMs = c.datetimeMs;
          continue;
        }
      }
      const size = has ? (c.length ?? 0) : 0;
      if (batch.length > 0 && (batch.length >= maxFiles || bytes + size > limits.maxBytes)) await flush(lastMs, false);
      batch.push({ c, content: has });
      bytes += size;
      lastMs = c.datetimeMs;
    }
    await flush(lastMs, true);
    return out;
  }

  /**
   * Whether a package's changes can all be packaged again: a copy of some bitstream may have gone since (kept
   * copies are bounded), and rewriting the package would then lose the change it still holds.
   */
  async function repackable(k: ChangeDumpPackage): Promise<boolean> {
    let n = 0;
    for await (const c of snap.changes({ setName, afterSeq: k.firstSeq - 1, throughSeq: k.lastSeq }))
      if (c.change === 'deleted' || (await content.hasVersion(c))) n++;
    return n === k.changes;
  }

  const first = parts[0];
  const docs = await writeListOrIndex(ctx, {
    kind: 'change-dump',
    indexKind: 'change-dump-index',
    count: all.length,
    entries: (async function* () {
      for (const p of all) yield dumpEntry(ctx, setName, p);
    })(),
    md: first === undefined ? {} : { from: formatDatetime(first.fromMs) },
    setName,
    name: 'changedump',
  });
  return { files: [...files, ...docs], packages: all, closed: nowClosed, open: nowOpen };
}
