/**
 * Generation of the Source's documents from a store snapshot: Source Description (§8), Capability List (§9),
 * Resource List and Index (§10), Change List and Index (§12). Dumps are in `dumps.ts`.
 *
 * Every file is written atomically (temporary file + rename), parts before the index that lists them, so a
 * document is never advertised before it exists and is complete. Memory: one entry plus one output chunk per
 * document being written (entries stream from the snapshot's cursor).
 *
 * @module
 */
import { unlink } from 'node:fs/promises';
import { formatDatetime } from '../core/datetime.js';
import { formatHashes } from '../core/hash.js';
import {
  createHeader,
  type DocumentHeader,
  type DocumentKind,
  type Entry,
  type Link,
  type Metadata,
} from '../core/model.js';
import { writeDocumentFile, writeSplitDocuments } from '../xml/index.js';
import { partName, type SiteLayout } from './layout.js';
import { resourceUrl } from './paths.js';
import type { ChangeListPart, ChangeRecord, ResourceRecord, StoreSnapshot } from './store.js';

/** The capabilities a set can offer (§9). */
export type SetCapability = 'resourcelist' | 'resourcedump' | 'changelist' | 'changedump';
/** All of them, in Capability List order. */
export const SET_CAPABILITIES: readonly SetCapability[] = ['resourcelist', 'resourcedump', 'changelist', 'changedump'];

/** Configuration of a set of resources (one Capability List). */
export interface SetInfo {
  readonly name: string;
  /** `describedby` link of the set (in the Source Description entry and the Capability List). */
  readonly describedBy?: string;
  /** More Capability List entries, e.g. the notification channels (N-§3, Example 3.1). */
  readonly extraEntries?: readonly Entry[];
  /** Capabilities the set offers (default: all four). */
  readonly capabilities?: readonly SetCapability[];
  /** A WebSub hub for the set's notifications: `<rs:ln rel="hub">` on the Capability List and its `changelist` entry. */
  readonly hubUrl?: string;
}

/** Limits of generated documents. */
export interface DocumentLimits {
  /** Entries per document before splitting into an index and parts (default 50,000, §4.2). */
  readonly maxEntriesPerDocument: number;
  /** Bytes per document before splitting (default 52,428,800, §4.2). */
  readonly maxBytesPerDocument?: number;
}

/** Everything generation needs besides the snapshot. */
export interface GenerationContext {
  readonly layout: SiteLayout;
  readonly limits: DocumentLimits;
  /** fsync each written file (default true; tests may turn it off). */
  readonly fsync?: boolean;
}

/** The files a generation wrote (absolute paths). */
export type WrittenFiles = string[];

function link(rel: string, href: string, extra: Partial<Link> = {}): Link {
  return { rel, href, ...extra };
}

function header(kind: DocumentKind, md: Metadata, links: Link[]): DocumentHeader {
  return createHeader(kind, md, links);
}

const DAY_MS = 86_400_000;
/** `YYYY-MM-DDT` of recent days (bounded: cleared past 4,096 days). */
const dayPrefixes = new Map<number, string>();
const two = (n: number): string => (n < 10 ? `0${n}` : `${n}`);

/**
 * {@link formatDatetime} for the hot path of a list: the same text, the date part cached per day, the time
 * of day from arithmetic (no Date object a call). Falls back to formatDatetime outside 1970–9999.
 */
export function formatDatetimeFast(ms: number): string {
  if (!Number.isSafeInteger(ms) || ms < 0 || ms >= 253_402_300_800_000) return formatDatetime(ms);
  const day = Math.floor(ms / DAY_MS);
  let prefix = dayPrefixes.get(day);
  if (prefix === undefined) {
    if (dayPrefixes.size >= 4096) dayPrefixes.clear();
    prefix = new Date(day * DAY_MS).toISOString().slice(0, 11);
    dayPrefixes.set(day, prefix);
  }
  let rest = ms - day * DAY_MS;
  const frac = rest % 1000;
  rest = (rest - frac) / 1000;
  const sec = rest % 60;
  rest = (rest - sec) / 60;
  const min = rest % 60;
  const text = `${prefix}${two((rest - min) / 60)}:${two(min)}:${two(sec)}`;
  return frac === 0 ? `${text}Z` : `${text}.${frac < 10 ? '00' : frac < 100 ? '0' : ''}${frac}Z`;
}

