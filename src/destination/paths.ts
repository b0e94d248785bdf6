/**
 * Mapping of resource URIs to local paths under a Destination's root, safe and reversible.
 *
 * Layouts: `host-path` (default) puts `http://example.org:8080/a/b?x=1` at `<root>/example.org_8080/a/b%3Fx=1`
 * (the port only when not the scheme's default; a `https+` prefix when the scheme differs from the Source's);
 * `path` (one host) at `<root>/a/b%3Fx=1`.
 *
 * Each local name is the URI's text of that segment with these rules, all reversible:
 * - `%XX` sequences that encode a space or a printable non-ASCII character (UTF-8, upper-case hex, as WHATWG
 *   URL serializes them) are decoded, so names are readable (`caf%C3%A9` -> `café`);
 * - every other character is kept, except `%` `/` `\` `:` `*` `?` `#` `"` `<` `>` `|` and controls, which are
 *   written `%XX` (so a literal `%7E` in a URI is `%257E` on disk, and `?query` becomes `%3Fquery`);
 * - an empty segment (trailing slash) is the file `index`; a real segment `index` is written `%69ndex`;
 *   likewise `.`/`..`, `.resourcesync` (the state directory), Windows device names, names starting with `.`
 *   and ending with `.tmp` (temporary files) and a trailing `.` or space get their first (last) character escaped;
 * - with `foldCase` (case-insensitive file systems), upper-case ASCII letters are escaped (`A` -> `%41`);
 * - a name longer than 255 UTF-8 bytes is cut and suffixed `%%<16 hex of sha-256>`: the one case that
 *   {@link PathMapper.toUri} cannot reverse (it returns undefined; the state database keeps the mapping).
 *
 * Authority check ({@link PathMapper.isAllowed}): the Sitemap protocol's rule that a Sitemap lists URLs of its
 * own host (sitemaps.org, "Sitemap file location"), compared on scheme-default-aware host and port. Its further
 * rule that URLs sit under the Sitemap's directory is not applied: ResourceSync documents routinely live in a
 * set's directory while the resources do not (Examples 13-14: `/dataset1/resourcelist.xml` lists `/res1`).
 * `allowHosts` adds hosts (`host` or `host:port`); `authorityCheck: false` accepts every host.
 *
 * A file and a directory cannot share a name: `http://h/a` and `http://h/a/b` cannot both be stored; the
 * second install fails with RS_IO. Directories are created by {@link ensureParentDirectory}, which refuses
 * symbolic links on the way (`RS_UNSAFE_PATH`).
 *
 * @module
 */
import { createHash } from 'node:crypto';
import { lstat, mkdir, realpath } from 'node:fs/promises';
import { dirname, isAbsolute, relative, resolve, sep } from 'node:path';
import { ResourceSyncError } from '../core/errors.js';

/** Name of the state directory under a Destination's root; never a mapping target. */
export const STATE_DIR_NAME = '.resourcesync';
/** Longest local name in bytes (most file systems). */
const MAX_NAME_BYTES = 255;
const HASH_MARK = '%%';

/** Maps URIs to local paths and back, and checks the Sitemap authority rule. */
export interface PathMapper {
  /** The absolute local path of `uri`, inside the root. @throws RS_UNSAFE_PATH, RS_AUTHORITY. */
  toLocalPath(uri: string): string;
  /** The URI a local path stands for, or undefined for paths this mapper does not produce. */
  toUri(localPath: string): string | undefined;
  /** Authority check: true when `uri` is under the Source's host and port (or an allowed host). */
  isAllowed(uri: string): boolean;
  /** The absolute root. */
  readonly root: string;
}

/** Options of {@link createPathMapper}. */
export interface PathMapperOptions {
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
  /**
   * Escape upper-case ASCII letters, for case-insensitive file systems where `A.txt` and `a.txt` collide
   * (default: true on macOS and Windows, false elsewhere).
   */
  readonly foldCase?: boolean;
}

