import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { SiteLayout } from '../../src/source/layout.js';
import { isSafeRelativePath, parseBaseUrl, requestRelativePath, resourceUrl } from '../../src/source/paths.js';

const segment = fc
  .string({ unit: 'grapheme', minLength: 1, maxLength: 12 })
  .filter((s) => isSafeRelativePath(s) && !s.includes('/') && s === s.normalize('NFC'));
const relPath = fc.array(segment, { minLength: 1, maxLength: 4 }).map((a) => a.join('/'));

describe('URL mapping of resource paths', () => {
  it('maps any safe relative path to a URL and back (spaces, #, ?, %, non-ASCII)', () => {
    for (const base of ['http://example.org/', 'https://example.org/a%20b/', 'http://localhost:8080/coll/'])
      fc.assert(
        fc.property(relPath, (rel) => {
          const b = parseBaseUrl(base);
          const url = new URL(resourceUrl(b, rel));
          assert.equal(url.search, '');
          assert.equal(url.hash, '');
          assert.equal(requestRelativePath(b, url.pathname), rel);
        }),
      );
  });

  it('refuses traversal, encoded traversal, hidden segments, NUL and bad encodings', () => {
    const b = parseBaseUrl('http://example.org/coll/');
    for (const p of [
      '/coll/../x',
      '/coll/%2e%2e/x',
      '/coll/a/%2E%2E/%2E%2E/x',
      '/coll/a%2fb',
      '/coll/a%5cb',
      '/coll/.git/config',
      '/coll/a/%2ehidden',
      '/coll/a%00b',
      '/coll/%E0%A4%A',
      '/coll//a',
      '/coll/',
      '/other/a',
      '/col',
    ])
      assert.equal(requestRelativePath(b, p), undefined, p);
    assert.equal(requestRelativePath(b, '/coll/a%20b/c%23d%3F.txt'), 'a b/c#d?.txt');
  });

  it('resolves document pathnames, and nothing else, to document groups', () => {
    const layout = new SiteLayout(parseBaseUrl('http://example.org/coll/'), '/site');
    assert.equal(layout.resolve('/.well-known/resourcesync')?.group, 'description');
    assert.equal(layout.resolve('/coll/resourcesync/s/resourcelist-0002.xml')?.group, 'resourcelist');
    assert.equal(layout.resolve('/coll/resourcesync/s/changedump-3-9.zip')?.group, 'changedump');
    assert.equal(layout.resolve('/coll/resourcesync/s/resourcedump-v4-0001-manifest.xml')?.group, 'resourcedump');
    for (const p of [
      '/coll/resourcesync/s/../../x',
      '/coll/resourcesync/s/other.xml',
      '/resourcesync/s/resourcelist.xml',
    ])
      assert.equal(layout.resolve(p), undefined, p);
    assert.equal(layout.path('s', 'resourcelist.xml'), '/site/coll/resourcesync/s/resourcelist.xml');
  });

  it('refuses base URLs that are not absolute http(s) without query or fragment', () => {
    for (const bad of ['example.org', 'ftp://x/', 'http://x/?a', 'http://x/#f', 'http://u:p@x/', 'mailto:a@b'])
      assert.throws(() => parseBaseUrl(bad), /base URL/);
    assert.equal(parseBaseUrl('http://x/a').href, 'http://x/a/');
  });
});
