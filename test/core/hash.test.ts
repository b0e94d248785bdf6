import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isResourceSyncError } from '../../src/core/errors.js';
import { formatHashes, hashesMatch, isHexDigest, knownHashes, parseHashes } from '../../src/core/hash.js';

const MD5 = '1584abdf8ebdc9802ac0c6a7402c03b6';
const SHA256 = '854f61290e2e197a11bc91063afce22e43f8ccc655237050ace766adc68dc784';

describe('hash attribute', () => {
  it('parses a whitespace-separated list', () => {
    const h = parseHashes(`md5:${MD5.toUpperCase()}\n  sha-256:${SHA256}`);
    assert.equal(h.get('md5'), MD5);
    assert.equal(h.get('sha-256'), SHA256);
    assert.equal(formatHashes({ 'sha-256': SHA256, md5: MD5 }), `md5:${MD5} sha-256:${SHA256}`);
  });
  it('refuses bad items', () => {
    for (const bad of ['', 'md5', `md5:${MD5.slice(1)}`, 'sha-256:xyz', `:${MD5}`, `md5:${MD5} md5:${MD5}`, 'md5:']) {
      assert.throws(
        () => parseHashes(bad),
        (e) => isResourceSyncError(e, 'RS_INVALID_VALUE'),
        bad,
      );
    }
    assert.equal(isHexDigest('sha-1', 'g'.repeat(40)), false);
    assert.equal(isHexDigest('x-custom', 'abc'), true);
    // U+0010-U+0019 must not pass for digits (they fold to '0'-'9' with | 0x20).
    assert.equal(isHexDigest('x-custom', '\u0010\u0019'), false);
    assert.equal(isHexDigest('md5', `${MD5.slice(2)}\u0011\u0012`), false);
    assert.deepEqual(knownHashes('sha-256:not-hex'), {});
  });
  it('matches on common algorithms only', () => {
    assert.equal(hashesMatch({ md5: MD5 }, { md5: MD5.toUpperCase(), 'sha-256': SHA256 }), true);
    assert.equal(hashesMatch({ md5: MD5 }, { md5: SHA256.slice(0, 32) }), false);
    assert.equal(hashesMatch({ md5: MD5 }, { 'sha-256': SHA256 }), undefined);
  });
});
