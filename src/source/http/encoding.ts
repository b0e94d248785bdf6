/**
 * Content negotiation for `Accept-Encoding` (RFC 9110 §12.5.3), limited to what the Source offers: gzip or
 * identity. Pure function, no I/O; memory O(header length).
 *
 * @module
 */

/**
 * True when the client accepts gzip: `gzip` or `x-gzip` listed with q > 0, or `*` with q > 0 and gzip not
 * listed explicitly. Codings are case-insensitive; an entry without q has q=1, one with an unparsable q has
 * q=0 (refused: the safe reading).
 *
 * @example
 * ```ts
 * acceptsGzip('gzip, deflate, br') // true
 * acceptsGzip('gzip;q=0, *')       // false
 * acceptsGzip(undefined)           // false
 * ```
 */
export function acceptsGzip(header: string | undefined): boolean {
  if (header === undefined) return false;
  let gzipQ: number | undefined;
  let starQ: number | undefined;
  for (const part of header.split(',')) {
    const [rawName, ...params] = part.split(';');
    const name = (rawName ?? '').trim().toLowerCase();
    if (name === '') continue;
    let q = 1;
    for (const p of params) {
      const [k, v] = p.split('=').map((x) => x.trim());
      if (k?.toLowerCase() === 'q') {
        q = v !== undefined && /^(?:0(?:\.\d{0,3})?|1(?:\.0{0,3})?)$/.test(v) ? Number(v) : 0;
      }
    }
    if (name === 'gzip' || name === 'x-gzip') gzipQ = Math.max(gzipQ ?? 0, q);
    else if (name === '*') starQ = q;
  }
  if (gzipQ !== undefined) return gzipQ > 0;
  return starQ !== undefined && starQ > 0;
}

/** True for media types the server compresses on the fly: XML documents (`application/xml`, `text/xml`, `+xml`). */
export function isCompressibleXml(contentType: string): boolean {
  const base = contentType.split(';')[0]!.trim().toLowerCase();
  return base === 'application/xml' || base === 'text/xml' || base.endsWith('+xml');
}
