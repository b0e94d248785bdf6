/**
 * The Source store: an inventory of resources plus an append-only change log (§12: a Change List is a view
 * of this log), with the metadata the document generator needs (change-list rotation boundaries, cache keys).
 *
 * Every method is asynchronous so a server-grade backend (PostgreSQL) can implement the same interface; the
 * embedded default is {@link openSqliteStore} in `sqlite-store.ts`. No SQL leaves the backend.
 *
 * Keys: a resource is identified by `uri`, either a path relative to the Source's base URL (unencoded,
 * `/`-separated, no leading `/`: the directory mode uses the file's relative path) or an absolute http(s) URI.
 *
 * @module
 */
import type { ChangeType } from '../core/constants.js';
import { ResourceSyncError } from '../core/errors.js';
import type { Hashes } from '../core/hash.js';

/**
 * A link from a resource to a related resource (§14), emitted as `<rs:ln>` in the resource's entries of
 * Resource Lists, Change Lists and dump manifests: `describedby` / `describes` (a metadata record and the
 * resource it describes, §14.5), `alternate` / `canonical` (other representations, §14.3), `duplicate` (a
 * mirror, §14.2), `via` (provenance, §14.8), `collection` (membership, §14.7), `memento`, a patch's URI ...
 */
export interface ResourceLink {
  /** Relation type: a registered name or a URI (§7). */
  readonly rel: string;
  /**
   * The related resource: an absolute URI (any scheme, emitted as it is) or, like {@link ResourceRecord.uri},
   * a path relative to the Source's base URL (unencoded, no leading `/`), resolved and encoded when emitted.
   */
  readonly href: string;
  /** Media type of the related resource. */
  readonly type?: string;
  /** Length in bytes of the related resource. */
  readonly length?: number;
  readonly hashes?: Hashes;
  /** Last modification of the related resource, UTC epoch ms (`modified`). */
  readonly modifiedMs?: number;
  /** Priority among links of the same `rel`, 1 (highest) to 999,999. */
  readonly pri?: number;
  /** Content coding of the related resource. */
  readonly encoding?: string;
  /** Path of the related bitstream inside a dump package (manifests only). */
  readonly path?: string;
}

/** Most links one resource may carry (a bound on what a store row and a document entry hold). */
export const MAX_LINKS_PER_RESOURCE = 64;

/**
 * What the documents of a set show of a stored resource: a stored row (as both stores name their columns) but
 * its `file_id`.
 */
export interface ShownRow {
  uri: string;
  set_name: string;
  length: number;
  type: string | null;
  md5: string | null;
  sha1: string | null;
  sha256: string | null;
  lastmod_ms: number;
  /** JSON ({@link ResourceLink}[]), as the stores keep it. */
  links: string | null;
}

/**
 * True when a stored row and the row replacing it differ at most in `file_id` (the file identity the scan's quick
 * check uses): no document of the set shows it, so an inventory-only write of it leaves the set's version
 * ({@link SourceStore.setVersion}).
 */
export function sameShown(old: ShownRow | undefined, row: ShownRow): boolean {
  return (
    old !== undefined &&
    old.set_name === row.set_name &&
    old.length === row.length &&
    old.type === row.type &&
    old.md5 === row.md5 &&
    old.sha1 === row.sha1 &&
    old.sha256 === row.sha256 &&
    old.lastmod_ms === row.lastmod_ms &&
    old.links === row.links
  );
}

/**
 * Checks the links of a change (every backend calls it in {@link SourceStore.recordChanges}, before writing):
 * `rel` and `href` non-empty without control characters, `length` a safe integer >= 0, `pri` 1..999,999,
 * `modifiedMs` a safe integer, at most {@link MAX_LINKS_PER_RESOURCE}.
 * @throws ResourceSyncError `RS_INVALID_VALUE` naming the resource, the link (1-based) and the field.
 */
