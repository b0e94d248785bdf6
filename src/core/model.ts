/**
 * The model of every ResourceSync document (§7–§13) and notification payload (Notification draft §2–§5).
 *
 * A document is a {@link DocumentHeader} (root element, document-level `rs:md` and `rs:ln`, namespace
 * declarations) plus a sequence of {@link Entry} values (`<url>` or `<sitemap>` children). The split lets the
 * reader and writer stream entries without holding a whole document.
 *
 * Values are kept as the document states them (datetimes as text, see `datetime.ts` to parse and compare);
 * numbers (`length`, `pri`) are parsed, and a value that does not parse is kept in `invalid` so a validator
 * can report it and a writer can write it back unchanged.
 *
 * @module
 */
import type { ChangeType } from './constants.js';

/** Root element of a document (§7, Table 2): `<urlset>` for lists and manifests, `<sitemapindex>` for indexes. */
export type RootElement = 'urlset' | 'sitemapindex';
/** Entry element: `<url>` in a `<urlset>`, `<sitemap>` in a `<sitemapindex>` (§7, Table 2). */
export type EntryElement = 'url' | 'sitemap';

/**
 * The kind of a document, from its root element and the `capability` of its `rs:md` (§6.1 Table 1, §7; N-§3–§5).
 * `unknown` when neither tells (a plain Sitemap, or a missing capability).
 */
export type DocumentKind =
  | 'source-description'
  | 'source-description-index'
  | 'capability-list'
  | 'resource-list'
  | 'resource-list-index'
  | 'resource-dump'
  | 'resource-dump-index'
  | 'resource-dump-manifest'
  | 'change-list'
  | 'change-list-index'
  | 'change-dump'
  | 'change-dump-index'
  | 'change-dump-manifest'
  | 'change-notification'
  | 'framework-notification'
  | 'sitemap'
  | 'sitemap-index'
  | 'unknown';

/** An attribute from a namespace other than ResourceSync's, kept for the round trip (§7). */
export interface ExtensionAttribute {
  /** Namespace URI ('' for no namespace, which the standard does not allow on `rs:*` elements). */
  readonly ns: string;
  /** Prefix as found in the document, used again when writing. */
  readonly prefix: string;
  readonly local: string;
  readonly value: string;
}

/** An element the model does not know (another namespace, or an unknown Sitemap element), kept whole. */
export interface ExtensionElement {
  readonly ns: string;
  readonly prefix: string;
  readonly local: string;
  readonly attributes: readonly ExtensionAttribute[];
  /** Child elements and text, in document order. Text nodes are strings. */
  readonly children: readonly (ExtensionElement | string)[];
}

/**
 * `<rs:md>`: metadata about the document (at its root) or about a resource (in an entry) (§7, Table 3).
 * All fields optional; which ones are required depends on the document kind (see `validate.ts`).
 */
export interface Metadata {
  capability?: string;
  /** W3C Datetime: start of the snapshot (§7, Appendix A). */
  at?: string;
  /** W3C Datetime: end of the snapshot. */
  completed?: string;
  /** W3C Datetime: start of the change interval. */
  from?: string;
  /** W3C Datetime: end of the change interval. */
  until?: string;
  /** `created`, `updated` or `deleted`; any other text is kept as is for the validator. */
  change?: ChangeType | string;
  /** W3C Datetime of a change (Change Lists, Change Dump Manifests). */
  datetime?: string;
  /** Whitespace-separated `algorithm:hexdigest` list (see `hash.ts`). */
  hash?: string;
  /** Length in bytes. */
  length?: number;
  /** Media type. */
  type?: string;
  /** Content encoding (RFC 7231 §3.1.2.2). */
  encoding?: string;
  /** Path of the bitstream inside a dump package (manifests, §11.1.1, §13.1.1), with a leading `/`. */
  path?: string;
  /** Attributes from other namespaces. */
  extensions?: ExtensionAttribute[];
  /** Attributes whose value did not parse (e.g. `length="abc"`), by attribute name, kept verbatim. */
  invalid?: Record<string, string>;
}

/** `<rs:ln>`: a link to a related resource (§7, Table 3). `rel` and `href` are mandatory. */
export interface Link {
  rel: string;
  href: string;
  hash?: string;
  length?: number;
  /** W3C Datetime of the last modification of the linked resource. */
  modified?: string;
  path?: string;
  /** Priority, 1 (highest) to 999,999 (§7, Table 3). */
  pri?: number;
  type?: string;
  encoding?: string;
  extensions?: ExtensionAttribute[];
  invalid?: Record<string, string>;
}

/** A `<url>` (or `<sitemap>` in an index) with its resource's metadata and links (§7). */
export interface Entry {
  /** Which element carried the entry; a `<url>` in a `<sitemapindex>` is a validation error. */
  element: EntryElement;
  /** `<loc>` (mandatory; '' when absent, which the validator reports). */
  loc: string;
  /** `<lastmod>`: W3C Datetime. */
  lastmod?: string;
  /** `<changefreq>` (Sitemap protocol). */
  changefreq?: string;
  /** `<priority>` (Sitemap protocol), kept as text. */
  priority?: string;
  /** `<rs:md>` of the entry. At most one: a second one is kept in `extensions` (namespace RS_NS), where the validator reports it. */
  md?: Metadata;
  /** `<rs:ln>` of the entry, in document order. */
  links: Link[];
  /** Child elements the model does not know, in order. */
  extensions?: ExtensionElement[];
  /** 1-based line of the entry's start tag, when read from a document. Not written. */
  line?: number;
}

