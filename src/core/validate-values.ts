/**
 * Checks of single attribute values used by the validator (`validate.ts`): URIs, media types, paths, hashes,
 * relation types. Pure functions, no state.
 *
 * @module
 */
import { HASH_ALGORITHMS } from './constants.js';
import { isHexDigest, isKnownHashAlgorithm } from './hash.js';

const SCHEME = /^[A-Za-z][A-Za-z0-9+.-]*:./s;

/** True when `uri` starts with a scheme (RFC 3986 §3.1) followed by something: an absolute URI. */
export function isAbsoluteUri(uri: string): boolean {
  return SCHEME.test(uri);
}

// Whitespace, controls and the characters RFC 3986 never allows unescaped (non-ASCII is left to IRIs).
const BAD_URI_CHARS = /[\u0000-\u0020\u007f<>"{}|\\^`]/;

/** True when `uri` holds whitespace, a control character or one of `<>"{}|\^`` (they must be escaped). */
export function hasInvalidUriChars(uri: string): boolean {
  return BAD_URI_CHARS.test(uri);
}

// A "%" not followed by two hexadecimal digits (RFC 3986 §2.1: "%" only introduces a percent-encoded octet).
const BAD_PERCENT = /%(?![0-9A-Fa-f]{2})/;

/**
 * True when `uri` has a malformed percent-encoding: a `%` not followed by two hexadecimal digits (`50%off`,
 * a trailing `a%2`), which RFC 3986 §2.1 does not allow (a literal `%` is written `%25`).
 */
export function hasMalformedPercent(uri: string): boolean {
  return uri.includes('%') && BAD_PERCENT.test(uri);
}

// Both checks above at once, for the common case (an absolute URI without characters to escape).
const PLAIN_ABSOLUTE_URI = /^[A-Za-z][A-Za-z0-9+.-]*:[^\u0000-\u0020\u007f<>"{}|\\^`]+$/;

/** True when `uri` is an absolute URI without characters to escape: one regex instead of the two above. */
export function isPlainAbsoluteUri(uri: string): boolean {
  return PLAIN_ABSOLUTE_URI.test(uri);
}

const TOKEN = "[!#$%&'*+.^_`|~0-9A-Za-z-]+";
const MEDIA_TYPE = new RegExp(`^${TOKEN}/${TOKEN}(?:[ \\t]*;[ \\t]*${TOKEN}=(?:${TOKEN}|"(?:[^"\\\\]|\\\\.)*"))*$`);

/** True when `type` is a media type `type/subtype` with optional `; name=value` parameters (RFC 7231 §3.1.1.1). */
export function isMediaType(type: string): boolean {
  return MEDIA_TYPE.test(type);
}

/** True when a package path is safe to unpack: no `.`, `..` or empty segment, no backslash, no NUL. */
export function isSafePath(path: string): boolean {
  if (path.includes('\\') || path.includes('\u0000')) return false;
  const segments = path.split('/');
  // The leading '/' gives one empty first segment; any other empty, '.' or '..' segment is refused.
  for (let i = 1; i < segments.length; i++) {
    const s = segments[i];
    if (s === '' || s === '.' || s === '..') return false;
  }
  return true;
}

/** One problem found in a hash attribute. */
export interface HashProblem {
  readonly code: 'hash-invalid' | 'hash-digest-invalid' | 'hash-algorithm-unknown';
  readonly message: string;
}

const NO_PROBLEMS: readonly HashProblem[] = Object.freeze([]);

/** The most common hash attribute: one item, lower-case algorithm name, no white space. */
const ONE_HASH = /^(?:md5:[0-9a-fA-F]{32}|sha-1:[0-9a-fA-F]{40}|sha-256:[0-9a-fA-F]{64})$/;

/** Every problem of a hash attribute value (an empty list when it is fine). Allocates nothing when fine. */
export function checkHashAttribute(value: string): readonly HashProblem[] {
  if (ONE_HASH.test(value) || isPlainHashList(value)) return NO_PROBLEMS;
  return hashProblems(value);
}

/**
 * The common case, by char codes alone: one or more `alg:hex` items of the three known algorithms (ASCII,
 * any case), each once, with hex digests of the right length, separated by XML white space. False means
 * "look closer" ({@link hashProblems} decides), never "invalid".
 */
function isPlainHashList(value: string): boolean {
  const n = value.length;
  let seen = 0;
  let i = 0;
  for (;;) {
    while (i < n && isSpace(value.charCodeAt(i))) i++;
    if (i >= n) return seen !== 0;
    // Algorithm name up to ':' (letters folded to lower case with | 0x20, digits and '-' exact).
    const c0 = value.charCodeAt(i) | 0x20;
    let bit: number;
    let digits: number;
    if (c0 === 109 /* m */) {
      if ((value.charCodeAt(i + 1) | 0x20) !== 100 /* d */ || value.charCodeAt(i + 2) !== 53 /* 5 */) return false;
      i += 3;
      bit = 1;
      digits = 32;
    } else if (c0 === 115 /* s */) {
      if (
        (value.charCodeAt(i + 1) | 0x20) !== 104 /* h */ ||
        (value.charCodeAt(i + 2) | 0x20) !== 97 /* a */ ||
        value.charCodeAt(i + 3) !== 45 /* - */
      )
        return false;
      const d = value.charCodeAt(i + 4);
      if (d === 49 /* 1 */) {
        i += 5;
        bit = 2;
        digits = 40;
      } else if (d === 50 /* 2 */ && value.charCodeAt(i + 5) === 53 /* 5 */ && value.charCodeAt(i + 6) === 54 /* 6 */) {
        i += 7;
        bit = 4;
        digits = 64;
      } else return false;
    } else return false;
    if (value.charCodeAt(i) !== 58 /* : */ || (seen & bit) !== 0) return false;
    seen |= bit;
    i++;
    const end = i + digits;
    if (end > n) return false;
    for (; i < end; i++) {
      const c = value.charCodeAt(i);
      const f = c | 0x20;
      if (!((c >= 48 && c <= 57) || (f >= 97 && f <= 102))) return false;
    }
    if (i < n && !isSpace(value.charCodeAt(i))) return false;
  }
}

/** {@link checkHashAttribute} item by item, with messages. */
function hashProblems(value: string): readonly HashProblem[] {
  let problems: HashProblem[] | undefined;
  let seen: string[] | undefined;
  let items = 0;
  const n = value.length;
  let i = 0;
  while (i < n) {
    while (i < n && isSpace(value.charCodeAt(i))) i++;
    if (i >= n) break;
    let end = i;
    while (end < n && !isSpace(value.charCodeAt(end))) end++;
    items++;
    const problem = checkHashItem(value, i, end, (seen ??= []));
    if (problem !== undefined) (problems ??= []).push(...problem);
    i = end;
  }
  if (items === 0) return [{ code: 'hash-invalid', message: 'empty hash attribute' }];
  return problems ?? NO_PROBLEMS;
}

function isSpace(c: number): boolean {
  return c === 32 || c === 9 || c === 10 || c === 13;
}

function checkHashItem(value: string, start: number, end: number, seen: string[]): HashProblem[] | undefined {
  const colon = value.indexOf(':', start);
  if (colon <= start || colon >= end) {
    const item = value.slice(start, end);
    return [{ code: 'hash-invalid', message: `hash item ${quote(item)} is not algorithm:hexdigest` }];
  }
  const alg = value.slice(start, colon).toLowerCase();
  const hex = value.slice(colon + 1, end);
  let problems: HashProblem[] | undefined;
  if (seen.includes(alg))
    (problems ??= []).push({ code: 'hash-invalid', message: `hash algorithm ${alg} given twice` });
  seen.push(alg);
  if (!isKnownHashAlgorithm(alg)) {
    (problems ??= []).push({
      code: 'hash-algorithm-unknown',
      message: `hash algorithm ${quote(alg)} is not one of ${Object.keys(HASH_ALGORITHMS).join(', ')}`,
    });
    if (!isHexDigest(alg, hex))
      problems.push({ code: 'hash-digest-invalid', message: `${alg} digest ${quote(hex)} is not hex` });
  } else if (!isHexDigest(alg, hex)) {
    (problems ??= []).push({
      code: 'hash-digest-invalid',
      message: `${alg} digest ${quote(hex)} is not ${HASH_ALGORITHMS[alg]} hex digits`,
    });
  }
  return problems;
}

/**
 * Relation types of the IANA Link Relation Types registry (as of 2024), plus `describes` and `profile` the
 * standard uses. A rel outside this set that is not a URI gets a warning only: the registry grows.
 */
export const IANA_RELATIONS: ReadonlySet<string> = new Set(
  (
    'about acl alternate amphtml appendix apple-touch-icon apple-touch-startup-image archives author ' +
    'blocked-by bookmark c2pa-manifest canonical chapter cite-as collection compression-dictionary contents ' +
    'convertedfrom copyright create-form current describedby describes disclosure dns-prefetch duplicate edit ' +
    'edit-form edit-media enclosure external first geofeed glossary help hosts hub ice-server icon index ' +
    'intervalafter intervalbefore intervalcontains intervaldisjoint intervalduring intervalequals ' +
    'intervalfinishedby intervalfinishes intervalin intervalmeets intervalmetby intervaloverlappedby ' +
    'intervaloverlaps intervalstartedby intervalstarts item last latest-version license linkset lrdd manifest ' +
    'mask-icon me media-feed memento micropub modulepreload monitor monitor-group next next-archive nofollow ' +
    'noopener noreferrer opener openid2.local_id openid2.provider original p3pv1 payment pingback preconnect ' +
    'predecessor-version prefetch preload prerender prev prev-archive preview previous privacy-policy profile ' +
    'publication related replies restconf ruleinput search section self service service-desc service-doc ' +
    'service-meta sip-trunking-capability sponsored start status stylesheet subsection successor-version sunset ' +
    'tag terms-of-service timegate timemap type ugc up version-history via webmention working-copy working-copy-of'
  ).split(' '),
);

/** True when `rel` is an IANA-registered relation type (case-insensitive) or an absolute URI (RFC 8288 §2.1). */
export function isKnownRelation(rel: string): boolean {
  return IANA_RELATIONS.has(rel.toLowerCase()) || isAbsoluteUri(rel);
}

/** A name (element, attribute) cut to 60 characters, for messages and locations. */
export function clip(name: string): string {
  return name.length > 60 ? `${name.slice(0, 57)}...` : name;
}

/** `JSON.stringify` of a value cut to 80 characters, for messages (bounded whatever the input). */
export function quote(value: string): string {
  return JSON.stringify(value.length > 80 ? `${value.slice(0, 77)}...` : value);
}
