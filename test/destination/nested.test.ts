// A Source with both /a and /a/b (Fedora, LDP, any REST API): both are stored, /a at a/%%self, in either
// arrival order, through baseline (list and dump), incremental, deletes of either, audit and --delete, in
// every durability; a crash at any step of moving a file aside is repaired by the next run.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { type Durability, Destination } from '../../src/destination/index.js';
import { displaceFile, forgetVerifiedDirectories } from '../../src/destination/paths.js';
import { DestinationState } from '../../src/destination/state.js';
import { type ChangeSpec, type ResourceSpec, StaticSource, localPathOf, readTree } from './static-source.js';

const AT = '2024-01-01T00:00:00Z';
const body = (s: string): Buffer => Buffer.from(`${s}\n`);

const dirs: string[] = [];
after(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});
async function tempDir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'rs-nested-'));
  dirs.push(d);
  return d;
}

/** The copy's files under the Source's host directory, names relative to it. */
function files(src: StaticSource, dir: string): Record<string, string> {
  const prefix = localPathOf(src, '/');
  const out: Record<string, string> = {};
  for (const [k, v] of readTree(dir)) if (k.startsWith(prefix)) out[k.slice(prefix.length)] = v.toString().trim();
  return out;
}

async function inSync(src: StaticSource, dir: string): Promise<void> {
  const a = await new Destination({ url: src.url('/capabilitylist.xml'), dir, checksum: true }).audit();
  assert.equal(a.inSync, true, JSON.stringify(a.audit));
}

function sync(
  src: StaticSource,
  dir: string,
  durability: Durability,
  extra: { delete?: boolean; noDumps?: boolean } = {},
) {
  return new Destination({ url: src.url('/capabilitylist.xml'), dir, durability, ...extra }).sync();
}

