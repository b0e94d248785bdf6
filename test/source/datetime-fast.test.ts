import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { formatDatetime } from '../../src/core/datetime.js';
import { formatDatetimeFast } from '../../src/source/documents.js';

describe('formatDatetimeFast', () => {
  it('writes the same text as formatDatetime', () => {
    for (const ms of [0, 1, 999, 1000, 86_399_999, 86_400_000, 951_782_400_000, 253_402_300_799_999])
      assert.equal(formatDatetimeFast(ms), formatDatetime(ms));
    fc.assert(
      fc.property(fc.integer({ min: -1e13, max: 2.6e14 }), (ms) => {
        assert.equal(formatDatetimeFast(ms), formatDatetime(ms));
      }),
      { numRuns: 20_000 },
    );
  });
});
