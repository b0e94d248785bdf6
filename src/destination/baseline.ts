/**
 * Baseline synchronization (§5.2, §10, §11): a complete copy from Resource Dump packages, falling back to the
 * Resource List for whatever a package could not provide, or from the Resource List alone.
 *
 * @module
 */
import { formatDatetime, parseDatetime } from '../core/datetime.js';
import { type ErrorCode, ResourceSyncError, isResourceSyncError } from '../core/errors.js';
import type { Entry } from '../core/model.js';
import { join } from 'node:path';
import { forEachConcurrent } from './concurrent.js';
import { type SyncContext, describeError, regularFileSize } from './context.js';
import { openExpected, openListTree } from './documents.js';
import {
  type ArrivedFile,
  DumpPackage,
  type PendingPackage,
  arrivedFile,
  arrivingManifest,
  manifestPathToName,
} from './dump.js';
import { DUMP_MANIFEST_NAME } from '../core/constants.js';
import type { LocalEntry, LocalEntryParser } from '../io/zip-stream.js';
import { expectedOf, UNCONFIRMED_DELETION } from './plan.js';
import { type Installer, applyResource, bytesInstaller, fetchInstaller, packageInstaller } from './apply.js';
import { httpStatusOf } from '../http/client.js';
import { runIncremental } from './incremental.js';

/** Where a baseline reads from. */
export interface BaselineSources {
  /** Resource List or Resource List Index URLs (normally one). */
  readonly resourceLists: readonly string[];
  /** Resource Dump or Resource Dump Index URLs. */
  readonly resourceDumps: readonly string[];
  /**
   * Change Lists (when offered): a resource changed or deleted after the Resource List's `at` (its bytes differ
   * from the list's length/hash, or HTTP 404/410) is then deferred to them instead of failing the baseline.
   */
  readonly changeLists?: readonly string[];
}

/** Result of {@link runBaseline}. */
export interface BaselineResult {
  /** The snapshot time recorded as watermark (when complete) */
  readonly at: string;
  readonly complete: boolean;
  readonly via: string[];
}

/**
 * Copies every resource of the Source. Resources already present with the same content are skipped, so a
 * run interrupted or partly failed resumes where it stopped. A resource changed or deleted after the list's `at`
 * (bytes other than listed, or 404/410) is left to the Change Lists since `at` when the Source offers them, and
 * confirmed by the baseline's own follow-up incremental run (see confirmDeferred); without them it fails. The Source's `at` (the earliest of the documents
 * read) becomes the watermark only when every resource was copied (`complete`); refused resources (outside
 * the Source's authority) do not prevent completion but are reported.
 *
 * Memory: bounded by `concurrency` entries in flight plus, when a dump package fails, the URIs of that
 * package's resources (to fetch them from the list); with dumps, two packages at once (the one applied and the
 * next, downloaded meanwhile), each in memory up to `fetchPackage`'s memory bound (8 MiB) or in a file, plus,
 * while a package's files are applied as it arrives, its manifest's bytes (at most 16 MiB), the files arrived
 * and not yet applied (at most 32 MiB per package, the one downloaded ahead included) and one small record per
 * file applied.
 */
