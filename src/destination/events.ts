/**
 * Progress events and the summary of a Destination operation.
 *
 * @module
 */
import type { ErrorCode } from '../core/errors.js';

/**
 * The three operations of §5.2, and `notification`: changes a change notification (N-§4) carried, applied as an
 * incremental run applies a Change List's, without moving the watermark (see `Destination.applyNotified`).
 */
export type Operation = 'baseline' | 'incremental' | 'audit' | 'notification';

/** What happened to one resource. */
export type ResourceAction =
  | 'created'
  | 'updated'
  /** Deleted at the Source and removed locally (`--delete`). */
  | 'deleted'
  /** Deleted at the Source, recorded, file kept (no `--delete`). */
  | 'deletion-recorded'
  /** Already present with the same content. */
  | 'skipped'
  | 'failed'
  /** Refused: outside the Source's authority or an unsafe path. */
  | 'refused';

/** An event during an operation. Listeners must not throw. */
export type SyncEvent =
  | { readonly type: 'start'; readonly operation: Operation; readonly source: string; readonly dryRun: boolean }
  | { readonly type: 'resume'; readonly op: string; readonly started: string }
  | { readonly type: 'document'; readonly url: string; readonly kind: string }
  | { readonly type: 'package'; readonly url: string; readonly files: number }
  /** A dump package being downloaded (throttled): bytes so far, and the total when known. */
  | { readonly type: 'download'; readonly url: string; readonly bytes: number; readonly total?: number }
  | {
      readonly type: 'resource';
      readonly uri: string;
      readonly action: ResourceAction;
      readonly from?: 'list' | 'dump' | 'change';
      readonly error?: { readonly code: string; readonly message: string };
    }
  | {
      readonly type: 'progress';
      /** Resources handled so far (any action). */
      readonly done: number;
      /** Total when known (a list's entry count is not known before it is read). */
      readonly total?: number;
      readonly bytes: number;
    }
  | { readonly type: 'warning'; readonly code: string; readonly message: string; readonly url?: string }
  | { readonly type: 'watermark'; readonly at: string }
  | { readonly type: 'end'; readonly summary: SyncSummary };

/** A failure of one resource or document, kept in the summary (the first 100 of them). */
export interface SyncFailure {
  readonly uri: string;
  readonly code: ErrorCode | string;
  readonly message: string;
}

/** Counts of an operation. */
export interface SyncCounts {
  created: number;
  updated: number;
  deleted: number;
  deletionsRecorded: number;
  skipped: number;
  failed: number;
  refused: number;
  /** Left out by the copy's `--include` / `--exclude` patterns (see filter.ts). */
  excluded: number;
  /** Bytes downloaded or extracted for installed resources. */
  bytes: number;
}

/** Audit findings (§5.2 audit). */
export interface AuditCounts {
  /** In the Source's current state, absent locally. */
  missing: number;
  /** Held locally, not in the Source's current state. */
  extra: number;
  /** Present on both sides with different content. */
  changed: number;
  same: number;
  /** The first few URIs of each kind. */
  readonly samples: { missing: string[]; extra: string[]; changed: string[] };
}

/** The result of an operation: what the CLI prints (`--json`) and maps to an exit code. */
export interface SyncSummary {
  readonly operation: Operation;
  readonly source: string;
  readonly dir: string;
  readonly dryRun: boolean;
  /** Watermark before the run (Source datetime). */
  readonly watermarkBefore?: string;
  /** Watermark after the run; unchanged when the run did not complete. */
  readonly watermarkAfter?: string;
  /** Baseline from a dump, from a list, or both (fallback). */
  readonly via: string[];
  readonly counts: SyncCounts;
  readonly audit?: AuditCounts;
  readonly failures: SyncFailure[];
  readonly warnings: string[];
  /** True when the run finished with every resource handled (the copy is complete up to the watermark). */
  readonly complete: boolean;
  /** True when an audit found no difference. */
  readonly inSync?: boolean;
  readonly elapsedMs: number;
}

/** Number of failures and warnings the summary keeps. */
export const SUMMARY_SAMPLE_LIMIT = 100;

/** Zero counts. */
export function emptyCounts(): SyncCounts {
  return {
    created: 0,
    updated: 0,
    deleted: 0,
    deletionsRecorded: 0,
    skipped: 0,
    failed: 0,
    refused: 0,
    excluded: 0,
    bytes: 0,
  };
}

/** True when the operation changed the local copy (or would have, in a dry run). */
export function hasChanges(s: SyncSummary): boolean {
  const c = s.counts;
  return c.created + c.updated + c.deleted + c.deletionsRecorded > 0;
}
