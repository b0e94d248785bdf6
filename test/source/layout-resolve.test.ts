// SiteLayout.resolve answers most resource paths (no percent-encoding, not under the documents' directory)
// without decoding them: the answer must be the one the full decoding gives. Property: a path and the same
// path with one character percent-encoded (which forces the full way) resolve alike.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { SiteLayout } from '../../src/source/layout.js';
import { parseBaseUrl, requestRelativePath } from '../../src/source/paths.js';

const bases = ['http://example.org/', 'http://example.org/a/', 'http://example.org/a%20b/c/', 'http://example.org//x/'];
const atoms = [
  '',
  '.',
  '..',
  'a',
  'b',
  'c',
  'x',
  'a b',
  'resourcesync',
  'default',
  'capabilitylist.xml',
  'resourcelist.xml',
  'resourcelist-0001.xml',
  'changelist.xml',
  'resourcedump-v1-0001.zip',
  '.well-known',
  'Resourcesync',
];

/** The path with its first unreserved letter percent-encoded (same resource, full decoding forced). */
function encodeOne(path: string, from = 0): string | undefined {
  const found = path.slice(from).search(/[A-Za-z0-9]/);
  if (found < 0) return undefined;
  const i = from + found;
  return `${path.slice(0, i)}%${path.charCodeAt(i).toString(16).toUpperCase()}${path.slice(i + 1)}`;
}

describe('SiteLayout.resolve', () => {
  for (const base of bases) {
    it(`without percent-encoding answers as with it (base ${base})`, () => {
      const layout = new SiteLayout(parseBaseUrl(base), '/site');
      const basePath = new URL(base).pathname;
      const prefixes = ['/', basePath, basePath.replace(/^\/+/, '/'), '/.well-known/'];
      const documentish = fc
        .tuple(fc.constantFrom('default', 'a', 'a b'), fc.constantFrom(...atoms))
        .map(([set, file]) => ['resourcesync', set, file]);
      fc.assert(
        fc.property(
          fc.constantFrom(...prefixes),
          fc.oneof(documentish, fc.array(fc.constantFrom(...atoms), { minLength: 1, maxLength: 5 })),
          (prefix, parts) => {
            const path = `${prefix}${parts.map((p) => p.replace(/ /g, '%20')).join('/')}`;
            const encoded = encodeOne(path);
            if (encoded === undefined) return;
            assert.deepEqual(layout.resolve(path), layout.resolve(encoded), `${path} vs ${encoded}`);
          },
        ),
        { numRuns: 1000 },
      );
    });
  }

  for (const base of bases) {
    it(`requestRelativePath without percent-encoding answers as with it (base ${base})`, () => {
      const url = parseBaseUrl(base);
      const prefixes = ['/', url.pathname, url.pathname.replace(/^\/+/, '/')];
      fc.assert(
        fc.property(
          fc.constantFrom(...prefixes),
          fc.array(fc.constantFrom(...atoms, '.hidden', 'a\\b'), { minLength: 1, maxLength: 5 }),
          fc.boolean(),
          (prefix, parts, allowHidden) => {
            const path = `${prefix}${parts.map((p) => p.replace(/ /g, '%20')).join('/')}`;
            // After the prefix: the base path itself is compared as sent (raw).
            const encoded = encodeOne(path, path.startsWith(url.pathname) ? url.pathname.length : 0);
            if (encoded === undefined) return;
            assert.equal(
              requestRelativePath(url, path, allowHidden),
              requestRelativePath(url, encoded, allowHidden),
              `${path} vs ${encoded}`,
            );
          },
        ),
        { numRuns: 1000 },
      );
    });
  }

  it('finds the documents and the Source Description', () => {
    const layout = new SiteLayout(parseBaseUrl('http://example.org/a/'), '/site');
    assert.equal(layout.resolve('/.well-known/resourcesync')?.group, 'description');
    assert.equal(layout.resolve('/a/resourcesync/default/capabilitylist.xml')?.group, 'capabilitylist');
    assert.equal(layout.resolve('/a/resourcesync/default/resourcelist-0002.xml')?.group, 'resourcelist');
    assert.equal(layout.resolve('/a/%72esourcesync/default/changelist.xml')?.group, 'changelist');
    assert.equal(layout.resolve('/resourcesync/default/capabilitylist.xml'), undefined);
    assert.equal(layout.resolve('/a/res/0/r1.txt'), undefined);
    assert.equal(layout.capabilityListUrl('default'), 'http://example.org/a/resourcesync/default/capabilitylist.xml');
    assert.equal(layout.capabilityListUrl('a b'), 'http://example.org/a/resourcesync/a%20b/capabilitylist.xml');
  });
});
