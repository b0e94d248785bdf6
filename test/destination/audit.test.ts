import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Destination } from '../../src/destination/destination.js';
import { StaticSource, localPathOf, makeResources, readTree } from './static-source.js';

const AT = '2024-07-01T00:00:00Z';

describe('audit', () => {
  let src: StaticSource;
  let dir: string;
  before(async () => {
    src = await StaticSource.start();
    dir = await mkdtemp(join(tmpdir(), 'rs-audit-'));
  });
  after(async () => {
    await src.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('finds missing, extra, changed and same; --checksum sees edits on disk; counts Change Lists since at', async () => {
    const resources = makeResources(10, 50, 'audit');
    src.publishResourceList(resources, AT, 2);
    src.publishChangeLists([{ from: AT, changes: [] }]);
    src.publishCapabilities();
    const url = src.url('/capabilitylist.xml');
    const d = (checksum = false): Destination =>
      new Destination({ url, dir, durability: 'none', checksum, http: { retries: 0 } });
    await d().baseline();
    const clean = await d().audit();
    assert.equal(clean.inSync, true);
    assert.equal(clean.audit?.same, 10);

    const before = readTree(dir);
    // Edit a file on disk behind the state's back (same length).
    await writeFile(join(dir, localPathOf(src, '/res/r2.txt')), Buffer.alloc(50, 'q'));
    // Remove a file.
    await rm(join(dir, localPathOf(src, '/res/r3.txt')));
    // The Source: r4 deleted and r9 updated after the list's snapshot (Change List), new one created.
    src.publishChangeLists([
      {
        from: AT,
        changes: [
          { path: '/res/r4.txt', change: 'deleted', datetime: '2024-07-01T01:00:00Z' },
          { path: '/res/r9.txt', change: 'updated', datetime: '2024-07-01T02:00:00Z', body: Buffer.from('r9 new') },
          { path: '/res/n.txt', change: 'created', datetime: '2024-07-01T03:00:00Z', body: Buffer.from('n') },
        ],
      },
    ]);
    // A file nobody recorded, put in the copy by hand.
    await writeFile(join(dir, localPathOf(src, '/res/stray.txt')), 'stray');
    const fast = await d().audit();
    assert.equal(fast.inSync, false);
    assert.deepEqual(fast.audit?.samples.missing.sort(), [src.url('/res/n.txt'), src.url('/res/r3.txt')]);
    assert.deepEqual(fast.audit?.samples.extra.sort(), [src.url('/res/r4.txt'), src.url('/res/stray.txt')]);
    assert.deepEqual(
      fast.audit?.samples.changed,
      [src.url('/res/r9.txt')],
      'without --checksum the edit on disk is unseen',
    );
    const slow = await d(true).audit();
    assert.deepEqual(slow.audit?.samples.changed.sort(), [src.url('/res/r2.txt'), src.url('/res/r9.txt')]);
    assert.equal(slow.audit?.same, 6);
    // The audit wrote nothing.
    const afterTree = readTree(dir);
    assert.equal(afterTree.size, before.size);
    await rm(join(dir, localPathOf(src, '/res/stray.txt')));

    // A sync with --delete, then a checksum audit after restoring r2 through a baseline: in sync.
    await new Destination({ url, dir, durability: 'none', delete: true }).sync();
    await rm(join(dir, localPathOf(src, '/res/r2.txt')));
    await rm(join(dir, localPathOf(src, '/res/r3.txt')), { force: true });
    src.publishResourceList(
      resources.filter((r) => r.path !== '/res/r4.txt' && r.path !== '/res/r9.txt'),
      AT,
      2,
    );
    await new Destination({ url, dir, durability: 'none' }).baseline();
    const final = await d(true).audit();
    assert.equal(final.inSync, true, JSON.stringify(final.audit));
  });
});
