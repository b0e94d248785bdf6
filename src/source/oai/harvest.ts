/**
 * Incremental harvesting of an OAI-PMH 2.0 repository into a sink (the bridge's Source), with its own
 * watermark per metadata format.
 *
 * One harvest: `Identify` (granularity, deletedRecord), then for each metadata format `ListRecords` from the
 * watermark (no `from` the first time), page after page by resumption token. Each page's records go to the sink
 * in batches; after a page the state (the next token, and the list's start) is written, so a process stopped
 * between pages, or inside one, goes on from the last page done: the records of the page being read when it
 * stopped are read again, and the sink does not record again what it already has (same bytes: no change). A
 * list completes with an empty token: the watermark becomes the `responseDate` of its first page, less the
 * overlap, in the provider's granularity (a day-granularity provider gets the day, and since `from` is
 * inclusive the whole day is read again). The first page's `responseDate` rather than the last one's because a
 * record changed while the list was being read may or may not be in it; the overlap (default 5 minutes)
 * because a provider may give a record a datestamp a little before it becomes visible (a transaction that
 * commits late, an index updated in batches: DSpace's XOAI index lags by its cron period, set the overlap
 * to that). All datestamps and `from` values are the provider's clock, never ours.
 *
 * Bad providers: `badResumptionToken` (an expired token, or one from before a restart) restarts the list
 * from the watermark (at most `maxListRestarts` times per list and harvest); `noRecordsMatch` is an empty list; a token
 * repeated by the provider is refused (it would loop); `503` + `Retry-After` is waited for up to a bound and
 * network failures are retried, by the HTTP client, and a page that fails while its body is read is fetched
 * again (`pageRetries`); anything else stops the harvest with the provider's message and URL, the state left
 * at the last page done.
 *
 * Deletions: a provider with `deletedRecord` `persistent` or `transient` reports them as deleted headers, which
 * become `deleted` changes. One with `no` (and a transient one that forgot them, and records that leave the
 * harvested set, and records a provider paging by offset skipped while others were deleted) is caught by the
 * reconcile: a full `ListIdentifiers` (listed identifiers kept in the state file, not in memory), then every
 * identifier we publish and the provider did not list is checked with `GetRecord` before it is deleted (so a
 * listing that misses records does not delete them), and every listed identifier we do not have, or have
 * with an older datestamp, is fetched with `GetRecord`. It runs when due: by default every 24 hours for
 * `deletedRecord` `no` or `transient`, every 7 days for `persistent` (`reconcileEveryMs`).
 *
 * @module
 */
import { createHash } from 'node:crypto';
import { ResourceSyncError } from '../../core/errors.js';
import { retryWhole } from '../../http/client.js';
import { type OaiClient, type OaiListRequest, oaiErrorCodeOf } from './client.js';
import type { OaiIdentify, OaiItem, OaiMetadataFormat, OaiResponseInfo } from './response.js';
import { datestampMs } from './response.js';
import type { ListState, OaiState } from './state.js';

/** A harvested record of one metadata format, as the sink gets it. */
export interface HarvestedRecord {
  readonly identifier: string;
  readonly metadataPrefix: string;
  readonly datestamp: string;
  readonly datestampMs: number;
  readonly deleted: boolean;
  readonly setSpecs: readonly string[];
  /** The metadata record (UTF-8 XML); absent when deleted. */
  readonly bytes?: Buffer;
  /** sha-256 of `bytes`, lower-case hex. */
  readonly sha256?: string;
}

/** What the sink did with a batch. */
export interface ApplyCounts {
  created: number;
  updated: number;
  deleted: number;
  unchanged: number;
}

