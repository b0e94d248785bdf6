// Destination benchmarks on loopback: baseline via Resource List and via Resource Dump, incremental of 1,000
// changes, against a static Source in a child process (bench/destination-server.ts), with the file-writing
// floor measured in the same run.
//
//   node --import tsx bench/destination-sync.ts [resources=10000] [runs=3] [static|real]
//
// Directories written by the runs are removed only at the end: this ext4 has no journal, so for ~30 s after a
// mass deletion every new inode in the same block group is allocated after skipping the recently deleted ones
// (`recently_deleted()` in the kernel), which made each run pay for the previous run's clean-up. The Source is
// warmed (one untimed dump baseline: it builds its packages on first request) before anything is timed.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, linkSync, mkdirSync, openSync, readFileSync, renameSync, writeFileSync, writeSync } from 'node:fs';
import { mkdir, mkdtemp, open, rename, rm } from 'node:fs/promises';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { Durability } from '../src/destination/context.js';
import { Destination } from '../src/destination/destination.js';
import { syncFileSystem } from '../src/io/syncfs.js';

const N = Number(process.argv[2] ?? 10_000);
const RUNS = Number(process.argv[3] ?? 3);
/** `static` (documents built in memory) or `real` (our directory Source and server). */
const SOURCE = process.argv[4] === 'real' ? 'real' : 'static';
const SIZE = 2048;
/**
 * `BENCH_ONLY=incremental` (or `list`, `dump`, `floor`) runs only that part, e.g. under `node --cpu-prof`;
 * `BENCH_ARRIVING=ab` times the dump ways with and without applying packages as they arrive (see below).
 */
const ONLY = process.env['BENCH_ONLY'];
const runs = (part: string): boolean => ONLY === undefined || ONLY === part;
const here = dirname(fileURLToPath(import.meta.url));
/** Run from source (tsx) or compiled: the extension of sibling scripts, and the flags a child needs for them. */
const EXT = import.meta.url.endsWith('.ts') ? '.ts' : '.js';
const CHILD_ARGS = EXT === '.ts' ? ['--import', 'tsx'] : [];

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
}

/** Directories to remove when the benchmark ends (see the note at the top). */
const keep: string[] = [];

