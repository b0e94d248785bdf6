/**
 * Exit codes of the `resourcesync` command. Every command documents which it uses in its `--help`.
 *
 * @module
 */
export const EXIT = {
  /** Success: documents valid, copy in sync, server stopped cleanly. */
  OK: 0,
  /** The work was done and found errors: an invalid document, resources that failed, an audit mismatch. */
  FAILED: 1,
  /** Wrong arguments, or an input that cannot be read at all. */
  USAGE: 2,
  /** `sync`: changes were applied and the copy is now in sync (0 means there was nothing to do). */
  CHANGED: 3,
  /** Interrupted (SIGINT/SIGTERM) before the work finished; state is consistent. */
  INTERRUPTED: 130,
} as const;
