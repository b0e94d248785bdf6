/**
 * Small HTTP pieces shared by the WebSub publisher, subscriber and hub: bounded body reading, RFC 8288 `Link`
 * headers, WebSub `X-Hub-Signature` HMACs (W3C WebSub §8), exponential backoff with jitter.
 *
 * @module
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { ResourceSyncError } from '../core/errors.js';

/**
 * Reads a request body into memory, refusing more than `maxBytes` (memory bound: `maxBytes`).
 * Throws `RS_LIMIT` as soon as the declared `Content-Length` or the bytes received exceed the bound; the
 * caller answers 413. The request is drained/destroyed by the caller.
 */
export async function readBody(req: IncomingMessage, maxBytes: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) {
    throw new ResourceSyncError('RS_LIMIT', `request body of ${declared} bytes exceeds ${maxBytes}`);
  }
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    total += chunk.length;
    if (total > maxBytes) throw new ResourceSyncError('RS_LIMIT', `request body exceeds ${maxBytes} bytes`);
    chunks.push(chunk);
  }
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total);
}

/** One link of an RFC 8288 `Link` header. */
export interface HeaderLink {
  readonly href: string;
  /** Relation types, lower-cased (a `rel` may hold several, space-separated). */
  readonly rels: readonly string[];
}

/**
 * Parses one or several `Link` header values (RFC 8288 §3): `<uri>; rel="a b"; other=x, <uri2>; rel=c`.
 * Tolerant: malformed links are skipped. At most 64 links are read.
 */
export function parseLinkHeader(value: string | readonly string[] | undefined): HeaderLink[] {
  if (value === undefined) return [];
  const text = typeof value === 'string' ? value : value.join(', ');
  const links: HeaderLink[] = [];
  const re = /<([^>]*)>((?:\s*;\s*[^;,=\s]+\s*(?:=\s*(?:"(?:[^"\\]|\\.)*"|[^;,"\s]*))?)*)/g;
  let match: RegExpExecArray | null;
  while ((match = re.exec(text)) !== null && links.length < 64) {
    const href = match[1]!.trim();
    const params = match[2] ?? '';
    const relMatch = /;\s*rel\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;,"\s]*))/i.exec(params);
    const rel = relMatch === null ? '' : (relMatch[1] ?? relMatch[2] ?? '');
    const rels = rel
      .toLowerCase()
      .split(/\s+/)
      .filter((r) => r.length > 0);
    if (rels.length > 0) links.push({ href, rels });
  }
  return links;
}

/** The first link with relation `rel` in a `Link` header, or undefined. */
export function findLink(value: string | readonly string[] | undefined, rel: string): string | undefined {
  const wanted = rel.toLowerCase();
  return parseLinkHeader(value).find((l) => l.rels.includes(wanted))?.href;
}

/**
 * Formats a `Link` header value for the WebSub pair (WebSub §4, §7): `<hub>; rel="hub", <topic>; rel="self"`.
 * URLs containing `>` or control characters are refused (they would break the header).
 */
export function formatWebSubLinks(hubUrl: string, topicUrl: string): string {
  for (const u of [hubUrl, topicUrl]) {
    if (/[<>\s"]/.test(u)) throw new ResourceSyncError('RS_CONFIG', `URL not usable in a Link header: ${u}`);
  }
  return `<${hubUrl}>; rel="hub", <${topicUrl}>; rel="self"`;
}

/** HMAC algorithms WebSub allows in `X-Hub-Signature` (WebSub §8, `method=signature`). */
export const SIGNATURE_METHODS = { sha1: 'sha1', sha256: 'sha256', sha384: 'sha384', sha512: 'sha512' } as const;
export type SignatureMethod = keyof typeof SIGNATURE_METHODS;

/** `X-Hub-Signature` value for a body: `sha256=<hex hmac>` (WebSub §8). */
export function signBody(secret: string, body: Uint8Array | string, method: SignatureMethod = 'sha256'): string {
  return `${method}=${createHmac(SIGNATURE_METHODS[method], secret).update(body).digest('hex')}`;
}

/**
 * Checks an `X-Hub-Signature` header against a body with a constant-time comparison (WebSub §8).
 * Returns false for a missing, malformed or unknown-method signature.
 */
export function verifySignature(secret: string, body: Uint8Array | string, header: string | undefined): boolean {
  if (header === undefined) return false;
  const m = /^\s*(sha1|sha256|sha384|sha512)=([0-9a-fA-F]+)\s*$/.exec(header);
  if (m === null) return false;
  const method = m[1] as SignatureMethod;
  const expected = createHmac(SIGNATURE_METHODS[method], secret).update(body).digest();
  const given = Buffer.from(m[2]!, 'hex');
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** Delay before retry `attempt` (0-based): `base * 2^attempt`, capped at `max`, with full jitter in [50%, 100%]. */
export function backoffDelay(
  attempt: number,
  baseMs: number,
  maxMs: number,
  random: () => number = Math.random,
): number {
  const exp = Math.min(maxMs, baseMs * 2 ** Math.min(attempt, 30));
  return Math.round(exp / 2 + (exp / 2) * random());
}

/** Resolves after `ms`, or rejects with RS_ABORTED when `signal` aborts first. The timer does not keep the process alive when `unref` is set. */
export function sleep(ms: number, signal?: AbortSignal, unref = false): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(new ResourceSyncError('RS_ABORTED', 'aborted'));
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(new ResourceSyncError('RS_ABORTED', 'aborted'));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    if (unref) timer.unref();
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** True for an absolute `http:` or `https:` URL without credentials, at most 2,048 characters. */
export function isHttpUrl(text: string): boolean {
  if (text.length === 0 || text.length > 2048) return false;
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    return false;
  }
  return (u.protocol === 'http:' || u.protocol === 'https:') && u.username === '' && u.password === '';
}
