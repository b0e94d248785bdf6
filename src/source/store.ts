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
import type { Hashes } from '../core/hash.js';

/** A resource as held in the inventory. */
export interface ResourceRecord {
  readonly uri: string;
  /** Name of the set (Capability List) the resource belongs to. */
  readonly setName: string;
  readonly length: number;
  /** Media type (from a maintained MIME database in the directory mode). */
  readonly type?: string;
  readonly hashes: Hashes;
  /** Last modification, UTC epoch ms. */
  readonly lastmodMs: number;
  /** Opaque identity used for change detection (directory mode: `size:mtimeNs:ino`). */
  readonly fileId?: string;
}

/** A change as recorded in the log. `seq` has no gaps; `datetimeMs` never decreases with `seq`. */
export interface ChangeRecord {
  readonly seq: number;
  readonly uri: string;
  readonly change: ChangeType;
  readonly datetimeMs: number;
  readonly setName: string;
  readonly length?: number;
  readonly type?: string;
  readonly hashes: Hashes;
  readonly lastmodMs?: number;
}

/** A change to record. For `created`/`updated`, `length`, `hashes` and `lastmodMs` describe the new state. */
export interface ChangeInput {
  readonly uri: string;
  readonly change: ChangeType;
  readonly setName: string;
  readonly length?: number;
  readonly type?: string;
  readonly hashes?: Hashes;
  readonly lastmodMs?: number;
  readonly fileId?: string;
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
  /** Version of one set: bumped by every write transaction touching it. */
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

/**
 * Inventory + change log. Implementations must record each {@link recordChanges} batch in one transaction
 * with the inventory update, keep `seq` gapless and `datetimeMs` non-decreasing, and survive a crash at any
 * point with either the whole batch or none of it.
 *
 * What a second backend (PostgreSQL) has to do, besides the obvious tables (`resources` keyed by `uri`,
 * `changes` keyed by a gapless `seq`, `change_lists`, `meta`):
 * - in the batch transaction: take the datetime as max(now, last change datetime, snapshot floor), apply
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
  /** Version of one set: bumped by every write transaction touching it (documents of the set depend on it). */
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
