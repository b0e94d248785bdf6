// A directory Source with one top-level folder per set (SETS, a file `a.txt` in each), served by our server on
// 127.0.0.1: the Source Description Index tests (sd-index) and the Destination's Source identity tests use it.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { type DirectorySource, openDirectorySource } from '../../src/source/directory.js';
import { createSourceServer, type SourceServer } from '../../src/source/server.js';

export const SETS = ['s1', 's2', 's3', 's4', 's5'];

/** Options of {@link serveSets}. */
export interface ServeSetsOptions {
  /** `limits.maxEntriesPerDocument` (2: an Index over 3 Source Descriptions); default the standard's 50,000. */
  readonly maxEntriesPerDocument?: number;
  /** Give the Source Description a `describedby` link (`<base>about.html`). */
  readonly describedBy?: boolean;
}

/** Starts the Source over `<dir>/coll` (state in `<dir>/state`); the caller closes `server` and `site`. */
export async function serveSets(
  dir: string,
  options: ServeSetsOptions = {},
): Promise<{ site: DirectorySource; server: SourceServer; base: string }> {
  const coll = join(dir, 'coll');
  for (const s of SETS) {
    await mkdir(join(coll, s), { recursive: true });
    await writeFile(join(coll, s, 'a.txt'), `a of ${s}\n`);
  }
  let resolveSite: (s: DirectorySource) => void = () => undefined;
  const server = createSourceServer(new Promise<DirectorySource>((r) => (resolveSite = r)));
  const base = (await server.listen(0, '127.0.0.1')).url;
  const max = options.maxEntriesPerDocument;
  const site = await openDirectorySource({
    dir: coll,
    baseUrl: base,
    stateDir: join(dir, 'state'),
    sets: 'top-level',
    ...(options.describedBy === true ? { describedBy: `${base}about.html` } : {}),
    watch: false,
    fsync: false,
    ...(max === undefined ? {} : { limits: { maxEntriesPerDocument: max } }),
  });
  resolveSite(site);
  return { site, server, base };
}
