// One resource that never answers: its attempts together (mirrors, whole-download retries, the client's own
// retries) stop at the time bound of one resource, and the run ends within a bound computed from the options.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Destination } from '../../src/destination/destination.js';
import { StaticSource, makeResources } from './static-source.js';

const AT = '2024-06-01T00:00:00Z';

describe('the time bound of one resource', () => {
  let src: StaticSource;
  let dir: string;
  before(async () => {
    src = await StaticSource.start();
    dir = await mkdtemp(join(tmpdir(), 'rs-timeout-'));
  });
  after(async () => {
    await src.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('gives up on a resource that never answers once its attempts together reach the bound', async () => {
    const resources = makeResources(3, 32, 'v1');
    // A large one too (the streamed, resumable path): declared above the small-resource and resumable sizes.
    const big = { path: '/res/big.bin', body: Buffer.alloc(9 * 1024 * 1024, 7), lastmod: AT };
    src.publishResourceList([...resources, big], AT, 1);
    src.publishCapabilities();
    src.fault('/res/r1.txt', 'hang', 1000);
    src.fault('/res/big.bin', 'hang', 1000);
    const phaseMs = 300;
    const resourceTimeoutMs = 1000;
    const http = {
      connectTimeoutMs: phaseMs,
      headersTimeoutMs: phaseMs,
      bodyIdleTimeoutMs: phaseMs,
      retries: 5,
      retryBaseDelayMs: 50,
      maxRetryDelayMs: 200,
    };
    const started = Date.now();
    const s = await new Destination({
      url: src.url('/capabilitylist.xml'),
      dir,
      durability: 'none',
      http,
      resourceTimeoutMs,
    }).sync();
    const elapsed = Date.now() - started;
    assert.equal(s.counts.created, 2, JSON.stringify(s.failures));
    assert.deepEqual(s.failures.map((f) => f.uri).sort(), [src.url('/res/big.bin'), src.url('/res/r1.txt')]);
    for (const f of s.failures) {
      assert.equal(f.code, 'RS_TIMEOUT', f.message);
      assert.match(f.message, /time bound of one resource \(1 s, all attempts together/, f.message);
    }
    // No attempt starts after the bound; the one in progress ends by its own connect and headers timeouts.
    const bound = resourceTimeoutMs + 2 * phaseMs;
    assert.ok(elapsed < 4 * bound, `${elapsed} ms, bound ${bound} ms`);
  });
});
