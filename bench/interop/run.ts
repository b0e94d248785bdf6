// Interop harness: our Source and Destination against the Python reference implementation (resync 2.0.x) and its
// simulator, which we did not write. Not part of `npm test`: it needs the reference checkout and Debian's
// python3 packages (python3-dateutil, -defusedxml, -tornado, -requests, -yaml).
//
//   npx tsc && node dist/bench/interop/run.js [--only S,V,P,D,B] [--json] [--keep]
//
// Groups (each prints rows of a verdict table: scenario, expected, got, pass/fail):
//   S  resync-sync as a Destination against our `serve`: baseline, names, incremental with and without
//      --changelist-uri, audit, several creations sharing one datetime
//   V  resync's own document classes reading every document our `serve` and `publish` emit
//   P  resync-sync against our `publish` output on a static server; publish --copy-resources re-runs
//   D  our `sync` against resync-simulator (spec 1.1 and 1.0 change lists): baseline while it changes,
//      incremental, audit, and the copy fetched again and compared
//   B  our `sync` against resync-build output: Resource List Index, Resource Dump, a Change List without
//      datetimes (deletions with old lastmods), audit
//
// Environment: RESYNC_DIR, RESYNC_SIMULATOR_DIR, RESYNC_PYTHON override /work/peers/resync,
// /work/peers/resync-simulator and /usr/bin/python3. Exit status: 0 when every row passes, 1 otherwise.
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { appendFile, cp, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Entry } from '../../src/core/model.js';
import { readDocument } from '../../src/xml/index.js';
import {
  PEERS,
  SUB_DELIM_NAMES,
  type Verdict,
  describeDiff,
  diffTrees,
  formatTable,
  isEqual,
  makeCollection,
  ours,
  pythonHelper,
  resync,
  resyncStatus,
  run,
  sleep,
  startServe,
  startSimulator,
  startStatic,
  treeOf,
} from './lib.js';

const args = process.argv.slice(2);
const only = (() => {
  const i = args.indexOf('--only');
  return i >= 0 ? new Set((args[i + 1] ?? '').split(',')) : undefined;
})();
const keep = args.includes('--keep');
const json = args.includes('--json');
const rows: Verdict[] = [];
const row = (v: Verdict): void => {
  rows.push(v);
  if (!json) process.stderr.write(`${v.pass ? 'pass' : 'FAIL'}  ${v.group}  ${v.scenario}: ${v.got}\n`);
};

/** Our `sync` with `--json` and `--detailed-exit-code` (3 = changes applied): its summary (or the error it printed). */
async function ourSync(
  argv: readonly string[],
): Promise<{ code: number | null; summary?: SyncSummaryLike; text: string }> {
  const r = await ours(['sync', '--json', '--detailed-exit-code', ...argv]);
  let summary: SyncSummaryLike | undefined;
  try {
    const parsed = JSON.parse(r.stdout) as SyncSummaryLike | { error: { code: string; message: string } };
    if ('error' in parsed)
      return { code: r.code, text: `exit ${r.code}; ${parsed.error.code}: ${parsed.error.message.slice(0, 200)}` };
    summary = parsed;
  } catch {
    summary = undefined;
  }
  const text = `exit ${r.code}; ${summary === undefined ? r.stderr.trim().split('\n').slice(-2).join(' ').slice(0, 200) : describeSummary(summary)}`;
  return summary === undefined ? { code: r.code, text } : { code: r.code, summary, text };
}

interface SyncSummaryLike {
  operation: string;
  via: string[];
  counts: { created: number; updated: number; deleted: number; deletionsRecorded: number; failed: number };
  audit?: { missing: number; extra: number; changed: number; same: number };
  failures: { uri: string; message: string; code: string }[];
  warnings: string[];
  complete: boolean;
  inSync?: boolean;
}

function describeSummary(s: SyncSummaryLike): string {
  const c = s.counts;
  if (s.audit !== undefined)
    return `audit: ${s.audit.missing} missing, ${s.audit.extra} extra, ${s.audit.changed} changed, ${s.audit.same} same`;
  const parts = [
    `${s.operation} via ${s.via.join('+') || '-'}: ${c.created} created, ${c.updated} updated, ${c.deleted} deleted`,
  ];
  if (c.deletionsRecorded > 0) parts.push(`${c.deletionsRecorded} deletions recorded`);
  if (c.failed > 0) parts.push(`${c.failed} failed (${s.failures[0]?.message.slice(0, 120) ?? ''})`);
  if (s.warnings.length > 0) parts.push(`warnings: ${s.warnings.slice(0, 2).join(' / ').slice(0, 200)}`);
  return parts.join('; ');
}

