/**
 * The adapter API: publish any repository (a database, DSpace, Fedora, a cloud bucket ...) as a ResourceSync
 * Source. The repository says what it holds ({@link Repository.list}) and, optionally, what changed since a
 * cursor ({@link Repository.changes}); records carry `uri`, `length`, `hashes`, `type`, `lastmod` and
 * per-resource `links` (§14). Bytes come from the repository itself ({@link Repository.open}: a callback
 * returning a stream), from an origin the Source proxies ({@link Repository.origin}), or from the copies the
 * Source keeps of what it read (the blob store). {@link openRepositorySource} returns a `SourceSite`, which
 * `createSourceServer` serves; changes pushed by the repository's own hooks go to {@link RepositorySource.record}.
 *
 * Fixity: a record without `length` or `hashes` is read once (through `open` / `origin`) and hashed (md5 and
 * sha-256), so what the lists say is what is served; bytes served from `open` / `origin` are checked against
 * the listed length and sha-256 (or md5) while they are read, and a mismatch is not served (the resource
 * changed under us: `pull()` or `sync()` will record it).
 *
 * State directory: `source.db` (the store: inventory, change log, the feed cursor), `blobs/` (versions kept
 * for Change Dumps and bytes read from the repository, bounded), `site/` (generated documents).
 *
 * @example
 * ```ts
 * import { createSourceServer, openRepositorySource } from 'resourcesync/source';
 * const site = await openRepositorySource({
 *   baseUrl: 'http://localhost:8080/',
 *   stateDir: './state',
 *   repository: {
 *     async *list() { for (const row of db.rows()) yield { uri: `items/${row.id}.txt`, lastmod: row.updated } },
 *     async changes(cursor) { return db.eventsAfter(cursor) },   // { changes, cursor }
 *     open: (r) => db.bytesOf(r.uri),                              // AsyncIterable<Uint8Array>
 *   },
 * });
 * await site.sync();           // baseline: inventory only, the change log starts after it
 * site.start({ intervalMs: 5000 });
 * const server = await createSourceServer(site).listen(8080);
 * ```
 *
 * @module
 */
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import type { ChangeType } from '../core/constants.js';
import { datetimeMs } from '../core/datetime.js';
import { ResourceSyncError } from '../core/errors.js';
import type { Hashes } from '../core/hash.js';
import { BlobStore } from './blobs.js';
import { type Content, fileContent } from './dumps.js';
import { parseBaseUrl, requestRelativePath } from './paths.js';
import {
  type DocumentEvent,
  type RecordedChange,
  type SiteFile,
  Source,
  type SourceChange,
  type SourceLimits,
  type SourceOptions,
} from './source.js';
import { openSqliteStore } from './sqlite-store.js';
import type { ResourceLink, ResourceRecord, SourceStore } from './store.js';

/** What a repository says about one of its resources. */
export interface RepositoryRecord {
  /** Path relative to the base URL (unencoded, `/`-separated, no leading `/`) or an absolute http(s) URI. */
  readonly uri: string;
  /** Set (Capability List); default `'default'`. */
  readonly setName?: string;
  /** Bytes; when absent (or `hashes` is), the Source reads the resource once to learn it. */
  readonly length?: number;
  readonly hashes?: Hashes;
  /** Media type. */
  readonly type?: string;
  /** Last modification: W3C Datetime, epoch ms or Date (default: when the Source recorded it). */
  readonly lastmod?: string | number | Date;
  /** Links to related resources (§14): describedby metadata, alternate, duplicate mirrors, via, collection. */
  readonly links?: readonly ResourceLink[];
}

/** A change the repository reports (from its feed or pushed by a hook). */
export interface RepositoryChange extends RepositoryRecord {
  readonly change: ChangeType;
}

