/**
 * `resourcesync validate [--json] <file-or-url>...`: every rule of the standard, one line per issue, a summary
 * per document. A ZIP input is taken as a dump package (see `validate-package.ts`). Exit codes: 0 no error (warnings allowed), 1 a document has an error (or is malformed), 2 an
 * input cannot be read or the arguments are wrong.
 *
 * @module
 */
import { type Command, InvalidArgumentError, Option } from 'commander';
import { ResourceSyncError } from '../core/errors.js';
import { RULES } from '../core/rules.js';
import type { DocumentHeader, DocumentKind, Entry } from '../core/model.js';
import { issueFromError, type ValidationIssue, type ValidationResult, validateStream } from '../core/validate.js';
import { openDocument } from '../xml/index.js';
import { EXIT } from './exit.js';
import { type CommandOutput, processOutput } from './output.js';
import { type Input, type InputOptions, isInputError, openInput, peekBytes } from './input.js';
import { printDiscovery, walkDocuments } from './walk.js';

export { type CommandOutput, processOutput } from './output.js';

/** Every document kind, for `--expect`. */
export const DOCUMENT_KINDS: readonly DocumentKind[] = [
  'source-description',
  'source-description-index',
  'capability-list',
  'resource-list',
  'resource-list-index',
  'resource-dump',
  'resource-dump-index',
  'resource-dump-manifest',
  'change-list',
  'change-list-index',
  'change-dump',
  'change-dump-index',
  'change-dump-manifest',
  'change-notification',
  'framework-notification',
];

/** Options of {@link runValidate}. */
export interface ValidateCommandOptions extends InputOptions {
  readonly json?: boolean;
  readonly expect?: DocumentKind;
  readonly strict?: boolean;
  readonly maxEntries?: number;
  readonly maxIssues?: number;
  /** For dump packages: read every bitstream to check length and hash (default true). */
  readonly verify?: boolean;
}

/** The outcome for one input: a validation result, or the error that kept it from being read. */
export type DocumentOutcome =
  | { readonly source: string; readonly result: ValidationResult }
  | { readonly source: string; readonly unreadable: ResourceSyncError };

/** Hooks of {@link validateInput}, used by the walker. */
export interface ValidateHooks {
  /** Called once the header is read, with the final URL; returns issues to add (rules between documents). */
  readonly onHeader?: (header: DocumentHeader, url: string) => readonly ValidationIssue[];
  /** Called with every entry, in order. */
  readonly onEntry?: (entry: Entry) => void;
}

/**
 * Reads and validates one file or URL, streaming (memory bounded as `validateStream` states).
 * Malformed documents give a result with the reader's error as an issue; unreadable inputs give `unreadable`.
 */
export async function validateInput(
  arg: string,
  options: ValidateCommandOptions = {},
  hooks: ValidateHooks = {},
): Promise<DocumentOutcome> {
  let input: Awaited<ReturnType<typeof openInput>>;
  try {
    input = await openInput(arg, options);
  } catch (e) {
    if (isInputError(e)) return { source: arg, unreadable: e };
    throw e;
  }
  const validateOptions = {
    ...(options.expect === undefined ? {} : { expectedKind: options.expect }),
    ...(options.maxEntries === undefined ? {} : { maxEntries: options.maxEntries }),
    ...(options.maxIssues === undefined ? {} : { maxIssues: options.maxIssues }),
    rethrow: isInputError,
  };
  try {
    const url = input.url ?? arg;
    const peeked = await peekBytes(input.bytes);
    if (startsLikeZip(peeked.head)) return { source: arg, result: await validateZip(input, peeked, options, hooks) };
    const stream = await openDocument(peeked.rest, { url });
    const extra = hooks.onHeader?.(stream.header, url) ?? [];
    const onEntry = hooks.onEntry;
    const entries = onEntry === undefined ? stream.entries : tap(stream.entries, onEntry);
    const batches =
      onEntry === undefined || stream.batches === undefined ? stream.batches : tapBatches(stream.batches, onEntry);
    const result = await validateStream(
      {
        header: stream.header,
        entries,
        batches,
        issues: stream.issues,
        // Read at the end (the size-limit rule): the bytes of the whole document.
        get bytesRead() {
          return stream.bytesRead;
        },
      },
      validateOptions,
    );
    return { source: arg, result: withIssues(result, extra) };
  } catch (e) {
    if (isInputError(e)) return { source: arg, unreadable: e };
    if (e instanceof ResourceSyncError) {
      const issue = issueFromError(e);
      return {
        source: arg,
        result: { kind: 'unknown', entries: 0, issues: [issue], errors: 1, warnings: 0, suppressed: 0, valid: false },
      };
    }
    throw e;
  } finally {
    await input.close();
  }
}

/** `isZipHead` of validate-package.ts, repeated here so that validating XML does not load the ZIP code. */
function startsLikeZip(head: Uint8Array | undefined): boolean {
  return head !== undefined && head[0] === 0x50 && head[1] === 0x4b && head[2] === 0x03 && head[3] === 0x04;
}

