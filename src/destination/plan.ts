/**
 * The pure decisions of a Destination (§5.2, §12): which resources to fetch, which changes to apply, in which
 * order, and when a resource already present can be skipped. No I/O here, so every rule is unit-tested.
 *
 * ## The boundary rule (watermark)
 *
 * The watermark is the Source datetime up to which the local copy is known to be current: the `at` of the
 * Resource List (or Resource Dump) a baseline copied, then the `until` of the last closed Change List applied,
 * or the latest change `datetime` seen in the open Change List. A change is **applied when its datetime is at
 * or after the watermark** (`datetime >= watermark`), never only when strictly after: a Source may record a
 * second change with the same (second-granular) datetime after we read the first one, and a Resource List's
 * snapshot starts at `at` (§10.1, Appendix A), so changes stamped exactly `at` may or may not be in it. A change
 * whose datetime equals the watermark is therefore re-applied, idempotently: it is skipped only when the local
 * record already carries that same datetime *and* the change's hash, when it has one, matches the local
 * copy; otherwise it is fetched again, which is harmless (the result is the Source's current content).
 *
 * Change List documents whose `until` is at or before the watermark are skipped whole (their changes are all
 * before or at it, and a closed list's `until` is where the next list's `from` starts).
 *
 * ## Changes without a `datetime`
 *
 * `datetime` is optional on a change (§7, §12.1 in 1.1; Example 19 has an entry with neither `datetime` nor
 * `<lastmod>`), and the Python reference implementation's `resync-build` writes none. Such a change's time is
 * unknown; this module decides:
 *
 * - `<lastmod>` is **not** a change time (§7: it "may not correspond with the datetime of the last ResourceSync
 *   change event"; a deletion carries the removed file's old lastmod). It only describes content.
 * - What is known is the document's window (a document read at all ends after the watermark) and the entry's
 *   **position**: changes are listed in forward chronological order (§12.1), so an undated change happened at or
 *   after the dated change before it and at or before the dated change after it.
 * - An undated change is therefore kept (not "before the watermark") unless a later dated entry of the same
 *   documents, in chronological order so far, is itself before the watermark; then every undated change listed
 *   before that one is dropped too. Nothing in a document newer than the watermark is lost.
 * - Of several changes to one resource, when either is undated the one listed later wins.
 * - An undated change is applied when the local copy does not already show it ({@link isChangeApplied} compares
 *   content, never datetimes, for it): a deletion when the record is not deleted, a creation or update when the
 *   record's hash (or length and lastmod) differs from the entry's. An open list of undated changes, re-read
 *   on every run, is thus re-checked against the state each time but fetches nothing already here.
 * - Its {@link PlannedChange.datetime} (recorded in the state once applied) is the latest of the watermark and
 *   the dated change listed before it, never its lastmod: the copy of that resource is current at least up to
 *   then, and a later dated change is never taken for one already applied.
 * - Undated changes do not move the watermark ({@link ChangePlan.latest}); `until` and dated changes do.
 *
 * @module
 */
import type { HashAlgorithm } from '../core/constants.js';
import { compareDatetimes, parseDatetime } from '../core/datetime.js';
import { type Hashes, hashesMatch, knownHashes } from '../core/hash.js';
import type { Entry } from '../core/model.js';

/** What the Source says a resource should be (from a list entry or a manifest entry). */
export interface ExpectedContent {
  readonly length?: number;
  readonly hashes?: Hashes;
  readonly lastmod?: string;
}

/** What the Destination's state says it holds for a resource (a subset of the state's record). */
export interface LocalRecord {
  readonly length?: number;
  readonly md5?: string;
  readonly sha256?: string;
  readonly lastmod?: string;
  readonly sourceDatetime?: string;
  readonly deleted?: boolean;
}

/** The expected length, hashes and lastmod of an entry; invalid or unknown values are left out. */
export function expectedOf(entry: Entry): ExpectedContent {
  const out: { length?: number; hashes?: Hashes; lastmod?: string } = {};
  const md = entry.md;
  if (md?.length !== undefined && Number.isSafeInteger(md.length) && md.length >= 0) out.length = md.length;
  const hashes = knownHashes(md?.hash);
  if (Object.keys(hashes).length > 0) out.hashes = hashes;
  if (entry.lastmod !== undefined && parseDatetime(entry.lastmod) !== undefined) out.lastmod = entry.lastmod;
  return out;
}

