/**
 * The Destination side of ResourceSync (§5.2): discovery, baseline, incremental and audit of a local copy.
 *
 * @module
 */
// Operations and library API (helper F).
export { Destination, type DestinationOptions, type SourceDocuments, documentsOf } from './destination.js';
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
export { DumpPackage, checkPackageName, downloadPackage, manifestPathToName } from './dump.js';
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
