/**
 * Rules between documents (§6.1, §6.2, §9–§13): what a document must say about the document that listed it.
 * Used when walking a Source from its Source Description or a Capability List down to the capability
 * documents, their indexes and dump manifests. Pure: the caller fetches, these functions only compare.
 *
 * @module
 */
import { RELATIONS, WELL_KNOWN_PATH } from './constants.js';
import type { DocumentHeader, DocumentKind, Entry } from './model.js';
import { createIssue, type ValidationIssue } from './validate.js';
import { quote } from './validate-values.js';

/** How a document was reached: from which document, and what that document said it is. */
export interface LinkContext {
  /** URL of the document that listed this one. */
  readonly parentUrl: string;
  readonly parentKind: DocumentKind;
  /** Capability the parent advertised for this document (entry `capability`, the index's own, or a manifest). */
  readonly capability: string;
  /** Where this document's `up` link must point: the Source Description (for a Capability List) or the Capability List. */
  readonly upUrl?: string;
  /** The index that lists this document, when it was reached through one. */
  readonly indexUrl?: string;
}

/** A document to visit next, found in an entry. */
export interface ChildLink {
  readonly url: string;
  readonly context: LinkContext;
}

/** Capabilities whose documents a Capability List points to and a walker follows (§9). */
const FOLLOWED = new Set(['resourcelist', 'resourcedump', 'changelist', 'changedump']);
const INDEX_KINDS = new Set<DocumentKind>([
  'source-description-index',
  'resource-list-index',
  'resource-dump-index',
  'change-list-index',
  'change-dump-index',
]);

function isHttp(url: string): boolean {
  return /^https?:\/\//i.test(url);
}

/**
 * The documents an entry points to that are ResourceSync documents themselves: Source Descriptions from a
 * Source Description Index, Capability Lists from a Source Description, capability documents from a Capability
 * List, the members of an index, the manifests a dump
 * links with `contents` (§11.1, §13.1), and with `packages` the dump packages themselves. Only http(s) URLs
 * (notification channels are `ws:`).
 *
 * @param parent the header and URL of the document holding the entry
 * @param parentContext how the parent itself was reached (to carry the Capability List URL down)
 */
export function childLinks(
  parent: { readonly header: DocumentHeader; readonly url: string; readonly kind: DocumentKind },
  entry: Entry,
  parentContext?: LinkContext,
  options: { readonly packages?: boolean } = {},
): ChildLink[] {
  const { url, kind } = parent;
  const out: ChildLink[] = [];
  const base = { parentUrl: url, parentKind: kind };
  // A document read from a file has no URL its children could point back to: no up/index comparison then.
  const self = isHttp(url) ? { upUrl: url } : {};
  if (kind === 'source-description') {
    // A Source Description read at the well-known URI (§6.3.2) may also live at the URI its Capability Lists
    // point up to (as in the standard's examples): the up target is not compared then.
    const sd = url.endsWith(WELL_KNOWN_PATH) ? {} : self;
    if (isHttp(entry.loc)) out.push({ url: entry.loc, context: { ...base, capability: 'capabilitylist', ...sd } });
  } else if (kind === 'capability-list') {
    const c = entry.md?.capability;
    if (c !== undefined && FOLLOWED.has(c) && isHttp(entry.loc))
      out.push({ url: entry.loc, context: { ...base, capability: c, ...self } });
  } else if (INDEX_KINDS.has(kind)) {
    const c = parent.header.md?.capability;
    const upUrl = parentContext?.upUrl ?? parent.header.links.find((l) => l.rel === RELATIONS.up)?.href;
    if (c !== undefined && isHttp(entry.loc))
      out.push({
        url: entry.loc,
        context: {
          ...base,
          capability: c,
          ...(isHttp(url) ? { indexUrl: url } : {}),
          ...(upUrl === undefined ? {} : { upUrl }),
        },
      });
  } else if (kind === 'resource-dump' || kind === 'change-dump') {
    const manifest = kind === 'resource-dump' ? 'resourcedump-manifest' : 'changedump-manifest';
    const upUrl = parentContext?.upUrl ?? parent.header.links.find((l) => l.rel === RELATIONS.up)?.href;
    const context = { ...base, capability: manifest, ...(upUrl === undefined ? {} : { upUrl }) };
    for (const l of entry.links) if (l.rel === RELATIONS.contents && isHttp(l.href)) out.push({ url: l.href, context });
    // The package itself (a ZIP whose manifest.xml is checked like the copy the contents link points to).
    if (options.packages === true && isHttp(entry.loc)) out.push({ url: entry.loc, context });
  }
  return out;
}

/** Compares URLs loosely: scheme and host case, default ports and an empty path do not matter. */
export function sameUrl(a: string, b: string): boolean {
  return normalize(a) === normalize(b);
}

function normalize(u: string): string {
  const m = /^([a-z][a-z0-9+.-]*):\/\/([^/?#]*)(.*)$/i.exec(u.trim());
  if (m === null) return u.trim();
  const scheme = (m[1] ?? '').toLowerCase();
  let host = (m[2] ?? '').toLowerCase();
  if ((scheme === 'http' && host.endsWith(':80')) || (scheme === 'https' && host.endsWith(':443')))
    host = host.slice(0, host.lastIndexOf(':'));
  const rest = m[3] === '' ? '/' : (m[3] ?? '/');
  return `${scheme}://${host}${rest}`;
}

/**
 * The rules between a document and the one that listed it: same capability (§6.1), `up` to the Capability
 * List or Source Description above it (§9–§13), `index` to the index it sits under (recommended, §10.1,
 * §11.1, §12.1, §13.1).
 */
export function checkLinkedDocument(header: DocumentHeader, context: LinkContext): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  const capability = header.md?.capability;
  if (capability !== undefined && capability !== context.capability)
    issues.push(
      createIssue(
        'capability-mismatch',
        `${quote(context.parentUrl)} lists this document as ${quote(context.capability)}, it says ${quote(capability)}`,
        { element: 'rs:md', attribute: 'capability' },
      ),
    );
  const ups = header.links.filter((l) => l.rel === RELATIONS.up);
  if (context.upUrl !== undefined && ups.length > 0 && !ups.some((l) => sameUrl(l.href, context.upUrl as string)))
    issues.push(
      createIssue(
        'up-target-mismatch',
        `up points to ${quote(ups[0]?.href ?? '')}, not to ${quote(context.upUrl)}${context.capability === 'capabilitylist' ? ' (the Source Description)' : ' (the Capability List)'}`,
        { element: 'rs:ln', attribute: 'href' },
      ),
    );
  if (context.indexUrl !== undefined) {
    const idx = header.links.filter((l) => l.rel === RELATIONS.index);
    if (!idx.some((l) => sameUrl(l.href, context.indexUrl as string)))
      issues.push(
        createIssue(
          'index-link-recommended',
          idx.length === 0
            ? `no <rs:ln rel="index"> to the index that lists it (${quote(context.indexUrl)})`
            : `the index link points to ${quote(idx[0]?.href ?? '')}, not to ${quote(context.indexUrl)}`,
          { element: 'rs:ln', attribute: 'href' },
        ),
      );
  }
  return issues;
}
