/**
 * Mapping of resource URIs to local paths under a Destination's root, safe and reversible. The full mapping,
 * with examples, is described in docs/file-names.md.
 *
 * Layouts: `host-path` (default) puts `http://example.org:8080/a/b?x=1` at `<root>/example.org_8080/a/b%%-3Fx=1`
 * (the port only when not the scheme's default; a `https+` prefix when the scheme differs from the Source's);
 * `path` (one host) at `<root>/a/b%%-3Fx=1`.
 *
 * A file name is the decoded text of its URI path segment (`C++`, `#x`, `50% off`, `ü`, `?q`, `%41` are
 * themselves), whenever the URI writes that segment canonically (RFC 3986: `pchar` characters as they are,
 * others as upper-case UTF-8 `%XX`, see {@link encodePathSegment}: what a Source of ours writes) and the
 * character can stand in a file name. Characters no URI may hold as themselves (`[`, `]`, `|`, `^`, a `%` that
 * starts no escape; WHATWG URL already escapes a space, `<`, non-ASCII...) are read as their escapes, their only
 * valid spelling. Everything else is written with an escape that no decoded name contains:
 * - `%%XX`: the URI has the escape `%XX` there and it is not decoded: an encoded `/` (`%2F`), NUL and control
 *   characters, bytes that are not UTF-8, lower-case hex, and escapes of characters that need none (`%41`,
 *   `%2B`: a URI that differs from the canonical one must get another name, RFC 3986 §2.2); with
 *   `windowsNames`, the characters Windows cannot hold;
 * - `%%-XX`: the URI has the character with ASCII code XX there as itself, and the name cannot: the `?` of a
 *   query, a `#`, a `/` inside a query; with `foldCase`, upper-case letters; with `windowsNames`, `:` and `*`;
 * - a literal `%` followed by another `%` is written `%%25`;
 * - names that would be special: `.` and `..`, the state directory `.resourcesync`, the names temporary files
 *   take (`.*.tmp`), and with `windowsNames` device names (`con`, `lpt1.txt`) and a trailing `.` or space, get
 *   their first (last) character escaped as above;
 * - an empty segment (a path ending in `/`) is the file {@link EMPTY_SEGMENT_NAME} (`%%index`);
 * - a name longer than 255 UTF-8 bytes is cut and suffixed `%%~<16 hex of sha-256>`: the one case that
 *   {@link PathMapper.toUri} cannot reverse (it returns undefined; the state database keeps the mapping).
 *
 * Every name the mapping produces decodes back to its URI, and no URI maps to a name starting with `%%`
 * followed by a letter past `f`: those are reserved. {@link SELF_NAME} (`%%self`) holds a resource whose own
 * path must be a directory, because resources below it exist (`/a` when `/a/b` exists: `a/%%self`; see
 * {@link ensureParentDirectory}).
 *
 * Authority check ({@link PathMapper.isAllowed}): the Sitemap protocol's rule that a Sitemap lists URLs of its
 * own host (sitemaps.org, "Sitemap file location"), compared on scheme-default-aware host and port. Its further
 * rule that URLs sit under the Sitemap's directory is not applied: ResourceSync documents routinely live in a
 * set's directory while the resources do not (Examples 13-14: `/dataset1/resourcelist.xml` lists `/res1`).
 * `allowHosts` adds hosts (`host` or `host:port`); `authorityCheck: false` accepts every host.
 *
 * @module
 */
import { createHash } from 'node:crypto';
import { lstatSync, renameSync } from 'node:fs';
import { link, lstat, mkdir, readFile, readdir, realpath, rename, rm, stat, unlink } from 'node:fs/promises';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { syncDir, writeFileAtomic } from '../io/atomic.js';
import { ResourceSyncError } from '../core/errors.js';
import { isPathChar, percentEncodeCodePoint } from '../core/uri-path.js';

/**
 * Version of the mapping of URIs to file names: 1 escaped `%XX` names (before file names were the decoded URI
 * path), 2 this one. A copy records the version it was made with; older copies are renamed (rename-files.ts).
 */
export const NAME_MAPPING_VERSION = 2;
/** Name of the state directory under a Destination's root; never a mapping target. */
export const STATE_DIR_NAME = '.resourcesync';
/** Local name of a resource whose own path is a directory (resources below it exist): `a/%%self` for `/a`. */
export const SELF_NAME = '%%self';
/** Local name of an empty path segment (a URI path ending in `/`): `dir/%%index` for `/dir/`. */
export const EMPTY_SEGMENT_NAME = '%%index';
/** Prefix of reserved local names used while files are moved (never a mapping target). */
export const MOVING_PREFIX = '%%moving-';
/** Longest local name in bytes (most file systems). */
const MAX_NAME_BYTES = 255;
const HASH_MARK = '%%~';