/** The repository side of the adapter. Only {@link list} is required. */
export interface Repository {
  /**
   * Everything the repository holds now, in any order (used by {@link RepositorySource.sync}: the baseline,
   * and a reconcile that finds what a feed missed, deletions included).
   */
  list(): AsyncIterable<RepositoryRecord>;
  /**
   * Changes after `cursor` (undefined: the start of the feed), oldest first, and the cursor to ask from next
   * time (kept in the store). A change that is already the stored state is skipped, so a feed may overlap.
   */
  changes?(
    cursor: string | undefined,
  ): Promise<{ readonly changes: readonly RepositoryChange[]; readonly cursor: string }>;
  /** The bytes of a resource's current version; undefined when the repository no longer has it. */
  open?(record: ResourceRecord): Promise<AsyncIterable<Uint8Array> | undefined> | AsyncIterable<Uint8Array> | undefined;
  /** Where the Source fetches a resource's bytes (proxy), when the repository does not {@link open} them. */
  origin?(record: ResourceRecord): string | URL | undefined;
}

/** Options of {@link openRepositorySource}. */
export interface RepositorySourceOptions {
  readonly repository: Repository;
  /** Our Source's base URL (absolute http(s)). */
  readonly baseUrl: string;
  /** State directory (see the module comment). */
  readonly stateDir: string;
  /** Store (default: SQLite in `stateDir/source.db`); it is closed with the Source. */
  readonly store?: SourceStore;
  /** Bound of the blob store (default 1 GiB; 0 keeps no copies: every request reads the repository). */
  readonly blobMaxBytes?: number;
  /** Records per store transaction in {@link RepositorySource.sync} (default 500). */
  readonly batchSize?: number;
  /** Deadline of one proxied fetch from {@link Repository.origin} (default 60 s). */
  readonly originTimeoutMs?: number;
  readonly limits?: SourceLimits;
  readonly capabilities?: SourceOptions['capabilities'];
  readonly capabilityListExtras?: SourceOptions['capabilityListExtras'];
  readonly regenerateAfterMs?: number;
  readonly fsync?: boolean;
  readonly onWarning?: (message: string) => void;
}

/** What {@link RepositorySource.sync} and {@link RepositorySource.pull} did. */
export interface AdapterReport {
  readonly created: number;
  readonly updated: number;
  readonly deleted: number;
  readonly unchanged: number;
}

/** A Source over a repository: a `SourceSite` for `createSourceServer`, plus the ways changes come in. */
export interface RepositorySource {
  readonly baseUrl: URL;
  readonly sourceDescriptionUrl: string;
  readonly source: Source;
  readonly store: SourceStore;
  /**
   * Compares the repository's {@link Repository.list} with the inventory and records the differences. On an
   * empty store it is the baseline (inventory only: the Resource List describes it, the change log starts
   * after it). Memory: the listed URIs (a set of strings) plus one batch.
   */
  sync(): Promise<AdapterReport>;
  /** Records what {@link Repository.changes} reports since the kept cursor (nothing without a feed). */
  pull(): Promise<AdapterReport>;
  /** Records changes pushed by the repository (an event hook); the same checks as {@link pull}. */
  record(changes: readonly RepositoryChange[]): Promise<AdapterReport>;
  /** Pulls every `intervalMs` (default 10 s; a failure goes to `onWarning`) until {@link stop}. */
  start(options?: { readonly intervalMs?: number }): void;
  stop(): Promise<void>;
  document(pathname: string): Promise<SiteFile | undefined>;
  resource(pathname: string): Promise<SiteFile | undefined>;
  capabilityListUrl(pathname: string): string | undefined;
  robotsTxt(): Promise<string>;
  onChange(listener: (changes: readonly RecordedChange[]) => void): () => void;
  onDocuments(listener: (events: readonly DocumentEvent[]) => void): () => void;
  close(): Promise<void>;
}

const DEFAULT_SET = 'default';
/** Resources up to this size are served from memory when read from the repository. */
const IN_MEMORY_MAX = 64 * 1024;
const CURSOR_KEY = 'adapter:cursor';

