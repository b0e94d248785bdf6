/**
 * Streaming reader, writer and splitter of Sitemap / ResourceSync documents.
 *
 * @module
 */
export { type ByteSource, fileSource } from './bytes.js';
export { MAX_ISSUES, type ReadIssue } from './parser.js';
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
