import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { RS_NS, SITEMAP_NS } from '../../src/core/constants.js';
import { ResourceSyncError } from '../../src/core/errors.js';
import type {
  DocumentHeader,
  DocumentKind,
  Entry,
  Link,
  Metadata,
  ResourceSyncDocument,
} from '../../src/core/model.js';
import { createHeader, defaultNamespaces } from '../../src/core/model.js';
import { formatRulesMarkdown, RULES } from '../../src/core/rules.js';
import {
  createValidator,
  type ValidateOptions,
  type ValidationResult,
  validateDocument,
  validateStream,
} from '../../src/core/validate.js';

const CAP = 'http://example.com/dataset1/capabilitylist.xml';
const SD = 'http://example.com/.well-known/resourcesync';
const MD5 = '1584abdf8ebdc9802ac0c6a7402c03b6';
const UP: Link = { rel: 'up', href: CAP };
const T0 = '2013-01-03T00:00:00Z';
const T1 = '2013-01-03T01:00:00Z';
const T2 = '2013-01-03T02:00:00Z';

function doc(kind: DocumentKind, md: Metadata, links: Link[], entries: Entry[]): ResourceSyncDocument {
  return { ...createHeader(kind, md, links), entries };
}
function url(loc: string, md?: Metadata, links: Link[] = [], more: Partial<Entry> = {}): Entry {
  const e: Entry = { element: 'url', loc, links, ...more };
  if (md !== undefined) e.md = md;
  return e;
}
function sitemap(loc: string, md?: Metadata): Entry {
  return { ...url(loc, md), element: 'sitemap' };
}
const res = (n: number, md?: Metadata, links: Link[] = []) => url(`http://example.com/res${n}`, md, links);

/** Valid documents of every kind: each rule test breaks one of them. */
const resourceList = (entries: Entry[] = [res(1), res(2)], links: Link[] = [UP]) =>
  doc('resource-list', { at: T0 }, links, entries);
const changeList = (entries: Entry[], md: Metadata = { from: T0 }) => doc('change-list', md, [UP], entries);
const changeDumpManifest = (entries: Entry[]) => doc('change-dump-manifest', { from: T0 }, [UP], entries);
const resourceDumpManifest = (entries: Entry[]) => doc('resource-dump-manifest', { at: T0 }, [UP], entries);
const capabilityList = (entries: Entry[]) =>
  doc(
    'capability-list',
    {},
    [
      { rel: 'describedby', href: 'http://example.com/about' },
      { rel: 'up', href: SD },
    ],
    entries,
  );
const sourceDescription = (
  entries: Entry[],
  links: Link[] = [{ rel: 'describedby', href: 'http://example.com/about' }],
) => doc('source-description', {}, links, entries);
const sdEntry = (n: number, md: Metadata = { capability: 'capabilitylist' }) =>
  url(`http://example.com/cl${n}.xml`, md, [{ rel: 'describedby', href: `http://example.com/set${n}` }]);
const sdIndex = (entries: Entry[], links: Link[] = []) => doc('source-description-index', {}, links, entries);
const changeDump = (entries: Entry[]) => doc('change-dump', { from: T0 }, [UP], entries);
const pkg = (n: number, md: Metadata) =>
  url(`http://example.com/p${n}.zip`, { type: 'application/zip', length: 10, ...md });
const notification = (entries: Entry[]): ResourceSyncDocument => ({
  root: 'urlset',
  kind: 'sitemap',
  links: [UP],
  namespaces: defaultNamespaces(),
  entries,
});

function codes(r: ValidationResult, severity?: 'error' | 'warning'): string[] {
  return [
    ...new Set(r.issues.filter((i) => severity === undefined || i.severity === severity).map((i) => i.code)),
  ].sort();
}
const check = (d: ResourceSyncDocument, o?: ValidateOptions) => validateDocument(d, o);

interface Case {
  readonly bad: () => ResourceSyncDocument;
  readonly good: () => ResourceSyncDocument;
  readonly options?: ValidateOptions;
}

