/**
 * Request-target checks (RFC 9112 §3.2) done by the server before the Source maps a path: the engine
 * (`SourceSite.resource`) is the authority on what is inside the collection; this is defence in depth and
 * gives clear 400s for requests no collection file can match.
 *
 * Pure functions, no I/O; memory O(target length) (bounded by the server's header size limit).
 *
 * @module
 */

/** A request-target reduced to its raw (still percent-encoded) path. */
export type TargetResult =
  | { readonly ok: true; readonly pathname: string; readonly query: string | undefined }
  | { readonly ok: false; readonly reason: string };

/**
 * Extracts the raw path of an origin-form (`/a/b?q`) or absolute-form (`http://host/a/b?q`) request-target and
 * checks it. The path is returned still percent-encoded, exactly as sent (never normalised: `..` is refused,
 * not resolved). Refused (`ok: false`, answer 400):
 * - anything that is not origin-form or absolute-form http(s) (`*`, authority-form);
 * - a fragment (`#`), a raw control character, space, backslash or non-ASCII character (they must be
 *   percent-encoded);
 * - malformed percent-encoding, or an encoding of NUL, `/` or `\` (`%00`, `%2F`, `%5C`);
 * - percent-encoding that does not decode as UTF-8;
 * - a dot segment, raw or encoded (`.`, `..`, `%2e%2E`, ...);
 * - an empty segment other than the last one (`//`).
 *
 * @example
 * ```ts
 * checkRequestTarget('/a%20b/c.txt?x=1') // { ok: true, pathname: '/a%20b/c.txt', query: 'x=1' }
 * checkRequestTarget('/a/%2e%2e/etc/passwd') // { ok: false, reason: 'dot segment in path' }
 * ```
 */
export function checkRequestTarget(target: string): TargetResult {
  let rest = target;
  if (!rest.startsWith('/')) {
    const m = /^https?:\/\/[^/?#]*/i.exec(rest);
    if (!m) return { ok: false, reason: 'request-target is not origin-form or absolute-form' };
    rest = rest.slice(m[0].length);
    if (rest === '') rest = '/';
    if (!rest.startsWith('/')) return { ok: false, reason: 'request-target is not origin-form or absolute-form' };
  }
  let query: string | undefined;
  const q = rest.indexOf('?');
  let pathname = rest;
  if (q >= 0) {
    pathname = rest.slice(0, q);
    query = rest.slice(q + 1);
  }
  for (let i = 0; i < target.length; i++) {
    const c = target.charCodeAt(i);
    if (c <= 0x20 || c >= 0x7f) return { ok: false, reason: 'control character, space or non-ASCII in request-target' };
    if (c === 0x23) return { ok: false, reason: 'fragment in request-target' };
    if (c === 0x5c) return { ok: false, reason: 'backslash in path' };
  }
  const segments = pathname.slice(1).split('/');
  // Without percent-encoding a segment is its own decoding, and can hold no NUL, slash or backslash (refused
  // above): only empty and dot segments remain to look for.
  const encoded = pathname.includes('%');
  for (let i = 0; i < segments.length; i++) {
    const seg = segments[i]!;
    if (seg === '' && i < segments.length - 1) return { ok: false, reason: 'empty segment in path' };
    if (!encoded) {
      if (seg === '.' || seg === '..') return { ok: false, reason: 'dot segment in path' };
      continue;
    }
    const decoded = decodeSegment(seg);
    if (decoded === undefined) return { ok: false, reason: 'malformed percent-encoding in path' };
    if (decoded === '.' || decoded === '..') return { ok: false, reason: 'dot segment in path' };
    if (/[\u0000/\\]/.test(decoded)) return { ok: false, reason: 'encoded NUL, slash or backslash in path' };
  }
  return { ok: true, pathname, query };
}

/** Decodes one path segment (percent-decoding once, UTF-8, fatal); undefined when malformed. */
export function decodeSegment(segment: string): string | undefined {
  if (!segment.includes('%')) return segment;
  if (/%(?![0-9a-fA-F]{2})/.test(segment)) return undefined;
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

/**
 * True when a decoded segment of the path names a hidden file or folder (starts with `.`). The server never
 * asks the Source for such a resource (documents such as `/.well-known/resourcesync` are looked up first).
 */
export function hasHiddenSegment(pathname: string): boolean {
  if (!pathname.includes('%')) return pathname.startsWith('.') || pathname.includes('/.');
  for (const seg of pathname.split('/')) {
    const decoded = decodeSegment(seg);
    if (decoded === undefined || decoded.startsWith('.')) return true;
  }
  return false;
}
