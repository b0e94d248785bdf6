/**
 * HTTP conditional requests (RFC 9110 §8.8 validators, §13 preconditions): entity-tag parsing and comparison,
 * HTTP-date parsing, and the precondition evaluation order of RFC 9110 §13.2.2.
 *
 * Pure functions, no I/O. Memory: O(header length); headers are bounded by the server's header size limit.
 *
 * @module
 */

/** A parsed entity-tag (`"xyz"` or `W/"xyz"`). */
export interface EntityTag {
  readonly weak: boolean;
  /** The opaque tag without quotes. */
  readonly opaque: string;
}

/** Parses one entity-tag such as `"abc"` or `W/"abc"`; undefined when it is not one. */
export function parseEntityTag(text: string): EntityTag | undefined {
  const list = parseEntityTagList(text.trim());
  return Array.isArray(list) && list.length === 1 ? list[0] : undefined;
}

/**
 * Parses an `If-Match` / `If-None-Match` value: `*` or a comma-separated list of entity-tags (commas may occur
 * inside the quotes, so this tokenises rather than splitting). Undefined for a malformed value: a malformed
 * `If-None-Match` is treated as absent, a malformed `If-Match` fails closed (see {@link evaluatePreconditions}).
 */
export function parseEntityTagList(text: string): '*' | EntityTag[] | undefined {
  const s = text.trim();
  if (s === '*') return '*';
  const tags: EntityTag[] = [];
  let i = 0;
  const n = s.length;
  const skipWs = () => {
    while (i < n && (s[i] === ' ' || s[i] === '\t')) i++;
  };
  for (;;) {
    skipWs();
    // Empty list elements (",,") are allowed by the list syntax.
    if (i < n && s[i] === ',') {
      i++;
      continue;
    }
    if (i >= n) break;
    let weak = false;
    if (s.startsWith('W/', i)) {
      weak = true;
      i += 2;
    }
    if (s[i] !== '"') return undefined;
    const close = s.indexOf('"', i + 1);
    if (close < 0) return undefined;
    const opaque = s.slice(i + 1, close);
    for (let k = 0; k < opaque.length; k++) {
      const c = opaque.charCodeAt(k);
      // etagc = %x21 / %x23-7E / obs-text
      if (c < 0x21 || c === 0x7f || c > 0xff) return undefined;
    }
    tags.push({ weak, opaque });
    i = close + 1;
    skipWs();
    if (i < n && s[i] !== ',') return undefined;
  }
  return tags.length === 0 ? undefined : tags;
}

/** Strong comparison (RFC 9110 §8.8.3.2): both strong and the opaque tags equal. */
export function strongMatch(a: EntityTag, b: EntityTag): boolean {
  return !a.weak && !b.weak && a.opaque === b.opaque;
}

/** Weak comparison (RFC 9110 §8.8.3.2): opaque tags equal, weakness ignored. */
export function weakMatch(a: EntityTag, b: EntityTag): boolean {
  return a.opaque === b.opaque;
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const IMF_FIXDATE = /^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), (\d{2}) ([A-Z][a-z]{2}) (\d{4}) (\d{2}):(\d{2}):(\d{2}) GMT$/;
const RFC850_DATE =
  /^(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), (\d{2})-([A-Z][a-z]{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2}) GMT$/;
const ASCTIME_DATE = /^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) ([A-Z][a-z]{2}) ([ \d]\d) (\d{2}):(\d{2}):(\d{2}) (\d{4})$/;

/**
 * Parses an HTTP-date (RFC 9110 §5.6.7: IMF-fixdate, and the obsolete RFC 850 and asctime forms, all UTC) to
 * epoch milliseconds; undefined when the text is not an HTTP-date.
 */
export function parseHttpDate(text: string): number | undefined {
  const s = text.trim();
  let m = IMF_FIXDATE.exec(s);
  if (m) return utc(Number(m[3]), m[2]!, Number(m[1]), Number(m[4]), Number(m[5]), Number(m[6]));
  m = RFC850_DATE.exec(s);
  if (m) {
    // RFC 9110: a two-digit year that appears to be more than 50 years in the future is in the past century.
    let year = 2000 + Number(m[3]);
    if (year > new Date().getUTCFullYear() + 50) year -= 100;
    return utc(year, m[2]!, Number(m[1]), Number(m[4]), Number(m[5]), Number(m[6]));
  }
  m = ASCTIME_DATE.exec(s);
  if (m) return utc(Number(m[6]), m[1]!, Number(m[2]!.trim()), Number(m[3]), Number(m[4]), Number(m[5]));
  return undefined;
}

function utc(year: number, mon: string, day: number, h: number, min: number, sec: number): number | undefined {
  const month = MONTHS.indexOf(mon);
  if (month < 0 || day < 1 || day > 31 || h > 23 || min > 59 || sec > 60) return undefined;
  const ms = Date.UTC(year, month, day, h, min, Math.min(sec, 59));
  return new Date(ms).getUTCDate() === day ? ms : undefined;
}