/** For every rule: a document that breaks it, and the nearest one that does not. */
const CASES: Record<string, Case> = {
  'root-md-missing': {
    bad: () => {
      const { md: _md, ...rest } = resourceList();
      return { ...rest, kind: 'sitemap' };
    },
    good: () => resourceList(),
  },
  'capability-missing': {
    bad: () => ({ ...resourceList(), md: { at: T0 }, kind: 'sitemap' }),
    good: () => resourceList(),
  },
  'capability-unknown': {
    bad: () => ({ ...resourceList(), md: { capability: 'resourcelists', at: T0 }, kind: 'unknown' }),
    good: () => resourceList(),
  },
  'kind-unexpected': {
    bad: () => resourceList(),
    good: () => changeList([]),
    options: { expectedKind: 'change-list' },
  },
  'index-not-allowed': {
    bad: () => ({ ...resourceDumpManifest([]), root: 'sitemapindex', kind: 'unknown' }),
    good: () => resourceDumpManifest([]),
  },
  'capabilitylist-index': {
    bad: () => ({ ...capabilityList([]), root: 'sitemapindex', kind: 'unknown' }),
    good: () => capabilityList([]),
  },
  'element-mismatch': { bad: () => resourceList([sitemap('http://example.com/a')]), good: () => resourceList() },
  'entry-limit': {
    bad: () => resourceList([res(1), res(2), res(3)]),
    good: () => resourceList([res(1), res(2)]),
    options: { maxEntries: 2 },
  },
  'md-duplicate': {
    bad: () =>
      resourceList([
        { ...res(1, {}), extensions: [{ ns: RS_NS, prefix: 'rs', local: 'md', attributes: [], children: [] }] },
      ]),
    good: () => resourceList(),
  },
  'rs-element-unknown': {
    bad: () =>
      resourceList([
        { ...res(1), extensions: [{ ns: RS_NS, prefix: 'rs', local: 'foo', attributes: [], children: [] }] },
      ]),
    good: () =>
      resourceList([
        { ...res(1), extensions: [{ ns: 'urn:x', prefix: 'x', local: 'foo', attributes: [], children: [] }] },
      ]),
  },
  'element-repeated': {
    bad: () =>
      resourceList([
        { ...res(1), extensions: [{ ns: SITEMAP_NS, prefix: '', local: 'loc', attributes: [], children: ['x'] }] },
      ]),
    good: () => resourceList(),
  },
  'element-unknown': {
    bad: () =>
      resourceList([
        { ...res(1), extensions: [{ ns: SITEMAP_NS, prefix: '', local: 'image', attributes: [], children: [] }] },
      ]),
    good: () =>
      resourceList([
        { ...res(1), extensions: [{ ns: 'urn:img', prefix: 'i', local: 'image', attributes: [], children: [] }] },
      ]),
  },
  'attribute-prefixed': {
    bad: () => resourceList([res(1, { extensions: [{ ns: RS_NS, prefix: 'rs', local: 'length', value: '1' }] })]),
    good: () => resourceList([res(1, { length: 1 })]),
  },
  'attribute-unknown': {
    bad: () => resourceList([res(1, { extensions: [{ ns: '', prefix: '', local: 'size', value: '1' }] })]),
    good: () => resourceList([res(1, { extensions: [{ ns: 'urn:x', prefix: 'x', local: 'size', value: '1' }] })]),
  },
  'attribute-not-used': {
    bad: () => resourceList([res(1, { path: '/a' })]),
    good: () => resourceDumpManifest([res(1, { path: '/a', type: 'text/plain' })]),
  },
  'at-missing': { bad: () => doc('resource-list', {}, [UP], []), good: () => resourceList([]) },
  'from-missing': { bad: () => changeList([], {}), good: () => changeList([]) },
  'child-from-recommended': {
    bad: () => doc('change-list-index', { from: T0 }, [UP], [sitemap('http://example.com/cl1.xml')]),
    good: () => doc('change-list-index', { from: T0 }, [UP], [sitemap('http://example.com/cl1.xml', { from: T0 })]),
  },
  'datetime-invalid': {
    bad: () => resourceList([url('http://example.com/a', undefined, [], { lastmod: '2013-02-30' })]),
    good: () => resourceList([url('http://example.com/a', undefined, [], { lastmod: '2013-02-28T00:00:00Z' })]),
  },
  'datetime-not-utc': {
    bad: () => resourceList([url('http://example.com/a', undefined, [], { lastmod: '2013-02-28T01:00:00+01:00' })]),
    good: () => resourceList([url('http://example.com/a', undefined, [], { lastmod: '2013-02-28T00:00:00.5Z' })]),
  },
  'interval-reversed': {
    bad: () => doc('resource-list', { at: T1, completed: T0 }, [UP], []),
    good: () => doc('resource-list', { at: T0, completed: T1 }, [UP], []),
  },
  'datetime-outside-interval': {
    bad: () => changeList([res(1, { change: 'created', datetime: T2 })], { from: T0, until: T1 }),
    good: () => changeList([res(1, { change: 'created', datetime: T1 })], { from: T0, until: T1 }),
  },
  'order-not-chronological': {
    bad: () => changeList([res(1, { change: 'created', datetime: T2 }), res(2, { change: 'created', datetime: T1 })]),
    good: () =>
      changeList([
        res(1, { change: 'created', datetime: T1 }),
        res(3, { change: 'updated' }),
        res(2, { change: 'created', datetime: T1 }),
      ]),
  },
  'changedump-order': {
    bad: () => changeDump([pkg(1, { from: T1 }), pkg(2, { from: T0 })]),
    good: () => changeDump([pkg(1, { from: T0 }), pkg(2, { from: T1 })]),
  },
  'up-missing': { bad: () => resourceList(undefined, []), good: () => resourceList() },
  'up-unexpected': {
    bad: () =>
      sourceDescription(
        [sdEntry(1)],
        [
          { rel: 'describedby', href: 'http://e.com/a' },
          { rel: 'up', href: SD },
        ],
      ),
    good: () => sourceDescription([sdEntry(1)]),
  },
  'describedby-recommended': {
    bad: () => sourceDescription([sdEntry(1)], []),
    good: () => sourceDescription([sdEntry(1)]),
  },
  'ln-rel-missing': {
    bad: () => resourceList([res(1, undefined, [{ rel: '', href: 'http://m.example.com/res1' }])]),
    good: () => resourceList([res(1, undefined, [{ rel: 'duplicate', href: 'http://m.example.com/res1' }])]),
  },
  'ln-href-missing': {
    bad: () => resourceList([res(1, undefined, [{ rel: 'duplicate', href: '' }])]),
    good: () => resourceList([res(1, undefined, [{ rel: 'duplicate', href: 'http://m.example.com/res1' }])]),
  },
  'href-not-absolute': {
    bad: () => resourceList(undefined, [{ rel: 'up', href: '/cap.xml' }]),
    good: () => resourceList(),
  },
  'rel-unregistered': {
    bad: () => resourceList([res(1, undefined, [{ rel: 'mirror', href: 'http://m.example.com/res1' }])]),
    good: () =>
      resourceList([res(1, undefined, [{ rel: 'http://example.org/rel/mirror', href: 'http://m.example.com/r' }])]),
  },
  'pri-invalid': {
    bad: () =>
      resourceList([
        res(1, undefined, [{ rel: 'duplicate', href: 'http://m.example.com/res1', pri: 1_000_000 }]),
        res(2, undefined, [{ rel: 'duplicate', href: 'http://m.example.com/res2', invalid: { pri: 'high' } }]),
      ]),
    good: () =>
      resourceList([res(1, undefined, [{ rel: 'duplicate', href: 'http://m.example.com/res1', pri: 999_999 }])]),
  },
  'patch-type-missing': {
    bad: () =>
      changeList([
        res(1, { change: 'updated' }, [{ rel: 'http://www.openarchives.org/rs/terms/patch', href: 'http://e.com/p' }]),
      ]),
    good: () =>
      changeList([
        res(1, { change: 'updated' }, [
          { rel: 'http://www.openarchives.org/rs/terms/patch', href: 'http://e.com/p', type: 'application/json-patch' },
        ]),
      ]),
  },
  'patch-not-applicable': {
    bad: () =>
      resourceList([
        res(1, undefined, [
          { rel: 'http://www.openarchives.org/rs/terms/patch', href: 'http://e.com/p', type: 'text/x-diff' },
        ]),
      ]),
    good: () =>
      changeList([
        res(1, { change: 'updated' }, [
          { rel: 'http://www.openarchives.org/rs/terms/patch', href: 'http://e.com/p', type: 'text/x-diff' },
        ]),
      ]),
  },
  'patch-path-missing': {
    bad: () =>
      changeDumpManifest([
        res(1, { change: 'updated', path: '/r1', type: 'text/plain' }, [
          { rel: 'http://www.openarchives.org/rs/terms/patch', href: 'http://e.com/p', type: 'application/json-patch' },
        ]),
      ]),
    good: () =>
      changeDumpManifest([
        res(1, { change: 'updated', path: '/r1', type: 'text/plain' }, [
          {
            rel: 'http://www.openarchives.org/rs/terms/patch',
            href: 'http://e.com/p',
            type: 'application/json-patch',
            path: '/p1',
          },
        ]),
      ]),
  },
  'timegate-attributes': {
    bad: () => resourceList([res(1, undefined, [{ rel: 'timegate', href: 'http://e.com/tg', type: 'text/html' }])]),
    good: () => resourceList([res(1, undefined, [{ rel: 'timegate', href: 'http://e.com/tg' }])]),
  },
  'duplicate-link-metadata': {
    bad: () => resourceList([res(1, undefined, [{ rel: 'duplicate', href: 'http://m.e.com/r', hash: `md5:${MD5}` }])]),
    good: () => resourceList([res(1, undefined, [{ rel: 'duplicate', href: 'http://m.e.com/r', modified: T0 }])]),
  },
  'alternate-type-recommended': {
    bad: () => resourceList([res(1, undefined, [{ rel: 'alternate', href: 'http://e.com/r.html' }])]),
    good: () =>
      resourceList([res(1, undefined, [{ rel: 'alternate', href: 'http://e.com/r.html', type: 'text/html' }])]),
  },
  'loc-missing': { bad: () => resourceList([url('')]), good: () => resourceList() },
  'loc-not-absolute': { bad: () => resourceList([url('/res1')]), good: () => resourceList([url('ftp://e.com/res1')]) },
  'uri-invalid-chars': {
    bad: () => resourceList([url('http://example.com/a b')]),
    good: () => resourceList([url('http://example.com/a%20b')]),
  },
  'uri-percent-invalid': {
    bad: () => resourceList([url('http://example.com/50%off')]),
    good: () => resourceList([url('http://example.com/50%25off%2Fa%2f')]),
  },
  'loc-too-long': {
    bad: () => resourceList([url(`http://example.com/${'a'.repeat(2048)}`)]),
    good: () => resourceList([url(`http://example.com/${'a'.repeat(2000)}`)]),
  },
  'loc-duplicate': { bad: () => resourceList([res(1), res(1)]), good: () => changeList([]) },
  'changefreq-invalid': {
    bad: () => resourceList([url('http://e.com/a', undefined, [], { changefreq: 'sometimes' })]),
    good: () => resourceList([url('http://e.com/a', undefined, [], { changefreq: 'never' })]),
  },
  'priority-invalid': {
    bad: () => resourceList([url('http://e.com/a', undefined, [], { priority: '1.5' })]),
    good: () => resourceList([url('http://e.com/a', undefined, [], { priority: '0.5' })]),
  },
  'entry-md-missing': { bad: () => changeList([res(1)]), good: () => changeList([res(1, { change: 'deleted' })]) },
  'change-missing': { bad: () => changeList([res(1, {})]), good: () => changeList([res(1, { change: 'created' })]) },
  'change-invalid': {
    bad: () => changeList([res(1, { change: 'modified' })]),
    good: () => changeList([res(1, { change: 'updated' })]),
  },
  'capability-entry-missing': {
    bad: () => capabilityList([url('http://e.com/rl.xml', {})]),
    good: () => capabilityList([url('http://e.com/rl.xml', { capability: 'resourcelist' })]),
  },
  'capability-entry-invalid': {
    bad: () => sourceDescription([sdEntry(1, { capability: 'resourcelist' })]),
    good: () => sourceDescription([sdEntry(1)]),
  },
  'capability-entry-unknown': {
    bad: () => capabilityList([url('http://e.com/rl.xml', { capability: 'resourcelist-archive' })]),
    good: () => capabilityList([url('ws://e.com/ch', { capability: 'change-notification' })]),
  },
  'capability-duplicate': {
    bad: () =>
      capabilityList([
        url('http://e.com/a.xml', { capability: 'changelist' }),
        url('http://e.com/b.xml', { capability: 'changelist' }),
      ]),
    good: () =>
      capabilityList([
        url('http://e.com/a.xml', { capability: 'changelist' }),
        url('http://e.com/b.xml', { capability: 'changedump' }),
      ]),
  },
  'path-missing': {
    bad: () => changeDumpManifest([res(1, { change: 'created', type: 'text/plain' })]),
    good: () => changeDumpManifest([res(1, { change: 'deleted' })]),
  },
  'path-not-absolute': {
    bad: () => resourceDumpManifest([res(1, { path: 'resources/res1', type: 'text/plain' })]),
    good: () => resourceDumpManifest([res(1, { path: '/resources/res1', type: 'text/plain' })]),
  },
  'path-unsafe': {
    bad: () => resourceDumpManifest([res(1, { path: '/resources/../../etc/passwd', type: 'text/plain' })]),
    good: () => resourceDumpManifest([res(1, { path: '/resources/..a', type: 'text/plain' })]),
  },
  'type-recommended': {
    bad: () => resourceDumpManifest([res(1, { path: '/r1' })]),
    good: () => resourceDumpManifest([res(1, { path: '/r1', type: 'text/html; charset=utf-8' })]),
  },
  'package-metadata-recommended': {
    bad: () => doc('resource-dump', { at: T0 }, [UP], [url('http://e.com/p.zip', { type: 'application/zip' })]),
    good: () =>
      doc('resource-dump', { at: T0 }, [UP], [url('http://e.com/p.zip', { type: 'application/zip', length: 0 })]),
  },
  'package-not-zip': {
    bad: () => changeDump([pkg(1, { from: T0, type: 'application/x-tar' })]),
    good: () => changeDump([pkg(1, { from: T0, type: 'application/zip; x=1' })]),
  },
  'package-type-mixed': {
    bad: () => changeDump([pkg(1, { from: T0 }), pkg(2, { from: T1, type: 'application/x-tar' })]),
    good: () => changeDump([pkg(1, { from: T0 }), pkg(2, { from: T1, type: 'Application/ZIP' })]),
  },
  'hash-invalid': {
    bad: () => resourceList([res(1, { hash: MD5 })]),
    good: () => resourceList([res(1, { hash: `md5:${MD5}` })]),
  },
  'hash-digest-invalid': {
    bad: () => resourceList([res(1, { hash: `sha-1:${MD5}` })]),
    good: () => resourceList([res(1, { hash: `MD5:${MD5.toUpperCase()}` })]),
  },
  'hash-algorithm-unknown': {
    bad: () => resourceList([res(1, { hash: `sha-512:${MD5}` })]),
    good: () => resourceList([res(1, { hash: `sha-1:${'a'.repeat(40)}` })]),
  },
  'length-invalid': {
    bad: () => resourceList([res(1, { length: -1 }), res(2, { invalid: { length: '12kB' } })]),
    good: () => resourceList([res(1, { length: 0 })]),
  },
  'type-invalid': {
    bad: () => resourceList([res(1, { type: 'html' })]),
    good: () => resourceList([res(1, { type: 'multipart/form-data; boundary="a b"' })]),
  },
  'framework-change-unexpected': {
    bad: () => notification([url('http://e.com/rl.xml', { capability: 'resourcelist', change: 'deleted' })]),
    good: () => notification([url('http://e.com/cl.xml', { capability: 'capabilitylist', change: 'deleted' })]),
  },
};

