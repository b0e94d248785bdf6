/**
 * Audit (§5.2): compare the local copy with the Source's current state, which is its Resource List plus the
 * changes its Change Lists record since the list's `at`. Each resource is missing, extra, changed or the same;
 * content is compared with what the list (or a later change) gives, and only that ({@link agreesWithList}):
 * the length with the file's size, then the hash (recomputed from disk with `checksum`, else the recorded one)
 * or, without a hash, the lastmod. An entry giving only a length agrees when the size does; one giving nothing
 * is checked for presence. Resources left out by `--include` / `--exclude` are not compared. Nothing is written.
 *
 * @module
 */
import { parseDatetime } from '../core/datetime.js';
import { ResourceSyncError, isResourceSyncError } from '../core/errors.js';
import type { Entry } from '../core/model.js';
import { type SyncContext, describeError, hashLocal, regularFileSize } from './context.js';
import { openExpected, openListTree, readChangeListIndex } from './documents.js';
import type { AuditCounts } from './events.js';
import { isInstallTempName } from './install.js';
import { walkLocalFiles } from './sweep.js';
import { UriSet } from './uri-set.js';
import {
  ChangeCoalescer,
  type ExpectedContent,
  type PlannedChange,
  expectedOf,
  agreesWithList,
  hashesMatchExpected,
  selectIntervals,
} from './plan.js';

/** Where an audit reads from. */
export interface AuditSources {
  readonly resourceLists: readonly string[];
  readonly changeLists: readonly string[];
}

const SAMPLES = 20;

/**
 * Audits the local copy. Memory: the URIs seen in the Resource List (to find extras) are kept in a
 * {@link UriSet} (in memory up to 100,000, then in a scratch SQLite database under the system's temporary
 * directory), plus the changes recorded since the list's `at` (one per resource changed since). Extras are
 * found by walking the files of the copy (recorded in the state or not).
 */
export async function runAudit(ctx: SyncContext, sources: AuditSources): Promise<AuditCounts> {
  const audit: AuditCounts = {
    missing: 0,
    extra: 0,
    changed: 0,
    same: 0,
    samples: { missing: [], extra: [], changed: [] },
  };
  const note = (kind: 'missing' | 'extra' | 'changed' | 'same', uri: string): void => {
    audit[kind]++;
    ctx.advance();
    if (kind !== 'same' && audit.samples[kind].length < SAMPLES) audit.samples[kind].push(uri);
  };
  if (sources.resourceLists.length === 0)
    throw new ResourceSyncError('RS_DISCOVERY', 'the Source offers no Resource List to audit against', {
      url: ctx.options.source,
    });
  const seen = new UriSet();
  let kept = 0;
  try {
    await compareAll(ctx, sources, seen, note);
    // Local files the Source does not have: the tree on disk is the copy (recorded or not, e.g. put by hand).
    await walkLocalFiles(ctx.options.dir, (file, name) => {
      if (isInstallTempName(name)) return;
      const uri = ctx.mapper.toUri(file);
      if (uri !== undefined && (seen.has(uri) || !ctx.accepts(uri))) return;
      // A file of another set of this copy, or one the state knows under a URI the name does not spell (a
      // name cut to the file system's limit, a URI read in its valid spelling: docs/file-names.md).
      const owner = ctx.state.fileOwner(ctx.relativePath(file));
      if (owner !== undefined && (owner.otherSet || seen.has(owner.uri) || !ctx.accepts(owner.uri))) return;
      if (owner?.deleted === true) kept++;
      note('extra', owner?.uri ?? uri ?? file);
    });
  } finally {
    seen.close();
  }
  if (kept > 0)
    ctx.warn(
      'RS_CONFIG',
      `${kept} of the extra files ${kept === 1 ? 'is a deletion' : 'are deletions'} recorded by runs without --delete ` +
        `(files kept): \`resourcesync sync --delete ${ctx.options.source} ${ctx.options.dir}\` removes them`,
    );
  ctx.progress();
  return audit;
}

type Note = (kind: 'missing' | 'extra' | 'changed' | 'same', uri: string) => void;

