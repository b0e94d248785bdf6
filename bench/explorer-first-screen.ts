/**
 * The explorer's first screen for a Source of 1,000,000 resources (issue 13: under 1 s on a warm server).
 *
 * The Source: a Source Description, a Capability List and a Resource List Index of 20 Resource Lists of 50,000
 * entries each (~190 bytes per entry, 190 MB in all; the shape our Source and `publish` write past 50,000),
 * generated into a temporary directory and served by a plain `node:http` file server on loopback (streamed from
 * disk; the Source's own speed is not what is measured). The explorer (`resourcesync explore`'s server, our
 * client) runs in this process; Debian's chromium (playwright-core) opens the page.
 *
 * Measured, each a fresh page, after one warm-up load:
 * - "first screen": navigation until the tree shows the Resource List Index and the Capability List's entries
 *   are in the table (what the page shows first);
 * - "first list page": navigation to the page opened on the first Resource List (`#doc=`) until its first 100
 *   entries are in the table;
 * - the API calls behind them, timed from Node (discover; one page of the index; one page of a 50,000-entry list).
 *
 * Run: `node dist/bench/explorer-first-screen.js [--resources 1000000] [--runs 7]`
 *
 * @module
 */
import { createReadStream } from 'node:fs';
import { mkdir, mkdtemp, rm, stat } from 'node:fs/promises';
import { createWriteStream } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { chromium } from 'playwright-core';
import { ConfinedClient } from '../src/web/client.js';
import { createExplorer } from '../src/web/explorer.js';
import { createExplorerServer } from '../src/web/server.js';

const args = process.argv.slice(2);
const arg = (name: string, def: number): number => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : def;
};
const RESOURCES = arg('resources', 1_000_000);
const RUNS = arg('runs', 7);
const PER_LIST = 50_000;

const NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/"';

async function writeFileStreamed(path: string, pieces: () => Generator<string>): Promise<void> {
  const out = createWriteStream(path);
  let buffer = '';
  for (const p of pieces()) {
    buffer += p;
    if (buffer.length > 1 << 20) {
      if (!out.write(buffer)) await once(out, 'drain');
      buffer = '';
    }
  }
  out.end(buffer);
  await once(out, 'finish');
}

