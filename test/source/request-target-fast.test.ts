// checkRequestTarget and hasHiddenSegment decide a path without percent-encoding without decoding it: the
// answer must be the one the full decoding gives. Property: a target and the same target with one letter
// percent-encoded (which forces the full way) get the same verdict and reason.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { checkRequestTarget, hasHiddenSegment } from '../../src/source/http/request-target.js';

const atoms = ['', '.', '..', '...', '.git', '.env', 'a', 'b.txt', 'a.b', 'x..y', 'index.html', 'a b', '\\', '#', '?q'];

/** The target with its first letter or digit percent-encoded (same resource, full decoding forced). */
function encodeOne(target: string, from = 0): string | undefined {
  const found = target.slice(from).search(/[A-Za-z0-9]/);
  if (found < 0) return undefined;
  const i = from + found;
  return `${target.slice(0, i)}%${target.charCodeAt(i).toString(16).toUpperCase()}${target.slice(i + 1)}`;
}

const targets = fc
  .tuple(
    fc.constantFrom('/', 'http://h/', '', '//'),
    fc.array(fc.constantFrom(...atoms), { minLength: 1, maxLength: 5 }),
  )
  .map(([prefix, parts]) => `${prefix}${parts.join('/')}`);

describe('request-target checks without percent-encoding', () => {
  it('checkRequestTarget: same verdict and reason as with one letter encoded', () => {
    fc.assert(
      fc.property(targets, (target) => {
        if (target.includes('%')) return;
        // In the path only (the scheme and host of an absolute-form target stay as they are).
        const encoded = encodeOne(target.split('?')[0]!, target.startsWith('http://h') ? 'http://h'.length : 0);
        if (encoded === undefined) return;
        const rest = target.includes('?') ? target.slice(target.indexOf('?')) : '';
        const a = checkRequestTarget(target);
        const b = checkRequestTarget(`${encoded}${rest}`);
        assert.equal(a.ok, b.ok, `${target} vs ${encoded}${rest}`);
        if (!a.ok && !b.ok) assert.equal(a.reason, b.reason, target);
      }),
      { numRuns: 2000 },
    );
  });

  it('hasHiddenSegment: same answer as with one letter encoded', () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...atoms), { minLength: 1, maxLength: 5 }), fc.boolean(), (parts, lead) => {
        const path = `${lead ? '/' : ''}${parts.join('/')}`;
        const encoded = encodeOne(path);
        if (encoded === undefined || path.includes('%')) return;
        assert.equal(hasHiddenSegment(path), hasHiddenSegment(encoded), `${path} vs ${encoded}`);
      }),
      { numRuns: 2000 },
    );
  });

  it('examples', () => {
    assert.equal(checkRequestTarget('/a/../b').ok, false);
    assert.equal(checkRequestTarget('/a/./b').ok, false);
    assert.equal(checkRequestTarget('/a//b').ok, false);
    assert.equal(checkRequestTarget('/a/b/').ok, true);
    assert.equal(checkRequestTarget('/a/...').ok, true);
    assert.equal(hasHiddenSegment('/a/.git/config'), true);
    assert.equal(hasHiddenSegment('.env'), true);
    assert.equal(hasHiddenSegment('/a/b.txt'), false);
    assert.equal(hasHiddenSegment('/a/x..y'), false);
  });
});
