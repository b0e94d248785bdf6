/**
 * `resourcesync publish <dir> --out <site-dir> --base-url URL`: every document and dump of a directory Source
 * written as static files, for any web server or CDN. Running it again records what changed since the last
 * run and extends the Change Lists (the state lives next to the output, or where `--state` says).
 *
 * Exit codes: 0 published; 1 publishing failed part-way (what was recorded is kept, run again); 2 bad
 * arguments or an input/state/output path that cannot be used (nothing recorded is lost).
 *
 * @module
 */
import { copyFile, mkdir, readFile, rename, stat, unlink, utimes } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { type Command, Option } from 'commander';
import { parseDuration, positiveInteger } from './options.js';
import { ResourceSyncError } from '../core/errors.js';
import { writeFileAtomic } from '../io/atomic.js';
import { type DirectorySource, DOCUMENTS_DIR, openDirectorySource, parseBaseUrl } from '../source/index.js';
import { EXIT } from './exit.js';
import { checkStateDir } from './serve.js';

/** Options of {@link runPublish}. */
export interface PublishOptions {
  readonly dir: string;
  readonly out: string;
  readonly baseUrl: string;
  readonly stateDir?: string;
  /** `--store`: a postgres:// URL (default: RESOURCESYNC_STORE, else SQLite in the state directory). */
  readonly store?: string;
  readonly sets?: 'top-level' | 'single';
  readonly maxEntries?: number;
  readonly dumpMaxBytes?: number;
  readonly dumpMaxFiles?: number;
  readonly changeListMaxEntries?: number;
  readonly changeListPeriodMs?: number;
  readonly dumps?: boolean;
  readonly copyResources?: boolean;
  /**
   * URL (absolute, or relative to the base URL) of a human-readable description of the Source and its sets
   * (`rel="describedby"`, §8, §9). Default: a page publish writes, `<base>resourcesync/about.html`.
   */
  readonly describedBy?: string;
  readonly json?: boolean;
  /** Where text goes (tests pass their own). */
  readonly stdout?: (text: string) => void;
  readonly stderr?: (text: string) => void;
  /** Show progress (default: stderr is a TTY and not --json). */
  readonly progress?: boolean;
}

/** What a publish run did. */
export interface PublishReport {
  readonly out: string;
  readonly stateDir: string;
  readonly sourceDescription: string;
  readonly sets: readonly string[];
  readonly resources: number;
  readonly files: number;
  readonly created: number;
  readonly updated: number;
  readonly deleted: number;
  readonly seq: number;
  readonly copied: number;
  readonly warnings: number;
  /** First run: the inventory was taken, no change recorded. */
  readonly baseline: boolean;
}

/** The default state directory: next to the output, hidden, so a web server serving the output never serves it. */
export function defaultPublishState(out: string): string {
  const abs = resolve(out);
  return join(dirname(abs), `.${basename(abs)}.resourcesync-state`);
}

/**
 * Publishes a directory. Returns the exit code; writes a summary (or JSON) to stdout, warnings and errors to
 * stderr.
 */