async function generate(dir: string, base: string): Promise<number> {
  await mkdir(join(dir, '.well-known'), { recursive: true });
  const at = '2024-01-01T00:00:00Z';
  const lists = Math.ceil(RESOURCES / PER_LIST);
  await writeFileStreamed(join(dir, '.well-known', 'resourcesync'), function* () {
    yield `<?xml version="1.0" encoding="UTF-8"?>\n<urlset ${NS}>\n<rs:md capability="description"/>\n`;
    yield `<url><loc>${base}capabilitylist.xml</loc><rs:md capability="capabilitylist"/></url>\n</urlset>\n`;
  });
  await writeFileStreamed(join(dir, 'capabilitylist.xml'), function* () {
    yield `<?xml version="1.0" encoding="UTF-8"?>\n<urlset ${NS}>\n<rs:md capability="capabilitylist"/>\n`;
    yield `<rs:ln rel="up" href="${base}.well-known/resourcesync"/>\n`;
    yield `<url><loc>${base}resourcelist-index.xml</loc><rs:md capability="resourcelist"/></url>\n</urlset>\n`;
  });
  await writeFileStreamed(join(dir, 'resourcelist-index.xml'), function* () {
    yield `<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex ${NS}>\n<rs:md capability="resourcelist" at="${at}"/>\n`;
    yield `<rs:ln rel="up" href="${base}capabilitylist.xml"/>\n`;
    for (let l = 1; l <= lists; l++)
      yield `<sitemap><loc>${base}resourcelist-${l}.xml</loc><rs:md at="${at}"/></sitemap>\n`;
    yield '</sitemapindex>\n';
  });
  for (let l = 1; l <= lists; l++) {
    await writeFileStreamed(join(dir, `resourcelist-${l}.xml`), function* () {
      yield `<?xml version="1.0" encoding="UTF-8"?>\n<urlset ${NS}>\n<rs:md capability="resourcelist" at="${at}"/>\n`;
      yield `<rs:ln rel="up" href="${base}capabilitylist.xml"/>\n<rs:ln rel="index" href="${base}resourcelist-index.xml"/>\n`;
      const first = (l - 1) * PER_LIST;
      for (let i = first; i < Math.min(RESOURCES, first + PER_LIST); i++) {
        const id = String(i).padStart(7, '0');
        yield `<url><loc>${base}res/${id}</loc><lastmod>2013-01-02T13:00:00Z</lastmod><rs:md hash="md5:${id}${'0'.repeat(25)}" length="${1000 + (i % 9000)}" type="text/html"/></url>\n`;
      }
      yield '</urlset>\n';
    });
  }
  let bytes = 0;
  for (let l = 1; l <= lists; l++) bytes += (await stat(join(dir, `resourcelist-${l}.xml`))).size;
  return bytes;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
}

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'rs-explorer-bench-'));
  const files = createServer((req, res) => {
    const path = decodeURIComponent((req.url ?? '/').replace(/\?.*$/, ''));
    if (path.includes('..')) {
      res.writeHead(400).end();
      return;
    }
    const file = join(dir, path);
    stat(file).then(
      (s) => {
        if (!s.isFile()) {
          res.writeHead(404).end();
          return;
        }
        res.writeHead(200, { 'content-type': 'application/xml', 'content-length': s.size });
        createReadStream(file).pipe(res);
      },
      () => res.writeHead(404).end(),
    );
  });
  files.listen(0, '127.0.0.1');
  await once(files, 'listening');
  const base = `http://127.0.0.1:${(files.address() as AddressInfo).port}/`;
  let t = Date.now();
  const bytes = await generate(dir, base);
  process.stdout.write(
    `generated ${RESOURCES} resources in ${Math.ceil(RESOURCES / PER_LIST)} lists, ${(bytes / 1e6).toFixed(0)} MB, ${Date.now() - t} ms\n`,
  );
  const client = new ConfinedClient({ credentialsOrigin: base });
  const server = createExplorerServer(createExplorer({ client, start: base }));
  const { url } = await server.listen(0, '127.0.0.1');
  const page0 = `${url}explorer/`;
  const profile = await mkdtemp(join(tmpdir(), 'rs-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  const timings: Record<string, number[]> = {};
  const record = (name: string, ms: number): void => {
    (timings[name] ??= []).push(ms);
  };
  try {
    const firstList = `${base}resourcelist-1.xml`;
    const apiGet = async (name: string, params: Record<string, string>): Promise<number> => {
      const t0 = performance.now();
      const res = await fetch(`${page0}api/${name}?${new URLSearchParams(params)}`);
      await res.arrayBuffer();
      if (!res.ok) throw new Error(`${name}: ${res.status}`);
      return performance.now() - t0;
    };
    for (let run = 0; run <= RUNS; run++) {
      const page = await context.newPage();
      t = performance.now();
      await page.goto(page0);
      await page.locator('#tree .doc-link', { hasText: 'Resource List' }).first().waitFor({ timeout: 60_000 });
      await page.locator('#entries tbody tr').first().waitFor({ timeout: 60_000 });
      const firstScreen = performance.now() - t;
      await page.close();
      const page2 = await context.newPage();
      t = performance.now();
      await page2.goto(`${page0}#doc=${encodeURIComponent(firstList)}`);
      await page2.locator('#entries tbody tr', { hasText: 'res/0000099' }).first().waitFor({ timeout: 60_000 });
      const firstListPage = performance.now() - t;
      await page2.close();
      const discover = await apiGet('discover', {});
      const index = await apiGet('document', { url: `${base}resourcelist-index.xml` });
      const list = await apiGet('document', { url: firstList });
      const lastList = await apiGet('document', {
        url: `${base}resourcelist-${Math.ceil(RESOURCES / PER_LIST)}.xml`,
        offset: '49900',
      });
      if (run === 0) continue; // warm-up
      record('first screen (page)', firstScreen);
      record('first list page (page)', firstListPage);
      record('api/discover', discover);
      record('api/document index page', index);
      record('api/document list page 1-100', list);
      record('api/document list page 49,901-50,000', lastList);
    }
  } finally {
    await context.close();
    await rm(profile, { recursive: true, force: true });
    await server.close();
    await client.close();
    files.close();
    await rm(dir, { recursive: true, force: true });
  }
  process.stdout.write(`${RESOURCES} resources, ${RUNS} runs after a warm-up, median (min-max) ms:\n`);
  for (const [name, xs] of Object.entries(timings))
    process.stdout.write(
      `  ${name.padEnd(40)} ${median(xs).toFixed(0).padStart(6)} (${Math.min(...xs).toFixed(0)}-${Math.max(...xs).toFixed(0)})\n`,
    );
}

await main();
