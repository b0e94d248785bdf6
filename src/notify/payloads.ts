/**
 * Notification payloads (ResourceSync Notification draft 0.8, N-§2–§5; the same payloads travel over WebSub in
 * the 2017 Change Notification and Framework Notification specifications).
 *
 * - A **change notification** (N-§4) is a `<urlset>` with an `rs:ln rel="up"` to the Capability List and one
 *   `<url>` per changed resource, whose `rs:md` carries `change`, `datetime` and, except for deletes, `hash`,
 *   `length` and `type`. It has no document-level `rs:md`. A large burst is split into several notifications,
 *   never into an index.
 * - A **framework notification** (N-§5) has the same shape; each `<url>` names a changed capability document
 *   (`rs:md change=... capability=...`), with an `rs:ln rel="index"` when that document sits under an index.
 *
 * Payloads are built with the model (`createHeader`) and the XML writer, and read with the XML reader.
 *
 * @module
 */
import {
  CHANGE_TYPES,
  type ChangeType,
  FRAMEWORK_CHANGE_TYPES,
  type FrameworkCapability,
  frameworkChangeTypes,
  MAX_DOCUMENT_BYTES,
} from '../core/constants.js';

export { FRAMEWORK_CHANGE_TYPES, type FrameworkCapability };
import { isResourceSyncError, ResourceSyncError } from '../core/errors.js';
import type { Entry, Link, Metadata, ResourceSyncDocument } from '../core/model.js';
import { createHeader } from '../core/model.js';
import { readDocument, serializeDocument } from '../xml/index.js';

/** A change to one resource, as a change notification carries it (N-§4). */
export interface ResourceChange {
  /** Absolute URI of the resource (`<loc>`). */
  readonly uri: string;
  readonly change: ChangeType;
  /** W3C Datetime of the change (`rs:md datetime`). Required when building; optional when read (Example 4.1 has `<lastmod>` only). */
  readonly datetime?: string;
  /** `<lastmod>` of the resource, when stated. */
  readonly lastmod?: string;
  /** `algorithm:hexdigest` list (see `core/hash.ts`); not for deletes. */
  readonly hash?: string;
  readonly length?: number;
  readonly type?: string;
}

/** A change to one capability document, as a framework notification carries it (N-§5). */
export interface FrameworkChange {
  /** URL of the changed document (never an index: N-§5). */
  readonly uri: string;
  readonly capability: FrameworkCapability;
  readonly change: ChangeType;
  /** URL of the index the document sits under (`rs:ln rel="index"`, N-§5). */
  readonly indexUrl?: string;
  /** W3C Datetime of the change, when stated. */
  readonly datetime?: string;
}

/** A parsed change notification. */
export interface ChangeNotification {
  readonly kind: 'change-notification';
  /** Target of the payload's `rs:ln rel="up"` (the Capability List), when present. */
  readonly capabilityListUrl: string | undefined;
  readonly changes: readonly ResourceChange[];
  readonly document: ResourceSyncDocument;
}

/** A parsed framework notification. */
export interface FrameworkNotification {
  readonly kind: 'framework-notification';
  readonly capabilityListUrl: string | undefined;
  readonly changes: readonly FrameworkChange[];
  readonly document: ResourceSyncDocument;
}

export type Notification = ChangeNotification | FrameworkNotification;

/** Default bounds of one change notification (a burst larger than this becomes several notifications). */
export const DEFAULT_NOTIFICATION_MAX_ENTRIES = 1000;
export const DEFAULT_NOTIFICATION_MAX_BYTES = 1_048_576;

export interface ChangeNotificationOptions {
  /** The Capability List of the set of resources (`rs:ln rel="up"`, N-§4). */
  readonly capabilityListUrl: string;
  /** Entries per notification (default 1,000; at most 50,000). */
  readonly maxEntries?: number;
  /** Bytes per serialized notification (default 1 MiB; at most 50 MiB). */
  readonly maxBytes?: number;
}

const FRAMEWORK_CAPABILITIES = Object.keys(FRAMEWORK_CHANGE_TYPES) as FrameworkCapability[];

function isChangeType(v: unknown): v is ChangeType {
  return typeof v === 'string' && (CHANGE_TYPES as readonly string[]).includes(v);
}

function upLinks(capabilityListUrl: string): Link[] {
  if (capabilityListUrl.length === 0)
    throw new ResourceSyncError('RS_CONFIG', 'a notification needs the Capability List URL');
  return [{ rel: 'up', href: capabilityListUrl }];
}