/** The changes made to a collection between a baseline and an incremental run (9 of them). */
async function mutate(dir: string): Promise<void> {
  await rm(join(dir, 'docs', 'file-0.txt'));
  await rm(join(dir, 'data', 'sub', 'file-1.txt'));
  await rm(join(dir, 'names', 'a,b.txt'));
  await appendFile(join(dir, 'file-2.txt'), 'updated\n');
  await appendFile(join(dir, 'docs', 'file-3.txt'), 'updated\n');
  await appendFile(join(dir, 'names', 'k=v.txt'), 'updated\n');
  await writeFile(join(dir, 'new-1.txt'), 'created 1\n');
  await writeFile(join(dir, 'names', 'new+1.txt'), 'created +\n');
  await writeFile(join(dir, 'docs', 'new-2.txt'), 'created 2\n');
}

async function fetchDoc(
  url: string,
): Promise<{ kind: string; entries: Entry[]; links: { rel: string; href: string }[] }> {
  const res = await fetch(url);
  if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`);
  const doc = await readDocument([new Uint8Array(await res.arrayBuffer())]);
  return { kind: doc.kind, entries: doc.entries, links: doc.links };
}

/** Every ResourceSync document reachable from a Source Description, with its kind (ours). */
async function crawl(start: string): Promise<{ url: string; kind: string; entries: number }[]> {
  const seen = new Set<string>();
  const out: { url: string; kind: string; entries: number }[] = [];
  const queue = [start];
  while (queue.length > 0) {
    const url = queue.shift() as string;
    if (seen.has(url) || !/^https?:/.test(url)) continue;
    seen.add(url);
    const doc = await fetchDoc(url);
    out.push({ url, kind: doc.kind, entries: doc.entries.length });
    for (const e of doc.entries) {
      if (doc.kind === 'resource-list' || doc.kind === 'change-list' || doc.kind.endsWith('manifest')) break;
      if (doc.kind === 'resource-dump' || doc.kind === 'change-dump') {
        for (const l of e.links) if (l.rel === 'contents') queue.push(l.href);
        continue;
      }
      if (doc.kind === 'capability-list' && /notification/.test(e.md?.capability ?? '')) continue;
      queue.push(e.loc);
    }
  }
  return out;
}

/** Our document kind -> the reference implementation's class name for it. */
const RESYNC_KIND: Record<string, string> = {
  'source-description': 'description',
  'capability-list': 'capabilitylist',
  'resource-list': 'resourcelist',
  'resource-list-index': 'resourcelist',
  'resource-dump': 'resourcedump',
  'resource-dump-manifest': 'resourcedump-manifest',
  'change-list': 'changelist',
  'change-list-index': 'changelist',
  'change-dump': 'changedump',
  'change-dump-manifest': 'changedump-manifest',
};

async function resyncReadsAll(group: string, what: string, start: string): Promise<void> {
  const docs = await crawl(start);
  const input = docs
    .filter((d) => RESYNC_KIND[d.kind] !== undefined)
    .map((d) => JSON.stringify({ url: d.url, kind: RESYNC_KIND[d.kind] }))
    .join('\n');
  const r = await pythonHelper('resync_parse.py', [], input);
  const results = r.stdout
    .trim()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { url: string; ok: boolean; entries?: number; error?: string });
  const byKind = new Map<string, { n: number; ok: number; countOk: number; error?: string }>();
  for (const d of docs) {
    const res = results.find((x) => x.url === d.url);
    if (res === undefined) continue;
    const k = byKind.get(d.kind) ?? { n: 0, ok: 0, countOk: 0 };
    k.n++;
    if (res.ok) {
      k.ok++;
      // An index is read with its parts (Resource List) or not at all: compare entry counts of single documents.
      if (d.kind.endsWith('-index') || res.entries === d.entries) k.countOk++;
      else k.error ??= `${d.url}: resync counted ${res.entries} entries, we wrote ${d.entries}`;
    } else k.error ??= `${d.url.replace(/^https?:\/\/[^/]+/, '')}: ${res.error ?? ''}`;
    byKind.set(d.kind, k);
  }
  for (const [kind, k] of byKind) {
    const pass = k.ok === k.n && k.countOk === k.n;
    const v: Verdict = {
      group,
      scenario: `resync reads our ${kind} (${what})`,
      expected: `${k.n}/${k.n} read, same entry counts`,
      got: `${k.ok}/${k.n} read${k.error === undefined ? '' : `; ${k.error.slice(0, 220)}`}`,
      pass,
    };
    row(
      !pass && kind === 'change-list-index'
        ? {
            ...v,
            note: 'resync has no Change List Index support (ChangeList.read takes <sitemap> entries for changes); source-server is making the Capability List point at a plain Change List until the first rotation',
          }
        : v,
    );
  }
}

/** The Change List URL a Capability List names (ours: the first set's). */
async function changeListOf(capabilityList: string): Promise<string> {
  const doc = await fetchDoc(capabilityList);
  const e = doc.entries.find((x) => x.md?.capability === 'changelist');
  if (e === undefined) throw new Error(`${capabilityList} names no Change List`);
  return e.loc;
}

async function firstCapabilityList(sd: string): Promise<string> {
  const doc = await fetchDoc(sd);
  const first = doc.entries[0];
  if (first === undefined) throw new Error(`${sd} lists no Capability List`);
  return first.loc;
}

/** Waits until our Source's change documents list at least `n` changes (counting every list). */
async function waitForChanges(changeList: string, n: number, timeoutMs = 30_000): Promise<number> {
  const end = Date.now() + timeoutMs;
  let count = 0;
  while (Date.now() < end) {
    try {
      const doc = await fetchDoc(changeList);
      count = 0;
      if (doc.kind === 'change-list-index')
        for (const e of doc.entries) count += (await fetchDoc(e.loc)).entries.length;
      else count = doc.entries.length;
      if (count >= n) return count;
    } catch {
      // not yet
    }
    await sleep(300);
  }
  return count;
}

/** Datetimes of the changes to `uris` in our Change List(s). */
async function changeDatetimes(changeList: string, uris: readonly string[]): Promise<string[]> {
  const doc = await fetchDoc(changeList);
  const lists = doc.kind === 'change-list-index' ? doc.entries.map((e) => e.loc) : [changeList];
  const out: string[] = [];
  for (const l of lists)
    for (const e of (await fetchDoc(l)).entries) if (uris.includes(e.loc)) out.push(e.md?.datetime ?? '(none)');
  return out;
}

const names = (tree: Map<string, string>): string[] => [...tree.keys()].filter((k) => k.startsWith('names/'));

// ---------------------------------------------------------------------------------------------------------
// S: resync-sync against our serve

async function groupServe(work: string): Promise<void> {
  const G = 'S';
  const coll = join(work, 's-coll');
  await makeCollection(coll);
  const serve = await startServe(coll, join(work, 's-state'));
  try {
    const base = serve.url.replace(/\/$/, '');
    const cwd = join(work, 's-resync');
    await mkdir(cwd, { recursive: true });
    const copy = join(cwd, 'copy');
    const b = await resync('resync-sync', ['--baseline', '--delete', `${base}/`, copy], cwd);
    const d1 = diffTrees(treeOf(coll), treeOf(copy, { decode: true }));
    row({
      group: G,
      scenario: 'resync-sync --baseline from our serve',
      expected: 'SYNCED; copy = collection (names decoded)',
      got: `${resyncStatus(b)}; ${describeDiff(d1)}`,
      pass: b.code === 0 && isEqual(d1),
    });
    const raw = names(treeOf(copy));
    const overEncoded = SUB_DELIM_NAMES.filter((n) => !raw.includes(`names/${n}`));
    row({
      group: G,
      scenario: 'file names of + @ $ & = , ; in resync’s copy (it maps loc paths to names without decoding)',
      expected: 'the collection’s names (our locs keep sub-delims and @ unescaped, RFC 3986 §3.3)',
      got:
        overEncoded.length === 0
          ? 'same names'
          : `${overEncoded.length} differ: ${raw.filter((n) => n.includes('%') && !n.includes('%20')).join(', ')}`,
      pass: overEncoded.length === 0,
      ...(overEncoded.length === 0
        ? {}
        : { note: 'our Source over-encodes them; dest-paths is fixing encodePath with the Destination’s mapping' }),
    });

    const a0 = await resync('resync-sync', ['--audit', `${base}/`, copy], cwd);
    row({
      group: G,
      scenario: 'resync-sync --audit right after its baseline',
      expected: 'IN SYNC',
      got: resyncStatus(a0),
      pass: /Status:\s+IN SYNC/.test(a0.out),
    });
    const cap = await firstCapabilityList(`${base}/.well-known/resourcesync`);
    const changeList = await changeListOf(cap);
    await mutate(coll);
    const seen = await waitForChanges(changeList, 9);
    await sleep(1500); // the Resource List is regenerated once changes settle (1 s)
    const cwdB = join(work, 's-resync-b');
    await cp(cwd, cwdB, { recursive: true, preserveTimestamps: true }); // resync compares mtimes
    const copyB = join(cwdB, 'copy');
    const after = treeOf(coll);

    const i1 = await resync('resync-sync', ['--incremental', '--delete', `${base}/`, copy], cwd);
    const d2 = diffTrees(after, treeOf(copy, { decode: true }));
    row({
      group: G,
      scenario: 'resync-sync --incremental (no --changelist-uri)',
      expected: 'the 9 changes applied; copy = collection',
      got: `${resyncStatus(i1)}; ${describeDiff(d2)} (Source listed ${seen} changes)`,
      pass: i1.code === 0 && isEqual(d2),
      ...(i1.code === 0 && isEqual(d2)
        ? {}
        : {
            note: 'resync reads <mapping>/changelist.xml, a name the standard does not define; our Change List is where the Capability List says (/resourcesync/<set>/changelist.xml)',
          }),
    });

    const i2 = await resync(
      'resync-sync',
      ['--incremental', '--delete', '--changelist-uri', changeList, `${base}/`, copyB],
      cwdB,
    );
    const d3 = diffTrees(after, treeOf(copyB, { decode: true }));
    const incOk = i2.code === 0 && isEqual(d3);
    row({
      group: G,
      scenario: `resync-sync --incremental --changelist-uri <the Capability List's Change List>`,
      expected: 'the 9 changes applied; copy = collection',
      got: `${resyncStatus(i2)}; ${describeDiff(d3)}`,
      pass: incOk,
      ...(incOk
        ? {}
        : {
            note: 'our changelist.xml is a Change List Index, which resync cannot read; source-server’s plain Change List (until the first rotation) is pending',
          }),
    });

    const a = await resync('resync-sync', ['--audit', `${base}/`, copyB], cwdB);
    const inSync = /Status:\s+IN SYNC/.test(a.out);
    row({
      group: G,
      scenario: 'resync-sync --audit after the incremental run',
      expected: 'IN SYNC',
      got: resyncStatus(a),
      pass: inSync,
      ...(inSync || incOk ? {} : { note: 'follows from the failed incremental run above' }),
    });

    // Several creations recorded at once (one scan): do they share a datetime, and does resync apply them all?
    const burst = Array.from({ length: 6 }, (_, i) => `burst/b${i}.txt`);
    await Promise.all(
      burst.map(async (p) => {
        await mkdir(join(coll, 'burst'), { recursive: true });
        await writeFile(join(coll, p), `burst ${p}\n`);
      }),
    );
    await waitForChanges(changeList, seen + burst.length);
    await sleep(1500);
    const dts = await changeDatetimes(
      changeList,
      burst.map((p) => `${base}/${p}`),
    );
    const distinct = new Set(dts).size;
    const i3 = await resync(
      'resync-sync',
      ['--incremental', '--delete', '--changelist-uri', changeList, `${base}/`, copyB],
      cwdB,
    );
    const present = burst.filter((p) => existsSync(join(copyB, p))).length;
    row({
      group: G,
      scenario: '6 files created at once: datetimes, and resync-sync --incremental --changelist-uri',
      expected: '6 distinct increasing datetimes; 6 created',
      got: `${distinct} distinct of ${dts.length} datetimes; ${present}/6 in resync’s copy; ${resyncStatus(i3)}`,
      pass: distinct === burst.length && present === burst.length,
      ...(distinct === burst.length
        ? {}
        : { note: 'distinct datetimes per change: source-api’s pending store change' }),
    });

    if (only === undefined || only.has('V')) await resyncReadsAll('V', 'serve', `${base}/.well-known/resourcesync`);
  } finally {
    await serve.stop();
  }
}

