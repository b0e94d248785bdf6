/**
 * The `hash` attribute of `rs:md` and `rs:ln` (§7, Table 3): a whitespace-separated list of
 * `algorithm:hexdigest` values, e.g. `md5:1e0d5cb8ef6ba40c99b14c0237be735e sha-256:854f61...`.
 * The algorithm names are those of the IANA "Hash Function Textual Names" registry (md5, sha-1, sha-256).
 *
 * @module
 */
import { HASH_ALGORITHMS, type HashAlgorithm } from './constants.js';
import { ResourceSyncError } from './errors.js';

/** Digests by algorithm name, lower-case hex. */
export type Hashes = Partial<Record<HashAlgorithm, string>>;

/** True for the algorithms the standard names (md5, sha-1, sha-256). */
export function isKnownHashAlgorithm(name: string): name is HashAlgorithm {
  return Object.hasOwn(HASH_ALGORITHMS, name);
}

/** True when `hex` is a hex digest of the right length for `alg` (any non-empty hex for unknown algorithms). */
export function isHexDigest(alg: string, hex: string): boolean {
  const expected = isKnownHashAlgorithm(alg) ? HASH_ALGORITHMS[alg] : undefined;
  if (expected !== undefined && hex.length !== expected) return false;
  if (hex.length === 0) return false;
  for (let i = 0; i < hex.length; i++) {
    const c = hex.charCodeAt(i);
    const f = c | 0x20; // fold A-F to a-f (only letters: U+0010-U+0019 would fold to digits)
    if (!((c >= 48 && c <= 57) || (f >= 97 && f <= 102))) return false;
  }
  return true;
}

/**
 * Parses a hash attribute into algorithm -> hex digest (lower-cased). Unknown algorithms are kept.
 * @throws ResourceSyncError `RS_INVALID_VALUE` for an item without `:`, an empty digest, a repeated
 *   algorithm, or a digest that is not hex of the algorithm's length.
 */
export function parseHashes(attr: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const item of attr.split(/\s+/)) {
    if (item === '') continue;
    const colon = item.indexOf(':');
    if (colon <= 0)
      throw new ResourceSyncError('RS_INVALID_VALUE', `hash item ${JSON.stringify(item)} is not algorithm:hexdigest`);
    const alg = item.slice(0, colon).toLowerCase();
    const hex = item.slice(colon + 1);
    if (!isHexDigest(alg, hex))
      throw new ResourceSyncError('RS_INVALID_VALUE', `hash ${JSON.stringify(item)} is not a ${alg} hex digest`);
    if (out.has(alg)) throw new ResourceSyncError('RS_INVALID_VALUE', `hash algorithm ${alg} given twice`);
    out.set(alg, hex.toLowerCase());
  }
  if (out.size === 0) throw new ResourceSyncError('RS_INVALID_VALUE', 'empty hash attribute');
  return out;
}

/** Known digests from a hash attribute; `{}` when the attribute is absent or invalid. */
export function knownHashes(attr: string | undefined): Hashes {
  const out: Hashes = {};
  if (attr === undefined) return out;
  let parsed: Map<string, string>;
  try {
    parsed = parseHashes(attr);
  } catch {
    return out;
  }
  for (const [alg, hex] of parsed) if (isKnownHashAlgorithm(alg)) out[alg] = hex;
  return out;
}

/** Formats digests as a hash attribute, in the fixed order md5, sha-1, sha-256. */
export function formatHashes(hashes: Hashes): string {
  const parts: string[] = [];
  for (const alg of Object.keys(HASH_ALGORITHMS) as HashAlgorithm[]) {
    const hex = hashes[alg];
    if (hex !== undefined) parts.push(`${alg}:${hex}`);
  }
  return parts.join(' ');
}

/**
 * Compares digests both sides know. `true` when at least one algorithm is common and all common ones agree,
 * `false` when one differs, `undefined` when no algorithm is common.
 */
export function hashesMatch(a: Hashes, b: Hashes): boolean | undefined {
  let common = false;
  for (const alg of Object.keys(HASH_ALGORITHMS) as HashAlgorithm[]) {
    const x = a[alg];
    const y = b[alg];
    if (x === undefined || y === undefined) continue;
    common = true;
    if (x.toLowerCase() !== y.toLowerCase()) return false;
  }
  return common ? true : undefined;
}