/** Maps URIs to local paths and back, and checks the Sitemap authority rule. */
export interface PathMapper {
  /**
   * The absolute local path of `uri`, inside the root: where its file is, unless that path is a directory
   * (resources below it exist), in which case the file is `<path>/%%self` (see {@link resolveResourceFile}).
   * @throws RS_UNSAFE_PATH, RS_AUTHORITY.
   */
  toLocalPath(uri: string): string;
  /**
   * The URI a local path stands for (`<path>/%%self` stands for the URI of `<path>`), or undefined for paths
   * this mapper does not produce (`toLocalPath(toUri(p)) === p` whenever it is defined).
   */
  toUri(localPath: string): string | undefined;
  /** Authority check: true when `uri` is under the Source's host and port (or an allowed host). */
  isAllowed(uri: string): boolean;
  /** The absolute root. */
  readonly root: string;
  /** The name options in force (record them with the copy: see {@link NameOptions}). */
  readonly names: Required<NameOptions>;
}

/** How names are made safe for the local file system: fixed for a copy once made (the state records them). */
export interface NameOptions {
  /**
   * Escape upper-case ASCII letters, for case-insensitive file systems where `A.txt` and `a.txt` collide
   * (default: true on macOS and Windows, false elsewhere).
   */
  readonly foldCase?: boolean;
  /**
   * Escape what Windows cannot hold in a name: `\ : * ? " < > |`, device names (`con`, `lpt1.txt`) and a
   * trailing `.` or space (default: true on Windows, false elsewhere).
   */
  readonly windowsNames?: boolean;
}

/** Options of {@link createPathMapper}. */
export interface PathMapperOptions extends NameOptions {
  /** The Destination's directory. */
  readonly root: string;
  /** The Source's URL (any of its documents): the scheme, host and port the authority check compares with. */
  readonly sourceUrl: string;
  /** `host-path` (default): `<root>/<host>[_<port>]/<path>`; `path`: `<root>/<path>`, one origin only. */
  readonly layout?: 'host-path' | 'path';
  /** Other hosts (`host` or `host:port`) whose resources are accepted. */
  readonly allowHosts?: readonly string[];
  /** false: accept resources of any host (default true). */
  readonly authorityCheck?: boolean;
}

/** The default {@link NameOptions} of this platform. */
export function defaultNameOptions(): Required<NameOptions> {
  return {
    foldCase: process.platform === 'darwin' || process.platform === 'win32',
    windowsNames: process.platform === 'win32',
  };
}

const WINDOWS_FORBIDDEN = new Set([...'\\:*?"<>|']);
const WINDOWS_DEVICES = new Set(['con', 'prn', 'aux', 'nul', 'conin$', 'conout$']);
for (let i = 1; i <= 9; i++) {
  WINDOWS_DEVICES.add(`com${i}`);
  WINDOWS_DEVICES.add(`lpt${i}`);
}

const HEX_DIGITS = '0123456789ABCDEF';
function hex2(code: number): string {
  return `${HEX_DIGITS[code >> 4]}${HEX_DIGITS[code & 15]}`;
}

function isHex(c: string | undefined): boolean {
  return c !== undefined && /^[0-9A-Fa-f]$/.test(c);
}

function isUpperHex(c: string | undefined): boolean {
  return c !== undefined && /^[0-9A-F]$/.test(c);
}

/** Characters a file name may hold as themselves (on every platform: no `/`, NUL or other controls). */
function isNameChar(cp: number, o: Required<NameOptions>): boolean {
  if (cp < 0x20 || cp === 0x7f || (cp >= 0x80 && cp <= 0x9f) || cp === 0x2f) return false;
  if (o.windowsNames && cp < 0x80 && WINDOWS_FORBIDDEN.has(String.fromCharCode(cp))) return false;
  if (o.foldCase && cp >= 0x41 && cp <= 0x5a) return false;
  return true;
}

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The character the escapes at `i` of `text` decode to, when they are its canonical encoding (upper-case hex,
 * valid UTF-8, a character {@link encodePathSegment} escapes) and it may stand in a file name; with the length
 * of URI text consumed.
 */