// ---------------------------------------------------------------------------------------------------------
// P: resync-sync against our publish output on a static server

async function groupPublish(work: string): Promise<void> {
  const G = 'P';
  const coll = join(work, 'p-coll');
  const site = join(work, 'p-site');
  await makeCollection(coll);
  const server = await startStatic({ '/': site });
  try {
    const base = server.url;
    const publish = async (): Promise<{ code: number | null; copied?: number; text: string }> => {
      const r = await ours([
        'publish',
        coll,
        '--out',
        site,
        '--base-url',
        `${base}/`,
        '--state',
        join(work, 'p-state'),
        '--copy-resources',
        '--json',
      ]);
      try {
        const j = JSON.parse(r.stdout.trim().split('\n').at(-1) ?? '') as { copied: number };
        return { code: r.code, copied: j.copied, text: `exit ${r.code}, ${j.copied} copied` };
      } catch {
        return { code: r.code, text: `exit ${r.code}: ${r.stderr.trim().slice(0, 200)}` };
      }
    };
    const first = await publish();
    const second = await publish();
    row({
      group: G,
      scenario: 'publish --copy-resources again without changes',
      expected: '0 copied',
      got: `first run: ${first.text}; second: ${second.text}`,
      pass: second.code === 0 && second.copied === 0,
    });
    const cwd = join(work, 'p-resync');
    await mkdir(cwd, { recursive: true });
    const copy = join(cwd, 'copy');
    const b = await resync('resync-sync', ['--baseline', '--delete', `${base}/`, copy], cwd);
    const d1 = diffTrees(treeOf(coll), treeOf(copy, { decode: true }));
    row({
      group: G,
      scenario: 'resync-sync --baseline from our publish output',
      expected: 'SYNCED; copy = collection',
      got: `${resyncStatus(b)}; ${describeDiff(d1)}`,
      pass: b.code === 0 && isEqual(d1),
    });

    const a0 = await resync('resync-sync', ['--audit', `${base}/`, copy], cwd);
    row({
      group: G,
      scenario: 'resync-sync --audit right after its baseline',
      expected: 'IN SYNC',
      got: resyncStatus(a0),
      pass: /Status:\s+IN SYNC/.test(a0.out),
    });
    await mutate(coll);
    const third = await publish();
    row({
      group: G,
      scenario: 'publish --copy-resources after 9 changes (6 created or updated)',
      expected: '6 copied',
      got: third.text,
      pass: third.copied === 6,
    });
    const cwdB = join(work, 'p-resync-b');
    await cp(cwd, cwdB, { recursive: true, preserveTimestamps: true }); // resync compares mtimes
    const copyB = join(cwdB, 'copy');
    const after = treeOf(coll);
    const i1 = await resync('resync-sync', ['--incremental', '--delete', `${base}/`, copy], cwd);
    const d2 = diffTrees(after, treeOf(copy, { decode: true }));
    row({
      group: G,
      scenario: 'resync-sync --incremental (no --changelist-uri)',
      expected: 'the 9 changes applied; copy = collection',
      got: `${resyncStatus(i1)}; ${describeDiff(d2)}`,
      pass: i1.code === 0 && isEqual(d2),
      ...(i1.code === 0 && isEqual(d2)
        ? {}
        : { note: 'resync reads <mapping>/changelist.xml; ours is where the Capability List says' }),
    });
    const cap = await firstCapabilityList(`${base}/.well-known/resourcesync`);
    const changeList = await changeListOf(cap);
    const i2 = await resync(
      'resync-sync',
      ['--incremental', '--delete', '--changelist-uri', changeList, `${base}/`, copyB],
      cwdB,
    );
    const d3 = diffTrees(after, treeOf(copyB, { decode: true }));
    const incOk = i2.code === 0 && isEqual(d3);
    row({
      group: G,
      scenario: 'resync-sync --incremental --changelist-uri <the Capability List’s Change List>',
      expected: 'the 9 changes applied; copy = collection',
      got: `${resyncStatus(i2)}; ${describeDiff(d3)}`,
      pass: incOk,
      ...(incOk
        ? {}
        : { note: 'a Change List Index, which resync cannot read (source-server’s plain Change List pending)' }),
    });
    const a = await resync('resync-sync', ['--audit', `${base}/`, copyB], cwdB);
    row({
      group: G,
      scenario: 'resync-sync --audit after the incremental run',
      expected: 'IN SYNC',
      got: resyncStatus(a),
      pass: /Status:\s+IN SYNC/.test(a.out),
      ...(/Status:\s+IN SYNC/.test(a.out) || incOk ? {} : { note: 'follows from the failed incremental run above' }),
    });
    if (only === undefined || only.has('V')) await resyncReadsAll('V', 'publish', `${base}/.well-known/resourcesync`);
  } finally {
    await server.stop();
  }
}

