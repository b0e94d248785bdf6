/**
 * Test helpers for the Source engine: temp dirs, a crawler that reads and validates every document a Source
 * emits, and a ZIP package checker (yauzl).
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import yauzl from 'yauzl';
import { validateDocument } from '../../src/core/validate.js';
import type { DocumentKind, ResourceSyncDocument } from '../../src/core/model.js';
import { parseHashes } from '../../src/core/hash.js';
import { readDocument } from '../../src/xml/index.js';

/** A resource's content, as `ChangeInput.content` wants it. */
export async function* bytes(text: string): AsyncGenerator<Uint8Array> {
  yield Buffer.from(text);
}

export async function tempDir(prefix = 'rs-source-'): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

/** Anything that serves documents by request pathname. */
export interface DocumentServer {
  document(pathname: string): Promise<{ path: string; contentType: string } | undefined>;
}

export interface CrawledDocument {
  readonly url: string;
  readonly path: string;
  readonly doc: ResourceSyncDocument;
}

export interface CrawledPackage {
  readonly url: string;
  readonly path: string;
  readonly manifestUrl: string;
  readonly entryLength?: number;
}

const CHILD_KINDS: Partial<Record<DocumentKind, DocumentKind | 'by-capability'>> = {
  'source-description': 'capability-list',
  'capability-list': 'by-capability',
  'resource-list-index': 'resource-list',
  'change-list-index': 'change-list',
  'resource-dump-index': 'resource-dump',
  'change-dump-index': 'change-dump',
};

/**
 * Reads every document reachable from the Source Description, validates each (no error allowed), and returns
 * them with the dump packages they list.
 */
export async function crawl(
  server: DocumentServer,
  sourceDescriptionUrl: string,
): Promise<{
  docs: CrawledDocument[];
  packages: CrawledPackage[];
}> {
  const docs: CrawledDocument[] = [];
  const packages: CrawledPackage[] = [];
  const queue: { url: string; expected?: DocumentKind }[] = [
    { url: sourceDescriptionUrl, expected: 'source-description' },
  ];
  const seen = new Set<string>();
  while (queue.length > 0) {
    const { url, expected } = queue.shift()!;
    if (seen.has(url)) continue;
    seen.add(url);
    const file = await server.document(new URL(url).pathname);
    assert.ok(file !== undefined, `document ${url} is served`);
    assert.equal(file.contentType, 'application/xml');
    const doc = await readDocument(await readFile(file.path), { url });
    const result = validateDocument(doc, expected === undefined ? {} : { expectedKind: expected });
    const errors = result.issues.filter((i) => i.severity === 'error');
    assert.deepEqual(errors, [], `${url} (${doc.kind}) validates without error`);
    docs.push({ url, path: file.path, doc });
    const child = CHILD_KINDS[doc.kind];
    for (const e of doc.entries) {
      if (child === 'by-capability') {
        // A list or its Index (a Change List is plain while there is one).
        queue.push({ url: e.loc });
      } else if (child !== undefined) {
        queue.push({ url: e.loc, expected: child });
      } else if (doc.kind === 'resource-dump' || doc.kind === 'change-dump') {
        const contents = e.links.find((l) => l.rel === 'contents');
        assert.ok(contents !== undefined, `${e.loc} has a contents link`);
        const pkgFile = await server.document(new URL(e.loc).pathname);
        assert.ok(pkgFile !== undefined, `package ${e.loc} is served`);
        assert.equal(pkgFile.contentType, 'application/zip');
        const p: { url: string; path: string; manifestUrl: string; entryLength?: number } = {
          url: e.loc,
          path: pkgFile.path,
          manifestUrl: contents.href,
        };
        if (e.md?.length !== undefined) p.entryLength = e.md.length;
        packages.push(p);
        queue.push({
          url: contents.href,
          expected: doc.kind === 'resource-dump' ? 'resource-dump-manifest' : 'change-dump-manifest',
        });
      }
    }
  }
  return { docs, packages };
}

/** Entries of a ZIP file, in order, with their bytes. */
export async function readZip(path: string): Promise<{ name: string; data: Buffer }[]> {
  const zip = await new Promise<yauzl.ZipFile>((resolve, reject) =>
    yauzl.open(path, { lazyEntries: true }, (err, z) => (err !== null ? reject(err) : resolve(z))),
  );
  const out: { name: string; data: Buffer }[] = [];
  await new Promise<void>((resolve, reject) => {
    zip.on('error', reject);
    zip.on('end', () => resolve());
    zip.on('entry', (entry: yauzl.Entry) => {
      zip.openReadStream(entry, (err, stream) => {
        if (err !== null) return reject(err);
        const chunks: Buffer[] = [];
        stream.on('data', (c: Buffer) => chunks.push(c));
        stream.on('error', reject);
        stream.on('end', () => {
          out.push({ name: entry.fileName, data: Buffer.concat(chunks) });
          zip.readEntry();
        });
      });
    });
    zip.readEntry();
  });
  zip.close();
  return out;
}

/**
 * Checks a dump package: `manifest.xml` first, equal to the manifest copy, and every bitstream the manifest
 * lists present at its `path` with the listed length and hashes (and no other file).
 */
export async function checkPackage(server: DocumentServer, pkg: CrawledPackage): Promise<ResourceSyncDocument> {
  const entries = await readZip(pkg.path);
  assert.equal(entries[0]?.name, 'manifest.xml', `${pkg.url}: manifest.xml is the first entry`);
  const copy = await server.document(new URL(pkg.manifestUrl).pathname);
  assert.ok(copy !== undefined);
  assert.deepEqual(entries[0]!.data, await readFile(copy.path), `${pkg.url}: manifest copy equals manifest.xml`);
  const manifest = await readDocument(entries[0]!.data);
  const byName = new Map(entries.slice(1).map((e) => [e.name, e.data]));
  let withPath = 0;
  for (const e of manifest.entries) {
    const path = e.md?.path;
    if (e.md?.change === 'deleted') {
      assert.equal(path, undefined);
      continue;
    }
    assert.ok(path?.startsWith('/') === true, `${e.loc}: path with a leading /`);
    withPath++;
    const data = byName.get(path.slice(1));
    assert.ok(data !== undefined, `${pkg.url}: ${path} is in the package`);
    assert.equal(data.length, e.md?.length, `${path}: length`);
    const hashes = parseHashes(e.md?.hash ?? '');
    assert.equal(createHash('md5').update(data).digest('hex'), hashes.get('md5'), `${path}: md5`);
    assert.equal(createHash('sha256').update(data).digest('hex'), hashes.get('sha-256'), `${path}: sha-256`);
  }
  assert.equal(byName.size, withPath, `${pkg.url}: no file the manifest does not list`);
  return manifest;
}
