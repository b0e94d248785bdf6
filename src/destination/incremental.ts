/**
 * Incremental synchronization (§5.2, §12, §13): apply the changes the Source published since the watermark,
 * from Change Dump packages when offered, else (and after a failed package) from Change Lists.
 *
 * Durability: the changes of a run are planned (coalesced per resource), each applied change is recorded in
 * the state with its datetime as soon as its file is durable (see {@link Recorder}), and the watermark moves
 * only once every planned change is applied, in the same transaction that closes the journal. A run killed at
 * any moment leaves the old watermark; the next run plans the same changes again and skips those whose record
 * already shows them ({@link isChangeApplied}), so nothing is applied twice with harm and nothing is lost.
 *
 * @module
 */
import { formatDatetime, parseDatetime } from '../core/datetime.js';
import { ResourceSyncError, isResourceSyncError } from '../core/errors.js';
import { applyResource, bytesInstaller, fetchInstaller, packageInstaller } from './apply.js';
import { DUMP_MANIFEST_NAME } from '../core/constants.js';
import type { LocalEntry } from '../io/zip-stream.js';
import { removeKeptDeletions, targetOf } from './baseline.js';
import { forEachConcurrent } from './concurrent.js';
import { type SyncContext, describeError } from './context.js';
import { type ChangeDocumentRef, openExpected, readChangeDumpIndex, readChangeListIndex } from './documents.js';
import {
  type ArrivedFile,
  DumpPackage,
  type PendingPackage,
  arrivedFile,
  arrivingManifest,
  manifestPathToName,
} from './dump.js';
import type { ResourceRecord } from './state.js';
import type { DocumentStream } from '../xml/index.js';
import {
  type ChangePlan,
  ChangeCoalescer,
  type PlannedChange,
  findGap,
  isChangeApplied,
  selectIntervals,
} from './plan.js';

/** Where an incremental run reads from. */
export interface IncrementalSources {
  readonly changeLists: readonly string[];
  readonly changeDumps: readonly string[];
}

/** Result of {@link runIncremental}. */
export interface IncrementalResult {
  readonly watermark: string;
  readonly complete: boolean;
  readonly via: string[];
}

/** Options of {@link runIncremental}. */
export interface IncrementalOptions {
  /**
   * Plan at most this many distinct resources before applying and committing (default 500,000): bounds memory
   * for very long change histories. Plans are cut between documents only.
   */
  readonly maxPlanned?: number;
}

/**
 * Applies the changes after `watermark`. Throws `RS_GAP` when the Source no longer offers changes back to the
 * watermark (the caller may run a new baseline instead).
 *
 * Memory: one {@link PlannedChange} per distinct resource changed since the watermark (up to `maxPlanned`),
 * plus a Change List Index's entries; with Change Dumps, two packages at once (the one applied and the next,
 * downloaded meanwhile), each in memory up to `fetchPackage`'s memory bound (8 MiB) or in a file, plus, while a
 * package's files are applied as it arrives, its manifest's bytes (at most 16 MiB), the files arrived and not
 * yet applied (at most 32 MiB per package, the one downloaded ahead included) and one small record per file
 * applied.
 */