function decodeAt(text: string, i: number, o: Required<NameOptions>): [string, number] | undefined {
  if (!isUpperHex(text[i + 1]) || !isUpperHex(text[i + 2])) return undefined;
  const lead = Number.parseInt(text.slice(i + 1, i + 3), 16);
  const n =
    lead < 0x80
      ? 1
      : lead >= 0xc2 && lead <= 0xdf
        ? 2
        : lead >= 0xe0 && lead <= 0xef
          ? 3
          : lead >= 0xf0 && lead <= 0xf4
            ? 4
            : 0;
  if (n === 0) return undefined;
  let ch: string;
  if (n === 1) {
    ch = String.fromCharCode(lead);
    if (isPathChar(ch)) return undefined; // `%41`, `%2B`: not how the canonical form writes it
  } else {
    const bytes: number[] = [lead];
    for (let k = 1; k < n; k++) {
      const at = i + 3 * k;
      if (text[at] !== '%' || !isUpperHex(text[at + 1]) || !isUpperHex(text[at + 2])) return undefined;
      bytes.push(Number.parseInt(text.slice(at + 1, at + 3), 16));
    }
    try {
      ch = UTF8.decode(Uint8Array.from(bytes)); // fatal: refuses overlong and invalid sequences, surrogates
    } catch {
      return undefined;
    }
  }
  if (!isNameChar(ch.codePointAt(0) as number, o)) return undefined;
  return [ch, 3 * n];
}

/** One piece of a local name: what is written on disk, and the URI text it stands for. */
interface Unit {
  name: string;
  uri: string;
}

/** The escaped form of a unit (`%%XX` for each escape it stands for, `%%-XX` for a character written as is). */
function escapeUnit(u: Unit): string {
  if (u.uri.length > 1) return u.uri.replace(/%/g, '%%');
  return `%%-${hex2(u.uri.charCodeAt(0))}`;
}

/** Units of a segment's URI text (ASCII, as WHATWG URL serializes it). */
function toUnits(text: string, o: Required<NameOptions>, extra?: ReadonlySet<string>): Unit[] {
  const units: Unit[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i] as string;
    if (c === '%' && isHex(text[i + 1]) && isHex(text[i + 2])) {
      const decoded = decodeAt(text, i, o);
      if (decoded !== undefined) {
        units.push({ name: decoded[0], uri: text.slice(i, i + decoded[1]) });
        i += decoded[1];
      } else {
        units.push({ name: `%${text.slice(i, i + 3)}`, uri: text.slice(i, i + 3) });
        i += 3;
      }
      continue;
    }
    const cp = c.charCodeAt(0);
    const unit: Unit = { name: c, uri: c };
    if (isPathChar(c)) {
      if (!isNameChar(cp, o) || extra?.has(c) === true) unit.name = escapeUnit(unit);
    } else if (c === '?' || c === '#' || c === '/') {
      unit.name = escapeUnit(unit); // the query, the fragment, a `/` in the query
    } else {
      // A character no URI may hold as itself (RFC 3986: `[`, `]`, `|`, `^`, `{`, `}`, a `%` that starts no
      // escape...) is read as its escape, as WHATWG URL does with a space or `<`: its only valid spelling.
      unit.uri = percentEncodeCodePoint(cp);
      if (!isNameChar(cp, o)) unit.name = escapeUnit(unit);
    }
    units.push(unit);
    i++;
  }
  return units;
}

function encodeNonAscii(c: string): string {
  const cp = c.codePointAt(0) as number;
  return percentEncodeCodePoint(cp >= 0xd800 && cp <= 0xdfff ? 0xfffd : cp);
}

/** Names (lower-cased) that must not be used as they are: special, reserved, or a temporary file's. */
function isReservedName(lower: string, o: Required<NameOptions>): boolean {
  if (lower.charCodeAt(0) === 0x2e /* . */)
    return lower === '.' || lower === '..' || lower === STATE_DIR_NAME || lower.endsWith('.tmp');
  if (!o.windowsNames) return false;
  const dot = lower.indexOf('.');
  const baseLength = dot < 0 ? lower.length : dot;
  return baseLength >= 3 && baseLength <= 7 && WINDOWS_DEVICES.has(dot < 0 ? lower : lower.slice(0, dot));
}

/**
 * Escapes the first unit of reserved names, and a trailing `.` or space where Windows drops them; writes a `%`
 * standing for itself before another `%` as `%%25`.
 */
