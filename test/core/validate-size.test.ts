// The size-limit rule (§7: 50 MB per document, uncompressed).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { validateDocument, validateStream } from '../../src/core/validate.js';
import { openDocument, readDocument } from '../../src/xml/index.js';

function changeList(n: number): string {
  const urls = Array.from(
    { length: n },
    (_, i) =>
      `<url><loc>http://example.com/${'x'.repeat(100)}/${i}</loc><rs:md change="created" datetime="2024-01-01T00:00:00Z"/></url>`,
  );
  return (
    '<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" ' +
    'xmlns:rs="http://www.openarchives.org/rs/terms/"><rs:ln rel="up" href="http://example.com/capabilitylist.xml"/>' +
    `<rs:md capability="changelist" from="2024-01-01T00:00:00Z"/>${urls.join('')}</urlset>`
  );
}

describe('size-limit', () => {
  it('a streamed document larger than the limit is an error; one within it is not', async () => {
    const xml = Buffer.from(changeList(40));
    for (const [maxBytes, code] of [
      [xml.byteLength - 1, 'size-limit'],
      [xml.byteLength, undefined],
    ] as const) {
      // Read in small chunks: the size is the whole document's, not a chunk's.
      const chunks = Array.from({ length: Math.ceil(xml.byteLength / 100) }, (_, i) =>
        xml.subarray(i * 100, (i + 1) * 100),
      );
      const result = await validateStream(await openDocument(chunks), { maxBytes });
      const sizeIssues = result.issues.filter((i) => i.code === 'size-limit');
      if (code === undefined) assert.deepEqual(sizeIssues, []);
      else {
        assert.equal(sizeIssues.length, 1);
        assert.equal(sizeIssues[0]!.severity, 'error');
        assert.equal(sizeIssues[0]!.section, '§7');
        assert.match(sizeIssues[0]!.message, new RegExp(`${xml.byteLength} bytes`));
      }
    }
  });

  it('validateDocument checks documentBytes against the default 52,428,800', async () => {
    const doc = await readDocument(Buffer.from(changeList(2)));
    assert.ok(validateDocument(doc, { documentBytes: 52_428_800 }).valid);
    const r = validateDocument(doc, { documentBytes: 53_200_000 });
    assert.ok(!r.valid);
    assert.deepEqual(
      r.issues.map((i) => i.code),
      ['size-limit'],
    );
  });
});
