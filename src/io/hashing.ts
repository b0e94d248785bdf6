/**
 * Hashing of byte streams in one pass, for every algorithm at once (md5, sha-1, sha-256: §7).
 *
 * @module
 */
import { createHash, type Hash } from 'node:crypto';
import { open } from 'node:fs/promises';
import type { HashAlgorithm } from '../core/constants.js';
import { ResourceSyncError } from '../core/errors.js';
import type { Hashes } from '../core/hash.js';

const NODE_NAMES: Record<HashAlgorithm, string> = { md5: 'md5', 'sha-1': 'sha1', 'sha-256': 'sha256' };

/** Feeds every chunk to several digests and counts bytes. Memory: one digest state per algorithm. */
export interface MultiHasher {
  update(chunk: Uint8Array): void;
  /** Hex digests; call once, at the end. */
  digest(): Hashes;
  /** Bytes seen so far. */
  readonly length: number;
}

/**
 * A hasher computing every algorithm of `algs` over the same bytes.
 *
 * @example
 * ```ts
 * const h = createMultiHasher(['md5', 'sha-256']);
 * h.update(bytes);
 * h.digest(); // { md5: '...', 'sha-256': '...' }
 * ```
 */
export function createMultiHasher(algs: readonly HashAlgorithm[]): MultiHasher {
  const hashes: [HashAlgorithm, Hash][] = algs.map((a) => [a, createHash(NODE_NAMES[a])]);
  let length = 0;
  return {
    update(chunk: Uint8Array): void {
      length += chunk.byteLength;
      for (const [, h] of hashes) h.update(chunk);
    },
    digest(): Hashes {
      const out: Hashes = {};
      for (const [a, h] of hashes) out[a] = h.digest('hex');
      return out;
    },
    get length() {
      return length;
    },
  };
}

/** Result of hashing a stream or file. */
export interface HashResult {
  readonly hashes: Hashes;
  readonly length: number;
}

/**
 * Hashes a byte stream in one pass. Memory: one chunk at a time (whatever the source yields).
 */
export async function hashStream(
  source: AsyncIterable<Uint8Array>,
  algs: readonly HashAlgorithm[],
): Promise<HashResult> {
  const h = createMultiHasher(algs);
  for await (const chunk of source) h.update(chunk);
  return { hashes: h.digest(), length: h.length };
}

/** Options of {@link hashFile}. */
export interface HashFileOptions {
  /** Read size in bytes; large reads keep system calls few (default 1 MiB). */
  readonly bufferSize?: number;
}

/**
 * Hashes a file in one read pass with one reused buffer. Memory: `bufferSize`.
 * @throws ResourceSyncError `RS_IO` naming the path when the file cannot be read.
 */
export async function hashFile(
  path: string,
  algs: readonly HashAlgorithm[],
  options: HashFileOptions = {},
): Promise<HashResult> {
  const size = options.bufferSize ?? 1 << 20;
  const buffer = Buffer.allocUnsafe(size);
  const h = createMultiHasher(algs);
  let fh: Awaited<ReturnType<typeof open>> | undefined;
  try {
    fh = await open(path, 'r');
    for (;;) {
      const { bytesRead } = await fh.read(buffer, 0, size, null);
      if (bytesRead === 0) break;
      h.update(buffer.subarray(0, bytesRead));
    }
  } catch (e) {
    throw new ResourceSyncError('RS_IO', `cannot read ${path}: ${(e as Error).message}`, { cause: e });
  } finally {
    await fh?.close();
  }
  return { hashes: h.digest(), length: h.length };
}