const LOCAL_ESCAPE = new Set([...'%/\\:*?#"<>|']);
const WINDOWS_DEVICES = new Set(['con', 'prn', 'aux', 'nul', 'conin$', 'conout$']);
for (let i = 1; i <= 9; i++) {
  WINDOWS_DEVICES.add(`com${i}`);
  WINDOWS_DEVICES.add(`lpt${i}`);
}

function hex2(code: number): string {
  return `%${code.toString(16).toUpperCase().padStart(2, '0')}`;
}

function isHex(c: string | undefined): boolean {
  return c !== undefined && /^[0-9A-Fa-f]$/.test(c);
}

/** A code point we decode from `%XX..` to make names readable: space, or printable non-ASCII. */
function isDecodable(cp: number): boolean {
  if (cp === 0x20) return true;
  if (cp < 0xa0) return false;
  if (cp >= 0x2000 && cp <= 0x206f) return false; // spaces, zero-width, bidi controls, separators
  if (cp === 0xfeff || (cp >= 0xfff0 && cp <= 0xffff)) return false;
  if (cp >= 0xe000 && cp <= 0xf8ff) return false; // private use
  return true;
}

/** `%XX` upper-case UTF-8 encoding of one code point. */
function percentEncode(ch: string): string {
  let out = '';
  for (const b of Buffer.from(ch, 'utf8')) out += hex2(b);
  return out;
}

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/** Tries to decode one character from `%XX` groups at `i` of `text`; returns it and the length consumed. */
function decodeAt(text: string, i: number): [string, number] | undefined {
  if (!isHex(text[i + 1]) || !isHex(text[i + 2])) return undefined;
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
  const bytes: number[] = [lead];
  for (let k = 1; k < n; k++) {
    const at = i + 3 * k;
    if (text[at] !== '%' || !isHex(text[at + 1]) || !isHex(text[at + 2])) return undefined;
    bytes.push(Number.parseInt(text.slice(at + 1, at + 3), 16));
  }
  // Canonical form only (upper-case hex, as WHATWG URL writes it), so that re-encoding gives the same text.
  for (let k = 0; k < 3 * n; k++) {
    const c = text.charCodeAt(i + k);
    if (c >= 0x61 && c <= 0x66) return undefined;
  }
  let ch: string;
  if (n === 1) ch = String.fromCharCode(lead);
  else {
    try {
      ch = UTF8.decode(Uint8Array.from(bytes)); // fatal: refuses overlong and invalid sequences
    } catch {
      return undefined;
    }
  }
  const cp = ch.codePointAt(0);
  if (cp === undefined || !isDecodable(cp)) return undefined;
  return [ch, 3 * n];
}

/**
 * Encodes the URI text of one segment (ASCII, as WHATWG URL serializes it) as a local file name, as a list
 * of units (a literal character or a `%XX` escape) so that the first and last can be escaped afterwards.
 */
function encodeUnits(text: string, foldCase: boolean, extra?: ReadonlySet<string>): string[] {
  const units: string[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i] as string;
    if (c === '%') {
      const decoded = decodeAt(text, i);
      if (decoded !== undefined) {
        units.push(decoded[0]);
        i += decoded[1];
        continue;
      }
    }
    const code = c.charCodeAt(0);
    if (
      code < 0x20 ||
      code === 0x7f ||
      LOCAL_ESCAPE.has(c) ||
      extra?.has(c) === true ||
      (foldCase && code >= 65 && code <= 90)
    )
      units.push(hex2(code));
    else units.push(c);
    i++;
  }
  return units;
}

function escapeUnit(unit: string): string {
  return unit.length === 1 && unit.charCodeAt(0) < 0x80 ? hex2(unit.charCodeAt(0)) : unit;
}