/** Where harvested records go (the bridge implements it over the Source). */
export interface OaiSink {
  /**
   * Brings the published resources in line with a batch of records of one format: a new or changed record is
   * created or updated, a deleted one that is published is deleted, one with the bytes already published is
   * left alone. `log: false` (the first, full harvest, before anything is published) updates the inventory
   * without recording changes.
   */
  apply(records: readonly HarvestedRecord[], log: boolean): Promise<ApplyCounts>;
  /** The datestamps (UTC ms) of the published records of a format, for the identifiers given (absent: none). */
  datestamps(metadataPrefix: string, identifiers: readonly string[]): Promise<Map<string, number>>;
  /** Every identifier published in a format, in any order. */
  identifiers(metadataPrefix: string): AsyncIterable<string>;
}

/** What happened in a harvest or reconcile (cumulative over its formats). */
export interface HarvestReport extends ApplyCounts {
  /** Requests that returned a page (or record). */
  pages: number;
  /** Records and headers received. */
  records: number;
  /** Lists restarted after `badResumptionToken`. */
  restarts: number;
  /** Formats that completed a list in this harvest. */
  completed: string[];
  /** Whether the changes were recorded (false during the first, full harvest). */
  logged: boolean;
}

/** Progress events. */
export type HarvestEvent =
  | {
      readonly type: 'page';
      readonly verb: 'ListRecords' | 'ListIdentifiers';
      readonly metadataPrefix: string;
      readonly records: number;
      readonly completeListSize?: number;
      readonly cursor?: number;
    }
  | { readonly type: 'restart'; readonly metadataPrefix: string; readonly reason: string }
  | { readonly type: 'list-done'; readonly metadataPrefix: string; readonly watermark: string }
  | { readonly type: 'reconcile'; readonly metadataPrefix: string; readonly phase: 'listing' | 'checking' | 'done' };

/** Options of {@link OaiHarvester}. */
export interface OaiHarvesterOptions {
  readonly client: OaiClient;
  readonly state: OaiState;
  readonly sink: OaiSink;
  /** Formats to harvest (default `['oai_dc']`, which every provider offers). */
  readonly metadataPrefixes?: readonly string[];
  /** Harvest one OAI set (its `setSpec`) only. */
  readonly set?: string;
  /** Subtracted from the first page's `responseDate` to make the next `from` (default 5 min). */
  readonly overlapMs?: number;
  /**
   * Time between reconciles (full `ListIdentifiers`); 0 or Infinity: never. Default: 24 h when the provider's
   * `deletedRecord` is `no` or `transient`, 7 days when `persistent`.
   */
  readonly reconcileEveryMs?: number;
  /** Records per sink batch (default 500). */
  readonly batchSize?: number;
  /** `badResumptionToken` restarts of one list in one harvest before giving up (default 3). */
  readonly maxListRestarts?: number;
  /** Fetches of one page after retriable failures in its body (default 3). */
  readonly pageRetries?: number;
  readonly onEvent?: (e: HarvestEvent) => void;
  readonly onWarning?: (message: string) => void;
  /** Now, UTC ms (tests); default Date.now. */
  readonly now?: () => number;
}

/** Default of {@link OaiHarvesterOptions.overlapMs}. */
export const DEFAULT_OVERLAP_MS = 5 * 60 * 1000;
const DAY_MS = 24 * 60 * 60 * 1000;

/** OAI-PMH metadataPrefix syntax (the protocol's XML schema): also no leading dot (a hidden file name). */
const PREFIX_RE = /^[A-Za-z0-9_!~*'()-][A-Za-z0-9_.!~*'()-]*$/;

/** The provider's granularity as we format `from` with. */
export type Granularity = 'day' | 'second';

/** `from` for a UTC instant in a granularity. */
export function formatFrom(ms: number, granularity: Granularity): string {
  const iso = new Date(Math.max(0, ms)).toISOString();
  return granularity === 'day' ? iso.slice(0, 10) : `${iso.slice(0, 19)}Z`;
}