// ---------------------------------------------------------------------------------------------------------
// D: our sync against resync-simulator

const SIMULATOR_EVENTS = 40;

function simulatorConfig(): string {
  return `source:
    name: interop simulator
    number_of_resources: 60
    change_delay: 0.25
    event_types: [create, update, delete]
    average_payload: 300
    max_events: ${SIMULATOR_EVENTS}
    stats_interval: 1000
resource_list_builder:
    class: DynamicResourceListBuilder
    uri_path: resourcelist.xml
changememory:
    class: DynamicChangeList
    uri_path: changelist.xml
    max_changes: 1000
`;
}

/** Fetches every resource the simulator's Resource List names and compares it with the copy (path layout). */
async function compareWithSimulator(url: string, copy: string): Promise<{ ok: boolean; text: string }> {
  const rl = await fetchDoc(`${url}/resourcelist.xml`);
  const expected = new Map<string, string>();
  for (const e of rl.entries) {
    const res = await fetch(e.loc);
    if (!res.ok) continue; // deleted since the list was made
    const path = new URL(e.loc).pathname.slice(1);
    expected.set(
      path,
      createHash('sha256')
        .update(new Uint8Array(await res.arrayBuffer()))
        .digest('hex'),
    );
  }
  const d = diffTrees(expected, treeOf(copy));
  return { ok: isEqual(d), text: describeDiff(d) };
}