/** The digests a local record carries, as {@link Hashes}. */
export function recordHashes(rec: LocalRecord): Hashes {
  const h: Hashes = {};
  if (rec.md5 !== undefined) h.md5 = rec.md5;
  if (rec.sha256 !== undefined) h['sha-256'] = rec.sha256;
  return h;
}

/** Algorithms to compute when checking content against `expected` (always md5 + sha-256, plus sha-1 if asked). */
export function algorithmsFor(expected: ExpectedContent): HashAlgorithm[] {
  const algs: HashAlgorithm[] = ['md5', 'sha-256'];
  if (expected.hashes?.['sha-1'] !== undefined) algs.push('sha-1');
  return algs;
}

/**
 * True when a resource recorded as `rec` (and present on disk with `diskLength` bytes) already matches
 * `expected`, so a baseline can skip it: same hash when both sides know a common algorithm; otherwise same
 * length and same lastmod. A record without any of those never matches (it is fetched again).
 */
export function isUpToDate(rec: LocalRecord | undefined, expected: ExpectedContent, diskLength?: number): boolean {
  if (rec === undefined || rec.deleted === true) return false;
  if (diskLength !== undefined && rec.length !== undefined && diskLength !== rec.length) return false;
  if (expected.length !== undefined && rec.length !== undefined && expected.length !== rec.length) return false;
  const byHash = expected.hashes === undefined ? undefined : hashesMatch(expected.hashes, recordHashes(rec));
  if (byHash !== undefined) return byHash;
  if (expected.length === undefined || rec.length === undefined) return false;
  if (expected.lastmod === undefined || rec.lastmod === undefined) return false;
  return sameDatetime(expected.lastmod, rec.lastmod);
}

/**
 * The audit's comparison (§5.2): true when a resource present on disk with `diskLength` bytes and recorded as
 * `rec` agrees with what `expected` gives, and only that: its length with the file's size; then its hash with the
 * recorded hashes when they share an algorithm (decisive: a touched file keeps its content); else its lastmod
 * with the recorded lastmod. A hash alone that the record cannot check (no common algorithm, no record) does
 * not agree; an entry that gives nothing at all is checked for presence only. A record
 * whose length differs from the file's (edited behind the state's back) never agrees. Unlike
 * {@link isUpToDate}, which decides whether a download can be spared and so needs a hash or both length and
 * lastmod, a length alone is enough here: it is all such a list says.
 */
export function agreesWithList(rec: LocalRecord | undefined, expected: ExpectedContent, diskLength: number): boolean {
  if (rec?.deleted === true) return false;
  if (rec?.length !== undefined && rec.length !== diskLength) return false;
  if (expected.length !== undefined && expected.length !== diskLength) return false;
  const byHash =
    expected.hashes === undefined || rec === undefined ? undefined : hashesMatch(expected.hashes, recordHashes(rec));
  if (byHash !== undefined) return byHash;
  if (expected.lastmod === undefined) return expected.hashes === undefined || expected.length !== undefined;
  return rec?.lastmod !== undefined && sameDatetime(expected.lastmod, rec.lastmod);
}

function sameDatetime(a: string, b: string): boolean {
  try {
    return compareDatetimes(a, b) === 0;
  } catch {
    return a === b;
  }
}

/**
 * Where to fetch a resource from, in order: its `duplicate` mirrors (§12.3, Example 24) by ascending `pri`
 * (links without `pri` after those with one, in document order), then the `loc` itself. Only http(s) mirrors
 * are kept (a `gsiftp:` mirror is of no use here); the loc is never repeated.
 */
