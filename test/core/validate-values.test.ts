import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { isKnownHashAlgorithm, parseHashes } from '../../src/core/hash.js';
import {
  checkHashAttribute,
  hasInvalidUriChars,
  isAbsoluteUri,
  isPlainAbsoluteUri,
} from '../../src/core/validate-values.js';

const MD5 = '1e0d5cb8ef6ba40c99b14c0237be735e';
const SHA1 = 'da39a3ee5e6b4b0d3255bfef95601890afd80709';
const SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

/** Independent reference: fine when parseHashes accepts it and every algorithm is a known one. */
function fine(value: string): boolean {
  try {
    return [...parseHashes(value).keys()].every((alg) => isKnownHashAlgorithm(alg));
  } catch {
    return false;
  }
}

describe('checkHashAttribute', () => {
  it('accepts the usual lists, any case and white space', () => {
    for (const ok of [
      `md5:${MD5}`,
      `MD5:${MD5.toUpperCase()}`,
      ` sha-1:${SHA1}\tsha-256:${SHA256}\n md5:${MD5} `,
      `Sha-256:${SHA256}`,
    ])
      assert.deepEqual(checkHashAttribute(ok), [], ok);
  });

  it('reports each kind of problem', () => {
    const codes = (v: string): string[] => checkHashAttribute(v).map((p) => p.code);
    assert.deepEqual(codes(''), ['hash-invalid']);
    assert.deepEqual(codes(`md5:${MD5} MD5:${MD5}`), ['hash-invalid']);
    assert.deepEqual(codes(`md5:${MD5}0`), ['hash-digest-invalid']);
    assert.deepEqual(codes(`md5:${MD5.slice(1)}\u0011`), ['hash-digest-invalid']);
    assert.deepEqual(codes(`sha-512:${SHA256}`), ['hash-algorithm-unknown']);
    assert.deepEqual(codes(`md5${MD5}`), ['hash-invalid']);
    assert.deepEqual(codes(`md5:${MD5}\u00a0sha-1:${SHA1}`), ['hash-digest-invalid']);
  });

  it('property: no problem exactly when parseHashes accepts the list and knows every algorithm', () => {
    const alg = fc.constantFrom('md5', 'MD5', 'sha-1', 'SHA-1', 'sha-256', 'Sha-256', 'sha-2', 'md', 'x', 'ſha-1', '');
    const hex = fc.oneof(
      fc.constantFrom(MD5, SHA1, SHA256, MD5.toUpperCase(), `${MD5}0`, SHA256.slice(1), ''),
      fc.string({ unit: fc.constantFrom('a', 'F', '0', '9', 'g', '\u0010', ' ', ':'), maxLength: 70 }),
    );
    const item = fc.oneof(
      fc.tuple(alg, hex).map(([a, h]) => `${a}:${h}`),
      fc.tuple(alg, hex).map(([a, h]) => a + h),
    );
    // XML white space only: parseHashes also splits on other white space (U+00A0), the validator does not.
    const sep = fc.constantFrom(' ', '\t', '\n', '\r', '  ');
    const edge = fc.constantFrom('', ' ', '\n');
    const list = fc
      .tuple(edge, fc.array(fc.tuple(item, sep), { maxLength: 4 }), item, edge)
      .map(([lead, items, last, trail]) => lead + items.map(([i, s]) => i + s).join('') + last + trail);
    fc.assert(
      fc.property(list, (v) => {
        assert.equal(checkHashAttribute(v).length === 0, fine(v), JSON.stringify(v));
      }),
      { numRuns: 3000 },
    );
  });
});

describe('isPlainAbsoluteUri', () => {
  it('property: is isAbsoluteUri and not hasInvalidUriChars', () => {
    const part = fc.constantFrom(
      'http',
      'h',
      '1x',
      'a+b.c-d',
      ':',
      '//',
      'example.com',
      '/p',
      ' ',
      '\t',
      '<',
      '"',
      '^',
      '%20',
      'é',
      '\u007f',
      '\u0000',
      '',
    );
    fc.assert(
      fc.property(fc.array(part, { maxLength: 6 }), (parts) => {
        const s = parts.join('');
        assert.equal(isPlainAbsoluteUri(s), isAbsoluteUri(s) && !hasInvalidUriChars(s), JSON.stringify(s));
      }),
      { numRuns: 5000 },
    );
    assert.equal(isPlainAbsoluteUri('http://example.com/a b'), false);
    assert.equal(isPlainAbsoluteUri('http://example.com/é'), true);
  });
});