async function groupSimulator(work: string, spec: '1.0' | '1.1'): Promise<void> {
  const G = 'D';
  const dir = join(work, `d-${spec}`);
  await mkdir(dir, { recursive: true });
  const sim = await startSimulator(dir, simulatorConfig(), spec);
  const simulatorStart = Date.now();
  try {
    const copy = join(dir, 'copy');
    const common = [`${sim.url}/`, copy, '--layout', 'path', '--durability', 'none', '--delete'];
    // The baseline runs while the simulator changes its resources (one change every 0.1 s).
    const b = await ourSync(common);
    const bOk = b.code === 3 && b.summary?.complete === true && b.summary.counts.failed === 0;
    row({
      group: G,
      scenario: `sync (baseline) from resync-simulator, spec ${spec}, while it changes`,
      expected: 'exit 3, complete, 0 failed',
      got: b.text,
      pass: bOk,
      ...(bOk
        ? {}
        : {
            note: 'a resource changed or deleted after the list’s at fails (length check, or 404); the run stays incomplete and the next one resumes it. The baseline could keep the newer content (or record the 404) and let the Change List since at confirm it: dest-core’s baseline',
          }),
    });
    if (!bOk) {
      // Resumed until complete (a resource may change again meanwhile).
      let r = b;
      let runs = 1;
      while (runs < 4 && !(r.summary?.complete === true && r.summary.counts.failed === 0)) {
        r = await ourSync(common);
        runs++;
      }
      row({
        group: G,
        scenario: `the interrupted baseline resumed, spec ${spec}`,
        expected: 'complete within 3 more runs',
        got: `${runs} runs; last: ${r.text}`,
        pass: r.summary?.complete === true && r.summary.counts.failed === 0,
      });
    }
    // The simulator goes on changing; wait for its last event, then catch up from its Change List.
    await sleep(Math.max(0, simulatorStart + SIMULATOR_EVENTS * 250 + 2500 - Date.now()));
    const i = await ourSync(common);
    const c = i.summary?.counts;
    row({
      group: G,
      scenario: `sync (incremental) from resync-simulator, spec ${spec}${spec === '1.0' ? ' (changes without datetime)' : ''}`,
      expected: 'exit 3, an incremental run, complete, 0 failed',
      got: i.text,
      pass:
        i.code === 3 &&
        i.summary?.operation === 'incremental' &&
        i.summary.complete &&
        c !== undefined &&
        c.failed === 0 &&
        c.created + c.updated + c.deleted > 0,
    });
    const a = await ourSync([...common, '--audit', '--checksum']);
    row({
      group: G,
      scenario: `sync --audit --checksum against resync-simulator, spec ${spec}`,
      expected: 'exit 0, in sync',
      got: a.text,
      pass: a.code === 0 && a.summary?.inSync === true,
    });
    const cmp = await compareWithSimulator(sim.url, copy);
    row({
      group: G,
      scenario: `copy = the simulator's resources fetched again, spec ${spec}`,
      expected: 'same bytes, no missing or extra',
      got: cmp.text,
      pass: cmp.ok,
    });
  } finally {
    await sim.stop();
  }
}

