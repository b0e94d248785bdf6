/**
 * The library-level Source: a store, a base URL and a site directory; record changes, get documents.
 * Applications that are not directories (a repository, a database) use it directly; the directory mode
 * (`directory.ts`) is built on it.
 *
 * Documents are generated from the store into the site directory on demand and cached: a group of documents
 * (e.g. a set's Resource List and its parts) is regenerated only when the set's version in the store moved
 * since it was built, never per request. Files are replaced atomically; a dump package is never rewritten
 * under a name a listing used (Change Dump packages are reused, new ones get new names), so a package a client
 * saw listed stays what the listing said.
 *
 * @module
 */
import { createHash } from 'node:crypto';
import { mkdir, readdir, rm, stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import type { ChangeType, FrameworkCapability } from '../core/constants.js';
import { XML_MEDIA_TYPE, ZIP_MEDIA_TYPE } from '../core/constants.js';
import { datetimeMs, formatDatetime } from '../core/datetime.js';
import { ResourceSyncError } from '../core/errors.js';
import { formatHashes, type Hashes } from '../core/hash.js';
import { createMultiHasher } from '../io/hashing.js';
import { lockFile } from '../io/lock.js';
import type { BlobStore } from './blobs.js';
import {
  type ChangeListDoc,
  type GenerationContext,
  removeFiles,
  SET_CAPABILITIES,
  type SetCapability,
  type SetInfo,
  writeCapabilityList,
  writeChangeLists,
  writeResourceList,
  sourceDescriptionPart,
  writeSourceDescription,
} from './documents.js';
import {
  type ChangeDumpLimits,
  type ChangeDumpPackage,
  type ContentProvider,
  DEFAULT_MIN_PACKAGE_CHANGES,
  type DumpLimits,
  type DumpPackage,
  fileContent,
  StaleContentError,
  writeChangeDump,
  writeResourceDump,
} from './dumps.js';
import { type GroupKind, SiteLayout } from './layout.js';
import { parseBaseUrl, resourceUrl } from './paths.js';
import type {
  ChangeInput,
  ChangeRecord,
  ResourceLink,
  ResourceRecord,
  RotationPolicy,
  SharedLock,
  SourceStore,
  StoreSnapshot,
} from './store.js';

/** A file the server can send as is. */
export interface SiteFile {
  /** Absolute path on disk (a generated, complete, never-rewritten-in-place file, or a collection file). */
  readonly path: string;
  readonly contentType: string;
  readonly length: number;
  /** Strong ETag, quoted, from the stored hash or the file's identity (never computed per request). */
  readonly etag: string;
  readonly lastModified: Date;
  /**
   * The whole content, when the Source already read it while checking the file (small collection files, read
   * from the very descriptor whose identity matched the store): the server sends these bytes instead of
   * opening {@link path}. Always {@link length} bytes.
   */
  readonly data?: Buffer;
}

/** A change as reported to listeners. `uri` is the resource's absolute URL. */
export interface RecordedChange {
  readonly seq: number;
  readonly uri: string;
  readonly change: ChangeType;
  readonly datetime: string;
  readonly setName: string;
  readonly length?: number;
  readonly hash?: string;
  readonly type?: string;
}

/** What a framework document is (Table 2.1 of the Notification specification). */
export type DocumentCapability = FrameworkCapability;

/**
 * A document the Source published (generated or regenerated), as reported to {@link Source.onDocuments}
 * listeners: the material of a framework notification (N-§5). Never an index; a document under one names it.
 * Resource Lists and Resource Dumps are snapshots, so each generation is `created`; a Change List is `created`
 * when a new part appears (rotation, a new set) and `updated` when an existing one is rewritten; a Capability
 * List is `created` with its set (the Source Description then `updated`) and `updated` when it changes.
 * The first generation of a Change List, Capability List or Source Description in a site directory (nothing to
 * compare with: e.g. `prepare()` at a first start) reports nothing.
 */
export interface DocumentEvent {
  readonly capability: DocumentCapability;
  /** Absolute URL of the document. */
  readonly uri: string;
  readonly change: 'created' | 'updated' | 'deleted';
  /** The set (undefined for the Source Description). */
  readonly setName?: string;
  /** URL of the index the document is listed in. */
  readonly indexUrl?: string;
  /** When it was published (W3C Datetime). */
  readonly datetime: string;
}

/** Limits of generated documents and dumps, and Change List rotation. */
export interface SourceLimits {
  /** Entries per document before an Index is used (default 50,000, §4.2). */
  readonly maxEntriesPerDocument?: number;
  /** Bytes per (uncompressed) document before an Index is used (default 52,428,800, §4.2). */
  readonly maxBytesPerDocument?: number;
  /** Bytes of bitstreams per dump package (default 256 MiB). */
  readonly dumpMaxBytes?: number;
  /** Bitstreams per dump package (default: maxEntriesPerDocument). */
  readonly dumpMaxFiles?: number;
  /**
   * Change Dump packages are append-only: a generation reuses the packages already published for the open
   * Change List and adds one package (split at the limits above) with the changes since. The last of them is
   * rewritten with the new changes when it holds fewer than this many changes (default 1,000; 0: never), so
   * changes that trickle in one at a time do not make a package each: with this many new changes or more
   * between two generations nothing published is rewritten, with fewer a generation rewrites fewer than this.
   */
  readonly dumpMinPackageChanges?: number;
  /** Changes per Change List before a new one is opened (default: maxEntriesPerDocument). */
  readonly changeListMaxEntries?: number;
  /** Open a new Change List when a change arrives this long after the current one's `from` (default: never). */
  readonly changeListPeriodMs?: number;
}

/** A set of resources: one Capability List. */
export interface SetDefinition {
  readonly name: string;
  readonly describedBy?: string;
}

/** Options of {@link Source.open}. */
export interface SourceOptions {
  readonly store: SourceStore;
  /** Absolute http(s) base URL; relative resource keys are resolved under it. */
  readonly baseUrl: string | URL;
  /** Where generated documents and dumps are written (a cache for a server, the output of `publish`). */
  readonly siteDir: string;
  /** Content-addressed copies of bitstream versions for Change Dumps (default: none kept). */
  readonly blobs?: BlobStore;
  /** Sets known up front (sets met in the store are added). */
  readonly sets?: readonly SetDefinition[];
  /** `describedby` link of the Source Description. */
  readonly describedBy?: string;
  /** Capabilities each set offers (default: all four); documents of the others are not generated or served. */
  readonly capabilities?: readonly SetCapability[];
  /** What a set's Capability List advertises besides the four capabilities (notification channels, hub). */
  readonly capabilityListExtras?: (setName: string) => Pick<SetInfo, 'extraEntries' | 'hubUrl'> | undefined;
  readonly limits?: SourceLimits;
  /** Bytes of the current version of a resource (Resource Dumps); default: the blob copy by sha-256. */
  readonly currentContent?: (r: ResourceRecord) => Promise<import('./dumps.js').Content | 'stale' | undefined>;
  /** Called when a dump found stale content: bring the store up to date (e.g. rescan), then it is retried. */
  readonly refresh?: (uris: readonly string[]) => Promise<void>;
  readonly onWarning?: (message: string) => void;
  /** fsync generated files (default true). */
  readonly fsync?: boolean;
  /**
   * A stale Resource List or dump whose last generation took longer than this (ms) is served as it is while
   * a new one is generated in the background (default 250; 0: always; Infinity: never); a dump only when its
   * generation takes more than 10 s (see {@link Source.ensure}). A stale list is
   * still a true, complete snapshot carrying its own `at`/`completed`; small lists (generated faster than
   * this) are always brought up to date before they are served.
   */
  readonly backgroundAfterMs?: number;
  /**
   * Quiet time (ms) after the last recorded change before documents that were generated before are
   * regenerated in the background, so requests rarely meet a stale or cold document: the big Resource Lists
   * (see `backgroundAfterMs`), and the Change Lists and Change Dumps of the changed sets that were requested
   * since their last generation (default 1,000; Infinity: only on request). Changes that never settle still get
   * a regeneration every 10 quiet times.
   */
  readonly regenerateAfterMs?: number;
  /**
   * Where generation locks are kept as files when the store has none of its own ({@link SourceStore.lockShared},
   * PostgreSQL): a directory shared by every process (on one host) that generates into the same `siteDir` over
   * one store. Default: none (one process per site directory, as with SQLite in a state directory).
   */
  readonly lockDir?: string;
  /**
   * How long a generation waits for another process generating the same group into the same site directory
   * (default 60,000 ms); then what is on disk is served (an error when there is nothing yet).
   */
  readonly lockWaitMs?: number;
}

/**
 * A document group brought up to date, as told to {@link Source.onGeneration} listeners: generated here, or
 * `adopted` (another process sharing the store and the site directory generated it; this one took its result).
 */
export interface GenerationEvent {
  /** The group: `resourcelist:<set>`, `changedump:<set>`, `capabilitylist:<set>`, `description`. */
  readonly key: string;
  /** What it was built from (the set's version in the store; for the description and Capability Lists, their content). */
  readonly version: string;
  readonly adopted: boolean;
  /** Time taken, lock wait included (ms). */
  readonly ms: number;
  /** Files of the group (documents, packages, manifest copies). */
  readonly files: number;
}

/** A change to record through the library API. */
export interface SourceChange {
  /** Path relative to the base URL (unencoded) or absolute http(s) URI. */
  readonly uri: string;
  readonly change: ChangeType;
  /** Set (default: the first configured set, or 'default'). */
  readonly setName?: string;
  readonly length?: number;
  readonly hashes?: Hashes;
  readonly type?: string;
  /** Last modification: W3C Datetime text, epoch ms or Date (default: the change's datetime). */
  readonly lastmod?: string | number | Date;
  /** Bytes of the new version; kept for Change Dumps and checked against `hashes`/`length` when given. */
  readonly content?: () => AsyncIterable<Uint8Array>;
  /** Links to related resources (§14), emitted as `<rs:ln>`; they replace the resource's links. */
  readonly links?: readonly ResourceLink[];
}

/** What `publish` or a full generation wrote. */
export interface GenerationReport {
  readonly files: number;
  readonly sets: readonly string[];
}

/** Limits in force, defaults applied. */
export type EffectiveLimits = Readonly<Required<Omit<SourceLimits, 'changeListPeriodMs'>>> & {
  readonly changeListPeriodMs?: number;
};

/** Generation order of `generateAll`: what a document links to exists before it (§4: nothing advertised early). */
const GROUPS: readonly GroupKind[] = ['resourcelist', 'changelist', 'resourcedump', 'changedump', 'capabilitylist'];

interface GroupState {
  /** Version of the set the files were built from. */
  version: string;
  files: string[];
  /** Files of the previous generation, removed at the next one (dump packages stay readable meanwhile). */
  previous: string[];
  /** How long the generation took (ms). */
  durationMs?: number;
  /** Change Lists: the documents of closed parts of the change log already written, by part number (never rewritten). */
  closedChangeLists?: Record<string, ChangeListDoc[]>;
  /** Change Dumps: packages of closed Change Lists, by list number (never rewritten). */
  closedDumps?: Record<string, DumpPackage[]>;
  /**
   * Change Dumps: packages of the open Change List, by list number, in order, with the seq range and count
   * of their changes (reused by the next generation, which appends; they become the list's closed packages
   * when it closes).
   */
  openDumps?: Record<string, ChangeDumpPackage[]>;
  /** Change Lists: the files the generation wrote (the others were reused), when not all of them. */
  written?: string[];
}

/**
 * A ResourceSync Source over a store.
 *
 * @example
 * ```ts
 * const store = await openSqliteStore({ path: 'state/source.db' });
 * const source = await Source.open({ store, baseUrl: 'https://repo.example.org/', siteDir: 'state/site' });
 * await source.recordChanges([{ uri: 'items/1/bitstream.pdf', change: 'created', length: 1234,
 *   hashes: { md5: '...' }, type: 'application/pdf', lastmod: '2024-01-01T00:00:00Z' }]);
 * const file = await source.document('/resourcesync/default/changelist.xml'); // { path, contentType, ... }
 * ```
 */
export class Source {
  readonly store: SourceStore;
  readonly layout: SiteLayout;
  readonly baseUrl: URL;
  readonly sourceDescriptionUrl: string;
  readonly #options: SourceOptions;
  readonly #limits: EffectiveLimits;
  /** Stops {@link SourceStore.watch} (a shared store). */
  #unwatch: (() => void) | undefined;
  readonly #listeners = new Set<(changes: readonly RecordedChange[], origin?: unknown) => void>();
  readonly #documentListeners = new Set<(events: readonly DocumentEvent[]) => void>();
  readonly #inflight = new Map<string, Promise<void>>();
  readonly #groups = new Map<string, GroupState>();
  readonly #sets = new Map<string, SetDefinition>();
  /** Positions of the set names in {@link setNames} order, for the Source Description Index (see #sourceDescriptionPartOf). */
  #setPositions: { readonly count: number; readonly positions: ReadonlyMap<string, number> } | undefined;
  #closed = false;
  #regenTimer: ReturnType<typeof setTimeout> | undefined;
  /** Groups to regenerate when changes settle, as `group:set` keys, in the order they must be generated. */
  readonly #regenGroups = new Set<string>();
  #regenSince = 0;
  /** The background regeneration running, if any. */
  #regenRunning: Promise<void> | undefined;
  /** Change List and Change Dump groups (`group:set`) requested since their last generation. */
  readonly #wanted = new Set<string>();
  readonly #generationListeners = new Set<(e: GenerationEvent) => void>();
  /** Writes of the saved group states, one at a time in this process (each reads, changes one group, writes). */
  #saving: Promise<void> = Promise.resolve();

  private constructor(options: SourceOptions) {
    this.#options = options;
    this.store = options.store;
    this.baseUrl = parseBaseUrl(typeof options.baseUrl === 'string' ? options.baseUrl : options.baseUrl.href);
    this.layout = new SiteLayout(this.baseUrl, options.siteDir);
    this.sourceDescriptionUrl = this.layout.sourceDescriptionUrl;
    const l = options.limits ?? {};
    const maxEntries = l.maxEntriesPerDocument ?? 50_000;
    if (!Number.isInteger(maxEntries) || maxEntries < 1 || maxEntries > 50_000)
      throw new ResourceSyncError('RS_CONFIG', `maxEntriesPerDocument must be 1..50000, not ${maxEntries}`);
    const minPackage = l.dumpMinPackageChanges ?? DEFAULT_MIN_PACKAGE_CHANGES;
    if (!Number.isSafeInteger(minPackage) || minPackage < 0)
      throw new ResourceSyncError('RS_CONFIG', `dumpMinPackageChanges must be an integer >= 0, not ${minPackage}`);
    // A period of 0 (or less) would close the open Change List at every change: one list per change, forever.
    if (l.changeListPeriodMs !== undefined && (!Number.isSafeInteger(l.changeListPeriodMs) || l.changeListPeriodMs < 1))
      throw new ResourceSyncError(
        'RS_CONFIG',
        `changeListPeriodMs must be a whole number of milliseconds >= 1, not ${l.changeListPeriodMs}`,
      );
    this.#limits = {
      maxEntriesPerDocument: maxEntries,
      maxBytesPerDocument: l.maxBytesPerDocument ?? 52_428_800,
      dumpMaxBytes: l.dumpMaxBytes ?? 256 << 20,
      dumpMaxFiles: Math.min(l.dumpMaxFiles ?? maxEntries, maxEntries),
      dumpMinPackageChanges: minPackage,
      changeListMaxEntries: Math.min(l.changeListMaxEntries ?? maxEntries, maxEntries),
      ...(l.changeListPeriodMs === undefined ? {} : { changeListPeriodMs: l.changeListPeriodMs }),
    };
    for (const s of options.sets ?? []) this.#sets.set(s.name, s);
  }

  /** Opens a Source; the store must be open. @throws ResourceSyncError `RS_CONFIG` for a bad base URL or limit. */
  static async open(options: SourceOptions): Promise<Source> {
    const source = new Source(options);
    source.#unwatch = options.store.watch?.((changes) => source.#recordedElsewhere(changes));
    for (const name of await options.store.setNames()) if (!source.#sets.has(name)) source.#sets.set(name, { name });
    const saved = await options.store.getMeta(source.#metaKey());
    if (saved !== undefined) {
      try {
        const parsed = JSON.parse(saved) as Record<string, GroupState>;
        for (const [k, v] of Object.entries(parsed)) source.#groups.set(k, v);
      } catch {
        // A cache record that does not parse: everything is regenerated.
      }
    }
    return source;
  }

  #metaKey(): string {
    return `documents:${this.layout.siteDir}`;
  }

  /** The Change List rotation policy in force. */
  get rotation(): RotationPolicy {
    const p: { maxEntries: number; periodMs?: number } = { maxEntries: this.#limits.changeListMaxEntries };
    if (this.#limits.changeListPeriodMs !== undefined) p.periodMs = this.#limits.changeListPeriodMs;
    return p;
  }

  get limits(): EffectiveLimits {
    return this.#limits;
  }

  /** Names of the sets, sorted. */
  setNames(): string[] {
    return [...this.#sets.keys()].sort();
  }

  /** Capability List URL of a set. */
  capabilityListUrl(setName: string): string {
    return this.layout.capabilityListUrl(setName);
  }

  /**
   * Listen to recorded changes; `origin` is what the writer passed to {@link record} (undefined for
   * {@link recordChanges}). Returns an unsubscribe function.
   */
  onChange(listener: (changes: readonly RecordedChange[], origin?: unknown) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * Listen to published documents (see {@link DocumentEvent}); called once per generation with its documents,
   * after the files are in place. Documents are generated on demand, so a listener that wants the open Change
   * List announced after changes asks for it (`document()`). Returns an unsubscribe function.
   */
  onDocuments(listener: (events: readonly DocumentEvent[]) => void): () => void {
    this.#documentListeners.add(listener);
    return () => this.#documentListeners.delete(listener);
  }

  /**
   * Listen to generations (see {@link GenerationEvent}): each group brought up to date, generated here or taken
   * over from another process sharing the store and the site directory. Returns an unsubscribe function.
   */
  onGeneration(listener: (e: GenerationEvent) => void): () => void {
    this.#generationListeners.add(listener);
    return () => this.#generationListeners.delete(listener);
  }

  #emitGeneration(e: GenerationEvent): void {
    for (const l of this.#generationListeners) {
      try {
        l(e);
      } catch (err) {
        this.#warn(`a generation listener failed: ${(err as Error).message}`);
      }
    }
  }

  #emitDocuments(events: readonly DocumentEvent[]): void {
    if (events.length === 0) return;
    for (const l of this.#documentListeners) {
      try {
        l(events);
      } catch (e) {
        this.#warn(`a document listener failed: ${(e as Error).message}`);
      }
    }
  }

  #defaultSet(): string {
    return this.#options.sets?.[0]?.name ?? 'default';
  }

  /**
   * Records changes (one store transaction). Content given for created/updated changes is hashed and kept
   * (blob store) for Change Dumps; given hashes and length are checked against it.
   * @throws ResourceSyncError `RS_HASH_MISMATCH` / `RS_LENGTH_MISMATCH` (nothing recorded), `RS_STORE`.
   */
  async recordChanges(changes: readonly SourceChange[]): Promise<RecordedChange[]> {
    const inputs: ChangeInput[] = [];
    for (const c of changes) {
      let hashes = c.hashes;
      let length = c.length;
      if (c.content !== undefined && c.change !== 'deleted') {
        const got = await this.#keepContent(c.uri, c.content);
        if (length !== undefined && length !== got.length)
          throw new ResourceSyncError(
            'RS_LENGTH_MISMATCH',
            `${c.uri}: length ${length} given, content has ${got.length}`,
          );
        for (const alg of ['md5', 'sha-256'] as const) {
          const want = hashes?.[alg];
          if (want !== undefined && want.toLowerCase() !== got.hashes[alg])
            throw new ResourceSyncError('RS_HASH_MISMATCH', `${c.uri}: ${alg} given does not match the content`);
        }
        hashes = { ...got.hashes, ...(hashes ?? {}) };
        length = got.length;
      }
      const input: { -readonly [K in keyof ChangeInput]: ChangeInput[K] } = {
        uri: c.uri,
        change: c.change,
        setName: c.setName ?? this.#defaultSet(),
      };
      if (length !== undefined) input.length = length;
      if (hashes !== undefined) input.hashes = hashes;
      if (c.type !== undefined) input.type = c.type;
      if (c.links !== undefined) input.links = c.links;
      if (c.lastmod !== undefined)
        input.lastmodMs =
          typeof c.lastmod === 'string'
            ? datetimeMs(c.lastmod)
            : typeof c.lastmod === 'number'
              ? c.lastmod
              : c.lastmod.getTime();
      inputs.push(input);
    }
    return this.record(inputs, true);
  }

  async #keepContent(
    uri: string,
    content: () => AsyncIterable<Uint8Array>,
  ): Promise<{ hashes: Hashes; length: number }> {
    const blobs = this.#options.blobs;
    const h = createMultiHasher(['md5', 'sha-256']);
    const w = blobs?.enabled === true ? await blobs.create() : undefined;
    try {
      for await (const chunk of content()) {
        h.update(chunk);
        await w?.write(chunk);
      }
    } catch (e) {
      await w?.discard();
      // A content callback that says the change cannot be published as given is not an I/O failure.
      if (e instanceof ResourceSyncError && e.code === 'RS_INVALID_VALUE') throw e;
      throw new ResourceSyncError('RS_IO', `cannot read the content of ${uri}: ${(e as Error).message}`, { cause: e });
    }
    const hashes = h.digest();
    if (w !== undefined) await w.commit(hashes['sha-256']!);
    return { hashes, length: h.length };
  }

  /**
   * Records store-level changes (`log: false`: inventory only, e.g. a baseline) and tells listeners, with
   * `origin` (so that a writer can tell its own writes from others'). Used by the directory mode.
   */
  async record(inputs: readonly ChangeInput[], log: boolean, origin?: unknown): Promise<RecordedChange[]> {
    if (this.#closed) throw new ResourceSyncError('RS_STORE', 'the Source is closed');
    const recorded = await this.store.recordChanges(inputs, { log, rotation: this.rotation });
    const added: string[] = [];
    for (const i of inputs)
      if (!this.#sets.has(i.setName)) {
        this.#sets.set(i.setName, { name: i.setName });
        added.push(i.setName);
      }
    // A new set: its Capability List and the Source Description are published now when someone listens (the
    // description's regeneration announces the Capability List as created).
    if (added.length > 0 && this.#documentListeners.size > 0 && !this.#closed)
      void (async () => {
        for (const s of added) await this.ensure('capabilitylist', s);
        await this.ensure('description');
      })().catch((e: unknown) => this.#warn(`publishing new set(s) ${added.join(', ')}: ${(e as Error).message}`));
    const out = recorded.map((c) => this.#toRecorded(c));
    if (inputs.length > 0) this.#scheduleRegeneration(new Set(inputs.map((i) => i.setName)), log);
    this.#tell(out, origin);
    return out;
  }

  #tell(out: readonly RecordedChange[], origin: unknown): void {
    if (out.length > 0)
      for (const l of this.#listeners) {
        try {
          l(out, origin);
        } catch (e) {
          this.#warn(`a change listener failed: ${(e as Error).message}`);
        }
      }
  }

  /**
   * Changes another process recorded in a shared store ({@link SourceStore.watch}): told to listeners (origin:
   * the store) and their documents regenerated, as if recorded here.
   */
  #recordedElsewhere(changes: readonly ChangeRecord[]): void {
    if (this.#closed || changes.length === 0) return;
    for (const c of changes) if (!this.#sets.has(c.setName)) this.#sets.set(c.setName, { name: c.setName });
    this.#scheduleRegeneration(new Set(changes.map((c) => c.setName)), true);
    this.#tell(
      changes.map((c) => this.#toRecorded(c)),
      this.store,
    );
  }

  #toRecorded(c: ChangeRecord): RecordedChange {
    const r: { -readonly [K in keyof RecordedChange]: RecordedChange[K] } = {
      seq: c.seq,
      uri: resourceUrl(this.baseUrl, c.uri),
      change: c.change,
      datetime: formatDatetime(c.datetimeMs),
      setName: c.setName,
    };
    if (c.length !== undefined) r.length = c.length;
    const hash = formatHashes(c.hashes);
    if (hash !== '') r.hash = hash;
    if (c.type !== undefined) r.type = c.type;
    return r;
  }

  #warn(message: string): void {
    this.#options.onWarning?.(message);
  }

  #ctx(): GenerationContext {
    const ctx: { -readonly [K in keyof GenerationContext]: GenerationContext[K] } = {
      layout: this.layout,
      limits: {
        maxEntriesPerDocument: this.#limits.maxEntriesPerDocument,
        maxBytesPerDocument: this.#limits.maxBytesPerDocument,
      },
    };
    if (this.#options.fsync !== undefined) ctx.fsync = this.#options.fsync;
    return ctx;
  }

  #dumpLimits(): DumpLimits {
    return { maxBytes: this.#limits.dumpMaxBytes, maxFiles: this.#limits.dumpMaxFiles };
  }

  #changeDumpLimits(): ChangeDumpLimits {
    return { ...this.#dumpLimits(), minPackageChanges: this.#limits.dumpMinPackageChanges };
  }

  #contentProvider(): ContentProvider {
    const blobs = this.#options.blobs;
    const fromBlob = async (sha: string | undefined, length: number | undefined) => {
      const p = sha === undefined ? undefined : blobs?.path(sha);
      if (p === undefined || length === undefined) return undefined;
      const c = await fileContent(p, { length });
      return c === 'stale' ? undefined : c;
    };
    const current = this.#options.currentContent;
    return {
      hasCurrent: async (r) => {
        if (current !== undefined) return true;
        const sha = r.hashes['sha-256'];
        return sha !== undefined && blobs?.path(sha) !== undefined;
      },
      current: async (r) => (current !== undefined ? current(r) : fromBlob(r.hashes['sha-256'], r.length)),
      hasVersion: async (c) => {
        const sha = c.hashes['sha-256'];
        if (sha !== undefined && blobs?.path(sha) !== undefined) return true;
        if (current === undefined) return false;
        const r = await this.store.getResource(c.uri);
        return r !== undefined && sha !== undefined && r.hashes['sha-256'] === sha;
      },
      version: async (c) => {
        const sha = c.hashes['sha-256'];
        const b = await fromBlob(sha, c.length);
        if (b !== undefined || current === undefined) return b;
        const r = await this.store.getResource(c.uri);
        if (r === undefined || sha === undefined || r.hashes['sha-256'] !== sha) return undefined;
        const k = await current(r);
        return k === 'stale' ? undefined : k;
      },
    };
  }

  /** Version key of a set's documents: bumped by every write touching the set (cheap to read). */
  async #setVersion(setName: string, snap?: StoreSnapshot): Promise<string> {
    return String(await (snap ?? this.store).setVersion(setName));
  }

  /**
   * Brings a group of documents up to date (regenerating it when the store moved since it was built) and
   * returns when its files are complete. Concurrent callers share one generation.
   *
   * With `allowStale`, a big group (one whose last generation took longer than
   * {@link SourceOptions.backgroundAfterMs}: a Resource List of a large collection, a dump) that is stale but
   * complete on disk is left as it is for this call and regenerated in the background, so a request is not held
   * up by it; its `at`/`completed` stay true for the snapshot it describes. Change Lists are always brought
   * up to date first; a stale dump is regenerated at once and waited for, up to 10 s (a Change Dump behind its
   * Change Lists, or a Resource Dump older than the Resource List, sends every Destination to fetch resources
   * one by one).
   */
  async ensure(group: GroupKind, setName?: string, allowStale = false): Promise<void> {
    const key = setName === undefined ? group : `${group}:${setName}`;
    const running = this.#inflight.get(key);
    const state = this.#groups.get(key);
    const bigGroup =
      group === 'resourcelist' || group === 'resourcedump' || group === 'changedump' ? this.#isBig(state) : false;
    if (running !== undefined) {
      if (allowStale && bigGroup && (await this.#mainExists(group, setName)))
        return isDump(group) ? waitAtMost(running, DUMP_WAIT_MS) : undefined;
      return running;
    }
    if (state !== undefined) {
      let fresh: boolean;
      try {
        fresh = await this.#fresh(key, group, setName, state);
      } catch (e) {
        // The store cannot be read (a lost database connection): the documents generated last are served.
        if (!(e instanceof ResourceSyncError && e.code === 'RS_STORE') || !(await this.#mainExists(group, setName)))
          throw e;
        this.#warn(`serving ${key} as generated last: ${e.message}`);
        return;
      }
      if (fresh) return;
    }
    const background = allowStale && bigGroup && state !== undefined && (await this.#mainExists(group, setName));
    if (this.#inflight.has(key)) return this.ensure(group, setName, allowStale);
    // In the background, generation starts a moment later, so the request that found the group stale is
    // served first (generation and serving share this thread).
    const start =
      background && !isDump(group) ? new Promise<void>((r) => setTimeout(r, BACKGROUND_DELAY_MS)) : Promise.resolve();
    const p = start
      .then(() => this.#generateOnce(key, group, setName, state))
      .finally(() => this.#inflight.delete(key));
    this.#inflight.set(key, p);
    if (background) {
      p.catch((e: unknown) => this.#warn(`regenerating ${key} failed: ${(e as Error).message}`));
      // A stale dump sends every Destination to fetch resources one by one: a Change Dump that lags its Change
      // Lists leaves the changes to them (issue 14: 5 s instead of 1.3 s for 1,000 changes at 20 ms), and a
      // Resource Dump older than the Resource List is refused (its bytes could be older than the list's). So a
      // dump's generation is waited for, up to a bound (then served as it is). A Change Dump's packages are
      // append-only: its generation costs only the changes since the last one.
      return isDump(group) ? waitAtMost(p, DUMP_WAIT_MS) : undefined;
    }
    return p;
  }

  #isBig(state: GroupState | undefined): boolean {
    return (state?.durationMs ?? 0) >= (this.#options.backgroundAfterMs ?? 250);
  }

  /**
   * After changes settle, regenerates (debounced) what of the changed sets was generated before: big Resource
   * Lists, and the Change Lists and Change Dumps that changes made stale. `log`: the changes went into the
   * change log (not an inventory-only baseline).
   */
  #scheduleRegeneration(sets: Iterable<string>, log: boolean): void {
    const wait = this.#options.regenerateAfterMs ?? 1000;
    if (!Number.isFinite(wait) || this.#closed) return;
    for (const s of sets) {
      if (this.#isBig(this.#groups.get(`resourcelist:${s}`))) this.#regenGroups.add(`resourcelist:${s}`);
      if (!log) continue;
      // Only what was asked for since its last generation: a Change Dump of large files nobody fetches any
      // more is not rewritten after every burst of changes.
      for (const g of ['changelist', 'changedump'] as const)
        if (this.#offers(g) && this.#groups.has(`${g}:${s}`) && this.#wanted.has(`${g}:${s}`))
          this.#regenGroups.add(`${g}:${s}`);
    }
    if (this.#regenGroups.size === 0) return;
    const now = Date.now();
    if (this.#regenTimer !== undefined && now - this.#regenSince >= 10 * wait) return;
    if (this.#regenTimer === undefined) this.#regenSince = now;
    clearTimeout(this.#regenTimer);
    this.#regenTimer = setTimeout(() => {
      this.#regenTimer = undefined;
      const todo = [...this.#regenGroups];
      this.#regenGroups.clear();
      const run = (async () => {
        await this.#regenRunning;
        for (const key of todo) {
          if (this.#closed) return;
          // A set's name may hold ':' itself: the group is what comes before the first one.
          const colon = key.indexOf(':');
          const group = key.slice(0, colon) as GroupKind;
          const setName = key.slice(colon + 1);
          // Asked for again from now on (a request during the generation counts).
          this.#wanted.delete(key);
          await this.ensure(group, setName);
        }
      })()
        .catch((e: unknown) => this.#warn(`regenerating ${todo.join(', ')}: ${(e as Error).message}`))
        .finally(() => {
          if (this.#regenRunning === run) this.#regenRunning = undefined;
        });
      this.#regenRunning = run;
    }, wait);
    this.#regenTimer.unref?.();
  }

  /**
   * Resolves once the background regeneration that the changes recorded so far scheduled (see
   * {@link SourceOptions.regenerateAfterMs}) has run: the documents are then published for them.
   */
  async settled(): Promise<void> {
    while (this.#regenTimer !== undefined || this.#regenRunning !== undefined) {
      if (this.#regenRunning !== undefined) await this.#regenRunning;
      else await new Promise((r) => setTimeout(r, 10));
    }
  }

  #offers(group: GroupKind): boolean {
    if (group === 'description' || group === 'capabilitylist') return true;
    return (this.#options.capabilities ?? SET_CAPABILITIES).includes(group);
  }

  #mainPath(group: GroupKind, setName: string | undefined): string {
    return group === 'description' ? this.layout.sourceDescriptionPath : this.layout.path(setName!, `${group}.xml`);
  }

  async #mainExists(group: GroupKind, setName: string | undefined): Promise<boolean> {
    return filesExist([this.#mainPath(group, setName)]);
  }

  /** True when the group was built from the current version and its main document is on disk. */
  async #fresh(_key: string, group: GroupKind, setName: string | undefined, state: GroupState): Promise<boolean> {
    return state.version === (await this.#versionOf(group, setName)) && (await this.#mainExists(group, setName));
  }

  /**
   * What the documents of a generation depend on besides the store: the base URL (every URL in them: a restart
   * with another `--base-url` or port must not serve the old ones) and the document limits (where lists split).
   */
  #generationKey(): string {
    return `${this.baseUrl.href} ${this.#limits.maxEntriesPerDocument} ${this.#limits.maxBytesPerDocument}`;
  }

  /** Version of a group: the {@link #generationKey}, then what the group is built from. */
  async #versionOf(group: GroupKind, setName: string | undefined, snap?: StoreSnapshot): Promise<string> {
    let v: string;
    if (group === 'description')
      v = JSON.stringify([
        this.#options.describedBy ?? '',
        ...this.#setInfos().map((s) => [s.name, s.describedBy ?? '']),
      ]);
    else if (group === 'capabilitylist') v = JSON.stringify(this.#setInfo(setName!));
    else v = await this.#setVersion(setName!, snap);
    return `${this.#generationKey()}\n${v}`;
  }

  #setInfos(): SetInfo[] {
    return this.setNames().map((n) => this.#setInfo(n));
  }

  #setInfo(name: string): SetInfo {
    const d = this.#sets.get(name);
    const describedBy = d?.describedBy ?? this.#options.describedBy;
    const part = this.#sourceDescriptionPartOf(name);
    const base: SetInfo = {
      name,
      // A set without a description of its own is described by the Source's (§8, §9: describedby is recommended).
      ...(describedBy === undefined ? {} : { describedBy }),
      ...(this.#options.capabilities === undefined ? {} : { capabilities: this.#options.capabilities }),
      // Behind a Source Description Index, `up` names the Source Description that lists the set.
      ...(part === 0 ? {} : { sourceDescriptionUrl: this.layout.sourceDescriptionPartUrl(part) }),
    };
    const extras = this.#options.capabilityListExtras?.(name);
    return extras === undefined ? base : { ...base, ...extras };
  }

  /**
   * The Source Description of a Source Description Index that lists a set (0: the one at the well-known URI
   * lists every set). Positions follow {@link setNames}; sets are only ever added, so the sorted names are
   * computed again only when their number changed.
   */
  #sourceDescriptionPartOf(name: string): number {
    const count = this.#sets.size;
    if (count <= this.#limits.maxEntriesPerDocument) return 0;
    if (this.#setPositions?.count !== count) {
      const positions = new Map<string, number>();
      for (const [i, n] of this.setNames().entries()) positions.set(n, i);
      this.#setPositions = { count, positions };
    }
    return sourceDescriptionPart(this.#setPositions.positions.get(name) ?? 0, count, this.#limits);
  }

  async #generate(
    key: string,
    group: GroupKind,
    setName: string | undefined,
    state: GroupState | undefined,
  ): Promise<GroupState> {
    const started = Date.now();
    const ctx = this.#ctx();
    let files: string[] = [];
    let version: string;
    let extra: Pick<GroupState, 'closedChangeLists' | 'closedDumps' | 'openDumps'> | undefined;
    let written: string[] | undefined;
    // Documents built for another base URL or other limits: nothing of them is reused (closed Change Lists and
    // dump packages hold the old URLs); their files are removed below like those of any earlier generation.
    if (state !== undefined && !state.version.startsWith(`${this.#generationKey()}\n`))
      state = { version: state.version, files: state.files, previous: state.previous };
    if (group === 'description') {
      version = await this.#versionOf(group, undefined);
      files = await writeSourceDescription(ctx, this.#setInfos(), this.#options.describedBy);
    } else if (group === 'capabilitylist') {
      version = await this.#versionOf(group, setName);
      files = await writeCapabilityList(ctx, this.#setInfo(setName!));
    } else {
      const name = setName!;
      let attempt = 0;
      for (;;) {
        const snap = await this.store.snapshot();
        try {
          version = await this.#versionOf(group, name, snap);
          if (group === 'resourcelist') files = await writeResourceList(ctx, snap, name);
          else if (group === 'changelist') {
            const docPath = (d: ChangeListDoc): string => this.layout.path(name, d.file);
            // Documents of closed parts written earlier, still files of the group, are not written again.
            const closed = new Map<number, ChangeListDoc[]>();
            for (const [k, v] of Object.entries(state?.closedChangeLists ?? {}))
              if (Array.isArray(v) && v.length > 0 && v.every((d) => state?.files.includes(docPath(d))))
                closed.set(Number(k), v);
            const r = await writeChangeLists(ctx, snap, name, closed);
            written = r.files;
            // Closed lists written earlier stay listed as files of the group.
            files = [...new Set([...r.files, ...[...r.closed.values()].flat().map(docPath)])];
            extra = { closedChangeLists: Object.fromEntries(r.closed) };
          } else if (group === 'resourcedump') {
            let missing = 0;
            files = (
              await writeResourceDump(ctx, snap, name, this.#contentProvider(), this.#dumpLimits(), () => {
                missing++;
              })
            ).files;
            if (missing > 0)
              this.#warn(
                `resource dump of set ${name}: the bytes of ${missing} resource(s) are not available; left out`,
              );
          } else {
            // Packages of earlier generations whose files are all still there (a package of the open list
            // whose files are gone ends the reusable run: it and those after it are written again).
            const filesOf = (p: DumpPackage): string[] => [
              this.layout.path(name, p.file),
              this.layout.path(name, p.manifestFile),
            ];
            const closed = new Map<number, DumpPackage[]>();
            for (const [k, v] of Object.entries(state?.closedDumps ?? {}))
              if (Array.isArray(v) && (await filesExist(v.flatMap(filesOf)))) closed.set(Number(k), v);
            const open = new Map<number, ChangeDumpPackage[]>();
            for (const [k, v] of Object.entries(state?.openDumps ?? {})) {
              const usable: ChangeDumpPackage[] = [];
              for (const p of Array.isArray(v) ? v : []) {
                if (!(await filesExist(filesOf(p)))) break;
                usable.push(p);
              }
              open.set(Number(k), usable);
            }
            let missing = 0;
            const r = await writeChangeDump(
              ctx,
              snap,
              name,
              this.#contentProvider(),
              this.#changeDumpLimits(),
              { closed, open },
              () => {
                missing++;
              },
            );
            if (missing > 0)
              this.#warn(
                `change dump of set ${name}: ${missing} version(s) were not kept and are left out of the packages`,
              );
            // Every package listed, new or reused, is a file of this generation.
            const listed = r.packages.flatMap((p) => [
              this.layout.path(name, p.file),
              this.layout.path(name, p.manifestFile),
            ]);
            files = [...new Set([...r.files, ...listed])];
            extra = { closedDumps: Object.fromEntries(r.closed), openDumps: Object.fromEntries(r.open) };
          }
          break;
        } catch (e) {
          if (e instanceof StaleContentError && attempt < 3 && this.#options.refresh !== undefined) {
            attempt++;
            await snap.close();
            await this.#options.refresh([e.uri]);
            continue;
          }
          throw e;
        } finally {
          await snap.close();
        }
      }
    }
    // Files of the generation before the previous one, not reused, are removed now.
    const keep = new Set(files);
    const stale = (state?.previous ?? []).filter((f) => !keep.has(f) && !(state?.files ?? []).includes(f));
    const previous = (state?.files ?? []).filter((f) => !keep.has(f));
    const dumps = group === 'resourcedump' || group === 'changedump';
    if (!dumps) await removeFiles(previous);
    await removeFiles(stale);
    const next: GroupState = {
      version,
      files,
      previous: dumps ? previous : [],
      durationMs: Date.now() - started,
      ...(extra ?? {}),
      // What a process taking this generation over announces (see #generateOnce): the Change Lists written.
      ...(written === undefined ? {} : { written }),
    };
    this.#groups.set(key, next);
    await this.#saveGroup(key, next);
    if (this.#documentListeners.size > 0)
      this.#emitDocuments(this.#documentEvents(group, setName, state, next, written ?? files));
    return next;
  }

  /**
   * Generates a group once across the processes that share the store and the site directory: under the group's
   * lock ({@link #lock}), the state saved in the store is read first; when another process generated the group
   * from the current version meanwhile, its files are taken as they are (adopted), else it is generated here.
   * When the lock cannot be had within {@link SourceOptions.lockWaitMs}, what is on disk is served.
   */
  async #generateOnce(
    key: string,
    group: GroupKind,
    setName: string | undefined,
    state: GroupState | undefined,
  ): Promise<void> {
    const started = Date.now();
    const wait = this.#options.lockWaitMs ?? 60_000;
    const lock = await this.#lock(`documents ${this.layout.siteDir} ${key}`, wait);
    if (lock === undefined) {
      const saved = (await this.#savedGroups())[key];
      if (saved !== undefined) this.#groups.set(key, saved);
      if (await this.#mainExists(group, setName)) {
        this.#warn(`${key} is being generated by another process for more than ${wait} ms: serving it as it is`);
        return;
      }
      throw new ResourceSyncError(
        'RS_TIMEOUT',
        `${key} is being generated by another process for more than ${wait} ms`,
      );
    }
    try {
      const saved = (await this.#savedGroups())[key];
      if (saved !== undefined && (await this.#fresh(key, group, setName, saved))) {
        this.#groups.set(key, saved);
        if (this.#documentListeners.size > 0)
          this.#emitDocuments(this.#documentEvents(group, setName, state, saved, saved.written ?? saved.files));
        this.#emitGeneration({
          key,
          version: versionPart(saved.version),
          adopted: true,
          ms: Date.now() - started,
          files: saved.files.length,
        });
        return;
      }
      await this.#removeLeftovers(group, setName);
      const next = await this.#generate(key, group, setName, saved ?? state);
      this.#emitGeneration({
        key,
        version: versionPart(next.version),
        adopted: false,
        ms: Date.now() - started,
        files: next.files.length,
      });
    } finally {
      await lock.release();
    }
  }

  /**
   * The lock `name` across processes: the store's ({@link SourceStore.lockShared}, PostgreSQL), else a lock
   * file in {@link SourceOptions.lockDir}, else none (this process alone generates into the site directory;
   * its own callers share one generation through {@link ensure}). undefined when not had within `waitMs`.
   */
  async #lock(name: string, waitMs: number): Promise<SharedLock | undefined> {
    if (this.store.lockShared !== undefined) return this.store.lockShared(name, waitMs);
    const dir = this.#options.lockDir;
    if (dir === undefined) return { held: true, release: async () => {} };
    await mkdir(dir, { recursive: true });
    const path = join(dir, `${createHash('sha256').update(name).digest('hex').slice(0, 32)}.lock`);
    const deadline = Date.now() + waitMs;
    let delay = 20;
    for (;;) {
      try {
        const f = lockFile(path, { what: name });
        let held = true;
        return {
          get held() {
            return held;
          },
          release: async () => {
            held = false;
            f.release();
          },
        };
      } catch (e) {
        // RS_CONFIG: held by another live process (or another holder in this one); anything else is an error.
        if (!(e instanceof ResourceSyncError && e.code === 'RS_CONFIG')) throw e;
      }
      // The last try is at the deadline.
      const left = deadline - Date.now();
      if (left <= 0) return undefined;
      await new Promise((r) => setTimeout(r, Math.min(delay, left)));
      delay = Math.min(delay * 2, 250);
    }
  }

  /**
   * Removes the temporary files of the group's documents and packages that a generation killed midway left in
   * the site directory (`.<name>.<random>.tmp`, see `writeFileAtomic`); called holding the group's lock, so no
   * other generation is writing them.
   */
  async #removeLeftovers(group: GroupKind, setName: string | undefined): Promise<void> {
    const dir = group === 'description' ? dirname(this.layout.sourceDescriptionPath) : this.layout.setDir(setName!);
    // Group names and the description's file name are letters only.
    const name = group === 'description' ? basename(this.layout.sourceDescriptionPath) : group;
    const leftover = new RegExp(`^\\.${name}[-.].*\\.tmp$`);
    for (const f of await readdir(dir).catch(() => [] as string[]))
      if (leftover.test(f)) await rm(join(dir, f), { force: true });
  }

  /** The group states saved in the store (by any process generating into this site directory). */
  async #savedGroups(): Promise<Record<string, GroupState>> {
    const saved = await this.store.getMeta(this.#metaKey());
    if (saved === undefined) return {};
    try {
      const parsed = JSON.parse(saved) as unknown;
      return typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, GroupState>) : {};
    } catch {
      return {};
    }
  }

  /**
   * Saves one group's state: the saved record is read and only this group replaced (other processes save
   * theirs), under a lock of the record ({@link #lock}) and one write at a time in this process.
   */
  async #saveGroup(key: string, next: GroupState): Promise<void> {
    const run = this.#saving.then(async () => {
      const lock = await this.#lock(`documents ${this.layout.siteDir}`, this.#options.lockWaitMs ?? 60_000);
      try {
        const all = await this.#savedGroups();
        all[key] = next;
        await this.store.setMeta(this.#metaKey(), JSON.stringify(all));
      } finally {
        await lock?.release();
      }
    });
    this.#saving = run.catch(() => {});
    return run;
  }

  /** What a generation published, compared with the previous one (see {@link DocumentEvent}). */
  #documentEvents(
    group: GroupKind,
    setName: string | undefined,
    before: GroupState | undefined,
    after: GroupState,
    written: readonly string[],
  ): DocumentEvent[] {
    const datetime = formatDatetime(Date.now());
    const l = this.layout;
    if (group === 'description') {
      if (before === undefined) return [];
      const names = (v: string): string[] => {
        try {
          // [the Source's describedby, [set, its describedby]...]
          return (JSON.parse(v.slice(v.indexOf('\n') + 1)) as unknown[])
            .filter((x): x is [string, string] => Array.isArray(x))
            .map((x) => x[0]);
        } catch {
          return [];
        }
      };
      const was = new Set(names(before.version));
      const now = new Set(names(after.version));
      const out: DocumentEvent[] = [];
      for (const n of now)
        if (!was.has(n))
          out.push({
            capability: 'capabilitylist',
            uri: l.capabilityListUrl(n),
            change: 'created',
            setName: n,
            datetime,
          });
      for (const n of was)
        if (!now.has(n))
          out.push({
            capability: 'capabilitylist',
            uri: l.capabilityListUrl(n),
            change: 'deleted',
            setName: n,
            datetime,
          });
      out.push({ capability: 'description', uri: this.sourceDescriptionUrl, change: 'updated', datetime });
      return out;
    }
    const name = setName!;
    if (group === 'capabilitylist')
      return before === undefined
        ? []
        : [
            {
              capability: 'capabilitylist',
              uri: l.capabilityListUrl(name),
              change: 'updated',
              setName: name,
              datetime,
            },
          ];
    if (group === 'changelist' && before === undefined) return [];
    // Documents (never packages or manifests) among the files written; the main file is an index when parts exist.
    const docs = written.filter((f) => DOCUMENT_FILE.exec(basename(f))?.[1] === group);
    const main = this.#mainPath(group, name);
    const parts = docs.filter((f) => f !== main);
    // A plain Change List (one open part) is announced itself, like a list that fits one document.
    const indexUrl = parts.length > 0 ? l.url(name, `${group}.xml`) : undefined;
    const previous = new Set(before?.files ?? []);
    return (parts.length > 0 ? parts : docs).map((f) => ({
      capability: group,
      uri: l.url(name, basename(f)),
      change:
        group === 'resourcelist' || group === 'resourcedump' || !previous.has(f)
          ? ('created' as const)
          : ('updated' as const),
      setName: name,
      ...(indexUrl === undefined ? {} : { indexUrl }),
      datetime,
    }));
  }

  /**
   * A generated document, dump package or manifest copy for a request pathname (raw, percent-encoded, without
   * query); generated or refreshed first when the store moved. Dump packages and manifests are served as they
   * are (they never change once written). undefined when there is none.
   */
  async document(pathname: string): Promise<SiteFile | undefined> {
    const target = this.layout.resolve(pathname);
    if (target === undefined) return undefined;
    if (target.setName !== undefined && !this.#sets.has(target.setName)) return undefined;
    if (!this.#offers(target.group)) return undefined;
    const isPackage = target.file.endsWith('.zip') || target.file.endsWith('-manifest.xml');
    if (target.group === 'changelist' || target.group === 'changedump')
      this.#wanted.add(`${target.group}:${target.setName}`);
    if (!isPackage) await this.ensure(target.group, target.setName, true);
    else {
      const key = `${target.group}:${target.setName}`;
      const lists = (st: GroupState | undefined): boolean =>
        st !== undefined && (st.files.includes(target.path) || st.previous.includes(target.path));
      // A package another process sharing the site directory listed since this one last looked.
      if (!lists(this.#groups.get(key)) && !lists((await this.#savedGroups())[key])) return undefined;
    }
    return siteFile(target.path, target.file.endsWith('.zip') ? ZIP_MEDIA_TYPE : XML_MEDIA_TYPE);
  }

  /** Body of /robots.txt: a `Sitemap:` line per set's Resource List (or Index). */
  async robotsTxt(): Promise<string> {
    const lines = this.setNames().map((s) => `Sitemap: ${this.layout.url(s, 'resourcelist.xml')}`);
    return `User-agent: *\nAllow: /\n${lines.join('\n')}\n`;
  }

  /**
   * Generates every document and dump (for `publish`), then removes files of earlier generations that no
   * document lists any more.
   */
  async generateAll(): Promise<GenerationReport> {
    for (const s of this.setNames())
      for (const g of GROUPS) {
        if (!this.#offers(g)) continue;
        await this.ensure(g, s);
      }
    await this.ensure('description');
    let files = 0;
    for (const st of this.#groups.values()) files += st.files.length;
    return { files, sets: this.setNames() };
  }

  /**
   * Generates every document but the dumps (which are built on demand), so the first requests find them
   * ready: a server calls it after opening, in the background. Memory: as {@link ensure}.
   */
  async prepare(): Promise<void> {
    for (const s of this.setNames())
      for (const g of GROUPS)
        if (g !== 'resourcedump' && g !== 'changedump' && this.#offers(g)) await this.ensure(g, s);
    await this.ensure('description');
  }

  /** Every file a current document refers to, relative to the site directory (for publish listings). */
  listedFiles(): string[] {
    return [...this.#groups.values()].flatMap((g) => g.files);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#unwatch?.();
    clearTimeout(this.#regenTimer);
    await Promise.allSettled(this.#inflight.values());
  }
}

/** The part of a group version after the generation key (see `#versionOf`). */
function versionPart(version: string): string {
  return version.slice(version.indexOf('\n') + 1);
}

/** Delay before a background regeneration started by a request (the request is served first). */
const BACKGROUND_DELAY_MS = 100;
/**
 * How long a request waits for a stale dump's generation before the one on disk is served (see
 * {@link Source.ensure}): well inside a client's headers timeout (ours: 30 s).
 */
const DUMP_WAIT_MS = 10_000;

function isDump(group: GroupKind): boolean {
  return group === 'resourcedump' || group === 'changedump';
}

/** Resolves when `p` settles (its failure is reported elsewhere) or after `ms`, whichever comes first. */
async function waitAtMost(p: Promise<unknown>, ms: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  await Promise.race([
    p.then(
      () => undefined,
      () => undefined,
    ),
    new Promise<void>((r) => {
      timer = setTimeout(r, ms);
    }),
  ]);
  clearTimeout(timer);
}

/** A generated document of a group (not a dump package or manifest): `resourcelist.xml`, `changelist-0002.xml`. */
const DOCUMENT_FILE = /^(resourcelist|resourcedump|changelist|changedump)(?:-[0-9]{4,}){0,2}\.xml$/;

async function filesExist(paths: readonly string[]): Promise<boolean> {
  for (const p of paths) if ((await stat(p).catch(() => undefined)) === undefined) return false;
  return true;
}

/** A {@link SiteFile} for a generated file (ETag from its identity: inode, size, mtime; never rewritten in place). */
export async function siteFile(path: string, contentType: string): Promise<SiteFile | undefined> {
  const st = await stat(path, { bigint: true }).catch(() => undefined);
  if (st === undefined || !st.isFile()) return undefined;
  return {
    path,
    contentType,
    length: Number(st.size),
    etag: `"${st.ino.toString(36)}-${st.size.toString(36)}-${st.mtimeNs.toString(36)}"`,
    lastModified: new Date(Number(st.mtimeNs / 1_000_000n)),
  };
}

export type { StoreSnapshot };
