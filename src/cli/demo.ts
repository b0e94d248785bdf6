/**
 * `resourcesync demo` (what `npm start` runs): serves the bundled `sample/` collection as a live Source on
 * 127.0.0.1, prints the URLs and stays up until Ctrl-C. State lives in a temporary directory removed on exit
 * (or in `--state`).
 *
 * @module
 */
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Command, Option } from 'commander';
import { ResourceSyncError } from '../core/errors.js';
import { EXIT } from './exit.js';
import { parseWholeNumber, runLiveSource } from './serve.js';

/**
 * The bundled sample collection: `<package root>/sample`, found by walking up from this module to the
 * `package.json` named `resourcesync` (works from `src/cli/` under tsx and from `dist/src/cli/` compiled).
 */
export function findSampleDir(from: string = fileURLToPath(import.meta.url)): string {
  let dir = dirname(from);
  for (;;) {
    const pkg = join(dir, 'package.json');
    if (existsSync(pkg)) {
      try {
        const name = (JSON.parse(readFileSync(pkg, 'utf8')) as { name?: unknown }).name;
        if (name === 'resourcesync' && existsSync(join(dir, 'sample'))) return join(dir, 'sample');
      } catch {
        // not our package.json; keep walking up
      }
    }
    const parent = dirname(dir);
    if (parent === dir) throw new ResourceSyncError('RS_CONFIG', 'cannot find the bundled sample/ collection');
    dir = parent;
  }
}

interface DemoCliOptions {
  readonly port: string;
  readonly host: string;
  readonly state?: string;
  readonly json?: boolean;
  readonly log?: boolean;
}

/** Registers `demo` on the program. */
export function register(program: Command): void {
  program
    .command('demo')
    .description('Serve the bundled sample collection as a live ResourceSync Source on localhost (npm start).')
    .option('--port <n>', 'port to listen on (0 = any free port)', '8080')
    .option('--host <addr>', 'address to listen on', '127.0.0.1')
    .option('--state <dir>', 'keep the inventory and change log here (default: a temporary directory, removed on exit)')
    // Accepted (and ignored) so that scripts using it still run: HTML pages are served unaltered.
    .addOption(new Option('--no-html-links').hideHelp())
    .option('--json', 'one JSON object per line on stdout')
    .option('--log', 'print one line per request')
    .addHelpText('after', '\nRuns until Ctrl-C. Exit codes: 0 stopped cleanly, 2 port in use or bad arguments.')
    .action(async (opts: DemoCliOptions) => {
      const sample = findSampleDir();
      const stateDir = opts.state ?? (await mkdtemp(join(tmpdir(), 'resourcesync-demo-')));
      try {
        await runLiveSource({
          dir: sample,
          port: parseWholeNumber('port', opts.port, 0, 65_535),
          host: opts.host,
          stateDir,
          watch: true,
          json: opts.json === true,
          log: opts.log === true,
          describedBy: 'index.html',
          directoryIndex: 'index.html',
          title: 'resourcesync demo: the bundled sample collection as a live ResourceSync Source',
          hints: [
            '',
            'Try, in another terminal (in a checkout, "node dist/src/cli/main.js" for "resourcesync"):',
            '  curl -i {url}.well-known/resourcesync',
            '  resourcesync validate {url}.well-known/resourcesync',
            '  resourcesync sync {url} ./mirror',
          ],
        });
      } finally {
        if (opts.state === undefined) await rm(stateDir, { recursive: true, force: true });
      }
      process.exitCode = EXIT.OK;
    });
}