/** Rules that only the reader can trigger (covered by the conformance and CLI tests, or by none yet). */
const NOT_FROM_THE_MODEL = new Set([
  // the size of the document's bytes, not its model: test/core/validate-size.test.ts
  'size-limit',
  // between documents: test/cli/walk.test.ts
  'capability-mismatch',
  'up-target-mismatch',
  'index-link-recommended',
  // dump packages: test/cli/validate-package.test.ts
  'package-path-missing',
  'package-length-mismatch',
  'package-hash-mismatch',
  'package-file-unlisted',
  'package-manifest-kind',
  'RS_ZIP',
  // from the reader: test/conformance/invalid-documents.test.ts
  'header-after-entries',
  'element-misplaced',
  'content-unexpected',
  'attribute-unexpected',
  'text-unexpected',
  'RS_XML_SYNTAX',
  'RS_XML_DTD',
  'RS_LIMIT',
  'RS_NOT_RESOURCESYNC',
]);

describe('validator rules', () => {
  it('every rule of RULES has a case (or a reason not to)', () => {
    const missing = RULES.map((r) => r.code).filter((c) => !(c in CASES) && !NOT_FROM_THE_MODEL.has(c));
    assert.deepEqual(missing, []);
  });
  it('docs/validation-rules.md is the generated rule table', () => {
    let dir = dirname(fileURLToPath(import.meta.url));
    while (!existsSync(join(dir, 'package.json'))) dir = dirname(dir);
    const doc = readFileSync(join(dir, 'docs', 'validation-rules.md'), 'utf8');
    assert.equal(doc, formatRulesMarkdown(), 'regenerate docs/validation-rules.md from formatRulesMarkdown()');
  });
  it('RULES codes are unique and cite a section', () => {
    const seen = new Set<string>();
    for (const r of RULES) {
      assert.ok(!seen.has(r.code), r.code);
      seen.add(r.code);
      assert.match(r.section, /§|App\. A|Sitemap|XML/);
      assert.ok(r.summary.length > 10);
    }
  });
  for (const [code, c] of Object.entries(CASES)) {
    it(`${code}: triggered by a document that breaks it, not by the nearest one that does not`, () => {
      const bad = check(c.bad(), c.options);
      const hit = bad.issues.filter((i) => i.code === code);
      assert.ok(hit.length > 0, `${code} not reported; got ${codes(bad).join(', ')}`);
      const rule = RULES.find((r) => r.code === code);
      for (const i of hit) {
        assert.equal(i.severity, rule?.severity);
        assert.ok(i.section.length > 0 && i.message.length > 0);
      }
      assert.equal(bad.valid, rule?.severity !== 'error' || false);
      const good = check(c.good(), c.options);
      assert.ok(!codes(good).includes(code), `${code} reported on the good document: ${JSON.stringify(good.issues)}`);
    });
  }
});

