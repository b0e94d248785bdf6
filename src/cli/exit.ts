/**
 * Exit codes of the `resourcesync` command. Every command documents which it uses in its `--help`, and the
 * README lists them: 0 success, 1 failure, 2 usage (or an input / Source that cannot be read at all),
 * 3 `sync --detailed-exit-code` applied changes, 130 interrupted.
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
  /**
   * `sync --detailed-exit-code` only: changes were applied and the copy is now in sync (0 then means there was
   * nothing to do). Without the flag a successful sync exits 0, so that `&&`, cron, systemd and CI see success.
   */
  CHANGED: 3,
  /** Interrupted (SIGINT/SIGTERM) before the work finished; state is consistent. */
  INTERRUPTED: 130,
} as const;
