/**
 * The Destination library API (§5.2): discover a Source, then baseline, incremental or audit a local copy,
 * with progress events.
 *
 * @module
 */
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { ResourceSyncError, isResourceSyncError } from '../core/errors.js';
import type { DocumentKind } from '../core/model.js';
import { type AuditSources, runAudit } from './audit.js';
import { type BaselineSources, runBaseline } from './baseline.js';
import { type ContextOptions, type Durability, type StateLike, SyncContext, dryState } from './context.js';
import { type DiscoveryResult, discover, sourceAliasesOf } from './discovery.js';
import type { AuditCounts, Operation, SyncEvent, SyncSummary } from './events.js';
import { HttpClient, type HttpClientOptions } from '../http/client.js';
import { type IncrementalSources, parseFromOption, runIncremental } from './incremental.js';
import {
  NAME_MAPPING_VERSION,
  STATE_DIR_NAME,
  createPathMapper,
  defaultNameOptions,
  repairDisplacements,
} from './paths.js';
import { needsRename, renameCopyFiles } from './rename-files.js';
import { DestinationState, STATE_DB_NAME, type SetKey } from './state.js';
import { SPARE_DIR_NAME, SparePool } from './spares.js';
import { sweepTempFiles } from './sweep.js';
import { type UriFilter, createUriFilter } from './filter.js';
import { type CopyLock, lockCopy } from './lock.js';
import type { ResourceChange } from '../notify/payloads.js';
// follow.ts (and the notification modules it loads) only when a copy follows or applies notifications: a
// plain sync does not pay for loading them (~45 ms cold).
import type { FollowOptions, FollowStats } from './follow.js';
import { sharedFileWriter } from './file-writer.js';
import { prepareSyncFileSystem } from '../io/syncfs.js';

/** Options of a {@link Destination}. */
export interface DestinationOptions {
  /** Any URL discovery starts from: a Source root, Source Description, Capability List, list or index. */
  readonly url: string;
  /** The local copy's directory (its state lives in `<dir>/.resourcesync/`). */
  readonly dir: string;
  /** Which Capability List, when the Source Description lists several (name, URL path or position). */
  readonly set?: string;
  /** Report what would be done, write nothing (not even the state). */
  readonly dryRun?: boolean;
  /** Remove local copies of resources the Source deleted (default: keep them, record the deletion). */
  readonly delete?: boolean;
  /** Start an incremental run from this datetime instead of the watermark. */
  readonly from?: string;
  /** Audit: recompute hashes from disk instead of trusting the state. */
  readonly checksum?: boolean;
  /** When an incremental run finds a gap, run a new baseline instead of failing with `RS_GAP`. */
  readonly autoBaseline?: boolean;
  /** Ignore Resource Dumps and Change Dumps. */
  readonly noDumps?: boolean;
  /** Hosts accepted besides the Source's own (authority check, Sitemap protocol). */
  readonly allowHosts?: readonly string[];
  /** false: accept resources of any host. */
  readonly authorityCheck?: boolean;
  /**
   * Which resources the copy holds: glob or `re:` patterns (see filter.ts). A URI is kept when it matches some
   * `include` pattern (or none are given) and no `exclude` pattern. Applied alike by every operation.
   */
  readonly include?: readonly string[];
  readonly exclude?: readonly string[];
  /** Local layout: `host-path` (default) or `path`. */
  readonly layout?: 'host-path' | 'path';
  /**
   * Synchronize another Source into a copy that belongs to one (see {@link DestinationState.copySource}): each
   * Source and set keeps its own watermark and baseline. Without it, a Source other than the copy's is refused
   * (`RS_CONFIG`): usually the wrong directory or URL.
   */
  readonly allowOtherSource?: boolean;
  /**
   * Options of the HTTP client created for the run (ignored when `client` is given). Its `headers` and
   * `bearerToken` go only to the origin of `url` and the hosts of `http.credentialHosts` (see
   * {@link sourceHttpOptions}).
   */
  readonly http?: HttpClientOptions;
  /** A client to use (not closed by the Destination). */
  readonly client?: HttpClient;
  /**
   * The time bound of one resource, all its attempts together (mirrors, whole-download retries, the HTTP client's
   * own retries): no attempt starts after it, and the resource fails with `RS_TIMEOUT` saying so. The attempt in
   * progress ends by its own timeouts (connect, headers, body idle), so a resource that never answers fails
   * after at most this plus the connect and headers timeouts. Default: 3 x the client's headers timeout (90 s).
   */
  readonly resourceTimeoutMs?: number;
  /** Resources fetched or installed at once (default: twice the HTTP client's window per origin, 16 at first). */
  readonly concurrency?: number;
  /** See {@link Durability} (default `batch`). */
  readonly durability?: Durability;
  /** Bound on a downloaded dump package (default 8 GiB). */
  readonly maxPackageBytes?: number;
  /**
   * Apply a dump package's files while it arrives, where its layout allows: `manifest.xml` first, the files in
   * the manifest's order with their sizes in their local headers (default true). What was applied early is
   * checked against the whole package once it is in (its length, hash and central directory), and checked
   * again from the Resource List or Change Lists when the package fails.
   */
  readonly applyArriving?: boolean;
  /** Receive small resources (≤ 256 KiB declared) in memory and write them synchronously (default true). */
  readonly smallFastPath?: boolean;
  readonly signal?: AbortSignal;
}

