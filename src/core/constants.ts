/**
 * Constants of the ResourceSync framework (ANSI/NISO Z39.99-2017) and the Sitemap protocol it builds on.
 * Every value cites the section of the standard ("§" refers to Z39.99-2017 unless another document is named;
 * "N-§" refers to the ResourceSync Notification draft 0.8).
 *
 * @module
 */

/** Sitemap protocol namespace (§4, §7; sitemaps.org 0.9). */
export const SITEMAP_NS = 'http://www.sitemaps.org/schemas/sitemap/0.9';
/** ResourceSync namespace for `rs:md` and `rs:ln` (§4, §7). */
export const RS_NS = 'http://www.openarchives.org/rs/terms/';
/** The XML namespace, bound to the `xml` prefix by definition (Namespaces in XML 1.0 §3). */
export const XML_NS = 'http://www.w3.org/XML/1998/namespace';
/** The namespace of namespace declarations (`xmlns`, `xmlns:p`). */
export const XMLNS_NS = 'http://www.w3.org/2000/xmlns/';

/** Maximum number of `<url>` or `<sitemap>` entries in one document (§6.1, Sitemap protocol). */
export const MAX_ENTRIES = 50_000;
/** Maximum size of one uncompressed document, in bytes (§6.1, Sitemap protocol: 50 MiB). */
export const MAX_DOCUMENT_BYTES = 52_428_800;

/** Lowest and highest values of the `pri` attribute of `rs:ln` (§7, Table 3). */
export const PRI_MIN = 1;
export const PRI_MAX = 999_999;

/** Well-known URI path of the Source Description (§6.3.2, RFC 8615 / RFC 5785). */
export const WELL_KNOWN_PATH = '/.well-known/resourcesync';

/** Link relation type used for discovery (§6.3.3, §6.3.4) and capability document navigation. */
export const REL_RESOURCESYNC = 'resourcesync';

/**
 * The values of the `capability` attribute (§6.1, Table 1, §7; N-§2 for the notification channels).
 * The value names the kind of document, the root element tells a document from its index (§7, Table 2).
 */
export const CAPABILITIES = [
  'description',
  'capabilitylist',
  'resourcelist',
  'resourcedump',
  'resourcedump-manifest',
  'changelist',
  'changedump',
  'changedump-manifest',
  'change-notification',
  'framework-notification',
] as const;
export type CapabilityName = (typeof CAPABILITIES)[number];

/** The values of the `change` attribute (§7, §12.1: created, updated, deleted). */
export const CHANGE_TYPES = ['created', 'updated', 'deleted'] as const;
export type ChangeType = (typeof CHANGE_TYPES)[number];

/** Capability documents a framework notification can name (N-§2.1, Table 2.1). */
export type FrameworkCapability =
  | 'resourcelist'
  | 'resourcedump'
  | 'changelist'
  | 'changedump'
  | 'capabilitylist'
  | 'description';

/**
 * The change types Table 2.1 (N-§2.1) allows per capability document. Resource Lists and Resource Dumps are
 * snapshots: a new one is *created*; Change Lists and Change Dumps are created and updated; Capability Lists and
 * the Source Description can also be deleted.
 */
export const FRAMEWORK_CHANGE_TYPES: Readonly<Record<FrameworkCapability, readonly ChangeType[]>> = {
  resourcelist: ['created'],
  resourcedump: ['created'],
  changelist: ['created', 'updated'],
  changedump: ['created', 'updated'],
  capabilitylist: ['created', 'updated', 'deleted'],
  description: ['created', 'updated', 'deleted'],
};

/** The change types Table 2.1 allows for `capability` (a name from a document), or undefined when it is none. */
export function frameworkChangeTypes(capability: string): readonly ChangeType[] | undefined {
  return Object.hasOwn(FRAMEWORK_CHANGE_TYPES, capability)
    ? FRAMEWORK_CHANGE_TYPES[capability as FrameworkCapability]
    : undefined;
}

/** Hash algorithms named by the standard (§7, Table 3: md5, sha-1, sha-256) and their hex digest lengths. */
export const HASH_ALGORITHMS = { md5: 32, 'sha-1': 40, 'sha-256': 64 } as const;
export type HashAlgorithm = keyof typeof HASH_ALGORITHMS;

/** Relation types the standard uses by name (§7, §14). Any other registered or URI relation is allowed. */
export const RELATIONS = {
  up: 'up',
  index: 'index',
  describedby: 'describedby',
  contents: 'contents',
  duplicate: 'duplicate',
  alternate: 'alternate',
  canonical: 'canonical',
  patch: 'http://www.openarchives.org/rs/terms/patch',
  memento: 'memento',
  timegate: 'timegate',
  timemap: 'timemap',
  collection: 'collection',
  via: 'via',
  hub: 'hub',
  self: 'self',
} as const;

/** Change frequencies of the Sitemap protocol's `<changefreq>` (§7, Table 3). */
export const CHANGE_FREQUENCIES = ['always', 'hourly', 'daily', 'weekly', 'monthly', 'yearly', 'never'] as const;

/** Name of the manifest at the top of a Resource Dump or Change Dump package (§11.1.1, §13.1.1). */
export const DUMP_MANIFEST_NAME = 'manifest.xml';

/** Media type of ResourceSync documents as served (they are Sitemaps: application/xml, §7). */
export const XML_MEDIA_TYPE = 'application/xml';
/** Media type of dump packages (§11.1: ZIP). */
export const ZIP_MEDIA_TYPE = 'application/zip';
