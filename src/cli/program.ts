/**
 * The `resourcesync` program: every subcommand lives in its own module and registers itself here.
 * `main.ts` is the executable; tests call {@link main} directly.
 *
 * @module
 */
import { Command, CommanderError } from 'commander';
import { ResourceSyncError } from '../core/errors.js';
import { EXIT } from './exit.js';
import { register as registerDemo } from './demo.js';
import { register as registerHub } from './hub.js';
import { register as registerInspect } from './inspect.js';
import { register as registerServe } from './serve.js';
import { register as registerPublish } from './publish.js';
import { register as registerSync } from './sync.js';
import { register as registerValidate } from './validate.js';

/** A subcommand module: adds its command (with options, help and action) to the program. */
export type RegisterCommand = (program: Command) => void;

const commands: RegisterCommand[] = [
  // Each subcommand module is imported below and listed here.
  registerHub,
  registerServe,
  registerDemo,
  registerValidate,
  registerInspect,
  registerPublish,
  registerSync,
];

export async function main(argv: readonly string[] = process.argv): Promise<number> {
  const program = new Command('resourcesync')
    .description('ResourceSync (ANSI/NISO Z39.99-2017): publish, harvest, validate and inspect.')
    .version(VERSION, '-V, --version')
    .showHelpAfterError()
    .exitOverride();
  for (const register of commands) register(program);
  try {
    await program.parseAsync(argv as string[]);
    return typeof process.exitCode === 'number' ? process.exitCode : EXIT.OK;
  } catch (e) {
    if (e instanceof CommanderError) {
      // --help and --version end with exitCode 0; a usage error with 1, which we report as 2.
      return e.exitCode === 0 ? EXIT.OK : EXIT.USAGE;
    }
    if (e instanceof ResourceSyncError) {
      process.stderr.write(`resourcesync: ${e.message} [${e.code}]\n`);
      return e.code === 'RS_CONFIG' ? EXIT.USAGE : EXIT.FAILED;
    }
    throw e;
  }
}

const VERSION = '0.1.0';
