/**
 * `resourcesync inspect [--json] [--walk] <file-or-url>`: what a document is and holds: kind, header (capability,
 * at/completed/from/until, links), entry count, time range of `<lastmod>` and `datetime`, changes by type,
 * capabilities listed, and the number of validation errors and warnings. Streams: memory does not grow with
 * the number of entries. With `--walk`, one line per document of the Source instead (see `walk.ts`).
 *
 * @module
 */
import type { Command } from 'commander';
import { parseDatetime } from '../core/datetime.js';
import { ResourceSyncError } from '../core/errors.js';
import type { DocumentKind, Entry, Link, RootElement } from '../core/model.js';
import { createValidator } from '../core/validate.js';
import { DumpPackage } from '../destination/dump.js';
import { type DocumentStream, openDocument } from '../xml/index.js';
import { EXIT } from './exit.js';
import { type InputOptions, isInputError, openInput, peekBytes } from './input.js';
import { isZipHead, spoolToTempFile } from './validate-package.js';
import { type CommandOutput, processOutput } from './output.js';
import { positiveInteger, seconds } from './validate.js';
import { printDiscovery, walkDocuments } from './walk.js';

/** Earliest and latest of a set of datetimes, as written. */
export interface TimeRange {
  readonly min: string;
  readonly max: string;
}

/** What `inspect` reports about a document. */
export interface DocumentSummary {
  readonly source: string;
  readonly kind: DocumentKind;
  readonly root: RootElement;
  readonly capability?: string;
  readonly at?: string;
  readonly completed?: string;
  readonly from?: string;
  readonly until?: string;
  readonly links: readonly Link[];
  readonly entries: number;
  readonly lastmod?: TimeRange;
  readonly datetime?: TimeRange;
  /** Entries by change type (created, updated, deleted, and any other value as written). */
  readonly changes: Record<string, number>;
  /** Entries by capability (Source Description, Capability List, framework notification). */
  readonly capabilities: Record<string, number>;
  readonly errors: number;
  readonly warnings: number;
}

/** Keeps the earliest and latest valid datetime seen. */
class RangeTracker {
  private min: { ms: number; text: string } | undefined;
  private max: { ms: number; text: string } | undefined;
  add(text: string | undefined): void {
    if (text === undefined) return;
    const dt = parseDatetime(text);
    if (dt === undefined) return;
    if (this.min === undefined || dt.ms < this.min.ms) this.min = { ms: dt.ms, text };
    if (this.max === undefined || dt.ms > this.max.ms) this.max = { ms: dt.ms, text };
  }
  get range(): TimeRange | undefined {
    return this.min === undefined || this.max === undefined ? undefined : { min: this.min.text, max: this.max.text };
  }
}

/** Most distinct change / capability values counted (the rest go under "(other)"): bounds memory. */
const MAX_KEYS = 100;

function count(map: Record<string, number>, key: string): void {
  const k = key in map || Object.keys(map).length < MAX_KEYS ? key : '(other)';
  map[k] = (map[k] ?? 0) + 1;
}

/**
 * Reads a document and summarises it.
 * @throws ResourceSyncError when it cannot be read (input codes) or is not a readable document (reader codes).
 */
