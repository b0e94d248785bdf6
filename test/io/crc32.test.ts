import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import zlib from 'node:zlib';
import fc from 'fast-check';
import { crc32, crc32Table } from '../../src/io/crc32.js';

/** Reference CRC-32, a bit at a time. */
function crc32Slow(buf: Uint8Array): number {
  let c = ~0;
  for (const b of buf) {
    c ^= b;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  }
  return ~c >>> 0;
}

describe('CRC-32', () => {
  it('the table (the fallback before Node 20.15) equals the reference, in one call or continued', () => {
    assert.equal(crc32Table(Buffer.from('123456789')), 0xcbf43926);
    assert.equal(crc32Table(new Uint8Array(0)), 0);
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.nat(300), (bytes, cut) => {
        const k = Math.min(cut, bytes.length);
        assert.equal(crc32Table(bytes), crc32Slow(bytes));
        assert.equal(crc32Table(bytes.subarray(k), crc32Table(bytes.subarray(0, k))), crc32Slow(bytes));
      }),
    );
  });

  it('crc32 (zlib where Node has it) agrees with the table, unsigned, in one call and continued', () => {
    const data = randomBytes(100_003);
    const whole = crc32Table(data);
    assert.equal(crc32(data), whole);
    assert.equal(crc32(data.subarray(37), crc32(data.subarray(0, 37))), whole);
    const native = (zlib as { crc32?: (d: Uint8Array, v?: number) => number }).crc32;
    if (native !== undefined)
      for (let k = 0; k < 40; k++)
        assert.equal(crc32Table(data.subarray(k, k * 7 + 3)), native(data.subarray(k, k * 7 + 3)) >>> 0);
  });
});
