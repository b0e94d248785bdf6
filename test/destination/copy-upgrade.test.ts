// Copies made by the previous version (state schema 1: one watermark, untagged records; file names escaped as
// `%XX`) keep working: the first run renames their files to this version's names, crash-safely, keeps the
// watermark and fetches nothing again.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { isResourceSyncError } from '../../src/core/errors.js';
import { Destination } from '../../src/destination/destination.js';
import { createPathMapper } from '../../src/destination/paths.js';
import { renameCopyFiles } from '../../src/destination/rename-files.js';
import { DestinationState } from '../../src/destination/state.js';
import { type ResourceSpec, StaticSource, hashAttr, readTree } from './static-source.js';

const AT = '2024-03-01T00:00:00Z';

/** Resources whose names changed between the two versions, with their version 1 names. */
const RESOURCES: readonly { readonly path: string; readonly v1: string; readonly v2: string }[] = [
  { path: '/', v1: 'index', v2: '%%index' },
  { path: '/index', v1: '%69ndex', v2: 'index' }, // takes the name the one above leaves
  { path: '/a%20b%23c', v1: 'a b%2523c', v2: 'a b#c' },
  { path: '/x%3Fy', v1: 'x%253Fy', v2: 'x?y' },
  { path: '/dir:/f.txt', v1: 'dir%3A/f.txt', v2: 'dir:/f.txt' },
  { path: '/plain.txt', v1: 'plain.txt', v2: 'plain.txt' },
];

const V1_SCHEMA = `
CREATE TABLE schema_version (version INTEGER NOT NULL, applied TEXT NOT NULL);
CREATE TABLE resources (uri TEXT PRIMARY KEY NOT NULL, path TEXT NOT NULL, length INTEGER, md5 TEXT, sha256 TEXT,
  lastmod TEXT, source_datetime TEXT, deleted INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;
CREATE INDEX resources_path ON resources (path);
CREATE TABLE watermark (id INTEGER PRIMARY KEY CHECK (id = 1), at TEXT NOT NULL, kind TEXT NOT NULL,
  source_url TEXT NOT NULL, updated TEXT NOT NULL);
CREATE TABLE journal (id INTEGER PRIMARY KEY CHECK (id = 1), op TEXT NOT NULL, info TEXT NOT NULL, started TEXT NOT NULL);
CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) WITHOUT ROWID;
INSERT INTO schema_version VALUES (1, '2024-03-01T00:00:00Z');
`;

function bodyOf(path: string): Buffer {
  return Buffer.from(`content of ${path}\n`);
}

const dirs: string[] = [];
after(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

/** A copy of `src` as the previous version left it: files under version 1 names, a schema 1 state. */
async function makeV1Copy(src: StaticSource): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'rs-upgrade-'));
  dirs.push(dir);
  const u = new URL(src.base);
  const host = `${u.hostname}_${u.port}`;
  await mkdir(join(dir, '.resourcesync'));
  const db = new Database(join(dir, '.resourcesync', 'state.db'));
  db.exec(V1_SCHEMA);
  const put = db.prepare(
    'INSERT INTO resources (uri, path, length, md5, sha256, lastmod, source_datetime) VALUES (?, ?, ?, ?, ?, ?, ?)',
  );
  for (const r of RESOURCES) {
    const body = bodyOf(r.path);
    const file = join(dir, host, ...r.v1.split('/'));
    await mkdir(dirname(file), { recursive: true });
    await writeFile(file, body);
    const [md5, sha256] = hashAttr(body)
      .split(' ')
      .map((h) => h.split(':')[1]);
    put.run(src.url(r.path), `${host}/${r.v1}`, body.length, md5, sha256, null, AT);
  }
  db.prepare("INSERT INTO watermark VALUES (1, ?, 'baseline', ?, ?)").run(AT, src.url('/capabilitylist.xml'), AT);
  db.close();
  return dir;
}

async function startSource(): Promise<StaticSource> {
  const src = await StaticSource.start();
  const specs: ResourceSpec[] = RESOURCES.map((r) => ({ path: r.path, body: bodyOf(r.path) }));
  src.publishResourceList(specs, AT, 1);
  src.publishChangeLists([{ from: AT, changes: [] }]);
  src.publishCapabilities();
  return src;
}

