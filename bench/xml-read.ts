/**
 * Read speed of `openDocument` over a file, against saxes loops (namespace-aware and not) on the same file in
 * the same run, and peak RSS of a process that streams the 500k-entry list.
 *
 * Run: `node --import tsx bench/xml-read.ts [--runs 5] [--entries 50000] [--no-rss]` (generates the data when
 * missing). Prints MB/s (median of the runs) per reader, wall and CPU time (CPU time is steadier when other
 * processes share the cores), and the ratio to saxes.
 *
 * What was tried (CPU time, 500k-entry file, 2-core machine under load):
 * - own scanner, TextDecoder(fatal) decoding: ~75 MB/s; parser alone ~120 MB/s.
 * - native decoding (`isAscii` -> latin1, else `isUtf8` + utf8): ASCII input becomes a one-byte string;
 *   and no copy of the whole chunk when a token is cut at its start: parser alone ~170 MB/s.
 * - element-name slot cache compared in place, interned attribute names, one LF search per tag: a few %.
 * - entries handed out by a hand-written async iterator instead of an `async function*`: slower
 *   (105 vs 120 MB/s), dropped. Chunk sizes: 64-256 KiB best, 1 MiB worse.
 */
import { spawnSync } from 'node:child_process';
import { createReadStream, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { SaxesParser } from 'saxes';
import { fileSource, openDocument } from '../src/xml/index.js';
import { ensureResourceList } from './gen-resourcelist.js';

function arg(name: string, def: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : def;
}

async function readOurs(path: string): Promise<number> {
  const doc = await openDocument(fileSource(path), { url: path });
  let n = 0;
  let len = 0;
  for await (const e of doc.entries) {
    n++;
    len += e.loc.length;
  }
  if (len === 0) throw new Error('no entries');
  return n;
}

async function readSaxes(path: string, xmlns: boolean): Promise<number> {
  const parser = new SaxesParser({ xmlns });
  let n = 0;
  parser.on('opentag', (t) => {
    if ((xmlns ? t.local : t.name) === 'url') n++;
  });
  parser.on('text', () => undefined);
  for await (const chunk of createReadStream(path, { highWaterMark: 256 * 1024, encoding: 'utf8' })) {
    parser.write(chunk as string);
  }
  parser.close();
  return n;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

/** Median wall time and median CPU time (user + system: steadier when other processes share the cores). */
async function time(fn: () => Promise<number>, runs: number): Promise<{ entries: number; ms: number; cpu: number }> {
  const times: number[] = [];
  const cpus: number[] = [];
  let entries = 0;
  for (let r = 0; r < runs; r++) {
    const c0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    entries = await fn();
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
    const c = process.cpuUsage(c0);
    cpus.push((c.user + c.system) / 1000);
  }
  return { entries, ms: median(times), cpu: median(cpus) };
}

async function main(): Promise<void> {
  if (process.argv.includes('--rss-child')) {
    const path = process.argv[process.argv.indexOf('--rss-child') + 1]!;
    const n = await readOurs(path);
    console.log(JSON.stringify({ entries: n, maxRssMB: process.resourceUsage().maxRSS / 1024 }));
    return;
  }
  const runs = arg('runs', 5);
  const entries = arg('entries', 50_000);
  const path = ensureResourceList(entries);
  const size = statSync(path).size;
  const mb = size / 1e6;
  console.log(`file: ${path} (${mb.toFixed(1)} MB, ${entries} entries), median of ${runs} runs`);
  // Warm up once each.
  await readOurs(path);
  await readSaxes(path, true);
  await readSaxes(path, false);
  const ours = await time(() => readOurs(path), runs);
  const sNs = await time(() => readSaxes(path, true), runs);
  const sNoNs = await time(() => readSaxes(path, false), runs);
  const row = (name: string, r: { ms: number; cpu: number; entries: number }): void =>
    console.log(
      `${name.padEnd(22)} ${(mb / (r.ms / 1000)).toFixed(1).padStart(7)} MB/s wall ${r.ms.toFixed(0).padStart(6)} ms` +
        ` | ${(mb / (r.cpu / 1000)).toFixed(1).padStart(7)} MB/s of CPU time | ${r.entries} entries`,
    );
  row('openDocument', ours);
  row('saxes (xmlns: true)', sNs);
  row('saxes (xmlns: false)', sNoNs);
  console.log(
    `speed-up of openDocument over saxes-ns: ${(sNs.ms / ours.ms).toFixed(2)}x wall, ${(sNs.cpu / ours.cpu).toFixed(2)}x CPU; ` +
      `over saxes-no-ns: ${(sNoNs.ms / ours.ms).toFixed(2)}x wall, ${(sNoNs.cpu / ours.cpu).toFixed(2)}x CPU`,
  );
  if (!process.argv.includes('--no-rss')) {
    // Peak RSS of a fresh process streaming each file: flat memory means the same figure for 10x the entries.
    const self = fileURLToPath(import.meta.url);
    for (const n of [50_000, 500_000]) {
      const file = ensureResourceList(n);
      const t0 = Date.now();
      const r = spawnSync(process.execPath, [...process.execArgv, self, '--rss-child', file], { encoding: 'utf8' });
      const out = JSON.parse(r.stdout.trim().split('\n').pop()!) as { entries: number; maxRssMB: number };
      console.log(
        `${String(n).padStart(6)}-entry file (${(statSync(file).size / 1e6).toFixed(1)} MB) in a fresh process: ` +
          `${out.entries} entries, peak RSS ${out.maxRssMB.toFixed(0)} MB, ${(Date.now() - t0) / 1000} s wall incl. startup`,
      );
    }
  }
}

await main();
