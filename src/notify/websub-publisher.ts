/**
 * The publisher side of WebSub for a ResourceSync Source (Change Notification 1.0.1 §4.1): POST each
 * notification payload to the hub with `Link: <hub>; rel="hub", <topic>; rel="self"`, retrying network
 * errors, timeouts, 429 and 5xx with backoff; a 4xx other than 429 is final (e.g. 403: not a topic of the hub).
 *
 * @module
 */
import type { Dispatcher } from 'undici';
import { isResourceSyncError, ResourceSyncError } from '../core/errors.js';
import { backoffDelay, sleep } from '../http/backoff.js';
import { formatWebSubLinks } from '../http/link.js';
import { createOutboundAgent, sendRequest } from '../http/outbound.js';
import { isHttpUrl } from './http-util.js';

export interface WebSubPublisherOptions {
  /** The hub's URL (where payloads are POSTed, and what `rel="hub"` names). */
  readonly hubUrl: string;
  /** Retries after the first attempt (default 4). */
  readonly retries?: number;
  /** First retry delay (default 200 ms), doubled each time, capped by `retryMaxMs` (default 10 s). */
  readonly retryBaseMs?: number;
  readonly retryMaxMs?: number;
  /** Timeout of one attempt (default 10 s). */
  readonly timeoutMs?: number;
  /** Sent as `Authorization: Bearer <token>` (see the hub's `publisherToken`). */
  readonly token?: string;
  /** An undici dispatcher to share; by default the publisher has a keep-alive agent of its own. */
  readonly dispatcher?: Dispatcher;
}

export interface PublishResult {
  readonly status: number;
  readonly attempts: number;
}

/**
 * Publishes notification payloads to one hub. Memory bound: the payload being sent.
 *
 * @example
 * ```ts
 * const publisher = new WebSubPublisher({ hubUrl: 'http://localhost:8090/' });
 * await publisher.publish(topicUrl, payloadXml);
 * ```
 */
export class WebSubPublisher {
  readonly hubUrl: string;
  readonly #dispatcher: Dispatcher;
  readonly #ownDispatcher: boolean;
  readonly #retries: number;
  readonly #retryBaseMs: number;
  readonly #retryMaxMs: number;
  readonly #timeoutMs: number;
  readonly #token: string | undefined;
  readonly stats = { published: 0, retries: 0, failed: 0 };

  constructor(options: WebSubPublisherOptions) {
    if (!isHttpUrl(options.hubUrl))
      throw new ResourceSyncError('RS_CONFIG', `the hub must be an absolute http(s) URL: ${options.hubUrl}`);
    this.hubUrl = options.hubUrl;
    this.#ownDispatcher = options.dispatcher === undefined;
    this.#dispatcher = options.dispatcher ?? createOutboundAgent(8);
    this.#retries = Math.max(0, options.retries ?? 4);
    this.#retryBaseMs = options.retryBaseMs ?? 200;
    this.#retryMaxMs = options.retryMaxMs ?? 10_000;
    this.#timeoutMs = options.timeoutMs ?? 10_000;
    this.#token = options.token;
  }

  /**
   * POSTs one payload for `topic`. Resolves once the hub accepted it (2xx); throws `RS_HTTP` (with the status)
   * on a final refusal or when the retries are exhausted, `RS_ABORTED` when `signal` aborts.
   */
  async publish(
    topic: string,
    payload: string | Uint8Array,
    init: { readonly contentType?: string; readonly signal?: AbortSignal } = {},
  ): Promise<PublishResult> {
    const headers: Record<string, string> = {
      'content-type': init.contentType ?? 'application/xml',
      link: formatWebSubLinks(this.hubUrl, topic),
    };
    if (this.#token !== undefined) headers.authorization = `Bearer ${this.#token}`;
    let last: unknown;
    for (let attempt = 0; attempt <= this.#retries; attempt++) {
      if (attempt > 0) {
        this.stats.retries++;
        await sleep(backoffDelay(attempt - 1, this.#retryBaseMs, this.#retryMaxMs), init.signal);
      }
      let res: Awaited<ReturnType<typeof sendRequest>>;
      try {
        res = await sendRequest(this.#dispatcher, this.hubUrl, {
          method: 'POST',
          headers,
          body: payload,
          timeoutMs: this.#timeoutMs,
          maxResponseBytes: 4096,
          ...(init.signal === undefined ? {} : { signal: init.signal }),
        });
      } catch (e) {
        if (isResourceSyncError(e, 'RS_ABORTED')) throw e;
        last = e; // network error or timeout: retry
        continue;
      }
      if (res.status >= 200 && res.status < 300) {
        this.stats.published++;
        return { status: res.status, attempts: attempt + 1 };
      }
      last = new ResourceSyncError(
        'RS_HTTP',
        `hub answered ${res.status}: ${res.body.toString('utf8').trim().slice(0, 200)}`,
        {
          url: this.hubUrl,
        },
      );
      if (res.status !== 429 && res.status < 500) break; // a refusal: retrying will not change it
    }
    this.stats.failed++;
    throw last instanceof ResourceSyncError
      ? last
      : new ResourceSyncError('RS_HTTP', 'publish failed', { url: this.hubUrl, cause: last });
  }

  /** Closes the publisher's own connections (not a shared dispatcher). */
  async close(): Promise<void> {
    if (this.#ownDispatcher) await this.#dispatcher.close();
  }
}