describe('nested resources (/a and /a/b)', { timeout: 120_000 }, () => {
  for (const durability of ['batch', 'file', 'none'] as const)
    for (const order of ['parent first', 'child first'] as const)
      for (const via of ['list', 'dump'] as const)
        it(`baseline from the ${via}, ${order}, durability ${durability}`, async () => {
          const src = await StaticSource.start();
          try {
            const parent: ResourceSpec = { path: '/a', body: body('a') };
            const children: ResourceSpec[] = [
              { path: '/a/b', body: body('a/b') },
              { path: '/a/b/c', body: body('a/b/c') },
              { path: '/x/y', body: body('x/y') },
            ];
            const resources = order === 'parent first' ? [parent, ...children] : [...children, parent];
            src.publishResourceList(resources, AT, 1);
            if (via === 'dump') await src.publishResourceDump(resources, AT, 1);
            src.publishCapabilities();
            const dir = await tempDir();
            const s = await sync(src, dir, durability);
            assert.equal(s.counts.failed, 0, JSON.stringify(s.failures));
            assert.equal(s.counts.created, 4);
            assert.deepEqual(s.via, [via]);
            assert.deepEqual(files(src, dir), {
              'a/%%self': 'a',
              'a/b/%%self': 'a/b',
              'a/b/c': 'a/b/c',
              'x/y': 'x/y',
            });
            assert.ok(s.watermarkAfter !== undefined, 'the watermark moved');
            await inSync(src, dir);
            const again = await new Destination({
              url: src.url('/capabilitylist.xml'),
              dir,
              durability,
              noDumps: true,
            }).baseline();
            assert.equal(again.counts.created + again.counts.updated + again.counts.failed, 0, JSON.stringify(again));
          } finally {
            await src.close();
          }
        });

  for (const durability of ['batch', 'none'] as const)
    it(`incremental: a child arrives under a file, the parent under a directory, updates and deletes of either (durability ${durability})`, async () => {
      const src = await StaticSource.start();
      try {
        src.publishResourceList(
          [
            { path: '/a', body: body('a v1') },
            { path: '/p/q', body: body('p/q') },
          ],
          AT,
          1,
        );
        const lists: { from: string; until?: string; changes: ChangeSpec[] }[] = [{ from: AT, changes: [] }];
        src.publishChangeLists(lists);
        src.publishCapabilities();
        const dir = await tempDir();
        await sync(src, dir, durability);
        assert.deepEqual(files(src, dir), { a: 'a v1', 'p/q': 'p/q' });

        const step = async (changes: ChangeSpec[], expected: Record<string, string>, del = false): Promise<void> => {
          lists[0] = { from: AT, changes: [...(lists[0]?.changes ?? []), ...changes] };
          src.publishChangeLists(lists);
          const s = await sync(src, dir, durability, { delete: del });
          assert.equal(s.operation, 'incremental');
          assert.equal(s.counts.failed, 0, JSON.stringify(s.failures));
          assert.equal(s.complete, true);
          assert.deepEqual(files(src, dir), expected);
          await inSync(src, dir);
        };
        // A child of the file a: a moves aside to a/%%self.
        await step([{ path: '/a/b', change: 'created', datetime: '2024-01-02T00:00:00Z', body: body('a/b') }], {
          'a/%%self': 'a v1',
          'a/b': 'a/b',
          'p/q': 'p/q',
        });
        // The parent of the directory p arrives, and a is updated: both go to %%self.
        await step(
          [
            { path: '/p', change: 'created', datetime: '2024-01-03T00:00:00Z', body: body('p') },
            { path: '/a', change: 'updated', datetime: '2024-01-03T00:00:01Z', body: body('a v2') },
          ],
          { 'a/%%self': 'a v2', 'a/b': 'a/b', 'p/%%self': 'p', 'p/q': 'p/q' },
        );
        // Both in one run: an update of a and a new grandchild under a/b.
        await step(
          [
            { path: '/a', change: 'updated', datetime: '2024-01-04T00:00:00Z', body: body('a v3') },
            { path: '/a/b/c', change: 'created', datetime: '2024-01-04T00:00:01Z', body: body('a/b/c') },
          ],
          { 'a/%%self': 'a v3', 'a/b/%%self': 'a/b', 'a/b/c': 'a/b/c', 'p/%%self': 'p', 'p/q': 'p/q' },
        );
        // Deletes of either, with --delete.
        await step(
          [
            { path: '/a', change: 'deleted', datetime: '2024-01-05T00:00:00Z' },
            { path: '/p/q', change: 'deleted', datetime: '2024-01-05T00:00:01Z' },
          ],
          { 'a/b/%%self': 'a/b', 'a/b/c': 'a/b/c', 'p/%%self': 'p' },
          true,
        );
        // A parent coming back under its directory.
        await step([{ path: '/a', change: 'created', datetime: '2024-01-06T00:00:00Z', body: body('a v4') }], {
          'a/%%self': 'a v4',
          'a/b/%%self': 'a/b',
          'a/b/c': 'a/b/c',
          'p/%%self': 'p',
        });
      } finally {
        await src.close();
      }
    });

  it('a new baseline with --delete removes the file of a parent the Source dropped', async () => {
    const src = await StaticSource.start();
    try {
      src.publishResourceList(
        [
          { path: '/a', body: body('a') },
          { path: '/a/b', body: body('a/b') },
        ],
        AT,
        1,
      );
      src.publishCapabilities();
      const dir = await tempDir();
      await sync(src, dir, 'batch');
      src.publishResourceList([{ path: '/a/b', body: body('a/b') }], '2024-02-01T00:00:00Z', 1);
      const s = await new Destination({ url: src.url('/capabilitylist.xml'), dir, delete: true }).baseline();
      assert.equal(s.counts.deleted, 1);
      assert.deepEqual(files(src, dir), { 'a/b': 'a/b' });
      await inSync(src, dir);
    } finally {
      await src.close();
    }
  });

  it('a crash at any step of moving a file aside is repaired by the next run', async () => {
    const src = await StaticSource.start();
    try {
      src.publishResourceList([{ path: '/a', body: body('a') }], AT, 1);
      src.publishChangeLists([
        {
          from: AT,
          changes: [{ path: '/a/b', change: 'created', datetime: '2024-01-02T00:00:00Z', body: body('a/b') }],
        },
      ]);
      src.publishCapabilities();
      for (const crashAfter of ['journal', 'aside', 'directory', 'placed'] as const) {
        const dir = await tempDir();
        // The baseline's files only (the change list is read by later runs).
        const b = await new Destination({ url: src.url('/capabilitylist.xml'), dir, durability: 'none' }).baseline();
        assert.equal(b.counts.created, 1);
        const state = DestinationState.open(dir);
        state.clearWatermark(); // left as a baseline would be, before its change
        state.setWatermark({ at: AT, kind: 'baseline', sourceUrl: src.url('/capabilitylist.xml') });
        state.close();
        const a = join(dir, localPathOf(src, '/a'));
        await assert.rejects(
          displaceFile(dir, a, {
            afterStep: (s) => {
              if (s === crashAfter) throw new Error(`crash after ${s}`);
            },
          }),
          new RegExp(`crash after ${crashAfter}`),
        );
        forgetVerifiedDirectories();
        const s = await sync(src, dir, 'batch');
        assert.equal(s.counts.failed, 0, `${crashAfter}: ${JSON.stringify(s.failures)}`);
        assert.deepEqual(files(src, dir), { 'a/%%self': 'a', 'a/b': 'a/b' }, `crash after ${crashAfter}`);
        await inSync(src, dir);
      }
    } finally {
      await src.close();
    }
  });

  it('a newer version landing during the move wins over the one moved aside', async () => {
    const dir = await tempDir();
    const a = join(dir, 'h', 'a');
    await mkdir(join(dir, 'h'));
    await writeFile(a, 'old');
    let landed = false;
    await displaceFile(dir, a, {
      afterStep: (s) => {
        // An install of the same resource renames its new version into place right after the old one left.
        if (s !== 'aside' || landed) return;
        writeFileSync(a, 'new');
        landed = true;
      },
    });
    assert.deepEqual(Object.fromEntries([...readTree(dir)].map(([k, v]) => [k, v.toString()])), {
      'h/a/%%self': 'new',
    });
  });
});