export async function runPublish(options: PublishOptions): Promise<number> {
  const stdout = options.stdout ?? ((t: string) => void process.stdout.write(t));
  const stderr = options.stderr ?? ((t: string) => void process.stderr.write(t));
  const progress = options.progress ?? (process.stderr.isTTY === true && options.json !== true);
  const out = resolve(options.out);
  const stateDir = resolve(options.stateDir ?? defaultPublishState(out));
  let warnings = 0;
  let source: DirectorySource | undefined;
  const clearLine = (): void => {
    if (progress) stderr('\r\x1b[K');
  };
  try {
    try {
      await mkdir(out, { recursive: true });
      const st = await stat(out);
      if (!st.isDirectory()) throw new Error('not a directory');
    } catch (e) {
      throw new ResourceSyncError('RS_CONFIG', `cannot use the output directory ${out}: ${(e as Error).message}`, {
        cause: e,
      });
    }
    await checkStateDir(stateDir, options.stateDir !== undefined);
    const limits = {
      ...(options.maxEntries === undefined ? {} : { maxEntriesPerDocument: options.maxEntries }),
      ...(options.dumpMaxBytes === undefined ? {} : { dumpMaxBytes: options.dumpMaxBytes }),
      ...(options.dumpMaxFiles === undefined ? {} : { dumpMaxFiles: options.dumpMaxFiles }),
      ...(options.changeListMaxEntries === undefined ? {} : { changeListMaxEntries: options.changeListMaxEntries }),
      ...(options.changeListPeriodMs === undefined ? {} : { changeListPeriodMs: options.changeListPeriodMs }),
    };
    const describedBy =
      options.describedBy === undefined ? undefined : new URL(options.describedBy, options.baseUrl).href;
    source = await openDirectorySource({
      dir: options.dir,
      baseUrl: options.baseUrl,
      describedBy: describedBy ?? new URL(`${DOCUMENTS_DIR}/about.html`, parseBaseUrl(options.baseUrl)).href,
      stateDir,
      ...(options.store === undefined ? {} : { store: options.store }),
      siteDir: out,
      scanOnOpen: false,
      limits,
      ...(options.sets === 'top-level' ? { sets: 'top-level' as const } : {}),
      ...(options.dumps === false ? { capabilities: ['resourcelist', 'changelist'] as const } : {}),
      onWarning: (m) => {
        warnings++;
        clearLine();
        stderr(`resourcesync: warning: ${m}\n`);
      },
      onScanProgress: (n) => {
        if (progress) stderr(`\r\x1b[Kscanning: ${n} files`);
      },
    });
    const scan = await source.scan();
    clearLine();
    if (progress) stderr('writing documents...');
    const report = await source.source.generateAll();
    // What discovery and `validate --strict` look for besides the documents: robots.txt naming the lists
    // (§6.1), and the description the documents link to with rel="describedby".
    if (describedBy === undefined) await writeAboutPage(source, out);
    const robots = await writeRobotsTxt(source, out);
    if (robots !== undefined) {
      warnings++;
      stderr(`resourcesync: warning: ${robots}\n`);
    }
    clearLine();
    const copied = options.copyResources === true ? await copyResources(source, out) : 0;
    const stats = await source.stats();
    const result: PublishReport = {
      out,
      stateDir,
      sourceDescription: source.sourceDescriptionUrl,
      sets: report.sets,
      resources: stats.resources,
      files: report.files,
      created: scan.created,
      updated: scan.updated,
      deleted: scan.deleted,
      seq: stats.seq,
      copied,
      warnings,
      baseline: scan.baseline === true,
    };
    if (options.json === true) stdout(`${JSON.stringify(result)}\n`);
    else
      stdout(
        `published ${result.files} files for ${result.resources} resources in ${result.sets.length} set(s) to ${out}\n` +
          (result.baseline
            ? `  first run: inventory of ${result.resources} resources taken; later runs record changes\n`
            : `  changes recorded this run: ${result.created} created, ${result.updated} updated, ${result.deleted} deleted (change log at ${result.seq})\n`) +
          `  Source Description: ${result.sourceDescription}\n` +
          (options.copyResources === true ? `  resources copied: ${copied}\n` : '') +
          `  state: ${stateDir}\n`,
      );
    return EXIT.OK;
  } catch (e) {
    clearLine();
    if (e instanceof ResourceSyncError) {
      stderr(`resourcesync publish: ${e.message} [${e.code}]\n`);
      // Paths and arguments that cannot be used: 2; a failure in the middle of the work: 1.
      return e.code === 'RS_CONFIG' || e.code === 'RS_STORE' || e.code === 'RS_IO' ? EXIT.USAGE : EXIT.FAILED;
    }
    throw e;
  } finally {
    await source?.close();
  }
}

/**
 * Copies changed resources into the output, removes deleted ones. Returns the count copied.
 *
 * A resource is copied when the change log records a creation or update of it since the last copy (exact,
 * whatever its size and time), or when its copy is missing, has another size, or has an mtime other than the
 * one this function gave it. That mtime is the resource's lastmod, set through `utimes`, which takes seconds as a
 * double and keeps them to the microsecond: read back in nanoseconds it is within 1 µs of the lastmod (comparing
 * the truncated milliseconds re-copied about half the files on every run). A copy edited by hand has a later mtime.
 *
 * Memory: the URIs created or updated since the last copy.
 */