export async function runIncremental(
  ctx: SyncContext,
  sources: IncrementalSources,
  watermark: string,
  options: IncrementalOptions = {},
): Promise<IncrementalResult> {
  if (parseDatetime(watermark) === undefined)
    throw new ResourceSyncError('RS_CONFIG', `watermark ${JSON.stringify(watermark)} is not a W3C Datetime`);
  if (sources.changeLists.length === 0 && sources.changeDumps.length === 0)
    throw new ResourceSyncError('RS_DISCOVERY', 'the Source offers no Change List or Change Dump', {
      url: ctx.options.source,
    });
  const via: string[] = [];
  let wm = watermark;
  let complete = true;

  if (sources.changeDumps.length > 0 && !ctx.options.noDumps && !ctx.options.dryRun) {
    via.push('dump');
    dumps: for (const url of sources.changeDumps) {
      const index = await readChangeDumpIndex(ctx, url);
      if (findGap(index.docs, index.from, wm) !== undefined && sources.changeLists.length > 0) {
        ctx.warn('RS_GAP', 'the Change Dump does not reach back to the watermark; using the Change Lists', url);
        break;
      }
      checkGap(index.docs, index.from, wm, url);
      // Each package is downloaded while the one before it is applied (one ahead: at most two at once).
      const refs = selectIntervals(index.docs, wm);
      let next = refs[0] === undefined ? undefined : ctx.startPackage(refs[0].url, refs[0].declared);
      try {
        for (let i = 0; i < refs.length; i++) {
          const ref = refs[i] as ChangeDocumentRef;
          const pending = next as PendingPackage;
          const after = refs[i + 1];
          next = after === undefined ? undefined : ctx.startPackage(after.url, after.declared);
          ctx.checkAborted();
          const r = await applyChangePackage(ctx, ref, pending, wm, sources.changeLists.length > 0);
          if (r === undefined) {
            if (sources.changeLists.length === 0) {
              complete = false;
              break dumps;
            }
            ctx.warn('RS_ZIP', 'continuing from the Change Lists', ref.url);
            break dumps;
          }
          if (!r.complete) {
            complete = false;
            break dumps;
          }
          wm = r.watermark;
        }
      } finally {
        await next?.discard();
      }
    }
  }

  if (complete && sources.changeLists.length > 0) {
    via.push('list');
    for (const url of sources.changeLists) {
      const index = await readChangeListIndex(ctx, url);
      checkGap(index.docs, index.from, wm, url);
      const docs = selectIntervals(index.docs, wm);
      const maxPlanned = options.maxPlanned ?? 500_000;
      let coalescer = new ChangeCoalescer(parseDatetime(wm)?.ms);
      let planned = 0;
      let newWm = wm;
      for (let i = 0; i < docs.length; i++) {
        const doc = docs[i] as ChangeDocumentRef;
        ctx.checkAborted();
        const stream = doc.opened ?? (await openExpected(ctx, doc.url, ['change-list'], 'a Change List'));
        for await (const e of stream.entries) {
          coalescer.add(e);
          planned++;
        }
        newWm = later(newWm, stream.header.md?.until ?? doc.until);
        if (planned >= maxPlanned || i === docs.length - 1) {
          const plan = coalescer.finish();
          reportPlan(ctx, plan, doc.url);
          newWm = later(newWm, plan.latest);
          const ok = await applyPlan(ctx, plan, wm, newWm, undefined);
          if (!ok) {
            complete = false;
            break;
          }
          wm = newWm;
          coalescer = new ChangeCoalescer(parseDatetime(wm)?.ms);
          planned = 0;
        }
      }
      if (!complete) break;
    }
  }
  // Deletions earlier runs recorded without --delete (files kept) are applied by this one with it.
  if (complete) await removeKeptDeletions(ctx, 'change');
  return { watermark: wm, complete, via };
}

function later(a: string, b: string | undefined): string {
  if (b === undefined) return a;
  const pb = parseDatetime(b);
  const pa = parseDatetime(a);
  if (pb === undefined) return a;
  return pa === undefined || pb.ms > pa.ms ? b : a;
}

function checkGap(docs: readonly ChangeDocumentRef[], from: string | undefined, wm: string, url: string): void {
  const gap = findGap(docs, from, wm);
  if (gap !== undefined)
    throw new ResourceSyncError(
      'RS_GAP',
      `the Source's changes start at ${gap}, after this copy's watermark ${wm}: a new baseline is needed (--baseline or --auto-baseline)`,
      { url },
    );
}

function reportPlan(ctx: SyncContext, plan: ChangePlan, url: string): void {
  if (plan.outOfOrder > 0)
    ctx.warn(
      'RS_INVALID_VALUE',
      `${plan.outOfOrder} change entries out of chronological order (entries ${plan.outOfOrderAt.join(', ')}); applied by latest datetime per resource`,
      url,
    );
  for (const r of plan.rejected.slice(0, 10))
    ctx.warn('RS_INVALID_VALUE', `change entry ${r.position} (${r.uri || 'no loc'}) ignored: ${r.reason}`, url);
}

/** Options of {@link applyPlan} after part of a Change Dump package was applied as it arrived. */
interface PlanOptions {
  /** URIs whose change is already applied (from the package as it arrived): left out. */
  readonly skip?: ReadonlySet<string>;
  /** URIs applied again from the package even when their record shows the change (read from another file). */
  readonly force?: ReadonlySet<string>;
  /** Failures counted before the plan began (those of its part applied as the package arrived). */
  readonly failedBefore?: number;
  /** The plan's changes are already in the progress total. */
  readonly counted?: boolean;
}

/**
 * Applies a plan and, when every change succeeded, moves the watermark from `from` to `to` and closes the
 * journal in one transaction. Returns whether the plan was fully applied.
 */