export function checkLinks(uri: string, links: readonly ResourceLink[] | undefined): void {
  if (links === undefined) return;
  const fail = (msg: string): never => {
    throw new ResourceSyncError('RS_INVALID_VALUE', `${uri}: ${msg}`);
  };
  if (!Array.isArray(links)) fail('links must be an array');
  if (links.length > MAX_LINKS_PER_RESOURCE) fail(`${links.length} links, at most ${MAX_LINKS_PER_RESOURCE}`);
  links.forEach((l, i) => {
    const at = `link ${i + 1}`;
    if (l === null || typeof l !== 'object') fail(`${at} is not an object`);
    for (const f of ['rel', 'href'] as const)
      if (typeof l[f] !== 'string' || l[f] === '' || CONTROL.test(l[f])) fail(`${at}: ${f} must be a non-empty string`);
    for (const f of ['type', 'encoding', 'path'] as const)
      if (l[f] !== undefined && (typeof l[f] !== 'string' || CONTROL.test(l[f]!))) fail(`${at}: ${f} must be a string`);
    if (l.length !== undefined && !(Number.isSafeInteger(l.length) && l.length >= 0))
      fail(`${at}: length must be an integer >= 0, not ${String(l.length)}`);
    if (l.pri !== undefined && !(Number.isInteger(l.pri) && l.pri >= 1 && l.pri <= 999_999))
      fail(`${at}: pri must be an integer 1..999999, not ${String(l.pri)}`);
    if (l.modifiedMs !== undefined && !Number.isSafeInteger(l.modifiedMs))
      fail(`${at}: modifiedMs must be an integer (epoch ms), not ${String(l.modifiedMs)}`);
    if (l.hashes !== undefined) {
      if (l.hashes === null || typeof l.hashes !== 'object') fail(`${at}: hashes must be an object`);
      for (const [alg, v] of Object.entries(l.hashes))
        if (typeof v !== 'string' || !/^[0-9a-fA-F]+$/.test(v)) fail(`${at}: hash ${alg} must be hex digits`);
    }
  });
}

/** C0 controls and DEL: never in an attribute we write. */
const CONTROL = /[\u0000-\u001f\u007f]/;

/** A resource as held in the inventory. */
export interface ResourceRecord {
  uri: string;
  /** Name of the set (Capability List) the resource belongs to. */
  readonly setName: string;
  length: number;
  /** Media type (from a maintained MIME database in the directory mode). */
  readonly type?: string;
  readonly hashes: Hashes;
  /** Last modification, UTC epoch ms. */
  readonly lastmodMs: number;
  /** Opaque identity used for change detection (directory mode: `size:mtimeNs:ino`). */
  readonly fileId?: string;
  /** Links to related resources (§14), in order; absent when there are none. */
  readonly links?: readonly ResourceLink[];
}

/**
 * How far ahead of the clock {@link nextChangeDatetime} may date a change to keep it distinct from the one
 * before (1 s: a burst of up to 1,000 changes within one millisecond still gets distinct datetimes).
 */
export const MAX_DATETIME_LEAD_MS = 1000;

/**
 * The datetime of the next logged change (every backend uses it, per change, in {@link SourceStore.recordChanges}):
 * the clock, but at least 1 ms after the previous change (so changes have distinct, increasing datetimes, which
 * the reference client needs: several changes sharing one datetime are legal, but its pruning loses some), not
 * more than {@link MAX_DATETIME_LEAD_MS} ahead of the clock for that (beyond it, changes share a datetime), and
 * never before the previous change or `floorMs` (a snapshot's `at` + 1).
 *
 * @example
 * ```ts
 * nextChangeDatetime(1000, 1000) === 1001  // same millisecond: one step on
 * nextChangeDatetime(1000, 5000) === 5000  // the clock moved on
 * ```
 */
export function nextChangeDatetime(previousMs: number | undefined, nowMs: number, floorMs = 0): number {
  if (previousMs === undefined) return Math.max(nowMs, floorMs);
  const distinct = Math.min(Math.max(nowMs, previousMs + 1), nowMs + MAX_DATETIME_LEAD_MS);
  return Math.max(distinct, previousMs, floorMs);
}

/**
 * A change as recorded in the log. `seq` has no gaps; `datetimeMs` increases with `seq` (strictly, as far as
 * {@link nextChangeDatetime} allows; never decreases).
 */
export interface ChangeRecord {
  readonly seq: number;
  uri: string;
  readonly change: ChangeType;
  readonly datetimeMs: number;
  readonly setName: string;
  readonly length?: number;
  readonly type?: string;
  readonly hashes: Hashes;
  readonly lastmodMs?: number;
  /** Links of the new state (§14); absent when there are none (always for `deleted`). */
  readonly links?: readonly ResourceLink[];
}

