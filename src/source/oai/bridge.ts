/**
 * The OAI-PMH bridge: a ResourceSync Source over any OAI-PMH 2.0 repository (DSpace, Fedora, Hyrax,
 * Islandora, EPrints, OJS ...). It harvests the repository incrementally into a library {@link Source}
 * (SQLite store, generated lists, dumps, Change Lists, notifications) and re-harvests on an interval while it
 * serves. What each record becomes is described in `model.ts`; how harvesting works, and how bad providers
 * are met, in `harvest.ts`.
 *
 * State directory: `source.db` (the Source's store), `oai.db` (watermarks, the list in progress, the
 * records' bytes), `blobs/` (versions kept for Change Dumps), `site/` (generated documents).
 *
 * Until the first full harvest has completed, the bridge is not {@link OaiBridge.ready}: a server answers
 * 503 (a Destination would otherwise take a partial baseline, and the records of the first harvest are not
 * in any Change List). A restart with a state directory that completed it serves at once and harvests in the
 * background.
 *
 * @module
 */
import { join } from 'node:path';
import { ResourceSyncError } from '../../core/errors.js';
import { createMultiHasher } from '../../io/hashing.js';
import type { HttpClientOptions } from '../../http/client.js';
import { BlobStore } from '../blobs.js';
import { parseBaseUrl, requestRelativePath } from '../paths.js';
import {
  type DocumentEvent,
  type RecordedChange,
  type SiteFile,
  Source,
  type SourceLimits,
  type SourceOptions,
} from '../source.js';
import { openSqliteStore } from '../sqlite-store.js';
import type { ChangeInput, ResourceLink, ResourceRecord, SourceStore } from '../store.js';
import { OaiClient } from './client.js';
import {
  type ApplyCounts,
  type HarvestedRecord,
  type HarvestEvent,
  type HarvestReport,
  OaiHarvester,
  type OaiSink,
} from './harvest.js';
import { ITEMS_DIR, parseRecordKey, RECORD_MEDIA_TYPE, recordKey } from './model.js';
import { OaiState } from './state.js';

/** The one set (Capability List) of a bridge. */
export const OAI_SET_NAME = 'default';

/** Default of {@link OaiBridgeOptions.intervalMs}: 10 minutes. */
export const DEFAULT_HARVEST_INTERVAL_MS = 10 * 60 * 1000;

/** Options of {@link openOaiBridge}. */
export interface OaiBridgeOptions {
  /** The OAI-PMH provider's base URL. */
  readonly provider: string;
  /** Our Source's base URL (absolute http(s)). */
  readonly baseUrl: string;
  /** State directory (see the module comment). */
  readonly stateDir: string;
  /** Formats harvested, one resource each per item (default `['oai_dc']`). */
  readonly metadataPrefixes?: readonly string[];
  /** Harvest this OAI set only. */
  readonly set?: string;
  /** Time between the end of one harvest and the start of the next while serving (default 10 min). */
  readonly intervalMs?: number;
  /** See `OaiHarvesterOptions.overlapMs` (default 5 min). */
  readonly overlapMs?: number;
  /** See `OaiHarvesterOptions.reconcileEveryMs` (default by the provider's deletedRecord: 24 h or 7 days). */
  readonly reconcileEveryMs?: number;
  /** Records per store transaction (default 500). */
  readonly batchSize?: number;
  /** Fetches of a page again after a failure inside its body (default 3). */
  readonly pageRetries?: number;
  /** Options of the HTTP client talking to the provider (timeouts, retries, proxy, headers). */
  readonly httpOptions?: HttpClientOptions;
  /** Deadline of one provider response (default 10 min). */
  readonly responseTimeoutMs?: number;
  readonly limits?: SourceLimits;
  /** Bound of kept versions for Change Dumps (default 1 GiB; 0 keeps none). */
  readonly blobMaxBytes?: number;
  readonly capabilities?: SourceOptions['capabilities'];
  readonly capabilityListExtras?: SourceOptions['capabilityListExtras'];
  readonly regenerateAfterMs?: number;
  readonly fsync?: boolean;
  readonly onWarning?: (message: string) => void;
  readonly onEvent?: (event: HarvestEvent) => void;
  /** After each harvest (or reconcile) while serving, with what it did or why it failed. */
  readonly onHarvest?: (result: { report?: HarvestReport; error?: unknown; reconcile: boolean }) => void;
}

