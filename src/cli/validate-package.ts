/**
 * Validating a Resource Dump or Change Dump package (§11.2, §13.2): a ZIP file whose `manifest.xml`, at its
 * top, is a Resource Dump Manifest or Change Dump Manifest describing every bitstream of the package.
 *
 * Checks, on top of every rule of the manifest itself: the package is a readable, safe ZIP with the manifest
 * (`RS_ZIP`), the manifest's kind, each `path` names a file of the package, each bitstream's size and digest
 * match the manifest's `length` and `hash` (each bitstream is read once, streamed), and every file of the
 * package is described.
 *
 * Memory: the package's central directory (one small record per file, via `DumpPackage`), the set of names
 * the manifest lists (bounded by the number of files), one bitstream chunk at a time.
 *
 * @module
 */
import { createWriteStream } from 'node:fs';
import { mkdtemp, open, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { DUMP_MANIFEST_NAME, type HashAlgorithm } from '../core/constants.js';
import { ResourceSyncError } from '../core/errors.js';
import { knownHashes } from '../core/hash.js';
import type { DocumentHeader, Entry } from '../core/model.js';
import {
  createIssue,
  createValidator,
  issueFromError,
  type ValidateOptions,
  type ValidationIssue,
  type ValidationResult,
} from '../core/validate.js';
import { DumpPackage, manifestPathToName } from '../destination/dump.js';
import { createMultiHasher } from '../io/hashing.js';

/** The 4 bytes every ZIP file (with at least one entry) starts with: `PK\x03\x04`. */
export function isZipHead(head: Uint8Array | undefined): boolean {
  return head !== undefined && head[0] === 0x50 && head[1] === 0x4b && head[2] === 0x03 && head[3] === 0x04;
}

/** True when the file starts like a ZIP file. */
export async function isZipFile(path: string): Promise<boolean> {
  const fh = await open(path, 'r');
  try {
    const head = new Uint8Array(4);
    const { bytesRead } = await fh.read(head, 0, 4, 0);
    return bytesRead === 4 && isZipHead(head);
  } finally {
    await fh.close();
  }
}

/** Options of {@link validatePackage}. */
export interface ValidatePackageOptions extends ValidateOptions {
  /** Read every bitstream to check its length and hash against the manifest (default true). */
  readonly verify?: boolean;
  /** Called with the manifest's header; returns issues to add (rules between documents, when walking). */
  readonly onManifest?: (header: DocumentHeader) => readonly ValidationIssue[];
}

/**
 * Validates a package file. Never throws a `ResourceSyncError`: a package that cannot be opened is a result
 * with that error as its issue.
 */
export async function validatePackage(
  file: string,
  source: string,
  options: ValidatePackageOptions = {},
): Promise<ValidationResult> {
  let pkg: DumpPackage;
  try {
    pkg = await DumpPackage.open(file, { url: source, removeOnClose: false });
  } catch (e) {
    if (!(e instanceof ResourceSyncError)) throw e;
    return unreadablePackage(e);
  }
  try {
    let manifest: Awaited<ReturnType<DumpPackage['openManifest']>>;
    try {
      manifest = await pkg.openManifest();
    } catch (e) {
      if (!(e instanceof ResourceSyncError)) throw e;
      return unreadablePackage(e);
    }
    const v = createValidator(manifest.header, options);
    for (const issue of options.onManifest?.(manifest.header) ?? []) v.report(issue);
    const kind = manifest.header.kind;
    if (kind !== 'resource-dump-manifest' && kind !== 'change-dump-manifest')
      v.report(
        createIssue('package-manifest-kind', `${DUMP_MANIFEST_NAME} is a ${kind}, not a dump manifest`, {
          element: manifest.header.root,
        }),
      );
    const listed = new Set<string>();
    let seen = 0;
    const drain = (): void => {
      while (seen < manifest.issues.length) v.note(manifest.issues[seen++] as (typeof manifest.issues)[number]);
    };
    let n = 0;
    try {
      for await (const e of manifest.entries) {
        n++;
        drain();
        v.entry(e);
        await checkBitstream(pkg, e, n, v, listed, options.verify ?? true);
      }
    } catch (e) {
      if (!(e instanceof ResourceSyncError)) throw e;
      v.report(issueFromError(e));
    }
    drain();
    for (const name of pkg.names())
      if (name !== DUMP_MANIFEST_NAME && !listed.has(name))
        v.report(
          createIssue('package-file-unlisted', `${JSON.stringify(name)} is in the package but not in the manifest`),
        );
    return v.finish();
  } finally {
    await pkg.close();
  }
}

async function checkBitstream(
  pkg: DumpPackage,
  e: Entry,
  n: number,
  v: ReturnType<typeof createValidator>,
  listed: Set<string>,
  verify: boolean,
): Promise<void> {
  const md = e.md;
  if (md?.path === undefined) return; // path-missing, or a deletion: the manifest rules say so
  const where = (attribute: string) => ({
    entry: n,
    ...(e.line === undefined ? {} : { line: e.line }),
    element: 'rs:md',
    attribute,
  });
  let name: string;
  try {
    name = manifestPathToName(md.path);
  } catch {
    return; // path-not-absolute / path-unsafe already reported
  }
  if (!pkg.has(md.path)) {
    v.report(
      createIssue(
        'package-path-missing',
        `path ${JSON.stringify(md.path)}: no such file in the package`,
        where('path'),
      ),
    );
    return;
  }
  listed.add(name);
  const hashes = knownHashes(md.hash);
  const algs = Object.keys(hashes) as HashAlgorithm[];
  if (!verify || (md.length === undefined && algs.length === 0)) return;
  const hasher = createMultiHasher(algs);
  for await (const chunk of await pkg.openBitstream(md.path)) hasher.update(chunk);
  if (md.length !== undefined && hasher.length !== md.length)
    v.report(
      createIssue(
        'package-length-mismatch',
        `${JSON.stringify(md.path)} has ${hasher.length} bytes, the manifest says ${md.length}`,
        where('length'),
      ),
    );
  const got = hasher.digest();
  for (const alg of algs)
    if (got[alg] !== hashes[alg])
      v.report(
        createIssue(
          'package-hash-mismatch',
          `${JSON.stringify(md.path)} has ${alg} ${got[alg]}, the manifest says ${hashes[alg]}`,
          where('hash'),
        ),
      );
}

/**
 * Writes a byte stream to a new temporary file (for a package read from a URL: ZIP needs random access) and
 * returns its path and a function removing it. Memory: one chunk at a time.
 */
export async function spoolToTempFile(
  bytes: AsyncIterable<Uint8Array>,
): Promise<{ readonly file: string; remove(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'resourcesync-package-'));
  const file = join(dir, 'package.zip');
  const remove = () => rm(dir, { recursive: true, force: true });
  try {
    await pipeline(bytes, createWriteStream(file));
  } catch (e) {
    await remove();
    throw e;
  }
  return { file, remove };
}

/** The result for a package that cannot be opened or whose manifest cannot be read: one error issue. */
function unreadablePackage(e: ResourceSyncError): ValidationResult {
  return {
    kind: 'unknown',
    entries: 0,
    issues: [issueFromError(e)],
    errors: 1,
    warnings: 0,
    suppressed: 0,
    valid: false,
  };
}
