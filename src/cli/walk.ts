/**
 * Walking a Source: from a Source Description (or its Index), a Capability List or an index down to every
 * ResourceSync document it lists (Source Descriptions, Capability Lists, capability documents, index members,
 * dump manifests linked with `contents`), validating each, and checking the rules between documents
 * (`core/validate-links.ts`).
 *
 * Memory: the queue and the set of URLs seen hold at most `maxDocuments` URLs; each document is streamed.
 *
 * @module
 */
import type { DocumentHeader } from '../core/model.js';
import { type ChildLink, checkLinkedDocument, childLinks, type LinkContext } from '../core/validate-links.js';
import { ResourceSyncError } from '../core/errors.js';
import { type InputOptions, isUrl } from './input.js';
import { type DocumentOutcome, type ValidateCommandOptions, validateInput } from './validate.js';

/** How the walk's start was found from a URL that is not itself a ResourceSync document (see {@link findWalkStart}). */
export interface DiscoveryReport {
  /** The URL given. */
  readonly given: string;
  /** The document the walk starts from (the URL given when discovery found nothing better). */
  readonly found: string;
  /** What `found` is: a Source Description, a Capability List, a list ... */
  readonly kind?: string;
  /** Every URL discovery fetched, with what it turned out to be. */
  readonly steps: readonly string[];
  readonly warnings: readonly string[];
  /** Why discovery found nothing (the walk then starts from the URL given). */
  readonly error?: { readonly code: string; readonly message: string };
}

/** Options of {@link walkDocuments}. */
export interface WalkOptions extends ValidateCommandOptions {
  /** Most documents visited, the start included (default 100). */
  readonly maxDocuments?: number;
  /** Also fetch and check the ZIP packages of Resource Dumps and Change Dumps. */
  readonly packages?: boolean;
  /**
   * Called before the first document when the start is a URL that is not itself a ResourceSync document (a
   * Source's root, a web page, a robots.txt) and discovery (the one `sync` uses) ran from it.
   */
  readonly onDiscovery?: (report: DiscoveryReport) => void;
}

/**
 * Where a walk from `start` begins: `start` itself when it is a file, or a URL of a ResourceSync or Sitemap
 * document; otherwise the document discovery (src/destination/discovery.ts, as `sync` does) finds from it:
 * the Source Description, else the Capability List, else the list it leads to. `report` is set when
 * discovery chose another start or found nothing.
 */
export async function findWalkStart(
  start: string,
  options: InputOptions = {},
): Promise<{ readonly url: string; readonly report?: DiscoveryReport }> {
  if (!isUrl(start)) return { url: start };
  // Loaded for URLs only (the HTTP client and discovery are not needed to validate a file).
  const [{ HttpClient }, { discover }] = await Promise.all([
    import('../http/client.js'),
    import('../destination/discovery.js'),
  ]);
  const timeout = options.timeoutMs ?? 10_000;
  const client = new HttpClient({
    connectTimeoutMs: timeout,
    headersTimeoutMs: timeout,
    bodyIdleTimeoutMs: options.bodyTimeoutMs ?? 30_000,
    retries: 1,
  });
  try {
    const found = await discover(start, client, options.signal === undefined ? {} : { signal: options.signal });
    const warnings = found.warnings ?? [];
    if (found.start !== undefined && found.start.kind !== 'unknown')
      return warnings.length === 0
        ? { url: start }
        : {
            url: start,
            report: { given: start, found: start, kind: found.start.kind, steps: found.tried, warnings },
          };
    // The Source Description (or its Index) when discovery read it (a Capability List's up link may name one
    // that is gone): the walk goes down from the top.
    const sd = found.sourceDescription;
    const sdKind = ['source-description-index', 'source-description'].find(
      (k) => sd !== undefined && found.tried.includes(`${sd}: ${k}`),
    );
    const sdRead = sdKind !== undefined;
    const kind = sdKind ?? (found.set !== undefined ? 'capability-list' : found.direct?.kind);
    const url = (sdRead ? sd : undefined) ?? found.set?.url ?? found.direct?.url ?? found.sets[0]?.url ?? start;
    return {
      url,
      report: { given: start, found: url, ...(kind === undefined ? {} : { kind }), steps: found.tried, warnings },
    };
  } catch (e) {
    if (!(e instanceof ResourceSyncError) || e.code === 'RS_ABORTED') throw e;
    // Nothing found: the walk reads the URL given, and says why it is not a ResourceSync document.
    return {
      url: start,
      report: { given: start, found: start, steps: [], warnings: [], error: { code: e.code, message: e.message } },
    };
  } finally {
    await client.close().catch(() => undefined);
  }
}

