/**
 * The canonical percent-encoding of a URI path segment (RFC 3986 §3.3): every character that may stand for
 * itself in a segment (`pchar`: unreserved, sub-delims, `:` and `@`) is written as it is, every other one as
 * the `%XX` escapes of its UTF-8 bytes (upper-case hex, §2.1). A Source of ours writes its URIs this way, and a
 * Destination names its files after the inverse: a file name equals the decoded URI path exactly when the URI
 * is written in this form (see docs/file-names.md).
 *
 * @module
 */

/** RFC 3986 `pchar` characters other than `%`: unreserved / sub-delims / ":" / "@" (§3.3, §2.2, §2.3). */
const PCHAR = /^[A-Za-z0-9\-._~!$&'()*+,;=:@]$/;
/** Strings made only of `pchar` characters (the common case: no escape needed). */
const PLAIN = /^[A-Za-z0-9\-._~!$&'()*+,;=:@]*$/;

/** True when the one-character string `c` may stand for itself in a URI path segment (RFC 3986 `pchar`). */
export function isPathChar(c: string): boolean {
  return PCHAR.test(c);
}

const HEX = '0123456789ABCDEF';

/** `%XX` escapes (upper-case hex) of the UTF-8 bytes of one code point `cp`. */
export function percentEncodeCodePoint(cp: number): string {
  const hex = (b: number): string => `%${HEX[b >> 4]}${HEX[b & 15]}`;
  if (cp < 0x80) return hex(cp);
  if (cp < 0x800) return hex(0xc0 | (cp >> 6)) + hex(0x80 | (cp & 63));
  if (cp < 0x10000) return hex(0xe0 | (cp >> 12)) + hex(0x80 | ((cp >> 6) & 63)) + hex(0x80 | (cp & 63));
  return hex(0xf0 | (cp >> 18)) + hex(0x80 | ((cp >> 12) & 63)) + hex(0x80 | ((cp >> 6) & 63)) + hex(0x80 | (cp & 63));
}

/**
 * The canonical URI text of one path segment: `pchar` characters as they are, everything else (`/`, `%`, `?`,
 * `#`, space, `[`, `]`, non-ASCII...) percent-encoded as UTF-8. A lone surrogate is encoded as U+FFFD.
 *
 * @example
 * ```ts
 * encodePathSegment('C++');     // 'C++'
 * encodePathSegment('#x');      // '%23x'
 * encodePathSegment('50% off'); // '50%25%20off'
 * encodePathSegment('ü');       // '%C3%BC'
 * ```
 */
export function encodePathSegment(segment: string): string {
  if (PLAIN.test(segment)) return segment;
  let out = '';
  for (const ch of segment) {
    if (PCHAR.test(ch)) out += ch;
    else {
      let cp = ch.codePointAt(0) as number;
      if (cp >= 0xd800 && cp <= 0xdfff) cp = 0xfffd;
      out += percentEncodeCodePoint(cp);
    }
  }
  return out;
}