export async function inspectInput(arg: string, options: InputOptions = {}): Promise<DocumentSummary> {
  const input = await openInput(arg, options);
  const cleanup: (() => Promise<void>)[] = [() => input.close()];
  try {
    const peeked = await peekBytes(input.bytes);
    const rest = peeked.rest;
    let stream: DocumentStream;
    if (isZipHead(peeked.head)) {
      // A dump package: summarise its manifest.xml.
      let file = input.path;
      if (file === undefined) {
        const spooled = await spoolToTempFile(rest);
        cleanup.push(() => spooled.remove());
        file = spooled.file;
      } else await peeked.close();
      const pkg = await DumpPackage.open(file, { url: input.url ?? arg, removeOnClose: false });
      cleanup.unshift(() => pkg.close());
      stream = await pkg.openManifest();
    } else stream = await openDocument(rest, { url: input.url ?? arg });
    const h = stream.header;
    const validator = createValidator(h, { maxIssues: 0 });
    const lastmod = new RangeTracker();
    const datetime = new RangeTracker();
    const changes: Record<string, number> = Object.create(null) as Record<string, number>;
    const capabilities: Record<string, number> = Object.create(null) as Record<string, number>;
    let n = 0;
    for await (const e of stream.entries as AsyncIterable<Entry>) {
      n++;
      validator.entry(e);
      lastmod.add(e.lastmod);
      datetime.add(e.md?.datetime);
      if (e.md?.change !== undefined) count(changes, e.md.change);
      if (e.md?.capability !== undefined) count(capabilities, e.md.capability);
    }
    for (const note of stream.issues) validator.note(note);
    const v = validator.finish();
    const s: { -readonly [K in keyof DocumentSummary]: DocumentSummary[K] } = {
      source: arg,
      kind: v.kind,
      root: h.root,
      links: h.links,
      entries: n,
      changes: { ...changes },
      capabilities: { ...capabilities },
      errors: v.errors,
      warnings: v.warnings,
    };
    for (const name of ['capability', 'at', 'completed', 'from', 'until'] as const) {
      const value = h.md?.[name];
      if (value !== undefined) s[name] = value;
    }
    const lm = lastmod.range;
    if (lm !== undefined) s.lastmod = lm;
    const dt = datetime.range;
    if (dt !== undefined) s.datetime = dt;
    return s;
  } finally {
    for (const f of cleanup) await f();
  }
}

/** Formats a summary for people. */
export function formatSummary(s: DocumentSummary): string {
  const lines: string[] = [`${s.source}`, `  kind:        ${s.kind} (<${s.root}>)`];
  for (const name of ['capability', 'at', 'completed', 'from', 'until'] as const) {
    const value = s[name];
    if (value !== undefined) lines.push(`  ${`${name}:`.padEnd(12)} ${value}`);
  }
  for (const l of s.links) lines.push(`  link:        ${l.rel} -> ${l.href}`);
  lines.push(`  entries:     ${s.entries}`);
  if (s.lastmod !== undefined) lines.push(`  lastmod:     ${s.lastmod.min} .. ${s.lastmod.max}`);
  if (s.datetime !== undefined) lines.push(`  datetime:    ${s.datetime.min} .. ${s.datetime.max}`);
  const changes = Object.entries(s.changes);
  if (changes.length > 0) lines.push(`  changes:     ${changes.map(([k, v]) => `${k} ${v}`).join(', ')}`);
  const caps = Object.entries(s.capabilities);
  if (caps.length > 0) lines.push(`  capabilities: ${caps.map(([k, v]) => `${k} ${v}`).join(', ')}`);
  lines.push(`  validation:  ${s.errors} error(s), ${s.warnings} warning(s) (run "resourcesync validate" for details)`);
  return `${lines.join('\n')}\n`;
}

/** Runs `inspect` and returns the exit code: 0 read, 1 not a readable document, 2 input unreadable. */
export async function runInspect(
  arg: string,
  options: InputOptions & { readonly json?: boolean; readonly walk?: boolean; readonly maxDocuments?: number } = {},
  out: CommandOutput = processOutput,
): Promise<number> {
  if (options.walk === true) return inspectWalk(arg, options, out);
  try {
    const s = await inspectInput(arg, options);
    out.stdout(options.json === true ? `${JSON.stringify(s)}\n` : formatSummary(s));
    return EXIT.OK;
  } catch (e) {
    if (!(e instanceof ResourceSyncError)) throw e;
    if (options.json === true)
      out.stdout(`${JSON.stringify({ source: arg, error: { code: e.code, message: e.message } })}\n`);
    else out.stderr(`resourcesync: ${e.message} [${e.code}]\n`);
    return isInputError(e) ? EXIT.USAGE : EXIT.FAILED;
  }
}