export async function runBaseline(ctx: SyncContext, sources: BaselineSources): Promise<BaselineResult> {
  const started = formatDatetime(Date.now());
  const via: string[] = [];
  let at: string | undefined;
  const noteAt = (t: string | undefined): void => {
    if (t === undefined) return;
    const p = parseDatetime(t);
    if (p !== undefined && (at === undefined || p.ms < (parseDatetime(at)?.ms ?? Number.POSITIVE_INFINITY))) at = t;
  };
  ctx.state.journalBegin('baseline', { source: ctx.options.source, started });
  const before = ctx.state.getWatermark()?.at;

  // Which list entries still need fetching: everything (no dump), none (dumps complete), or a set of URIs.
  const missing = new Set<string>();
  // Resources changed or deleted after the list's `at`, left to the Change Lists since `at` (see confirmDeferred).
  const deferred = new Map<string, string | undefined>();
  const useDumps = sources.resourceDumps.length > 0 && !ctx.options.noDumps && !ctx.options.dryRun;
  let fallback: 'all' | Set<string> = useDumps ? missing : 'all';
  // A dump older than the Resource List (or than the copy) holds content the Source has since replaced: it is
  // not used (installing it would put old bytes over newer ones, and its resources deleted since would land in
  // the copy); the list is. Costs one extra read of the list's top document when dumps are offered.
  const newerThanDumps = useDumps ? latest(before, await listSnapshot(ctx, sources.resourceLists)) : undefined;
  if (useDumps) {
    via.push('dump');
    ctx.beginPhase();
    for (const url of sources.resourceDumps) {
      let tree: Awaited<ReturnType<typeof openListTree>>;
      try {
        tree = await openListTree(ctx, url, true);
      } catch (e) {
        if (isResourceSyncError(e, 'RS_ABORTED')) throw e;
        ctx.warn(codeOf(e), `Resource Dump unusable, using the Resource List: ${messageOf(e)}`, url);
        fallback = 'all';
        break;
      }
      const dumpAt = tree.at();
      if (newerThanDumps !== undefined && dumpAt !== undefined && isBefore(dumpAt, newerThanDumps)) {
        await tree.entries.return(undefined);
        ctx.warn(
          'RS_GAP', // as a Change Dump that does not reach back to the watermark (incremental.ts)
          `the Resource Dump (at ${dumpAt}) is older than ${newerThanDumps === before ? 'the copy' : 'the Resource List'} (at ${newerThanDumps}): using the Resource List`,
          url,
        );
        via.pop();
        fallback = 'all';
        break;
      }
      // Each package is downloaded while the one before it is applied (one ahead: at most two at once).
      const pkgs = tree.entries[Symbol.asyncIterator]();
      const ahead = async (): Promise<{ entry: Entry; pkg: PendingPackage } | undefined> => {
        const n = await pkgs.next();
        return n.done === true
          ? undefined
          : { entry: n.value, pkg: ctx.startPackage(n.value.loc, expectedOf(n.value)) };
      };
      let next: Promise<{ entry: Entry; pkg: PendingPackage } | undefined> = ahead();
      try {
        for (let cur = await next; cur !== undefined; cur = await next) {
          ctx.checkAborted();
          next = ahead();
          next.catch(() => undefined); // awaited in the next round
          const r = await applyResourcePackage(ctx, cur.entry, cur.pkg, missing, () => tree.at());
          if (r === 'all') {
            fallback = 'all';
            break;
          }
        }
      } finally {
        await (await next.catch(() => undefined))?.pkg.discard();
        await pkgs.return?.(undefined);
      }
      noteAt(tree.at());
      if (fallback === 'all') break;
    }
  }
  await ctx.recorder.flush();

  const needList = fallback === 'all' || fallback.size > 0;
  if (needList) {
    if (sources.resourceLists.length === 0) {
      if (fallback !== 'all') for (const uri of fallback) ctx.count(uri, 'failed', 'dump', missingFromDump(uri));
      else
        throw new ResourceSyncError('RS_DISCOVERY', 'the Source offers no Resource List', { url: ctx.options.source });
    } else {
      via.push('list');
      ctx.beginPhase();
      for (const url of sources.resourceLists) {
        const tree = await openListTree(ctx, url);
        const changes = (sources.changeLists?.length ?? 0) > 0;
        const only = fallback === 'all' ? undefined : fallback;
        await forEachConcurrent(
          tree.entries,
          ctx.options.concurrency,
          async (entry) => {
            if (only !== undefined) {
              if (!only.has(entry.loc)) return;
              only.delete(entry.loc);
            }
            await applyListEntry(ctx, entry, tree.at(), changes ? deferred : undefined);
          },
          ctx.options.signal,
        );
        noteAt(tree.at());
      }
      if (fallback !== 'all') for (const uri of fallback) ctx.count(uri, 'failed', 'dump', missingFromDump(uri));
    }
  }
  await ctx.recorder.flush();
  ctx.progress();

  let complete = ctx.counts.failed === 0;
  let confirmedTo: string | undefined; // the follow-up incremental's watermark
  if (complete && deferred.size > 0 && at !== undefined && !ctx.options.dryRun) {
    const r = await confirmDeferred(ctx, sources.changeLists ?? [], latest(before, at) as string, deferred);
    complete = r.ok;
    if (r.ok) confirmedTo = r.watermark;
  }
  // Never back: a snapshot older than the copy's watermark leaves it where it is (the copy holds the changes
  // up to it, and nothing older was installed over them: see isNewerLocally).
  const watermark = latest(before, at ?? started) as string;
  if (at === undefined)
    ctx.warn('RS_INVALID_VALUE', `the Source gives no "at" time; using the local start time ${started}`);
  if (complete && !ctx.options.dryRun && deferred.size === 0) {
    if (at !== undefined) await retireExtras(ctx, at);
    ctx.state.transaction(() => {
      ctx.state.setWatermark({ at: watermark, kind: 'baseline', sourceUrl: ctx.options.source });
      ctx.state.journalEnd();
    });
    ctx.emit({ type: 'watermark', at: watermark });
  }
  return { at: confirmedTo ?? watermark, complete, via };
}

