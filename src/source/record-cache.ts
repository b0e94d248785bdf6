/**
 * A bounded cache of inventory records in front of a {@link SourceStore}, for the resource lookups of a server:
 * a GET needs the stored record (hash for the ETag, media type, last modification, file identity) of the file
 * it serves, and a Destination harvesting a Resource List asks for the resources in the list's order, which is
 * the store's order (binary on the key). So a miss also reads the records that follow it (one range query,
 * {@link SourceStore.resourcesFromSync} when the store has it), as long as such read-ahead turns out to be
 * used; with requests in no particular order it soon stops (a miss is then one equality lookup, and one miss
 * in {@link PROBE_EVERY} reads ahead again to notice when the order comes back).
 *
 * Correctness does not rest on the cache alone: the caller still compares the record's file identity with the
 * file it opened (a changed file takes the full way), and the owner tells the cache about every write to the
 * store: {@link RecordCache.invalidate} forgets everything; around a write of its own whose changes it knows,
 * {@link RecordCache.writing} and {@link RecordCache.written} replace just the records of those changes with what the store now holds for
 * them ({@link SourceStore.recordOf}), so that the files a scan just found changed, which a Destination reading
 * the Change Lists asks for next, are served without a store lookup each. Either way a write racing with a
 * lookup leaves nothing stale behind: a lookup that saw a write start or end while it ran does not fill the
 * cache.
 *
 * Memory: at most `maxEntries` records (default 4,096; a record is a few hundred bytes), plus one read-ahead
 * batch of `readAhead` records.
 *
 * @module
 */
import type { ChangeInput, ResourceRecord, SourceStore } from './store.js';

/** Options of {@link RecordCache}. */
export interface RecordCacheOptions {
  /** Records kept at most (oldest dropped first). Default 4,096. */
  readonly maxEntries?: number;
  /** Records read after a miss, in key order. Default 63; 0 disables read-ahead. */
  readonly readAhead?: number;
}

/** A miss without read-ahead (which was not used lately) still reads ahead every this many misses. */
const PROBE_EVERY = 64;

interface Cached {
  readonly record: ResourceRecord;
  /** Brought in by a read-ahead and not asked for yet. */
  ahead: boolean;
}

/** See the module comment. */
export class RecordCache {
  readonly #store: SourceStore;
  readonly #maxEntries: number;
  readonly #readAhead: number;
  readonly #entries = new Map<string, Cached>();
  /** Bumped by {@link invalidate}: a lookup fills the cache only when it did not change meanwhile. */
  #generation = 0;
  /** Records the last read-ahead read (new or already held), and how many of those it brought in were asked for since. */
  #aheadRead = 0;
  #aheadUsed = 0;
  #missesSinceAhead = 0;

  constructor(store: SourceStore, options: RecordCacheOptions = {}) {
    this.#store = store;
    this.#maxEntries = Math.max(1, options.maxEntries ?? 4096);
    this.#readAhead = Math.max(0, Math.min(options.readAhead ?? 63, this.#maxEntries - 1));
  }

  /** Number of records held (for tests). */
  get size(): number {
    return this.#entries.size;
  }

  /** Forgets everything; lookups running now will not fill the cache. Call before and after a store write. */
  invalidate(): void {
    this.#generation++;
    this.#entries.clear();
  }

  /** Forgets the records of `changes`; lookups running now will not fill the cache. */
  #forget(changes: readonly ChangeInput[]): void {
    this.#generation++;
    for (const c of changes) this.#entries.delete(c.uri);
  }

  /**
   * Call right before `changes` are recorded in the store (by the owner, who then calls {@link written}, or
   * {@link invalidate} when the write failed): their records are forgotten, every other record stays (the write
   * does not touch them); lookups running now will not fill the cache. Returns the token {@link written} needs.
   */
  writing(changes: readonly ChangeInput[]): number {
    this.#forget(changes);
    return this.#generation;
  }

  /**
   * Call right after `changes` were recorded in the store, with the token {@link writing} gave: the records of
   * those resources become what the store now holds (deleted ones, and ones whose stored record the store
   * cannot tell beforehand, are forgotten; of a batch larger than the cache, the first `maxEntries` are kept),
   * every other record stays; lookups running now will not fill the cache. When the cache heard of another
   * write since {@link writing} ({@link invalidate}), or without {@link SourceStore.recordOf}, it is cleared
   * instead: what the store holds is then not known here.
   *
   * Memory: the bound of the cache holds (the oldest records make room).
   */
  written(changes: readonly ChangeInput[], token: number): void {
    const recordOf = this.#store.recordOf?.bind(this.#store);
    if (recordOf === undefined || token !== this.#generation) {
      this.invalidate();
      return;
    }
    this.#forget(changes);
    let kept = 0;
    // The last change of a resource in the batch is the one the store holds.
    const last = new Map<string, ChangeInput>();
    for (const c of changes) last.set(c.uri, c);
    for (const c of last.values()) {
      if (kept >= this.#maxEntries) break;
      const record = recordOf(c);
      if (record === undefined || record.uri !== c.uri) continue;
      this.#put(c.uri, { record, ahead: false });
      kept++;
    }
  }

  /** The stored record of `uri` (as {@link SourceStore.getResource}), from the cache when it holds it. */
  async get(uri: string): Promise<ResourceRecord | undefined> {
    const hit = this.#entries.get(uri);
    if (hit !== undefined) {
      if (hit.ahead) {
        hit.ahead = false;
        this.#aheadUsed++;
      }
      return hit.record;
    }
    // Read ahead while it pays: at least a quarter of the records the last read-ahead read were new and asked
    // for before this miss (or as an occasional probe).
    this.#missesSinceAhead++;
    const ahead =
      this.#readAhead > 0 && (this.#aheadUsed * 4 >= this.#aheadRead || this.#missesSinceAhead >= PROBE_EVERY);
    const generation = this.#generation;
    let record: ResourceRecord | undefined;
    let batch: ResourceRecord[] = [];
    if (ahead && this.#store.resourcesFromSync !== undefined) {
      // One query for the record and the ones after it.
      batch = this.#store.resourcesFromSync(uri, 1 + this.#readAhead);
      if (batch[0]?.uri === uri) record = batch.shift();
    } else {
      // (An equality lookup: cheaper than a range of one.)
      record = await this.#store.getResource(uri);
      if (ahead && record !== undefined && generation === this.#generation)
        for await (const r of this.#store.resources({ after: uri, pageSize: this.#readAhead })) {
          batch.push(r);
          if (batch.length >= this.#readAhead) break;
        }
    }
    if (generation !== this.#generation) return record;
    if (record !== undefined) this.#put(uri, { record, ahead: false });
    if (ahead) {
      for (const r of batch) if (!this.#entries.has(r.uri)) this.#put(r.uri, { record: r, ahead: true });
      // Judged against what was read: a batch mostly held already did not pay either.
      this.#aheadRead = batch.length;
      this.#aheadUsed = 0;
      this.#missesSinceAhead = 0;
    }
    return record;
  }

  #put(uri: string, entry: Cached): void {
    if (this.#entries.size >= this.#maxEntries) {
      const oldest = this.#entries.keys().next();
      if (oldest.done !== true) this.#entries.delete(oldest.value);
    }
    this.#entries.set(uri, entry);
  }
}
