/**
 * One bounded outgoing HTTP request, shared by the WebSub publisher, subscriber and hub (subscription requests,
 * publish pings, content deliveries): an overall timeout, no redirects followed (undici's default without its
 * redirect interceptor), a response body read up to a bound. Same undici dispatchers as {@link HttpClient}
 * (`undici.ts`), kept separate from it because these are POSTs with bodies that must never be retried blindly.
 *
 * @module
 */
import type { Agent, Dispatcher } from 'undici';
import { ResourceSyncError } from '../core/errors.js';
import { loadAgents } from './undici.js';

export interface OutboundRequest {
  readonly method: 'GET' | 'POST';
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: string | Uint8Array;
  /** Whole request, headers and body included (default 10 s). */
  readonly timeoutMs?: number;
  /** Response bytes kept (default 64 KiB); a longer response is cut and its connection closed. */
  readonly maxResponseBytes?: number;
  readonly signal?: AbortSignal;
}

export interface OutboundResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly body: Buffer;
  /** True when the body was longer than `maxResponseBytes` and was cut. */
  readonly truncated: boolean;
}

/** A keep-alive agent for notification traffic (`connections` per origin). */
export function createOutboundAgent(connections = 32): Agent {
  return new (loadAgents().Agent)({ connections, keepAliveTimeout: 10_000, connect: { timeout: 10_000 } });
}

/**
 * Sends one request. Network failures and timeouts throw `RS_HTTP` / `RS_TIMEOUT` naming the URL; any HTTP
 * status is returned (the caller decides). Memory bound: `maxResponseBytes`.
 */
export async function sendRequest(
  dispatcher: Dispatcher,
  url: string,
  req: OutboundRequest,
): Promise<OutboundResponse> {
  const timeoutMs = req.timeoutMs ?? 10_000;
  const maxResponseBytes = req.maxResponseBytes ?? 65_536;
  const timeout = AbortSignal.timeout(timeoutMs);
  const signal = req.signal === undefined ? timeout : AbortSignal.any([timeout, req.signal]);
  try {
    const target = new URL(url);
    const res = await dispatcher.request({
      origin: target.origin,
      path: target.pathname + target.search,
      method: req.method,
      headers: req.headers ?? {},
      body: req.body ?? null,
      signal,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    const chunks: Buffer[] = [];
    let total = 0;
    let truncated = false;
    for await (const chunk of res.body as AsyncIterable<Buffer>) {
      total += chunk.length;
      if (total > maxResponseBytes) {
        truncated = true;
        res.body.destroy();
        break;
      }
      chunks.push(chunk);
    }
    return { status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks), truncated };
  } catch (e) {
    if (req.signal?.aborted === true) throw new ResourceSyncError('RS_ABORTED', 'aborted', { url, cause: e });
    if (timeout.aborted)
      throw new ResourceSyncError('RS_TIMEOUT', `no answer within ${timeoutMs} ms`, { url, cause: e });
    const message = e instanceof Error ? e.message : String(e);
    throw new ResourceSyncError('RS_HTTP', `request failed: ${message}`, { url, cause: e });
  }
}