/**
 * The baseline's own follow-up incremental run from the list's `at`: every deferred resource (fetched bytes
 * differing from the list's metadata, or gone, after `at`) must be confirmed by a change since `at` that the run
 * applied (its record then carries a Source datetime at or after `at`, other than the one it had before). When
 * one is not, the run is incomplete and the copy goes back to an unfinished baseline (the next run is a baseline
 * again, which fetches it anew): a copy is never reported in sync when it is not, and no change is lost.
 * Extras are retired first (the list is complete apart from the deferred resources), then the watermark is set
 * to `at` for the incremental to start from. Memory: one entry per deferred resource.
 */
async function confirmDeferred(
  ctx: SyncContext,
  changeLists: readonly string[],
  at: string,
  deferred: Map<string, string | undefined>,
): Promise<{ ok: boolean; watermark: string }> {
  await retireExtras(ctx, at, deferred);
  ctx.state.transaction(() => {
    ctx.state.setWatermark({ at, kind: 'baseline', sourceUrl: ctx.options.source });
    ctx.state.journalEnd();
  });
  let ok = false;
  let watermark = at;
  try {
    const r = await runIncremental(ctx, { changeLists, changeDumps: [] }, at);
    ok = r.complete;
    watermark = r.watermark;
  } catch (e) {
    if (isResourceSyncError(e, 'RS_ABORTED')) throw e;
    ctx.warn(codeOf(e), `the Change Lists since ${at} could not be applied: ${messageOf(e)}`);
  }
  const atMs = parseDatetime(at)?.ms as number;
  for (const [uri, before] of deferred) {
    const rec = ctx.state.get(uri); // not ctx.lookup: on a first baseline it answers undefined
    const ms = rec?.sourceDatetime === undefined ? undefined : parseDatetime(rec.sourceDatetime)?.ms;
    if (rec !== undefined && rec.sourceDatetime !== before && ms !== undefined && ms >= atMs) continue;
    ok = false;
    ctx.count(
      uri,
      'failed',
      'list',
      new ResourceSyncError(
        'RS_GAP',
        `changed or deleted after the Resource List's at (${at}), and no change since then in the Change List confirms it`,
        { url: uri },
      ),
    );
  }
  if (!ok) ctx.state.journalBegin('baseline', { source: ctx.options.source, started: at });
  return { ok, watermark };
}

/** True when `a` is strictly earlier than `b` (W3C Datetimes; false when either cannot be read). */
function isBefore(a: string, b: string): boolean {
  const x = parseDatetime(a)?.ms;
  const y = parseDatetime(b)?.ms;
  return x !== undefined && y !== undefined && x < y;
}

/** The later of two W3C Datetimes (either may be absent). */
function latest(a: string | undefined, b: string | undefined): string | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return isBefore(a, b) ? b : a;
}

/** The `at` of the first Resource List's top document (undefined when it has none or cannot be read). */
async function listSnapshot(ctx: SyncContext, lists: readonly string[]): Promise<string | undefined> {
  const url = lists[0];
  if (url === undefined) return undefined;
  try {
    const tree = await openListTree(ctx, url);
    const at = tree.at();
    await tree.entries.return(undefined);
    return at;
  } catch (e) {
    if (isResourceSyncError(e, 'RS_ABORTED')) throw e;
    return undefined; // the list phase reports it
  }
}

/**
 * After a complete baseline: resources recorded locally but absent from the snapshot (their record predates
 * `at`: neither fetched nor seen unchanged in this run) were deleted at the Source. They are handled like
 * deletions: removed with `--delete`, else recorded as deleted and kept. With `--delete`, files of deletions
 * recorded by earlier runs are removed too. Memory: one page of records.
 */