/**
 * Opens a Source over a repository (its state directory, store and Source; the repository is not asked yet).
 * @throws ResourceSyncError `RS_CONFIG` (bad base URL or limits), `RS_STORE`.
 */
export async function openRepositorySource(options: RepositorySourceOptions): Promise<RepositorySource> {
  const baseUrl = parseBaseUrl(options.baseUrl);
  const store = options.store ?? (await openSqliteStore({ path: join(options.stateDir, 'source.db') }));
  try {
    const blobs = await BlobStore.open({
      dir: join(options.stateDir, 'blobs'),
      ...(options.blobMaxBytes === undefined ? {} : { maxBytes: options.blobMaxBytes }),
    });
    const adapter = new Adapter(options, baseUrl, store, blobs);
    const source = await Source.open({
      store,
      baseUrl,
      siteDir: join(options.stateDir, 'site'),
      blobs,
      currentContent: (r) => adapter.content(r),
      ...(options.limits === undefined ? {} : { limits: options.limits }),
      ...(options.capabilities === undefined ? {} : { capabilities: options.capabilities }),
      ...(options.capabilityListExtras === undefined ? {} : { capabilityListExtras: options.capabilityListExtras }),
      ...(options.regenerateAfterMs === undefined ? {} : { regenerateAfterMs: options.regenerateAfterMs }),
      ...(options.fsync === undefined ? {} : { fsync: options.fsync }),
      ...(options.onWarning === undefined ? {} : { onWarning: options.onWarning }),
    });
    adapter.attach(source);
    return adapter;
  } catch (e) {
    await store.close().catch(() => undefined);
    throw e;
  }
}

function lastmodMs(v: string | number | Date | undefined): number | undefined {
  if (v === undefined) return undefined;
  if (typeof v === 'string') return datetimeMs(v);
  return typeof v === 'number' ? v : v.getTime();
}

function sameLinks(a: readonly ResourceLink[] | undefined, b: readonly ResourceLink[] | undefined): boolean {
  return JSON.stringify(a ?? []) === JSON.stringify(b ?? []);
}

/** True when the record says nothing the stored resource does not already say. */
function unchanged(r: RepositoryRecord, old: ResourceRecord): boolean {
  if ((r.setName ?? DEFAULT_SET) !== old.setName) return false;
  if (r.length !== undefined && r.length !== old.length) return false;
  if (r.type !== old.type) return false;
  const lm = lastmodMs(r.lastmod);
  if (lm !== undefined && lm !== old.lastmodMs) return false;
  for (const [alg, v] of Object.entries(r.hashes ?? {}))
    if (old.hashes[alg as keyof Hashes]?.toLowerCase() !== v.toLowerCase()) return false;
  // Without a length, hashes or lastmod the record tells nothing: the bytes decide (see Adapter.#apply).
  if (undecided(r)) return false;
  // The record's links are compared as the store keeps them (JSON of the same fields).
  return sameLinks(normalizeLinks(r.links), old.links);
}

/** True when a record gives neither length, hashes nor lastmod (only its bytes tell a new version). */
function undecided(r: RepositoryRecord): boolean {
  return (
    r.length === undefined && (r.hashes === undefined || Object.keys(r.hashes).length === 0) && r.lastmod === undefined
  );
}

function normalizeLinks(links: readonly ResourceLink[] | undefined): ResourceLink[] | undefined {
  if (links === undefined || links.length === 0) return undefined;
  return links.map((l) => {
    const o: { -readonly [K in keyof ResourceLink]: ResourceLink[K] } = { rel: l.rel, href: l.href };
    if (l.type !== undefined) o.type = l.type;
    if (l.length !== undefined) o.length = l.length;
    if (l.hashes !== undefined && Object.keys(l.hashes).length > 0) o.hashes = { ...l.hashes };
    if (l.modifiedMs !== undefined) o.modifiedMs = l.modifiedMs;
    if (l.pri !== undefined) o.pri = l.pri;
    if (l.encoding !== undefined) o.encoding = l.encoding;
    if (l.path !== undefined) o.path = l.path;
    return o;
  });
}