// ---------------------------------------------------------------------------------------------------------
// B: our sync against resync-build output

async function groupBuild(work: string): Promise<void> {
  const G = 'B';
  const site = join(work, 'b-site');
  const res = join(site, 'res');
  await makeCollection(res);
  const server = await startStatic({ '/': site });
  const base = server.url;
  const build = (argv: readonly string[]) => resync('resync-build', [...argv, `${base}=${site}`], site);
  try {
    const rl = await build([
      '--write-resourcelist',
      '--max-sitemap-entries',
      '20',
      '--paths',
      res,
      '--outfile',
      join(site, 'resourcelist.xml'),
    ]);
    const dump = await build(['--write-resourcedump', '--paths', res, '--outfile', join(site, 'dump.zip')]);
    const cap = await build([
      '--write-capabilitylist',
      `resourcelist=${base}/resourcelist.xml,resourcedump=${base}/resourcedump.xml,changelist=${base}/changelist.xml`,
      '--outfile',
      join(site, 'capabilitylist.xml'),
    ]);
    await mkdir(join(site, '.well-known'), { recursive: true });
    const sd = await build([
      '--write-sourcedescription',
      `${base}/capabilitylist.xml`,
      '--outfile',
      join(site, '.well-known', 'resourcesync'),
    ]);
    for (const [what, r] of [
      ['Resource List', rl],
      ['Resource Dump', dump],
      ['Capability List', cap],
      ['Source Description', sd],
    ] as const)
      if (r.code !== 0) throw new Error(`resync-build ${what}: ${r.out.slice(-300)}`);
    // resync-build writes the dump's packages and manifests (dump.zip00000.zip + .xml) but no Resource Dump
    // listing them: we write it, in its style.
    const at = /at="([^"]+)"/.exec(readFileSync(join(site, 'resourcelist.xml'), 'utf8'))?.[1] ?? '';
    const packages = ['dump.zip00000.zip', 'dump.zip00001.zip'].filter((p) => existsSync(join(site, p)));
    await writeFile(
      join(site, 'resourcedump.xml'),
      `<?xml version='1.0' encoding='UTF-8'?>\n<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">\n<rs:md at="${at}" capability="resourcedump" />\n${packages
        .map(
          (p) =>
            `<url><loc>${base}/${p}</loc><rs:md length="${readFileSync(join(site, p)).length}" type="application/zip" /><rs:ln href="${base}/${p.replace(/\.zip$/, '.xml')}" rel="contents" type="application/xml" /></url>`,
        )
        .join('\n')}\n</urlset>`,
    );
    const before = treeOf(res);
    const url = `${base}/.well-known/resourcesync`;
    const copyL = join(work, 'b-copy-list');
    const copyD = join(work, 'b-copy-dump');
    const opts = ['--layout', 'path', '--durability', 'none'];
    const local = (copy: string) => treeOf(join(copy, 'res'), { decode: true });

    const bl = await ourSync([url, copyL, '--no-dumps', ...opts]);
    const dl = diffTrees(before, local(copyL));
    row({
      group: G,
      scenario: 'sync (baseline) from resync-build’s Resource List Index (20 per part)',
      expected: 'exit 3; copy = collection',
      got: `${bl.text}; ${describeDiff(dl)}`,
      pass: bl.code === 3 && isEqual(dl),
    });
    const bd = await ourSync([url, copyD, ...opts]);
    const dd = diffTrees(before, local(copyD));
    row({
      group: G,
      scenario: 'sync (baseline) from resync-build’s Resource Dump',
      expected: 'exit 3; copy = collection (from the dump, or the list after a clear warning)',
      got: `${bd.text}; ${describeDiff(dd)}`,
      pass: bd.code === 3 && isEqual(dd),
    });
    const ba = await ourSync([url, copyL, '--audit', '--checksum', ...opts]);
    row({
      group: G,
      scenario: 'sync --audit --checksum right after the baseline (lists give length + lastmod)',
      expected: 'exit 0, in sync',
      got: ba.text,
      pass: ba.code === 0 && ba.summary?.inSync === true,
    });

    await sleep(1100); // lastmods of the changes differ from the baseline's
    await mutate(res);
    const cl = await build([
      '--write-changelist',
      '--reference',
      join(site, 'resourcelist.xml'),
      '--paths',
      res,
      '--outfile',
      join(site, 'changelist.xml'),
    ]);
    if (cl.code !== 0) throw new Error(`resync-build Change List: ${cl.out.slice(-300)}`);
    // Our validator on what resync-build wrote: errors only where resync-build breaks a "must" of the standard.
    const docs = readdirSync(site)
      .filter((f) => f.endsWith('.xml'))
      .map((f) => join(site, f))
      .concat(join(site, '.well-known', 'resourcesync'));
    const v = await ours(['validate', '--json', ...docs]);
    const errors = new Map<string, Set<string>>();
    for (const line of v.stdout.split('\n').filter((l) => l.startsWith('{'))) {
      const r = JSON.parse(line) as { source: string; issues?: { code: string; severity: string }[] };
      for (const i of r.issues ?? [])
        if (i.severity === 'error') {
          const name = r.source.slice(site.length + 1);
          errors.set(i.code, (errors.get(i.code) ?? new Set()).add(name));
        }
    }
    const KNOWN = new Set(['up-missing', 'from-missing', 'at-missing', 'uri-invalid-chars']);
    const unknown = [...errors.keys()].filter((c) => !KNOWN.has(c));
    row({
      group: G,
      scenario: `our validate on resync-build’s ${docs.length} documents`,
      expected:
        'errors only for resync-build’s own deviations: no up link (without --capabilitylist-link), no from on a Change List, no at on a dump manifest, a raw space in <loc>',
      got:
        [...errors]
          .map(([c, files]) => `${c}: ${[...files].slice(0, 3).join(', ')}${files.size > 3 ? ', ...' : ''}`)
          .join('; ') || 'no errors',
      pass: unknown.length === 0,
    });

    const after = treeOf(res);
    const inc = await ourSync([url, copyL, '--delete', ...opts]);
    const di = diffTrees(after, local(copyL));
    const c = inc.summary?.counts;
    row({
      group: G,
      scenario:
        'sync --delete (incremental) from resync-build’s Change List (no datetime; deletions with old lastmods)',
      expected: 'exit 3; 3 created, 3 updated, 3 deleted; copy = collection',
      got: `${inc.text}; ${describeDiff(di)}`,
      pass: inc.code === 3 && c?.created === 3 && c.updated === 3 && c.deleted === 3 && isEqual(di),
    });
    const again = await ourSync([url, copyL, '--delete', ...opts]);
    row({
      group: G,
      scenario: 'sync again (the same open Change List)',
      expected: 'exit 0, nothing fetched or changed',
      got: again.text,
      pass: again.code === 0,
    });
    const au = await ourSync([url, copyL, '--audit', '--checksum', ...opts]);
    row({
      group: G,
      scenario: 'sync --audit --checksum (old Resource List + the Change List since)',
      expected: 'exit 0, in sync',
      got: au.text,
      pass: au.code === 0 && au.summary?.inSync === true,
    });
    const rl2 = await build([
      '--write-resourcelist',
      '--max-sitemap-entries',
      '20',
      '--paths',
      res,
      '--outfile',
      join(site, 'resourcelist.xml'),
    ]);
    const au2 = await ourSync([url, copyL, '--audit', ...opts]);
    row({
      group: G,
      scenario: 'sync --audit against resync-build’s new Resource List Index',
      expected: 'exit 0, in sync',
      got: rl2.code === 0 ? au2.text : `resync-build failed: ${rl2.out.slice(-200)}`,
      pass: au2.code === 0 && au2.summary?.inSync === true,
    });
  } finally {
    await server.stop();
  }
}

