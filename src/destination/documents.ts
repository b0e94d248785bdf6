/**
 * Reading the Source's capability documents as streams: a Resource List or its Index (§10, §10.2), the
 * entries of every list in index order; a Change List Index's lists with their intervals (§12.2).
 *
 * @module
 */
import { parseDatetime } from '../core/datetime.js';
import { ResourceSyncError } from '../core/errors.js';
import type { DocumentHeader, DocumentKind, Entry } from '../core/model.js';
import type { DocumentStream } from '../xml/index.js';
import type { SyncContext } from './context.js';
import { openDocument } from '../xml/index.js';
import { readBody, retryWhole } from '../http/client.js';
import { type ExpectedContent, type IntervalDocument, expectedOf } from './plan.js';

/** Nesting limit for indexes of indexes (the standard has one level; a little slack for odd Sources). */
const MAX_INDEX_DEPTH = 3;

/**
 * GETs a whole document into memory, then opens it for streaming. Reading the body at once (rather than as the
 * entries are consumed) keeps no connection open while resources are fetched for minutes: a Source's
 * keep-alive or idle timeout would otherwise cut a slowly read list. A transfer cut mid-body is retried.
 * Memory: one document's bytes, bounded by the client's `maxDocumentBytes` (Sitemaps are ≤ 50 MB, §4.2).
 */
export async function fetchDocument(ctx: SyncContext, url: string): Promise<DocumentStream> {
  const maxBytes = ctx.client.maxDocumentBytes;
  const retry: { retries: number; signal?: AbortSignal } = { retries: 2 };
  if (ctx.options.signal !== undefined) retry.signal = ctx.options.signal;
  const { bytes, finalUrl } = await retryWhole(async () => {
    const res = await ctx.client.get(url, {
      ...(ctx.options.signal === undefined ? {} : { signal: ctx.options.signal }),
      maxBytes,
    });
    return { bytes: await readBody(res, maxBytes), finalUrl: res.url };
  }, retry);
  return openDocument(bytes, { url: finalUrl, maxBytes });
}

/** Opens a remote document and checks that it is one of `kinds`. */
export async function openExpected(
  ctx: SyncContext,
  url: string,
  kinds: readonly DocumentKind[],
  what: string,
): Promise<DocumentStream> {
  const doc = await fetchDocument(ctx, url);
  ctx.emit({ type: 'document', url, kind: doc.header.kind });
  if (!kinds.includes(doc.header.kind)) {
    await doc.entries.return(undefined);
    throw new ResourceSyncError('RS_NOT_RESOURCESYNC', `expected ${what}, found ${describeKind(doc.header)}`, { url });
  }
  return doc;
}

function describeKind(h: DocumentHeader): string {
  if (h.kind === 'sitemap' || h.kind === 'sitemap-index')
    return `a plain Sitemap (<${h.root}> without rs:md capability)`;
  if (h.kind === 'unknown') return `capability ${JSON.stringify(h.md?.capability ?? '')}`;
  return `a ${h.kind.replace(/-/g, ' ')}`;
}

/** A list tree being read: its entries and, once read, the snapshot time (`at`) to use as watermark. */
export interface ListTree {
  readonly entries: AsyncGenerator<Entry, void, undefined>;
  /** The earliest `at` among the index and the lists read so far. */
  at(): string | undefined;
  /** Number of list documents read so far. */
  documents(): number;
}

/**
 * Streams the entries of a Resource List or Resource List Index (or a Resource Dump / Index, with
 * `dump: true`), following the index's `<sitemap>` entries in order. Memory: one list document's parser
 * state at a time; entries are yielded, never collected.
 */
export async function openListTree(ctx: SyncContext, url: string, dump = false): Promise<ListTree> {
  const listKind: DocumentKind = dump ? 'resource-dump' : 'resource-list';
  const indexKind: DocumentKind = dump ? 'resource-dump-index' : 'resource-list-index';
  const what = dump ? 'a Resource Dump or Resource Dump Index' : 'a Resource List or Resource List Index';
  let earliest: { text: string; ms: number } | undefined;
  let docs = 0;
  const noteAt = (h: DocumentHeader): void => {
    const t = h.md?.at;
    const p = t === undefined ? undefined : parseDatetime(t);
    if (t !== undefined && p !== undefined && (earliest === undefined || p.ms < earliest.ms))
      earliest = { text: t, ms: p.ms };
  };
  const kinds: DocumentKind[] = [listKind, indexKind];
  if (!dump) kinds.push('sitemap', 'sitemap-index');
  const top = await openExpected(ctx, url, kinds, what);
  noteAt(top.header);
  docs++;
  async function* walk(doc: DocumentStream, depth: number): AsyncGenerator<Entry, void, undefined> {
    const isIndex = doc.header.root === 'sitemapindex';
    if (!isIndex) {
      yield* doc.entries;
      return;
    }
    const children: string[] = [];
    // An index is small (≤ 50,000 URLs); collect it so no connection stays open while its lists are read.
    for await (const e of doc.entries) if (e.loc !== '') children.push(e.loc);
    for (const child of children) {
      if (depth >= MAX_INDEX_DEPTH)
        throw new ResourceSyncError('RS_LIMIT', `indexes nested deeper than ${MAX_INDEX_DEPTH}`, { url: child });
      const sub = await openExpected(ctx, child, kinds, what);
      noteAt(sub.header);
      docs++;
      yield* walk(sub, depth + 1);
    }
  }
  return { entries: walk(top, 1), at: () => earliest?.text, documents: () => docs };
}

