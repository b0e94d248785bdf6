// A copy belongs to one Source: another Source is refused unless asked for, and every Source and set keeps
// its own watermark and baseline (issue: `sync URL2 dir` into a copy of URL1, or `--set papers` after
// `--set docs`, reported "0 created").
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { isResourceSyncError } from '../../src/core/errors.js';
import { Destination } from '../../src/destination/destination.js';
import { DestinationState } from '../../src/destination/state.js';
import { type DirectorySource, openDirectorySource } from '../../src/source/directory.js';
import { type SourceServer, createSourceServer } from '../../src/source/server.js';
import { cliCommand, readTree } from './static-source.js';

interface Served {
  readonly base: string;
  readonly site: DirectorySource;
  close(): Promise<void>;
}

async function serve(collection: string, stateDir: string, sets?: 'top-level'): Promise<Served> {
  let resolveSite: (s: DirectorySource) => void = () => undefined;
  const server: SourceServer = createSourceServer(new Promise<DirectorySource>((r) => (resolveSite = r)));
  const base = (await server.listen(0, '127.0.0.1')).url;
  const site = await openDirectorySource({
    dir: collection,
    baseUrl: base,
    stateDir,
    fsync: false,
    ...(sets === undefined ? {} : { sets }),
  });
  resolveSite(site);
  return {
    base,
    site,
    close: async () => {
      await server.close();
      await site.close();
    },
  };
}

function runCli(args: string[]): Promise<{ code: number | null; stderr: string }> {
  const { cmd, args: pre } = cliCommand();
  return new Promise((resolve) => {
    const child = spawn(cmd, [...pre, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    child.on('close', (code) => resolve({ code, stderr }));
  });
}

describe('Sources and sets of a copy', { timeout: 120_000 }, () => {
  let work: string;
  let one: Served;
  let two: Served;
  let sets: Served;
  before(async () => {
    work = await mkdtemp(join(tmpdir(), 'rs-sources-'));
    for (const name of ['one', 'two']) {
      await mkdir(join(work, name));
      for (let i = 0; i < 3; i++) await writeFile(join(work, name, `${name}-${i}.txt`), `${name} ${i}\n`);
    }
    await mkdir(join(work, 'sets', 'docs'), { recursive: true });
    await mkdir(join(work, 'sets', 'papers'), { recursive: true });
    for (let i = 0; i < 2; i++) await writeFile(join(work, 'sets', 'docs', `d${i}.txt`), `doc ${i}\n`);
    for (let i = 0; i < 4; i++) await writeFile(join(work, 'sets', 'papers', `p${i}.txt`), `paper ${i}\n`);
    one = await serve(join(work, 'one'), join(work, 'one-state'));
    two = await serve(join(work, 'two'), join(work, 'two-state'));
    sets = await serve(join(work, 'sets'), join(work, 'sets-state'), 'top-level');
  });
  after(async () => {
    await one?.close();
    await two?.close();
    await sets?.close();
    await rm(work, { recursive: true, force: true });
  });

  it('refuses another Source with a clear error, and keeps both when asked', async () => {
    const dir = join(work, 'copy-one');
    const first = await new Destination({ url: one.base, dir, durability: 'none' }).sync();
    assert.equal(first.counts.created, 3);
    // The same Source through another of its URLs is the same copy.
    const again = await new Destination({
      url: `${one.base}.well-known/resourcesync`,
      dir,
      durability: 'none',
    }).sync();
    assert.equal(again.operation, 'incremental');

    await assert.rejects(new Destination({ url: two.base, dir, durability: 'none' }).sync(), (e: unknown) => {
      assert.ok(isResourceSyncError(e, 'RS_CONFIG'), String(e));
      assert.match(e.message, new RegExp(`copy of ${one.base}\\.well-known/resourcesync`));
      assert.match(e.message, /--allow-other-source/);
      return true;
    });
    // The command line says so and exits 2 (wrong arguments), writing nothing.
    const cli = await runCli(['sync', two.base, dir, '--durability', 'none']);
    assert.equal(cli.code, 2, cli.stderr);
    assert.match(cli.stderr, /--allow-other-source/);
    const u2 = new URL(two.base);
    assert.equal(readTree(join(dir, `${u2.hostname}_${u2.port}`)).size, 0);

    const other = await new Destination({ url: two.base, dir, durability: 'none', allowOtherSource: true }).sync();
    assert.equal(other.operation, 'baseline');
    assert.equal(other.counts.created, 3, 'its own baseline, not "0 created"');
    assert.equal(readTree(join(dir, `${u2.hostname}_${u2.port}`)).size, 3);

    // Each Source goes on from its own watermark.
    await writeFile(join(work, 'one', 'one-new.txt'), 'new in one\n');
    await one.site.scan();
    const inc = await new Destination({ url: one.base, dir, durability: 'none' }).sync();
    assert.equal(inc.operation, 'incremental');
    assert.equal(inc.counts.created, 1);
    const inc2 = await new Destination({ url: two.base, dir, durability: 'none', allowOtherSource: true }).sync();
    assert.equal(inc2.operation, 'incremental');
    assert.equal(inc2.counts.created + inc2.counts.updated + inc2.counts.deleted, 0);
    const st = DestinationState.open(dir);
    try {
      assert.deepEqual(
        st.sets().map((s) => [s.source, s.watermark?.kind]),
        [
          [`${one.base}.well-known/resourcesync`, 'incremental'],
          [`${two.base}.well-known/resourcesync`, 'incremental'],
        ],
      );
    } finally {
      st.close();
    }
  });

  it('gives each set of one Source its own watermark and baseline', async () => {
    const dir = join(work, 'copy-sets');
    const docs = await new Destination({ url: sets.base, dir, durability: 'none', set: 'docs', delete: true }).sync();
    assert.equal(docs.operation, 'baseline');
    assert.equal(docs.counts.created, 2);
    const papers = await new Destination({
      url: sets.base,
      dir,
      durability: 'none',
      set: 'papers',
      delete: true,
    }).sync();
    assert.equal(papers.operation, 'baseline', 'a new set is a baseline, not an incremental from docs');
    assert.equal(papers.counts.created, 4);
    assert.equal(papers.counts.deleted + papers.counts.deletionsRecorded, 0, "docs' files are not papers' extras");
    // A second baseline of one set leaves the other's files alone.
    const rebase = await new Destination({
      url: sets.base,
      dir,
      durability: 'none',
      set: 'docs',
      delete: true,
    }).baseline();
    assert.equal(rebase.counts.deleted + rebase.counts.deletionsRecorded, 0);
    const u = new URL(sets.base);
    assert.equal(readTree(join(dir, `${u.hostname}_${u.port}`)).size, 6);
    // Changes of one set come through its own incremental run.
    await writeFile(join(work, 'sets', 'papers', 'p9.txt'), 'paper 9\n');
    await sets.site.scan();
    const d2 = await new Destination({ url: sets.base, dir, durability: 'none', set: 'docs' }).sync();
    assert.equal(d2.operation, 'incremental');
    assert.equal(d2.counts.created, 0);
    const p2 = await new Destination({ url: sets.base, dir, durability: 'none', set: 'papers' }).sync();
    assert.equal(p2.operation, 'incremental');
    assert.equal(p2.counts.created, 1);
    for (const set of ['docs', 'papers']) {
      const a = await new Destination({ url: sets.base, dir, set }).audit();
      assert.equal(a.inSync, true, `${set}: ${JSON.stringify(a.audit)}`);
    }
  });
});
