/**
 * The splitter: writes a list as one document, or, past the limits of §4.2 (50,000 entries / 50 MB), as
 * several documents plus an index (§10.2 Resource List Index, §11.1, §12.2 Change List Index, §13.1).
 *
 * @module
 */
import { createReadStream } from 'node:fs';
import { type FileHandle, mkdir, open, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { MAX_DOCUMENT_BYTES, MAX_ENTRIES } from '../core/constants.js';
import { ResourceSyncError } from '../core/errors.js';
import { type DocumentHeader, documentKind, type Entry, type Link, type Metadata } from '../core/model.js';
import { syncDir, tempPathFor } from '../io/atomic.js';
import { DocumentSerializer } from './writer.js';

/** Options of {@link writeSplitDocuments}. */
export interface SplitOptions {
  /** Header of the list (root `rs:md`, links such as `up`, namespaces); copied to every part. */
  readonly header: DocumentHeader;
  /** The entries, in order (a Change List's in forward chronological order). Pulled once. */
  readonly entries: Iterable<Entry> | AsyncIterable<Entry>;
  /** Directory the files go to (created if missing). */
  readonly dir: string;
  /** URL of `dir` (ending in `/`): part and index URLs are `new URL(fileName, baseUrl)`. */
  readonly baseUrl: string;
  /** File name of part `n` (1-based), e.g. `(n) => \`resourcelist-${n}.xml\``. A plain name, no `/`. */
  readonly name: (n: number) => string;
  /**
   * File name of the index; also of the one document when everything fits (so the URL a Capability List
   * points at is the same either way), unless {@link singleName} says otherwise.
   */
  readonly indexName: string;
  /** File name of the one document when no split is needed (default: {@link indexName}). */
  readonly singleName?: string;
  /**
   * Header of the index (default: the list's header with root `<sitemapindex>`, the same `rs:md` and links
   * except `index`).
   */
  readonly indexHeader?: DocumentHeader;
  /** Most entries per document (default 50,000, §4.2). */
  readonly maxEntries?: number;
  /** Most bytes per document (default 52,428,800, §4.2). */
  readonly maxBytes?: number;
  /** fsync each file and the directory (default true). */
  readonly fsync?: boolean;
  readonly signal?: AbortSignal;
  /**
   * Write the index when the entries are split (default true). False: only the parts are written (each still
   * links to {@link indexName}) and the caller writes an index listing them among others (e.g. the Change List
   * Index of a Source whose every Change List may be split).
   */
  readonly writeIndex?: boolean;
}

/** One file written by {@link writeSplitDocuments}. */
export interface SplitDocument {
  readonly path: string;
  readonly url: string;
  /** Entries in the document (for the index: the number of parts). */
  readonly entries: number;
  readonly bytes: number;
  /** The root `rs:md` the document was written with. */
  readonly md?: Metadata;
}

/** What {@link writeSplitDocuments} wrote. */
export interface SplitResult {
  /** True when the entries did not fit one document: `documents` are the parts and `index` is set. */
  readonly split: boolean;
  /** The one document, or the parts in order. */
  readonly documents: readonly SplitDocument[];
  readonly index?: SplitDocument;
  /** Entries written in all. */
  readonly entries: number;
  /** Bytes written in all (parts and index). */
  readonly bytes: number;
}

const FLUSH_CHARS = 262_144;
/** Room kept in every part for its final header's datetimes (a long W3C Datetime is ~30 characters). */
const DATETIME_ROOM = 40;

const CHANGE_CAPABILITIES = new Set(['changelist', 'changedump']);

function checkName(name: string): string {
  if (name === '' || name === '.' || name === '..' || /[/\\\0]/.test(name))
    throw new ResourceSyncError('RS_UNSAFE_PATH', `"${name}" is not a plain file name`);
  return name;
}

/** A temporary file written in large appends. */
class BodyFile {
  bytes = 0;
  private parts: string[] = [];
  private chars = 0;
  private constructor(
    readonly path: string,
    private fh: FileHandle | undefined,
  ) {}

  static async create(path: string): Promise<BodyFile> {
    return new BodyFile(path, await open(path, 'wx', 0o644));
  }

  /** Buffers `s`; returns a promise only when the buffer is written out (await it then). */
  append(s: string, bytes: number): Promise<void> | undefined {
    this.parts.push(s);
    this.chars += s.length;
    this.bytes += bytes;
    return this.chars >= FLUSH_CHARS ? this.flush() : undefined;
  }

  async flush(): Promise<void> {
    if (this.parts.length === 0) return;
    const buf = Buffer.from(this.parts.join(''), 'utf8');
    this.parts = [];
    this.chars = 0;
    await writeAll(this.fh!, buf);
  }

  async close(sync: boolean): Promise<void> {
    await this.flush();
    if (sync) await this.fh!.sync();
    await this.fh!.close();
    this.fh = undefined;
  }

  async abandon(): Promise<void> {
    await this.fh?.close().catch(() => undefined);
    this.fh = undefined;
    await unlink(this.path).catch(() => undefined);
  }
}

async function syncFile(path: string): Promise<void> {
  const fh = await open(path, 'r+');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

async function writeAll(fh: FileHandle, buf: Uint8Array): Promise<void> {
  let off = 0;
  while (off < buf.byteLength) off += (await fh.write(buf, off, buf.byteLength - off)).bytesWritten;
}

function isSyncIterable<T>(x: Iterable<T> | AsyncIterable<T>): x is Iterable<T> {
  return typeof (x as Iterable<T>)[Symbol.iterator] === 'function';
}

interface Part {
  /** Body file: entries only (part 1 before the split is known: header + entries, see `bodyOffset`). */
  body: BodyFile;
  /** Bytes of `body` before the first entry (the provisional header of part 1). */
  bodyOffset: number;
  entries: number;
  /** The header already written is the part's final one (snapshot kinds, parts after the first). */
  headed: boolean;
  firstDatetime?: string;
  lastDatetime?: string;
}

/**
 * Writes `entries` as one document, or as parts plus an index when they exceed `maxEntries` or `maxBytes`
 * per document. Every part carries the header's links plus `rs:ln rel="index"` to the index; the index
 * lists the parts with their `rs:md` (`at`/`completed` for snapshots; `from`/`until` for Change Lists and
 * Change Dumps, each part's interval ending at its last entry's `datetime`, the last part's at the header's
 * `until` if any).
 *
 * Streaming: part 1 is written as a single document; only when an entry does not fit is the split known,
 * and then part 1 is re-headed (its body copied once, after its new header with the `index` link). Later
 * parts of a snapshot (Resource List, Resource Dump) are written with their final header straight away;
 * those of a Change List or Change Dump get their header when full (their `until` is known only then), so
 * each is copied once. Memory: one entry plus a 256 KiB write buffer. All files appear at the end
 * (temporary files renamed, parts before the index); on failure the temporary files are removed and nothing
 * is replaced. Stale parts from an earlier, longer run are not removed.
 *
 * @throws ResourceSyncError `RS_LIMIT` (one entry larger than a document may be; more parts than an index
 *   may list), `RS_UNSAFE_PATH` (a file name with `/`), `RS_IO`, `RS_INVALID_VALUE`, `RS_ABORTED`.
 * @example
 * ```ts
 * const r = await writeSplitDocuments({
 *   header: createHeader('resource-list', { at }, [{ rel: 'up', href: capabilityListUrl }]),
 *   entries: store.resources(), dir: './site/dataset1', baseUrl: 'https://example.org/dataset1/',
 *   name: (n) => `resourcelist-${n}.xml`, indexName: 'resourcelist.xml',
 * });
 * ```
 */
export async function writeSplitDocuments(options: SplitOptions): Promise<SplitResult> {
  const { header, dir, baseUrl, signal } = options;
  const maxEntries = options.maxEntries ?? MAX_ENTRIES;
  const maxBytes = options.maxBytes ?? MAX_DOCUMENT_BYTES;
  const sync = options.fsync ?? true;
  const indexName = checkName(options.indexName);
  const singleName = checkName(options.singleName ?? indexName);
  const indexUrl = new URL(indexName, baseUrl).href;
  const capability = header.md?.capability;
  const isChange = capability !== undefined && CHANGE_CAPABILITIES.has(capability);
  await mkdir(dir, { recursive: true }).catch((e: unknown) => {
    throw new ResourceSyncError('RS_IO', `cannot create ${dir}: ${(e as Error).message}`, { cause: e });
  });

  const baseLinks = header.links.filter((l) => l.rel !== 'index');
  const partLinks: Link[] = [...baseLinks, { rel: 'index', href: indexUrl }];
  const partHeader = (md: Metadata | undefined): DocumentHeader => {
    const h: DocumentHeader = { ...header, links: partLinks };
    if (md !== undefined) h.md = md;
    return h;
  };
  const entrySer = new DocumentSerializer(header);
  const tail = entrySer.tail();
  const tailBytes = Buffer.byteLength(tail);
  // The largest header any part can get: index link, and room for from/until values.
  const room = 'x'.repeat(DATETIME_ROOM);
  const worstMd: Metadata | undefined =
    header.md === undefined ? undefined : isChange ? { ...header.md, from: room, until: room } : header.md;
  const headRoom = Math.max(
    Buffer.byteLength(new DocumentSerializer(partHeader(worstMd)).head()),
    Buffer.byteLength(entrySer.head()),
  );
  const budget = maxBytes - headRoom - tailBytes;

  const temps: string[] = [];
  const finals: { temp: string; path: string }[] = [];
  const parts: SplitDocument[] = [];
  let part: Part | undefined;
  let split = false;
  let total = 0;
  let totalBytes = 0;

  /**
   * A new body file. Part 1 starts with the list's own header (right if no split follows); a later part of
   * a snapshot kind starts with its final header (the same for every part), so it needs no copy at the end.
   */
  const newBody = async (first: boolean): Promise<Part> => {
    const tmp = tempPathFor(join(dir, first ? singleName : checkName(options.name(parts.length + 1))));
    temps.push(tmp);
    const body = await BodyFile.create(tmp);
    const head = first ? entrySer.head() : isChange ? undefined : new DocumentSerializer(partHeader(header.md)).head();
    let bodyOffset = 0;
    if (head !== undefined) {
      bodyOffset = Buffer.byteLength(head);
      await body.append(head, bodyOffset);
    }
    return { body, bodyOffset, entries: 0, headed: !first && head !== undefined };
  };

  /** The md of part `n` (1-based) for the index and for the part itself. */
  const mdOfPart = (p: Part, last: boolean): Metadata | undefined => {
    if (header.md === undefined) return undefined;
    const md: Metadata = { ...header.md };
    if (isChange) {
      const prev = parts[parts.length - 1];
      const from = prev === undefined ? header.md.from : (prev.md?.until ?? p.firstDatetime);
      if (from === undefined) delete md.from;
      else md.from = from;
      const until = last ? header.md.until : (p.lastDatetime ?? header.md.until);
      if (until === undefined) delete md.until;
      else md.until = until;
    }
    return md;
  };

  /** Turns a full (or the last) part into its final file: new header + body + tail, into a temp file. */
  const finishPart = async (p: Part, last: boolean): Promise<void> => {
    const n = parts.length + 1;
    const fileName = checkName(options.name(n));
    const path = join(dir, fileName);
    const md = mdOfPart(p, last);
    if (p.headed) {
      await p.body.append(tail, tailBytes);
      await p.body.close(false);
      finals.push({ temp: p.body.path, path });
      const doc: SplitDocument = {
        path,
        url: new URL(fileName, baseUrl).href,
        entries: p.entries,
        bytes: p.body.bytes,
      };
      parts.push(md === undefined ? doc : { ...doc, md });
      totalBytes += p.body.bytes;
      return;
    }
    await p.body.close(false);
    const head = new DocumentSerializer(partHeader(md)).head();
    const tmp = tempPathFor(path);
    temps.push(tmp);
    const fh = await open(tmp, 'wx', 0o644);
    let bytes = 0;
    try {
      const headBuf = Buffer.from(head, 'utf8');
      await writeAll(fh, headBuf);
      bytes += headBuf.byteLength;
      const rs = createReadStream(p.body.path, { start: p.bodyOffset, highWaterMark: 1 << 20 });
      for await (const chunk of rs) {
        await writeAll(fh, chunk as Buffer);
        bytes += (chunk as Buffer).byteLength;
      }
      const tailBuf = Buffer.from(tail, 'utf8');
      await writeAll(fh, tailBuf);
      bytes += tailBuf.byteLength;
    } finally {
      await fh.close();
    }
    await unlink(p.body.path).catch(() => undefined);
    finals.push({ temp: tmp, path });
    const doc: SplitDocument = { path, url: new URL(fileName, baseUrl).href, entries: p.entries, bytes };
    parts.push(md === undefined ? doc : { ...doc, md });
    totalBytes += bytes;
  };

  try {
    part = await newBody(true);
    const rollOver = async (): Promise<void> => {
      split = true;
      await finishPart(part!, false);
      if (parts.length >= maxEntries)
        throw new ResourceSyncError('RS_LIMIT', `more than ${maxEntries} parts: an index cannot list them all`);
      part = await newBody(false);
    };
    /** Adds one entry; returns a promise only when there is I/O to wait for. */
    const add = (e: Entry): Promise<void> | undefined => {
      if (signal?.aborted === true) throw new ResourceSyncError('RS_ABORTED', 'writing was aborted');
      const s = entrySer.entry(e);
      const b = Buffer.byteLength(s);
      if (b > budget)
        throw new ResourceSyncError('RS_LIMIT', `an entry of ${b} bytes cannot fit a document of ${maxBytes} bytes`, {
          entry: total + 1,
        });
      const p = part!;
      if (p.entries >= maxEntries || p.body.bytes - p.bodyOffset + b > budget) {
        return rollOver().then(() => {
          const w = place(part!, e, s, b);
          return w;
        });
      }
      return place(p, e, s, b);
    };
    const place = (p: Part, e: Entry, s: string, b: number): Promise<void> | undefined => {
      p.entries++;
      total++;
      if (isChange) {
        const dt = e.md?.datetime ?? e.lastmod;
        if (dt !== undefined) {
          p.firstDatetime ??= dt;
          p.lastDatetime = dt;
        }
      }
      return p.body.append(s, b);
    };
    const source = options.entries;
    if (isSyncIterable(source)) {
      for (const e of source) {
        const w = add(e);
        if (w !== undefined) await w;
      }
    } else {
      for await (const e of source) {
        const w = add(e);
        if (w !== undefined) await w;
      }
    }
    let index: SplitDocument | undefined;
    if (!split) {
      await part.body.append(tail, tailBytes);
      await part.body.close(false);
      const path = join(dir, singleName);
      finals.push({ temp: part.body.path, path });
      const doc: SplitDocument = {
        path,
        url: new URL(singleName, baseUrl).href,
        entries: part.entries,
        bytes: part.body.bytes,
      };
      parts.push(header.md === undefined ? doc : { ...doc, md: header.md });
      totalBytes += part.body.bytes;
    } else {
      await finishPart(part, true);
      if (options.writeIndex !== false) index = await writeIndex();
    }
    part = undefined;
    // Flush every file to disk at once (the disk can combine the work), then rename: parts before the index.
    if (sync) await Promise.all(finals.map((f) => syncFile(f.temp)));
    for (const f of finals) await rename(f.temp, f.path);
    if (sync) await syncDir(dir);
    return index === undefined
      ? { split, documents: parts, entries: total, bytes: totalBytes }
      : { split, documents: parts, index, entries: total, bytes: totalBytes };
  } catch (e) {
    await part?.body.abandon();
    for (const t of temps) await unlink(t).catch(() => undefined);
    if (e instanceof ResourceSyncError) throw e;
    throw new ResourceSyncError('RS_IO', `cannot write documents in ${dir}: ${(e as Error).message}`, { cause: e });
  }

  async function writeIndex(): Promise<SplitDocument> {
    let ih = options.indexHeader;
    if (ih === undefined) {
      ih = { ...header, root: 'sitemapindex', kind: documentKind('sitemapindex', capability), links: baseLinks };
      if (header.md !== undefined) {
        const md: Metadata = { ...header.md };
        if (isChange) {
          const first = parts[0]?.md?.from;
          if (first !== undefined) md.from = first;
        }
        ih.md = md;
      }
    }
    const ser = new DocumentSerializer(ih);
    let xml = ser.head();
    for (const p of parts) {
      const entry: Entry = { element: 'sitemap', loc: p.url, links: [] };
      const md = indexEntryMd(p.md);
      if (md !== undefined) entry.md = md;
      xml += ser.entry(entry);
    }
    xml += ser.tail();
    const path = join(dir, indexName);
    const tmp = tempPathFor(path);
    temps.push(tmp);
    const buf = Buffer.from(xml, 'utf8');
    const fh = await open(tmp, 'wx', 0o644);
    try {
      await writeAll(fh, buf);
    } finally {
      await fh.close();
    }
    finals.push({ temp: tmp, path });
    totalBytes += buf.byteLength;
    const doc: SplitDocument = { path, url: indexUrl, entries: parts.length, bytes: buf.byteLength };
    return ih.md === undefined ? doc : { ...doc, md: ih.md };
  }

  /** The `rs:md` of a part's `<sitemap>` in the index: its interval or snapshot times, not its capability. */
  function indexEntryMd(md: Metadata | undefined): Metadata | undefined {
    if (md === undefined) return undefined;
    const out: Metadata = {};
    if (isChange) {
      if (md.from !== undefined) out.from = md.from;
      if (md.until !== undefined) out.until = md.until;
    } else {
      if (md.at !== undefined) out.at = md.at;
      if (md.completed !== undefined) out.completed = md.completed;
    }
    return Object.keys(out).length === 0 ? undefined : out;
  }
}
