/**
 * The one error class of resourcesync. Callers match on `code`, never on the message.
 *
 * @module
 */

/** Stable error codes. */
export type ErrorCode =
  /** XML that is not well-formed. */
  | 'RS_XML_SYNTAX'
  /** A DTD, entity declaration or external entity: refused for safety. */
  | 'RS_XML_DTD'
  /** A limit was exceeded (depth, entry size, entry count, document size, download size). */
  | 'RS_LIMIT'
  /** The document is XML but not a Sitemap / ResourceSync document. */
  | 'RS_NOT_RESOURCESYNC'
  /** An attribute or element value that cannot be used (bad datetime, bad hash, bad number). */
  | 'RS_INVALID_VALUE'
  /** Content did not match its declared hash. */
  | 'RS_HASH_MISMATCH'
  /** Content did not match its declared length. */
  | 'RS_LENGTH_MISMATCH'
  /** An HTTP request failed (status, network, redirect limit). */
  | 'RS_HTTP'
  /** A timeout (connect, headers, idle body). */
  | 'RS_TIMEOUT'
  /** The operation was aborted by its signal. */
  | 'RS_ABORTED'
  /** A ZIP package is corrupt, truncated or unsafe (path escape). */
  | 'RS_ZIP'
  /** A path that would leave its root, or is otherwise unsafe. */
  | 'RS_UNSAFE_PATH'
  /** A file system operation failed. */
  | 'RS_IO'
  /** A store or state database operation failed. */
  | 'RS_STORE'
  /** Invalid configuration or arguments. */
  | 'RS_CONFIG'
  /** Discovery found no ResourceSync document. */
  | 'RS_DISCOVERY'
  /** The Source no longer offers changes back to the Destination's watermark. */
  | 'RS_GAP'
  /** A resource outside the authority of the Source (Sitemap protocol "location" rule). */
  | 'RS_AUTHORITY'
  /** A notification payload or signature that was refused. */
  | 'RS_NOTIFICATION'
  /** An OAI-PMH provider answered with an error or with a response that breaks the protocol. */
  | 'RS_OAI_PMH';

/** Where an error happened: any of a URL or file, a line and column, an element, an entry number. */
export interface ErrorLocation {
  readonly url?: string;
  readonly line?: number;
  readonly column?: number;
  readonly element?: string;
  /** 1-based index of the `<url>` / `<sitemap>` entry in its document. */
  readonly entry?: number;
}

export interface ResourceSyncErrorOptions extends ErrorLocation {
  readonly cause?: unknown;
}

/**
 * Error with a stable `code` and the location it happened at.
 *
 * @example
 * ```ts
 * try { await readDocument(bytes) } catch (e) {
 *   if (e instanceof ResourceSyncError && e.code === 'RS_XML_DTD') console.error(e.message);
 * }
 * ```
 */
export class ResourceSyncError extends Error {
  override readonly name = 'ResourceSyncError';
  readonly code: ErrorCode;
  readonly url: string | undefined;
  readonly line: number | undefined;
  readonly column: number | undefined;
  readonly element: string | undefined;
  readonly entry: number | undefined;

  constructor(code: ErrorCode, message: string, options: ResourceSyncErrorOptions = {}) {
    super(formatMessage(message, options), options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.url = options.url;
    this.line = options.line;
    this.column = options.column;
    this.element = options.element;
    this.entry = options.entry;
  }
}

function formatMessage(message: string, where: ErrorLocation): string {
  const parts: string[] = [];
  if (where.url !== undefined) parts.push(where.url);
  if (where.line !== undefined)
    parts.push(where.column === undefined ? `line ${where.line}` : `line ${where.line}:${where.column}`);
  if (where.entry !== undefined) parts.push(`entry ${where.entry}`);
  if (where.element !== undefined) parts.push(`<${where.element}>`);
  return parts.length === 0 ? message : `${message} (${parts.join(', ')})`;
}

/** True when `e` is a ResourceSyncError with the given code. */
export function isResourceSyncError(e: unknown, code?: ErrorCode): e is ResourceSyncError {
  return e instanceof ResourceSyncError && (code === undefined || e.code === code);
}