async function applyPlan(
  ctx: SyncContext,
  plan: ChangePlan,
  from: string,
  to: string,
  pkg: DumpPackage | undefined,
  options: PlanOptions = {},
): Promise<boolean> {
  const skip = options.skip;
  const changes = skip === undefined || skip.size === 0 ? plan.changes : plan.changes.filter((c) => !skip.has(c.uri));
  if (options.counted !== true) ctx.total = (ctx.total ?? 0) + plan.changes.length;
  ctx.state.journalBegin('incremental', { from, to, changes: plan.changes.length });
  const failedBefore = options.failedBefore ?? ctx.counts.failed;
  const content = pkg === undefined ? undefined : { pkg };
  // Records are looked up 1,000 changes at a time, in one query each (a lookup per change cost ~18 µs).
  for (let i = 0; i < changes.length; i += PLAN_CHUNK) {
    const chunk = changes.slice(i, i + PLAN_CHUNK);
    const records = ctx.state.getMany(chunk.map((c) => c.uri));
    await forEachConcurrent(
      chunk,
      ctx.options.concurrency,
      (change) => applyChange(ctx, change, content, records.get(change.uri), options.force?.has(change.uri) === true),
      ctx.options.signal,
    );
  }
  await ctx.recorder.flush();
  const ok = ctx.counts.failed === failedBefore;
  if (ok && !ctx.options.dryRun) {
    ctx.state.transaction(() => {
      ctx.state.setWatermark({ at: to, kind: 'incremental', sourceUrl: ctx.options.source });
      ctx.state.journalEnd();
    });
    ctx.emit({ type: 'watermark', at: to });
  }
  return ok;
}

/** Changes applied per state lookup query (see applyPlan). */
const PLAN_CHUNK = 1000;

/**
 * Applies one coalesced change: fetched (from its Change List entry), or from a Change Dump package (`content`:
 * the package, or the bitstream's bytes read as the package arrived); `rec` is the resource's record as it
 * stood before the run (each resource has one change in a plan). `force`: applied even when the record shows it.
 */
export async function applyChange(
  ctx: SyncContext,
  change: PlannedChange,
  content: { readonly pkg: DumpPackage } | { readonly bytes: Uint8Array } | undefined,
  rec: ResourceRecord | undefined,
  force = false,
): Promise<void> {
  const from = content === undefined ? 'change' : 'dump';
  const uri = change.uri;
  const target = targetOf(ctx, uri, from);
  if (target === undefined) return;
  if (!force && isChangeApplied(rec, change)) {
    ctx.count(uri, 'skipped', from);
    return;
  }
  const failed = await applyResource(ctx, {
    uri,
    target,
    entry: change.entry,
    rec,
    change: change.change,
    datetime: change.datetime,
    from,
    installer:
      content === undefined
        ? fetchInstaller(ctx, change.entry)
        : 'pkg' in content
          ? packageInstaller(ctx, content.pkg, change.entry.md?.path)
          : bytesInstaller(ctx, content.bytes),
  });
  if (failed !== undefined) ctx.count(uri, 'failed', from, failed.error);
}

/**
 * Applies one Change Dump package (§13): its download started by `SyncContext.startPackage`, while the
 * package before it was applied. While it arrives, when `manifest.xml` is its first file (as our Source writes it), the
 * changes after the watermark are planned from it and each created or updated resource is installed as soon as
 * its bitstream is in, verified against its manifest entry and its ZIP CRC-32 ({@link applyArrivingChanges}).
 * Once the whole package is in and its central directory read, the rest (deletions, bitstreams that did not
 * arrive in a readable form) is applied from it, and anything read as it arrived that the central directory
 * does not describe the same way is applied again from it. Returns undefined when the package is unusable (the
 * caller falls back to the Change Lists, which skip the changes already applied: each one was verified), else
 * whether it was fully applied and the watermark it reached.
 */