/** A change document of an index, with its interval. */
export interface ChangeDocumentRef extends IntervalDocument {
  /** The opened document when the URL given was the list itself (reused instead of fetched twice). */
  readonly opened?: DocumentStream;
  /** What the index entry declares of the document (`rs:md length`, `hash`): a Change Dump package is checked. */
  readonly declared?: ExpectedContent;
}

/** The documents a Change List Index (or Change Dump Index) lists, or the list itself. */
export interface ChangeIndex {
  readonly url: string;
  /** `from` of the index (or of the single list). */
  readonly from?: string;
  readonly docs: ChangeDocumentRef[];
}

/**
 * Reads a Change List Index into its lists' intervals, or wraps a single Change List (§12.2). Memory: the
 * index's entries (≤ 50,000 small records); a single list is kept open, not read.
 */
export async function readChangeListIndex(ctx: SyncContext, url: string): Promise<ChangeIndex> {
  const doc = await openExpected(ctx, url, ['change-list', 'change-list-index'], 'a Change List or Change List Index');
  return indexFrom(url, doc);
}

/** Reads a Change Dump (the list of packages with their intervals, §13.1) or its index. */
export async function readChangeDumpIndex(ctx: SyncContext, url: string): Promise<ChangeIndex> {
  const doc = await openExpected(ctx, url, ['change-dump', 'change-dump-index'], 'a Change Dump');
  if (doc.header.kind === 'change-dump') {
    // Entries of a Change Dump are the packages themselves.
    const docs: ChangeDocumentRef[] = [];
    let position = 0;
    for await (const e of doc.entries) docs.push(intervalOf(e, ++position));
    return withFrom({ url, docs }, doc.header.md?.from);
  }
  const docs: ChangeDocumentRef[] = [];
  let position = 0;
  for await (const e of doc.entries) {
    const sub = await openExpected(ctx, e.loc, ['change-dump'], 'a Change Dump');
    for await (const p of sub.entries) docs.push(intervalOf(p, ++position));
  }
  return withFrom({ url, docs }, doc.header.md?.from);
}

async function indexFrom(url: string, doc: DocumentStream): Promise<ChangeIndex> {
  if (doc.header.kind === 'change-list') {
    const ref: { url: string; position: number; from?: string; until?: string; opened: DocumentStream } = {
      url,
      position: 1,
      opened: doc,
    };
    if (doc.header.md?.from !== undefined) ref.from = doc.header.md.from;
    if (doc.header.md?.until !== undefined) ref.until = doc.header.md.until;
    return withFrom({ url, docs: [ref] }, doc.header.md?.from);
  }
  const docs: ChangeDocumentRef[] = [];
  let position = 0;
  for await (const e of doc.entries) if (e.loc !== '') docs.push(intervalOf(e, ++position));
  return withFrom({ url, docs }, doc.header.md?.from);
}

function intervalOf(e: Entry, position: number): ChangeDocumentRef {
  const ref: {
    url: string;
    position: number;
    from?: string;
    until?: string;
    lastmod?: string;
    declared?: ExpectedContent;
  } = {
    url: e.loc,
    position,
  };
  const declared = expectedOf(e);
  if (declared.length !== undefined || declared.hashes !== undefined) ref.declared = declared;
  if (e.md?.from !== undefined) ref.from = e.md.from;
  if (e.md?.until !== undefined) ref.until = e.md.until;
  if (e.lastmod !== undefined) ref.lastmod = e.lastmod;
  return ref;
}

function withFrom(index: { url: string; docs: ChangeDocumentRef[] }, from: string | undefined): ChangeIndex {
  return from === undefined ? index : { ...index, from };
}