describe('Source Description Index (§8, §6.1)', () => {
  const XML = `<?xml version="1.0" encoding="UTF-8"?>
<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">
  <rs:md capability="description"/>
  <sitemap><loc>http://example.com/sd1.xml</loc></sitemap>
  <sitemap><loc>http://example.com/sd2.xml</loc><rs:md capability="description"/></sitemap>
</sitemapindex>
`;
  it('is a kind of its own: <sitemapindex> with rs:md capability="description", written and read back', async () => {
    const { readDocument, serializeDocument } = await import('../../src/xml/index.js');
    const d = await readDocument(Buffer.from(XML));
    assert.equal(d.kind, 'source-description-index');
    assert.equal(d.root, 'sitemapindex');
    assert.deepEqual(check(d), { ...check(d), valid: true, kind: 'source-description-index', issues: [] });
    const made = sdIndex([sitemap('http://example.com/sd1.xml'), sitemap('http://example.com/sd2.xml')]);
    assert.equal(made.root, 'sitemapindex');
    assert.equal(made.md?.capability, 'description');
    const back = await readDocument(Buffer.from(serializeDocument(made)));
    assert.equal(back.kind, 'source-description-index');
    assert.deepEqual(
      back.entries.map((e) => e.loc),
      ['http://example.com/sd1.xml', 'http://example.com/sd2.xml'],
    );
  });
  it('reports what breaks it, with its sections', () => {
    const r = check(
      sdIndex(
        [
          sitemap('http://example.com/sd1.xml', { capability: 'capabilitylist' }),
          url('http://example.com/sd2.xml'),
          sitemap('http://example.com/sd1.xml', { at: T0 }),
        ],
        [{ rel: 'up', href: SD }],
      ),
    );
    assert.equal(r.valid, false);
    const got = r.issues.map((i) => `${i.code} ${i.entry ?? '-'} ${i.section}`);
    assert.deepEqual(got.sort(), [
      'attribute-not-used 3 App. A',
      'capability-entry-invalid 1 §6.1, §8',
      'element-mismatch 2 §7',
      'loc-duplicate 3 §8, §6.1',
      'up-unexpected - §6.2, §8',
    ]);
    // --expect source-description on an index says so; an index of Capability Lists is no Source Description Index.
    assert.deepEqual(
      codes(check(sdIndex([sitemap('http://example.com/sd1.xml')]), { expectedKind: 'source-description' })),
      ['kind-unexpected'],
    );
  });
});

