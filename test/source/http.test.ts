// Unit tests of the HTTP semantics of the Source server (pure functions in src/source/http/).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  deriveEtag,
  evaluatePreconditions,
  formatHttpDate,
  ifRangeAllows,
  parseEntityTag,
  parseEntityTagList,
  parseHttpDate,
  strongMatch,
  weakMatch,
} from '../../src/source/http/conditional.js';
import { acceptsGzip, isCompressibleXml } from '../../src/source/http/encoding.js';
import { evaluateRange, formatContentRange, formatUnsatisfiedRange } from '../../src/source/http/range.js';
import { checkRequestTarget, decodeSegment, hasHiddenSegment } from '../../src/source/http/request-target.js';

describe('evaluateRange', () => {
  it('single ranges: a-b, a-, -n, clamping', () => {
    assert.deepEqual(evaluateRange('bytes=0-99', 1000), { kind: 'single', range: { start: 0, end: 99 } });
    assert.deepEqual(evaluateRange('bytes=990-', 1000), { kind: 'single', range: { start: 990, end: 999 } });
    assert.deepEqual(evaluateRange('bytes=-10', 1000), { kind: 'single', range: { start: 990, end: 999 } });
    assert.deepEqual(evaluateRange('bytes=-5000', 1000), { kind: 'single', range: { start: 0, end: 999 } });
    assert.deepEqual(evaluateRange('bytes=900-5000', 1000), { kind: 'single', range: { start: 900, end: 999 } });
    assert.deepEqual(evaluateRange('Bytes = 5-5', 1000), { kind: 'single', range: { start: 5, end: 5 } });
  });
  it('unsatisfiable: start past the end, -0, every range past the end', () => {
    assert.deepEqual(evaluateRange('bytes=1000-', 1000), { kind: 'unsatisfiable' });
    assert.deepEqual(evaluateRange('bytes=1000-2000', 1000), { kind: 'unsatisfiable' });
    assert.deepEqual(evaluateRange('bytes=-0', 1000), { kind: 'unsatisfiable' });
    assert.deepEqual(evaluateRange('bytes=2000-,3000-', 1000), { kind: 'unsatisfiable' });
    assert.deepEqual(evaluateRange('bytes=0-', 0), { kind: 'unsatisfiable' });
  });
  it('ignored: absent, other unit, syntax errors, several ranges, suffix on an empty body', () => {
    assert.equal(evaluateRange(undefined, 10).kind, 'none');
    assert.deepEqual(evaluateRange('items=0-1', 10), { kind: 'none', reason: 'unit' });
    for (const bad of [
      'bytes=',
      'bytes=a-b',
      'bytes=5-1',
      'bytes=1',
      'bytes=--1',
      'bytes=1-2-3',
      'bytes 0-1',
      'bytes=0x1-2',
    ]) {
      assert.deepEqual(evaluateRange(bad, 10), { kind: 'none', reason: 'invalid' }, bad);
    }
    assert.deepEqual(evaluateRange('bytes=0-1,5-6', 10), { kind: 'none', reason: 'multiple' });
    assert.deepEqual(evaluateRange('bytes=-5', 0), { kind: 'none', reason: 'empty' });
    // One satisfiable among unsatisfiable ones is served as a single range.
    assert.deepEqual(evaluateRange('bytes=50-60, 2-3', 10), { kind: 'single', range: { start: 2, end: 3 } });
  });
  it('Content-Range values', () => {
    assert.equal(formatContentRange({ start: 0, end: 99 }, 1000), 'bytes 0-99/1000');
    assert.equal(formatUnsatisfiedRange(1000), 'bytes */1000');
  });
  it('property: a single range always lies within the representation', () => {
    fc.assert(
      fc.property(fc.nat(10_000), fc.option(fc.nat(20_000)), fc.option(fc.nat(20_000)), (len, a, b) => {
        const header = `bytes=${a ?? ''}-${b ?? ''}`;
        const r = evaluateRange(header, len);
        if (r.kind === 'single') {
          assert.ok(r.range.start >= 0 && r.range.start <= r.range.end && r.range.end < len, header);
        }
      }),
    );
  });
});