/** Reads a stream, checking it against the expected length and hashes as it goes. */
async function* checked(
  uri: string,
  body: AsyncIterable<Uint8Array>,
  expect: { readonly length: number; readonly hashes: Hashes },
): AsyncGenerator<Uint8Array, void, undefined> {
  const sha = expect.hashes['sha-256'];
  const md5 = sha === undefined ? expect.hashes.md5 : undefined;
  const h = sha !== undefined ? createHash('sha256') : md5 !== undefined ? createHash('md5') : undefined;
  let n = 0;
  for await (const chunk of body) {
    n += chunk.byteLength;
    if (n > expect.length)
      throw new ResourceSyncError('RS_LENGTH_MISMATCH', `${uri}: more than the ${expect.length} bytes listed`);
    h?.update(chunk);
    yield chunk;
  }
  if (n !== expect.length)
    throw new ResourceSyncError('RS_LENGTH_MISMATCH', `${uri}: ${n} bytes, ${expect.length} listed`);
  const want = (sha ?? md5)?.toLowerCase();
  if (h !== undefined && h.digest('hex') !== want)
    throw new ResourceSyncError(
      'RS_HASH_MISMATCH',
      `${uri}: the bytes do not match the listed ${sha !== undefined ? 'sha-256' : 'md5'}`,
    );
}

class Adapter implements RepositorySource {
  readonly baseUrl: URL;
  readonly store: SourceStore;
  #source: Source | undefined;
  readonly #options: RepositorySourceOptions;
  readonly #repo: Repository;
  readonly #blobs: BlobStore;
  /** One writer at a time (sync, pull, record), so the feed cursor and the comparisons see settled state. */
  #queue: Promise<unknown> = Promise.resolve();
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<unknown> | undefined;
  #started = false;
  #closed = false;

  constructor(options: RepositorySourceOptions, baseUrl: URL, store: SourceStore, blobs: BlobStore) {
    this.#options = options;
    this.#repo = options.repository;
    this.baseUrl = baseUrl;
    this.store = store;
    this.#blobs = blobs;
  }

  attach(source: Source): void {
    this.#source = source;
  }

  get source(): Source {
    return this.#source!;
  }

  get sourceDescriptionUrl(): string {
    return this.source.sourceDescriptionUrl;
  }