function protect(units: Unit[], o: Required<NameOptions>): string {
  const first = units[0] as Unit;
  if (
    isReservedName(
      units
        .map((u) => u.name)
        .join('')
        .toLowerCase(),
      o,
    ) &&
    !first.name.startsWith('%')
  )
    first.name = escapeUnit(first);
  const last = units[units.length - 1] as Unit;
  if (o.windowsNames && (last.name === '.' || last.name === ' ')) last.name = escapeUnit(last);
  // A `%` standing for itself never precedes another `%` (which would read as an escape).
  for (let k = 0; k < units.length - 1; k++)
    if ((units[k] as Unit).name === '%' && (units[k + 1] as Unit).name.startsWith('%'))
      (units[k] as Unit).name = '%%25';
  return units.map((u) => u.name).join('');
}

/** Cuts a name longer than 255 bytes (at a unit boundary) and suffixes a hash of the URI text. */
function boundName(units: readonly Unit[], name: string, text: string): string {
  if (Buffer.byteLength(name, 'utf8') <= MAX_NAME_BYTES) return name;
  const suffix = HASH_MARK + createHash('sha256').update(text).digest('hex').slice(0, 16);
  const budget = MAX_NAME_BYTES - suffix.length;
  let out = '';
  let bytes = 0;
  for (const u of units) {
    const b = Buffer.byteLength(u.name, 'utf8');
    if (bytes + b > budget) break;
    out += u.name;
    bytes += b;
  }
  return out + suffix;
}

const DEFAULT_NAMES: Required<NameOptions> = { foldCase: false, windowsNames: false };