async function retireExtras(ctx: SyncContext, at: string, keep?: ReadonlyMap<string, unknown>): Promise<void> {
  const atMs = parseDatetime(at)?.ms;
  if (atMs === undefined) return;
  await removeKeptDeletions(ctx, 'list');
  for (const rec of ctx.state.all()) {
    // Left out by --include / --exclude: neither fetched nor seen in this run, and not deleted either.
    if (!ctx.accepts(rec.uri) || rec.deleted === true || keep?.has(rec.uri) === true) continue;
    const ms = rec.sourceDatetime === undefined ? undefined : parseDatetime(rec.sourceDatetime)?.ms;
    if (ms !== undefined && ms >= atMs) continue;
    try {
      if (ctx.options.deleteFiles) await ctx.removeFile(join(ctx.options.dir, rec.path));
      await ctx.recorder.delete(rec.uri, at, ctx.options.deleteFiles);
      ctx.count(rec.uri, ctx.options.deleteFiles ? 'deleted' : 'deletion-recorded', 'list');
    } catch (e) {
      ctx.count(rec.uri, 'failed', 'list', e);
    }
  }
  await ctx.recorder.flush();
}

/**
 * With `--delete`: removes the files of deletions that earlier runs recorded without it (files kept), so that
 * a later `sync --delete`, baseline or incremental, brings the copy in line (in a dry run: counts them). Memory:
 * one page of records.
 */
export async function removeKeptDeletions(ctx: SyncContext, from: 'list' | 'change'): Promise<void> {
  if (!ctx.options.deleteFiles) return;
  for (const rec of ctx.state.deletedRecords()) {
    if (!ctx.accepts(rec.uri)) continue;
    const file = join(ctx.options.dir, rec.path);
    if ((await regularFileSize(file)) === undefined) continue;
    try {
      if (!ctx.options.dryRun) await ctx.removeFile(file);
      ctx.count(rec.uri, 'deleted', from);
    } catch (e) {
      ctx.count(rec.uri, 'failed', from, e);
    }
  }
}

function missingFromDump(uri: string): ResourceSyncError {
  return new ResourceSyncError('RS_ZIP', 'not provided by the Resource Dump and absent from the Resource List', {
    url: uri,
  });
}

/** Local target of a URI, or undefined after counting it as excluded (--include / --exclude) or refused. */
export function targetOf(ctx: SyncContext, uri: string, from: 'list' | 'dump' | 'change'): string | undefined {
  if (uri !== '' && !ctx.accepts(uri)) {
    ctx.counts.excluded++;
    return undefined;
  }
  if (uri === '') {
    ctx.count('(empty loc)', 'refused', from, new ResourceSyncError('RS_INVALID_VALUE', 'entry without <loc>'));
    return undefined;
  }
  if (!ctx.mapper.isAllowed(uri)) {
    ctx.count(
      uri,
      'refused',
      from,
      new ResourceSyncError('RS_AUTHORITY', 'outside the authority of the Source (use --allow-host)', { url: uri }),
    );
    return undefined;
  }
  try {
    return ctx.mapper.toLocalPath(uri);
  } catch (e) {
    ctx.count(uri, 'refused', from, e);
    return undefined;
  }
}

/**
 * Brings one Resource List entry up to date ({@link applyResource}): skipped when present with the same content
 * (by hash, else length and lastmod) or newer, adopted when an unrecorded local file already has the expected
 * hash, otherwise fetched from its mirrors then its loc, verified and installed.
 */
export async function applyListEntry(
  ctx: SyncContext,
  entry: Entry,
  at: string | undefined,
  deferred?: Map<string, string | undefined>,
): Promise<void> {
  const uri = entry.loc;
  const target = targetOf(ctx, uri, 'list');
  if (target === undefined) return;
  const rec = ctx.lookup(uri);
  const failed = await applyResource(ctx, {
    uri,
    target,
    entry,
    rec,
    change: 'snapshot',
    datetime: at,
    from: 'list',
    installer: fetchInstaller(ctx, entry),
  });
  if (failed === undefined) return;
  if (!isChangedSince(failed.error) || at === undefined) {
    ctx.count(uri, 'failed', 'list', failed.error);
  } else if (deferred === undefined) {
    const f = describeError(uri, failed.error);
    const why = `${f.message}: changed or deleted after the Resource List's at (${at})? The Source offers no Change List to confirm it; run again`;
    ctx.count(
      uri,
      'failed',
      'list',
      new ResourceSyncError(f.code as ErrorCode, why, { url: uri, cause: failed.error }),
    );
  } else {
    // Left to the Change Lists since `at` (confirmDeferred). Gone: recorded as a deletion dated before any
    // change (the file is kept), so that the deletion the Change List reports is applied and tells it.
    deferred.set(uri, rec?.sourceDatetime);
    if (rec === undefined && httpStatusOf(failed.error) !== undefined) {
      await ctx.recorder.delete(uri, UNCONFIRMED_DELETION, false);
      deferred.set(uri, UNCONFIRMED_DELETION);
    }
    ctx.warn('RS_GAP', `changed after the Resource List's at (${at}): left to the Change List since then`, uri);
  }
}