/** Formats epoch ms or a Date as an IMF-fixdate, e.g. `Sun, 06 Nov 1994 08:49:37 GMT`. */
export function formatHttpDate(when: number | Date): string {
  return new Date(typeof when === 'number' ? when : when.getTime()).toUTCString();
}

/**
 * A distinct ETag for another representation of the same content (e.g. `"<tag>-gzip"` for the gzip encoding):
 * a suffix inside the quotes, `W/` kept.
 */
export function deriveEtag(etag: string, suffix: string): string {
  const close = etag.lastIndexOf('"');
  if (close <= 0) return `"${etag}-${suffix}"`;
  return `${etag.slice(0, close)}-${suffix}${etag.slice(close)}`;
}

/** The validators of the selected representation. */
export interface Validators {
  /** The representation's ETag as sent (quoted, possibly `W/`). */
  readonly etag: string;
  /**
   * Other tags that denote the same content in another encoding (e.g. the identity ETag when the gzip one is
   * selected); `If-None-Match` matching one of them also gives 304.
   */
  readonly alsoMatches?: readonly string[];
  /** Last modification, epoch ms (compared at one-second resolution, as HTTP-dates have). */
  readonly lastModified: number;
}

/** The precondition request headers (raw values, as Node gives them). */
export interface ConditionalHeaders {
  readonly method: string;
  readonly ifMatch?: string | undefined;
  readonly ifNoneMatch?: string | undefined;
  readonly ifModifiedSince?: string | undefined;
  readonly ifUnmodifiedSince?: string | undefined;
}

/** What to do after evaluating preconditions. */
export type PreconditionOutcome = 'proceed' | 'not-modified' | 'precondition-failed';

/**
 * Evaluates preconditions in the order of RFC 9110 §13.2.2 for a GET/HEAD of an existing representation:
 * If-Match (412), else If-Unmodified-Since (412), then If-None-Match (weak comparison; 304 for GET/HEAD, 412
 * otherwise), else If-Modified-Since (GET/HEAD only; 304).
 *
 * @example
 * ```ts
 * evaluatePreconditions({ method: 'GET', ifNoneMatch: 'W/"a", "b"' }, { etag: '"b"', lastModified: 0 }) // 'not-modified'
 * ```
 */
export function evaluatePreconditions(h: ConditionalHeaders, v: Validators): PreconditionOutcome {
  // The common case, decided without parsing the validators.
  if (
    h.ifMatch === undefined &&
    h.ifNoneMatch === undefined &&
    h.ifModifiedSince === undefined &&
    h.ifUnmodifiedSince === undefined
  )
    return 'proceed';
  const current = parseEntityTag(v.etag);
  const alternates = (v.alsoMatches ?? []).map(parseEntityTag).filter((t): t is EntityTag => t !== undefined);
  const lastModifiedSec = Math.floor(v.lastModified / 1000);
  const getOrHead = h.method === 'GET' || h.method === 'HEAD';

  if (h.ifMatch !== undefined) {
    const list = parseEntityTagList(h.ifMatch);
    // A malformed If-Match fails closed: the client asked for a guarantee we cannot check.
    if (list === undefined) return 'precondition-failed';
    if (list !== '*' && !(current && list.some((t) => strongMatch(t, current)))) return 'precondition-failed';
  } else if (h.ifUnmodifiedSince !== undefined) {
    const since = parseHttpDate(h.ifUnmodifiedSince);
    if (since !== undefined && lastModifiedSec > Math.floor(since / 1000)) return 'precondition-failed';
  }

  if (h.ifNoneMatch !== undefined) {
    const list = parseEntityTagList(h.ifNoneMatch);
    if (list !== undefined) {
      const matched =
        list === '*' || list.some((t) => (current && weakMatch(t, current)) || alternates.some((a) => weakMatch(t, a)));
      if (matched) return getOrHead ? 'not-modified' : 'precondition-failed';
    }
  } else if (h.ifModifiedSince !== undefined && getOrHead) {
    const since = parseHttpDate(h.ifModifiedSince);
    if (since !== undefined && lastModifiedSec <= Math.floor(since / 1000)) return 'not-modified';
  }
  return 'proceed';
}

/**
 * `If-Range` (RFC 9110 §13.1.5): true when the Range header may be honoured. An entity-tag must match the
 * current ETag by strong comparison (weak tags never match); an HTTP-date must equal Last-Modified exactly;
 * anything else (malformed) means the Range is ignored and the whole representation is sent.
 */
export function ifRangeAllows(ifRange: string | undefined, v: Validators): boolean {
  if (ifRange === undefined) return true;
  const s = ifRange.trim();
  if (s.startsWith('"') || s.startsWith('W/')) {
    const tag = parseEntityTag(s);
    const current = parseEntityTag(v.etag);
    return tag !== undefined && current !== undefined && strongMatch(tag, current);
  }
  const date = parseHttpDate(s);
  return date !== undefined && Math.floor(date / 1000) === Math.floor(v.lastModified / 1000);
}
