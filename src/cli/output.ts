/**
 * Where commands write, shared by every command: {@link CommandOutput} (tests pass their own), and the guard
 * the executable installs so that a closed stdout (`resourcesync ... | head`) ends the command quietly instead
 * of crashing with an `EPIPE` stack trace.
 *
 * When the reader of stdout goes away, further output is dropped and the process is told to stop as a
 * SIGTERM would: long-running commands (`serve`, `hub`, `sync --follow`) stop cleanly, as `tail -f | head`
 * does; one-shot commands finish their work (a sync is not cut short half-way) and exit with their own code.
 *
 * @module
 */

/** Where a command writes; tests pass their own. */
export interface CommandOutput {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
}

let stdoutOpen = true;
let stderrOpen = true;

/** The process's stdout and stderr; writes to a closed one are dropped (see {@link guardProcessOutput}). */
export const processOutput: CommandOutput = {
  stdout: (t) => {
    if (stdoutOpen && !process.stdout.destroyed) process.stdout.write(t);
  },
  stderr: (t) => {
    if (stderrOpen && !process.stderr.destroyed) process.stderr.write(t);
  },
};

/** True until the reader of stdout went away. */
export function isStdoutOpen(): boolean {
  return stdoutOpen;
}

/** Whether an error of a standard stream means its reader went away. */
function isClosedPipe(e: NodeJS.ErrnoException): boolean {
  return e.code === 'EPIPE' || e.code === 'ERR_STREAM_DESTROYED' || e.code === 'ECONNRESET';
}

let guarded = false;

/**
 * Handles errors of stdout and stderr for the whole process (idempotent): a closed pipe stops output quietly
 * (and asks a running command to stop, as SIGTERM does); any other write error is reported once on stderr and
 * makes the exit code 1.
 */
export function guardProcessOutput(): void {
  if (guarded) return;
  guarded = true;
  process.stdout.on('error', (e: NodeJS.ErrnoException) => {
    if (!stdoutOpen) return;
    stdoutOpen = false;
    if (!isClosedPipe(e)) {
      processOutput.stderr(`resourcesync: cannot write to standard output: ${e.message}\n`);
      process.exitCode = 1;
    }
    // Commands that run until stopped listen for SIGTERM; one-shot commands do not, and simply finish.
    process.emit('SIGTERM', 'SIGTERM');
  });
  process.stderr.on('error', () => {
    stderrOpen = false;
  });
}