// ---------------------------------------------------------------------------------------------------------

async function main(): Promise<number> {
  for (const f of [join(PEERS.resync, 'resync-sync'), join(PEERS.simulator, 'resync-simulator'), PEERS.python])
    if (!existsSync(f)) {
      process.stderr.write(`interop: ${f} is missing (see the header of bench/interop/run.ts)\n`);
      return 2;
    }
  const versions = await run(PEERS.python, [join(PEERS.resync, 'resync-sync'), '--help'], {
    env: { ...process.env, PYTHONPATH: PEERS.resync },
  });
  const resyncVersion = /\(v([0-9.]+)\)/.exec(versions.out)?.[1] ?? 'unknown';
  const work = await mkdtemp(join(tmpdir(), 'rs-interop-'));
  const started = Date.now();
  const want = (g: string): boolean => only === undefined || only.has(g);
  try {
    const groups: [string, () => Promise<void>][] = [
      ['S', () => groupServe(work)],
      ['P', () => groupPublish(work)],
      ['D', () => groupSimulator(work, '1.1')],
      ['D', () => groupSimulator(work, '1.0')],
      ['B', () => groupBuild(work)],
    ];
    for (const [g, f] of groups) {
      if (!want(g) && !((g === 'S' || g === 'P') && want('V'))) continue;
      try {
        await f();
      } catch (e) {
        row({
          group: g,
          scenario: 'harness',
          expected: 'the group runs',
          got: `stopped: ${e instanceof Error ? e.message : String(e)}`.slice(0, 300),
          pass: false,
        });
      }
    }
  } finally {
    if (keep) process.stderr.write(`interop: work files kept in ${work}\n`);
    else await rm(work, { recursive: true, force: true });
  }
  const commit = (await run('git', ['rev-parse', '--short', 'HEAD'])).stdout.trim();
  const failed = rows.filter((r) => !r.pass).length;
  if (json) process.stdout.write(`${JSON.stringify({ commit, resync: resyncVersion, rows }, null, 2)}\n`);
  else {
    process.stdout.write(
      `\ninterop verdicts: commit ${commit}, resync ${resyncVersion}, ${new Date().toISOString()}, ${Math.round((Date.now() - started) / 1000)} s\n\n`,
    );
    process.stdout.write(`${formatTable(rows)}\n\n${rows.length - failed} pass, ${failed} fail\n`);
  }
  return failed === 0 ? 0 : 1;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    process.stderr.write(`interop: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exitCode = 2;
  },
);