describe('entity tags and preconditions', () => {
  it('parses tags and lists, with commas inside quotes and W/', () => {
    assert.deepEqual(parseEntityTag('"abc"'), { weak: false, opaque: 'abc' });
    assert.deepEqual(parseEntityTag('W/"abc"'), { weak: true, opaque: 'abc' });
    assert.equal(parseEntityTag('abc'), undefined);
    assert.equal(parseEntityTag('"a" "b"'), undefined);
    assert.deepEqual(parseEntityTagList(' "a,b" , W/"c",,"d" '), [
      { weak: false, opaque: 'a,b' },
      { weak: true, opaque: 'c' },
      { weak: false, opaque: 'd' },
    ]);
    assert.equal(parseEntityTagList('*'), '*');
    assert.equal(parseEntityTagList('"a'), undefined);
    assert.equal(parseEntityTagList('"a" x'), undefined);
  });
  it('strong and weak comparison (RFC 9110 §8.8.3.2 table)', () => {
    const w1 = { weak: true, opaque: '1' };
    const w2 = { weak: true, opaque: '2' };
    const s1 = { weak: false, opaque: '1' };
    assert.equal(strongMatch(w1, w1), false);
    assert.equal(weakMatch(w1, w1), true);
    assert.equal(strongMatch(w1, w2), false);
    assert.equal(weakMatch(w1, w2), false);
    assert.equal(strongMatch(w1, s1), false);
    assert.equal(weakMatch(w1, s1), true);
    assert.equal(strongMatch(s1, s1), true);
  });
  it('HTTP dates: three formats, invalid ones refused', () => {
    const ms = Date.UTC(1994, 10, 6, 8, 49, 37);
    assert.equal(parseHttpDate('Sun, 06 Nov 1994 08:49:37 GMT'), ms);
    assert.equal(parseHttpDate('Sunday, 06-Nov-94 08:49:37 GMT'), ms);
    assert.equal(parseHttpDate('Sun Nov  6 08:49:37 1994'), ms);
    assert.equal(parseHttpDate('Sun, 31 Feb 1994 08:49:37 GMT'), undefined);
    assert.equal(parseHttpDate('yesterday'), undefined);
    assert.equal(parseHttpDate('1994-11-06T08:49:37Z'), undefined);
    assert.equal(formatHttpDate(ms), 'Sun, 06 Nov 1994 08:49:37 GMT');
  });
  const v = { etag: '"xyz"', lastModified: Date.UTC(2020, 0, 1, 0, 0, 0, 500) };
  it('If-None-Match: match, lists, *, weak, no match', () => {
    assert.equal(evaluatePreconditions({ method: 'GET', ifNoneMatch: '"xyz"' }, v), 'not-modified');
    assert.equal(evaluatePreconditions({ method: 'HEAD', ifNoneMatch: '"a", W/"xyz"' }, v), 'not-modified');
    assert.equal(evaluatePreconditions({ method: 'GET', ifNoneMatch: '*' }, v), 'not-modified');
    assert.equal(evaluatePreconditions({ method: 'GET', ifNoneMatch: '"a", "b"' }, v), 'proceed');
    assert.equal(evaluatePreconditions({ method: 'GET', ifNoneMatch: 'garbage' }, v), 'proceed');
    const gz = { ...v, etag: '"xyz-gzip"', alsoMatches: ['"xyz"'] };
    assert.equal(evaluatePreconditions({ method: 'GET', ifNoneMatch: '"xyz"' }, gz), 'not-modified');
  });
  it('If-Modified-Since at one-second resolution, ignored when If-None-Match is present or invalid', () => {
    const lm = formatHttpDate(v.lastModified);
    assert.equal(evaluatePreconditions({ method: 'GET', ifModifiedSince: lm }, v), 'not-modified');
    const before = formatHttpDate(v.lastModified - 1500);
    assert.equal(evaluatePreconditions({ method: 'GET', ifModifiedSince: before }, v), 'proceed');
    assert.equal(evaluatePreconditions({ method: 'GET', ifModifiedSince: 'nonsense' }, v), 'proceed');
    assert.equal(evaluatePreconditions({ method: 'GET', ifNoneMatch: '"other"', ifModifiedSince: lm }, v), 'proceed');
  });
  it('If-Match and If-Unmodified-Since give 412', () => {
    assert.equal(evaluatePreconditions({ method: 'GET', ifMatch: '"other"' }, v), 'precondition-failed');
    assert.equal(evaluatePreconditions({ method: 'GET', ifMatch: 'W/"xyz"' }, v), 'precondition-failed');
    assert.equal(evaluatePreconditions({ method: 'GET', ifMatch: '"xyz"' }, v), 'proceed');
    assert.equal(evaluatePreconditions({ method: 'GET', ifMatch: '*' }, v), 'proceed');
    assert.equal(evaluatePreconditions({ method: 'GET', ifMatch: 'bad' }, v), 'precondition-failed');
    const early = formatHttpDate(v.lastModified - 5000);
    assert.equal(evaluatePreconditions({ method: 'GET', ifUnmodifiedSince: early }, v), 'precondition-failed');
  });
  it('If-Range: strong ETag or exact date', () => {
    assert.equal(ifRangeAllows(undefined, v), true);
    assert.equal(ifRangeAllows('"xyz"', v), true);
    assert.equal(ifRangeAllows('W/"xyz"', v), false);
    assert.equal(ifRangeAllows('"old"', v), false);
    assert.equal(ifRangeAllows(formatHttpDate(v.lastModified), v), true);
    assert.equal(ifRangeAllows(formatHttpDate(v.lastModified - 2000), v), false);
    assert.equal(ifRangeAllows('junk', v), false);
  });
});