async function copyResources(source: DirectorySource, out: string): Promise<number> {
  const basePath = decodeURIComponent(source.baseUrl.pathname).replace(/^\/+/, '');
  const lastKey = 'publish:copied-through-seq';
  const last = Number((await source.store.getMeta(lastKey)) ?? '0');
  const changed = new Set<string>();
  const snap = await source.store.snapshot();
  let through: number;
  try {
    through = snap.head.seq;
    for await (const c of snap.changes({ afterSeq: last })) {
      if (c.change !== 'deleted') changed.add(c.uri);
      else if ((await source.store.getResource(c.uri)) === undefined) {
        changed.delete(c.uri);
        await unlink(join(out, basePath, c.uri)).catch(() => undefined);
      }
    }
  } finally {
    await snap.close();
  }
  let copied = 0;
  for await (const r of source.store.resources()) {
    const dest = join(out, basePath, r.uri);
    if (!changed.has(r.uri)) {
      const st = await stat(dest, { bigint: true }).catch(() => undefined);
      if (st !== undefined && st.size === BigInt(r.length) && withinMicrosecond(st.mtimeNs, r.lastmodMs)) continue;
    }
    await mkdir(dirname(dest), { recursive: true });
    const tmp = `${dest}.resourcesync-tmp`;
    await copyFile(join(source.root, r.uri), tmp);
    await utimes(tmp, new Date(r.lastmodMs), new Date(r.lastmodMs));
    await rename(tmp, dest);
    copied++;
  }
  await source.store.setMeta(lastKey, String(through));
  return copied;
}

/** Where a site file of the base URL's path goes under the output. */
function outPath(source: DirectorySource, out: string, rel: string): string {
  return join(out, decodeURIComponent(source.baseUrl.pathname).replace(/^\/+/, ''), rel);
}