/** The granularity of an `Identify` answer (`RS_OAI_PMH` for anything else). */
export function granularityOf(identify: OaiIdentify, url: string): Granularity {
  if (identify.granularity === 'YYYY-MM-DD') return 'day';
  if (identify.granularity === 'YYYY-MM-DDThh:mm:ssZ') return 'second';
  throw new ResourceSyncError('RS_OAI_PMH', `unknown granularity ${JSON.stringify(identify.granularity)}`, { url });
}

function emptyReport(logged: boolean): HarvestReport {
  return { created: 0, updated: 0, deleted: 0, unchanged: 0, pages: 0, records: 0, restarts: 0, completed: [], logged };
}

function addCounts(r: ApplyCounts, c: ApplyCounts): void {
  r.created += c.created;
  r.updated += c.updated;
  r.deleted += c.deleted;
  r.unchanged += c.unchanged;
}

/**
 * A queue of jobs run one at a time, in order, behind the caller: {@link push} waits while `max` jobs are
 * waiting (backpressure) and throws the first failure of a job (later jobs are then skipped);
 * {@link drain} waits for every job and throws that failure.
 */
class ApplyQueue {
  readonly #max: number;
  #tail: Promise<void> = Promise.resolve();
  #waiting = 0;
  #failure: { error: unknown } | undefined;
  #wakers: (() => void)[] = [];

  constructor(max: number) {
    this.#max = max;
  }