/** The `<url>` entry of one resource change (N-§4): no hash, length or type for a delete. */
export function createChangeEntry(c: ResourceChange): Entry {
  if (!isChangeType(c.change))
    throw new ResourceSyncError('RS_INVALID_VALUE', `bad change type "${String(c.change)}"`, { url: c.uri });
  if (c.datetime === undefined)
    throw new ResourceSyncError('RS_INVALID_VALUE', 'a change needs its datetime', { url: c.uri });
  const md: Metadata = { change: c.change, datetime: c.datetime };
  if (c.change !== 'deleted') {
    if (c.hash !== undefined) md.hash = c.hash;
    if (c.length !== undefined) md.length = c.length;
    if (c.type !== undefined) md.type = c.type;
  }
  const entry: Entry = { element: 'url', loc: c.uri, md, links: [] };
  if (c.lastmod !== undefined && c.change !== 'deleted') entry.lastmod = c.lastmod;
  return entry;
}

/** The `<url>` entry of one capability document change (N-§5), checked against Table 2.1. */
export function createFrameworkEntry(c: FrameworkChange): Entry {
  const allowed = frameworkChangeTypes(c.capability);
  if (allowed === undefined) {
    throw new ResourceSyncError('RS_INVALID_VALUE', `no framework notification for capability "${c.capability}"`, {
      url: c.uri,
    });
  }
  if (!allowed.includes(c.change)) {
    throw new ResourceSyncError(
      'RS_INVALID_VALUE',
      `a ${c.capability} can be ${allowed.join(' or ')}, not ${c.change} (N-§2.1 Table 2.1)`,
      { url: c.uri },
    );
  }
  const md: Metadata = { change: c.change, capability: c.capability };
  if (c.datetime !== undefined) md.datetime = c.datetime;
  const links: Link[] = c.indexUrl === undefined ? [] : [{ rel: 'index', href: c.indexUrl }];
  return { element: 'url', loc: c.uri, md, links };
}

function changeDocument(capabilityListUrl: string, entries: Entry[]): ResourceSyncDocument {
  return { ...createHeader('change-notification', {}, upLinks(capabilityListUrl)), entries };
}

const encoder = new TextEncoder();
function byteLength(text: string): number {
  return encoder.encode(text).length;
}

/**
 * Change notification payloads (XML text) for a burst of changes: one, or several when the burst exceeds
 * `maxEntries` or `maxBytes` (N-§4: never an index). Order is kept. Memory bound: the serialized payloads.
 *
 * @example
 * ```ts
 * for (const xml of createChangeNotifications(changes, { capabilityListUrl })) channel.publish(xml);
 * ```
 */
export function createChangeNotifications(
  changes: Iterable<ResourceChange>,
  options: ChangeNotificationOptions,
): string[] {
  const maxEntries = Math.min(50_000, Math.max(1, options.maxEntries ?? DEFAULT_NOTIFICATION_MAX_ENTRIES));
  const maxBytes = Math.min(MAX_DOCUMENT_BYTES, Math.max(1024, options.maxBytes ?? DEFAULT_NOTIFICATION_MAX_BYTES));
  const emptyBytes = byteLength(serializeDocument(changeDocument(options.capabilityListUrl, [])));
  const payloads: string[] = [];
  let batch: Entry[] = [];
  let batchBytes = emptyBytes;
  const flush = (): void => {
    if (batch.length === 0) return;
    payloads.push(serializeDocument(changeDocument(options.capabilityListUrl, batch)));
    batch = [];
    batchBytes = emptyBytes;
  };
  for (const change of changes) {
    const entry = createChangeEntry(change);
    const size = byteLength(serializeDocument(changeDocument(options.capabilityListUrl, [entry]))) - emptyBytes;
    if (emptyBytes + size > maxBytes) {
      throw new ResourceSyncError('RS_LIMIT', `one change entry exceeds the notification limit of ${maxBytes} bytes`, {
        url: change.uri,
      });
    }
    if (batch.length >= maxEntries || batchBytes + size > maxBytes) flush();
    batch.push(entry);
    batchBytes += size;
  }
  flush();
  return payloads;
}

/**
 * A framework notification payload (XML text) for one or more capability document changes (N-§5).
 * Throws RS_INVALID_VALUE for a change Table 2.1 does not allow, RS_CONFIG for an empty list.
 */
export function createFrameworkNotification(changes: Iterable<FrameworkChange>, capabilityListUrl: string): string {
  const entries = [...changes].map(createFrameworkEntry);
  if (entries.length === 0)
    throw new ResourceSyncError('RS_CONFIG', 'a framework notification needs at least one change');
  return serializeDocument({
    ...createHeader('framework-notification', {}, upLinks(capabilityListUrl)),
    entries,
  });
}

export interface ReadNotificationOptions {
  /** Where the payload came from (channel or topic URL), for error messages. */
  readonly url?: string;
  /** Largest payload accepted (default 50 MiB, N-§4 via §4.2). */
  readonly maxBytes?: number;
}