/** CPU time (user + system) the Source's child process has used so far, in µs (Linux /proc). */
let sourcePid: number | undefined;
function sourceCpu(): number {
  try {
    const fields = readFileSync(`/proc/${sourcePid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
    return (Number(fields[11]) + Number(fields[12])) * 10_000; // clock ticks of 10 ms
  } catch {
    return Number.NaN;
  }
}

async function startServer(): Promise<{ child: ChildProcess; base: string; send: (cmd: object) => Promise<void> }> {
  const child = spawn(
    process.execPath,
    [...CHILD_ARGS, join(here, `destination-server${EXT}`), SOURCE, String(N), String(SIZE)],
    {
      stdio: ['pipe', 'pipe', 'inherit'],
    },
  );
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const first = await lines.next();
  const base = (JSON.parse(String(first.value)) as { base: string }).base;
  const send = async (cmd: object): Promise<void> => {
    child.stdin!.write(`${JSON.stringify(cmd)}\n`);
    await lines.next();
  };
  return { child, base, send };
}

/** ms of the one syncfs after the last {@link writeFloor} with `syncfsAfter` (NaN when unavailable). */
let lastSyncfsMs = Number.NaN;

/** The floor: writing N new 2 KB files the way an install does (temp file, write, rename), with and without fsync. */
async function writeFloor(
  concurrency: number,
  fsync: boolean,
  count: number,
  replace = false,
  syncfsAfter = false,
): Promise<number> {
  const dir = await mkdtemp(join(tmpdir(), 'rs-bench-floor-'));
  const body = randomBytes(SIZE);
  const dirs = 20;
  for (let d = 0; d < dirs; d++) await mkdir(join(dir, `d${d}`));
  const writeAll = async (sync: boolean): Promise<void> => {
    let next = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < count) {
          const i = next++;
          const target = join(dir, `d${i % dirs}`, `f${i}.txt`);
          const tmp = `${target}.${randomBytes(6).toString('hex')}.tmp`;
          const fh = await open(tmp, 'wx');
          await fh.write(body);
          if (sync) await fh.sync();
          await fh.close();
          await rename(tmp, target);
        }
      }),
    );
  };
  // `replace`: the files exist (written untimed), and each is replaced atomically, as an incremental run does.
  if (replace) await writeAll(false);
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await writeAll(fsync);
  if (syncfsAfter) {
    // The batch durability scheme's flush: every file written above made durable by one syncfs.
    const s0 = performance.now();
    lastSyncfsMs = (await syncFileSystem(dir)) ? performance.now() - s0 : Number.NaN;
  }
  const ms = performance.now() - t0;
  const c = process.cpuUsage(c0);
  cpuAcc = c.user + c.system;
  cpuSys = c.system;
  srcAcc = 0;
  keep.push(dir);
  return count / (ms / 1000);
}

/**
 * Replacing files the way `batch` durability does, in rounds of 1,000 over a tree of N: temporary files
 * written, one syncfs, each renamed over its file, one syncfs. `spare`: the replaced files are kept (hard link)
 * and rewritten in place as the next round's temporary files, as spares.ts does. Returns per-file µs of the
 * writes and of the renames (medians over the rounds after the first).
 */
async function replaceRounds(spare: boolean, rounds = 5): Promise<{ write: number; rename: number }> {
  const dir = await mkdtemp(join(tmpdir(), 'rs-bench-replace-'));
  keep.push(dir);
  const per = 1000;
  const body = randomBytes(SIZE);
  for (let d = 0; d < Math.ceil(N / 1000); d++) mkdirSync(join(dir, `d${d}`));
  mkdirSync(join(dir, 'spare'));
  for (let i = 0; i < N; i++) writeFileSync(join(dir, `d${Math.floor(i / 1000)}`, `f${i}`), body);
  await syncFileSystem(dir);
  const spares: string[] = [];
  let sn = 0;
  const writes: number[] = [];
  const renames: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const targets = Array.from({ length: per }, (_, k) => {
      const i = (k * 7 + r * per) % N;
      return join(dir, `d${Math.floor(i / 1000)}`, `f${i}`);
    });
    let t0 = performance.now();
    const tmps = targets.map((t) => {
      let tmp = spare ? spares.pop() : undefined;
      let fd: number;
      if (tmp === undefined) {
        tmp = spare ? join(dir, 'spare', `s${sn++}`) : `${t}.tmp`;
        fd = openSync(tmp, 'wx');
      } else fd = openSync(tmp, 'r+');
      writeSync(fd, body, 0, body.length, 0);
      closeSync(fd);
      return tmp;
    });
    writes.push(((performance.now() - t0) * 1000) / per);
    await syncFileSystem(dir);
    t0 = performance.now();
    targets.forEach((t, k) => {
      if (spare) {
        const kept = join(dir, 'spare', `s${sn++}`);
        linkSync(t, kept);
        spares.push(kept);
      }
      renameSync(tmps[k] as string, t);
    });
    renames.push(((performance.now() - t0) * 1000) / per);
    await syncFileSystem(dir);
  }
  return { write: median(writes.slice(1)), rename: median(renames.slice(1)) };
}

/** CPU time (user + system, all threads of this process) of the last run, in µs; its system part; the Source's. */
let cpuAcc = 0;
let cpuSys = 0;
let srcAcc = 0;

/**
 * The batch-durability scheme alone: files written without fsync (concurrency 16), then every 512 of them
 * fsynced 32 at a time, and their directories, as the Recorder does before a state transaction.
 */
async function writeFloorBatch(count: number): Promise<number> {
  const dir = await mkdtemp(join(tmpdir(), 'rs-bench-floor-'));
  const body = randomBytes(SIZE);
  const dirs = 20;
  for (let d = 0; d < dirs; d++) await mkdir(join(dir, `d${d}`));
  const t0 = performance.now();
  for (let start = 0; start < count; start += 512) {
    const batch = Array.from({ length: Math.min(512, count - start) }, (_, k) =>
      join(dir, `d${(start + k) % dirs}`, `f${start + k}.txt`),
    );
    let next = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < batch.length) {
          const target = batch[next++] as string;
          const tmp = `${target}.${randomBytes(6).toString('hex')}.tmp`;
          const fh = await open(tmp, 'wx');
          await fh.write(body);
          await fh.close();
          await rename(tmp, target);
        }
      }),
    );
    let k = 0;
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (k < batch.length) {
          const fh = await open(batch[k++] as string, 'r');
          await fh.sync();
          await fh.close();
        }
      }),
    );
    for (let d = 0; d < dirs; d++) {
      const fh = await open(join(dir, `d${d}`), 'r');
      await fh.sync();
      await fh.close();
    }
  }
  const ms = performance.now() - t0;
  keep.push(dir);
  return count / (ms / 1000);
}

/**
 * Times one run. The file system is flushed first (syncfs), so a run that flushes it (`batch` durability)
 * does not pay for what earlier runs left dirty: the untimed set-up writes its copies with `durability: 'none'`,
 * and the first `batch` run after it spent ~90 ms of a ~380 ms incremental run writing those back.
 */
async function timeRun(fn: () => Promise<void>): Promise<number> {
  await syncFileSystem(tmpdir());
  const c0 = process.cpuUsage();
  const s0 = sourceCpu();
  const t0 = performance.now();
  await fn();
  const ms = performance.now() - t0;
  const c = process.cpuUsage(c0);
  cpuAcc = c.user + c.system;
  cpuSys = c.system;
  srcAcc = sourceCpu() - s0;
  return ms;
}

function cpuPer(count: number): string {
  const src = Number.isNaN(srcAcc) || srcAcc === 0 ? '' : `; Source ${(srcAcc / count).toFixed(0)} µs`;
  return `${(cpuAcc / count).toFixed(0)} µs CPU each (${(cpuSys / count).toFixed(0)} system)${src}`;
}

async function main(): Promise<void> {
  const { child, base, send } = await startServer();
  sourcePid = child.pid;
  // The static Source has a Capability List at a known place; ours is found by discovery from its root.
  const url = SOURCE === 'static' ? `${base}/capabilitylist.xml` : `${base}/`;
  const out: string[] = [];
  const report = (line: string): void => {
    out.push(line);
    process.stdout.write(`${line}\n`);
  };
  report(
    `# Destination benchmarks: ${N} resources of ${SIZE} B, ${SOURCE} Source in a child process on loopback, ${RUNS} runs (median); load average ${loadavg()
      .map((x) => x.toFixed(1))
      .join(' ')} on ${cpus().length} CPUs`,
  );

  // Warm the Source: our Source builds a dump package on its first request (its cost, not the Destination's).
  const warm = await mkdtemp(join(tmpdir(), 'rs-bench-warm-'));
  keep.push(warm);
  const w0 = performance.now();
  await new Destination({ url, dir: warm, durability: 'none', concurrency: 32 }).baseline();
  report(`Source warmed by one untimed dump baseline (${(performance.now() - w0).toFixed(0)} ms)`);

  if (runs('floor')) await measureFloor(report);
  if (runs('list')) await benchList(url, report);
  if (runs('dump')) await benchDump(url, report);
  if (runs('incremental')) await benchIncremental(url, send, report);
  child.kill();
  for (const d of keep) await rm(d, { recursive: true, force: true });
}

async function measureFloor(report: (line: string) => void): Promise<void> {
  const floorSeq = await writeFloor(1, false, N);
  const floorConc: number[] = [];
  for (let r = 0; r < RUNS; r++) floorConc.push(await writeFloor(16, false, N));
  const floorCpu = cpuPer(N);
  const floorFsync = await writeFloor(16, true, Math.min(N, 2000));
  const floorBatch = await writeFloorBatch(Math.min(N, 2000));
  const floorSyncfs = await writeFloor(16, false, N, false, true);
  const syncfsMs = lastSyncfsMs;
  const floorReplace = await writeFloor(16, false, Math.min(N, 2000), true);
  const floorReplaceCpu = cpuPer(Math.min(N, 2000));
  report(
    `floor: new 2 KB files (temp+write+rename): ${floorSeq.toFixed(0)}/s sequential (${(1000 / floorSeq).toFixed(3)} ms each), ${median(floorConc).toFixed(0)}/s at concurrency 16 (${floorCpu}); with fsync per file: ${floorFsync.toFixed(0)}/s; with batched fsync (512 files, 32 at a time, then directories): ${floorBatch.toFixed(0)}/s; ${N} new files then one syncfs: ${floorSyncfs.toFixed(0)}/s (the syncfs ${syncfsMs.toFixed(0)} ms); replacing existing files (temp+write+rename over, concurrency 16): ${floorReplace.toFixed(0)}/s (${floorReplaceCpu})`,
  );

  floorConcRate = median(floorConc);
  const plain = await replaceRounds(false);
  const spare = await replaceRounds(true);
  report(
    `floor: replacing files in rounds of 1,000 as batch durability does (write temporaries, syncfs, rename over, syncfs; one thread; medians of rounds 2-5): new temporary files ${plain.write.toFixed(1)} µs + rename over ${plain.rename.toFixed(1)} µs per file; with spares (old files kept by a link, rewritten in place): ${spare.write.toFixed(1)} µs + ${spare.rename.toFixed(1)} µs per file`,
  );
}

/** Files/s of the write floor at concurrency 16 (NaN when not measured). */
let floorConcRate = Number.NaN;

async function benchList(url: string, report: (line: string) => void): Promise<void> {
  const listRates: Record<string, number> = {};
  for (const durability of ['none', 'file', 'batch'] as Durability[]) {
    const times: number[] = [];
    const runs = RUNS;
    for (let r = 0; r < runs; r++) {
      const dir = await mkdtemp(join(tmpdir(), 'rs-bench-list-'));
      let failed = 0;
      times.push(
        await timeRun(async () => {
          const s = await new Destination({
            url,
            dir,
            noDumps: true,
            durability,
            concurrency: 32,
            http: { connectionsPerHost: 16 },
          }).baseline();
          failed = s.counts.failed;
          if (s.counts.created !== N) throw new Error(`created ${s.counts.created}`);
        }),
      );
      if (failed > 0) throw new Error('failures');
      keep.push(dir);
    }
    listRates[durability] = N / (median(times) / 1000);
    report(
      `baseline via Resource List, durability=${durability}: ${listRates[durability]!.toFixed(0)} resources/s (median ${median(times).toFixed(0)} ms; ${(listRates[durability]! / floorConcRate).toFixed(2)}x the write floor; last run ${cpuPer(N)})`,
    );
  }
}

/**
 * `BENCH_ARRIVING=ab`: the dump ways run each time with a package's files applied as it arrives (the default,
 * [arriving]) and only once it is in ([whole]), alternating, and report both; `0`: only once it is in.
 */
const ARRIVING_MODES: (boolean | undefined)[] =
  process.env['BENCH_ARRIVING'] === 'ab'
    ? [true, false]
    : process.env['BENCH_ARRIVING'] === '0'
      ? [false]
      : [undefined];
const modeLabel = (m: boolean | undefined): string => (m === undefined ? '' : m ? ' [arriving]' : ' [whole]');
/** The modes of run `r`, their order alternating run by run. */
const modesOf = (r: number): (boolean | undefined)[] => (r % 2 === 0 ? ARRIVING_MODES : [...ARRIVING_MODES].reverse());
const arrivingOption = (m: boolean | undefined): { applyArriving?: boolean } =>
  m === undefined ? {} : { applyArriving: m };

async function benchDump(url: string, report: (line: string) => void): Promise<void> {
  for (const durability of ['none', 'file', 'batch'] as Durability[]) {
    const times = new Map<boolean | undefined, number[]>();
    for (let r = 0; r < RUNS; r++)
      for (const mode of modesOf(r)) {
        const dir = await mkdtemp(join(tmpdir(), 'rs-bench-dump-'));
        const t = await timeRun(async () => {
          const s = await new Destination({
            url,
            dir,
            durability,
            concurrency: 32,
            ...arrivingOption(mode),
          }).baseline();
          if (s.counts.created !== N || !s.via.includes('dump') || s.via.includes('list'))
            throw new Error(`dump baseline: ${JSON.stringify(s.counts)} via ${s.via.join(',')}`);
        });
        times.set(mode, [...(times.get(mode) ?? []), t]);
        keep.push(dir);
      }
    for (const [mode, ts] of times) {
      const rate = N / (median(ts) / 1000);
      report(
        `baseline via Resource Dump${modeLabel(mode)}, durability=${durability}: ${rate.toFixed(0)} resources/s (median ${median(ts).toFixed(0)} ms of ${ts.map((t) => t.toFixed(0)).join(', ')}; last run ${cpuPer(N)})`,
      );
    }
  }
}

async function benchIncremental(
  url: string,
  send: (cmd: object) => Promise<void>,
  report: (line: string) => void,
): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'rs-bench-inc-'));
  await new Destination({ url, dir, noDumps: true, durability: 'none', concurrency: 32 }).baseline();
  // `BENCH_VIA=list` or `dump` measures one way only. A plain `sync` takes the Change Dump when the Source offers
  // one (ours does; the static Source of `static` mode does too) and the Change Lists for what follows it.
  const ways = (process.env['BENCH_VIA'] === undefined ? ['dump', 'list'] : [process.env['BENCH_VIA']]) as (
    | 'dump'
    | 'list'
  )[];
  for (const via of ways) {
    // One untimed run per way: the Source generates a change document on its first request (later ones are
    // regenerated in the background before the Destination asks), and this process compiles that way's code.
    // What a first run costs is printed, not counted in the medians.
    await send({ cmd: 'changes', n: 1000 });
    const first = await timeRun(async () => {
      await new Destination({ url, dir, noDumps: via === 'list', durability: 'batch', concurrency: 32 }).sync();
    });
    report(
      `incremental of 1,000 changes (${via === 'dump' ? 'Change Dump' : 'Change Lists'}), first run of this way in the process (untimed warm-up, batch): ${first.toFixed(0)} ms`,
    );
    for (const durability of ['none', 'file', 'batch'] as Durability[]) {
      const times = new Map<boolean | undefined, number[]>();
      for (let r = 0; r < RUNS; r++)
        for (const mode of via === 'dump' ? modesOf(r) : [undefined]) {
          await send({ cmd: 'changes', n: 1000 });
          const t = await timeRun(async () => {
            const s = await new Destination({
              url,
              dir,
              noDumps: via === 'list',
              durability,
              concurrency: 32,
              ...arrivingOption(mode),
            }).sync();
            if (s.operation !== 'incremental' || s.counts.updated !== 1000 || s.counts.failed !== 0)
              throw new Error(`incremental: ${s.operation} ${JSON.stringify(s.counts)}`);
            if (via === 'dump' && !s.via.includes('dump')) throw new Error(`incremental via ${s.via.join(',')}`);
          });
          times.set(mode, [...(times.get(mode) ?? []), t]);
        }
      for (const [mode, ts] of times) {
        const rate = 1000 / (median(ts) / 1000);
        report(
          `incremental of 1,000 changes (${via === 'dump' ? 'Change Dump, the default' : 'Change Lists, --no-dumps'})${modeLabel(mode)}, durability=${durability}: ${rate.toFixed(0)} changes/s (median ${median(ts).toFixed(0)} ms of ${ts.map((t) => t.toFixed(0)).join(', ')}; last run ${cpuPer(1000)})`,
        );
      }
    }
  }
  // What a user running `resourcesync sync` from cron gets: a fresh process each time (Node's start-up, module
  // loading and a cold JIT included), the default way (Change Dump) and durability (batch).
  const cliArgs = [...CHILD_ARGS, join(here, '..', 'src', 'cli', `main${EXT}`)];
  const cli: { wall: number; run: number }[] = [];
  for (let r = 0; r < RUNS; r++) {
    await send({ cmd: 'changes', n: 1000 });
    await syncFileSystem(tmpdir());
    const t0 = performance.now();
    const p = spawnSync(process.execPath, [...cliArgs, 'sync', '--json', url, dir], { encoding: 'utf8' });
    const wall = performance.now() - t0;
    const s = JSON.parse(p.stdout) as { counts: { updated: number }; elapsedMs: number };
    if (s.counts.updated !== 1000) throw new Error(`CLI incremental: ${p.stdout}${p.stderr}`);
    cli.push({ wall, run: s.elapsedMs });
  }
  report(
    `incremental of 1,000 changes by the CLI in a fresh process each time (resourcesync sync, Change Dump, batch): median ${median(cli.map((c) => c.wall)).toFixed(0)} ms wall of ${cli.map((c) => c.wall.toFixed(0)).join(', ')}, of which the run itself ${median(cli.map((c) => c.run)).toFixed(0)} ms (the rest: Node's start-up and module loading)`,
  );
  keep.push(dir);
}

await main();