  async push(job: () => Promise<void>): Promise<void> {
    while (this.#waiting >= this.#max && this.#failure === undefined)
      await new Promise<void>((r) => this.#wakers.push(r));
    if (this.#failure !== undefined) throw this.#failure.error;
    this.#waiting++;
    this.#tail = this.#tail.then(async () => {
      try {
        if (this.#failure === undefined) await job();
      } catch (e) {
        this.#failure ??= { error: e };
      } finally {
        this.#waiting--;
        for (const w of this.#wakers.splice(0)) w();
      }
    });
  }

  async drain(): Promise<void> {
    await this.#tail;
    if (this.#failure !== undefined) throw this.#failure.error;
  }

  /** Waits for every job, ignoring failures (they were or will be thrown by push / drain). */
  async settle(): Promise<void> {
    await this.#tail;
  }
}

/** The harvested record of an item. */
export function harvestedRecord(item: OaiItem, metadataPrefix: string): HarvestedRecord {
  const h = item.header;
  if (h.deleted || item.metadata === undefined)
    return {
      identifier: h.identifier,
      metadataPrefix,
      datestamp: h.datestamp,
      datestampMs: h.datestampMs,
      deleted: true,
      setSpecs: h.setSpecs,
    };
  const bytes = Buffer.from(item.metadata, 'utf8');
  return {
    identifier: h.identifier,
    metadataPrefix,
    datestamp: h.datestamp,
    datestampMs: h.datestampMs,
    deleted: false,
    setSpecs: h.setSpecs,
    bytes,
    sha256: createHash('sha256').update(bytes).digest('hex'),
  };
}

/** True when a record's sets put it in `set` (itself or a set below it: `a:b` is in `a`). */
export function inSet(setSpecs: readonly string[], set: string | undefined): boolean {
  if (set === undefined) return true;
  return setSpecs.some((s) => s === set || s.startsWith(`${set}:`));
}

/**
 * Harvests one provider incrementally; see the module comment. One operation at a time (calls queue).
 *
 * @example
 * ```ts
 * const h = new OaiHarvester({ client, state, sink, metadataPrefixes: ['oai_dc', 'mods'] });
 * const report = await h.harvest();    // then again later: only what changed
 * if (h.reconcileDue()) await h.reconcile();
 * ```
 */
export class OaiHarvester {
  readonly prefixes: readonly string[];
  readonly #o: OaiHarvesterOptions;
  readonly #client: OaiClient;
  readonly #state: OaiState;
  readonly #sink: OaiSink;
  readonly #batchSize: number;
  readonly #now: () => number;
  #queue: Promise<unknown> = Promise.resolve();
  #identify: OaiIdentify | undefined;
  #granularity: Granularity = 'second';
  #formats: Map<string, OaiMetadataFormat> | undefined;
  #setChecked = false;

  constructor(options: OaiHarvesterOptions) {
    this.#o = options;
    this.#client = options.client;
    this.#state = options.state;
    this.#sink = options.sink;
    this.#batchSize = Math.max(1, options.batchSize ?? 500);
    this.#now = options.now ?? Date.now;
    const prefixes = [...new Set(options.metadataPrefixes ?? ['oai_dc'])];
    if (prefixes.length === 0) throw new ResourceSyncError('RS_CONFIG', 'no metadata prefix to harvest');
    for (const p of prefixes)
      if (!PREFIX_RE.test(p)) throw new ResourceSyncError('RS_CONFIG', `bad metadata prefix ${JSON.stringify(p)}`);
    this.prefixes = prefixes;
    this.#checkOwner();
  }

  /** The provider's `Identify` answer (after the first harvest). */
  get identify(): OaiIdentify | undefined {
    return this.#identify;
  }

  /** The provider's metadata formats by prefix (after the first harvest). */
  get formats(): ReadonlyMap<string, OaiMetadataFormat> | undefined {
    return this.#formats;
  }

  /** True until every format has completed one list (the first, full harvest: changes are not logged). */
  get initial(): boolean {
    return this.#state.getMeta('initial-done') !== 'yes';
  }

  /** The state belongs to one provider and set: another one is refused (use another state directory). */
  #checkOwner(): void {
    const owner = JSON.stringify({ baseUrl: this.#client.baseUrl, set: this.#o.set ?? null });
    const saved = this.#state.getMeta('provider');
    if (saved === undefined) this.#state.setMeta('provider', owner);
    else if (saved !== owner) {
      let was = saved;
      try {
        const p = JSON.parse(saved) as { baseUrl: string; set: string | null };
        was = p.set === null ? p.baseUrl : `${p.baseUrl} (set ${p.set})`;
      } catch {
        // shown as stored
      }
      throw new ResourceSyncError(
        'RS_CONFIG',
        `the state in ${this.#state.path} belongs to the harvest of ${was}; use another state directory for ` +
          `${this.#client.baseUrl}${this.#o.set === undefined ? '' : ` (set ${this.#o.set})`}`,
      );
    }
  }

  #serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(fn, fn);
    this.#queue = run.catch(() => undefined);
    return run;
  }

  /** `Identify` and `ListMetadataFormats`: checks the formats asked for are offered. */
  async #prepare(signal: AbortSignal | undefined): Promise<void> {
    const id = await this.#client.identify(signal);
    this.#identify = id;
    this.#granularity = granularityOf(id, this.#client.requestUrl('Identify'));
    const formats = await this.#client.listMetadataFormats(undefined, signal);
    this.#formats = new Map(formats.map((f) => [f.metadataPrefix, f]));
    const set = this.#o.set;
    if (set !== undefined && !this.#setChecked) {
      // A provider may answer noRecordsMatch for a set it does not have: a typo would publish nothing.
      const sets = await this.#client.listSets(signal);
      if (!sets.some((s) => s.setSpec === set))
        throw new ResourceSyncError(
          'RS_CONFIG',
          sets.length === 0
            ? `the provider has no sets, so not ${JSON.stringify(set)}`
            : `the provider has no set ${JSON.stringify(set)} (it has ${sets
                .slice(0, 20)
                .map((s) => s.setSpec)
                .join(', ')}${sets.length > 20 ? ` and ${sets.length - 20} more` : ''})`,
          { url: this.#client.requestUrl('ListSets') },
        );
      this.#setChecked = true;
    }
    const missing = this.prefixes.filter((p) => !this.#formats!.has(p));
    if (missing.length > 0)
      throw new ResourceSyncError(
        'RS_CONFIG',
        `the provider does not offer metadata format${missing.length > 1 ? 's' : ''} ${missing.join(', ')} ` +
          `(it offers ${[...this.#formats.keys()].join(', ') || 'none'})`,
        { url: this.#client.requestUrl('ListMetadataFormats') },
      );
  }

  /**
   * One harvest of every format (see the module comment): the first is full and not logged (the baseline the
   * Resource List describes), later ones incremental and logged. Formats no longer configured are removed
   * from the Source. Resolves with what changed; rejects with the first failure (the state stays at the last
   * page done, so the next harvest goes on from there).
   */
  harvest(signal?: AbortSignal): Promise<HarvestReport> {
    return this.#serial(async () => {
      await this.#prepare(signal);
      const logged = !this.initial;
      const report = emptyReport(logged);
      for (const old of this.#state.lists())
        if (!this.prefixes.includes(old.metadataPrefix)) await this.#removeFormat(old.metadataPrefix, report);
      for (const prefix of this.prefixes) await this.#harvestFormat(prefix, logged, report, signal);
      if (!logged) this.#state.setMeta('initial-done', 'yes');
      return report;
    });
  }

  /** A format no longer harvested: its resources are deleted (logged) and its state dropped. */
  async #removeFormat(prefix: string, report: HarvestReport): Promise<void> {
    this.#o.onWarning?.(`metadata format ${prefix} is no longer harvested: its records are removed`);
    let batch: HarvestedRecord[] = [];
    const now = this.#now();
    for await (const identifier of this.#sink.identifiers(prefix)) {
      batch.push({
        identifier,
        metadataPrefix: prefix,
        datestamp: formatFrom(now, 'second'),
        datestampMs: now,
        deleted: true,
        setSpecs: [],
      });
      if (batch.length >= this.#batchSize) {
        addCounts(report, await this.#sink.apply(batch, true));
        batch = [];
      }
    }
    if (batch.length > 0) addCounts(report, await this.#sink.apply(batch, true));
    this.#state.dropList(prefix);
  }

  /**
   * One format's list, page after page. Pipelined: the records of a page go to the sink in batches through a
   * queue that runs behind the parsing (at most two batches waiting), and the next page is requested while
   * the queue still applies the last one; the state after a page is written by the queue once that page's
   * records are applied, so what is on disk never runs ahead of what the sink holds.
   */
  async #harvestFormat(prefix: string, logged: boolean, report: HarvestReport, signal?: AbortSignal): Promise<void> {
    let state = this.#state.getList(prefix);
    // A format added after the first harvest is harvested whole, and logged (the Source is already published).
    let restarts = 0;
    const queue = new ApplyQueue(2);
    const applyLater = (records: HarvestedRecord[]): Promise<void> =>
      queue.push(async () => addCounts(report, await this.#applyBatches(records, logged)));
    try {
      for (;;) {
        let request: OaiListRequest;
        if (state.token !== undefined) request = { resumptionToken: state.token };
        else {
          // Written in the provider's granularity of the time; formatted again in today's (a provider that
          // changed granularity would refuse the other one).
          const savedMs = state.watermark === undefined ? undefined : datestampMs(state.watermark);
          const from = savedMs === undefined ? undefined : formatFrom(savedMs, this.#granularity);
          request = {
            metadataPrefix: prefix,
            ...(from === undefined ? {} : { from }),
            ...(this.#o.set === undefined ? {} : { set: this.#o.set }),
          };
          state = { ...state, listFrom: from ?? '' };
          delete (state as { listStartedMs?: number }).listStartedMs;
        }
        let info: OaiResponseInfo;
        let received = 0;
        let pending: HarvestedRecord[] = [];
        try {
          info = await this.#page('ListRecords', request, signal, async (items) => {
            received += items.length;
            for (const i of items) {
              const r = harvestedRecord(i, prefix);
              if (!r.deleted && r.bytes === undefined) this.#o.onWarning?.(`record ${r.identifier} has no metadata`);
              pending.push(r);
            }
            if (pending.length >= this.#batchSize) await applyLater(pending.splice(0));
          });
          if (pending.length > 0) await applyLater(pending.splice(0));
        } catch (e) {
          pending = [];
          // What was queued is applied (it is correct whatever comes next) before the state changes.
          await queue.drain();
          if (oaiErrorCodeOf(e) === 'badResumptionToken' && 'resumptionToken' in request) {
            restarts++;
            report.restarts++;
            const max = this.#o.maxListRestarts ?? 3;
            if (restarts > max)
              throw new ResourceSyncError(
                'RS_OAI_PMH',
                `the provider refused its own resumption tokens ${restarts} times in a row (badResumptionToken); ` +
                  `the ${prefix} list restarted from ${state.listFrom === '' ? 'the beginning' : state.listFrom} each time`,
                { cause: e, url: this.#client.requestUrl('ListRecords', request) },
              );
            this.#o.onEvent?.({ type: 'restart', metadataPrefix: prefix, reason: (e as Error).message });
            this.#o.onWarning?.(
              `${prefix}: the provider refused the resumption token (${(e as Error).message}); the list restarts from ` +
                `${state.watermark ?? 'the beginning'}`,
            );
            state = { ...state };
            delete (state as { token?: string }).token;
            this.#state.putList(state);
            continue;
          }
          throw e;
        }
        report.pages++;
        report.records += received;
        const startedMs = state.listStartedMs ?? this.#responseMs(info, request);
        const token = info.resumptionToken?.value ?? '';
        this.#o.onEvent?.({
          type: 'page',
          verb: 'ListRecords',
          metadataPrefix: prefix,
          records: received,
          ...(info.resumptionToken?.completeListSize === undefined
            ? {}
            : { completeListSize: info.resumptionToken.completeListSize }),
          ...(info.resumptionToken?.cursor === undefined ? {} : { cursor: info.resumptionToken.cursor }),
        });
        if (token !== '') {
          if ('resumptionToken' in request && request.resumptionToken === token)
            throw new ResourceSyncError(
              'RS_OAI_PMH',
              'the provider returned the resumption token it was given (the list would never end)',
              { url: this.#client.requestUrl('ListRecords', request) },
            );
          state = { ...state, token, listStartedMs: startedMs };
          const after = state;
          await queue.push(async () => this.#state.putList(after));
          continue;
        }
        await queue.drain();
        const watermark = formatFrom(startedMs - (this.#o.overlapMs ?? DEFAULT_OVERLAP_MS), this.#granularity);
        const done: ListState = { ...state, watermark, completedMs: this.#now() };
        delete (done as { token?: string }).token;
        delete (done as { listFrom?: string }).listFrom;
        delete (done as { listStartedMs?: number }).listStartedMs;
        this.#state.putList(done);
        report.completed.push(prefix);
        this.#o.onEvent?.({ type: 'list-done', metadataPrefix: prefix, watermark });
        return;
      }
    } finally {
      // Nothing runs on after the harvest returns or throws (a failure of the queue is the harvest's failure).
      await queue.settle();
    }
  }

  /** UTC ms of a page's `responseDate`. */
  #responseMs(info: OaiResponseInfo, request: OaiListRequest): number {
    const ms = datestampMs(info.responseDate ?? '');
    if (ms === undefined)
      throw new ResourceSyncError('RS_OAI_PMH', `bad <responseDate> ${JSON.stringify(info.responseDate)}`, {
        url: this.#client.requestUrl('ListRecords', request),
      });
    return ms;
  }

  /** One page, fetched again after retriable failures (its records are applied again: no change). */
  #page(
    verb: 'ListRecords' | 'ListIdentifiers',
    request: OaiListRequest,
    signal: AbortSignal | undefined,
    onItems: (items: readonly OaiItem[]) => Promise<void>,
  ): Promise<OaiResponseInfo> {
    return retryWhole(() => this.#client.listPage(verb, request, onItems, signal), {
      retries: this.#o.pageRetries ?? 3,
      baseDelayMs: 1000,
      ...(signal === undefined ? {} : { signal }),
    });
  }

  async #applyBatches(records: readonly HarvestedRecord[], logged: boolean): Promise<ApplyCounts> {
    const counts: ApplyCounts = { created: 0, updated: 0, deleted: 0, unchanged: 0 };
    for (let i = 0; i < records.length; i += this.#batchSize)
      addCounts(counts, await this.#sink.apply(records.slice(i, i + this.#batchSize), logged));
    return counts;
  }

  /** True when a reconcile of some format is due (see {@link OaiHarvesterOptions.reconcileEveryMs}). */
  reconcileDue(): boolean {
    if (this.initial) return false;
    const every = this.reconcileEveryMs();
    const now = this.#now();
    for (const prefix of this.prefixes) {
      const s = this.#state.getList(prefix);
      if (s.reconcilePhase !== undefined) return true;
      if (!Number.isFinite(every) || every <= 0) continue;
      const since = s.reconciledMs ?? s.completedMs;
      if (since !== undefined && now - since >= every) return true;
    }
    return false;
  }

  /** The reconcile period in force (ms; Infinity: never). */
  reconcileEveryMs(): number {
    const set = this.#o.reconcileEveryMs;
    if (set !== undefined) return set <= 0 ? Number.POSITIVE_INFINITY : set;
    const policy = this.#identify?.deletedRecord;
    return policy === 'persistent' ? 7 * DAY_MS : DAY_MS;
  }

  /**
   * Reconciles every format with the provider (see the module comment): deletions the provider did not
   * report, records it has that we lack. Logged as changes.
   */
  reconcile(signal?: AbortSignal): Promise<HarvestReport> {
    return this.#serial(async () => {
      if (this.#identify === undefined) await this.#prepare(signal);
      const report = emptyReport(true);
      for (const prefix of this.prefixes) await this.#reconcileFormat(prefix, report, signal);
      return report;
    });
  }

  async #reconcileFormat(prefix: string, report: HarvestReport, signal: AbortSignal | undefined): Promise<void> {
    let state = this.#state.getList(prefix);
    if (state.completedMs === undefined) return; // never harvested: nothing to reconcile yet
    if (state.reconcilePhase !== 'checking') {
      if (state.reconcilePhase === undefined) {
        this.#state.clearSeen(prefix);
        state = { ...state, reconcilePhase: 'listing' };
        this.#state.putList(state);
      }
      this.#o.onEvent?.({ type: 'reconcile', metadataPrefix: prefix, phase: 'listing' });
      let restarts = 0;
      for (;;) {
        const request: OaiListRequest =
          state.reconcileToken !== undefined
            ? { resumptionToken: state.reconcileToken }
            : { metadataPrefix: prefix, ...(this.#o.set === undefined ? {} : { set: this.#o.set }) };
        let rows: { identifier: string; datestampMs: number; deleted: boolean }[] = [];
        let info: OaiResponseInfo;
        try {
          info = await this.#page('ListIdentifiers', request, signal, async (items) => {
            for (const i of items)
              rows.push({
                identifier: i.header.identifier,
                datestampMs: i.header.datestampMs,
                deleted: i.header.deleted,
              });
          });
        } catch (e) {
          if (oaiErrorCodeOf(e) === 'badResumptionToken' && 'resumptionToken' in request) {
            restarts++;
            report.restarts++;
            if (restarts > (this.#o.maxListRestarts ?? 3)) throw e;
            this.#o.onWarning?.(`${prefix}: the reconcile's resumption token was refused; listing again`);
            this.#state.clearSeen(prefix);
            state = { ...state };
            delete (state as { reconcileToken?: string }).reconcileToken;
            this.#state.putList(state);
            continue;
          }
          throw e;
        }
        report.pages++;
        report.records += rows.length;
        const token = info.resumptionToken?.value ?? '';
        this.#o.onEvent?.({
          type: 'page',
          verb: 'ListIdentifiers',
          metadataPrefix: prefix,
          records: rows.length,
          ...(info.resumptionToken?.completeListSize === undefined
            ? {}
            : { completeListSize: info.resumptionToken.completeListSize }),
        });
        if (token !== '' && 'resumptionToken' in request && request.resumptionToken === token)
          throw new ResourceSyncError(
            'RS_OAI_PMH',
            'the provider returned the resumption token it was given (the list would never end)',
            { url: this.#client.requestUrl('ListIdentifiers', request) },
          );
        state =
          token === ''
            ? { ...state, reconcilePhase: 'checking' }
            : { ...state, reconcilePhase: 'listing', reconcileToken: token };
        if (token === '') delete (state as { reconcileToken?: string }).reconcileToken;
        this.#state.addSeen(prefix, rows, state);
        rows = [];
        if (token === '') break;
      }
    }
    this.#o.onEvent?.({ type: 'reconcile', metadataPrefix: prefix, phase: 'checking' });
    await this.#checkFormat(prefix, report, signal);
    const done: ListState = { ...state, reconciledMs: this.#now() };
    delete (done as { reconcilePhase?: string }).reconcilePhase;
    delete (done as { reconcileToken?: string }).reconcileToken;
    this.#state.putList(done);
    this.#state.clearSeen(prefix);
    this.#o.onEvent?.({ type: 'reconcile', metadataPrefix: prefix, phase: 'done' });
  }

  /** The checking phase: what we publish and the provider did not list; what it listed that we lack. */
  async #checkFormat(prefix: string, report: HarvestReport, signal: AbortSignal | undefined): Promise<void> {
    let batch: HarvestedRecord[] = [];
    const flush = async (): Promise<void> => {
      if (batch.length === 0) return;
      const b = batch;
      batch = [];
      addCounts(report, await this.#sink.apply(b, true));
    };
    const fetch = async (identifier: string): Promise<void> => {
      const item = await this.#client.getRecord(identifier, prefix, signal);
      report.pages++;
      if (item === undefined || !inSet(item.header.setSpecs, this.#o.set)) {
        const now = this.#now();
        batch.push({
          identifier,
          metadataPrefix: prefix,
          datestamp: item?.header.datestamp ?? formatFrom(now, 'second'),
          datestampMs: item?.header.datestampMs ?? now,
          deleted: true,
          setSpecs: item?.header.setSpecs ?? [],
        });
      } else batch.push(harvestedRecord(item, prefix));
      if (batch.length >= this.#batchSize) await flush();
    };
    // 1. Published here, not listed live by the provider: deleted if GetRecord confirms it.
    const suspects: string[] = [];
    const checkSuspects = async (): Promise<void> => {
      for (const id of suspects.splice(0)) await fetch(id);
    };
    for await (const identifier of this.#sink.identifiers(prefix)) {
      const seen = this.#state.getSeen(prefix, identifier);
      if (seen === undefined || seen.deleted) suspects.push(identifier);
      // Checked in groups, so the identifiers iterator (paged) is not held across many requests.
      if (suspects.length >= this.#batchSize) await checkSuspects();
    }
    await checkSuspects();
    await flush();
    // 2. Listed live by the provider, and missing here or older here.
    let after = '';
    for (;;) {
      const page = this.#state.seenPage(prefix, after, this.#batchSize);
      if (page.length === 0) break;
      after = page[page.length - 1]!.identifier;
      const live = page.filter((r) => !r.deleted);
      const have = await this.#sink.datestamps(
        prefix,
        live.map((r) => r.identifier),
      );
      for (const r of live) {
        const ours = have.get(r.identifier);
        if (ours === undefined || ours < r.datestampMs) await fetch(r.identifier);
      }
    }
    await flush();
  }
}