/** One document of the walk. */
export interface WalkedDocument {
  readonly url: string;
  /** 0 for the start document. */
  readonly depth: number;
  /** How it was reached (absent for the start). */
  readonly context?: LinkContext;
  readonly outcome: DocumentOutcome;
}

/** A walk in progress: iterate `documents`; `skipped()` tells how many links were not followed (limit). */
export interface Walk {
  readonly documents: AsyncGenerator<WalkedDocument, void, undefined>;
  skipped(): number;
}

/**
 * Walks breadth-first from `from` (or the document discovery finds from it: {@link findWalkStart}), one
 * document at a time (politely sequential). `--expect` (options.expect) applies to the start document only.
 */
export function walkDocuments(from: string, options: WalkOptions = {}): Walk {
  let start = from;
  const max = options.maxDocuments ?? 100;
  let skipped = 0;
  const { expect: _expect, ...childOptions } = options;
  async function* documents(): AsyncGenerator<WalkedDocument, void, undefined> {
    const begin = await findWalkStart(start, options);
    if (begin.report !== undefined) options.onDiscovery?.(begin.report);
    start = begin.url;
    const seen = new Set<string>([start]);
    const queue: { url: string; depth: number; context?: LinkContext }[] = [{ url: start, depth: 0 }];
    for (let item = queue.shift(); item !== undefined; item = queue.shift()) {
      const { context, depth } = item;
      let header: DocumentHeader | undefined;
      let url = item.url;
      const enqueue = (c: ChildLink): void => {
        if (seen.has(c.url)) return;
        if (seen.size >= max) {
          skipped++;
          return;
        }
        seen.add(c.url);
        queue.push({ url: c.url, depth: depth + 1, context: c.context });
      };
      const outcome = await validateInput(item.url, depth === 0 ? options : childOptions, {
        onHeader: (h, finalUrl) => {
          header = h;
          url = finalUrl;
          return context === undefined ? [] : checkLinkedDocument(h, context);
        },
        onEntry: (e) => {
          if (header === undefined) return;
          for (const c of childLinks({ header, url, kind: header.kind }, e, context, {
            packages: options.packages === true,
          }))
            enqueue(c);
        },
      });
      yield { url: item.url, depth, ...(context === undefined ? {} : { context }), outcome };
    }
  }
  return { documents: documents(), skipped: () => skipped };
}

/**
 * Prints a discovery report: on stderr for people (what was found, the steps, the warnings), or as one JSON line
 * `{"discovery": {...}}` on stdout with `json`.
 */
export function printDiscovery(
  report: DiscoveryReport,
  json: boolean,
  out: { readonly stdout: (t: string) => void; readonly stderr: (t: string) => void },
): void {
  if (json) {
    out.stdout(`${JSON.stringify({ discovery: report })}\n`);
    return;
  }
  const lines: string[] = [];
  if (report.error !== undefined)
    lines.push(`discovery from ${report.given} found nothing: ${report.error.message} [${report.error.code}]`);
  else if (report.found !== report.given)
    lines.push(`discovery from ${report.given}: walking from the ${report.kind ?? 'document'} ${report.found}`);
  for (const step of report.steps) lines.push(`  tried ${step}`);
  for (const w of report.warnings) lines.push(`  warning: ${w}`);
  out.stderr(lines.map((l) => `resourcesync: ${l}\n`).join(''));
}