/** A Source over an OAI-PMH repository (what `serve --oai-pmh` runs). */
export interface OaiBridge {
  readonly baseUrl: URL;
  readonly sourceDescriptionUrl: string;
  readonly source: Source;
  readonly store: SourceStore;
  readonly harvester: OaiHarvester;
  readonly client: OaiClient;
  readonly stateDir: string;
  /** True once a first full harvest has completed (before that a server answers 503). */
  readonly ready: boolean;
  document(pathname: string): Promise<SiteFile | undefined>;
  resource(pathname: string): Promise<SiteFile | undefined>;
  capabilityListUrl(pathname: string): string | undefined;
  robotsTxt(): Promise<string>;
  onChange(listener: (changes: readonly RecordedChange[]) => void): () => void;
  onDocuments(listener: (events: readonly DocumentEvent[]) => void): () => void;
  /** One harvest now (queued behind one in progress), then a reconcile when one is due. */
  harvest(signal?: AbortSignal): Promise<HarvestReport>;
  /** A reconcile now (full ListIdentifiers; see `harvest.ts`), then drops the bytes no resource uses. */
  reconcile(signal?: AbortSignal): Promise<HarvestReport>;
  /**
   * Harvests now (or after `intervalMs` with `immediately: false`) and then every `intervalMs` until
   * {@link stop} / {@link close}; results and failures go to `onHarvest`.
   */
  start(options?: { readonly immediately?: boolean }): void;
  /** Stops the periodic harvest (one in progress is aborted) and waits for it. */
  stop(): Promise<void>;
  close(): Promise<void>;
}

async function* once(bytes: Buffer): AsyncGenerator<Uint8Array, void, undefined> {
  yield bytes;
}

/** The sink of the harvester: records become resources of the Source (see `model.ts`). */
class SourceSink implements OaiSink {
  readonly #source: Source;
  readonly #store: SourceStore;
  readonly #state: OaiState;
  readonly #blobs: BlobStore;
  readonly #prefixes: readonly string[];
  readonly #client: OaiClient;

  constructor(source: Source, state: OaiState, blobs: BlobStore, prefixes: readonly string[], client: OaiClient) {
    this.#source = source;
    this.#store = source.store;
    this.#state = state;
    this.#blobs = blobs;
    this.#prefixes = prefixes;
    this.#client = client;
  }

