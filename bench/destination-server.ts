// A loopback Source for the Destination benchmarks, run as a child process so that it does not share the
// event loop (or the core) with the Destination being measured.
//
//   node --import tsx bench/destination-server.ts static <resources> <bytes>   // static documents + resources
//   node --import tsx bench/destination-server.ts big <entries>                // a huge Resource List Index, entries generated on request
//   node --import tsx bench/destination-server.ts real <resources> <bytes>     // our Source: a directory served by createSourceServer
//                                                                                (BENCH_PUBLISH=request: see realMode)
//
// Prints one JSON line {"base": "..."} when listening; reads commands on stdin, one JSON object a line:
//   {"cmd":"changes","n":1000}  publishes a Change List with n updates (new content), answers {"ok":true}
//   {"cmd":"exit"}              exits (so that `node --cpu-prof` writes its profile)
//   {"cmd":"profile-start"}     starts the CPU profiler (sampling every 200 µs), answers {"ok":true}
//   {"cmd":"profile-stop","file":"x.cpuprofile"}  stops it and writes the profile, answers {"ok":true}
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createInterface } from 'node:readline';
import { handleProfileCommand } from './profiler.js';
import { type ChangeSpec, StaticSource, makeResources } from '../test/destination/static-source.js';

const AT = '2025-01-01T00:00:00Z';

/** Handles the profiler commands (see bench/profiler.ts); returns whether `cmd` was one (and has been answered). */
async function profileCommand(cmd: { cmd: string; file?: string }): Promise<boolean> {
  if (!(await handleProfileCommand(cmd))) return false;
  process.stdout.write(`${JSON.stringify({ ok: true })}\n`);
  return true;
}

async function staticMode(n: number, size: number): Promise<void> {
  const src = await StaticSource.start();
  const resources = makeResources(n, size, 'bench');
  src.publishResourceList(resources, AT, Math.max(1, Math.ceil(n / 5000)));
  await src.publishResourceDump(resources, AT, Math.max(1, Math.ceil(n / 5000)));
  src.publishChangeLists([{ from: AT, changes: [] }]);
  src.publishCapabilities();
  process.stdout.write(`${JSON.stringify({ base: src.base })}\n`);
  let round = 0;
  for await (const line of createInterface({ input: process.stdin })) {
    const cmd = JSON.parse(line) as { cmd: string; n?: number; file?: string };
    if (cmd.cmd === 'exit') process.exit(0);
    if (await profileCommand(cmd)) continue;
    if (cmd.cmd === 'changes') {
      round++;
      const changes: ChangeSpec[] = [];
      const t0 = Date.parse(AT) + round * 86_400_000;
      for (let i = 0; i < (cmd.n ?? 1000); i++) {
        const r = resources[(i * 7) % resources.length]!;
        const body = Buffer.from(r.body);
        body.write(`round ${round} `, 0);
        changes.push({
          path: r.path,
          change: 'updated',
          datetime: new Date(t0 + i * 1000).toISOString().replace('.000Z', 'Z'),
          body,
        });
      }
      // The index entry's <lastmod> is the list's latest change, as our Source writes it.
      src.publishChangeLists([{ from: AT, lastmod: changes[changes.length - 1]?.datetime ?? AT, changes }]);
      await src.publishChangeDump([{ from: AT, changes }]);
      src.publishCapabilities();
      process.stdout.write(`${JSON.stringify({ ok: true })}\n`);
    }
  }
}

