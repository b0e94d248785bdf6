/**
 * Conformance suite from the standard itself (CONVENTIONS 8): every example document of Z39.99-2017 and of the
 * Notification draft 0.8 is read whole, one byte at a time and at random chunk splits, validated with the
 * outcome stated below (with the section that justifies it), and round-tripped through the writer.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { DocumentKind, Entry, ResourceSyncDocument } from '../../src/core/model.js';
import { type ValidationResult, validateDocument, validateStream } from '../../src/core/validate.js';
import { openDocument, readDocument, serializeDocument } from '../../src/xml/index.js';

function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const up = dirname(dir);
    if (up === dir) throw new Error('package.json not found above the test');
    dir = up;
  }
  return dir;
}
const FIXTURES = join(repoRoot(), 'test', 'fixtures', 'spec-examples');

interface Expected {
  readonly kind: DocumentKind;
  /** Exact set of error codes. */
  readonly errors?: readonly string[];
  /** Exact set of warning codes. */
  readonly warnings?: readonly string[];
  /** Why, with the section: required when errors or warnings are expected. */
  readonly because?: string;
}

const WALKTHROUGH_UP = 'the walkthrough omits the mandatory <rs:ln rel="up"> to the Capability List';

/** The expected outcome of every XML example. */
const EXPECTED: Record<string, Expected> = {
  'example-01.xml': { kind: 'resource-list', errors: ['up-missing'], because: `§10.1: ${WALKTHROUGH_UP}` },
  'example-02.xml': { kind: 'resource-list', errors: ['up-missing'], because: `§10.1: ${WALKTHROUGH_UP}` },
  'example-03.xml': { kind: 'change-list', errors: ['up-missing'], because: `§12.1: ${WALKTHROUGH_UP}` },
  'example-04.xml': {
    kind: 'resource-dump',
    errors: ['up-missing'],
    warnings: ['package-metadata-recommended'],
    because: `§11.1: ${WALKTHROUGH_UP}; <rs:md type length> of each package is recommended`,
  },
  'example-05.xml': {
    kind: 'resource-dump-manifest',
    errors: ['up-missing'],
    warnings: ['type-recommended'],
    because: `§11.2: ${WALKTHROUGH_UP}; the type of each bitstream is recommended`,
  },
  'example-06.xml': { kind: 'capability-list' },
  'example-07.xml': { kind: 'source-description' },
  'example-08.xml': { kind: 'resource-list-index', errors: ['up-missing'], because: `§10.2: ${WALKTHROUGH_UP}` },
  'example-12.xml': { kind: 'source-description' },
  'example-13.xml': { kind: 'capability-list' },
  'example-14.xml': { kind: 'resource-list' },
  'example-15.xml': { kind: 'resource-list-index' },
  'example-16.xml': { kind: 'resource-list' },
  'example-17.xml': { kind: 'resource-dump' },
  'example-18.xml': { kind: 'resource-dump-manifest' },
  // §12.1: datetime is optional ("may also have"), so the 4th entry without one is valid and is not ordered.
  'example-19.xml': { kind: 'change-list' },
  'example-20.xml': { kind: 'change-list-index' },
  'example-21.xml': { kind: 'change-list' },
  'example-22.xml': { kind: 'change-dump' },
  'example-23.xml': { kind: 'change-dump-manifest' },
  'example-24.xml': { kind: 'change-list' },
  'example-25.xml': { kind: 'change-list' },
  'example-26.xml': { kind: 'change-list' },
  'example-27.xml': {
    kind: 'change-list',
    errors: ['hash-digest-invalid'],
    because: '§7: each hash value is a hex-encoded digest; the sha-256: values are not hex (nor 64 digits)',
  },
  'example-28.xml': { kind: 'change-list' },
  'example-29.xml': { kind: 'change-list' },
  'example-30.xml': { kind: 'change-list' },
  'example-31.xml': { kind: 'change-list' },
  'example-32.xml': { kind: 'change-list' },
  'example-33.xml': { kind: 'change-list' },
  // N-§3: change-notification and framework-notification are capabilities a Capability List may advertise.
  'notification-example-3-1.xml': { kind: 'capability-list' },
  // N-§4, N-§5: payloads have no document-level <rs:md>; the kind comes from the entries.
  'notification-example-4-1.xml': { kind: 'change-notification' },
  'notification-example-5-1.xml': { kind: 'framework-notification' },
  'notification-example-5-2.xml': { kind: 'framework-notification' },
};

function codes(r: ValidationResult, severity: 'error' | 'warning'): string[] {
  return [...new Set(r.issues.filter((i) => i.severity === severity).map((i) => i.code))].sort();
}

