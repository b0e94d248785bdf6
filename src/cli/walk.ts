/**
 * Walking a Source: from a Source Description, a Capability List or an index down to every ResourceSync
 * document it lists (Capability Lists, capability documents, index members, dump manifests linked with
 * `contents`), validating each, and checking the rules between documents (`core/validate-links.ts`).
 *
 * Memory: the queue and the set of URLs seen hold at most `maxDocuments` URLs; each document is streamed.
 *
 * @module
 */
import type { DocumentHeader } from '../core/model.js';
import { type ChildLink, checkLinkedDocument, childLinks, type LinkContext } from '../core/validate-links.js';
import { type DocumentOutcome, type ValidateCommandOptions, validateInput } from './validate.js';

/** Options of {@link walkDocuments}. */
export interface WalkOptions extends ValidateCommandOptions {
  /** Most documents visited, the start included (default 100). */
  readonly maxDocuments?: number;
  /** Also fetch and check the ZIP packages of Resource Dumps and Change Dumps. */
  readonly packages?: boolean;
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
 * Walks breadth-first from `start`, one document at a time (politely sequential). `--expect` (options.expect)
 * applies to the start document only.
 */
export function walkDocuments(start: string, options: WalkOptions = {}): Walk {
  const max = options.maxDocuments ?? 100;
  let skipped = 0;
  const { expect: _expect, ...childOptions } = options;
  async function* documents(): AsyncGenerator<WalkedDocument, void, undefined> {
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