/** A change to record. For `created`/`updated`, `length`, `hashes` and `lastmodMs` describe the new state. */
export interface ChangeInput {
  uri: string;
  readonly change: ChangeType;
  readonly setName: string;
  readonly length?: number;
  readonly type?: string;
  readonly hashes?: Hashes;
  readonly lastmodMs?: number;
  readonly fileId?: string;
  /**
   * Links of the new state (§14), checked with {@link checkLinks}; replace the resource's links (none when
   * absent). Ignored for `deleted`.
   */
  readonly links?: readonly ResourceLink[];
}

/** One Change List of a set: a contiguous range of its changes. The last one of a set is open. */
export interface ChangeListPart {
  readonly setName: string;
  /** 1-based, per set. */
  readonly number: number;
  readonly fromMs: number;
  /** Absent while the part is open (the current Change List). */
  readonly untilMs?: number;
  /** Number of changes in the part. */
  readonly count: number;
  /** Highest seq in the part (0 when empty). */
  readonly lastSeq: number;
}

/** When a Change List is closed and a new one opened (§12.2). */
export interface RotationPolicy {
  /** Close a part when it holds this many changes (default 50,000, §4.2). */
  readonly maxEntries?: number;
  /** Close a part when a change arrives this long after the part's `from` (default: never). */
  readonly periodMs?: number;
}

/** Options of {@link SourceStore.recordChanges}. */
export interface RecordOptions {
  /**
   * `false`: update the inventory only, without log entries (the baseline inventory of a new collection,
   * which the Resource List describes; the change log starts after it). Default true.
   */
  readonly log?: boolean;
  /** Rotation policy for the Change Lists (see {@link RotationPolicy}). */
  readonly rotation?: RotationPolicy;
}

/** The position of the log. */
export interface StoreHead {
  /** Highest seq (0 when the log is empty). */
  readonly seq: number;
  /** Bumped by every write transaction, including inventory-only ones. */
  readonly version: number;
  /** Datetime of the last change, UTC ms (undefined when the log is empty). */
  readonly datetimeMs?: number;
}

/** Selection of changes. */
export interface ChangeQuery {
  readonly setName?: string;
  /** Only changes with seq > afterSeq. */
  readonly afterSeq?: number;
  /** Only changes with seq <= throughSeq. */
  readonly throughSeq?: number;
}

/**
 * A consistent read view of the store (a read transaction): what it returns does not move while changes
 * are recorded. Close it when done. Memory: iterators hold one row at a time. Use one iterator of a snapshot
 * at a time (the SQLite cursor holds the snapshot's connection); other calls may interleave with the store.
 */
export interface StoreSnapshot {
  readonly head: StoreHead;
  /** Start of the snapshot, UTC ms: no change recorded after the snapshot gets a datetime <= this. */
  readonly atMs: number;
  countResources(setName?: string): Promise<number>;
  /** Version of one set: see {@link SourceStore.setVersion}. */
  setVersion(setName: string): Promise<number>;
  /** Resources in `uri` order (binary). */
  resources(setName?: string): AsyncGenerator<ResourceRecord, void, undefined>;
  /**
   * Optional fast path: the same records as {@link resources}, pulled synchronously (no promise per row), for
   * generating large Resource Lists. Memory: one row at a time. The `setName` and `fileId` fields may be left
   * out (a Resource List does not need them).
   */
  resourcesSync?(setName?: string): Iterable<ResourceRecord>;
  /** Changes in seq order. */
  changes(query?: ChangeQuery): AsyncGenerator<ChangeRecord, void, undefined>;
  changeListParts(setName: string): Promise<ChangeListPart[]>;
  close(): Promise<void>;
}

/** A lock held with {@link SourceStore.lockShared}. */
export interface SharedLock {
  /** False once the lock was lost (its connection broke): another process may hold it now. */
  readonly held: boolean;
  /** Releases it (idempotent; never throws). */
  release(): Promise<void>;
}

