/**
 * Property tests: the validator never throws on any model input, only reports codes of RULES with their
 * rule's severity, keeps at most maxIssues, and is deterministic.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { CAPABILITIES, RS_NS, SITEMAP_NS } from '../../src/core/constants.js';
import type { DocumentKind, Entry, Link, Metadata, ResourceSyncDocument } from '../../src/core/model.js';
import { defaultNamespaces, documentKind } from '../../src/core/model.js';
import { RULES_BY_CODE } from '../../src/core/rules.js';
import { validateDocument } from '../../src/core/validate.js';

const datetime = fc.oneof(
  fc.constantFrom('2013-01-03T09:00:00Z', '2013-01-03', '2013', '2013-01-03T10:00:00+01:00', 'yesterday', ''),
  fc.date({ min: new Date(0), max: new Date(4e12), noInvalidDate: true }).map((d) => d.toISOString()),
);
const uri = fc.oneof(fc.webUrl(), fc.constantFrom('/relative', 'ws://e.com/c', 'http://e.com/a b', ''), fc.string());
const maybe = <T>(a: fc.Arbitrary<T>) => fc.option(a, { nil: undefined });

const metadata: fc.Arbitrary<Metadata> = fc
  .record(
    {
      capability: maybe(fc.oneof(fc.constantFrom(...CAPABILITIES), fc.string())),
      at: maybe(datetime),
      completed: maybe(datetime),
      from: maybe(datetime),
      until: maybe(datetime),
      change: maybe(fc.constantFrom('created', 'updated', 'deleted', 'moved')),
      datetime: maybe(datetime),
      hash: maybe(fc.oneof(fc.constantFrom('md5:1584abdf8ebdc9802ac0c6a7402c03b6', 'sha-256:xyz', 'md5'), fc.string())),
      length: maybe(fc.oneof(fc.nat(), fc.constant(-1), fc.double())),
      type: maybe(fc.oneof(fc.constantFrom('text/html', 'application/zip; q=1', 'html'), fc.string())),
      path: maybe(fc.oneof(fc.constantFrom('/a/b', 'a/b', '/../x', '/a//b'), fc.string())),
      extensions: maybe(
        fc.array(
          fc.record({
            ns: fc.constantFrom('', RS_NS, 'urn:x'),
            prefix: fc.constantFrom('', 'rs', 'x'),
            local: fc.string({ minLength: 1 }),
            value: fc.string(),
          }),
          { maxLength: 2 },
        ),
      ),
      invalid: maybe(fc.dictionary(fc.constantFrom('length', 'pri', 'at', 'foo'), fc.string(), { maxKeys: 2 })),
    },
    { requiredKeys: [] },
  )
  .map((m) => Object.fromEntries(Object.entries(m).filter(([, v]) => v !== undefined)) as Metadata);

const link: fc.Arbitrary<Link> = fc
  .record({
    rel: fc.oneof(
      fc.constantFrom(
        'up',
        'index',
        'duplicate',
        'timegate',
        'alternate',
        'http://www.openarchives.org/rs/terms/patch',
        '',
      ),
      fc.string(),
    ),
    href: uri,
    pri: maybe(fc.integer({ min: -5, max: 1_000_005 })),
    modified: maybe(datetime),
    type: maybe(fc.constantFrom('text/html', 'bad')),
    hash: maybe(fc.constantFrom('md5:zz', 'sha-1:' + 'a'.repeat(40))),
  })
  .map((l) => Object.fromEntries(Object.entries(l).filter(([, v]) => v !== undefined)) as unknown as Link);

const entry: fc.Arbitrary<Entry> = fc
  .record({
    element: fc.constantFrom('url' as const, 'sitemap' as const),
    loc: uri,
    lastmod: maybe(datetime),
    changefreq: maybe(fc.constantFrom('daily', 'sometimes')),
    priority: maybe(fc.constantFrom('0.5', '2', 'x')),
    md: maybe(metadata),
    links: fc.array(link, { maxLength: 3 }),
    extensions: maybe(
      fc.array(
        fc.record({
          ns: fc.constantFrom(RS_NS, SITEMAP_NS, 'urn:x'),
          prefix: fc.constant('p'),
          local: fc.constantFrom('md', 'ln', 'loc', 'foo'),
          attributes: fc.constant([]),
          children: fc.constant([]),
        }),
        { maxLength: 2 },
      ),
    ),
    line: maybe(fc.integer({ min: 1, max: 1000 })),
  })
  .map((e) => Object.fromEntries(Object.entries(e).filter(([, v]) => v !== undefined)) as unknown as Entry);

const document: fc.Arbitrary<ResourceSyncDocument> = fc
  .record({
    root: fc.constantFrom('urlset' as const, 'sitemapindex' as const),
    md: maybe(metadata),
    links: fc.array(link, { maxLength: 3 }),
    entries: fc.array(entry, { maxLength: 8 }),
  })
  .map(({ root, md, links, entries }) => {
    const doc: ResourceSyncDocument = {
      root,
      kind: documentKind(root, md?.capability),
      links,
      namespaces: defaultNamespaces(),
      entries,
    };
    if (md !== undefined) doc.md = md;
    return doc;
  });

const KINDS: DocumentKind[] = ['change-list', 'change-notification', 'framework-notification', 'resource-list'];

describe('validator properties', () => {
  it('never throws, reports only RULES codes with their severity, bounded by maxIssues, deterministic', () => {
    fc.assert(
      fc.property(
        document,
        maybe(fc.constantFrom(...KINDS)),
        fc.integer({ min: 0, max: 20 }),
        (doc, expectedKind, maxIssues) => {
          const options = { maxIssues, ...(expectedKind === undefined ? {} : { expectedKind }) };
          const r = validateDocument(doc, options);
          assert.ok(r.issues.length <= maxIssues);
          assert.equal(r.issues.length + r.suppressed, r.errors + r.warnings);
          assert.equal(r.valid, r.errors === 0);
          assert.equal(r.entries, doc.entries.length);
          for (const i of r.issues) {
            const rule = RULES_BY_CODE.get(i.code);
            assert.ok(rule !== undefined, i.code);
            assert.equal(i.severity, rule.severity, i.code);
            assert.ok(i.message.length > 0 && i.message.length < 400, i.message);
            assert.ok(i.section.length > 0);
            if (i.entry !== undefined) assert.ok(i.entry >= 1 && i.entry <= doc.entries.length);
          }
          assert.deepEqual(validateDocument(doc, options), r);
        },
      ),
      { numRuns: 400 },
    );
  });
});