/** Everything of a document but its entries. */
export interface DocumentHeader {
  root: RootElement;
  /** Derived from `root` and `md.capability` by {@link documentKind}. */
  kind: DocumentKind;
  /** Document-level `<rs:md>` (mandatory for every capability document, §7). */
  md?: Metadata;
  /** Document-level `<rs:ln>`, in order. */
  links: Link[];
  /**
   * Namespace declarations on the root element, prefix to URI ('' for the default namespace), in document
   * order. The writer declares these again, and adds the Sitemap and ResourceSync ones when missing.
   */
  namespaces: Record<string, string>;
  /** Root attributes other than namespace declarations (e.g. `xsi:schemaLocation`). */
  attributes?: ExtensionAttribute[];
  /** Root-level child elements the model does not know, in order (written before the entries). */
  extensions?: ExtensionElement[];
}

/** A whole document held in memory: only for small documents, tests and round trips. */
export interface ResourceSyncDocument extends DocumentHeader {
  entries: Entry[];
}

/**
 * Kinds that use `<sitemapindex>` as their root: the four capability documents' indexes (§10.2, §11.1, §12.2,
 * §13.1) and the Source Description Index that groups several Source Descriptions (§8; §6.1: an index carries
 * the capability of the documents it lists).
 */
const INDEX_KINDS: Record<string, DocumentKind> = {
  description: 'source-description-index',
  resourcelist: 'resource-list-index',
  resourcedump: 'resource-dump-index',
  changelist: 'change-list-index',
  changedump: 'change-dump-index',
};

const URLSET_KINDS: Record<string, DocumentKind> = {
  description: 'source-description',
  capabilitylist: 'capability-list',
  resourcelist: 'resource-list',
  resourcedump: 'resource-dump',
  'resourcedump-manifest': 'resource-dump-manifest',
  changelist: 'change-list',
  changedump: 'change-dump',
  'changedump-manifest': 'change-dump-manifest',
  'change-notification': 'change-notification',
  'framework-notification': 'framework-notification',
};

/**
 * The document kind from the root element and the root `rs:md` capability (§6.1 Table 1, §7 Table 2).
 * A `<urlset>` without a capability is `sitemap` (possibly a notification payload, which has no root `rs:md`
 * in N-§4–§5: use {@link notificationKind} on its first entry to tell).
 */
export function documentKind(root: RootElement, capability: string | undefined): DocumentKind {
  if (capability === undefined) return root === 'urlset' ? 'sitemap' : 'sitemap-index';
  // Own properties only: `capability` comes from the document (`toString`, `__proto__` are not kinds).
  const kinds = root === 'sitemapindex' ? INDEX_KINDS : URLSET_KINDS;
  return Object.hasOwn(kinds, capability) ? (kinds[capability] as DocumentKind) : 'unknown';
}

/**
 * The kind of a notification payload (N-§4, N-§5), which has no document-level `rs:md`: a framework
 * notification's entries carry a `capability`, a change notification's entries do not.
 */
export function notificationKind(firstEntry: Entry): 'change-notification' | 'framework-notification' {
  return firstEntry.md?.capability !== undefined ? 'framework-notification' : 'change-notification';
}

/** The capability name the root `rs:md` should carry for a kind (inverse of {@link documentKind}). */
export function capabilityOf(kind: DocumentKind): string | undefined {
  for (const [cap, k] of Object.entries(URLSET_KINDS)) if (k === kind) return cap;
  for (const [cap, k] of Object.entries(INDEX_KINDS)) if (k === kind) return cap;
  return undefined;
}

/** The root element a kind is written with. */
export function rootOf(kind: DocumentKind): RootElement {
  return kind.endsWith('-index') ? 'sitemapindex' : 'urlset';
}

/** Namespace declarations every document gets: Sitemap as default namespace, ResourceSync as `rs`. */
export function defaultNamespaces(): Record<string, string> {
  return { '': 'http://www.sitemaps.org/schemas/sitemap/0.9', rs: 'http://www.openarchives.org/rs/terms/' };
}

/**
 * A header for a new document of `kind`: the right root element, `capability` set in the root `rs:md`
 * (none for notification payloads, N-§4), the default namespaces.
 *
 * @example
 * ```ts
 * const header = createHeader('resource-list', { at: formatDatetime(Date.now()) }, [{ rel: 'up', href: capUrl }]);
 * ```
 */
export function createHeader(kind: DocumentKind, md: Metadata = {}, links: Link[] = []): DocumentHeader {
  const capability = capabilityOf(kind);
  const isPayload = kind === 'change-notification' || kind === 'framework-notification';
  const header: DocumentHeader = { root: rootOf(kind), kind, links, namespaces: defaultNamespaces() };
  if (!isPayload && capability !== undefined) header.md = { capability, ...md };
  else if (Object.keys(md).length > 0) header.md = { ...md };
  return header;
}