async function applyChangePackage(
  ctx: SyncContext,
  ref: ChangeDocumentRef,
  pending: PendingPackage,
  wm: string,
  canFallBack: boolean,
): Promise<{ complete: boolean; watermark: string } | undefined> {
  const failedBefore = ctx.counts.failed;
  const failuresBefore = ctx.failures.length;
  const early = pending.arriving === undefined ? undefined : await applyArrivingChanges(ctx, ref, pending, wm);
  let pkg: DumpPackage;
  try {
    pkg = await DumpPackage.open(await pending.received, { url: ref.url });
  } catch (e) {
    if (isResourceSyncError(e, 'RS_ABORTED')) throw e;
    const f = describeError(ref.url, e);
    // The changes applied as it arrived are recorded before the Change Lists look at the records.
    await ctx.recorder.flush();
    const kept =
      early === undefined || early.files.size === 0
        ? ''
        : ` (${early.files.size} changes applied while it arrived stay applied: each matched its manifest entry and CRC-32)`;
    ctx.warn(f.code, `Change Dump package unusable: ${f.message}${kept}`, ref.url);
    // Bitstreams that failed as it arrived are retried from the Change Lists (when there are none, they stay
    // failures: the run is incomplete either way).
    if (canFallBack) failuresToWarning(ctx, failedBefore, failuresBefore, ref.url);
    return undefined;
  }
  try {
    let plan: ChangePlan;
    let to: string;
    const skip = new Set<string>();
    const force = new Set<string>();
    if (early !== undefined && pkg.describes(DUMP_MANIFEST_NAME, early.manifest)) {
      ({ plan, to } = early);
      for (const [name, f] of early.files) (pkg.describes(name, f) ? skip : force).add(f.uri);
      ctx.emit({ type: 'package', url: ref.url, files: pkg.size - 1 });
    } else {
      const manifest = await pkg.openManifest();
      if (manifest.header.kind !== 'change-dump-manifest')
        throw new ResourceSyncError(
          'RS_NOT_RESOURCESYNC',
          `manifest.xml is a ${manifest.header.kind}, not a Change Dump Manifest`,
          {
            url: ref.url,
          },
        );
      ctx.emit({ type: 'package', url: ref.url, files: pkg.size - 1 });
      ({ plan, to } = await planManifest(ctx, manifest, ref, wm));
      // Applied from a manifest.xml that is not the package's: applied again from the package.
      for (const f of early?.files.values() ?? []) force.add(f.uri);
    }
    // Bitstreams a manifest promises but the package lacks make the package unusable as a whole.
    for (const c of plan.changes)
      if (c.change !== 'deleted' && !skip.has(c.uri) && !pkg.has(c.entry.md?.path))
        throw new ResourceSyncError(
          'RS_ZIP',
          `package lacks the bitstream of ${c.uri} (path ${c.entry.md?.path ?? 'absent'})`,
          {
            url: ref.url,
          },
        );
    const ok = await applyPlan(ctx, plan, wm, to, pkg, {
      skip,
      force,
      failedBefore,
      counted: early !== undefined, // applyArrivingChanges counted its plan
    });
    if (!ok && canFallBack) {
      // Some bitstreams failed (e.g. one that does not match its manifest entry): the changes applied from
      // the package stay recorded, and the Change Lists, read from the same watermark, skip them and fetch
      // the others from the Source.
      failuresToWarning(ctx, failedBefore, failuresBefore, ref.url);
      return undefined;
    }
    return { complete: ok, watermark: ok ? to : wm };
  } catch (e) {
    if (isResourceSyncError(e, 'RS_ABORTED')) throw e;
    const f = describeError(ref.url, e);
    ctx.warn(f.code, `Change Dump package unusable: ${f.message}`, ref.url);
    await ctx.recorder.flush();
    if (canFallBack) failuresToWarning(ctx, failedBefore, failuresBefore, ref.url);
    return undefined;
  } finally {
    await pkg.close();
  }
}

/**
 * The plan of a Change Dump Manifest: its changes after the watermark `wm`, coalesced per resource (reported:
 * out of order, rejected), and the watermark it reaches (its `until`, else the dump entry's, or its latest
 * change). Memory: one {@link PlannedChange} per distinct resource.
 */
async function planManifest(
  ctx: SyncContext,
  manifest: DocumentStream,
  ref: ChangeDocumentRef,
  wm: string,
): Promise<{ plan: ChangePlan; to: string }> {
  const coalescer = new ChangeCoalescer(parseDatetime(wm)?.ms);
  for await (const e of manifest.entries) coalescer.add(e);
  const plan = coalescer.finish();
  reportPlan(ctx, plan, ref.url);
  return { plan, to: later(later(wm, manifest.header.md?.until ?? ref.until), plan.latest) };
}

/**
 * The failures counted since `failedBefore` / `failuresBefore` (changes of a Change Dump package that could not
 * be applied) become one warning: the Change Lists, read next from the same watermark, retry them at once.
 */