/** The time bound of one resource (see {@link DestinationOptions.resourceTimeoutMs}). */
export function resourceTimeoutOf(o: Pick<DestinationOptions, 'resourceTimeoutMs'>, client: HttpClient): number {
  return o.resourceTimeoutMs ?? 3 * (client.options.headersTimeoutMs ?? 30_000);
}

/**
 * The options of a client for the Source at `url`: `http` with credentials (`headers`, `bearerToken`) restricted to
 * the origin of `url` plus the hosts `http.credentialHosts` names. A mirror (`rel="duplicate"`), a redirect or a
 * resource on any other origin gets none.
 */
export function sourceHttpOptions(url: string, http: HttpClientOptions = {}): HttpClientOptions {
  let origin: string;
  try {
    origin = new URL(url).origin;
  } catch {
    return http; // discovery reports the bad URL
  }
  return { ...http, credentialHosts: [origin, ...(http.credentialHosts ?? [])] };
}

/** What the Source offers, from discovery. */
export interface SourceDocuments {
  readonly resourceLists: string[];
  readonly resourceDumps: string[];
  readonly changeLists: string[];
  readonly changeDumps: string[];
}

/**
 * A local copy of a Source.
 *
 * @example
 * ```ts
 * const d = new Destination({ url: 'http://localhost:8080/', dir: './mirror' });
 * d.on((e) => { if (e.type === 'progress') console.error(e.done) });
 * const summary = await d.sync();          // baseline the first time, incremental afterwards
 * const audit = await d.audit();           // summary.inSync
 * ```
 */
export class Destination {
  private listeners = new Set<(e: SyncEvent) => void>();
  /** The last discovery (reused by {@link applyNotified}). */
  private discovered: DiscoveryResult | undefined;
  readonly dir: string;
  /** The `include` / `exclude` patterns, compiled (a malformed one throws `RS_CONFIG` here). */
  readonly filter: UriFilter;

  constructor(readonly options: DestinationOptions) {
    this.dir = resolve(options.dir);
    this.filter = createUriFilter(options);
    if (options.from !== undefined) parseFromOption(options.from);
  }