describe('Accept-Encoding', () => {
  it('gzip accepted or refused', () => {
    assert.equal(acceptsGzip('gzip, deflate, br'), true);
    assert.equal(acceptsGzip('GZIP;q=0.5'), true);
    assert.equal(acceptsGzip('x-gzip'), true);
    assert.equal(acceptsGzip('*'), true);
    assert.equal(acceptsGzip('gzip;q=0, *'), false);
    assert.equal(acceptsGzip('*;q=0'), false);
    assert.equal(acceptsGzip('br, identity'), false);
    assert.equal(acceptsGzip('gzip;q=abc'), false);
    assert.equal(acceptsGzip(''), false);
    assert.equal(acceptsGzip(undefined), false);
  });
  it('XML media types', () => {
    assert.equal(isCompressibleXml('application/xml'), true);
    assert.equal(isCompressibleXml('text/xml; charset=utf-8'), true);
    assert.equal(isCompressibleXml('application/atom+xml'), true);
    assert.equal(isCompressibleXml('application/zip'), false);
  });
});

describe('request targets', () => {
  it('accepts origin-form and absolute-form, keeps the path percent-encoded', () => {
    assert.deepEqual(checkRequestTarget('/a%20b/c%23d.txt?x=1'), {
      ok: true,
      pathname: '/a%20b/c%23d.txt',
      query: 'x=1',
    });
    assert.deepEqual(checkRequestTarget('http://h:8080/x'), { ok: true, pathname: '/x', query: undefined });
    assert.deepEqual(checkRequestTarget('http://h'), { ok: true, pathname: '/', query: undefined });
    assert.equal(checkRequestTarget('/%C3%A9t%C3%A9.txt').ok, true);
    assert.equal(checkRequestTarget('/dir/').ok, true);
    assert.equal(checkRequestTarget('/%252e%252e/x').ok, true, 'double-encoded dots are a literal name, decoded once');
  });
  it('refuses traversal, encoded separators, NUL, bad encodings', () => {
    const bad = [
      '*',
      'example.org:80',
      '/../etc/passwd',
      '/a/../../etc',
      '/a/./b',
      '/%2e%2e/etc/passwd',
      '/%2E%2e/x',
      '/.%2e/x',
      '/a%2f..%2f..%2fetc',
      '/a%2F..',
      '/..%5c..%5cetc',
      '/a\\..\\b',
      '/a%00b',
      '/a%zz',
      '/a%c3',
      '/a%ff',
      '//etc/passwd',
      '/a b',
      '/a#b',
      '/caf\u00e9',
      'ftp://h/x',
    ];
    for (const t of bad) assert.equal(checkRequestTarget(t).ok, false, t);
  });
  it('decodes segments once and spots hidden ones', () => {
    assert.equal(decodeSegment('a%20b'), 'a b');
    assert.equal(decodeSegment('%252e'), '%2e');
    assert.equal(decodeSegment('%e9'), undefined);
    assert.equal(hasHiddenSegment('/a/.git/config'), true);
    assert.equal(hasHiddenSegment('/a/%2Eenv'), true);
    assert.equal(hasHiddenSegment('/a/b.txt'), false);
  });
});

describe('derived ETags', () => {
  it('a suffix inside the quotes, W/ kept', () => {
    assert.equal(deriveEtag('"abc"', 'gzip'), '"abc-gzip"');
    assert.equal(deriveEtag('W/"abc"', 'gzip'), 'W/"abc-gzip"');
  });
});
