/**
 * The Destination side of ResourceSync (§5.2): discovery, baseline, incremental and audit of a local copy.
 *
 * @module
 */
// Operations and library API (helper F).
export {
  Destination,
  type DestinationOptions,
  type SourceDocuments,
  documentsOf,
  sourceHttpOptions,
} from './destination.js';
export { type FollowEvent, type FollowOptions, type FollowStats, followCopy } from './follow.js';
export type {
  AuditCounts,
  Operation,
  ResourceAction,
  SyncCounts,
  SyncEvent,
  SyncFailure,
  SyncSummary,
} from './events.js';
export type { Durability } from './context.js';
export { DumpPackage, checkPackageName, downloadPackage, fetchPackage, manifestPathToName } from './dump.js';
export {
  type ChangePlan,
  ChangeCoalescer,
  type PlannedChange,
  candidateUrls,
  coalesceChanges,
  findGap,
  isChangeApplied,
  isUpToDate,
  selectIntervals,
} from './plan.js';
// Transport, discovery, path mapping, state and verified install (helper E).
export {
  CLIENT_VERSION,
  DEFAULT_USER_AGENT,
  HttpClient,
  type HttpClientOptions,
  type HttpResponse,
  type HttpStats,
  httpStatusOf,
  isRetriable,
  parseRetryAfter,
  readBody,
  type RequestInit,
  retryWhole,
} from '../http/client.js';
export {
  type CapabilitySet,
  capabilityListName,
  type DiscoverOptions,
  type DiscoveryResult,
  discover,
  findHtmlLinks,
  findRobotsSitemaps,
  openRemoteDocument,
  withClosingEntries,
} from './discovery.js';
export { findLink, parseLinkHeader, type WebLink } from '../http/link.js';
export {
  createPathMapper,
  decodeSegment,
  encodeSegment,
  ensureParentDirectory,
  forgetVerifiedDirectories,
  type PathMapper,
  type PathMapperOptions,
  STATE_DIR_NAME,
} from './paths.js';
export {
  DestinationState,
  type JournalEntry,
  type ResourceRecord,
  STATE_DB_NAME,
  STATE_SCHEMA_VERSION,
  type Watermark,
} from './state.js';
export {
  type DownloadOptions,
  downloadAndInstall,
  downloadResumable,
  type Expected,
  type InstallOptions,
  type InstallResult,
  installFromStream,
  installTempPath,
  isInstallTempName,
  mirrorsOf,
  type ResumableOptions,
  syncInstalledDirectories,
  verify,
} from './install.js';
