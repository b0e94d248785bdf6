/**
 * The table of every rule the validator enforces (see `validate.ts`): a stable code, a severity, the section of
 * the standard it comes from and a one-line summary. The README's rule list is generated from {@link RULES}.
 *
 * Severity follows the wording of the standard: `error` where it says *must* / *mandatory* / *required* (or
 * where a value cannot mean anything, e.g. a datetime that does not parse), `warning` where it says *should* /
 * *recommended* or where a document uses an attribute "not used" in that kind of document.
 *
 * Sections: "§" is ANSI/NISO Z39.99-2017 (ResourceSync 1.1); "App. A" its Appendix A (Table 4);
 * "N-§" the ResourceSync Notification draft 0.8; "Sitemap" the Sitemap protocol 0.9 (sitemaps.org) that §7
 * builds on; "RFC 3986" the URI syntax §7 requires of `<loc>` and `href`.
 *
 * @module
 */

/** Severity of an issue: an `error` makes a document invalid, a `warning` does not. */
export type Severity = 'error' | 'warning';

/** One rule of the standard. */
export interface Rule {
  /** Stable code: callers match on it, it never changes meaning. */
  readonly code: string;
  readonly severity: Severity;
  /** Section(s) of the standard the rule enforces, e.g. `§12.1`. Issues may cite the narrower one that applied. */
  readonly section: string;
  readonly summary: string;
}

/**
 * Every rule, in a stable order (document structure, time attributes, links, entries, values, notifications).
 *
 * @example
 * ```ts
 * const errors = RULES.filter((r) => r.severity === 'error').map((r) => r.code);
 * ```
 */