/**
 * Inventory + change log. Implementations must record each {@link recordChanges} batch in one transaction
 * with the inventory update, keep `seq` gapless and `datetimeMs` non-decreasing, and survive a crash at any
 * point with either the whole batch or none of it.
 *
 * What a second backend (PostgreSQL) has to do, besides the obvious tables (`resources` keyed by `uri`,
 * `changes` keyed by a gapless `seq`, `change_lists`, `meta`):
 * - in the batch transaction: date each logged change with {@link nextChangeDatetime} (from the last change's
 *   datetime, the clock and the snapshot floor), check each change's links with {@link checkLinks}, apply
 *   the {@link RotationPolicy} to the set's open Change List (close it with `until` = the arriving change's
 *   datetime and open the next with the same `from`), and bump the global and per-set versions;
 *   serialise writers (one batch at a time: `SELECT ... FOR UPDATE` on the open part, or an advisory lock),
 *   since a gapless `seq` cannot come from a sequence;
 * - {@link snapshot}: a REPEATABLE READ transaction; `atMs` as above, and no later change dated at or before it;
 * - compare `uri` in binary (`COLLATE "C"`), the order the directory scan merges in.
 */
export interface SourceStore {
  /** Where the store lives (for messages). */
  readonly location: string;
  head(): Promise<StoreHead>;
  getResource(uri: string): Promise<ResourceRecord | undefined>;
  /**
   * Optional fast path for a server's lookups: the records whose key is `uri` or follows it (binary order), at
   * most `limit`, read at once and synchronously (the first one is `uri`'s own record when there is one).
   * Memory: `limit` records.
   */
  resourcesFromSync?(uri: string, limit: number): ResourceRecord[];
  /**
   * Optional, for caches in front of the store: the record {@link getResource} returns after `change` (a
   * created or updated resource) was recorded, computed without reading the store; undefined when it cannot
   * be known beforehand (a deletion, no `lastmodMs`, a value the backend would not keep as it is).
   */
  recordOf?(change: ChangeInput): ResourceRecord | undefined;
  /**
   * Optional, for stores several processes share (PostgreSQL): calls `listener` with the changes that other
   * processes record, in seq order, each once, so that every server tells its subscribers of every change.
   * Returns a function that stops it.
   */
  watch?(listener: (changes: readonly ChangeRecord[]) => void): () => void;
  /**
   * Optional, for stores several processes share (PostgreSQL): takes the exclusive lock `name`, held against
   * every process using the store until released or until this process goes (its connection closes: a killed
   * holder leaves nothing stuck). Waits up to `waitMs`; undefined when it is still held by another then.
   * The Source takes one per document group it generates, so that several servers generate each once.
   */
  lockShared?(name: string, waitMs: number): Promise<SharedLock | undefined>;
  /**
   * Version of one set: bumped by every write transaction that changes what the set's documents show (documents
   * of the set are regenerated when it moved). An inventory-only write that changes nothing but resources'
   * `fileId` (a rescan clearing a racy mark after re-hashing the same bytes) leaves it, so an unchanged
   * collection keeps its documents (same `at`, bytes and ETag); both stores keep this (a store that bumped it
   * anyway would only cost a regeneration).
   */
  setVersion(setName: string): Promise<number>;
  countResources(setName?: string): Promise<number>;
  /**
   * Resources in binary `uri` order, paged (keyset) so writes may interleave; not a consistent view (use
   * {@link snapshot} for that). Memory: one page (`pageSize`, default 1,000 rows).
   */
  resources(options?: {
    readonly setName?: string;
    readonly after?: string;
    readonly pageSize?: number;
  }): AsyncGenerator<ResourceRecord, void, undefined>;
  /** Records a batch of changes (and updates the inventory) atomically; returns them with seq and datetime. */
  recordChanges(changes: readonly ChangeInput[], options?: RecordOptions): Promise<ChangeRecord[]>;
  /** Names of the sets with resources or changes. */
  setNames(): Promise<string[]>;
  /** Change Lists of a set, oldest first (an open one is created when the set has none). */
  changeListParts(setName: string): Promise<ChangeListPart[]>;
  snapshot(): Promise<StoreSnapshot>;
  getMeta(key: string): Promise<string | undefined>;
  setMeta(key: string, value: string | undefined): Promise<void>;
  close(): Promise<void>;
}