export function candidateUrls(entry: Entry): string[] {
  const mirrors = entry.links
    .map((l, i) => ({ l, i }))
    .filter(({ l }) => l.rel === 'duplicate' && /^https?:\/\//i.test(l.href) && l.href !== entry.loc)
    .sort((a, b) => (a.l.pri ?? Number.MAX_SAFE_INTEGER) - (b.l.pri ?? Number.MAX_SAFE_INTEGER) || a.i - b.i)
    .map(({ l }) => l.href);
  return [...new Set(mirrors), entry.loc];
}

/** One change to apply: the last of the changes to one resource within a Change List (or manifest). */
export interface PlannedChange {
  readonly uri: string;
  /** `created`, `updated` or `deleted`. */
  readonly change: 'created' | 'updated' | 'deleted';
  /**
   * The change's `datetime` (W3C Datetime text as given) when {@link dated}; for an undated change, the latest
   * of the watermark and the dated change listed before it (see the module comment), or
   * `1970-01-01T00:00:00Z` when there is neither.
   */
  readonly datetime: string;
  readonly datetimeMs: number;
  /** False when the entry has no `datetime` of its own (its time is known only by its position). */
  readonly dated: boolean;
  /** The entry itself (for expected hashes, mirrors, a dump manifest's `path`). */
  readonly entry: Entry;
  /** Position of the entry in the documents given to the coalescer (1-based), for messages and ordering. */
  readonly position: number;
}

/** A change entry the planner could not use, with the reason. */
export interface RejectedChange {
  readonly position: number;
  readonly uri: string;
  readonly reason: string;
}

/** Result of {@link coalesceChanges}. */
export interface ChangePlan {
  /** Changes to apply, one per resource, in ascending datetime (ties: document order). */
  readonly changes: PlannedChange[];
  /** Dated entries whose datetime went backwards relative to the dated entry before them (§12.1). */
  readonly outOfOrder: number;
  /** First few out-of-order positions, for the report. */
  readonly outOfOrderAt: number[];
  /** Entries kept (not before the watermark) that were superseded by a later change to the same resource. */
  readonly coalesced: number;
  /** Entries before the watermark (already applied), undated ones included when their position shows it. */
  readonly before: number;
  /** Entries kept without a `datetime` of their own. */
  readonly undated: number;
  /** Entries without a usable change type, with an invalid datetime, or without `<loc>`. */
  readonly rejected: RejectedChange[];
  /**
   * Latest `datetime` among all usable dated entries (also those before the watermark), or undefined. Undated
   * entries never count: their lastmod is not a change time.
   */
  readonly latest?: string;
  readonly latestMs?: number;
}

/** The epoch, the datetime of an undated change when nothing bounds it from below. */
const EPOCH = '1970-01-01T00:00:00Z';

/**
 * The Source datetime of a deletion a baseline records for a listed resource that answered 404/410 after the
 * list's `at` (baseline.ts): a placeholder that the Change Lists since `at` must confirm. It dates before any
 * change, so a dated deletion is applied over it; {@link isChangeApplied} does not take it for an applied
 * undated deletion either.
 */
export const UNCONFIRMED_DELETION = EPOCH;

/**
 * Accumulates the entries of one Change List (or Change Dump Manifest), or of several in chronological order,
 * and coalesces them: of several changes to one resource only one is kept, the one with the latest datetime
 * when both are dated (for equal datetimes, the later entry), else the later entry. Dated entries before
 * `watermarkMs` are dropped (see the boundary rule in the module comment), and so are the undated entries
 * listed before such an entry while the dated entries are in order; other undated entries are kept (see
 * "Changes without a datetime" in the module comment). Out-of-order dated entries are counted (a Source should
 * list changes chronologically, §12.1) but still applied by this rule.
 *
 * Memory: one {@link PlannedChange} per distinct resource of the documents, plus the undated changes listed
 * since the last dated one.
 */
export class ChangeCoalescer {
  private readonly latestByUri = new Map<string, PlannedChange>();
  /** Undated changes kept since the last dated entry, with what each replaced (to drop them if they prove old). */
  private pending: { change: PlannedChange; replaced: PlannedChange | undefined }[] = [];
  private lastMs = Number.NEGATIVE_INFINITY;
  private lastDated: string | undefined;
  private position = 0;
  private outOfOrder = 0;
  private readonly outOfOrderAt: number[] = [];
  private coalesced = 0;
  private before = 0;
  private undated = 0;
  private readonly rejected: RejectedChange[] = [];
  private latest: string | undefined;
  private latestMs = Number.NEGATIVE_INFINITY;
  private readonly watermark: string | undefined;

  /**
   * @param watermarkMs the watermark in ms since the epoch (changes before it are dropped), or undefined
   * @param watermark the same as W3C Datetime text, the datetime given to undated changes (defaults to the
   *   ISO form of `watermarkMs`)
   */
  constructor(
    private readonly watermarkMs: number | undefined,
    watermark?: string,
  ) {
    this.watermark = watermark ?? (watermarkMs === undefined ? undefined : new Date(watermarkMs).toISOString());
  }

  add(entry: Entry): void {
    const position = ++this.position;
    const md = entry.md;
    const change = md?.change;
    if (change !== 'created' && change !== 'updated' && change !== 'deleted') {
      this.reject(position, entry.loc, `change type ${JSON.stringify(change ?? '')} is not created/updated/deleted`);
      return;
    }
    if (entry.loc === '') {
      this.reject(position, entry.loc, 'missing <loc>');
      return;
    }
    // `datetime` is optional (§7, §12.1); <lastmod> is not a change time (see the module comment).
    const datetime = md?.datetime;
    if (datetime === undefined) {
      this.addUndated(entry, change, position);
      return;
    }
    const parsed = parseDatetime(datetime);
    if (parsed === undefined) {
      this.reject(position, entry.loc, `invalid datetime ${JSON.stringify(datetime)}`);
      return;
    }
    const ms = parsed.ms;
    const inOrder = ms >= this.lastMs;
    if (!inOrder) {
      this.outOfOrder++;
      if (this.outOfOrderAt.length < 10) this.outOfOrderAt.push(position);
    } else {
      this.lastMs = ms;
      this.lastDated = datetime;
    }
    if (ms > this.latestMs) {
      this.latestMs = ms;
      this.latest = datetime;
    }
    if (this.watermarkMs !== undefined && ms < this.watermarkMs) {
      this.before++;
      // Listed in order after the undated changes kept so far and still before the watermark: so are they.
      if (inOrder && this.outOfOrder === 0) this.dropPending();
      return;
    }
    this.pending = [];
    const prev = this.latestByUri.get(entry.loc);
    if (prev !== undefined) {
      this.coalesced++;
      if (prev.dated && prev.datetimeMs > ms) return; // an older change listed later: keep the newer one
    }
    this.latestByUri.set(entry.loc, { uri: entry.loc, change, datetime, datetimeMs: ms, dated: true, entry, position });
  }

  private addUndated(entry: Entry, change: PlannedChange['change'], position: number): void {
    // The latest known time the resource's state is current at: the watermark or the dated change before it.
    let datetime = this.watermark;
    let ms = this.watermarkMs;
    if (this.lastDated !== undefined && (ms === undefined || this.lastMs > ms)) {
      datetime = this.lastDated;
      ms = this.lastMs;
    }
    const planned: PlannedChange = {
      uri: entry.loc,
      change,
      datetime: datetime ?? EPOCH,
      datetimeMs: ms ?? 0,
      dated: false,
      entry,
      position,
    };
    const prev = this.latestByUri.get(entry.loc);
    if (prev !== undefined) this.coalesced++;
    this.undated++;
    this.latestByUri.set(entry.loc, planned); // listed later: it wins (position order, §12.1)
    // Only a later dated entry before the watermark, with every dated entry in order, can drop it again.
    if (this.watermarkMs !== undefined && this.outOfOrder === 0) this.pending.push({ change: planned, replaced: prev });
  }

  /** The undated changes kept since the last dated entry prove to be before the watermark: forget them. */
  private dropPending(): void {
    for (let i = this.pending.length - 1; i >= 0; i--) {
      const { change, replaced } = this.pending[i] as (typeof this.pending)[number];
      this.undated--;
      this.before++;
      if (replaced !== undefined) this.coalesced--;
      if (this.latestByUri.get(change.uri) !== change) continue;
      if (replaced === undefined) this.latestByUri.delete(change.uri);
      else this.latestByUri.set(change.uri, replaced);
    }
    this.pending = [];
  }

  private reject(position: number, uri: string, reason: string): void {
    if (this.rejected.length < 100) this.rejected.push({ position, uri, reason });
  }

  /** The plan; the coalescer should not be used afterwards. */
  finish(): ChangePlan {
    const changes = [...this.latestByUri.values()].sort(
      (a, b) => a.datetimeMs - b.datetimeMs || a.position - b.position,
    );
    const plan: {
      -readonly [K in keyof ChangePlan]: ChangePlan[K];
    } = {
      changes,
      outOfOrder: this.outOfOrder,
      outOfOrderAt: this.outOfOrderAt,
      coalesced: this.coalesced,
      before: this.before,
      undated: this.undated,
      rejected: this.rejected,
    };
    if (this.latest !== undefined) {
      plan.latest = this.latest;
      plan.latestMs = this.latestMs;
    }
    return plan;
  }
}

/** Coalesces a whole array of change entries (see {@link ChangeCoalescer}). */
export function coalesceChanges(entries: Iterable<Entry>, watermark?: string): ChangePlan {
  const c = new ChangeCoalescer(watermark === undefined ? undefined : parseDatetime(watermark)?.ms, watermark);
  for (const e of entries) c.add(e);
  return c.finish();
}

/**
 * True when a planned change is already reflected by the local record, so re-running after a crash does not
 * fetch it again: the record carries a datetime later than the change, or the same datetime and (for a
 * creation or update carrying a hash) the same hash. Equal datetimes without a hash are re-applied.
 *
 * An undated change (see the module comment) is compared by content only: a deletion is applied when the record
 * is deleted; a creation or update when the record is not deleted and matches the entry by hash, or else by
 * length and lastmod ({@link isUpToDate} without looking at the file).
 */
export function isChangeApplied(rec: LocalRecord | undefined, change: PlannedChange): boolean {
  if (!change.dated) {
    if (rec === undefined) return false;
    if (change.change === 'deleted') return rec.deleted === true && rec.sourceDatetime !== UNCONFIRMED_DELETION;
    return isUpToDate(rec, expectedOf(change.entry));
  }
  if (rec?.sourceDatetime === undefined) return false;
  const recMs = parseDatetime(rec.sourceDatetime)?.ms;
  if (recMs === undefined) return false;
  if (recMs > change.datetimeMs) return true;
  if (recMs < change.datetimeMs) return false;
  if (change.change === 'deleted') return rec.deleted === true;
  if (rec.deleted === true) return false;
  const expected = expectedOf(change.entry);
  if (expected.hashes === undefined) return false;
  return hashesMatch(expected.hashes, recordHashes(rec)) === true;
}

/** A document of a Change List Index (or a Change Dump) with its interval. */
export interface IntervalDocument {
  readonly url: string;
  readonly from?: string;
  readonly until?: string;
  /**
   * `<lastmod>` of the index entry: when the document last changed, i.e. (for a Change List or a Change Dump
   * package) no later than its latest change.
   */
  readonly lastmod?: string;
  /** Position in its index, to keep document order for equal `from`. */
  readonly position: number;
}

/**
 * The documents to read for an incremental run from `watermark`, in chronological order: those whose `until`
 * is after the watermark (or absent: an open list), except a document whose `<lastmod>` in the index says it
 * last changed before the watermark (see {@link changedBefore}). Documents without `from` sort first, in index
 * order.
 */
export function selectIntervals<T extends IntervalDocument>(docs: readonly T[], watermark: string | undefined): T[] {
  const wm = watermark === undefined ? undefined : parseDatetime(watermark)?.ms;
  const ms = (t: string | undefined): number =>
    t === undefined ? Number.NEGATIVE_INFINITY : (parseDatetime(t)?.ms ?? Number.NEGATIVE_INFINITY);
  return docs
    .filter(
      (d) =>
        wm === undefined ||
        ((d.until === undefined || parseDatetime(d.until) === undefined || ms(d.until) > wm) &&
          !changedBefore(d.lastmod, wm)),
    )
    .sort((a, b) => ms(a.from) - ms(b.from) || a.position - b.position);
}

/**
 * True when a document's `<lastmod>` shows it has not changed since before `wmMs`: every change it lists is
 * then before the watermark, and {@link ChangeCoalescer} would drop them all, so reading it (an open Change
 * List re-read on every run, thousands of entries) can be skipped. Only a lastmod precise to the second is
 * trusted, read as the end of that second; a coarser one ("2013-01-02") may hide later changes of that day.
 */
export function changedBefore(lastmod: string | undefined, wmMs: number): boolean {
  const p = lastmod === undefined ? undefined : parseDatetime(lastmod);
  if (p === undefined || (p.precision !== 'second' && p.precision !== 'fraction')) return false;
  return p.ms + (p.precision === 'second' ? 999 : 0) < wmMs;
}

/**
 * The earliest `from` the Source still offers, when it is after the watermark: the changes between the two
 * are gone (a gap, §12.2) and only a new baseline can close it. `undefined` when there is no gap.
 */
export function findGap(
  docs: readonly IntervalDocument[],
  indexFrom: string | undefined,
  watermark: string,
): string | undefined {
  const wm = parseDatetime(watermark)?.ms;
  if (wm === undefined) return undefined;
  let earliest: { text: string; ms: number } | undefined;
  const consider = (t: string | undefined): void => {
    const p = t === undefined ? undefined : parseDatetime(t);
    if (p !== undefined && (earliest === undefined || p.ms < earliest.ms)) earliest = { text: t as string, ms: p.ms };
  };
  for (const d of docs) consider(d.from);
  if (earliest === undefined) consider(indexFrom);
  if (earliest === undefined) return undefined;
  return earliest.ms > wm ? earliest.text : undefined;
}

/** True when content with `actual` length and hashes is what `expected` declares (a common hash agrees). */
export function hashesMatchExpected(expected: ExpectedContent, actual: { length: number; hashes: Hashes }): boolean {
  if (expected.length !== undefined && expected.length !== actual.length) return false;
  if (expected.hashes === undefined) return false;
  return hashesMatch(expected.hashes, actual.hashes) === true;
}
