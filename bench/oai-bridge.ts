/**
 * The OAI-PMH bridge against Debian's Catmandu OAI-PMH provider (test/fixtures/oai-catmandu/) holding
 * --records records: the first, full harvest, an incremental harvest after --changes records changed, and an
 * incremental harvest with nothing changed. Baseline in the same run: the same lists fetched page by page by a
 * plain client that only reads the bytes (the provider's own speed: what any harvester would wait for).
 *
 *   node --import tsx bench/oai-bridge.ts [--records 10000] [--changes 1000] [--limit 100] [--formats oai_dc] [--runs 3]
 *
 * Prints per run and as medians: seconds and records/s of each harvest, the baseline's seconds, the
 * bridge's time over the baseline's, and the bridge process's CPU time per record of the initial harvest. Needs the provider's Debian packages (see catmanduMissing()).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openOaiBridge } from '../src/source/oai/bridge.js';
import {
  CatmanduDb,
  type CatmanduRecord,
  catmanduDatestamp,
  catmanduMissing,
  startCatmanduProvider,
} from '../test/source/catmandu-provider.js';

const args = process.argv.slice(2);
const opt = (name: string, dflt: string): string => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? (args[i + 1] ?? dflt) : dflt;
};
const records = Number(opt('records', '10000'));
const changes = Number(opt('changes', '1000'));
const limit = Number(opt('limit', '100'));
const runs = Number(opt('runs', '3'));
const formats = opt('formats', 'oai_dc').split(',');
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const missing = catmanduMissing();
if (missing !== undefined) {
  console.error(missing);
  process.exit(2);
}

function record(i: number, ms: number, rev = 0): CatmanduRecord {
  return {
    id: String(i),
    datestamp: catmanduDatestamp(ms),
    sets: [i % 2 === 0 ? 'even' : 'odd'],
    title: `A title of record ${i}${rev > 0 ? ` (revision ${rev})` : ''}: on the synchronization of metadata`,
    creator: `Author ${i % 997}, Ëmile`,
  };
}

/** Reads every page of the lists as a plain harvester would (bytes only); returns seconds. */
async function baseline(url: string): Promise<number> {
  const t0 = performance.now();
  for (const prefix of formats) {
    let q = `verb=ListRecords&metadataPrefix=${prefix}`;
    for (;;) {
      const text = await (await fetch(`${url}?${q}`)).text();
      const m = /<resumptionToken[^>]*>([^<]+)<\/resumptionToken>/.exec(text);
      if (m === null) break;
      q = `verb=ListRecords&resumptionToken=${encodeURIComponent(m[1]!)}`;
    }
  }
  return (performance.now() - t0) / 1000;
}

const work = await mkdtemp(join(tmpdir(), 'rs-bench-oai-'));
const rows: { initial: number; incremental: number; idle: number; base: number; cpu: number }[] = [];
try {
  const db = new CatmanduDb(join(work, 'provider.db'));
  const old = Date.now() - 7 * 86_400_000;
  db.put(Array.from({ length: records }, (_, k) => record(k + 1, old + k * 1000)));
  const provider = await startCatmanduProvider({ db: db.path, limit });
  console.log(
    `provider: Catmandu OAI (Debian), ${records} records, ${limit} per page, formats ${formats.join(', ')}; ` +
      `load ${(await import('node:os'))
        .loadavg()
        .map((x) => x.toFixed(2))
        .join(' ')}`,
  );
  try {
    for (let run = 0; run < runs; run++) {
      const base = await baseline(provider.url);
      const bridge = await openOaiBridge({
        provider: provider.url,
        baseUrl: 'http://127.0.0.1:8080/',
        stateDir: join(work, `state-${run}`),
        metadataPrefixes: formats,
        fsync: false,
        regenerateAfterMs: Number.POSITIVE_INFINITY,
      });
      try {
        let t0 = performance.now();
        const c0 = process.cpuUsage();
        const r1 = await bridge.harvest();
        const initial = (performance.now() - t0) / 1000;
        const c1 = process.cpuUsage(c0);
        // This process's CPU (the bridge: parsing, hashing, store), steadier than wall time on a shared machine.
        const cpu = (c1.user + c1.system) / 1000 / (records * formats.length);
        if (r1.created !== records * formats.length) throw new Error(`initial harvest created ${r1.created}`);
        const now = Date.now();
        db.put(Array.from({ length: changes }, (_, k) => record(((k * 7919) % records) + 1, now, run + 1)));
        t0 = performance.now();
        const r2 = await bridge.harvest();
        const incremental = (performance.now() - t0) / 1000;
        if (r2.updated !== changes * formats.length) throw new Error(`incremental harvest updated ${r2.updated}`);
        t0 = performance.now();
        const r3 = await bridge.harvest();
        const idle = (performance.now() - t0) / 1000;
        if (r3.updated + r3.created + r3.deleted !== 0) throw new Error('an idle harvest recorded changes');
        rows.push({ initial, incremental, idle, base, cpu });
        console.log(
          `run ${run + 1}: initial ${initial.toFixed(2)} s (${((records * formats.length) / initial).toFixed(0)} records/s), ` +
            `incremental ${incremental.toFixed(2)} s for ${changes * formats.length} changed records ` +
            `(${r2.records} read, ${((changes * formats.length) / incremental).toFixed(0)} changes/s), ` +
            `idle ${(idle * 1000).toFixed(0)} ms; baseline (plain fetch of the lists) ${base.toFixed(2)} s; ` +
            `bridge CPU ${cpu.toFixed(3)} ms per record in the initial harvest`,
        );
      } finally {
        await bridge.close();
      }
    }
  } finally {
    await provider.stop();
    db.close();
  }
  const m = (k: keyof (typeof rows)[number]): number => median(rows.map((r) => r[k]));
  console.log(
    `median of ${runs}: initial ${m('initial').toFixed(2)} s = ${((records * formats.length) / m('initial')).toFixed(0)} records/s ` +
      `(baseline ${m('base').toFixed(2)} s = ${((records * formats.length) / m('base')).toFixed(0)} records/s; ` +
      `bridge / baseline ${(m('initial') / m('base')).toFixed(2)}x); incremental ${m('incremental').toFixed(2)} s = ` +
      `${((changes * formats.length) / m('incremental')).toFixed(0)} changes/s; idle harvest ${(m('idle') * 1000).toFixed(0)} ms; ` +
      `bridge CPU ${m('cpu').toFixed(3)} ms per record`,
  );
} finally {
  await rm(work, { recursive: true, force: true });
}