/** Compares every resource of the Resource Lists (and those created since) with the copy; adds them to `seen`. */
async function compareAll(ctx: SyncContext, sources: AuditSources, seen: UriSet, note: Note): Promise<void> {
  for (const url of sources.resourceLists) {
    const tree = await openListTree(ctx, url);
    const changes = await changesSince(ctx, sources.changeLists, tree.at());
    for await (const entry of tree.entries) {
      ctx.checkAborted();
      const uri = entry.loc;
      if (uri === '' || !ctx.mapper.isAllowed(uri) || !ctx.accepts(uri)) continue;
      seen.add(uri);
      const change = changes.get(uri);
      changes.delete(uri);
      await compareOne(ctx, uri, entry, change, note);
    }
    // Resources created after the list's snapshot.
    for (const change of changes.values()) {
      if (!ctx.mapper.isAllowed(change.uri) || !ctx.accepts(change.uri)) continue;
      seen.add(change.uri);
      await compareOne(ctx, change.uri, undefined, change, note);
    }
  }
}

async function compareOne(
  ctx: SyncContext,
  uri: string,
  entry: Entry | undefined,
  change: PlannedChange | undefined,
  note: Note,
): Promise<void> {
  let target: string;
  try {
    target = ctx.mapper.toLocalPath(uri);
  } catch {
    return;
  }
  const rec = ctx.state.get(uri);
  const size = await regularFileSize(target);
  if (change?.change === 'deleted') {
    if (size !== undefined) note('extra', uri);
    return;
  }
  if (size === undefined) {
    note('missing', uri);
    return;
  }
  let expected: ExpectedContent = entry === undefined ? {} : expectedOf(entry);
  if (change !== undefined) {
    const fromChange = expectedOf(change.entry);
    if (fromChange.hashes !== undefined || fromChange.length !== undefined) expected = fromChange;
    else {
      // The change gives no length or hash: the copy is current if it recorded that change; an undated change
      // has no time to compare, so only a lastmod it gives and the record shares can tell.
      const recMs = rec?.sourceDatetime === undefined ? undefined : parseDatetime(rec.sourceDatetime)?.ms;
      const recorded = change.dated
        ? recMs !== undefined && recMs >= change.datetimeMs
        : rec !== undefined && fromChange.lastmod !== undefined && agreesWithList(rec, fromChange, size);
      note(recorded ? 'same' : 'changed', uri);
      return;
    }
  }
  if (ctx.options.checksum && expected.hashes !== undefined) {
    try {
      const local = await hashLocal(target, expected);
      note(hashesMatchExpected(expected, local) ? 'same' : 'changed', uri);
    } catch {
      note('changed', uri);
    }
    return;
  }
  // What the list (or the change since) gives: length, then hash or lastmod (see agreesWithList).
  note(agreesWithList(rec, expected, size) ? 'same' : 'changed', uri);
}

/** Changes recorded since `at`, coalesced per resource (empty when there are no Change Lists or no `at`). */
async function changesSince(
  ctx: SyncContext,
  changeLists: readonly string[],
  at: string | undefined,
): Promise<Map<string, PlannedChange>> {
  const out = new Map<string, PlannedChange>();
  if (at === undefined || changeLists.length === 0) return out;
  const coalescer = new ChangeCoalescer(parseDatetime(at)?.ms);
  for (const url of changeLists) {
    try {
      const index = await readChangeListIndex(ctx, url);
      for (const doc of selectIntervals(index.docs, at)) {
        const stream = doc.opened ?? (await openExpected(ctx, doc.url, ['change-list'], 'a Change List'));
        for await (const e of stream.entries) coalescer.add(e);
      }
    } catch (e) {
      if (isResourceSyncError(e, 'RS_ABORTED')) throw e;
      const f = describeError(url, e);
      ctx.warn(f.code, `Change List unreadable, auditing against the Resource List alone: ${f.message}`, url);
    }
  }
  for (const c of coalescer.finish().changes) out.set(c.uri, c);
  return out;
}