function failuresToWarning(ctx: SyncContext, failedBefore: number, failuresBefore: number, url: string): void {
  const n = ctx.counts.failed - failedBefore;
  if (n <= 0) return;
  const sample = ctx.failures
    .splice(failuresBefore)
    .slice(0, 3)
    .map((f) => `${f.uri}: ${f.message} [${f.code}]`);
  ctx.counts.failed = failedBefore;
  ctx.warn(
    'RS_ZIP',
    `${n} change${n === 1 ? '' : 's'} of the Change Dump package could not be applied (${sample.join('; ')}${n > sample.length ? '; ...' : ''})`,
    url,
  );
}

/** What {@link applyArrivingChanges} planned and applied. */
interface ArrivedChanges {
  readonly manifest: LocalEntry;
  readonly plan: ChangePlan;
  readonly to: string;
  /** The files whose change was applied as they arrived, by package name. */
  readonly files: Map<string, ArrivedFile>;
}

/**
 * The part of a Change Dump package applied while it arrives (see {@link applyChangePackage}): the plan of its
 * manifest (coalesced after the watermark, reported once) and each created or updated resource whose bitstream
 * arrives whole; deletions wait for the whole package. The journal is opened before the first change, as
 * {@link applyPlan} does. Memory: the manifest's bytes (at most 16 MiB), the plan (as {@link applyPlan}) and
 * the records of its resources, one small record per file applied, and the files arrived and not yet applied (bounded, see `io/zip-stream.ts`).
 */
async function applyArrivingChanges(
  ctx: SyncContext,
  ref: ChangeDocumentRef,
  pending: PendingPackage,
  wm: string,
): Promise<ArrivedChanges | undefined> {
  const opened = await arrivingManifest(pending, 'change-dump-manifest');
  if (opened === undefined) return undefined;
  let plan: ChangePlan;
  let to: string;
  try {
    ({ plan, to } = await planManifest(ctx, opened.doc, ref, wm));
  } catch {
    pending.arriving?.stop(`unusable ${DUMP_MANIFEST_NAME}`); // reported when read from the whole package
    return undefined;
  }
  const byName = new Map<string, PlannedChange>();
  for (const c of plan.changes) {
    if (c.change === 'deleted') continue;
    try {
      byName.set(manifestPathToName(c.entry.md?.path, ref.url), c);
    } catch {
      // Reported when read from the whole package.
    }
  }
  // Records looked up 1,000 at a time, in one query each, as applyPlan does (one per change cost ~18 µs).
  const uris = [...byName.values()].map((c) => c.uri);
  const records = new Map<string, ResourceRecord>();
  for (let i = 0; i < uris.length; i += PLAN_CHUNK)
    for (const [u, r] of ctx.state.getMany(uris.slice(i, i + PLAN_CHUNK))) records.set(u, r);
  const part: ArrivedChanges = { manifest: opened.file, plan, to, files: new Map() };
  ctx.total = (ctx.total ?? 0) + plan.changes.length;
  ctx.state.journalBegin('incremental', { from: wm, to, changes: plan.changes.length });
  const files = opened.files;
  async function* arrived(): AsyncGenerator<{ change: PlannedChange; bytes: Uint8Array }> {
    for (let f = await files.next(); f.done !== true; f = await files.next()) {
      const change = byName.get(f.value.name);
      if (change === undefined) continue; // superseded by a later change of the same resource
      byName.delete(f.value.name);
      part.files.set(f.value.name, arrivedFile(f.value, change.uri));
      yield { change, bytes: f.value.data };
      if (byName.size === 0) {
        pending.arriving?.stop('every bitstream of the plan arrived');
        break;
      }
    }
  }
  try {
    await forEachConcurrent(
      arrived(),
      ctx.options.concurrency,
      ({ change, bytes }) => applyChange(ctx, change, { bytes }, records.get(change.uri)),
      ctx.options.signal,
    );
  } catch (e) {
    pending.arriving?.stop('failed');
    if (isResourceSyncError(e, 'RS_ABORTED') || ctx.options.signal?.aborted === true) throw e;
    // Anything else: the part applied so far stands (each file verified), the rest from the whole package.
  }
  return part;
}

/** The watermark for `--from`: validated and normalized to a W3C Datetime. */
export function parseFromOption(text: string): string {
  const p = parseDatetime(text);
  if (p === undefined)
    throw new ResourceSyncError(
      'RS_CONFIG',
      `--from ${JSON.stringify(text)} is not a W3C Datetime (e.g. 2024-01-31T00:00:00Z)`,
    );
  return formatDatetime(p.ms);
}