  /**
   * The links of an item's record in one format (§14, see `model.ts`): `via` the provider's GetRecord URL,
   * and `alternate` the item's records in the other harvested formats that exist.
   */
  #linksOf(identifier: string, prefix: string, present: (p: string) => boolean): ResourceLink[] {
    const links: ResourceLink[] = [
      { rel: 'via', href: this.#client.requestUrl('GetRecord', { identifier, metadataPrefix: prefix }) },
    ];
    for (const p of this.#prefixes)
      if (p !== prefix && present(p))
        links.push({ rel: 'alternate', href: recordKey(identifier, p), type: RECORD_MEDIA_TYPE });
    return links;
  }

  async apply(records: readonly HarvestedRecord[], log: boolean): Promise<ApplyCounts> {
    const counts: ApplyCounts = { created: 0, updated: 0, deleted: 0, unchanged: 0 };
    const changes: ChangeInput[] = [];
    const touches: ChangeInput[] = [];
    const content: { sha256: string; bytes: Buffer }[] = [];
    // The last record of a key in the batch wins (a provider may list an item twice in a page).
    const last = new Map<string, HarvestedRecord>();
    for (const r of records) last.set(recordKey(r.identifier, r.metadataPrefix), r);
    // Which formats of an item exist after the batch (the batch first, else the store).
    const after = new Map<string, boolean>();
    const existing = new Map<string, ResourceRecord | undefined>();
    const stored = async (key: string): Promise<ResourceRecord | undefined> => {
      if (!existing.has(key)) existing.set(key, await this.#store.getResource(key));
      return existing.get(key);
    };
    for (const [key, r] of last) after.set(key, !(r.deleted || r.bytes === undefined));
    const items = new Map<string, Set<string>>();
    for (const r of last.values()) {
      let set = items.get(r.identifier);
      if (set === undefined) items.set(r.identifier, (set = new Set()));
      set.add(r.metadataPrefix);
    }
    for (const [id, prefixes] of items)
      for (const p of this.#prefixes) {
        const key = recordKey(id, p);
        if (!prefixes.has(p)) after.set(key, (await stored(key)) !== undefined);
      }
    const presentOf = (id: string) => (p: string) => after.get(recordKey(id, p)) === true;
    /** Formats whose existence the batch changes: their siblings' alternate links change. */
    const moved = new Set<string>();
    for (const [key, r] of last) {
      const old = await stored(key);
      if (r.deleted || r.bytes === undefined) {
        if (old === undefined) continue;
        changes.push({ uri: key, change: 'deleted', setName: OAI_SET_NAME });
        counts.deleted++;
        moved.add(r.identifier);
        continue;
      }
      const links = this.#linksOf(r.identifier, r.metadataPrefix, presentOf(r.identifier));
      if (old !== undefined && old.hashes['sha-256'] === r.sha256) {
        counts.unchanged++;
        // The provider touched the record (a newer datestamp, the same bytes), or its links moved: the
        // inventory follows without a Change List entry.
        const lastmodMs = Math.max(r.datestampMs, old.lastmodMs);
        if (lastmodMs > old.lastmodMs || JSON.stringify(old.links ?? []) !== JSON.stringify(links))
          touches.push({
            uri: key,
            change: 'updated',
            setName: OAI_SET_NAME,
            length: old.length,
            hashes: old.hashes,
            type: RECORD_MEDIA_TYPE,
            lastmodMs,
            links,
          });
        continue;
      }
      if (old === undefined) moved.add(r.identifier);
      const h = createMultiHasher(['md5', 'sha-256']);
      h.update(r.bytes);
      const hashes = h.digest();
      content.push({ sha256: hashes['sha-256']!, bytes: r.bytes });
      changes.push({
        uri: key,
        change: old === undefined ? 'created' : 'updated',
        setName: OAI_SET_NAME,
        length: r.bytes.length,
        hashes,
        type: RECORD_MEDIA_TYPE,
        lastmodMs: r.datestampMs,
        links,
      });
      if (old === undefined) counts.created++;
      else counts.updated++;
    }
    // Formats of those items that the batch did not carry: their alternate links follow (inventory only).
    for (const id of moved)
      for (const p of this.#prefixes) {
        const key = recordKey(id, p);
        if (last.has(key)) continue;
        const old = await stored(key);
        if (old === undefined) continue;
        touches.push({
          uri: key,
          change: 'updated',
          setName: OAI_SET_NAME,
          length: old.length,
          hashes: old.hashes,
          type: RECORD_MEDIA_TYPE,
          lastmodMs: old.lastmodMs,
          links: this.#linksOf(id, p, presentOf(id)),
        });
      }
    // The bytes first (durably), then the store's record of them: a crash in between leaves bytes nobody
    // points at (collected later), never a resource without bytes.
    this.#state.putContent(content);
    if (log && this.#blobs.enabled) for (const c of content) await this.#blobs.put(c.sha256, once(c.bytes));
    if (changes.length > 0) await this.#source.record(changes, log);
    if (touches.length > 0) await this.#source.record(touches, false);
    return counts;
  }

  async datestamps(metadataPrefix: string, identifiers: readonly string[]): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    for (const id of identifiers) {
      const r = await this.#store.getResource(recordKey(id, metadataPrefix));
      if (r !== undefined) out.set(id, r.lastmodMs);
    }
    return out;
  }

  async *identifiers(metadataPrefix: string): AsyncGenerator<string, void, undefined> {
    for await (const r of this.#store.resources({ setName: OAI_SET_NAME, after: `${ITEMS_DIR}/` })) {
      if (!r.uri.startsWith(`${ITEMS_DIR}/`)) break;
      const parsed = parseRecordKey(r.uri);
      if (parsed?.metadataPrefix === metadataPrefix) yield parsed.identifier;
    }
  }
}

/**
 * Opens a bridge (its state directory, store and Source; no request is made yet). Call {@link OaiBridge.harvest}
 * or {@link OaiBridge.start}, and serve it with `createSourceServer` (it is a `SourceSite`).
 *
 * @example
 * ```ts
 * const bridge = await openOaiBridge({ provider: 'https://repo.example.org/oai', baseUrl: 'http://localhost:8080/',
 *   stateDir: './oai-state', metadataPrefixes: ['oai_dc', 'mods'] });
 * await bridge.harvest();      // the first, full harvest
 * bridge.start();              // then every 10 minutes
 * ```
 * @throws ResourceSyncError `RS_CONFIG` (bad URLs, a state directory of another provider), `RS_STORE`.
 */
export async function openOaiBridge(options: OaiBridgeOptions): Promise<OaiBridge> {
  const baseUrl = parseBaseUrl(options.baseUrl);
  const stateDir = options.stateDir;
  const client = new OaiClient({
    baseUrl: options.provider,
    ...(options.httpOptions === undefined ? {} : { httpOptions: options.httpOptions }),
    ...(options.responseTimeoutMs === undefined ? {} : { responseTimeoutMs: options.responseTimeoutMs }),
  });
  const state = OaiState.open(join(stateDir, 'oai.db'));
  let store: SourceStore | undefined;
  try {
    store = await openSqliteStore({ path: join(stateDir, 'source.db') });
    const blobs = await BlobStore.open({
      dir: join(stateDir, 'blobs'),
      ...(options.blobMaxBytes === undefined ? {} : { maxBytes: options.blobMaxBytes }),
    });
    const identifyUrl = client.requestUrl('Identify');
    const source = await Source.open({
      store,
      baseUrl,
      siteDir: join(stateDir, 'site'),
      blobs,
      sets: [{ name: OAI_SET_NAME, describedBy: identifyUrl }],
      describedBy: identifyUrl,
      currentContent: async (r) => {
        const sha = r.hashes['sha-256'];
        const data = sha === undefined ? undefined : state.getContent(sha);
        return data === undefined ? undefined : { data };
      },
      ...(options.limits === undefined ? {} : { limits: options.limits }),
      ...(options.capabilities === undefined ? {} : { capabilities: options.capabilities }),
      ...(options.capabilityListExtras === undefined ? {} : { capabilityListExtras: options.capabilityListExtras }),
      ...(options.regenerateAfterMs === undefined ? {} : { regenerateAfterMs: options.regenerateAfterMs }),
      ...(options.fsync === undefined ? {} : { fsync: options.fsync }),
      ...(options.onWarning === undefined ? {} : { onWarning: options.onWarning }),
    });
    const harvester = new OaiHarvester({
      client,
      state,
      sink: new SourceSink(source, state, blobs, options.metadataPrefixes ?? ['oai_dc'], client),
      ...(options.metadataPrefixes === undefined ? {} : { metadataPrefixes: options.metadataPrefixes }),
      ...(options.set === undefined ? {} : { set: options.set }),
      ...(options.overlapMs === undefined ? {} : { overlapMs: options.overlapMs }),
      ...(options.reconcileEveryMs === undefined ? {} : { reconcileEveryMs: options.reconcileEveryMs }),
      ...(options.batchSize === undefined ? {} : { batchSize: options.batchSize }),
      ...(options.pageRetries === undefined ? {} : { pageRetries: options.pageRetries }),
      ...(options.onEvent === undefined ? {} : { onEvent: options.onEvent }),
      ...(options.onWarning === undefined ? {} : { onWarning: options.onWarning }),
    });
    return new Bridge(options, baseUrl, stateDir, client, state, store, source, harvester);
  } catch (e) {
    state.close();
    await store?.close().catch(() => undefined);
    await client.close().catch(() => undefined);
    throw e;
  }
}

class Bridge implements OaiBridge {
  readonly baseUrl: URL;
  readonly sourceDescriptionUrl: string;
  readonly source: Source;
  readonly store: SourceStore;
  readonly harvester: OaiHarvester;
  readonly client: OaiClient;
  readonly stateDir: string;
  readonly #options: OaiBridgeOptions;
  readonly #state: OaiState;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #abort: AbortController | undefined;
  #started = false;
  #closed = false;

  constructor(
    options: OaiBridgeOptions,
    baseUrl: URL,
    stateDir: string,
    client: OaiClient,
    state: OaiState,
    store: SourceStore,
    source: Source,
    harvester: OaiHarvester,
  ) {
    this.#options = options;
    this.baseUrl = baseUrl;
    this.stateDir = stateDir;
    this.client = client;
    this.#state = state;
    this.store = store;
    this.source = source;
    this.harvester = harvester;
    this.sourceDescriptionUrl = source.layout.sourceDescriptionUrl;
  }

  get ready(): boolean {
    return !this.harvester.initial;
  }

  document(pathname: string): Promise<SiteFile | undefined> {
    return this.source.document(pathname);
  }

  async resource(pathname: string): Promise<SiteFile | undefined> {
    const rel = requestRelativePath(this.baseUrl, pathname);
    if (rel === undefined || !rel.startsWith(`${ITEMS_DIR}/`)) return undefined;
    const r = await this.store.getResource(rel);
    const sha = r?.hashes['sha-256'];
    if (r === undefined || sha === undefined) return undefined;
    const data = this.#state.getContent(sha);
    if (data === undefined) {
      this.#options.onWarning?.(`the bytes of ${rel} (sha-256 ${sha}) are missing from ${this.#state.path}`);
      return undefined;
    }
    return {
      // Never opened: `data` is the whole content.
      path: this.#state.path,
      contentType: RECORD_MEDIA_TYPE,
      length: data.length,
      etag: `"${sha}"`,
      lastModified: new Date(r.lastmodMs),
      data,
    };
  }

  capabilityListUrl(pathname: string): string | undefined {
    const rel = requestRelativePath(this.baseUrl, pathname);
    return rel === undefined ? undefined : this.source.capabilityListUrl(OAI_SET_NAME);
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

  async harvest(signal?: AbortSignal): Promise<HarvestReport> {
    if (this.#closed) throw new ResourceSyncError('RS_STORE', 'the OAI-PMH bridge is closed');
    return this.harvester.harvest(signal);
  }

  async reconcile(signal?: AbortSignal): Promise<HarvestReport> {
    if (this.#closed) throw new ResourceSyncError('RS_STORE', 'the OAI-PMH bridge is closed');
    const report = await this.harvester.reconcile(signal);
    await this.#collect();
    return report;
  }

  /** One round of the periodic loop: harvest, then reconcile when due; garbage-collects bytes after a reconcile. */
  async #round(signal: AbortSignal): Promise<void> {
    const notify = this.#options.onHarvest;
    try {
      const report = await this.harvester.harvest(signal);
      notify?.({ report, reconcile: false });
    } catch (e) {
      notify?.({ error: e, reconcile: false });
      return;
    }
    if (signal.aborted || !this.harvester.reconcileDue()) return;
    try {
      const report = await this.reconcile(signal);
      notify?.({ report, reconcile: true });
    } catch (e) {
      notify?.({ error: e, reconcile: true });
    }
  }

  /** Drops the bytes no current resource has. */
  async #collect(): Promise<void> {
    const store = this.store;
    await this.#state.collectContent(
      (async function* () {
        for await (const r of store.resources({ setName: OAI_SET_NAME })) {
          const sha = r.hashes['sha-256'];
          if (sha !== undefined) yield sha;
        }
      })(),
    );
  }

  start(options: { readonly immediately?: boolean } = {}): void {
    if (this.#started || this.#closed) return;
    this.#started = true;
    const interval = this.#options.intervalMs ?? DEFAULT_HARVEST_INTERVAL_MS;
    const loop = (): void => {
      if (!this.#started) return;
      const ctrl = new AbortController();
      this.#abort = ctrl;
      this.#running = this.#round(ctrl.signal).finally(() => {
        this.#running = undefined;
        if (this.#started) this.#timer = setTimeout(loop, interval);
      });
    };
    if (options.immediately === false) this.#timer = setTimeout(loop, interval);
    else loop();
  }

  async stop(): Promise<void> {
    this.#started = false;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#abort?.abort(new ResourceSyncError('RS_ABORTED', 'the OAI-PMH bridge is stopping'));
    await this.#running?.catch(() => undefined);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    await this.stop();
    this.#closed = true;
    await this.source.close();
    await this.store.close();
    await this.client.close().catch(() => undefined);
    this.#state.close();
  }
}
