/**
 * The resource model of the OAI-PMH bridge: what each harvested record becomes in the ResourceSync Source.
 *
 * - One resource per item and metadata format: `<base>items/<identifier>/<metadataPrefix>.xml`, e.g.
 *   `http://localhost:8080/items/oai:repo.example.org:123/oai_dc.xml` for `oai:repo.example.org:123` in
 *   `oai_dc`. The identifier is one path segment, with `%`, `/` and `\` written `%25`, `%2F` and `%5C` and a
 *   leading `.` written `%2E` (so every identifier has its own segment, and none is a hidden or dot segment),
 *   then percent-encoded once more in the URL like every path segment. An item's formats sit side by side in
 *   its directory, so a Destination's copy has one directory per item and no file is also a directory.
 * - The bytes served are the metadata record (the element inside `<metadata>`) as a standalone UTF-8 XML
 *   document (see `response.ts` for the exact serialization), `Content-Type: application/xml`; `length` and the
 *   md5 / sha-256 `hash` are those of these bytes.
 * - `lastmod` is the record's OAI datestamp (a day-granularity datestamp is its first instant, UTC). A record
 *   seen again with the same bytes is not a change; if only its datestamp moved (the provider touched it), the
 *   inventory's `lastmod` follows without a Change List entry.
 * - Deleted records (`status="deleted"`) become `deleted` changes of that format's resource.
 *
 * @module
 */
import { ResourceSyncError } from '../../core/errors.js';

/** Path segment under the base URL holding the items. */
export const ITEMS_DIR = 'items';

/** Media type of every resource of the bridge. */
export const RECORD_MEDIA_TYPE = 'application/xml';

/** The identifier as one safe path segment (see the module comment). */
export function identifierSegment(identifier: string): string {
  if (identifier === '') throw new ResourceSyncError('RS_OAI_PMH', 'empty OAI identifier');
  let s = identifier.replace(/[%/\\]/g, (c) => (c === '%' ? '%25' : c === '/' ? '%2F' : '%5C'));
  if (s.startsWith('.')) s = `%2E${s.slice(1)}`;
  return s;
}

/** The store key (relative path) of an item's record in a format. */
export function recordKey(identifier: string, metadataPrefix: string): string {
  return `${ITEMS_DIR}/${identifierSegment(identifier)}/${metadataPrefix}.xml`;
}

/** The identifier and format of a store key, or undefined when the key is not a record's. */
export function parseRecordKey(key: string): { identifier: string; metadataPrefix: string } | undefined {
  const m = /^items\/([^/]+)\/([^/]+)\.xml$/.exec(key);
  if (m === null) return undefined;
  try {
    return { identifier: decodeURIComponent(m[1]!), metadataPrefix: m[2]! };
  } catch {
    return undefined;
  }
}