  /** Adds an event listener; returns a function that removes it. */
  on(listener: (e: SyncEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Baseline when the copy has no watermark (or an unfinished baseline), else incremental. */
  sync(): Promise<SyncSummary> {
    return this.run('auto');
  }

  /** A complete copy (§5.2 baseline). */
  baseline(): Promise<SyncSummary> {
    return this.run('baseline');
  }

  /** The changes since the watermark, or since `from` (§5.2 incremental). */
  incremental(): Promise<SyncSummary> {
    return this.run('incremental');
  }

  /** Compare the local copy with the Source (§5.2 audit); `summary.inSync`. */
  audit(): Promise<SyncSummary> {
    return this.run('audit');
  }

  /**
   * Applies the changes of a change notification (N-§4) to the copy, as an incremental run applies a Change
   * List's (the same lock, state, writer and {@link applyResource} rules; a change the record already shows is
   * skipped), without moving the watermark: only a complete incremental run does. Changes without a datetime
   * are left out (a catch-up run finds them in the Change Lists). Discovery is that of the last run of this
   * Destination when there was one. Memory: the changes given.
   */
  applyNotified(changes: readonly ResourceChange[]): Promise<SyncSummary> {
    return this.run('notification', changes);
  }

  /**
   * Keeps the copy in step with the Source until the Destination's `signal` aborts (see `followCopy`, follow.ts):
   * a first run, then notifications over the channels the Source advertises (or WebSub with a callback), and
   * catch-up runs; polls at `catchUpIntervalMs` while no channel is up or none is advertised.
   */
  follow(options: FollowOptions = {}): Promise<FollowStats> {
    const client = this.options.client ?? new HttpClient(sourceHttpOptions(this.options.url, this.options.http));
    const self = new Destination({ ...this.options, client });
    self.listeners = this.listeners;
    return import('./follow.js')
      .then(({ followCopy }) => followCopy(self, client, options))
      .finally(async () => {
        if (this.options.client === undefined) await client.close().catch(() => undefined);
      });
  }

  /** Finds the Source's documents (discovery, §8). */
  async discover(client: HttpClient): Promise<SourceDocuments> {
    return documentsOf(await this.discoverSource(client));
  }

  private discoverSource(client: HttpClient): Promise<DiscoveryResult> {
    const init: { set?: string; signal?: AbortSignal } = {};
    if (this.options.set !== undefined) init.set = this.options.set;
    if (this.options.signal !== undefined) init.signal = this.options.signal;
    return discover(this.options.url, client, init);
  }

  private emit(e: SyncEvent): void {
    for (const l of this.listeners) {
      try {
        l(e);
      } catch {
        // Listeners must not break the run.
      }
    }
  }

  private async run(mode: Operation | 'auto', notified?: readonly ResourceChange[]): Promise<SyncSummary> {
    const started = Date.now();
    const o = this.options;
    const dryRun = o.dryRun ?? false;
    const readOnly = dryRun || mode === 'audit';
    const dbPath = join(this.dir, STATE_DIR_NAME, STATE_DB_NAME);
    let real: DestinationState | undefined;
    let lock: CopyLock | undefined;
    if (!readOnly) {
      real = DestinationState.open(this.dir);
      try {
        lock = lockCopy(this.dir);
      } catch (e) {
        real.close();
        throw e;
      }
    } else if (existsSync(dbPath)) real = DestinationState.open(this.dir, { readonly: true });
    const state: StateLike = dryRun || real === undefined ? dryState(real) : real;
    const client = o.client ?? new HttpClient(sourceHttpOptions(o.url, o.http));
    try {
      // Files a crash left half-way to `<dir>/%%self` (resources below them arrived) reach it first.
      if (!readOnly) await repairDisplacements(this.dir);
      const journal = state.journal();
      if (journal !== undefined && !readOnly) {
        // The last run was interrupted: it may have left temporary files of unfinished installs.
        this.emit({ type: 'resume', op: journal.op, started: journal.started });
        await sweepTempFiles(this.dir);
      }
      // The Source and set decide the watermark: discovery first.
      const discovered =
        mode === 'notification' && this.discovered !== undefined ? this.discovered : await this.discoverSource(client);
      this.discovered = discovered;
      const docs = documentsOf(discovered);
      const identityWarnings: string[] = [];
      if (real !== undefined)
        await selectSourceSet(real, discovered, o, this.dir, client, (m) => identityWarnings.push(m));
      const watermark = state.getWatermark();
      let op: Operation;
      if (mode !== 'auto') op = mode;
      else if (o.from !== undefined) op = 'incremental';
      else if (journal?.op === 'baseline' || watermark === undefined) op = 'baseline';
      else op = 'incremental';
      const tmpDir = join(this.dir, STATE_DIR_NAME, 'tmp');
      if (!readOnly) await rm(tmpDir, { recursive: true, force: true }).catch(() => undefined);
      const ctxOptions: { -readonly [K in keyof ContextOptions]: ContextOptions[K] } = {
        source: o.url,
        dir: this.dir,
        dryRun,
        deleteFiles: o.delete ?? false,
        // By default the workers follow the client's adaptive window (2 per request in flight: 16 at first).
        concurrency: o.concurrency ?? (() => client.concurrency),
        checksum: o.checksum ?? false,
        noDumps: o.noDumps ?? false,
        autoBaseline: o.autoBaseline ?? false,
        durability: o.durability ?? 'batch',
        tmpDir,
      };
      if (this.filter.active) ctxOptions.filter = this.filter;
      // Replaced small files are kept as spares for the next replacements (see spares.ts).
      if (!readOnly && ctxOptions.durability === 'batch')
        ctxOptions.spares = await SparePool.open(join(this.dir, STATE_DIR_NAME, SPARE_DIR_NAME));
      if (o.maxPackageBytes !== undefined) ctxOptions.maxPackageBytes = o.maxPackageBytes;
      if (o.applyArriving !== undefined) ctxOptions.applyArriving = o.applyArriving;
      if (o.smallFastPath !== undefined) ctxOptions.smallFastPath = o.smallFastPath;
      if (journal !== undefined) ctxOptions.resumed = true;
      if (o.signal !== undefined) ctxOptions.signal = o.signal;
      ctxOptions.resourceTimeoutMs = resourceTimeoutOf(o, client);
      // File names follow the options the copy was made with (a copy moved to another system keeps its names).
      const recorded = real?.nameOptions();
      const names =
        recorded === undefined
          ? defaultNameOptions()
          : { foldCase: recorded.foldCase, windowsNames: recorded.windowsNames };
      const mapperOptions: Parameters<typeof createPathMapper>[0] = {
        root: this.dir,
        sourceUrl: o.url,
        ...names,
        ...(o.layout === undefined ? {} : { layout: o.layout }),
        ...(o.allowHosts === undefined ? {} : { allowHosts: o.allowHosts }),
        ...(o.authorityCheck === undefined ? {} : { authorityCheck: o.authorityCheck }),
      };
      const mapper = createPathMapper(mapperOptions);
      if (real !== undefined && !readOnly) {
        if (needsRename(real)) {
          // A copy made by an older version: its files take the names of this one first.
          const r = await renameCopyFiles(real, mapper, this.dir, {
            warn: (message) => this.emit({ type: 'warning', code: 'RS_IO', message }),
          });
          if (r.renamed > 0 || r.failed > 0)
            this.emit({
              type: 'warning',
              code: 'RS_CONFIG',
              message: `${r.renamed} file${r.renamed === 1 ? '' : 's'} renamed to this version's names (docs/file-names.md)${r.failed > 0 ? `, ${r.failed} could not be` : ''}`,
            });
        }
        if (recorded === undefined || recorded.version !== NAME_MAPPING_VERSION)
          real.setNameOptions({ version: NAME_MAPPING_VERSION, ...names });
      } else if (real !== undefined && needsRename(real))
        this.emit({
          type: 'warning',
          code: 'RS_CONFIG',
          message:
            'this copy was made by an older version whose file names differ: run sync once (without --dry-run or --audit) to rename them',
        });
      const makeCtx = (operation: Operation): SyncContext =>
        new SyncContext(operation, client, mapper, state, ctxOptions, (e) => this.emit(e));

      // Started before the operation (a Node worker thread is online ~22-23 ms after it is created here): the file
      // writer thread replaces files in incremental runs, the sync co-process flushes `batch` runs.
      if (!readOnly) {
        if (op === 'incremental' || op === 'notification') sharedFileWriter().warm();
        if (ctxOptions.durability === 'batch') prepareSyncFileSystem();
      }
      let ctx = makeCtx(op);
      // Discovery's choices (e.g. a plain Sitemap passed over for a ResourceSync document) are the run's warnings.
      for (const w of [...(discovered.warnings ?? []), ...identityWarnings]) ctx.warn('RS_DISCOVERY', w);
      this.emit({ type: 'start', operation: op, source: o.url, dryRun });
      let via: string[] = [];
      let watermarkAfter = watermark?.at;
      let complete = false;
      let audit: AuditCounts | undefined;
      try {
        if (op === 'baseline') {
          const r = await runBaseline(ctx, docs satisfies BaselineSources);
          via = r.via;
          complete = r.complete;
          if (r.complete && !dryRun) watermarkAfter = r.at;
        } else if (op === 'incremental') {
          const from = o.from !== undefined ? parseFromOption(o.from) : watermark?.at;
          if (from === undefined)
            throw new ResourceSyncError(
              'RS_CONFIG',
              `no watermark in ${this.dir}: run a baseline first, or give --from`,
            );
          try {
            const r = await runIncremental(ctx, docs satisfies IncrementalSources, from);
            via = r.via;
            complete = r.complete;
            if (!dryRun && r.complete) watermarkAfter = r.watermark;
          } catch (e) {
            if (!isResourceSyncError(e, 'RS_GAP') || !(o.autoBaseline ?? false)) throw e;
            this.emit({ type: 'warning', code: 'RS_GAP', message: `${e.message}; running a new baseline` });
            op = 'baseline';
            ctx = makeCtx(op);
            ctx.warnings.push(`${e.message} [RS_GAP]`);
            const r = await runBaseline(ctx, docs);
            via = r.via;
            complete = r.complete;
            if (r.complete && !dryRun) watermarkAfter = r.at;
          }
        } else if (op === 'notification') {
          const { applyNotifiedChanges } = await import('./follow.js');
          await applyNotifiedChanges(ctx, notified ?? [], watermark?.at);
          complete = ctx.counts.failed === 0;
        } else {
          audit = await runAudit(ctx, docs satisfies AuditSources);
          complete = true;
          via = ['list'];
        }
      } catch (e) {
        // Interrupted or failed: what was installed so far is recorded (made durable first), so the next run
        // skips it without hashing it again.
        await ctx.recorder.flush().catch(() => undefined);
        throw e;
      }
      const summary: { -readonly [K in keyof SyncSummary]: SyncSummary[K] } = {
        operation: op,
        source: o.url,
        dir: this.dir,
        dryRun,
        via,
        counts: ctx.counts,
        failures: ctx.failures,
        warnings: ctx.warnings,
        complete,
        elapsedMs: Date.now() - started,
      };
      if (watermark?.at !== undefined) summary.watermarkBefore = watermark.at;
      if (watermarkAfter !== undefined) summary.watermarkAfter = watermarkAfter;
      if (audit !== undefined) {
        summary.audit = audit;
        summary.inSync = audit.missing + audit.extra + audit.changed === 0;
      }
      this.emit({ type: 'end', summary });
      return summary;
    } finally {
      if (o.client === undefined) await client.close().catch(() => undefined);
      real?.close();
      lock?.release();
    }
  }
}

/**
 * The Source and set a discovery result names: the Source Description (else the Capability List, else the
 * document given) and the Capability List (else the document given).
 */
export function setKeyOf(d: DiscoveryResult): SetKey {
  const set = d.set?.url ?? d.direct?.url ?? d.sets[0]?.url ?? '';
  return { source: d.sourceDescription ?? set, set };
}

function originOf(url: string | undefined): string | undefined {
  if (url === undefined) return undefined;
  try {
    return new URL(url).origin;
  } catch {
    return undefined;
  }
}

/**
 * Selects the watermark of the discovered set in the state, refusing a Source other than the copy's unless
 * `allowOtherSource`. One Source has several entry points (its root, `/.well-known/resourcesync`, a Source
 * Description Index, any of its Source Descriptions, a Capability List, whose `up` link names the Source
 * Description listing it): a Source is recorded under the first one synchronized (see {@link setKeyOf}), and
 * another is the same Source when the documents say so: an Index lists it, or a Source Description names the
 * recorded Index by its `index`/`up` link (see `DiscoveryResult.sourceAliases`, `DestinationState.sourceAliases`,
 * both on the naming document's own origin). What discovery read answers most cases without a request; a
 * Source Description known only from a Capability List's `up` link is read (one GET, its header) when, and only
 * when, nothing recorded matches. What is learnt is recorded (so the next run needs no request), and the set
 * keeps the Source as recorded, hence its watermark. A copy made by version 1 of the state (one watermark,
 * Source not recorded) is taken to be the same Source when it was synchronized from the same origin.
 * @throws ResourceSyncError `RS_CONFIG` naming the copy's Source and the flag that overrides.
 */
async function selectSourceSet(
  state: DestinationState,
  discovered: DiscoveryResult,
  o: DestinationOptions,
  dir: string,
  client: HttpClient,
  warn: (message: string) => void,
): Promise<void> {
  const found = setKeyOf(discovered);
  const owner = state.copySource();
  const recorded = state.copySources();
  const identity = new Set([found.source, ...(discovered.sourceAliases ?? [])]);
  const sameAs = (r: string): boolean => identity.has(r) || state.sourceAliases(r).some((a) => identity.has(a));
  let match = recorded.includes(found.source) ? found.source : recorded.find(sameAs);
  let learnt: string[] = [];
  if (
    match === undefined &&
    recorded.length > 0 &&
    discovered.sourceAliases === undefined &&
    discovered.sourceDescription !== undefined
  ) {
    // Only named by a Capability List's `up` link: its Source Description says which Index it belongs to.
    try {
      learnt = await sourceAliasesOf(found.source, client, o.signal === undefined ? {} : { signal: o.signal });
    } catch (e) {
      if (isResourceSyncError(e, 'RS_ABORTED')) throw e;
      warn(`could not read the Source Description ${found.source} to tell its Source: ${(e as Error).message}`);
    }
    for (const a of learnt) identity.add(a);
    match = recorded.find(sameAs);
  }
  const key: SetKey = match === undefined ? found : { source: match, set: found.set };
  const legacy = state.legacySet();
  const legacyUrl = legacy?.watermark?.sourceUrl;
  const legacySame =
    legacy !== undefined &&
    owner === undefined &&
    (legacyUrl === undefined ||
      legacyUrl === '' ||
      originOf(legacyUrl) === originOf(key.source) ||
      originOf(legacyUrl) === originOf(o.url));
  const other = owner !== undefined ? key.source !== owner : legacy !== undefined && !legacySame;
  if (other && o.allowOtherSource !== true) {
    // A Source Description names its Index: the Index lists the others (an Index's own aliases are its members).
    const index =
      discovered.sourceDescriptionIndex === undefined ? [...identity].find((u) => u !== found.source) : undefined;
    const hint =
      owner !== undefined && match === undefined && index !== undefined
        ? ` (nor of ${index}, which ${found.source} belongs to: if that is this copy's Source, synchronize once from ${index} so the copy learns it)`
        : '';
    throw new ResourceSyncError(
      'RS_CONFIG',
      `${dir} is a copy of ${owner ?? legacyUrl ?? 'another Source'}, not of ${found.source}${hint}: sync into another directory, or give --allow-other-source to keep both Sources in this copy (each with its own watermark)`,
      { url: o.url },
    );
  }
  state.selectSet(key, { adoptLegacy: legacySame });
  state.addSourceAliases(key.source, identity);
}

/** The capability documents of a discovery result. */
export function documentsOf(d: DiscoveryResult): SourceDocuments {
  const out: SourceDocuments = { resourceLists: [], resourceDumps: [], changeLists: [], changeDumps: [] };
  if (d.set !== undefined) {
    const caps = d.set.capabilities;
    out.resourceLists.push(...(caps.get('resourcelist') ?? []));
    out.resourceDumps.push(...(caps.get('resourcedump') ?? []));
    out.changeLists.push(...(caps.get('changelist') ?? []));
    out.changeDumps.push(...(caps.get('changedump') ?? []));
    return out;
  }
  if (d.direct !== undefined) {
    const slot = DIRECT[d.direct.kind];
    if (slot === undefined)
      throw new ResourceSyncError(
        'RS_DISCOVERY',
        `${d.direct.url} is a ${d.direct.kind}, not a document a Destination can synchronize from`,
        { url: d.direct.url },
      );
    out[slot].push(d.direct.url);
    return out;
  }
  if (d.sets.length > 1)
    throw new ResourceSyncError(
      'RS_CONFIG',
      `the Source has ${d.sets.length} Capability Lists; choose one with --set: ${d.sets.map((s) => (s.name === undefined ? s.url : `${s.name} (${s.url})`)).join(', ')}`,
      { ...(d.sourceDescription === undefined ? {} : { url: d.sourceDescription }) },
    );
  throw new ResourceSyncError('RS_DISCOVERY', 'no Capability List found', {
    ...(d.sourceDescription === undefined ? {} : { url: d.sourceDescription }),
  });
}

const DIRECT: Partial<Record<DocumentKind, keyof SourceDocuments>> = {
  'resource-list': 'resourceLists',
  'resource-list-index': 'resourceLists',
  sitemap: 'resourceLists',
  'sitemap-index': 'resourceLists',
  'resource-dump': 'resourceDumps',
  'resource-dump-index': 'resourceDumps',
  'change-list': 'changeLists',
  'change-list-index': 'changeLists',
  'change-dump': 'changeDumps',
  'change-dump-index': 'changeDumps',
};
