/**
 * The publishing side of ResourceSync (Z39.99-2017 §8–§13): a store (inventory + change log), document and
 * dump generation, the library-level {@link Source} and the directory-backed Source used by `serve` and
 * `publish`.
 *
 * @example A repository that is not a directory records its own changes:
 * ```ts
 * const store = await openSqliteStore({ path: 'state/source.db' });
 * const blobs = await BlobStore.open({ dir: 'state/blobs' }); // versions kept for Change Dumps
 * const source = await Source.open({ store, blobs, baseUrl: 'https://repo.example.org/', siteDir: 'state/site' });
 * await source.recordChanges([{ uri: 'items/1/a.pdf', change: 'created', type: 'application/pdf',
 *   lastmod: '2024-05-01T10:00:00Z', content: () => fileSource('a.pdf') }]);
 * const cl = await source.document('/resourcesync/default/changelist.xml'); // { path, contentType, etag, ... }
 * ```
 * @example A directory (what `resourcesync serve` does):
 * ```ts
 * const site = await openDirectorySource({ dir: './collection', baseUrl: 'http://localhost:8080/', watch: true });
 * await site.source.prepare();                // documents ready before the first request
 * const file = await site.resource('/a%20b/c.txt');
 * ```
 *
 * @module
 */
export {
  type AdapterReport,
  openRepositorySource,
  type Repository,
  type RepositoryChange,
  type RepositoryRecord,
  type RepositorySource,
  type RepositorySourceOptions,
} from './adapter.js';
export { BlobStore, type BlobStoreOptions } from './blobs.js';
export {
  type DirectorySource,
  type DirectorySourceOptions,
  openDirectorySource,
  type SetConfig,
} from './directory.js';
export { SET_CAPABILITIES, type SetCapability } from './documents.js';
export type { Content, ContentProvider, DumpLimits } from './dumps.js';
export { DOCUMENTS_DIR, SiteLayout } from './layout.js';
export { encodePath, parseBaseUrl, requestRelativePath, resourceUrl } from './paths.js';
export { fileIdOf, mediaTypeOf, sameFileState, type ScanStats, storedFileId } from './scan.js';
export {
  type GenerationReport,
  type RecordedChange,
  type DocumentEvent,
  type DocumentCapability,
  type GenerationEvent,
  type SetDefinition,
  type SiteFile,
  Source,
  type SourceChange,
  type SourceLimits,
  type SourceOptions,
} from './source.js';
export { openPgStore, openStore, STORE_ENV } from './open-store.js';
export type { PgStore, PgStoreOptions } from './pg-store.js';
export { openSqliteStore, SCHEMA_VERSION, type SqliteStoreOptions } from './sqlite-store.js';
export { checkLinks, MAX_DATETIME_LEAD_MS, MAX_LINKS_PER_RESOURCE, nextChangeDatetime } from './store.js';
export type {
  ChangeInput,
  ChangeListPart,
  ChangeQuery,
  ChangeRecord,
  RecordOptions,
  ResourceLink,
  ResourceRecord,
  RotationPolicy,
  SourceStore,
  StoreHead,
  StoreSnapshot,
} from './store.js';

import type { DirectorySource } from './directory.js';

/** What the HTTP server needs from a Source (see `directory.ts`); a {@link DirectorySource} is one. */
export type SourceSite = Pick<
  DirectorySource,
  | 'baseUrl'
  | 'sourceDescriptionUrl'
  | 'document'
  | 'resource'
  | 'capabilityListUrl'
  | 'robotsTxt'
  | 'onChange'
  | 'close'
>;
export {
  createSourceServer,
  type ListeningAddress,
  type RequestLogEntry,
  type SourceServer,
  type SourceServerOptions,
} from './server.js';
