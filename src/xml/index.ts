/**
 * Streaming reader, writer and splitter of Sitemap / ResourceSync documents (Z39.99-2017 §4, sitemaps.org 0.9).
 *
 * - {@link openDocument}: bytes (a file, an HTTP body, any `AsyncIterable<Uint8Array>`; gzip recognised by its
 *   magic bytes) in, the header first, then an async generator of entries. Namespace-aware with any prefixes;
 *   DTDs refused; depth, entry size and document size bounded; errors carry URL, line and column. Memory: one
 *   input chunk and the entries parsed from it, whatever the number of entries. Its own tokenizer, about 2x the
 *   speed of a namespace-aware saxes loop (`bench/xml-read.ts`).
 * - {@link readDocument}: the same into memory, for small documents.
 * - {@link writeDocument} / {@link writeDocumentFile} / {@link serializeDocument}: the model back to XML,
 *   deterministic (fixed element and attribute order, 2-space indentation), streamed in chunks with
 *   backpressure; files are written atomically. Unknown elements and attributes survive the round trip.
 * - {@link writeSplitDocuments}: one document, or parts plus an index past 50,000 entries / 50 MB (§4.2).
 *
 * @module
 */
export { type ByteSource, fileSource } from './bytes.js';
export { MAX_HEADER_ELEMENTS, MAX_ISSUES, type ReadIssue } from './parser.js';
export {
  DEFAULT_MAX_BYTES,
  DEFAULT_MAX_DEPTH,
  DEFAULT_MAX_ENTRY_BYTES,
  type DocumentStream,
  openDocument,
  type ReadOptions,
  readDocument,
} from './reader.js';
export { serializeDocument, type WriteOptions, writeDocument, writeDocumentFile } from './writer.js';
export { type SplitDocument, type SplitOptions, type SplitResult, writeSplitDocuments } from './split.js';
