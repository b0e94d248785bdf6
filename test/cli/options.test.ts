import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidArgumentError } from 'commander';
import { parseDuration } from '../../src/cli/options.js';

describe('parseDuration', () => {
  it('reads a whole number with an optional unit (seconds by default) as milliseconds', () => {
    assert.equal(parseDuration('90'), 90_000);
    assert.equal(parseDuration('250ms'), 250);
    assert.equal(parseDuration('15m'), 900_000);
    assert.equal(parseDuration('24h'), 86_400_000);
    assert.equal(parseDuration('7d'), 604_800_000);
    assert.equal(parseDuration('0'), 0);
  });
  it('refuses anything else', () => {
    for (const bad of ['', 'soon', '1.5m', '-3s', '10 minutes', '5w'])
      assert.throws(() => parseDuration(bad), InvalidArgumentError, bad);
  });
});