/** A fetch failure that a change after the snapshot explains: other bytes than listed, or gone (404, 410). */
function isChangedSince(e: unknown): boolean {
  if (isResourceSyncError(e, 'RS_LENGTH_MISMATCH') || isResourceSyncError(e, 'RS_HASH_MISMATCH')) return true;
  const status = httpStatusOf(e);
  return status === 404 || status === 410;
}

/**
 * Applies one Resource Dump package (its download started by `SyncContext.startPackage`, while the package
 * before it was applied). While it arrives, when its first file is `manifest.xml` and its files follow in the
 * manifest's order with their sizes in their local headers (as our Source writes them), each bitstream is
 * installed as soon as it is in, verified against its manifest entry and its ZIP CRC-32
 * ({@link applyArrivingResources}). Once the whole package is in and verified (declared length and hash, the
 * central directory), the rest of the manifest is applied from it. A package that fails at its end sends
 * every resource installed from it while it arrived, and the rest, to the Resource List (which checks them
 * again against its own length and hash): nothing from a bad package stays unchecked.
 * URIs the package could not provide are added to `fallback`; `'all'` is returned when the package's content
 * is unknown (no readable manifest inside or via its `contents` link), so the whole list must be used.
 */
async function applyResourcePackage(
  ctx: SyncContext,
  pkgEntry: Entry,
  pending: PendingPackage,
  fallback: Set<string>,
  at: () => string | undefined,
): Promise<'ok' | 'all'> {
  const url = pkgEntry.loc;
  const early = pending.arriving === undefined ? undefined : await applyArrivingResources(ctx, pending, fallback, at);
  const recheck = (why: string): void => {
    if (early === undefined || early.files.size === 0) return;
    for (const f of early.files.values()) fallback.add(f.uri);
    ctx.warn(
      'RS_ZIP',
      `${early.files.size} resources installed while the package arrived will be checked against the Resource List: ${why}`,
      url,
    );
  };
  let pkg: DumpPackage;
  try {
    pkg = await DumpPackage.open(await pending.received, { url });
  } catch (e) {
    if (isResourceSyncError(e, 'RS_ABORTED')) throw e;
    recheck('the package failed');
    ctx.warn(codeOf(e), `package unusable, its resources will come from the Resource List: ${messageOf(e)}`, url);
    return collectFromContents(ctx, pkgEntry, fallback);
  }
  let manifestRead = false;
  try {
    // What was read as it arrived must be what the central directory describes (the same manifest, the same
    // files); anything else is checked again through the Resource List.
    let skip = early?.consumed ?? 0;
    if (early !== undefined && !pkg.describes(DUMP_MANIFEST_NAME, early.manifest)) {
      recheck('its central directory describes another manifest.xml');
      skip = 0;
    } else if (early !== undefined) {
      for (const [name, f] of early.files) if (!pkg.describes(name, f)) fallback.add(f.uri);
      if (early.complete) {
        // Every entry of the manifest was applied as the package arrived.
        ctx.emit({ type: 'package', url, files: pkg.size - 1 });
        return 'ok';
      }
    }
    const manifest = await pkg.openManifest();
    if (manifest.header.kind !== 'resource-dump-manifest')
      throw new ResourceSyncError(
        'RS_NOT_RESOURCESYNC',
        `manifest.xml is a ${manifest.header.kind}, not a Resource Dump Manifest`,
        {
          url,
        },
      );
    ctx.emit({ type: 'package', url, files: pkg.size - 1 });
    await forEachConcurrent(
      manifest.entries,
      ctx.options.concurrency,
      async (m) => {
        if (skip > 0) {
          skip--; // applied while the package arrived
          return;
        }
        await applyDumpEntry(ctx, m, url, packageInstaller(ctx, pkg, m.md?.path), fallback, at);
      },
      ctx.options.signal,
    );
    manifestRead = true;
  } catch (e) {
    if (isResourceSyncError(e, 'RS_ABORTED')) throw e;
    ctx.warn(codeOf(e), `package manifest unusable: ${messageOf(e)}`, url);
  } finally {
    await pkg.close();
  }
  return manifestRead ? 'ok' : collectFromContents(ctx, pkgEntry, fallback);
}

