/**
 * Streaming reader, writer and splitter of Sitemap / ResourceSync documents.
 *
 * @module
 */
export { type ByteSource, fileSource } from './bytes.js';
export type { ReadIssue } from './parser.js';
export { type DocumentStream, openDocument, type ReadOptions, readDocument } from './reader.js';