export const RULES = [
  // Document structure
  rule('root-md-missing', 'error', '§7', 'the root element has no <rs:md> (mandatory in every ResourceSync document)'),
  rule('capability-missing', 'error', '§7', 'the root <rs:md> has no capability attribute (mandatory)'),
  rule('capability-unknown', 'error', '§7', 'the root capability is not a value the standard defines'),
  rule('kind-unexpected', 'error', '§7', 'the document is not of the kind the caller expected (--expect)'),
  rule(
    'index-not-allowed',
    'error',
    '§7, N-§4, N-§5',
    'a <sitemapindex> for a capability that has no index (manifests, notifications)',
  ),
  rule('capabilitylist-index', 'warning', '§9', 'a Capability List expressed as a <sitemapindex> (Sources should not)'),
  rule('element-mismatch', 'error', '§7', '<url> is only allowed in <urlset>, <sitemap> only in <sitemapindex>'),
  rule('entry-limit', 'error', '§7', 'more than 50,000 entries in one document (community limit; use an index)'),
  rule(
    'size-limit',
    'error',
    '§7',
    'a document of more than 52,428,800 bytes (50 MB, uncompressed; community limit; use an index)',
  ),
  rule('md-duplicate', 'error', '§7', 'a second <rs:md> in the same element (<rs:md> is not repeatable)'),
  rule(
    'rs-element-unknown',
    'warning',
    '§7',
    'an element in the ResourceSync namespace other than <rs:md> and <rs:ln>',
  ),
  rule('header-after-entries', 'error', '§7', 'a document-level <rs:md> or <rs:ln> after the first entry'),
  rule('element-misplaced', 'warning', '§7', 'another root-level element after the first entry'),
  rule('element-repeated', 'error', 'Sitemap', 'a second <loc>, <lastmod>, <changefreq> or <priority> in one entry'),
  rule(
    'element-unknown',
    'warning',
    'Sitemap',
    'an element in the Sitemap namespace the protocol does not define there',
  ),
  rule(
    'content-unexpected',
    'error',
    '§7, Sitemap',
    'an element inside <loc>, <lastmod>, <changefreq>, <priority>, <rs:md> or <rs:ln>',
  ),
  rule(
    'attribute-unexpected',
    'error',
    'Sitemap',
    'an attribute on <url>, <sitemap>, <loc>, <lastmod>, <changefreq> or <priority> (the schema defines none)',
  ),
  rule(
    'text-unexpected',
    'warning',
    '§7, Sitemap',
    'text directly inside <urlset>, <sitemapindex>, an entry, <rs:md> or <rs:ln>',
  ),
  // Attributes of rs:md and rs:ln
  rule('attribute-prefixed', 'error', '§7', 'a ResourceSync attribute with a namespace prefix (they must have none)'),
  rule(
    'attribute-unknown',
    'error',
    '§7',
    'an attribute in no namespace that ResourceSync does not define (extensions need their own namespace)',
  ),
  rule(
    'attribute-not-used',
    'warning',
    '§7, App. A',
    'an attribute the standard says is not used in this kind of document or element',
  ),
  // Time attributes
  rule(
    'at-missing',
    'error',
    'App. A',
    'the root <rs:md> of a Resource List, Resource Dump, their indexes or a Resource Dump Manifest has no at',
  ),
  rule(
    'from-missing',
    'error',
    'App. A',
    'the root <rs:md> of a Change List, Change Dump, their indexes or a Change Dump Manifest has no from',
  ),
  rule(
    'child-from-recommended',
    'warning',
    'App. A, §12.2, §13.1',
    'an entry of a Change List Index, Change Dump or Change Dump Index without <rs:md from>',
  ),
  rule(
    'datetime-invalid',
    'error',
    '§7',
    'at, completed, from, until, datetime, modified or <lastmod> is not a W3C Datetime',
  ),
  rule(
    'datetime-not-utc',
    'warning',
    '§7',
    'a datetime not in the recommended complete UTC form YYYY-MM-DDThh:mm:ss[.s]Z',
  ),
  rule('interval-reversed', 'error', '§7', 'completed before at, or until before from'),
  rule('datetime-outside-interval', 'error', '§7', 'a change datetime before the document from or after its until'),
  rule(
    'order-not-chronological',
    'error',
    '§12.1, §12.2, §13.2',
    'entries of a Change List, Change List Index or Change Dump Manifest not in forward chronological order',
  ),
  rule(
    'changedump-order',
    'warning',
    '§13.1',
    'entries of a Change Dump (or its index) not in forward chronological order',
  ),
  // Links
  rule(
    'up-missing',
    'error',
    '§9–§13, N-§4, N-§5',
    'no document-level <rs:ln rel="up"> (mandatory everywhere but in the Source Description)',
  ),
  rule(
    'up-unexpected',
    'warning',
    '§6.2, §8',
    'a Source Description or Source Description Index with an up link (the top of the hierarchy)',
  ),
  rule(
    'describedby-recommended',
    'warning',
    '§8, §9',
    'a Source Description, Capability List or Source Description entry without a describedby link',
  ),
  rule('ln-rel-missing', 'error', '§7', '<rs:ln> without rel (mandatory)'),
  rule('ln-href-missing', 'error', '§7', '<rs:ln> without href (mandatory)'),
  rule('href-not-absolute', 'error', '§7', 'an href that is not an absolute URI'),
  rule('rel-unregistered', 'warning', '§7', 'a rel that is neither an IANA-registered relation type nor a URI'),
  rule('pri-invalid', 'error', '§7', 'pri is not an integer between 1 and 999,999'),
  rule('patch-type-missing', 'error', '§14.4', 'a patch link without type (mandatory)'),
  rule(
    'patch-not-applicable',
    'warning',
    '§14.4',
    'a patch link outside a Change List or Change Dump Manifest (only applicable there)',
  ),
  rule('patch-path-missing', 'error', '§14.4', 'a patch link in a Change Dump Manifest without path (mandatory)'),
  rule(
    'timegate-attributes',
    'warning',
    '§14.6',
    'a timegate link with attributes other than rel, href and pri (should not be used)',
  ),
  rule(
    'duplicate-link-metadata',
    'warning',
    '§14.2',
    'a duplicate (mirror) link repeating hash, length or type (should be omitted)',
  ),
  rule('alternate-type-recommended', 'warning', '§14.3', 'an alternate link without type (recommended)'),
  // Entries
  rule('loc-missing', 'error', '§7', 'an entry without <loc> (mandatory)'),
  rule('loc-not-absolute', 'error', '§7', '<loc> is not an absolute URI'),
  rule(
    'uri-invalid-chars',
    'error',
    '§7, Sitemap',
    'a URI (loc or href) with whitespace or characters that must be escaped',
  ),
  rule(
    'uri-percent-invalid',
    'error',
    '§7, RFC 3986 §2.1',
    'a URI (loc or href) with a "%" not followed by two hexadecimal digits (a malformed percent-encoding)',
  ),
  rule('loc-too-long', 'error', 'Sitemap', '<loc> of 2,048 characters or more'),
  rule(
    'loc-duplicate',
    'warning',
    '§8, §10.1, §11.2',
    'the same <loc> twice in a Source Description (Index), Resource List (Index) or Resource Dump Manifest',
  ),
  rule(
    'changefreq-invalid',
    'error',
    '§7',
    '<changefreq> is not always, hourly, daily, weekly, monthly, yearly or never',
  ),
  rule('priority-invalid', 'error', 'Sitemap', '<priority> is not a number from 0.0 to 1.0'),
  rule(
    'entry-md-missing',
    'error',
    '§9, §11.2, §12.1, §13.2, N-§4, N-§5',
    'an entry without the <rs:md> its document kind makes mandatory',
  ),
  rule(
    'change-missing',
    'error',
    '§12.1, §13.2, N-§4, N-§5',
    'an entry of a Change List, Change Dump Manifest or notification without change',
  ),
  rule('change-invalid', 'error', '§7', 'change is not created, updated or deleted'),
  rule(
    'capability-entry-missing',
    'error',
    '§8, §9, N-§5',
    'an entry <rs:md> of a Source Description, Capability List or framework notification without capability',
  ),
  rule(
    'capability-entry-invalid',
    'error',
    '§6.1, §8, §9, N-§5',
    'an entry capability not allowed in this document (not capabilitylist in a Source Description, not description in its index)',
  ),
  rule(
    'capability-entry-unknown',
    'warning',
    '§9',
    'a Capability List entry with a capability this standard does not define (other specifications may)',
  ),
  rule('capability-duplicate', 'error', '§9', 'a Capability List with more than one entry for the same capability'),
  rule(
    'path-missing',
    'error',
    '§11.2, §13.2',
    'a manifest entry without path (mandatory, except for change="deleted")',
  ),
  rule('path-not-absolute', 'error', '§11.2, §13.2', 'a path without its leading slash'),
  rule(
    'path-unsafe',
    'warning',
    '§11.2, §13.2',
    'a path with "..", "." or empty segments, a backslash or a NUL (cannot be unpacked safely)',
  ),
  rule('type-recommended', 'warning', '§11.2, §13.2', 'a manifest entry without type (recommended)'),
  rule(
    'package-metadata-recommended',
    'warning',
    '§11.1, §13.1',
    'a Resource Dump or Change Dump entry without <rs:md type length> (recommended)',
  ),
  rule(
    'package-type-mixed',
    'warning',
    '§11.1, §13.1',
    'a dump pointing to packages of different media types (should be one format)',
  ),
  rule(
    'package-not-zip',
    'warning',
    '§11.1, §13.1',
    'a dump package whose type is not application/zip (ZIP is the recommended and specified format)',
  ),
  // Values
  rule('hash-invalid', 'error', '§7', 'a hash item that is not algorithm:hexdigest, or an algorithm given twice'),
  rule(
    'hash-digest-invalid',
    'error',
    '§7',
    'a digest that is not hex, or not 32/40/64 hex digits for md5/sha-1/sha-256',
  ),
  rule('hash-algorithm-unknown', 'warning', '§7', 'a hash algorithm other than md5, sha-1 and sha-256'),
  rule('length-invalid', 'error', '§7', 'length is not a non-negative integer'),
  rule('type-invalid', 'error', '§7', 'type is not a media type (type/subtype with optional parameters)'),
  // Notifications
  rule(
    'framework-change-unexpected',
    'warning',
    'N-§2.1',
    'a framework notification change type that Table 2.1 does not list for that capability',
  ),
  // Between documents (when walking a Source)
  rule(
    'capability-mismatch',
    'error',
    '§6.1',
    'a document whose capability differs from what the document listing it advertised',
  ),
  rule(
    'up-target-mismatch',
    'error',
    '§6.2, §9–§13',
    'an up link that does not point to the Capability List (or Source Description) listing the document',
  ),
  rule(
    'index-link-recommended',
    'warning',
    '§6.2, §10.1, §11.1, §12.1, §13.1',
    'a document listed in an index without <rs:ln rel="index"> to that index',
  ),
  // Dump packages (ZIP files with manifest.xml)
  rule('package-path-missing', 'error', '§11.2, §13.2', 'a manifest path naming no file of the package'),
  rule(
    'package-length-mismatch',
    'error',
    '§7, §11.2',
    'a bitstream whose size differs from the length its manifest entry gives',
  ),
  rule(
    'package-hash-mismatch',
    'error',
    '§7, §11.2',
    'a bitstream whose digest differs from the hash its manifest entry gives',
  ),
  rule('package-file-unlisted', 'warning', '§11.2, §13.2', 'a file of the package that the manifest does not describe'),
  rule(
    'package-manifest-kind',
    'error',
    '§11.2, §13.2',
    'manifest.xml is not a Resource Dump Manifest or Change Dump Manifest',
  ),
  // Documents that cannot be read (the reader's error codes, see errors.ts)
  rule('RS_XML_SYNTAX', 'error', 'XML 1.0', 'the document is not well-formed XML'),
  rule('RS_XML_DTD', 'error', 'XML 1.0', 'a DTD or entity declaration (refused for safety)'),
  rule('RS_LIMIT', 'error', '§7', 'a size, depth or count limit of the reader was exceeded'),
  rule('RS_NOT_RESOURCESYNC', 'error', '§7', 'the root is not <urlset> or <sitemapindex> of the Sitemap namespace'),
  rule(
    'RS_ZIP',
    'error',
    '§11.2, §13.2',
    'a dump package that is not a readable, safe ZIP with manifest.xml at its top',
  ),
] as const satisfies readonly Rule[];

