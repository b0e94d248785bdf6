/**
 * An OAI-PMH 2.0 client (http://www.openarchives.org/OAI/openarchivesprotocol.html) on the project's HTTP
 * client: `Identify`, `ListMetadataFormats`, `ListSets`, `GetRecord`, and one page at a time of `ListRecords` /
 * `ListIdentifiers`, streamed (the records of a page reach the caller while the page is still arriving).
 *
 * What the HTTP client brings: timeouts (connect, headers, idle body, and a deadline per response), retries of
 * network errors and 5xx before a body starts, and `503` + `Retry-After` honoured up to a bound
 * (`maxRetryDelayMs`, 60 s here by default). What this module adds: the protocol's errors become
 * `ResourceSyncError` `RS_OAI_PMH` with the provider's error code ({@link oaiErrorCodeOf}) and URL;
 * `noRecordsMatch` is an empty list, not an error; a response that is not UTF-8, not well-formed, carries a
 * DTD or is not an OAI-PMH response is refused with its URL and line (see `response.ts`).
 *
 * @module
 */
import { TextDecoder } from 'node:util';
import { ResourceSyncError } from '../../core/errors.js';
import { HttpClient, type HttpClientOptions, httpStatusOf } from '../../http/client.js';
import {
  type OaiIdentify,
  type OaiItem,
  type OaiMetadataFormat,
  OaiResponseParser,
  type OaiResponseInfo,
  type OaiSet,
} from './response.js';

/** Default of {@link OaiClientOptions.maxResponseBytes}: 512 MiB. */
export const DEFAULT_MAX_RESPONSE_BYTES = 512 * 1024 * 1024;
/** Default of {@link OaiClientOptions.responseTimeoutMs}: 10 minutes for one whole response. */
export const DEFAULT_RESPONSE_TIMEOUT_MS = 10 * 60 * 1000;

/** Options of {@link OaiClient}. */
export interface OaiClientOptions {
  /** The provider's base URL (`http://repo.example.org/oai/request`). */
  readonly baseUrl: string;
  /**
   * Options of the HTTP client the OAI client makes for itself (ignored when `http` is given). Defaults here:
   * 5 retries, `Retry-After` and backoff up to 60 s each, 2 connections.
   */
  readonly httpOptions?: HttpClientOptions;
  /** A shared HTTP client (the caller closes it). */
  readonly http?: HttpClient;
  /** Largest response (decoded), in bytes (default 512 MiB); larger is `RS_LIMIT`. */
  readonly maxResponseBytes?: number;
  /** Deadline of one whole response, body included (default 10 min); past it `RS_TIMEOUT`. */
  readonly responseTimeoutMs?: number;
  /** Largest metadata record in characters (see `response.ts`). */
  readonly maxRecordChars?: number;
}

/** Arguments of a list request: a fresh one, or the next page. */
export type OaiListRequest =
  | {
      readonly metadataPrefix: string;
      readonly from?: string;
      readonly until?: string;
      readonly set?: string;
    }
  | { readonly resumptionToken: string };

/** The provider's error code of an `RS_OAI_PMH` error thrown for an `<error>` (e.g. `badResumptionToken`). */
const oaiCodes = new WeakMap<ResourceSyncError, string>();

/** The OAI-PMH error code (`badArgument`, `badResumptionToken`, `idDoesNotExist`, ...) of an error, if any. */
export function oaiErrorCodeOf(e: unknown): string | undefined {
  return e instanceof ResourceSyncError ? oaiCodes.get(e) : undefined;
}

/**
 * A client of one OAI-PMH provider.
 *
 * @example
 * ```ts
 * const oai = new OaiClient({ baseUrl: 'https://repo.example.org/oai' });
 * const id = await oai.identify();               // granularity, deletedRecord ...
 * let req: OaiListRequest = { metadataPrefix: 'oai_dc', from: '2024-01-01' };
 * for (;;) {
 *   const info = await oai.listPage('ListRecords', req, async (items) => { for (const r of items) use(r); });
 *   if (!info.resumptionToken?.value) break;
 *   req = { resumptionToken: info.resumptionToken.value };
 * }
 * await oai.close();
 * ```
 */
export class OaiClient {
  readonly baseUrl: string;
  readonly http: HttpClient;
  readonly #ownHttp: boolean;
  readonly #maxBytes: number;
  readonly #timeoutMs: number;
  readonly #maxRecordChars: number | undefined;