/** Names (lower-cased) whose first character must be escaped: reserved, special or colliding. */
function isReservedName(lower: string): boolean {
  if (lower.charCodeAt(0) === 0x2e /* . */)
    return lower === '.' || lower === '..' || lower === STATE_DIR_NAME || lower.endsWith('.tmp');
  if (lower === 'index') return true;
  const dot = lower.indexOf('.');
  const baseLength = dot < 0 ? lower.length : dot;
  return baseLength >= 3 && baseLength <= 7 && WINDOWS_DEVICES.has(dot < 0 ? lower : lower.slice(0, dot));
}

/** Escapes the first unit of names that would be reserved, special or colliding. */
function protectName(units: string[]): string {
  if (units.length === 0) return 'index';
  const lower = units.join('').toLowerCase();
  if (isReservedName(lower)) units[0] = escapeUnit(units[0] as string);
  const last = units.length - 1;
  if (units[last] === '.' || units[last] === ' ') units[last] = escapeUnit(units[last] as string);
  return units.join('');
}

/** Cuts a name longer than 255 bytes and suffixes a hash of the full text. */
function boundName(name: string, text: string): string {
  if (Buffer.byteLength(name, 'utf8') <= MAX_NAME_BYTES) return name;
  const suffix = HASH_MARK + createHash('sha256').update(text).digest('hex').slice(0, 16);
  const budget = MAX_NAME_BYTES - suffix.length;
  let out = '';
  let bytes = 0;
  // Cut at a unit boundary: never inside a %XX escape or a surrogate pair.
  for (let i = 0; i < name.length; ) {
    let unit: string;
    if (name[i] === '%') unit = name.slice(i, i + 3);
    else {
      const cp = name.codePointAt(i) as number;
      unit = String.fromCodePoint(cp);
    }
    const b = Buffer.byteLength(unit, 'utf8');
    if (bytes + b > budget) break;
    out += unit;
    bytes += b;
    i += unit.length;
  }
  return out + suffix;
}

/** The local name of one segment's URI text. */
export function encodeSegment(text: string, foldCase = false): string {
  if (text === '') return 'index';
  // Fast path: most segments need no escape at all.
  if (text.length <= MAX_NAME_BYTES && (foldCase ? PLAIN_LOWER : PLAIN).test(text)) {
    const lower = text.toLowerCase();
    if (!isReservedName(lower) && !text.endsWith('.')) return text;
  }
  return boundName(protectName(encodeUnits(text, foldCase)), text);
}