/** A dump package: validated from its file, or from a temporary copy of what the URL or stdin gives. */
async function validateZip(
  input: Input,
  peeked: Awaited<ReturnType<typeof peekBytes>>,
  options: ValidateCommandOptions,
  hooks: ValidateHooks,
): Promise<ValidationResult> {
  const onHeader = hooks.onHeader;
  const packageOptions = {
    ...(onHeader === undefined ? {} : { onManifest: (h: DocumentHeader) => onHeader(h, input.url ?? input.source) }),
    ...(options.maxEntries === undefined ? {} : { maxEntries: options.maxEntries }),
    ...(options.maxIssues === undefined ? {} : { maxIssues: options.maxIssues }),
    ...(options.verify === undefined ? {} : { verify: options.verify }),
  };
  // Loaded for packages only (it brings the ZIP reader).
  const { spoolToTempFile, validatePackage } = await import('./validate-package.js');
  if (input.path !== undefined) {
    await peeked.close();
    return validatePackage(input.path, input.source, packageOptions);
  }
  const spooled = await spoolToTempFile(peeked.rest);
  try {
    return await validatePackage(spooled.file, input.source, packageOptions);
  } finally {
    await spooled.remove();
  }
}

async function* tap(entries: AsyncIterable<Entry>, f: (e: Entry) => void): AsyncGenerator<Entry> {
  for await (const e of entries) {
    f(e);
    yield e;
  }
}

/** {@link tap} for batches: the hook sees each entry of a batch before the validator does. */
async function* tapBatches(
  batches: AsyncIterable<readonly Entry[]>,
  f: (e: Entry) => void,
): AsyncGenerator<readonly Entry[]> {
  for await (const batch of batches) {
    for (const e of batch) f(e);
    yield batch;
  }
}

/** A result with document-level issues added in front. */
function withIssues(r: ValidationResult, extra: readonly ValidationIssue[]): ValidationResult {
  if (extra.length === 0) return r;
  const errors = extra.filter((i) => i.severity === 'error').length;
  return {
    ...r,
    issues: [...extra, ...r.issues],
    errors: r.errors + errors,
    warnings: r.warnings + extra.length - errors,
    valid: r.valid && errors === 0,
  };
}

/** Formats an issue as `source:line: severity code message (section)`. */
export function formatIssue(source: string, i: ValidationIssue): string {
  const where = i.line !== undefined ? `${source}:${i.line}` : source;
  const entry = i.entry !== undefined && i.line === undefined ? ` entry ${i.entry}:` : '';
  return `${where}:${entry} ${i.severity} ${i.code} ${i.message} (${i.section})`;
}

/**
 * Runs `validate` over the inputs, one after the other (with `walk`, every document each one leads to), and
 * returns the exit code (0 valid, 1 a document has an error, 2 an input cannot be read).
 */
export async function runValidate(
  inputs: readonly string[],
  options: ValidateCommandOptions & {
    readonly walk?: boolean;
    readonly maxDocuments?: number;
    readonly packages?: boolean;
  } = {},
  out: CommandOutput = processOutput,
): Promise<number> {
  let code: number = EXIT.OK;
  let valid = 0;
  let invalid = 0;
  let unreadable = 0;
  const json = options.json === true;
  const report = (outcome: DocumentOutcome, walked?: { depth: number; parent?: string }): void => {
    const arg = outcome.source;
    const where = walked === undefined ? {} : { depth: walked.depth, parent: walked.parent };
    if ('unreadable' in outcome) {
      unreadable++;
      code = EXIT.USAGE;
      const e = outcome.unreadable;
      if (json)
        out.stdout(
          `${JSON.stringify({ source: arg, ...where, readable: false, error: { code: e.code, message: e.message } })}\n`,
        );
      else out.stderr(`resourcesync: ${e.message} [${e.code}]\n`);
      return;
    }
    const r = outcome.result;
    const ok = r.valid && (options.strict !== true || r.warnings === 0);
    if (ok) valid++;
    else {
      invalid++;
      if (code === EXIT.OK) code = EXIT.FAILED;
    }
    if (json) {
      const { issues, ...counts } = r;
      out.stdout(`${JSON.stringify({ source: arg, ...where, readable: true, ...counts, issues })}\n`);
      return;
    }
    let text = '';
    for (const i of r.issues) text += `${formatIssue(arg, i)}\n`;
    const more = r.suppressed > 0 ? ` (${r.suppressed} not shown)` : '';
    text += `${arg}: ${r.kind}, ${r.entries} ${r.entries === 1 ? 'entry' : 'entries'}: ${plural(r.errors, 'error')}, ${plural(r.warnings, 'warning')}${more}${ok ? '' : ' - INVALID'}\n`;
    out.stdout(text);
  };
  let documents = 0;
  for (const arg of inputs) {
    if (options.walk !== true) {
      documents++;
      report(await validateInput(arg, options));
      continue;
    }
    const walk = walkDocuments(arg, { ...options, onDiscovery: (r) => printDiscovery(r, json, out) });
    for await (const d of walk.documents) {
      documents++;
      report(d.outcome, { depth: d.depth, ...(d.context === undefined ? {} : { parent: d.context.parentUrl }) });
    }
    if (walk.skipped() > 0)
      out.stderr(`resourcesync: ${walk.skipped()} linked document(s) not visited (--max-documents)\n`);
  }
  if (!json && documents > 1)
    out.stdout(`${documents} documents: ${valid} valid, ${invalid} invalid, ${unreadable} unreadable\n`);
  return code;
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/** The rule table, one rule per line (`code severity section summary`), or JSON lines with `json`. */
export function formatRules(json = false): string {
  if (json) return RULES.map((r) => `${JSON.stringify(r)}\n`).join('');
  const width = Math.max(...RULES.map((r) => r.code.length));
  return RULES.map(
    (r) => `${r.code.padEnd(width)}  ${r.severity.padEnd(7)}  ${r.section.padEnd(18)}  ${r.summary}\n`,
  ).join('');
}

/** Parses a positive integer option. */
export function positiveInteger(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n <= 0) throw new InvalidArgumentError('expected a positive integer');
  return n;
}