describe('validator', () => {
  it('finds nothing wrong in clean documents of every kind', () => {
    const clean = [
      resourceList(),
      changeList([res(1, { change: 'created', datetime: T0 }), res(2, { change: 'deleted', datetime: T1 })]),
      changeDumpManifest([res(1, { change: 'created', datetime: T0, path: '/a', type: 'text/plain' })]),
      capabilityList([url('http://e.com/rl.xml', { capability: 'resourcelist' })]),
      sourceDescription([sdEntry(1), sdEntry(2)]),
      changeDump([pkg(1, { from: T0, until: T1 }), pkg(2, { from: T1 })]),
      doc('resource-list-index', { at: T0 }, [UP], [sitemap('http://e.com/rl1.xml', { at: T0, completed: T1 })]),
      sdIndex([
        sitemap('http://example.com/sd1.xml'),
        sitemap('http://example.com/sd2.xml', { capability: 'description' }),
      ]),
      notification([res(1, { change: 'updated', hash: `md5:${MD5}`, length: 3, type: 'text/plain' })]),
    ];
    for (const d of clean) assert.deepEqual(check(d).issues, [], d.kind);
  });

  it('tells change and framework notifications apart from their entries', () => {
    const change = check(notification([res(1, { change: 'updated' })]));
    assert.equal(change.kind, 'change-notification');
    assert.equal(change.valid, true);
    const framework = check(
      notification([url('http://e.com/rl.xml', { capability: 'resourcelist', change: 'created' })]),
    );
    assert.equal(framework.kind, 'framework-notification');
    assert.deepEqual(framework.issues, []);
    const noUp = check({ ...notification([res(1, { change: 'updated' })]), links: [] });
    assert.deepEqual(codes(noUp), ['up-missing']);
    assert.equal(noUp.issues[0]?.section, 'N-§4');
    // a framework notification entry without capability, when the caller says what it is
    const f = check(notification([res(1, { change: 'created' })]), { expectedKind: 'framework-notification' });
    assert.deepEqual(codes(f), ['capability-entry-missing']);
    // an index payload
    const idx = check({ ...notification([]), root: 'sitemapindex', kind: 'sitemap-index' });
    assert.deepEqual(codes(idx), ['root-md-missing']);
  });

  it('locates issues: entry number, line, element, attribute, section', () => {
    const d = changeList([
      res(1, { change: 'created', datetime: T1 }),
      { ...res(2, { change: 'created', datetime: T0 }), line: 42 },
    ]);
    const [issue] = check(d).issues;
    assert.deepEqual(issue, {
      code: 'order-not-chronological',
      severity: 'error',
      message: issue?.message,
      section: '§12.1',
      entry: 2,
      line: 42,
      element: 'rs:md',
      attribute: 'datetime',
    });
    assert.match(issue?.message ?? '', /forward chronological/);
  });

  it('keeps at most maxIssues issues and counts the rest', () => {
    const entries = Array.from({ length: 30 }, (_, i) => url(`/rel${i}`));
    const r = check(resourceList(entries), { maxIssues: 10 });
    assert.equal(r.issues.length, 10);
    assert.equal(r.errors, 30);
    assert.equal(r.suppressed, 20);
    assert.equal(r.valid, false);
    assert.equal(r.entries, 30);
  });

  it('stops tracking duplicate locs past maxTrackedLocs', () => {
    const d = resourceList([res(1), res(2), res(3), res(3), res(1)]);
    assert.equal(check(d).issues.length, 2);
    assert.deepEqual(
      check(d, { maxTrackedLocs: 2 }).issues.map((i) => i.entry),
      [5],
    );
  });

  it('streams: header first, entries one by one, a read error becomes an issue', async () => {
    const header: DocumentHeader = createHeader('change-list', { from: T0 }, [UP]);
    async function* entries(): AsyncGenerator<Entry> {
      yield res(1, { change: 'created', datetime: T1 });
      throw new ResourceSyncError('RS_XML_SYNTAX', 'unclosed tag', { line: 9, column: 3 });
    }
    const r = await validateStream({ header, entries: entries() });
    assert.equal(r.entries, 1);
    assert.equal(r.valid, false);
    assert.deepEqual(
      r.issues.map((i) => [i.code, i.severity, i.line]),
      [['RS_XML_SYNTAX', 'error', 9]],
    );
    async function* boom(): AsyncGenerator<Entry> {
      yield* [];
      throw new TypeError('a bug');
    }
    await assert.rejects(validateStream({ header, entries: boom() }), TypeError);
  });

  it('finds every repeated loc and only those, whatever characters the locs share', () => {
    const v = createValidator(createHeader('resource-list', { at: T0 }, [UP]), { maxIssues: 100 });
    // Locs that differ only in one middle character (which the filter in front of the set may not hash),
    // then repeats of some of them, then fresh locs once the set is full.
    const middle = (i: number) =>
      `http://example.com/${'a'.repeat(40)}${i.toString(36).padStart(4, '0')}${'b'.repeat(40)}`;
    let n = 0;
    for (let i = 0; i < 3000; i++) v.entry(url(middle(i)), n++);
    for (let i = 0; i < 3000; i += 1000) v.entry(url(middle(i)), n++);
    for (let i = 0; i < 60_000; i++) v.entry(url(`http://example.com/r/${i}`), n++);
    v.entry(url('http://example.com/r/7'), n++);
    v.entry(url('http://example.com/r/59999'), n++); // after the first 50,000: not tracked
    const r = v.finish();
    const dups = r.issues.filter((i) => i.code === 'loc-duplicate').map((i) => i.entry);
    assert.deepEqual(dups, [3001, 3002, 3003, 63004]);
  });

  it('reports a repeated bad datetime every time, whatever came between', () => {
    const v = createValidator(createHeader('resource-list', { at: T0 }, [UP]));
    const lastmods = [T0, '2013-13-01', T0, '2013-13-01', '2013-01-03', T0, '2013-01-03', T0];
    for (const [i, lastmod] of lastmods.entries()) v.entry(url(`http://example.com/d${i}`, undefined, [], { lastmod }));
    const r = v.finish();
    assert.deepEqual(
      r.issues.map((i) => [i.code, i.entry]),
      [
        ['datetime-invalid', 2],
        ['datetime-invalid', 4],
        ['datetime-not-utc', 5],
        ['datetime-not-utc', 7],
      ],
    );
  });

  it('turns reader notes into issues of their rules', () => {
    const v = createValidator(createHeader('resource-list', { at: T0 }, [UP]));
    v.entry(res(1));
    v.note({ code: 'late-element', message: 'late md', line: 9, node: { ns: RS_NS, local: 'md' } });
    v.note({ code: 'late-element', message: 'late x', line: 10, node: { ns: 'urn:x', local: 'y' } });
    v.note({ code: 'unexpected-child', message: 'child', line: 7, entry: 1, element: 'loc' });
    v.note({ code: 'unexpected-text', message: 'text', line: 8, element: 'urlset' });
    v.note({ code: 'unexpected-attribute', message: 'attribute id', line: 6, entry: 1, element: 'url' });
    v.note({ code: 'too-many-issues', message: 'more' });
    const r = v.finish();
    assert.deepEqual(
      r.issues.map((i) => [i.code, i.severity, i.line]),
      [
        ['attribute-unexpected', 'error', 6],
        ['content-unexpected', 'error', 7],
        ['text-unexpected', 'warning', 8],
        ['header-after-entries', 'error', 9],
        ['element-misplaced', 'warning', 10],
      ],
    );
  });

  it('validates a long document with bounded state and quickly', () => {
    const v = createValidator(createHeader('change-list', { from: T0 }, [UP]));
    const start = Date.now();
    for (let i = 0; i < 50_000; i++)
      v.entry(
        url(`http://example.com/r${i}`, {
          change: 'updated',
          datetime: new Date(Date.parse(T0) + i * 1000).toISOString(),
        }),
      );
    const r = v.finish();
    assert.equal(r.entries, 50_000);
    assert.equal(r.valid, true, JSON.stringify(r.issues.slice(0, 3)));
    assert.ok(Date.now() - start < 15_000);
    assert.throws(() => v.finish(), ResourceSyncError);
  });
});
