/**
 * Injection of the discovery link `<link rel="resourcesync" href="...">` (ANSI/NISO Z39.99-2017 §6.3.3,
 * Example 9) into the `<head>` of HTML resources, decided from a bounded prefix of the file so that the
 * length of the response is known before the body is streamed.
 *
 * Pure functions, no I/O. Memory: the prefix given (the server reads at most {@link HTML_PREFIX_BYTES}).
 *
 * @module
 */

/** How many bytes of an HTML file the server reads to find where to insert the link. */
export const HTML_PREFIX_BYTES = 64 * 1024;

/** Media types that get the link: HTML and XHTML. */
export function isHtml(contentType: string): boolean {
  const base = contentType.split(';')[0]!.trim().toLowerCase();
  return base === 'text/html' || base === 'application/xhtml+xml';
}

/** The `<link>` element (self-closed, so that XHTML stays well-formed), with the URL escaped for an attribute. */
export function resourceSyncLinkElement(href: string): string {
  const escaped = href.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  return `<link rel="resourcesync" href="${escaped}"/>`;
}

/**
 * Byte offset in `prefix` right after the opening `<head ...>` tag (or, when the page has no `<head>` tag
 * before its content, after `<html ...>`; an HTML parser puts a `<link>` found there in the head). Undefined
 * when no injection should happen: neither tag in the prefix, a UTF-16 page (BOM), or a page that already
 * declares `rel="resourcesync"` in the prefix. Comments are skipped; `<header>` is not `<head>`.
 *
 * @example
 * ```ts
 * findHeadInsertion(new TextEncoder().encode('<html><head><title>x</title>')) // 12
 * ```
 */
export function findHeadInsertion(prefix: Uint8Array): number | undefined {
  if (prefix.length >= 2 && ((prefix[0] === 0xfe && prefix[1] === 0xff) || (prefix[0] === 0xff && prefix[1] === 0xfe)))
    return undefined;
  // latin1 keeps one char per byte, so string offsets are byte offsets; tags are ASCII.
  const text = Buffer.from(prefix.buffer, prefix.byteOffset, prefix.length).toString('latin1');
  const lower = text.toLowerCase();
  if (/rel\s*=\s*["']?resourcesync["'\s/>]/.test(lower)) return undefined;
  let htmlEnd: number | undefined;
  let i = 0;
  for (;;) {
    const lt = lower.indexOf('<', i);
    if (lt < 0) return htmlEnd;
    if (lower.startsWith('<!--', lt)) {
      const endComment = lower.indexOf('-->', lt + 4);
      if (endComment < 0) return htmlEnd;
      i = endComment + 3;
      continue;
    }
    const name = /^<([a-z][a-z0-9-]*)/.exec(lower.slice(lt, lt + 12))?.[1];
    if (name === 'head' || name === 'html') {
      const end = findTagEnd(lower, lt + 1 + name.length);
      if (end === undefined) return htmlEnd;
      if (name === 'head') return end;
      htmlEnd = end;
      i = end;
      continue;
    }
    if (name === 'body') return htmlEnd;
    // Any other content element before <head> means the head was implied; stop at <html> if we saw it.
    if (
      name !== undefined &&
      name !== 'meta' &&
      name !== 'title' &&
      name !== 'link' &&
      name !== 'base' &&
      name !== 'script' &&
      name !== 'style' &&
      name !== 'noscript'
    ) {
      return htmlEnd;
    }
    i = lt + 1;
  }
}

/** Index just after the `>` closing a start tag whose attributes begin at `from` (quotes honoured). */
function findTagEnd(s: string, from: number): number | undefined {
  let quote: string | undefined;
  for (let k = from; k < s.length; k++) {
    const c = s[k];
    if (quote !== undefined) {
      if (c === quote) quote = undefined;
    } else if (c === '"' || c === "'") quote = c;
    else if (c === '>') return k + 1;
  }
  return undefined;
}

/** A distinct ETag for the representation with the link injected: a suffix inside the quotes, `W/` kept. */
export function deriveEtag(etag: string, suffix: string): string {
  const close = etag.lastIndexOf('"');
  if (close <= 0) return `"${etag}-${suffix}"`;
  return `${etag.slice(0, close)}-${suffix}${etag.slice(close)}`;
}

/** Short, stable tag of a string (FNV-1a 32-bit, hex) used in derived ETags so that a new link URL changes them. */
export function shortTag(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h.toString(16).padStart(8, '0');
}