/** A relative path that percent-encoding leaves as it is (what `encodeURIComponent` keeps, and `/`). */
const PLAIN_PATH = /^[A-Za-z0-9\-_.!~*'()/]*$/;

/** The entry of a resource in a Resource List (§10.1) or a dump manifest (§11.2: with `path`). */
export function resourceEntry(base: URL, r: ResourceRecord, path?: string): Entry {
  const md: Metadata = { length: r.length };
  const hash = formatHashes(r.hashes);
  if (hash !== '') md.hash = hash;
  if (r.type !== undefined) md.type = r.type;
  if (path !== undefined) md.path = path;
  const loc = PLAIN_PATH.test(r.uri) ? base.href + r.uri : resourceUrl(base, r.uri);
  return { element: 'url', loc, lastmod: formatDatetimeFast(r.lastmodMs), md, links: [] };
}

/** The entry of a change in a Change List (§12.1) or a Change Dump Manifest (§13.2: with `path`). */
export function changeEntry(base: URL, c: ChangeRecord, path?: string): Entry {
  const md: Metadata = { change: c.change, datetime: formatDatetime(c.datetimeMs) };
  const entry: Entry = { element: 'url', loc: resourceUrl(base, c.uri), md, links: [] };
  if (c.change !== 'deleted') {
    const hash = formatHashes(c.hashes);
    if (hash !== '') md.hash = hash;
    if (c.length !== undefined) md.length = c.length;
    if (c.type !== undefined) md.type = c.type;
    if (path !== undefined) md.path = path;
    if (c.lastmodMs !== undefined) entry.lastmod = formatDatetime(c.lastmodMs);
  }
  return entry;
}

/** Writes the Source Description (§8): one entry per set's Capability List. */
export async function writeSourceDescription(
  ctx: GenerationContext,
  sets: readonly SetInfo[],
  describedBy?: string,
): Promise<WrittenFiles> {
  const links = describedBy === undefined ? [] : [link('describedby', describedBy)];
  const entries: Entry[] = sets.map((s) => ({
    element: 'url',
    loc: ctx.layout.capabilityListUrl(s.name),
    md: { capability: 'capabilitylist' },
    links: s.describedBy === undefined ? [] : [link('describedby', s.describedBy)],
  }));
  const path = ctx.layout.sourceDescriptionPath;
  await writeDocumentFile(path, header('source-description', {}, links), entries, fsyncOpt(ctx));
  return [path];
}

/** Writes a set's Capability List (§9): `up` to the Source Description, `describedby` when configured. */
export async function writeCapabilityList(ctx: GenerationContext, set: SetInfo): Promise<WrittenFiles> {
  const l = ctx.layout;
  const links: Link[] = [];
  if (set.describedBy !== undefined) links.push(link('describedby', set.describedBy));
  links.push(link('up', l.sourceDescriptionUrl));
  if (set.hubUrl !== undefined) links.push(link('hub', set.hubUrl));
  const offered = set.capabilities ?? SET_CAPABILITIES;
  const entries: Entry[] = SET_CAPABILITIES.filter((cap) => offered.includes(cap)).map((cap) => ({
    element: 'url',
    loc: l.url(set.name, `${cap}.xml`),
    md: { capability: cap },
    links: cap === 'changelist' && set.hubUrl !== undefined ? [link('hub', set.hubUrl)] : [],
  }));
  if (set.extraEntries !== undefined) entries.push(...set.extraEntries);
  const path = l.path(set.name, 'capabilitylist.xml');
  await writeDocumentFile(path, header('capability-list', {}, links), entries, fsyncOpt(ctx));
  return [path];
}

function fsyncOpt(ctx: GenerationContext): { fsync?: boolean } {
  return ctx.fsync === undefined ? {} : { fsync: ctx.fsync };
}

/** What {@link writeListOrIndex} writes. */
interface ListSpec {
  readonly kind: 'resource-list' | 'resource-dump' | 'change-dump';
  readonly indexKind: 'resource-list-index' | 'resource-dump-index' | 'change-dump-index';
  /** Number of entries (known up front from the snapshot). */
  readonly count: number;
  readonly entries: AsyncIterator<Entry> | Iterable<Entry> | AsyncIterable<Entry>;
  /** Root `rs:md` of the list (and of each part) without capability. */
  readonly md: Metadata;
  /** Root `rs:md` of the index, when different. */
  readonly indexMd?: Metadata;
  readonly setName: string;
  /** Base file name: `resourcelist` -> resourcelist.xml, resourcelist-0001.xml. */
  readonly name: string;
}

/**
 * Writes one list, or (past the entry limit) parts then the index listing them (§10.2, §4.2); each part has
 * `up` and `index` links. Returns the files written.
 */
async function writeListOrIndex(ctx: GenerationContext, spec: ListSpec): Promise<WrittenFiles> {
  const l = ctx.layout;
  const up = link('up', l.capabilityListUrl(spec.setName));
  const result = await writeSplitDocuments({
    header: header(spec.kind, spec.md, [up]),
    ...(spec.indexMd === undefined ? {} : { indexHeader: header(spec.indexKind, spec.indexMd, [up]) }),
    entries: isIterable(spec.entries) ? spec.entries : iterate(spec.entries as AsyncIterator<Entry>),
    dir: l.setDir(spec.setName),
    baseUrl: l.url(spec.setName, ''),
    name: (n) => `${spec.name}-${partName(n)}.xml`,
    indexName: `${spec.name}.xml`,
    maxEntries: ctx.limits.maxEntriesPerDocument,
    ...(ctx.limits.maxBytesPerDocument === undefined ? {} : { maxBytes: ctx.limits.maxBytesPerDocument }),
    ...fsyncOpt(ctx),
  });
  const files = result.documents.map((d) => d.path);
  if (result.index !== undefined) files.push(result.index.path);
  return files;
}

function isIterable<T>(x: AsyncIterator<T> | Iterable<T> | AsyncIterable<T>): x is Iterable<T> | AsyncIterable<T> {
  return (
    typeof (x as Iterable<T>)[Symbol.iterator] === 'function' ||
    // An iterator (which callers may go on using after this list) is wrapped; a plain iterable is not.
    (typeof (x as AsyncIterator<T>).next !== 'function' &&
      typeof (x as AsyncIterable<T>)[Symbol.asyncIterator] === 'function')
  );
}

async function* iterate<T>(it: AsyncIterator<T>): AsyncGenerator<T, void, undefined> {
  for (;;) {
    const r = await it.next();
    if (r.done === true) return;
    yield r.value;
  }
}

export { writeListOrIndex };

/**
 * Writes a set's Resource List (§10), split into a Resource List Index and parts past the limit. `at` is the
 * start of the snapshot (no change recorded after it is in the list), `completed` the moment it was taken.
 */
export async function writeResourceList(
  ctx: GenerationContext,
  snap: StoreSnapshot,
  setName: string,
): Promise<WrittenFiles> {
  const count = await snap.countResources(setName);
  const at = formatDatetime(snap.atMs);
  const completed = formatDatetime(Math.max(snap.atMs, Date.now()));
  const base = ctx.layout.baseUrl;
  const fast = snap.resourcesSync?.(setName);
  const it =
    fast === undefined
      ? (async function* () {
          for await (const r of snap.resources(setName)) yield resourceEntry(base, r);
        })()
      : undefined;
  try {
    return await writeListOrIndex(ctx, {
      kind: 'resource-list',
      indexKind: 'resource-list-index',
      count,
      // The synchronous path spares a promise per entry (3 async layers): ~2x faster for large lists.
      entries:
        fast === undefined ? it! : { [Symbol.asyncIterator]: () => mapYielding(fast, (r) => resourceEntry(base, r)) },
      md: { at, completed },
      setName,
      name: 'resourcelist',
    });
  } finally {
    await it?.return(undefined);
  }
}

/** Entries between two turns of the event loop while a list is generated (~1 ms of work). */
const YIELD_EVERY = 256;

/**
 * `source` mapped by `f`, with a real turn of the event loop (`setImmediate`) every {@link YIELD_EVERY}
 * items, so requests served by the same thread (e.g. the previous copy of this very list) keep flowing while
 * a big list is generated (~7% more CPU than a plain loop).
 */
async function* mapYielding<T, U>(source: Iterable<T>, f: (t: T) => U): AsyncGenerator<U, void, undefined> {
  let n = 0;
  for (const t of source) {
    yield f(t);
    if (++n % YIELD_EVERY === 0) await new Promise<void>((r) => setImmediate(r));
  }
}

/** Files of the Change Lists that are closed and already written (never rewritten). */
export type ClosedParts = ReadonlySet<number>;

/**
 * Writes a set's Change Lists (§12) and the Change List Index listing them: closed lists (with `until`) only
 * when missing from `closed`, the open one (no `until`) always. Entries in forward chronological order.
 * Returns the files written and the part numbers now closed and written.
 */
export async function writeChangeLists(
  ctx: GenerationContext,
  snap: StoreSnapshot,
  setName: string,
  closed: ClosedParts,
): Promise<{ files: WrittenFiles; closed: number[]; parts: ChangeListPart[] }> {
  const l = ctx.layout;
  const base = l.baseUrl;
  const parts = await snap.changeListParts(setName);
  const up = link('up', l.capabilityListUrl(setName));
  const indexLink = link('index', l.url(setName, 'changelist.xml'));
  const files: string[] = [];
  const nowClosed: number[] = [];
  const indexEntries: Entry[] = [];
  let after = 0;
  for (const p of parts) {
    const file = `changelist-${partName(p.number)}.xml`;
    const isClosed = p.untilMs !== undefined;
    const md: Metadata = { from: formatDatetime(p.fromMs) };
    if (p.untilMs !== undefined) md.until = formatDatetime(p.untilMs);
    const through = isClosed ? p.lastSeq : snap.head.seq;
    /** Datetime of the list's latest change (its index entry's `<lastmod>`), undefined while it has none. */
    let lastMs: number | undefined;
    if (!isClosed || !closed.has(p.number)) {
      const path = l.path(setName, file);
      const entries = (async function* () {
        if (p.count === 0 && isClosed) return;
        for await (const c of snap.changes({ setName, afterSeq: after, throughSeq: through })) {
          lastMs = c.datetimeMs;
          yield changeEntry(base, c);
        }
      })();
      await writeDocumentFile(path, header('change-list', md, [up, indexLink]), entries, fsyncOpt(ctx));
      files.push(path);
    } else if (p.count > 0) {
      // A closed list written earlier: its last change, by seq (one indexed row).
      for await (const c of snap.changes({ setName, afterSeq: p.lastSeq - 1, throughSeq: p.lastSeq }))
        lastMs = c.datetimeMs;
    }
    if (isClosed) nowClosed.push(p.number);
    if (p.lastSeq > after) after = p.lastSeq;
    const entry: Entry = { element: 'sitemap', loc: l.url(setName, file), md, links: [] };
    // §7: <lastmod> of an index entry, here the latest change the list holds: a Destination that is past it
    // can skip reading the list (an open list is rewritten on every change, so its file time says nothing).
    if (lastMs !== undefined) entry.lastmod = formatDatetime(lastMs);
    indexEntries.push(entry);
  }
  const first = parts[0];
  const indexMd: Metadata = first === undefined ? {} : { from: formatDatetime(first.fromMs) };
  const path = l.path(setName, 'changelist.xml');
  await writeDocumentFile(path, header('change-list-index', indexMd, [up]), indexEntries, fsyncOpt(ctx));
  files.push(path);
  return { files, closed: nowClosed, parts };
}

/** Removes files of a group that the new generation no longer lists (after the new index is in place). */
export async function removeFiles(paths: Iterable<string>): Promise<void> {
  for (const p of paths) await unlink(p).catch(() => undefined);
}