  constructor(options: OaiClientOptions) {
    let url: URL;
    try {
      url = new URL(options.baseUrl);
    } catch {
      throw new ResourceSyncError('RS_CONFIG', `OAI-PMH base URL ${JSON.stringify(options.baseUrl)} is not a URL`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:')
      throw new ResourceSyncError('RS_CONFIG', `OAI-PMH base URL ${JSON.stringify(options.baseUrl)} is not http(s)`);
    url.hash = '';
    this.baseUrl = url.href;
    this.#ownHttp = options.http === undefined;
    this.http =
      options.http ??
      new HttpClient({
        retries: 5,
        maxRetryDelayMs: 60_000,
        retryBaseDelayMs: 500,
        connectionsPerHost: 2,
        ...options.httpOptions,
      });
    this.#maxBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
    this.#timeoutMs = options.responseTimeoutMs ?? DEFAULT_RESPONSE_TIMEOUT_MS;
    this.#maxRecordChars = options.maxRecordChars;
  }

  /** The request URL of a verb and its arguments. */
  requestUrl(verb: string, args: Readonly<Record<string, string | undefined>> = {}): string {
    const url = new URL(this.baseUrl);
    url.searchParams.set('verb', verb);
    for (const [k, v] of Object.entries(args)) if (v !== undefined) url.searchParams.set(k, v);
    return url.href;
  }

  /** `Identify` (OAI-PMH §4.2). */
  async identify(signal?: AbortSignal): Promise<OaiIdentify> {
    const info = await this.#request('Identify', {}, undefined, signal);
    const id = info.identify;
    if (id === undefined) throw this.#protocolError('the Identify response has no <Identify>', 'Identify');
    if (id.protocolVersion !== '' && id.protocolVersion !== '2.0')
      throw this.#protocolError(`protocol version ${JSON.stringify(id.protocolVersion)}, not 2.0`, 'Identify');
    return id;
  }

  /** `ListMetadataFormats` (OAI-PMH §4.4), of the repository or of one item. */
  async listMetadataFormats(identifier?: string, signal?: AbortSignal): Promise<OaiMetadataFormat[]> {
    const info = await this.#request('ListMetadataFormats', { identifier }, undefined, signal);
    return info.formats;
  }

  /** `ListSets` (OAI-PMH §4.6), every page; `[]` when the repository has no sets. */
  async listSets(signal?: AbortSignal): Promise<OaiSet[]> {
    const out: OaiSet[] = [];
    let args: Record<string, string | undefined> = {};
    for (let pages = 0; pages < 10_000; pages++) {
      let info: OaiResponseInfo;
      try {
        info = await this.#request('ListSets', args, undefined, signal);
      } catch (e) {
        if (oaiErrorCodeOf(e) === 'noSetHierarchy') return out;
        throw e;
      }
      out.push(...info.sets);
      const token = info.resumptionToken?.value ?? '';
      if (token === '') return out;
      args = { resumptionToken: token };
    }
    return out;
  }

  /**
   * `GetRecord` (OAI-PMH §4.1): the record, or undefined when the provider says `idDoesNotExist` or
   * `cannotDisseminateFormat` (the item, or this format of it, is gone).
   */
  async getRecord(identifier: string, metadataPrefix: string, signal?: AbortSignal): Promise<OaiItem | undefined> {
    const items: OaiItem[] = [];
    try {
      await this.#request(
        'GetRecord',
        { identifier, metadataPrefix },
        async (batch) => {
          items.push(...batch);
        },
        signal,
      );
    } catch (e) {
      const code = oaiErrorCodeOf(e);
      if (code === 'idDoesNotExist' || code === 'cannotDisseminateFormat') return undefined;
      throw e;
    }
    return items[0];
  }

  /**
   * One page of `ListRecords` or `ListIdentifiers` (OAI-PMH §4.3, §4.5). The page's items go to `onItems` as
   * they are parsed (in batches: those completed by one network chunk), each batch awaited before more of the
   * response is read. Returns the page's `responseDate` and `resumptionToken` (absent or empty on the last
   * page). `noRecordsMatch` is an empty page without a token.
   *
   * Memory: one network chunk, the record being parsed and one batch of items.
   * @throws ResourceSyncError `RS_OAI_PMH` for an `<error>` (see {@link oaiErrorCodeOf}), `RS_HTTP`,
   *   `RS_TIMEOUT`, `RS_XML_SYNTAX`, `RS_XML_DTD`, `RS_LIMIT`. Items delivered before an error stay delivered.
   */
  listPage(
    verb: 'ListRecords' | 'ListIdentifiers',
    request: OaiListRequest,
    onItems: (items: readonly OaiItem[]) => Promise<void>,
    signal?: AbortSignal,
  ): Promise<OaiResponseInfo> {
    const args: Record<string, string | undefined> =
      'resumptionToken' in request
        ? { resumptionToken: request.resumptionToken }
        : { metadataPrefix: request.metadataPrefix, from: request.from, until: request.until, set: request.set };
    return this.#request(verb, args, onItems, signal);
  }

  /** Closes the HTTP client when it is the client's own. */
  async close(): Promise<void> {
    if (this.#ownHttp) await this.http.close();
  }

  #protocolError(message: string, verb: string): ResourceSyncError {
    return new ResourceSyncError('RS_OAI_PMH', message, { url: this.requestUrl(verb) });
  }

  async #request(
    verb: string,
    args: Readonly<Record<string, string | undefined>>,
    onItems: ((items: readonly OaiItem[]) => Promise<void>) | undefined,
    signal: AbortSignal | undefined,
  ): Promise<OaiResponseInfo> {
    const url = this.requestUrl(verb, args);
    const init = {
      maxBytes: this.#maxBytes,
      timeoutMs: this.#timeoutMs,
      // Some providers send their OAI-PMH errors with a 4xx status: read them as OAI-PMH responses.
      accept: [400, 404, 422],
      headers: { accept: 'text/xml, application/xml;q=0.9, */*;q=0.1' },
      ...(signal === undefined ? {} : { signal }),
    };
    let res: Awaited<ReturnType<HttpClient['get']>>;
    try {
      res = await this.http.get(url, init);
    } catch (e) {
      const status = httpStatusOf(e);
      if (status === 503)
        throw new ResourceSyncError(
          'RS_HTTP',
          'the OAI-PMH provider is unavailable (HTTP 503), still after its Retry-After delays (each capped at the client maximum)',
          { url, cause: e },
        );
      throw e;
    }
    const parser = new OaiResponseParser({
      url,
      ...(this.#maxRecordChars === undefined ? {} : { maxRecordChars: this.#maxRecordChars }),
    });
    const decoder = new TextDecoder('utf-8', { fatal: true });
    let info: OaiResponseInfo;
    try {
      for await (const chunk of res.body) {
        let text: string;
        try {
          text = decoder.decode(chunk, { stream: true });
        } catch (e) {
          throw new ResourceSyncError('RS_OAI_PMH', 'the response is not valid UTF-8 (OAI-PMH requires UTF-8)', {
            url,
            cause: e,
          });
        }
        parser.write(text);
        const items = parser.takeItems();
        if (items.length > 0) {
          if (onItems === undefined) throw this.#protocolError(`unexpected records in a ${verb} response`, verb);
          await onItems(items);
        }
      }
      let rest: string;
      try {
        rest = decoder.decode();
      } catch (e) {
        throw new ResourceSyncError('RS_OAI_PMH', 'the response ends inside a UTF-8 character', { url, cause: e });
      }
      if (rest !== '') parser.write(rest);
      info = parser.close();
      const items = parser.takeItems();
      if (items.length > 0 && onItems !== undefined) await onItems(items);
    } catch (e) {
      await res.discard().catch(() => undefined);
      // A 4xx whose body is not an OAI-PMH response (an HTML error page): the status is the error.
      if (
        res.status >= 400 &&
        e instanceof ResourceSyncError &&
        (e.code === 'RS_OAI_PMH' || e.code === 'RS_XML_SYNTAX' || e.code === 'RS_XML_DTD')
      )
        throw new ResourceSyncError('RS_HTTP', `HTTP ${res.status} for GET`, { url, cause: e });
      throw e;
    }
    if (info.errors.length > 0) {
      if (info.errors.every((x) => x.code === 'noRecordsMatch')) {
        delete info.resumptionToken;
        return info;
      }
      const first = info.errors[0]!;
      const all = info.errors.map((x) => `${x.code}${x.message === '' ? '' : `: ${x.message}`}`).join('; ');
      const err = new ResourceSyncError('RS_OAI_PMH', `the OAI-PMH provider answered ${all}`, { url });
      oaiCodes.set(err, first.code);
      throw err;
    }
    if (res.status >= 400) throw new ResourceSyncError('RS_HTTP', `HTTP ${res.status} for GET`, { url });
    if (info.verb !== verb)
      throw new ResourceSyncError(
        'RS_OAI_PMH',
        info.verb === undefined
          ? `the ${verb} response has neither <${verb}> nor <error>`
          : `asked for ${verb}, the response is <${info.verb}>`,
        { url },
      );
    if (info.responseDate === undefined || info.responseDate === '')
      throw new ResourceSyncError('RS_OAI_PMH', 'the response has no <responseDate>', { url });
    return info;
  }
}