/** Segment texts that are their own local names (no escape, decode or case question). */
const PLAIN = /^[A-Za-z0-9\-._~!$&'()+,;=@]+$/;
const PLAIN_LOWER = /^[a-z0-9\-._~!$&'()+,;=@]+$/;

/**
 * The local name of one path segment's URI text (ASCII, as WHATWG URL serializes it; the last segment may
 * carry the query and fragment). See the module documentation.
 *
 * @example
 * ```ts
 * encodeSegment('C++');        // 'C++'
 * encodeSegment('%23x');       // '#x'
 * encodeSegment('50%25%20off'); // '50% off'
 * encodeSegment('item?id=1');  // 'item%%-3Fid=1'
 * encodeSegment('C%2B%2B');    // 'C%%2B%%2B' (not the canonical form of `C++`: another name)
 * ```
 */
export function encodeSegment(text: string, options: NameOptions = DEFAULT_NAMES): string {
  if (text === '') return EMPTY_SEGMENT_NAME;
  const o = { ...DEFAULT_NAMES, ...options };
  // Fast path: most segments need no escape at all.
  if (text.length <= MAX_NAME_BYTES && (o.foldCase ? PLAIN_LOWER : PLAIN).test(text)) {
    if (!isReservedName(text.toLowerCase(), o) && !(o.windowsNames && text.endsWith('.'))) return text;
  }
  return encodeUnits(text, o);
}

function encodeUnits(text: string, o: Required<NameOptions>, extra?: ReadonlySet<string>): string {
  // URI text is ASCII (WHATWG URL escapes the rest); anything else is taken as its canonical escapes.
  const ascii = /^[\x00-\x7f]*$/.test(text) ? text : text.replace(/[^\x00-\x7f]/gu, (c) => encodeNonAscii(c));
  const units = toUnits(ascii, o, extra);
  return boundName(units, protect(units, o), text);
}

/**
 * The URI text of one local name, or undefined when the name is not one {@link encodeSegment} produces with
 * these options (a reserved name, a cut name, a file put there by hand).
 */
export function decodeSegment(name: string, options: NameOptions = DEFAULT_NAMES): string | undefined {
  if (name === EMPTY_SEGMENT_NAME) return '';
  const o = { ...DEFAULT_NAMES, ...options };
  const text = parseName(name);
  if (text === undefined || encodeSegment(text, o) !== name) return undefined;
  return text;
}

/** The URI text a name's units stand for (without checking that the name is the canonical one). */
function parseName(name: string): string | undefined {
  let out = '';
  for (let i = 0; i < name.length; ) {
    const c = name[i] as string;
    if (c === '%') {
      if (name[i + 1] !== '%') {
        out += '%25';
        i++;
      } else if (isHex(name[i + 2]) && isHex(name[i + 3])) {
        out += `%${name.slice(i + 2, i + 4)}`;
        i += 4;
      } else if (name[i + 2] === '-' && isUpperHex(name[i + 3]) && isUpperHex(name[i + 4])) {
        const code = Number.parseInt(name.slice(i + 3, i + 5), 16);
        if (code >= 0x80) return undefined;
        out += String.fromCharCode(code);
        i += 5;
      } else return undefined;
      continue;
    }
    const cp = name.codePointAt(i) as number;
    const ch = String.fromCodePoint(cp);
    out += isPathChar(ch) ? ch : cp >= 0xd800 && cp <= 0xdfff ? '%EF%BF%BD' : percentEncodeCodePoint(cp);
    i += ch.length;
  }
  return out;
}

const HOST_EXTRA = new Set(['_', '+']);

function parseUri(uri: string): URL {
  let u: URL;
  try {
    u = new URL(uri);
  } catch (e) {
    throw new ResourceSyncError('RS_UNSAFE_PATH', `not a URI: ${JSON.stringify(uri)}`, { cause: e });
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:')
    throw new ResourceSyncError('RS_UNSAFE_PATH', `unsupported URI scheme ${u.protocol}`, { url: uri });
  if (u.username !== '' || u.password !== '')
    throw new ResourceSyncError('RS_UNSAFE_PATH', 'URI with credentials', { url: uri });
  return u;
}

function effectivePort(u: URL): string {
  return u.port !== '' ? u.port : u.protocol === 'https:' ? '443' : '80';
}

/**
 * A mapper of URIs to local paths under `root`.
 *
 * @example
 * ```ts
 * const m = createPathMapper({ root: '/data/mirror', sourceUrl: 'http://example.org/.well-known/resourcesync' });
 * m.toLocalPath('http://example.org/a/C++'); // '/data/mirror/example.org/a/C++'
 * m.toLocalPath('http://example.org/a/%23x?y=1'); // '/data/mirror/example.org/a/#x%%-3Fy=1'
 * m.toUri('/data/mirror/example.org/a/#x');       // 'http://example.org/a/%23x'
 * m.toUri('/data/mirror/example.org/a/%%self');   // 'http://example.org/a'
 * ```
 */
export function createPathMapper(options: PathMapperOptions): PathMapper {
  const root = resolve(options.root);
  const rootPrefix = root.endsWith(sep) ? root : root + sep;
  const source = parseUri(options.sourceUrl);
  const layout = options.layout ?? 'host-path';
  const defaults = defaultNameOptions();
  const names: Required<NameOptions> = {
    foldCase: options.foldCase ?? defaults.foldCase,
    windowsNames: options.windowsNames ?? defaults.windowsNames,
  };
  const authorityCheck = options.authorityCheck ?? true;
  const allowed = new Set<string>();
  const allowedHosts = new Set<string>();
  allowed.add(`${source.hostname}:${effectivePort(source)}`);
  for (const h of options.allowHosts ?? []) {
    const text = h.trim().toLowerCase();
    if (text === '') continue;
    let parsed: URL;
    try {
      parsed = new URL(text.includes('://') ? text : `http://${text}`);
    } catch (e) {
      throw new ResourceSyncError('RS_CONFIG', `bad allowed host ${JSON.stringify(h)}`, { cause: e });
    }
    if (/:\d+$/.test(text.replace(/^[a-z]+:\/\//, '').replace(/\/.*$/, '')))
      allowed.add(`${parsed.hostname}:${effectivePort(parsed)}`);
    else allowedHosts.add(parsed.hostname);
  }

  function isAllowedUrl(u: URL): boolean {
    if (!authorityCheck) return true;
    return allowed.has(`${u.hostname}:${effectivePort(u)}`) || allowedHosts.has(u.hostname);
  }

  const hostDirs = new Map<string, string>();
  function hostDir(u: URL): string {
    let name = hostDirs.get(u.origin);
    if (name !== undefined) return name;
    name = computeHostDir(u);
    if (hostDirs.size < 1000) hostDirs.set(u.origin, name);
    return name;
  }

  function computeHostDir(u: URL): string {
    // `_` and `+` separate the port and the scheme: escaped inside the host name.
    let name = encodeUnits(u.hostname, names, HOST_EXTRA);
    if (u.port !== '') name += `_${u.port}`;
    if (u.protocol !== source.protocol) name = `${u.protocol.slice(0, -1)}+${name}`;
    return name;
  }

  function parseHostDir(name: string): string | undefined {
    let scheme = source.protocol.slice(0, -1);
    let rest = name;
    const plus = rest.indexOf('+');
    if (plus >= 0) {
      scheme = rest.slice(0, plus);
      if (scheme !== 'http' && scheme !== 'https') return undefined;
      rest = rest.slice(plus + 1);
    }
    let port = '';
    const us = rest.lastIndexOf('_');
    if (us >= 0) {
      port = rest.slice(us + 1);
      if (!/^\d+$/.test(port)) return undefined;
      rest = rest.slice(0, us);
    }
    const host = parseName(rest);
    if (host === undefined || host === '') return undefined;
    try {
      return new URL(`${scheme}://${host}${port === '' ? '' : `:${port}`}`).origin;
    } catch {
      return undefined;
    }
  }

  function toLocalPath(uri: string): string {
    const u = parseUri(uri);
    if (!isAllowedUrl(u))
      throw new ResourceSyncError('RS_AUTHORITY', `resource outside the Source's authority ${source.host}`, {
        url: uri,
      });
    if (layout === 'path' && u.origin !== source.origin)
      throw new ResourceSyncError('RS_AUTHORITY', `the path layout holds one origin (${source.origin})`, {
        url: uri,
      });
    const rest = u.href.slice(u.origin.length);
    const cut = rest.search(/[?#]/);
    const pathText = cut < 0 ? rest : rest.slice(0, cut);
    const tail = cut < 0 ? '' : rest.slice(cut);
    const segments = pathText.slice(1).split('/');
    segments[segments.length - 1] += tail;
    const parts = segments.map((s) => encodeSegment(s, names));
    if (layout === 'host-path') parts.unshift(hostDir(u));
    for (const p of parts)
      if (p === '' || p === '.' || p === '..' || p.includes('/') || p.includes(sep) || p.includes('\0'))
        throw new ResourceSyncError('RS_UNSAFE_PATH', `unsafe path segment ${JSON.stringify(p)}`, { url: uri });
    // Every part was checked above (no separator, no dot segment): joining is resolving.
    const local = rootPrefix + parts.join(sep);
    if (!local.startsWith(rootPrefix) || local.length === rootPrefix.length)
      throw new ResourceSyncError('RS_UNSAFE_PATH', `path ${local} leaves ${root}`, { url: uri });
    if (layout === 'path' && parts[0]?.toLowerCase() === STATE_DIR_NAME)
      throw new ResourceSyncError('RS_UNSAFE_PATH', 'path in the state directory', { url: uri });
    return local;
  }

  function toUri(localPath: string): string | undefined {
    const rel = relative(root, resolve(root, localPath));
    if (rel === '' || rel.startsWith('..') || isAbsolute(rel)) return undefined;
    const parts = rel.split(sep);
    // The file of a resource whose own path is a directory.
    if (parts[parts.length - 1] === SELF_NAME) parts.pop();
    let origin = source.origin;
    if (layout === 'host-path') {
      const first = parts.shift();
      if (first === undefined || first === STATE_DIR_NAME) return undefined;
      const o = parseHostDir(first);
      if (o === undefined) return undefined;
      origin = o;
    }
    if (parts.length === 0 || parts[0] === STATE_DIR_NAME) return undefined;
    const texts: string[] = [];
    for (const part of parts) {
      const t = part === EMPTY_SEGMENT_NAME ? '' : parseName(part);
      if (t === undefined) return undefined;
      texts.push(t);
    }
    let href: string;
    try {
      href = new URL(`${origin}/${texts.join('/')}`).href;
    } catch {
      return undefined;
    }
    // Only names the mapping produces: `a%%-3Fb/c` would read as a query in a directory's name, `A` as `a`.
    const self = relative(root, resolve(root, localPath)).endsWith(sep + SELF_NAME);
    try {
      const back = toLocalPath(href);
      return back === (self ? dirname(resolve(root, localPath)) : resolve(root, localPath)) ? href : undefined;
    } catch {
      return undefined;
    }
  }

  return { root, names, isAllowed: (uri) => isAllowedSafe(uri), toLocalPath, toUri };

  function isAllowedSafe(uri: string): boolean {
    let u: URL;
    try {
      u = parseUri(uri);
    } catch {
      return false;
    }
    return isAllowedUrl(u);
  }
}

/**
 * The start of `name` for a temporary file's name next to it: at most 200 UTF-8 bytes (cut between code
 * points), so that `.<stem>.<12 hex>.tmp` stays within the 255 bytes a name may have.
 */
export function tempStem(name: string): string {
  if (name.length <= 66) return name; // 66 code units are at most 198 bytes
  let out = '';
  let bytes = 0;
  for (const ch of name) {
    const b = Buffer.byteLength(ch, 'utf8');
    if (bytes + b > 200) break;
    out += ch;
    bytes += b;
  }
  return out;
}

/** Caches directories already verified, per root. */
const verifiedDirs = new Map<string, Set<string>>();

/**
 * Creates the missing parent directories of `target` (inside `root`) one by one, refusing to go through a
 * symbolic link (`RS_UNSAFE_PATH`) and anything outside `root`. A regular file where a directory is needed is
 * the file of a resource whose path is now also a directory (`/a` when `/a/b` arrives): it is moved to
 * `<dir>/%%self` ({@link displaceFile}). Verified directories are remembered for the process (a later symlink
 * swap by another process is not detected).
 */
export async function ensureParentDirectory(root: string, target: string): Promise<void> {
  const absRoot = resolve(root);
  const parent = dirname(resolve(target));
  let cache = verifiedDirs.get(absRoot);
  if (cache?.has(parent) === true) return;
  const rel = relative(absRoot, parent);
  if (rel.startsWith('..') || isAbsolute(rel))
    throw new ResourceSyncError('RS_UNSAFE_PATH', `${target} is outside ${absRoot}`);
  if (cache === undefined) {
    cache = new Set();
    verifiedDirs.set(absRoot, cache);
    await mkdir(absRoot, { recursive: true }).catch((e: unknown) => {
      throw new ResourceSyncError('RS_IO', `cannot create ${absRoot}: ${(e as Error).message}`, { cause: e });
    });
    // The root itself may be a link the user chose: resolve it once, and check it is a directory.
    await realpath(absRoot);
  }
  let current = absRoot;
  for (const part of rel === '' ? [] : rel.split(sep)) {
    current = resolve(current, part);
    if (cache.has(current)) continue;
    let st = await lstatOrUndefined(current);
    if (st === undefined) {
      try {
        await mkdir(current);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST')
          throw new ResourceSyncError('RS_IO', `cannot create ${current}: ${(e as Error).message}`, { cause: e });
      }
      st = await lstat(current);
    }
    if (st.isFile()) {
      await displaceFile(absRoot, current);
      st = await lstat(current);
    }
    if (st.isSymbolicLink())
      throw new ResourceSyncError('RS_UNSAFE_PATH', `${current} is a symbolic link: refusing to write through it`);
    if (!st.isDirectory())
      throw new ResourceSyncError('RS_IO', `${current} is not a directory, and one is needed there`);
    cache.add(current);
  }
}

async function lstatOrUndefined(path: string): Promise<Awaited<ReturnType<typeof lstat>> | undefined> {
  try {
    return await lstat(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT')
      throw new ResourceSyncError('RS_IO', `cannot inspect ${path}: ${(e as Error).message}`, { cause: e });
    return undefined;
  }
}

/** Directory under the state directory holding the journal of files being moved to `<dir>/%%self`. */
const MOVES_DIR = 'moving';

/** The journal entry and the temporary name of the displacement of `path` (absolute, inside `root`). */
function displacementOf(root: string, path: string): { entry: string; tmp: string; rel: string } {
  const rel = relative(root, path).split(sep).join('/');
  const id = createHash('sha256').update(rel).digest('hex').slice(0, 32);
  return {
    rel,
    entry: join(root, STATE_DIR_NAME, MOVES_DIR, `${id}.json`),
    tmp: join(dirname(path), `${MOVING_PREFIX}${id.slice(0, 16)}`),
  };
}

/** Displacements under way in this process (several children of one file may arrive at once). */
const displacing = new Map<string, Promise<void>>();

/** Options of {@link displaceFile}. */
export interface DisplaceOptions {
  /** Called after each step: a test throws from it to simulate a crash there (see {@link repairDisplacements}). */
  readonly afterStep?: (step: 'journal' | 'aside' | 'directory' | 'placed') => void;
}

/**
 * Moves the regular file at `path` (inside `root`) to `<path>/%%self`, making `path` a directory: the file of a
 * resource whose path became a directory because resources below it arrived. Steps: a journal entry under
 * `.resourcesync/moving/` (fsynced), the file renamed to a reserved temporary name next to it, the directory
 * created, the file linked to `<path>/%%self` and its temporary name removed, the journal entry removed. A
 * crash between any two steps is repaired by {@link repairDisplacements}. A newer version of the file that
 * lands meanwhile (an install of the same resource) wins over the displaced one. Concurrent calls for one path
 * share the work.
 * @throws ResourceSyncError `RS_IO`.
 */
export function displaceFile(root: string, path: string, options: DisplaceOptions = {}): Promise<void> {
  const key = resolve(path);
  const running = displacing.get(key);
  if (running !== undefined) return running;
  const work = displace(resolve(root), key, options).finally(() => displacing.delete(key));
  displacing.set(key, work);
  return work;
}

async function displace(root: string, path: string, options: DisplaceOptions): Promise<void> {
  const { entry, tmp, rel } = displacementOf(root, path);
  try {
    await writeFileAtomic(entry, JSON.stringify({ from: rel }));
    options.afterStep?.('journal');
    for (let attempt = 0; ; attempt++) {
      const st = await lstatOrUndefined(path);
      if (st?.isFile() !== true) break; // a directory already (or nothing): nothing to move
      await rename(path, tmp);
      options.afterStep?.('aside');
      try {
        await mkdir(path);
      } catch (e) {
        // A newer version of the resource landed at `path` meanwhile: the one set aside is stale.
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST' || attempt >= 3) throw e;
        await unlink(tmp);
        continue;
      }
      options.afterStep?.('directory');
      await settle(tmp, path);
      options.afterStep?.('placed');
      break;
    }
    await syncDir(dirname(path));
    await syncDir(path);
    await rm(entry, { force: true });
  } catch (e) {
    throw new ResourceSyncError(
      'RS_IO',
      `cannot move ${path} to ${join(path, SELF_NAME)} (resources below it arrived): ${(e as Error).message}`,
      { cause: e },
    );
  }
}

/** Links the displaced file `tmp` to `<dir>/%%self` unless a newer one is there already, then removes `tmp`. */
async function settle(tmp: string, dir: string): Promise<void> {
  const self = join(dir, SELF_NAME);
  try {
    await link(tmp, self);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') {
      // No hard links on this file system: a rename, unless a newer file is there.
      if ((await lstatOrUndefined(self)) === undefined) await rename(tmp, self);
    }
  }
  await rm(tmp, { force: true });
  await syncDir(dir);
}

/**
 * Finishes the displacements a crash interrupted (see {@link displaceFile}): run before a writing run, under
 * the copy's lock. Returns how many were repaired. Memory: one directory listing of journal entries.
 */
export async function repairDisplacements(root: string): Promise<number> {
  const absRoot = resolve(root);
  const journal = join(absRoot, STATE_DIR_NAME, MOVES_DIR);
  let names: string[];
  try {
    names = (await readdir(journal)).filter((n) => n.endsWith('.json'));
  } catch {
    return 0;
  }
  let repaired = 0;
  for (const name of names) {
    let from: string;
    try {
      from = (JSON.parse(await readFile(join(journal, name), 'utf8')) as { from: string }).from;
    } catch {
      await rm(join(journal, name), { force: true }); // torn before its rename: nothing was moved yet
      continue;
    }
    const path = join(absRoot, ...from.split('/'));
    const { entry, tmp } = displacementOf(absRoot, path);
    if (relative(absRoot, path).startsWith('..') || entry !== join(journal, name)) {
      await rm(join(journal, name), { force: true });
      continue;
    }
    if ((await lstatOrUndefined(tmp))?.isFile() === true) {
      const st = await lstatOrUndefined(path);
      if (st === undefined) await mkdir(path);
      if (st?.isFile() === true)
        await unlink(tmp); // a newer version landed at `path`
      else await settle(tmp, path);
      await syncDir(dirname(path));
    }
    await rm(entry, { force: true });
    repaired++;
  }
  forgetVerifiedDirectories(absRoot);
  return repaired;
}

/**
 * The file holding the resource whose local path is `path`: `path` itself, or `<path>/%%self` when `path` is
 * a directory (resources below it exist).
 */
export async function resourceFile(path: string): Promise<string> {
  try {
    return (await stat(path)).isDirectory() ? join(path, SELF_NAME) : path;
  } catch {
    return path;
  }
}

/**
 * Renames the verified temporary file `tmp` to `target`, or to `<target>/%%self` when `target` is a directory
 * (resources below it exist): the last step of every install.
 */
export function placeFileSync(tmp: string, target: string): void {
  try {
    renameSync(tmp, target);
  } catch (e) {
    if (!isDirectorySync(target)) throw e;
    renameSync(tmp, join(target, SELF_NAME));
  }
}

/** {@link placeFileSync} on the thread pool. */
export async function placeFile(tmp: string, target: string): Promise<void> {
  try {
    await rename(tmp, target);
  } catch (e) {
    if (
      !(await stat(target).then(
        (s) => s.isDirectory(),
        () => false,
      ))
    )
      throw e;
    await rename(tmp, join(target, SELF_NAME));
  }
}

function isDirectorySync(path: string): boolean {
  try {
    return lstatSync(path).isDirectory();
  } catch {
    return false;
  }
}

/** Forgets the verified directories of `root` (after a test, or when the tree may have changed). */
export function forgetVerifiedDirectories(root?: string): void {
  if (root === undefined) verifiedDirs.clear();
  else verifiedDirs.delete(resolve(root));
}
