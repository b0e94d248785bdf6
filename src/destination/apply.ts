/**
 * The one way a resource gets applied to the copy, whatever told of it: a Resource List entry or a Resource Dump
 * manifest entry (a snapshot, baseline.ts), a change of a Change List or Change Dump (incremental.ts), a change
 * notification (follow.ts). {@link applyResource} decides (skip, adopt, delete, install), and the
 * {@link Installer} owns the write paths: a small resource received in memory and written (staged under
 * `batch` durability), a large one streamed to a temporary file, a package's bitstream read in place.
 *
 * Rules, alike for every caller:
 * - never older over newer: a snapshot older than the record of the resource (a change applied after it was
 *   taken), or a change the record already shows (see `isChangeApplied`, checked by the caller), is skipped;
 * - the file is looked at only when that can spare the install: the record may match (no hash to tell, or the
 *   same hash), or an unrecorded file (an interrupted run, or put by hand) may be adopted when it has the
 *   expected hash;
 * - an unchanged resource has its record's Source datetime raised to the time it was seen at (never lowered);
 * - deletions remove the file only with `--delete` (else the deletion is recorded and the file kept).
 *
 * @module
 */
import { parseDatetime } from '../core/datetime.js';
import { type Hashes, hashesMatch } from '../core/hash.js';
import { isResourceSyncError } from '../core/errors.js';
import type { Entry } from '../core/model.js';
import { type SyncContext, hashLocal, regularFileSize } from './context.js';
import type { DumpPackage } from './dump.js';
import {
  type ExpectedContent,
  candidateUrls,
  expectedOf,
  hashesMatchExpected,
  isUpToDate,
  recordHashes,
} from './plan.js';
import type { ResourceRecord } from './state.js';

/** Installs verified content at a target: the write path (small in memory, staged, streamed) is its own. */
export interface Installer {
  install(target: string, expected: ExpectedContent): Promise<{ length: number; hashes: Hashes } | { error: unknown }>;
}

/** Content fetched from the resource's mirrors (`rel="duplicate"`, §12.3) then its `loc`. */
export function fetchInstaller(ctx: SyncContext, entry: Entry): Installer {
  return { install: (target, expected) => ctx.fetchResource(candidateUrls(entry), target, expected) };
}

/** Content read from a dump package (the bitstream at `path`, §11.2, §13.2). */
export function packageInstaller(ctx: SyncContext, pkg: DumpPackage, path: string | undefined): Installer {
  return failuresReturned((target, expected) => ctx.installFromPackage(pkg, path, target, expected));
}

/** Content already received whole (a dump package's bitstream read as the package arrived). */
export function bytesInstaller(ctx: SyncContext, body: Uint8Array): Installer {
  return failuresReturned((target, expected) => ctx.installBytes(body, target, expected));
}

/** An installer whose failures, except an abort, are returned as `{ error }` instead of thrown. */
function failuresReturned(
  install: (target: string, expected: ExpectedContent) => Promise<{ length: number; hashes: Hashes }>,
): Installer {
  return {
    install: async (target, expected) => {
      try {
        return await install(target, expected);
      } catch (e) {
        if (isResourceSyncError(e, 'RS_ABORTED')) throw e;
        return { error: e };
      }
    },
  };
}

/** One resource to bring up to date. */
export interface ResourceUpdate {
  readonly uri: string;
  /** Its local path (see `targetOf`). */
  readonly target: string;
  /** The entry describing the content: expected length and hashes, lastmod. */
  readonly entry: Entry;
  /** Its record as it stood before (undefined: none). */
  readonly rec: ResourceRecord | undefined;
  /**
   * `snapshot`: a Resource List or dump manifest entry taken at `datetime` (its `at`); `created`, `updated`,
   * `deleted`: a change recorded at `datetime`.
   */
  readonly change: 'snapshot' | 'created' | 'updated' | 'deleted';
  /** The snapshot's `at` or the change's datetime: recorded as the resource's Source datetime. */
  readonly datetime: string | undefined;
  readonly from: 'list' | 'dump' | 'change';
  /** Where the content comes from (unused for deletions). */
  readonly installer: Installer;
}