/** One manifest entry of a Resource Dump applied ({@link applyResource}); a failure sends it to `fallback`. */
async function applyDumpEntry(
  ctx: SyncContext,
  m: Entry,
  url: string,
  installer: Installer,
  fallback: Set<string>,
  at: () => string | undefined,
): Promise<void> {
  const uri = m.loc;
  const target = targetOf(ctx, uri, 'dump');
  if (target === undefined) return;
  const failed = await applyResource(ctx, {
    uri,
    target,
    entry: m,
    rec: ctx.lookup(uri),
    change: 'snapshot',
    datetime: at(),
    from: 'dump',
    installer,
  });
  if (failed !== undefined) {
    fallback.add(uri);
    ctx.warn(
      codeOf(failed.error),
      `${uri}: not installed from the package, will use the Resource List: ${messageOf(failed.error)}`,
      url,
    );
  }
}

/**
 * The part of a Resource Dump package applied while it arrives (see {@link applyResourcePackage}): the
 * manifest entries before the first whose bitstream did not arrive next (in order), their count, and the
 * local header of each file read (checked against the central directory once the package is in).
 * Memory: the manifest's bytes (at most 16 MiB) and one small record per file read.
 */
async function applyArrivingResources(
  ctx: SyncContext,
  pending: PendingPackage,
  fallback: Set<string>,
  at: () => string | undefined,
): Promise<ArrivedPart | undefined> {
  const url = pending.url;
  const arriving = pending.arriving as LocalEntryParser;
  const opened = await arrivingManifest(pending, 'resource-dump-manifest');
  if (opened === undefined) return undefined;
  const { doc: manifest, files } = opened;
  const part: ArrivedPart = { manifest: opened.file, consumed: 0, files: new Map(), complete: false };
  async function* inOrder(): AsyncGenerator<{ m: Entry; data: Uint8Array }> {
    let reachedEnd = true;
    for await (const m of manifest.entries) {
      reachedEnd = false;
      let name: string;
      try {
        name = manifestPathToName(m.md?.path, url);
      } catch {
        break; // reported when read from the whole package
      }
      const f = await files.next();
      if (f.done === true) break;
      if (f.value.name !== name) {
        arriving.stop(`${f.value.name} arrived where the manifest has ${name}`);
        break;
      }
      reachedEnd = true;
      part.consumed++;
      part.files.set(name, arrivedFile(f.value, m.loc));
      yield { m, data: f.value.data };
    }
    part.complete = reachedEnd;
  }
  try {
    await forEachConcurrent(
      inOrder(),
      ctx.options.concurrency,
      (r) => applyDumpEntry(ctx, r.m, url, bytesInstaller(ctx, r.data), fallback, at),
      ctx.options.signal,
    );
  } catch (e) {
    arriving.stop('failed');
    if (isResourceSyncError(e, 'RS_ABORTED') || ctx.options.signal?.aborted === true) throw e;
    // Anything else: the part applied so far stands (each file verified), the rest from the whole package.
  }
  return part;
}

/** What {@link applyArrivingResources} applied: the first `consumed` manifest entries. */
interface ArrivedPart {
  readonly manifest: LocalEntry;
  consumed: number;
  readonly files: Map<string, ArrivedFile>;
  /** Every manifest entry was applied (nothing is left for the whole package). */
  complete: boolean;
}

/** Adds the URIs of a package's external manifest (`rs:ln rel="contents"`, §11.1) to `fallback`. */
async function collectFromContents(ctx: SyncContext, pkgEntry: Entry, fallback: Set<string>): Promise<'ok' | 'all'> {
  const contents = pkgEntry.links.find((l) => l.rel === 'contents');
  if (contents === undefined) return 'all';
  try {
    const doc = await openExpected(ctx, contents.href, ['resource-dump-manifest'], 'a Resource Dump Manifest');
    for await (const e of doc.entries) if (e.loc !== '') fallback.add(e.loc);
    return 'ok';
  } catch (e) {
    if (isResourceSyncError(e, 'RS_ABORTED')) throw e;
    ctx.warn(
      codeOf(e),
      `manifest of the package unreadable, using the whole Resource List: ${messageOf(e)}`,
      contents.href,
    );
    return 'all';
  }
}

function codeOf(e: unknown): string {
  return describeError('', e).code;
}

function messageOf(e: unknown): string {
  return describeError('', e).message;
}
