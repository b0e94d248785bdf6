/**
 * The `resourcesync` program: every subcommand lives in its own module and registers itself here.
 * `main.ts` is the executable; tests call {@link main} directly.
 *
 * @module
 */
import { Command, CommanderError } from 'commander';
import { ResourceSyncError } from '../core/errors.js';
import { EXIT } from './exit.js';

/** A subcommand module: adds its command (with options, help and action) to the program. */
export type RegisterCommand = (program: Command) => void;

/**
 * Subcommands by name, each module loaded on demand: `resourcesync validate x.xml` loads only the validate
 * module (not the HTTP client, SQLite, WebSocket or ZIP code of the others), which saves about a tenth of a
 * second of startup. `--version` loads none; help without a command, or an unknown command, loads them all.
 */
const commands: ReadonlyArray<readonly [name: string, load: () => Promise<{ register: RegisterCommand }>]> = [
  // Each subcommand module is listed here, in help order.
  ['hub', () => import('./hub.js')],
  ['serve', () => import('./serve.js')],
  ['demo', () => import('./demo.js')],
  ['validate', () => import('./validate.js')],
  ['inspect', () => import('./inspect.js')],
  ['publish', () => import('./publish.js')],
  ['sync', () => import('./sync.js')],
  ['explore', () => import('./explore.js')],
];

/** The modules to load for `argv`: the named subcommand's alone when argv names one, else all. */
async function loadCommands(argv: readonly string[]): Promise<RegisterCommand[]> {
  const name = argv[2];
  if (argv.length === 3 && (name === '--version' || name === '-V')) return [];
  const one = commands.find(([n]) => n === name);
  const chosen = one === undefined ? commands : [one];
  return (await Promise.all(chosen.map(([, load]) => load()))).map((m) => m.register);
}

export async function main(argv: readonly string[] = process.argv): Promise<number> {
  const program = new Command('resourcesync')
    .description('ResourceSync (ANSI/NISO Z39.99-2017): publish, harvest, validate and inspect.')
    .version(VERSION, '-V, --version')
    .showHelpAfterError()
    .addHelpText(
      'after',
      `
Exit codes (each command's --help says which it uses):
  0  success            1  the work found errors (invalid document, failed resources, audit differences)
  2  usage, or an input / Source that cannot be read at all
  3  sync --detailed-exit-code only: changes were applied
  130  interrupted
Output may be piped: "resourcesync ... | head" ends quietly.`,
    )
    .exitOverride();
  try {
    for (const register of await loadCommands(argv)) register(program);
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