function expectedTree(src: StaticSource): [string, string][] {
  const u = new URL(src.base);
  return RESOURCES.map((r): [string, string] => [`${u.hostname}_${u.port}/${r.v2}`, bodyOf(r.path).toString()]).sort(
    ([a], [b]) => (a < b ? -1 : 1),
  );
}

function tree(dir: string): [string, string][] {
  return [...readTree(dir)].map(([k, v]): [string, string] => [k, v.toString()]).sort(([a], [b]) => (a < b ? -1 : 1));
}

describe('copies made by the previous version', { timeout: 60_000 }, () => {
  it('are renamed, keep their watermark, and fetch nothing again', async () => {
    const src = await startSource();
    try {
      const dir = await makeV1Copy(src);
      // Read-only operations say what to do instead of misreading the copy.
      await assert.rejects(
        new Destination({ url: src.url('/capabilitylist.xml'), dir }).audit(),
        (e: unknown) => isResourceSyncError(e, 'RS_STORE') && /run `resourcesync sync`/.test(e.message),
      );
      const warnings: string[] = [];
      const d = new Destination({ url: src.url('/capabilitylist.xml'), dir, durability: 'none' });
      d.on((e) => {
        if (e.type === 'warning') warnings.push(e.message);
      });
      const s = await d.sync();
      assert.equal(s.operation, 'incremental', 'the watermark was kept');
      assert.equal(s.watermarkBefore, AT);
      assert.equal(s.counts.created + s.counts.updated + s.counts.failed, 0, JSON.stringify(s));
      for (const r of RESOURCES) assert.equal(src.hits.get(r.path) ?? 0, 0, `${r.path} fetched again`);
      assert.ok(
        warnings.some((w) => /^5 files renamed/.test(w)),
        warnings.join('; '),
      );
      assert.deepEqual(tree(dir), expectedTree(src));
      const st = DestinationState.open(dir);
      try {
        const u = new URL(src.base);
        for (const r of RESOURCES)
          assert.equal(st.get(src.url(r.path))?.path, `${u.hostname}_${u.port}/${r.v2}`, r.path);
        assert.equal(st.nameOptions()?.version, 2);
        assert.equal(st.sets().length, 1);
        assert.equal(st.sets()[0]?.legacy, false, 'the watermark was adopted by the set');
      } finally {
        st.close();
      }
      const a = await new Destination({ url: src.url('/capabilitylist.xml'), dir, checksum: true }).audit();
      assert.equal(a.inSync, true, JSON.stringify(a.audit));
    } finally {
      await src.close();
    }
  });

  it('finish renaming after a crash at any step', async () => {
    const src = await startSource();
    try {
      // Count the steps of an undisturbed rename, then crash at each one in turn.
      let steps = 0;
      {
        const dir = await makeV1Copy(src);
        const st = DestinationState.open(dir);
        const mapper = createPathMapper({ root: dir, sourceUrl: src.base, foldCase: false, windowsNames: false });
        await renameCopyFiles(st, mapper, dir, { afterStep: () => void steps++ });
        st.close();
        assert.deepEqual(tree(dir), expectedTree(src));
      }
      assert.ok(steps >= 10, `${steps} steps`);
      for (let crashAt = 1; crashAt <= steps; crashAt++) {
        const dir = await makeV1Copy(src);
        const st = DestinationState.open(dir);
        const mapper = createPathMapper({ root: dir, sourceUrl: src.base, foldCase: false, windowsNames: false });
        let n = 0;
        await assert.rejects(
          renameCopyFiles(st, mapper, dir, {
            afterStep: (phase) => {
              if (++n === crashAt) throw new Error(`crash after step ${n} (${phase})`);
            },
          }),
          /crash after step/,
        );
        st.close();
        // The next run (a new process would do the same) finishes the job.
        const s = await new Destination({ url: src.url('/capabilitylist.xml'), dir, durability: 'none' }).sync();
        assert.equal(
          s.counts.created + s.counts.updated + s.counts.failed,
          0,
          `crash at ${crashAt}: ${JSON.stringify(s)}`,
        );
        assert.deepEqual(tree(dir), expectedTree(src), `crash at step ${crashAt}`);
        const check = DestinationState.open(dir);
        try {
          const u = new URL(src.base);
          for (const r of RESOURCES)
            assert.equal(
              check.get(src.url(r.path))?.path,
              `${u.hostname}_${u.port}/${r.v2}`,
              `${r.path} at ${crashAt}`,
            );
        } finally {
          check.close();
        }
      }
    } finally {
      await src.close();
    }
  });
});
