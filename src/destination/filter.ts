/**
 * `--include` / `--exclude`: which resources of a Source a copy holds. One filter, applied alike by baseline
 * (list and dump), incremental (Change Lists and Change Dumps), audit and follow: a resource the filter
 * rejects is neither fetched, nor deleted, nor retired, nor reported missing or extra.
 *
 * Patterns:
 * - `re:<regex>`: a JavaScript regular expression searched in the whole URI (as the reference client's
 *   `--exclude`), e.g. `re:\.pdf$` or `re:^https://example\.org/private/`.
 * - anything else is a glob on the URI's path, percent-decoded (`/docs/C++/a b.txt`):
 *   `*` any characters but `/`, `**` any characters (`/` included), `?` one character but `/`, `[abc]` /
 *   `[!abc]` one of (not one of) the characters; other characters stand for themselves.
 *   A glob without `/` matches any one segment (`*.pdf`, `drafts`); a glob with `/` is anchored at the
 *   path's root (`/docs/*.xml`, `docs/**` alike). A glob that matches a directory matches everything below
 *   it (`/private` covers `/private/a/b`); a trailing `/` matches only below (`/private/`).
 *
 * A URI is kept when it matches some `include` pattern (or none are given) and no `exclude` pattern: exclude wins.
 *
 * @module
 */
import { ResourceSyncError } from '../core/errors.js';

/** Patterns of a {@link UriFilter}. */
export interface UriFilterOptions {
  readonly include?: readonly string[];
  readonly exclude?: readonly string[];
}

/** Decides which resources a copy holds. Memory: the compiled patterns. */
export interface UriFilter {
  /** True when the copy holds `uri` (always true for a filter without patterns). */
  accepts(uri: string): boolean;
  /** True when some pattern was given. */
  readonly active: boolean;
  /** The patterns, for messages: `--include a --exclude b`. */
  readonly description: string;
}

type Matcher = (uri: string, path: string) => boolean;

/**
 * Compiles the patterns.
 * @throws ResourceSyncError `RS_CONFIG` naming the pattern when a regex or glob is malformed or empty.
 * @example
 * ```ts
 * const f = createUriFilter({ exclude: ['*.tmp', 're:/private/'] });
 * f.accepts('http://example.org/docs/a.xml'); // true
 * ```
 */
export function createUriFilter(options: UriFilterOptions = {}): UriFilter {
  const include = (options.include ?? []).map((p) => compilePattern(p, '--include'));
  const exclude = (options.exclude ?? []).map((p) => compilePattern(p, '--exclude'));
  const description = [
    ...(options.include ?? []).map((p) => `--include ${p}`),
    ...(options.exclude ?? []).map((p) => `--exclude ${p}`),
  ].join(' ');
  if (include.length === 0 && exclude.length === 0) return ACCEPT_ALL;
  return {
    active: true,
    description,
    accepts(uri: string): boolean {
      const path = uriPath(uri);
      if (include.length > 0 && !include.some((m) => m(uri, path))) return false;
      return !exclude.some((m) => m(uri, path));
    },
  };
}

/** The filter that keeps everything. */
export const ACCEPT_ALL: UriFilter = { active: false, description: '', accepts: () => true };

/** The percent-decoded path of a URI (its raw path where decoding fails; the text itself when not a URL). */
export function uriPath(uri: string): string {
  let path: string;
  try {
    path = new URL(uri).pathname;
  } catch {
    path = uri;
  }
  try {
    return decodeURIComponent(path);
  } catch {
    return path;
  }
}

function compilePattern(pattern: string, flag: string): Matcher {
  if (pattern.startsWith('re:')) {
    const source = pattern.slice(3);
    if (source === '') throw new ResourceSyncError('RS_CONFIG', `${flag} ${pattern}: empty regular expression`);
    let re: RegExp;
    try {
      re = new RegExp(source, 'u');
    } catch (e) {
      throw new ResourceSyncError('RS_CONFIG', `${flag} ${pattern}: ${(e as Error).message}`, { cause: e });
    }
    return (uri) => re.test(uri);
  }
  if (pattern.trim() === '' || pattern === '/')
    throw new ResourceSyncError('RS_CONFIG', `${flag} ${JSON.stringify(pattern)}: empty pattern`);
  const re = globToRegExp(pattern, flag);
  return (_uri, path) => re.test(path);
}

/** A glob (see the module comment) as a regular expression over a path that starts with `/`. */
export function globToRegExp(glob: string, flag = 'pattern'): RegExp {
  const belowOnly = glob.endsWith('/');
  const body = belowOnly ? glob.slice(0, -1) : glob;
  const anchored = body.includes('/') || belowOnly;
  const core = body.replace(/^\/+/, '');
  let re = '';
  for (let i = 0; i < core.length; i++) {
    const c = core[i] as string;
    if (c === '*') {
      if (core[i + 1] === '*') {
        i++;
        // `**/` also matches no directory at all.
        if (core[i + 1] === '/') {
          i++;
          re += '(?:.*/)?';
        } else re += '.*';
      } else re += '[^/]*';
    } else if (c === '?') re += '[^/]';
    else if (c === '[') {
      const end = core.indexOf(']', i + 2);
      if (end < 0) throw new ResourceSyncError('RS_CONFIG', `${flag} ${glob}: "[" without "]"`);
      let set = core.slice(i + 1, end);
      const negate = set.startsWith('!') || set.startsWith('^');
      if (negate) set = set.slice(1);
      re += `[${negate ? '^/' : ''}${set.replace(/[\\\]^]/g, '\\$&')}]`;
      i = end;
    } else re += c.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  }
  const tail = belowOnly ? '/.*$' : '(?:/.*)?$';
  return new RegExp(anchored ? `^/${re}${tail}` : `(?:^|/)${re}${tail}`, 'su');
}
