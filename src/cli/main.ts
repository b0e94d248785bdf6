#!/usr/bin/env node
// The executable behind the `resourcesync` bin entry.
import { EXIT } from './exit.js';
import { main } from './program.js';

main().then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    process.stderr.write(`resourcesync: internal error: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exitCode = EXIT.FAILED;
  },
);