/** A Resource List Index of `entries` entries in lists of 50,000, generated on request (never held). */
async function bigMode(entries: number): Promise<void> {
  const per = 50_000;
  const lists = Math.ceil(entries / per);
  const NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/"';
  const server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    if (path === '/resourcelist-index.xml') {
      res.writeHead(200, { 'content-type': 'application/xml' });
      let body = `<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex ${NS}>\n<rs:md capability="resourcelist" at="${AT}"/>\n`;
      for (let i = 0; i < lists; i++) body += `<sitemap><loc>${base}/list-${i}.xml</loc></sitemap>\n`;
      res.end(`${body}</sitemapindex>\n`);
      return;
    }
    const m = /^\/list-(\d+)\.xml$/.exec(path);
    if (m === null) {
      res.writeHead(404);
      res.end();
      return;
    }
    const li = Number(m[1]);
    res.writeHead(200, { 'content-type': 'application/xml' });
    res.write(
      `<?xml version="1.0" encoding="UTF-8"?>\n<urlset ${NS}>\n<rs:md capability="resourcelist" at="${AT}"/>\n`,
    );
    let i = li * per;
    const end = Math.min(entries, (li + 1) * per);
    const pump = (): void => {
      while (i < end) {
        const chunk: string[] = [];
        for (let k = 0; k < 1000 && i < end; k++, i++)
          chunk.push(
            `<url><loc>${base}/res/${i}.txt</loc><lastmod>${AT}</lastmod><rs:md hash="md5:${(i % 1e9).toString(16).padStart(32, '0')}" length="2048"/></url>\n`,
          );
        if (!res.write(chunk.join(''))) {
          res.once('drain', pump);
          return;
        }
      }
      res.end('</urlset>\n');
    };
    pump();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  process.stdout.write(`${JSON.stringify({ base: `http://127.0.0.1:${port}` })}\n`);
}

/** Our own Source over a directory of n files; `changes` rewrites files and rescans. */
async function realMode(n: number, size: number): Promise<void> {
  const { mkdir, mkdtemp, writeFile } = await import('node:fs/promises');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const { openDirectorySource } = await import('../src/source/directory.js');
  const { createSourceServer } = await import('../src/source/server.js');
  const work = await mkdtemp(join(tmpdir(), 'rs-bench-source-'));
  const dir = join(work, 'collection');
  const resources = makeResources(n, size, 'bench');
  for (let i = 0; i < resources.length; i += 1000) await mkdir(join(dir, 'res', String(i / 1000)), { recursive: true });
  await Promise.all(
    resources.map((r, i) => writeFile(join(dir, 'res', String(Math.floor(i / 1000)), `r${i}.txt`), r.body)),
  );
  let resolveSite: (s: Awaited<ReturnType<typeof openDirectorySource>>) => void = () => undefined;
  const server = createSourceServer(new Promise((r) => (resolveSite = r)));
  const { url } = await server.listen(0, '127.0.0.1');
  // BENCH_PUBLISH=request: documents are generated only when requested (the first Destination request after
  // changes waits for them); by default, as `serve` does, they are regenerated once changes settle, and the
  // `changes` command answers when that is done.
  const onRequest = process.env['BENCH_PUBLISH'] === 'request';
  const site = await openDirectorySource({
    dir,
    baseUrl: url,
    stateDir: join(work, 'state'),
    fsync: false,
    ...(onRequest ? { regenerateAfterMs: Number.POSITIVE_INFINITY } : {}),
  });
  resolveSite(site);
  process.stdout.write(`${JSON.stringify({ base: url.replace(/\/$/, ''), root: '/' })}\n`);
  let round = 0;
  // Removed synchronously on exit (an asynchronous rm never finishes there), and on SIGTERM (the parent's
  // kill(), which would end the process without 'exit' handlers): each run left ~100 MB behind before.
  const { rmSync } = await import('node:fs');
  process.on('exit', () => rmSync(work, { recursive: true, force: true }));
  process.on('SIGTERM', () => process.exit(0));
  for await (const line of createInterface({ input: process.stdin })) {
    const cmd = JSON.parse(line) as { cmd: string; n?: number; file?: string };
    if (cmd.cmd === 'exit') process.exit(0);
    if (await profileCommand(cmd)) continue;
    if (cmd.cmd === 'changes') {
      round++;
      const count = cmd.n ?? 1000;
      await Promise.all(
        Array.from({ length: count }, (_, k) => {
          const i = (k * 7) % n;
          const body = Buffer.from(resources[i]!.body);
          body.write(`round ${round} `, 0);
          return writeFile(join(dir, 'res', String(Math.floor(i / 1000)), `r${i}.txt`), body);
        }),
      );
      await site.scan();
      if (!onRequest) await site.source.settled();
      process.stdout.write(`${JSON.stringify({ ok: true })}\n`);
    }
  }
}

const [mode, a, b] = process.argv.slice(2);
if (mode === 'big') await bigMode(Number(a ?? 1_000_000));
else if (mode === 'real') await realMode(Number(a ?? 10_000), Number(b ?? 2048));
else await staticMode(Number(a ?? 10_000), Number(b ?? 2048));