/** Issues as comparable tuples. */
function summary(r: ValidationResult): string[] {
  return r.issues.map((i) => `${i.line ?? '-'}:${i.entry ?? '-'}:${i.severity}:${i.code}:${i.attribute ?? ''}`);
}

function* chunks(bytes: Uint8Array, sizes: () => number): Generator<Uint8Array> {
  for (let i = 0; i < bytes.length; ) {
    const n = Math.max(1, sizes());
    yield bytes.subarray(i, i + n);
    i += n;
  }
}

/** Deterministic pseudo-random sizes (mulberry32), so a failure can be replayed. */
function randomSizes(seed: number, max: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return 1 + (((t ^ (t >>> 14)) >>> 0) % max);
  };
}

function withoutLines(doc: ResourceSyncDocument): ResourceSyncDocument {
  return { ...doc, entries: doc.entries.map(({ line: _line, ...e }: Entry) => e) };
}

describe('spec examples: every XML example has a stated outcome', () => {
  const files = readdirSync(FIXTURES).filter((f) => f.endsWith('.xml'));
  it('the table covers every XML example, and every example is in the table', () => {
    assert.deepEqual(files.slice().sort(), Object.keys(EXPECTED).sort());
  });

  for (const file of files) {
    const expected = EXPECTED[file];
    it(`${file}: ${expected?.kind ?? '?'} ${expected?.because ?? 'valid, no warning'}`, async () => {
      assert.ok(expected !== undefined);
      const bytes = new Uint8Array(readFileSync(join(FIXTURES, file)));
      const stream = await openDocument(bytes, { url: file });
      const r = await validateStream(stream);
      assert.equal(r.kind, expected.kind);
      assert.deepEqual(codes(r, 'error'), [...(expected.errors ?? [])].sort(), JSON.stringify(r.issues, null, 1));
      assert.deepEqual(codes(r, 'warning'), [...(expected.warnings ?? [])].sort(), JSON.stringify(r.issues, null, 1));
      assert.equal(r.valid, (expected.errors ?? []).length === 0);
      if (expected.errors !== undefined || expected.warnings !== undefined) assert.ok(expected.because);
      for (const i of r.issues)
        if (i.entry !== undefined) assert.ok(i.line !== undefined && i.line > 0, 'entry issues carry a line');

      // Same outcome whatever the chunking: one byte at a time, and random splits.
      const whole = summary(r);
      const bytewise = await validateStream(await openDocument(chunks(bytes, () => 1)));
      assert.deepEqual(summary(bytewise), whole, 'byte by byte');
      for (const seed of [1, 2, 3]) {
        const random = await validateStream(await openDocument(chunks(bytes, randomSizes(seed, 97))));
        assert.deepEqual(summary(random), whole, `random chunks, seed ${seed}`);
      }

      // Round trip: what the writer makes reads back the same, and validates the same (lines aside).
      const doc = await readDocument(bytes);
      assert.deepEqual(
        validateDocument(doc).issues.map((i) => i.code),
        r.issues.map((i) => i.code),
      );
      const again = await readDocument(new TextEncoder().encode(serializeDocument(doc)));
      assert.deepEqual(withoutLines(again), withoutLines(doc));
      assert.deepEqual(
        validateDocument(again).issues.map((i) => `${i.entry ?? '-'}:${i.code}`),
        r.issues.map((i) => `${i.entry ?? '-'}:${i.code}`),
      );
    });
  }
});

describe('spec examples: discovery (09–11)', () => {
  // Discovery itself belongs to the destination's discovery code; here we only check the examples carry what
  // §6.3.3 and §6.3.4 say they do.
  it('example-09.html has <link rel="resourcesync"> to a Capability List (§6.3.3)', () => {
    const html = readFileSync(join(FIXTURES, 'example-09.html'), 'utf8');
    const link = /<link\s+rel="resourcesync"\s+href="([^"]+)"/.exec(html);
    assert.equal(link?.[1], 'http://www.example.com/dataset1/capabilitylist.xml');
  });
  it('example-10.txt has an HTTP Link header with rel="resourcesync" (§6.3.3)', () => {
    const text = readFileSync(join(FIXTURES, 'example-10.txt'), 'utf8');
    const link = /Link:\s*<([^>]+)>;\s*rel="resourcesync"/.exec(text);
    assert.equal(link?.[1], 'http://www.example.com/dataset1/capabilitylist.xml');
  });
  it('example-11.txt has a Sitemap directive to a Resource List (§6.3.4)', () => {
    const text = readFileSync(join(FIXTURES, 'example-11.txt'), 'utf8');
    const sitemaps = text
      .split(/\r?\n/)
      .map((l) => /^\s*sitemap\s*:\s*(\S+)/i.exec(l)?.[1])
      .filter((u) => u !== undefined);
    assert.deepEqual(sitemaps, ['http://example.com/dataset1/resourcelist.xml']);
  });
});
