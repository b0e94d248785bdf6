/**
 * Mapping between resource keys (relative paths such as `a b/c#d.txt`), URLs under the Source's base URL
 * (`https://example.org/base/a%20b/c%23d.txt`) and request pathnames, refusing anything that could leave the
 * collection (`..`, encoded traversal, NUL, backslashes, hidden segments).
 *
 * @module
 */
import { ResourceSyncError } from '../core/errors.js';
import { encodePathSegment } from '../core/uri-path.js';

/**
 * Parses and checks a base URL: absolute http(s), no query or fragment; a trailing `/` is added.
 * @throws ResourceSyncError `RS_CONFIG` naming the value.
 */
export function parseBaseUrl(text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new ResourceSyncError('RS_CONFIG', `base URL ${JSON.stringify(text)} is not an absolute URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new ResourceSyncError('RS_CONFIG', `base URL ${JSON.stringify(text)} is not http(s)`);
  if (url.search !== '' || url.hash !== '' || url.username !== '' || url.password !== '')
    throw new ResourceSyncError(
      'RS_CONFIG',
      `base URL ${JSON.stringify(text)} must not have a query, fragment or credentials`,
    );
  if (!url.pathname.endsWith('/')) url.pathname += '/';
  return url;
}

/**
 * Percent-encodes each segment of a `/`-separated relative path the canonical way ({@link encodePathSegment}):
 * characters RFC 3986 allows in a segment (`C++`, `a=b;c`, `x@y`) stay as they are, others (`#`, `?`, `%`,
 * space, non-ASCII) are escaped, so that a Destination's file names equal the collection's (docs/file-names.md).
 */
export function encodePath(relPath: string): string {
  return relPath.split('/').map(encodePathSegment).join('/');
}

/** The absolute URL of a resource key: absolute http(s) URIs are kept, relative paths resolved under the base. */
export function resourceUrl(baseUrl: URL, key: string): string {
  if (/^https?:\/\//i.test(key)) return key;
  return baseUrl.href + encodePath(key);
}

/** True when a relative path is safe: non-empty segments, no `.`/`..`, no NUL, no backslash. */
export function isSafeRelativePath(relPath: string, allowHidden = false): boolean {
  if (relPath === '' || relPath.startsWith('/')) return false;
  for (const seg of relPath.split('/')) {
    if (seg === '' || seg === '.' || seg === '..') return false;
    if (!allowHidden && seg.startsWith('.')) return false;
    if (seg.includes('\0') || seg.includes('\\')) return false;
  }
  return true;
}

/**
 * The relative path (decoded) a request pathname names under the base path, or undefined when it is outside
 * the base, badly encoded, or unsafe (see {@link isSafeRelativePath}). `allowHidden` lets generated documents
 * under `.well-known/` through.
 */
export function requestRelativePath(baseUrl: URL, pathname: string, allowHidden = false): string | undefined {
  const basePath = baseUrl.pathname;
  // Compare on the raw form: the base path is itself percent-encoded by URL.
  if (!pathname.startsWith(basePath)) return undefined;
  const rest = pathname.slice(basePath.length);
  // Without percent-encoding every segment decodes to itself (and none can hide a slash).
  if (!rest.includes('%')) return isSafeRelativePath(rest, allowHidden) ? rest : undefined;
  const segments: string[] = [];
  for (const raw of rest.split('/')) {
    let seg: string;
    try {
      seg = decodeURIComponent(raw);
    } catch {
      return undefined;
    }
    if (seg.includes('/')) return undefined; // an encoded slash would change the structure
    segments.push(seg);
  }
  const rel = segments.join('/');
  return isSafeRelativePath(rel, allowHidden) ? rel : undefined;
}