/** The code of a rule of {@link RULES}. */
export type RuleCode = (typeof RULES)[number]['code'];

/** Rules by code. */
export const RULES_BY_CODE: ReadonlyMap<string, Rule> = new Map(RULES.map((r) => [r.code, r]));

function rule<C extends string>(code: C, severity: Severity, section: string, summary: string) {
  return { code, severity, section, summary } as const;
}

/**
 * The rule table as Markdown (code, severity, section, summary), for the README and `docs/validation-rules.md`.
 *
 * @example
 * ```ts
 * writeFileSync('docs/validation-rules.md', formatRulesMarkdown());
 * ```
 */
export function formatRulesMarkdown(): string {
  const markdown = (s: string) => s.replaceAll('|', '\\|').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
  const rows = RULES.map((r) => `| \`${r.code}\` | ${r.severity} | ${r.section} | ${markdown(r.summary)} |`);
  return [
    '# Validation rules',
    '',
    'Every rule `resourcesync validate` (and `validateDocument` / `validateStream`) checks. Severity: **error** where',
    'the standard says *must* / *mandatory*, **warning** where it says *should* / *recommended* or "not used".',
    'Sections: § = ANSI/NISO Z39.99-2017 (ResourceSync 1.1), App. A = its Appendix A (Table 4), N-§ = ResourceSync',
    'Notification draft 0.8, Sitemap = the Sitemap protocol 0.9, RFC 3986 = the URI syntax. Generated from',
    '`src/core/rules.ts` (`resourcesync validate --list-rules` prints the same table).',
    '',
    '| code | severity | section | rule |',
    '|---|---|---|---|',
    ...rows,
    '',
  ].join('\n');
}
