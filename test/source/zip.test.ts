import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { writeZip } from '../../src/source/dumps.js';
import { type StoredZipEntry, writeStoredZip } from '../../src/source/zip.js';
import { readZip, tempDir } from './helpers.js';

describe('stored ZIP writer', () => {
  it('writes packages yauzl reads back: buffers, streams (data descriptors), UTF-8 names, empty files', async () => {
    const { dir, cleanup } = await tempDir();
    try {
      const big = randomBytes(3 * 1024 * 1024 + 17);
      const entries: StoredZipEntry[] = [
        { name: 'manifest.xml', mtime: new Date(), content: { data: Buffer.from('<urlset/>') } },
        {
          name: 'resources/a b/é#%.txt',
          mtime: new Date(Date.UTC(2020, 1, 3, 4, 5, 6)),
          content: { data: Buffer.from('x') },
        },
        { name: 'resources/empty', mtime: new Date(0), content: { data: new Uint8Array(0) } },
        {
          name: 'resources/streamed.bin',
          mtime: new Date(),
          content: {
            length: big.length,
            stream: async function* () {
              for (let o = 0; o < big.length; o += 1 << 20) yield big.subarray(o, o + (1 << 20));
            },
          },
        },
        ...Array.from({ length: 300 }, (_, i) => ({
          name: `resources/many/${i}`,
          mtime: new Date(),
          content: { data: randomBytes(i) },
        })),
      ];
      const path = join(dir, 'p.zip');
      const bytes = await writeStoredZip(path, entries, { fsync: false });
      assert.equal((await stat(path)).size, bytes);
      const back = await readZip(path);
      assert.deepEqual(
        back.map((e) => e.name),
        entries.map((e) => e.name),
      );
      for (let i = 0; i < entries.length; i++) {
        const c = entries[i]!.content;
        const want = 'data' in c ? Buffer.from(c.data) : big;
        assert.ok(back[i]!.data.equals(want), entries[i]!.name);
      }
    } finally {
      await cleanup();
    }
  });

  it('the yazl fallback (ZIP64-capable, for packages past the stored writer limits) writes the same entries', async () => {
    const { dir, cleanup } = await tempDir();
    try {
      const path = join(dir, 'y.zip');
      const data = randomBytes(5000);
      await writeZip(
        path,
        (async function* () {
          yield { name: 'manifest.xml', mtime: new Date(), content: { data: Buffer.from('<urlset/>') } };
          yield {
            name: 'resources/s',
            mtime: new Date(),
            content: {
              length: data.length,
              stream: async function* () {
                yield data;
              },
            },
          };
        })(),
        { fsync: false },
      );
      const back = await readZip(path);
      assert.deepEqual(
        back.map((e) => e.name),
        ['manifest.xml', 'resources/s'],
      );
      assert.ok(back[1]!.data.equals(data));
    } finally {
      await cleanup();
    }
  });

  it('refuses a stream shorter than its stated length, leaving no file', async () => {
    const { dir, cleanup } = await tempDir();
    try {
      const path = join(dir, 'bad.zip');
      await assert.rejects(
        writeStoredZip(path, [
          {
            name: 'x',
            mtime: new Date(),
            content: {
              length: 10,
              stream: async function* () {
                yield Buffer.from('short');
              },
            },
          },
        ]),
        /5 bytes read where 10 were expected/,
      );
      assert.equal(await stat(path).catch(() => undefined), undefined);
    } finally {
      await cleanup();
    }
  });
});
