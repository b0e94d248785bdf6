/**
 * Small pieces of the WebSub publisher, subscriber and hub's servers: bounded request body reading, WebSub
 * `X-Hub-Signature` HMACs (W3C WebSub §8), URL checks. Link headers and backoff are the HTTP stack's
 * (`src/http/link.ts`, `src/http/backoff.ts`).
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