/**
 * Applies one resource (see the module comment) and counts the outcome, except a failure to install, which is
 * returned (`{ error }`) for the caller to count or to retry from elsewhere (a dump's resource from the list).
 */
export async function applyResource(ctx: SyncContext, u: ResourceUpdate): Promise<{ error: unknown } | undefined> {
  const { uri, target, rec, from } = u;
  if (u.change === 'snapshot' && isNewerThan(rec, u.datetime)) {
    ctx.count(uri, 'skipped', from); // changed after the snapshot: the copy has the newer content
    return undefined;
  }
  if (u.change === 'deleted') {
    const action = ctx.options.deleteFiles ? 'deleted' : 'deletion-recorded';
    if (ctx.options.dryRun) {
      ctx.count(uri, action, from);
      return undefined;
    }
    try {
      if (ctx.options.deleteFiles) await ctx.removeFile(target);
      await ctx.recorder.delete(uri, u.datetime as string, ctx.options.deleteFiles);
      ctx.count(uri, action, from);
    } catch (e) {
      ctx.count(uri, 'failed', from, e);
    }
    return undefined;
  }
  const expected = expectedOf(u.entry);
  const mayMatch =
    rec !== undefined &&
    rec.deleted !== true &&
    (expected.hashes === undefined || hashesMatch(expected.hashes, recordHashes(rec)) !== false);
  const mayAdopt = expected.hashes !== undefined && (rec === undefined || ctx.options.resumed === true);
  const size = mayMatch || mayAdopt ? await regularFileSize(target) : undefined;
  if (size !== undefined && isUpToDate(rec, expected, size)) {
    await raiseDatetime(ctx, rec as ResourceRecord, u.datetime);
    ctx.count(uri, 'skipped', from);
    return undefined;
  }
  if (size !== undefined && mayAdopt && !ctx.options.dryRun) {
    // Installed by an interrupted run before it was recorded, or placed by hand: adopted when it matches.
    try {
      const local = await hashLocal(target, expected);
      if (hashesMatchExpected(expected, local)) {
        await ctx.recorder.put(ctx.record(uri, target, local, u.entry.lastmod, u.datetime), target);
        ctx.count(uri, 'skipped', from);
        return undefined;
      }
    } catch {
      // Unreadable: installed again.
    }
  }
  const action = rec === undefined || rec.deleted === true ? 'created' : 'updated';
  if (ctx.options.dryRun) {
    ctx.count(uri, action, from);
    return undefined;
  }
  const r = await u.installer.install(target, expected);
  if ('error' in r) return r;
  ctx.counts.bytes += r.length;
  await ctx.recorder.put(ctx.record(uri, target, r, u.entry.lastmod, u.datetime), target);
  ctx.count(uri, action, from);
  return undefined;
}

/** True when `rec` was recorded at a Source datetime later than `datetime` (both readable). */
function isNewerThan(rec: ResourceRecord | undefined, datetime: string | undefined): boolean {
  if (rec?.sourceDatetime === undefined || datetime === undefined) return false;
  const recMs = parseDatetime(rec.sourceDatetime)?.ms;
  const ms = parseDatetime(datetime)?.ms;
  return recMs !== undefined && ms !== undefined && recMs > ms;
}

/**
 * An unchanged resource seen at `datetime`: its record's Source datetime becomes `datetime` when that is later
 * (a baseline then tells it from resources the Source no longer lists; an incremental run from a change not yet
 * applied). Not in a dry run.
 */
async function raiseDatetime(ctx: SyncContext, rec: ResourceRecord, datetime: string | undefined): Promise<void> {
  if (datetime === undefined || ctx.options.dryRun) return;
  const ms = parseDatetime(datetime)?.ms;
  const recMs = rec.sourceDatetime === undefined ? undefined : parseDatetime(rec.sourceDatetime)?.ms;
  if (ms === undefined || (recMs !== undefined && recMs >= ms)) return;
  await ctx.recorder.put({ ...rec, sourceDatetime: datetime });
}
