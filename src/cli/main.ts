#!/usr/bin/env node
// The executable behind the `resourcesync` bin entry.
import { EXIT } from './exit.js';
import { guardProcessOutput, processOutput } from './output.js';
import { main } from './program.js';

// `resourcesync ... | head`: a closed stdout ends quietly (see output.ts).
guardProcessOutput();
main().then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    processOutput.stderr(`resourcesync: internal error: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exitCode = EXIT.FAILED;
  },
);
