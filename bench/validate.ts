/**
 * Cost of validation: reading a 50,000-entry Resource List with `openDocument` alone (baseline) against
 * reading and validating it with `validateStream`, in the same run; and the validator alone over entries held
 * in memory (Resource List and Change List), in entries per second.
 *
 * Run: `node --import tsx bench/validate.ts [--runs 5] [--entries 50000]` (generates the data when missing).
 */
import type { Entry } from '../src/core/model.js';
import { createHeader } from '../src/core/model.js';
import { createValidator, validateStream } from '../src/core/validate.js';
import { fileSource, openDocument, readDocument } from '../src/xml/index.js';
import { ensureResourceList } from './gen-resourcelist.js';

function arg(name: string, def: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : def;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? Number.NaN;
}

async function timeMs(fn: () => Promise<unknown> | unknown, runs: number): Promise<number> {
  await fn(); // warm-up
  const times: number[] = [];
  for (let r = 0; r < runs; r++) {
    const t0 = process.hrtime.bigint();
    await fn();
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  return median(times);
}

async function main(): Promise<void> {
  const runs = arg('runs', 5);
  const entries = arg('entries', 50_000);
  const path = ensureResourceList(entries);
  console.log(`Resource List ${path}, ${entries} entries, median of ${runs} runs`);

  const readOnly = await timeMs(async () => {
    const doc = await openDocument(fileSource(path));
    let n = 0;
    for await (const _ of doc.entries) n++;
    if (n !== entries) throw new Error(`read ${n}`);
  }, runs);
  const readValidate = await timeMs(async () => {
    const r = await validateStream(await openDocument(fileSource(path)));
    if (r.entries !== entries || !r.valid) throw new Error(`validated ${r.entries}, valid ${r.valid}`);
  }, runs);
  console.log(`read only:          ${readOnly.toFixed(0)} ms`);
  console.log(
    `read + validate:    ${readValidate.toFixed(0)} ms  (x${(readValidate / readOnly).toFixed(2)} of read only)`,
  );

  const doc = await readDocument(fileSource(path));
  const rl = await timeMs(() => {
    const v = createValidator(doc);
    for (const e of doc.entries) v.entry(e);
    return v.finish();
  }, runs);
  console.log(`validator alone, Resource List: ${rl.toFixed(0)} ms = ${((entries / rl) * 1000).toFixed(0)} entries/s`);

  const t0 = Date.parse('2013-01-03T00:00:00Z');
  const changes: Entry[] = doc.entries.map((e, i) => ({
    ...e,
    md: { ...e.md, change: i % 3 === 0 ? 'created' : 'updated', datetime: new Date(t0 + i * 1000).toISOString() },
  }));
  const header = createHeader('change-list', { from: '2013-01-03T00:00:00Z' }, doc.links);
  const cl = await timeMs(() => {
    const v = createValidator(header);
    for (const e of changes) v.entry(e);
    const r = v.finish();
    if (!r.valid) throw new Error(JSON.stringify(r.issues.slice(0, 2)));
  }, runs);
  console.log(`validator alone, Change List:   ${cl.toFixed(0)} ms = ${((entries / cl) * 1000).toFixed(0)} entries/s`);
}

await main();