function refuse(message: string, url: string | undefined, entry?: number): never {
  const where: { url?: string; entry?: number } = {};
  if (url !== undefined) where.url = url;
  if (entry !== undefined) where.entry = entry;
  throw new ResourceSyncError('RS_NOTIFICATION', message, where);
}

/**
 * Parses and checks a notification payload (N-§4, N-§5). Every failure is a `ResourceSyncError` with code
 * `RS_NOTIFICATION` (the XML reader's error, with its line and column, is the `cause`): not XML, a
 * `<sitemapindex>`, a document-level capability of a capability document, no entries, an entry without `<loc>`
 * or a valid `change`, change and framework entries mixed, a capability Table 2.1 does not list.
 * Memory bound: the whole payload (at most `maxBytes`).
 */
export async function readNotification(
  payload: string | Uint8Array,
  options: ReadNotificationOptions = {},
): Promise<Notification> {
  const url = options.url;
  const bytes = typeof payload === 'string' ? encoder.encode(payload) : payload;
  const maxBytes = options.maxBytes ?? MAX_DOCUMENT_BYTES;
  if (bytes.length > maxBytes) refuse(`payload of ${bytes.length} bytes exceeds ${maxBytes}`, url);
  let doc: ResourceSyncDocument;
  try {
    doc = await readDocument(bytes, url === undefined ? { maxBytes } : { url, maxBytes });
  } catch (e) {
    if (!isResourceSyncError(e)) throw e;
    const where: { url?: string; line?: number; column?: number; cause: unknown } = { cause: e };
    if (url !== undefined) where.url = url;
    if (e.line !== undefined) where.line = e.line;
    if (e.column !== undefined) where.column = e.column;
    throw new ResourceSyncError('RS_NOTIFICATION', `malformed notification payload: ${e.message}`, where);
  }
  if (doc.root !== 'urlset') refuse('a notification is a <urlset>, never an index (N-§4, N-§5)', url);
  const rootCapability = doc.md?.capability;
  if (
    rootCapability !== undefined &&
    rootCapability !== 'change-notification' &&
    rootCapability !== 'framework-notification'
  ) {
    refuse(`a ${rootCapability} document is not a notification payload`, url);
  }
  const first = doc.entries[0];
  if (first === undefined) refuse('a notification payload without any <url>', url);
  const capabilityListUrl = doc.links.find((l) => l.rel === 'up')?.href;
  const framework = first.md?.capability !== undefined;
  if (framework) {
    const changes: FrameworkChange[] = doc.entries.map((e, i) => {
      const md = e.md;
      if (e.loc === '') refuse('entry without <loc>', url, i + 1);
      if (md === undefined || !isChangeType(md.change)) refuse('entry without a valid rs:md change', url, i + 1);
      const capability = md.capability;
      if (capability === undefined) refuse('resource change mixed into a framework notification', url, i + 1);
      if (!(FRAMEWORK_CAPABILITIES as string[]).includes(capability)) {
        refuse(`no framework notification for capability "${capability}" (N-§2.1)`, url, i + 1);
      }
      const c: { -readonly [K in keyof FrameworkChange]: FrameworkChange[K] } = {
        uri: e.loc,
        capability: capability as FrameworkCapability,
        change: md.change,
      };
      const index = e.links.find((l) => l.rel === 'index')?.href;
      if (index !== undefined) c.indexUrl = index;
      if (md.datetime !== undefined) c.datetime = md.datetime;
      return c;
    });
    return { kind: 'framework-notification', capabilityListUrl, changes, document: doc };
  }
  const changes: ResourceChange[] = doc.entries.map((e, i) => {
    const md = e.md;
    if (e.loc === '') refuse('entry without <loc>', url, i + 1);
    if (md === undefined || !isChangeType(md.change)) refuse('entry without a valid rs:md change', url, i + 1);
    if (md.capability !== undefined) refuse('framework change mixed into a change notification', url, i + 1);
    if (md.invalid !== undefined && Object.keys(md.invalid).length > 0) {
      refuse(`invalid rs:md attribute(s): ${Object.keys(md.invalid).join(', ')}`, url, i + 1);
    }
    const c: { -readonly [K in keyof ResourceChange]: ResourceChange[K] } = { uri: e.loc, change: md.change };
    if (md.datetime !== undefined) c.datetime = md.datetime;
    if (e.lastmod !== undefined) c.lastmod = e.lastmod;
    if (md.hash !== undefined) c.hash = md.hash;
    if (md.length !== undefined) c.length = md.length;
    if (md.type !== undefined) c.type = md.type;
    return c;
  });
  return { kind: 'change-notification', capabilityListUrl, changes, document: doc };
}
