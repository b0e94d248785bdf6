// Names from documents that happen to be Object.prototype properties (`toString`, `constructor`, `__proto__`)
// must be treated as the unknown names they are (a fast-check run found `capability="toString"` crashing the
// validator).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { documentKind } from '../../src/core/model.js';
import type { ResourceSyncDocument } from '../../src/core/model.js';
import { validateDocument } from '../../src/core/validate.js';
import { createFrameworkEntry } from '../../src/notify/payloads.js';
import { readDocument } from '../../src/xml/index.js';

const NAMES = ['toString', 'constructor', '__proto__', 'hasOwnProperty', 'valueOf'];
const NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/"';

describe('names that are Object.prototype properties', () => {
  it('are unknown capabilities for documentKind', () => {
    for (const n of NAMES) {
      assert.equal(documentKind('urlset', n), 'unknown', n);
      assert.equal(documentKind('sitemapindex', n), 'unknown', n);
    }
  });

  it('in an entry capability, are reported by the validator instead of crashing it', () => {
    for (const n of NAMES) {
      const doc = {
        root: 'urlset',
        kind: 'sitemap',
        links: [],
        namespaces: { '': 'http://www.sitemaps.org/schemas/sitemap/0.9', rs: 'http://www.openarchives.org/rs/terms/' },
        entries: [{ element: 'url', loc: 'http://e.org/a', md: { capability: n, change: 'created' }, links: [] }],
      } as unknown as ResourceSyncDocument;
      const r = validateDocument(doc);
      assert.equal(r.valid, false, n);
      assert.ok(r.issues.length > 0, n);
    }
  });

  it('as a root capability or an element name, read as unknown without a crash', async () => {
    for (const n of NAMES.filter((x) => x !== '__proto__')) {
      const doc = await readDocument(
        Buffer.from(
          `<?xml version="1.0"?>\n<urlset ${NS}><rs:md capability="${n}"/><url><loc>http://e.org/a</loc><${n}/></url></urlset>`,
        ),
      );
      assert.equal(doc.kind, 'unknown', n);
      assert.equal(doc.entries.length, 1, n);
      assert.equal(validateDocument(doc).valid, false, n);
    }
  });

  it('as a framework capability, are refused when building a payload', () => {
    for (const n of NAMES)
      assert.throws(
        () => createFrameworkEntry({ uri: 'http://e.org/x', capability: n as 'changelist', change: 'created' }),
        (e: Error & { code?: string }) => typeof e.code === 'string' && e.code.startsWith('RS_'),
        n,
      );
  });
});