  #serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(fn, fn);
    this.#queue = run.catch(() => undefined);
    return run;
  }

  /** The bytes of a resource from the repository (`open`, else `origin`), unchecked; undefined when it has none. */
  async #raw(r: ResourceRecord): Promise<AsyncIterable<Uint8Array> | undefined> {
    if (this.#repo.open !== undefined) return (await this.#repo.open(r)) ?? undefined;
    const origin = this.#repo.origin?.(r);
    if (origin === undefined) return undefined;
    const res = await fetch(origin, { signal: AbortSignal.timeout(this.#options.originTimeoutMs ?? 60_000) });
    if (res.status === 404 || res.status === 410) {
      await res.body?.cancel();
      return undefined;
    }
    if (res.status !== 200 || res.body === null) {
      await res.body?.cancel();
      throw new ResourceSyncError('RS_HTTP', `${r.uri}: the origin ${String(origin)} answered ${res.status}`);
    }
    return res.body as unknown as AsyncIterable<Uint8Array>;
  }

  /** Content for dumps: the kept copy, else the repository's bytes (checked while read). */
  async content(r: ResourceRecord): Promise<Content | 'stale' | undefined> {
    const sha = r.hashes['sha-256'];
    const kept = sha === undefined ? undefined : this.#blobs.path(sha);
    if (kept !== undefined) {
      const c = await fileContent(kept, { length: r.length });
      if (c !== 'stale' && c !== undefined) return c;
    }
    if (this.#repo.open === undefined && this.#repo.origin === undefined) return undefined;
    return {
      length: r.length,
      stream: () =>
        (async function* (self: Adapter) {
          const body = await self.#raw(r);
          if (body === undefined) throw new ResourceSyncError('RS_IO', `${r.uri}: the repository no longer has it`);
          yield* checked(r.uri, body, r);
        })(this),
    };
  }

  /** A record as a change for the Source: the bytes are read when length or hashes are unknown. */
  #toChange(c: RepositoryChange): SourceChange {
    const out: { -readonly [K in keyof SourceChange]: SourceChange[K] } = {
      uri: c.uri,
      change: c.change,
      setName: c.setName ?? DEFAULT_SET,
    };
    if (c.change === 'deleted') return out;
    if (c.length !== undefined) out.length = c.length;
    if (c.hashes !== undefined) out.hashes = c.hashes;
    if (c.type !== undefined) out.type = c.type;
    if (c.lastmod !== undefined) out.lastmod = c.lastmod;
    if (c.links !== undefined) out.links = c.links;
    if (c.length === undefined || c.hashes === undefined || Object.keys(c.hashes).length === 0) {
      // Without fixity the bytes must tell it (and never a made-up length of 0): a repository with no way to
      // give them makes the change unpublishable, which is the caller's to fix (RS_INVALID_VALUE, a 400 on push).
      if (this.#repo.open === undefined && this.#repo.origin === undefined)
        throw new ResourceSyncError(
          'RS_INVALID_VALUE',
          'no length and hashes given, and the repository has neither open() nor origin() to read the bytes from',
          { url: c.uri },
        );
      const stub: ResourceRecord = {
        uri: c.uri,
        setName: out.setName!,
        length: c.length ?? 0,
        hashes: {},
        lastmodMs: 0,
        ...(c.type === undefined ? {} : { type: c.type }),
      };
      out.content = () =>
        (async function* (self: Adapter) {
          const body = await self.#raw(stub);
          if (body === undefined)
            throw new ResourceSyncError(
              'RS_INVALID_VALUE',
              'no length and hashes given, and the repository has no bytes to learn them from',
              { url: c.uri },
            );
          yield* body;
        })(this);
    }
    return out;
  }

  /** Records the changes that differ from the stored state. */
  async #apply(
    changes: readonly RepositoryChange[],
    log: boolean,
    counts: { created: number; updated: number; deleted: number; unchanged: number },
  ): Promise<void> {
    // The last change of a URI in the batch wins.
    const last = new Map<string, RepositoryChange>();
    for (const c of changes) last.set(c.uri, c);
    const out: SourceChange[] = [];
    for (const c of last.values()) {
      const old = await this.store.getResource(c.uri);
      if (c.change === 'deleted') {
        if (old === undefined) counts.unchanged++;
        else {
          out.push(this.#toChange(c));
          counts.deleted++;
        }
        continue;
      }
      if (old !== undefined && unchanged(c, old)) {
        counts.unchanged++;
        continue;
      }
      if (old !== undefined && undecided(c)) {
        // Only the bytes tell: read and hash them (one chunk at a time); the same bytes and metadata are no change.
        const body = await this.#raw(old);
        if (body !== undefined) {
          const h = createHash('sha256');
          let n = 0;
          for await (const chunk of body) {
            n += chunk.byteLength;
            h.update(chunk);
          }
          const sha = h.digest('hex');
          if (
            n === old.length &&
            sha === old.hashes['sha-256'] &&
            unchanged({ ...c, length: n, hashes: { 'sha-256': sha } }, old)
          ) {
            counts.unchanged++;
            continue;
          }
        }
      }
      out.push(this.#toChange({ ...c, change: old === undefined ? 'created' : 'updated' }));
      if (old === undefined) counts.created++;
      else counts.updated++;
    }
    if (out.length === 0) return;
    if (log) await this.source.recordChanges(out);
    else await this.#recordBaseline(out);
  }

  /** The baseline: inventory only (no change log entries), with hashes learnt from the bytes where needed. */
  async #recordBaseline(changes: readonly SourceChange[]): Promise<void> {
    // Source.recordChanges always logs; the baseline reads what it must, then records through the store.
    const inputs = [];
    for (const c of changes) {
      let { length, hashes } = c;
      if (c.content !== undefined) {
        const h = { md5: createHash('md5'), sha: createHash('sha256') };
        const w = this.#blobs.enabled ? await this.#blobs.create() : undefined;
        let n = 0;
        try {
          for await (const chunk of c.content()) {
            n += chunk.byteLength;
            h.md5.update(chunk);
            h.sha.update(chunk);
            await w?.write(chunk);
          }
        } catch (e) {
          await w?.discard();
          throw e;
        }
        const sha = h.sha.digest('hex');
        await w?.commit(sha);
        if (length !== undefined && length !== n)
          throw new ResourceSyncError('RS_LENGTH_MISMATCH', `${c.uri}: length ${length} given, content has ${n}`);
        length = n;
        hashes = { md5: h.md5.digest('hex'), 'sha-256': sha, ...(hashes ?? {}) };
      }
      inputs.push({
        uri: c.uri,
        change: c.change,
        setName: c.setName ?? DEFAULT_SET,
        ...(length === undefined ? {} : { length }),
        ...(hashes === undefined ? {} : { hashes }),
        ...(c.type === undefined ? {} : { type: c.type }),
        ...(c.links === undefined ? {} : { links: c.links }),
        ...(c.lastmod === undefined ? {} : { lastmodMs: lastmodMs(c.lastmod)! }),
      });
    }
    await this.source.record(inputs, false);
  }

  sync(): Promise<AdapterReport> {
    return this.#serial(async () => {
      this.#check();
      const counts = { created: 0, updated: 0, deleted: 0, unchanged: 0 };
      const baseline = (await this.store.head()).seq === 0 && (await this.store.countResources()) === 0;
      const batchSize = this.#options.batchSize ?? 500;
      const seen = new Set<string>();
      let batch: RepositoryChange[] = [];
      for await (const r of this.#repo.list()) {
        if (seen.has(r.uri)) continue;
        seen.add(r.uri);
        batch.push({ ...r, change: 'updated' });
        if (batch.length >= batchSize) {
          await this.#apply(batch, !baseline, counts);
          batch = [];
        }
      }
      if (batch.length > 0) await this.#apply(batch, !baseline, counts);
      // What the store holds and the repository no longer lists.
      let gone: RepositoryChange[] = [];
      for await (const r of this.store.resources()) {
        if (seen.has(r.uri)) continue;
        gone.push({ uri: r.uri, change: 'deleted', setName: r.setName });
        if (gone.length >= batchSize) {
          await this.#apply(gone, true, counts);
          gone = [];
        }
      }
      if (gone.length > 0) await this.#apply(gone, true, counts);
      return counts;
    });
  }

  pull(): Promise<AdapterReport> {
    return this.#serial(async () => {
      this.#check();
      const counts = { created: 0, updated: 0, deleted: 0, unchanged: 0 };
      const feed = this.#repo.changes;
      if (feed === undefined) return counts;
      const cursor = await this.store.getMeta(CURSOR_KEY);
      const got = await feed.call(this.#repo, cursor);
      await this.#apply(got.changes, true, counts);
      // After the changes: a crash in between asks again, and what was recorded is then unchanged.
      await this.store.setMeta(CURSOR_KEY, got.cursor);
      return counts;
    });
  }

  record(changes: readonly RepositoryChange[]): Promise<AdapterReport> {
    return this.#serial(async () => {
      this.#check();
      const counts = { created: 0, updated: 0, deleted: 0, unchanged: 0 };
      await this.#apply(changes, true, counts);
      return counts;
    });
  }

  #check(): void {
    if (this.#closed) throw new ResourceSyncError('RS_STORE', 'the repository Source is closed');
  }

  start(options: { readonly intervalMs?: number } = {}): void {
    if (this.#started || this.#closed) return;
    this.#started = true;
    const interval = options.intervalMs ?? 10_000;
    const loop = (): void => {
      if (!this.#started) return;
      this.#running = this.pull()
        .catch((e: unknown) => this.#options.onWarning?.(`pulling changes: ${(e as Error).message}`))
        .finally(() => {
          this.#running = undefined;
          if (this.#started) this.#timer = setTimeout(loop, interval);
        });
    };
    loop();
  }

  async stop(): Promise<void> {
    this.#started = false;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#running;
  }

  document(pathname: string): Promise<SiteFile | undefined> {
    return this.source.document(pathname);
  }

  async resource(pathname: string): Promise<SiteFile | undefined> {
    const rel = requestRelativePath(this.baseUrl, pathname);
    if (rel === undefined) return undefined;
    const r = await this.store.getResource(rel);
    if (r === undefined) return undefined;
    const etag = `"${r.hashes['sha-256'] ?? r.hashes.md5 ?? `${r.length}-${r.lastmodMs}`}"`;
    const base = {
      contentType: r.type ?? 'application/octet-stream',
      length: r.length,
      etag,
      lastModified: new Date(r.lastmodMs),
    };
    const sha = r.hashes['sha-256'];
    const kept = sha === undefined ? undefined : this.#blobs.path(sha);
    if (kept !== undefined) return { ...base, path: kept };
    let body: AsyncIterable<Uint8Array> | undefined;
    try {
      body = await this.#raw(r);
    } catch (e) {
      this.#options.onWarning?.(`reading ${r.uri} from the repository: ${(e as Error).message}`);
      return undefined;
    }
    if (body === undefined) return undefined;
    // Read once, checked against what the lists say; small ones from memory, others through a kept copy.
    const w = r.length > IN_MEMORY_MAX && this.#blobs.enabled ? await this.#blobs.create() : undefined;
    const chunks: Uint8Array[] = [];
    const hash = createHash('sha256');
    try {
      for await (const chunk of checked(r.uri, body, r)) {
        hash.update(chunk);
        if (w !== undefined) await w.write(chunk);
        else if (r.length <= IN_MEMORY_MAX) chunks.push(chunk);
      }
    } catch (e) {
      await w?.discard();
      this.#options.onWarning?.(`not serving ${r.uri}: ${(e as Error).message}`);
      return undefined;
    }
    const digest = hash.digest('hex');
    if (w !== undefined) {
      await w.commit(digest);
      const p = this.#blobs.path(digest);
      if (p !== undefined) return { ...base, path: p };
    }
    if (r.length <= IN_MEMORY_MAX) return { ...base, path: this.store.location, data: Buffer.concat(chunks) };
    this.#options.onWarning?.(`not serving ${r.uri}: ${r.length} bytes and no room to keep a copy (blobMaxBytes)`);
    return undefined;
  }

  capabilityListUrl(pathname: string): string | undefined {
    const rel = requestRelativePath(this.baseUrl, pathname);
    return rel === undefined ? undefined : this.source.capabilityListUrl(DEFAULT_SET);
  }

  robotsTxt(): Promise<string> {
    return this.source.robotsTxt();
  }

  onChange(listener: (changes: readonly RecordedChange[]) => void): () => void {
    return this.source.onChange((changes) => listener(changes));
  }

  onDocuments(listener: (events: readonly DocumentEvent[]) => void): () => void {
    return this.source.onDocuments(listener);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    await this.stop();
    this.#closed = true;
    await this.#queue;
    await this.source.close();
    await this.store.close();
  }
}