const escapeHtml = (t: string): string =>
  t.replace(/[&<>"]/g, (c) => (c === '&' ? '&amp;' : c === '<' ? '&lt;' : c === '>' ? '&gt;' : '&quot;'));

/** The default description page (`<base>resourcesync/about.html`): the Source, its sets and their lists. */
async function writeAboutPage(source: DirectorySource, out: string): Promise<void> {
  const sets = source.source.setNames();
  const items = sets
    .map((s) => {
      const cl = source.source.capabilityListUrl(s);
      return `  <li>${escapeHtml(s)}: <a href="${escapeHtml(cl)}">Capability List</a></li>`;
    })
    .join('\n');
  const html =
    '<!DOCTYPE html>\n<html lang="en">\n<head><meta charset="utf-8"><title>ResourceSync Source</title></head>\n<body>\n' +
    `<h1>ResourceSync Source for ${escapeHtml(source.baseUrl.href)}</h1>\n` +
    '<p>The resources under this base URL, published with <code>resourcesync publish</code> (ANSI/NISO Z39.99-2017). ' +
    `Start from the <a href="${escapeHtml(source.sourceDescriptionUrl)}">Source Description</a>.</p>\n` +
    `<ul>\n${items}\n</ul>\n</body>\n</html>\n`;
  const path = outPath(source, out, `${DOCUMENTS_DIR}/about.html`);
  await mkdir(dirname(path), { recursive: true });
  await writeFileAtomic(path, html);
}

/**
 * Writes `<out>/robots.txt` (the origin's root) with a `Sitemap:` line per set's Resource List, unless a
 * robots.txt that publish did not write is there (then it is left alone; the message says so).
 */
async function writeRobotsTxt(source: DirectorySource, out: string): Promise<string | undefined> {
  const path = join(out, 'robots.txt');
  const key = 'publish:robots-txt';
  const ours = await source.store.getMeta(key);
  const existing = await readFile(path, 'utf8').catch(() => undefined);
  if (existing !== undefined && existing !== ours)
    return `${path} was not written by publish: left as it is (add a Sitemap: line per Resource List to it)`;
  const text = await source.source.robotsTxt();
  await writeFileAtomic(path, text);
  await source.store.setMeta(key, text);
  return undefined;
}

/** True when an mtime in nanoseconds is the millisecond time `ms` as `utimes` sets it (to the microsecond). */
function withinMicrosecond(mtimeNs: bigint, ms: number): boolean {
  const d = mtimeNs - BigInt(Math.round(ms)) * 1_000_000n;
  return d >= -1_000n && d <= 1_000n;
}

const HELP = `
Output layout (under --out, matching the URL paths of --base-url on its origin):
  .well-known/resourcesync                          Source Description
  <base path>/resourcesync/<set>/capabilitylist.xml  Capability List of each set
  <base path>/resourcesync/<set>/resourcelist.xml    Resource List (or Resource List Index + parts)
  <base path>/resourcesync/<set>/resourcedump.xml    Resource Dump + ZIP packages + manifest copies
  <base path>/resourcesync/<set>/changelist.xml      the Change List while there is one; then its Index
                                                    + changelist-0001.xml ... (the last one open)
  <base path>/resourcesync/<set>/changedump.xml      Change Dump + ZIP packages + manifest copies
  <base path>/resourcesync/about.html                the description (rel="describedby"; not with --described-by)
  robots.txt                                         Sitemap: lines (not when another robots.txt is there)

The resources themselves are expected to be served by the web server from the same base URL (the
collection directory mounted at the base path); --copy-resources copies them into the output instead.
Run publish again after the collection changed: the changes since the last run are recorded in the state
directory and appended to the Change Lists; closed Change Lists are never rewritten. Hidden files and
directories are not published; symbolic links leaving the collection are refused.

Exit status:
  0  published
  1  publishing failed part-way (everything recorded so far is kept; run again)
  2  bad arguments, a base URL that is not absolute http(s), a collection directory that cannot be read,
     or a state/output directory that cannot be written (nothing already recorded is lost)

Example:
  resourcesync publish ./collection --out ./site --base-url https://example.org/data/
`;

/** Adds `publish` to the program. */
export function register(program: Command): void {
  program
    .command('publish')
    .description('write every ResourceSync document and dump of a directory as static files')
    .argument('<dir>', 'the collection: every non-hidden file under it is a resource')
    .requiredOption('--out <site-dir>', 'output directory (the document root of the web server for --base-url)')
    .requiredOption('--base-url <url>', 'absolute http(s) URL the collection is served at')
    .option(
      '--state <dir>',
      'state directory (store, kept versions); default: .<out-name>.resourcesync-state next to --out',
    )
    .option(
      '--store <url>',
      'keep the inventory and change log in PostgreSQL: postgres://user@host:port/db?schema=name (default: $RESOURCESYNC_STORE, else SQLite in --state)',
    )
    .addOption(
      new Option('--sets <mode>', 'sets of resources: one for everything, or one per top-level folder')
        .choices(['single', 'top-level'])
        .default('single'),
    )
    .option(
      '--max-entries <n>',
      'entries per document before an index is used, and parts an index lists (default 50000)',
      positiveInteger,
    )
    .option('--dump-max-bytes <n>', 'bytes of bitstreams per dump package (default 268435456)', positiveInteger)
    .option('--dump-max-files <n>', 'bitstreams per dump package (default: --max-entries)', positiveInteger)
    .option('--changelist-max-entries <n>', 'changes per Change List before a new one opens', positiveInteger)
    .option('--changelist-period <duration>', 'open a new Change List after this long (e.g. 24h, 7d)', parseDuration)
    .option('--no-dumps', 'do not write Resource Dumps and Change Dumps')
    .option('--copy-resources', 'also copy the resources into the output (changed ones only)')
    .option(
      '--described-by <url>',
      'description of the Source (absolute, or relative to --base-url), rel="describedby"; default: a page written at <base>resourcesync/about.html',
    )
    .option('--json', 'print a JSON summary on stdout')
    .addHelpText('after', HELP)
    .action(async (dir: string, o: Record<string, unknown>) => {
      process.exitCode = await runPublish({
        dir,
        out: o['out'] as string,
        baseUrl: o['baseUrl'] as string,
        ...(typeof o['state'] === 'string' ? { stateDir: o['state'] } : {}),
        ...(typeof o['store'] === 'string' ? { store: o['store'] } : {}),
        sets: o['sets'] === 'top-level' ? 'top-level' : 'single',
        ...(typeof o['maxEntries'] === 'number' ? { maxEntries: o['maxEntries'] } : {}),
        ...(typeof o['dumpMaxBytes'] === 'number' ? { dumpMaxBytes: o['dumpMaxBytes'] } : {}),
        ...(typeof o['dumpMaxFiles'] === 'number' ? { dumpMaxFiles: o['dumpMaxFiles'] } : {}),
        ...(typeof o['changelistMaxEntries'] === 'number' ? { changeListMaxEntries: o['changelistMaxEntries'] } : {}),
        ...(typeof o['changelistPeriod'] === 'number' ? { changeListPeriodMs: o['changelistPeriod'] } : {}),
        dumps: o['dumps'] !== false,
        copyResources: o['copyResources'] === true,
        ...(typeof o['describedBy'] === 'string' ? { describedBy: o['describedBy'] } : {}),
        json: o['json'] === true,
      });
    });
}