/** Segment texts that are their own local names (no escape, decode or case question). */
const PLAIN = /^[A-Za-z0-9\-._~!$&'()+,;=@]+$/;
const PLAIN_LOWER = /^[a-z0-9\-._~!$&'()+,;=@]+$/;

/** The URI text of one local name, or undefined when the name is not one {@link encodeSegment} produces. */
export function decodeSegment(name: string): string | undefined {
  if (name === 'index') return '';
  if (name.includes(HASH_MARK)) return undefined;
  let out = '';
  for (let i = 0; i < name.length; ) {
    const c = name[i] as string;
    if (c === '%') {
      if (!isHex(name[i + 1]) || !isHex(name[i + 2])) return undefined;
      const code = Number.parseInt(name.slice(i + 1, i + 3), 16);
      if (code >= 0x80) return undefined;
      out += String.fromCharCode(code);
      i += 3;
      continue;
    }
    const cp = name.codePointAt(i) as number;
    const ch = String.fromCodePoint(cp);
    if (cp < 0x20 || cp === 0x7f || LOCAL_ESCAPE.has(ch)) return undefined;
    out += cp === 0x20 || cp >= 0x80 ? percentEncode(ch) : ch;
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
 * m.toLocalPath('http://example.org/a/b.html?x=1'); // '/data/mirror/example.org/a/b.html%3Fx=1'
 * m.toUri('/data/mirror/example.org/a/');            // undefined (a directory with a trailing separator)
 * ```
 */
export function createPathMapper(options: PathMapperOptions): PathMapper {
  const root = resolve(options.root);
  const rootPrefix = root.endsWith(sep) ? root : root + sep;
  const source = parseUri(options.sourceUrl);
  const layout = options.layout ?? 'host-path';
  const foldCase = options.foldCase ?? (process.platform === 'darwin' || process.platform === 'win32');
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
    let name = protectName(encodeUnits(u.hostname, false, HOST_EXTRA));
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
    const host = decodeSegment(rest);
    if (host === undefined || host === '') return undefined;
    return `${scheme}://${host}${port === '' ? '' : `:${port}`}`;
  }

  return {
    root,
    isAllowed(uri: string): boolean {
      let u: URL;
      try {
        u = parseUri(uri);
      } catch {
        return false;
      }
      return isAllowedUrl(u);
    },
    toLocalPath(uri: string): string {
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
      const parts = segments.map((s) => encodeSegment(s, foldCase));
      if (layout === 'host-path') parts.unshift(hostDir(u));
      for (const p of parts)
        if (p === '' || p === '.' || p === '..' || p.includes('/') || p.includes('\\') || p.includes('\0'))
          throw new ResourceSyncError('RS_UNSAFE_PATH', `unsafe path segment ${JSON.stringify(p)}`, { url: uri });
      // Every part was checked above (no separator, no dot segment): joining is resolving.
      const local = rootPrefix + parts.join(sep);
      if (!local.startsWith(rootPrefix) || local.length === rootPrefix.length)
        throw new ResourceSyncError('RS_UNSAFE_PATH', `path ${local} leaves ${root}`, { url: uri });
      if (layout === 'path' && parts[0] === STATE_DIR_NAME)
        throw new ResourceSyncError('RS_UNSAFE_PATH', 'path in the state directory', { url: uri });
      return local;
    },
    toUri(localPath: string): string | undefined {
      const rel = relative(root, resolve(root, localPath));
      if (rel === '' || rel.startsWith('..') || isAbsolute(rel)) return undefined;
      const parts = rel.split(sep);
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
      for (let i = 0; i < parts.length; i++) {
        const t = decodeSegment(parts[i] as string);
        if (t === undefined) return undefined;
        // A query or fragment may only be in the last segment.
        if (i < parts.length - 1 && /[?#/]/.test(t)) return undefined;
        if (i === parts.length - 1 && (/^[^?#]*/.exec(t)?.[0] ?? '').includes('/')) return undefined;
        texts.push(t);
      }
      try {
        return new URL(`${origin}/${texts.join('/')}`).href;
      } catch {
        return undefined;
      }
    },
  };
}

/** Caches directories already verified, per root. */
const verifiedDirs = new Map<string, Set<string>>();

/**
 * Creates the missing parent directories of `target` (inside `root`) one by one, refusing to go through a
 * symbolic link or a non-directory (`RS_UNSAFE_PATH`) and anything outside `root`. Verified directories are
 * remembered for the process (a later symlink swap by another process is not detected).
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
    let st: Awaited<ReturnType<typeof lstat>> | undefined;
    try {
      st = await lstat(current);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT')
        throw new ResourceSyncError('RS_IO', `cannot inspect ${current}: ${(e as Error).message}`, { cause: e });
    }
    if (st === undefined) {
      try {
        await mkdir(current);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST')
          throw new ResourceSyncError('RS_IO', `cannot create ${current}: ${(e as Error).message}`, { cause: e });
      }
      st = await lstat(current);
    }
    if (st.isSymbolicLink())
      throw new ResourceSyncError('RS_UNSAFE_PATH', `${current} is a symbolic link: refusing to write through it`);
    if (!st.isDirectory())
      throw new ResourceSyncError('RS_IO', `${current} is a file where a directory is needed (a URI and its prefix)`);
    cache.add(current);
  }
}

/** Forgets the verified directories of `root` (after a test, or when the tree may have changed). */
export function forgetVerifiedDirectories(root?: string): void {
  if (root === undefined) verifiedDirs.clear();
  else verifiedDirs.delete(resolve(root));
}