/** `inspect --walk`: one line per document of the Source, indented by depth (JSON lines with --json). */
async function inspectWalk(
  arg: string,
  options: InputOptions & { readonly json?: boolean; readonly maxDocuments?: number },
  out: CommandOutput,
): Promise<number> {
  let code: number = EXIT.OK;
  const walk = walkDocuments(arg, {
    ...options,
    onDiscovery: (r) => printDiscovery(r, options.json === true, out),
  });
  for await (const d of walk.documents) {
    const indent = '  '.repeat(d.depth);
    const o = d.outcome;
    if ('unreadable' in o) {
      if (d.depth === 0) code = EXIT.USAGE;
      const { code: errorCode, message } = o.unreadable;
      if (options.json === true)
        out.stdout(`${JSON.stringify({ source: d.url, depth: d.depth, error: { code: errorCode, message } })}\n`);
      else out.stdout(`${indent}${d.url}: cannot read: ${message} [${errorCode}]\n`);
      continue;
    }
    const r = o.result;
    if (d.depth === 0 && r.kind === 'unknown' && r.entries === 0 && !r.valid) code = EXIT.FAILED;
    if (options.json === true) {
      const { issues: _issues, ...counts } = r;
      out.stdout(`${JSON.stringify({ source: d.url, depth: d.depth, ...counts })}\n`);
    } else
      out.stdout(
        `${indent}${r.kind} ${d.url}: ${r.entries} ${r.entries === 1 ? 'entry' : 'entries'}, ${r.errors} error${r.errors === 1 ? '' : 's'}, ${r.warnings} warning${r.warnings === 1 ? '' : 's'}\n`,
      );
  }
  if (walk.skipped() > 0)
    out.stderr(`resourcesync: ${walk.skipped()} linked document(s) not visited (--max-documents)\n`);
  return code;
}

/** Adds `inspect` to the program. */
export function register(program: Command): void {
  program
    .command('inspect')
    .description(
      'Summarise a ResourceSync document: kind, header, entries, time range, changes (--walk: a whole Source).',
    )
    .argument('<input>', 'a file or an http(s) URL')
    .option('--json', 'print the summary as one JSON object')
    .option(
      '--walk',
      "list every document the input leads to, as a tree (kind, entries, errors, warnings); a URL that is not a ResourceSync document (a Source's root, a web page, robots.txt) is discovered from as sync does",
    )
    .option('--max-documents <n>', 'most documents visited with --walk (default: 100)', positiveInteger)
    .option('--timeout <seconds>', 'URL connect and response-headers timeout (default: 10)', seconds)
    .option('--body-timeout <seconds>', 'URL body idle timeout (default: 30)', seconds)
    .option('--max-bytes <n>', 'most bytes downloaded from a URL (default: 268435456)', positiveInteger)
    .addHelpText(
      'after',
      `
Exit codes:
  0  the document was read (whether valid or not: see the validation line, or run "validate")
  1  not well-formed XML, or not a Sitemap / ResourceSync document
  2  the input cannot be read (missing file, HTTP error, timeout) or the arguments are wrong
`,
    )
    .action(async (input: string, o: Record<string, unknown>) => {
      process.exitCode = await runInspect(input, {
        json: o['json'] === true,
        walk: o['walk'] === true,
        ...(typeof o['maxDocuments'] === 'number' ? { maxDocuments: o['maxDocuments'] } : {}),
        ...(typeof o['timeout'] === 'number' ? { timeoutMs: o['timeout'] } : {}),
        ...(typeof o['bodyTimeout'] === 'number' ? { bodyTimeoutMs: o['bodyTimeout'] } : {}),
        ...(typeof o['maxBytes'] === 'number' ? { maxBytes: o['maxBytes'] } : {}),
      });
    });
}
