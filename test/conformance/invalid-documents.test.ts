/**
 * Hand-written invalid documents, read by the real reader and validated: the rules that depend on how markup
 * reaches the model (late root elements, stray content, repeated elements, prefixed or unknown attributes,
 * unparsable numbers) and the reader's own refusals, each with the exact codes expected and a clean twin.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { RULES } from '../../src/core/rules.js';
import { issueFromError, type ValidationResult, validateStream } from '../../src/core/validate.js';
import { isResourceSyncError } from '../../src/core/errors.js';
import { openDocument, type ReadOptions } from '../../src/xml/index.js';

const NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/"';
const UP = '<rs:ln rel="up" href="http://example.com/capabilitylist.xml"/>';
const RL_MD = '<rs:md capability="resourcelist" at="2013-01-03T09:00:00Z"/>';

function resourceList(body: string, head = `${UP}${RL_MD}`): string {
  return `<?xml version="1.0" encoding="UTF-8"?>\n<urlset ${NS}>\n${head}\n${body}\n</urlset>\n`;
}
const URL1 = '<url><loc>http://example.com/res1</loc></url>';

async function validateXml(xml: string | Uint8Array[], options: ReadOptions = {}): Promise<ValidationResult> {
  try {
    const bytes = typeof xml === 'string' ? new TextEncoder().encode(xml) : xml;
    return await validateStream(await openDocument(bytes, options));
  } catch (e) {
    if (!isResourceSyncError(e)) throw e;
    const issue = issueFromError(e);
    return { kind: 'unknown', entries: 0, issues: [issue], errors: 1, warnings: 0, suppressed: 0, valid: false };
  }
}
const codes = (r: ValidationResult) => [...new Set(r.issues.map((i) => i.code))].sort();

interface Case {
  readonly bad: string;
  readonly expect: readonly string[];
  readonly good: string;
}

const CASES: Record<string, Case> = {
  'header-after-entries': {
    bad: resourceList(`${URL1}\n${UP}`, RL_MD),
    expect: ['header-after-entries', 'up-missing'],
    good: resourceList(URL1),
  },
  'element-misplaced': {
    bad: resourceList(`${URL1}<x:note xmlns:x="urn:x">late</x:note>`),
    expect: ['element-misplaced'],
    good: resourceList(`<x:note xmlns:x="urn:x">early</x:note>${URL1}`),
  },
  'content-unexpected': {
    bad: resourceList('<url><loc>http://example.com/res1<b>bold</b></loc></url>'),
    expect: ['content-unexpected'],
    good: resourceList(URL1),
  },
  'attribute-unexpected': {
    bad: resourceList('<url id="1"><loc xml:lang="en">http://example.com/res1</loc></url>'),
    expect: ['attribute-unexpected'],
    good: resourceList(URL1),
  },
  'text-unexpected': {
    bad: resourceList(`${URL1} stray text`),
    expect: ['text-unexpected'],
    good: resourceList(`${URL1} <!-- a comment -->`),
  },
  'element-repeated': {
    bad: resourceList('<url><loc>http://example.com/res1</loc><loc>http://example.com/res2</loc></url>'),
    expect: ['element-repeated'],
    good: resourceList(URL1),
  },
  'md-duplicate': {
    bad: resourceList('<url><loc>http://example.com/r</loc><rs:md length="1"/><rs:md length="2"/></url>'),
    expect: ['md-duplicate'],
    good: resourceList('<url><loc>http://example.com/r</loc><rs:md length="1"/></url>'),
  },
  'attribute-prefixed': {
    bad: resourceList('<url><loc>http://example.com/r</loc><rs:md rs:length="1"/></url>'),
    expect: ['attribute-prefixed'],
    good: resourceList('<url><loc>http://example.com/r</loc><rs:md length="1"/></url>'),
  },
  'attribute-unknown': {
    bad: resourceList('<url><loc>http://example.com/r</loc><rs:md size="1"/></url>'),
    expect: ['attribute-unknown'],
    good: resourceList('<url><loc>http://example.com/r</loc><rs:md x:size="1" xmlns:x="urn:x"/></url>'),
  },
  'ln-rel-missing': {
    bad: resourceList('<url><loc>http://example.com/r</loc><rs:ln href="http://m.example.com/r"/></url>'),
    expect: ['ln-rel-missing'],
    good: resourceList(
      '<url><loc>http://example.com/r</loc><rs:ln rel="duplicate" href="http://m.example.com/r"/></url>',
    ),
  },
  'length-invalid': {
    bad: resourceList('<url><loc>http://example.com/r</loc><rs:md length="-3"/></url>'),
    expect: ['length-invalid'],
    good: resourceList('<url><loc>http://example.com/r</loc><rs:md length="3"/></url>'),
  },
  'pri-invalid': {
    bad: resourceList(
      '<url><loc>http://example.com/r</loc><rs:ln rel="duplicate" href="http://m.e.com/r" pri="0"/></url>',
    ),
    expect: ['pri-invalid'],
    good: resourceList(
      '<url><loc>http://example.com/r</loc><rs:ln rel="duplicate" href="http://m.e.com/r" pri="1"/></url>',
    ),
  },
  'element-mismatch': {
    bad: resourceList(URL1).replaceAll('urlset', 'sitemapindex'),
    expect: ['element-mismatch'],
    good: resourceList('<sitemap><loc>http://example.com/rl1.xml</loc></sitemap>').replaceAll('urlset', 'sitemapindex'),
  },
  RS_XML_SYNTAX: { bad: resourceList('<url><loc>x</url>'), expect: ['RS_XML_SYNTAX'], good: resourceList(URL1) },
  RS_XML_DTD: {
    bad: resourceList(URL1).replace('<urlset', '<!DOCTYPE urlset [<!ENTITY x "y">]>\n<urlset'),
    expect: ['RS_XML_DTD'],
    good: resourceList(URL1),
  },
  RS_NOT_RESOURCESYNC: {
    bad: '<rss version="2.0"><channel/></rss>',
    expect: ['RS_NOT_RESOURCESYNC'],
    good: resourceList(URL1),
  },
};

describe('hand-written invalid documents through the reader', () => {
  for (const [code, c] of Object.entries(CASES)) {
    it(`${code}: exactly ${c.expect.join(', ')}; its twin is clean`, async () => {
      const bad = await validateXml(c.bad);
      assert.deepEqual(codes(bad), [...c.expect].sort(), JSON.stringify(bad.issues, null, 1));
      const hit = bad.issues.find((i) => i.code === code);
      assert.ok(hit?.line !== undefined && hit.line > 0, `${code} has a line`);
      assert.equal(hit?.severity, RULES.find((r) => r.code === code)?.severity);
      const good = await validateXml(c.good);
      assert.deepEqual(good.issues, [], JSON.stringify(good.issues, null, 1));
    });
  }

  it('RS_LIMIT: an entry larger than maxEntryBytes is refused, whether at open or while streaming', async () => {
    const big = resourceList(`${URL1}<url><loc>http://example.com/${'a'.repeat(5000)}</loc></url>`);
    const whole = await validateXml(big, { maxEntryBytes: 1000 });
    assert.deepEqual(codes(whole), ['RS_LIMIT']);
    const bytes = new TextEncoder().encode(big);
    const chunked = await validateXml([bytes.subarray(0, 300), bytes.subarray(300)], { maxEntryBytes: 1000 });
    assert.deepEqual(codes(chunked), ['RS_LIMIT']);
    assert.equal(chunked.issues[0]?.entry, 2);
  });
});

describe('mutated spec examples', () => {
  // Every example, damaged at random (bytes replaced, removed, inserted): reading and validating ends with a
  // result (possibly a reader error as an issue), never with another exception, and every issue is a rule.
  const dir = join(new URL('.', import.meta.url).pathname, '..', '..');
  const root = (() => {
    let d = dir;
    while (!readdirSync(d).includes('package.json')) d = join(d, '..');
    return d;
  })();
  const fixtures = join(root, 'test', 'fixtures', 'spec-examples');
  const examples = readdirSync(fixtures)
    .filter((f) => f.endsWith('.xml'))
    .map((f) => new Uint8Array(readFileSync(join(fixtures, f))));
  const codesOfRules = new Set<string>(RULES.map((r) => r.code));

  it('validation of damaged documents always ends with a result of known codes', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: examples.length - 1 }),
        fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 2 }), fc.integer({ min: 0, max: 255 })), {
          minLength: 1,
          maxLength: 6,
        }),
        async (which, edits) => {
          let bytes = Array.from(examples[which] as Uint8Array);
          for (const [at, op, value] of edits) {
            const i = at % (bytes.length + 1);
            if (op === 0) bytes[i] = value;
            else if (op === 1) bytes.splice(i, 1);
            else bytes.splice(i, 0, value);
          }
          bytes = bytes.filter((b) => b !== undefined);
          const r = await validateXml([new Uint8Array(bytes)]);
          for (const i of r.issues) assert.ok(codesOfRules.has(i.code), i.code);
        },
      ),
      { numRuns: 300 },
    );
  });
});
