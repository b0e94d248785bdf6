import { existsSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Entry, ResourceSyncDocument } from '../../src/core/model.js';
import { ResourceSyncError } from '../../src/core/errors.js';

/** The repository root: the first directory above this file with a package.json (works from dist/ too). */
export function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const up = dirname(dir);
    if (up === dir) throw new Error('package.json not found above the test');
    dir = up;
  }
  return dir;
}

export const SPEC_DIR = join(repoRoot(), 'test', 'fixtures', 'spec-examples');

export function specExamples(): string[] {
  return readdirSync(SPEC_DIR)
    .filter((f) => f.endsWith('.xml'))
    .sort();
}

/** Deterministic PRNG (mulberry32). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** `bytes` cut into pieces of random size (1..max), as an async source. */
export async function* randomChunks(bytes: Uint8Array, seed: number, max = 64): AsyncGenerator<Uint8Array> {
  const rnd = prng(seed);
  let i = 0;
  while (i < bytes.length) {
    const n = 1 + Math.floor(rnd() * max);
    yield bytes.subarray(i, Math.min(bytes.length, i + n));
    i += n;
  }
}

/** `bytes` one byte per chunk. */
export function* byteChunks(bytes: Uint8Array): Generator<Uint8Array> {
  for (let i = 0; i < bytes.length; i++) yield bytes.subarray(i, i + 1);
}

/** The document without the `line` of its entries (the writer does not keep line numbers). */
export function withoutLines(doc: ResourceSyncDocument): ResourceSyncDocument {
  return {
    ...doc,
    entries: doc.entries.map((e: Entry) => {
      const { line: _line, ...rest } = e;
      return rest;
    }),
  };
}

/** Runs `fn`, expects a ResourceSyncError with `code`, returns it. */
export async function rejectsWith(fn: () => Promise<unknown>, code: string): Promise<ResourceSyncError> {
  try {
    await fn();
  } catch (e) {
    if (!(e instanceof ResourceSyncError)) throw e;
    if (e.code !== code) throw new Error(`expected ${code}, got ${e.code}: ${e.message}`, { cause: e });
    return e;
  }
  throw new Error(`expected ${code}, but it did not throw`);
}
