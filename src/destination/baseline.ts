/**
 * Baseline synchronization (§5.2, §10, §11): a complete copy from Resource Dump packages, falling back to the
 * Resource List for whatever a package could not provide, or from the Resource List alone.
 *
 * @module
 */
import { formatDatetime, parseDatetime } from '../core/datetime.js';
import { ResourceSyncError, isResourceSyncError } from '../core/errors.js';
import type { Entry } from '../core/model.js';
import { join } from 'node:path';
import { forEachConcurrent } from './concurrent.js';
import { type SyncContext, describeError, regularFileSize } from './context.js';
import { openExpected, openListTree } from './documents.js';
import { DumpPackage, fetchPackage } from './dump.js';
import { expectedOf } from './plan.js';
import { applyResource, fetchInstaller, packageInstaller } from './apply.js';

/** Where a baseline reads from. */
export interface BaselineSources {
  /** Resource List or Resource List Index URLs (normally one). */
  readonly resourceLists: readonly string[];
  /** Resource Dump or Resource Dump Index URLs. */
  readonly resourceDumps: readonly string[];
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
 * run interrupted or partly failed resumes where it stopped. The Source's `at` (the earliest of the documents
 * read) becomes the watermark only when every resource was copied (`complete`); refused resources (outside
 * the Source's authority) do not prevent completion but are reported.
 *
 * Memory: bounded by `concurrency` entries in flight plus, when a dump package fails, the URIs of that
 * package's resources (to fetch them from the list).
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
      for await (const pkgEntry of tree.entries) {
        ctx.checkAborted();
        const r = await applyResourcePackage(ctx, pkgEntry, missing, () => tree.at());
        if (r === 'all') {
          fallback = 'all';
          break;
        }
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
        const only = fallback === 'all' ? undefined : fallback;
        await forEachConcurrent(
          tree.entries,
          ctx.options.concurrency,
          async (entry) => {
            if (only !== undefined) {
              if (!only.has(entry.loc)) return;
              only.delete(entry.loc);
            }
            await applyListEntry(ctx, entry, tree.at());
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

  const complete = ctx.counts.failed === 0;
  // Never back: a snapshot older than the copy's watermark leaves it where it is (the copy holds the changes
  // up to it, and nothing older was installed over them: see isNewerLocally).
  const watermark = latest(before, at ?? started) as string;
  if (at === undefined)
    ctx.warn('RS_INVALID_VALUE', `the Source gives no "at" time; using the local start time ${started}`);
  if (complete && !ctx.options.dryRun) {
    if (at !== undefined) await retireExtras(ctx, at);
    ctx.state.transaction(() => {
      ctx.state.setWatermark({ at: watermark, kind: 'baseline', sourceUrl: ctx.options.source });
      ctx.state.journalEnd();
    });
    ctx.emit({ type: 'watermark', at: watermark });
  }
  return { at: watermark, complete, via };
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
async function retireExtras(ctx: SyncContext, at: string): Promise<void> {
  const atMs = parseDatetime(at)?.ms;
  if (atMs === undefined) return;
  await removeKeptDeletions(ctx, 'list');
  for (const rec of ctx.state.all()) {
    // Left out by --include / --exclude: neither fetched nor seen in this run, and not deleted either.
    if (!ctx.accepts(rec.uri) || rec.deleted === true) continue;
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
export async function applyListEntry(ctx: SyncContext, entry: Entry, at: string | undefined): Promise<void> {
  const uri = entry.loc;
  const target = targetOf(ctx, uri, 'list');
  if (target === undefined) return;
  const failed = await applyResource(ctx, {
    uri,
    target,
    entry,
    rec: ctx.lookup(uri),
    change: 'snapshot',
    datetime: at,
    from: 'list',
    installer: fetchInstaller(ctx, entry),
  });
  if (failed !== undefined) ctx.count(uri, 'failed', 'list', failed.error);
}

/**
 * Applies one Resource Dump package: download it (into memory when small, else to a temporary file), open
 * it, read `manifest.xml` first, then install every bitstream verified against the manifest. URIs the package
 * could not provide are added to `fallback`; `'all'` is returned when the package's content is unknown (no
 * readable manifest inside or via its `contents` link), so the whole list must be used.
 */
async function applyResourcePackage(
  ctx: SyncContext,
  pkgEntry: Entry,
  fallback: Set<string>,
  at: () => string | undefined,
): Promise<'ok' | 'all'> {
  const url = pkgEntry.loc;
  const declared = expectedOf(pkgEntry);
  let pkg: DumpPackage;
  try {
    const opts: {
      tmpDir: string;
      maxBytes?: number;
      length?: number;
      hashes?: typeof declared.hashes;
      signal?: AbortSignal;
    } = { tmpDir: ctx.options.tmpDir };
    if (ctx.options.maxPackageBytes !== undefined) opts.maxBytes = ctx.options.maxPackageBytes;
    if (declared.length !== undefined) opts.length = declared.length;
    if (declared.hashes !== undefined) opts.hashes = declared.hashes;
    if (ctx.options.signal !== undefined) opts.signal = ctx.options.signal;
    pkg = await DumpPackage.open(await fetchPackage(ctx.client, url, opts), { url });
  } catch (e) {
    if (isResourceSyncError(e, 'RS_ABORTED')) throw e;
    ctx.warn(codeOf(e), `package unusable, its resources will come from the Resource List: ${messageOf(e)}`, url);
    return collectFromContents(ctx, pkgEntry, fallback);
  }
  let manifestRead = false;
  try {
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
          installer: packageInstaller(ctx, pkg, m.md?.path),
        });
        if (failed !== undefined) {
          fallback.add(uri);
          ctx.warn(
            codeOf(failed.error),
            `${uri}: not installed from the package, will use the Resource List: ${messageOf(failed.error)}`,
            url,
          );
        }
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