/** Parses a duration in seconds (decimals allowed) to milliseconds. */
export function seconds(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError('expected a number of seconds > 0');
  return Math.round(n * 1000);
}

/** Help text shared by the commands that read a file or URL. */
export const EXIT_HELP = `
Exit codes:
  0  every document is valid (warnings allowed; with --strict, no warning either)
  1  a document has an error, or is not well-formed XML / not a ResourceSync document
  2  an input cannot be read (missing file, HTTP error, timeout; with --walk, any document of the walk)
     or the arguments are wrong
`;

/** Adds `validate` to the program. */
export function register(program: Command): void {
  program
    .command('validate')
    .description(
      'Check ResourceSync documents (files or http(s) URLs) against every rule of the standard; a ZIP dump package is checked with its manifest.xml and bitstreams',
    )
    .argument('[inputs...]', 'files, http(s) URLs, or - for standard input')
    .option('--list-rules', 'print every rule (code, severity, section, summary) and exit')
    .option('--json', 'one JSON object per document (JSON lines): source, kind, entries, issues')
    .addOption(new Option('--expect <kind>', 'the kind every document must be').choices(DOCUMENT_KINDS))
    .option('--strict', 'warnings make a document invalid too')
    .option(
      '--walk',
      "also validate every document each input leads to (Capability Lists, capability documents, index members, dump manifests), and the links between them; a URL that is not a ResourceSync document (a Source's root, a web page, robots.txt) is discovered from as sync does",
    )
    .option('--max-documents <n>', 'most documents visited per input with --walk (default: 100)', positiveInteger)
    .option('--timeout <seconds>', 'URL connect and response-headers timeout (default: 10)', seconds)
    .option('--body-timeout <seconds>', 'URL body idle timeout (default: 30)', seconds)
    .option('--max-bytes <n>', 'most bytes downloaded from a URL (default: 268435456)', positiveInteger)
    .option('--max-entries <n>', 'entries allowed in one document', positiveInteger, 50_000)
    .option('--max-issues <n>', 'issues shown per document (the rest are counted)', positiveInteger, 1000)
    .addHelpText(
      'after',
      `
Output: one line per issue, "file:line: error|warning <code> <message> (<section>)", then a summary per
document. "--list-rules" prints every rule code with its severity and section.
${EXIT_HELP}`,
    )
    .action(async (inputs: string[], o: Record<string, unknown>, command: Command) => {
      if (o['listRules'] === true) {
        processOutput.stdout(formatRules(o['json'] === true));
        process.exitCode = EXIT.OK;
        return;
      }
      if (inputs.length === 0) command.error('error: missing argument: a file or URL to validate', { exitCode: 2 });
      process.exitCode = await runValidate(inputs, {
        json: o['json'] === true,
        strict: o['strict'] === true,
        walk: o['walk'] === true,
        packages: o['packages'] === true,
        verify: o['verify'] !== false,
        ...(typeof o['maxDocuments'] === 'number' ? { maxDocuments: o['maxDocuments'] } : {}),
        ...(typeof o['expect'] === 'string' ? { expect: o['expect'] as DocumentKind } : {}),
        ...(typeof o['timeout'] === 'number' ? { timeoutMs: o['timeout'] } : {}),
        ...(typeof o['bodyTimeout'] === 'number' ? { bodyTimeoutMs: o['bodyTimeout'] } : {}),
        ...(typeof o['maxBytes'] === 'number' ? { maxBytes: o['maxBytes'] } : {}),
        maxEntries: o['maxEntries'] as number,
        maxIssues: o['maxIssues'] as number,
      });
    });
}
