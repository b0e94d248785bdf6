/**
 * The README's screenshots of the explorer: `serve` over a copy of the bundled sample collection (a few files
 * then created, changed and deleted, so the Change List has something to plot and the channel something to
 * say), the page opened in Debian's chromium (playwright-core), three views saved as PNG.
 *
 * Run: `node dist/bench/explorer-screenshots.js [out-dir]` (default `docs/images`).
 *
 * @module
 */
import { spawn } from 'node:child_process';
import { cp, mkdir, mkdtemp, rm, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const root = resolve(fileURLToPath(import.meta.url), '../../..');
const out = resolve(process.argv[2] ?? join(root, 'docs', 'images'));

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'rs-explorer-shots-'));
  const col = join(dir, 'collection');
  await cp(join(root, 'sample'), col, { recursive: true });
  const child = spawn(
    process.execPath,
    [
      join(root, 'dist/src/cli/main.js'),
      'serve',
      col,
      '--port',
      '0',
      '--json',
      '--state',
      join(dir, 'state'),
      '--index',
      'index.html',
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let text = '';
  const listening = await new Promise<Record<string, unknown>>((done, fail) => {
    child.stdout.on('data', (c: Buffer) => {
      text += c.toString();
      for (const line of text.split('\n').slice(0, -1)) {
        if (!line.startsWith('{')) continue;
        const e = JSON.parse(line) as Record<string, unknown>;
        if (e.event === 'listening') done(e);
      }
    });
    child.on('exit', (code) => fail(new Error(`serve exited ${code}`)));
  });
  const profile = await mkdtemp(join(tmpdir(), 'rs-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    viewport: { width: 1280, height: 860 },
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
  try {
    // Some changes, a little apart, for the plot.
    for (let i = 0; i < 6; i++) await writeFile(join(col, `news-${i}.txt`), `news ${i}\n`);
    await writeFile(join(col, 'news-0.txt'), 'news 0, corrected\n');
    await unlink(join(col, 'news-5.txt'));
    const base = String(listening.baseUrl);
    for (let tries = 0; tries < 600; tries++) {
      const cl = await (await fetch(`${base}resourcesync/default/changelist.xml`)).text();
      const parts = [...cl.matchAll(/<loc>([^<]+changelist[^<]*)<\/loc>/g)].map((m) => m[1] as string);
      let all = cl;
      for (const p of parts) all += await (await fetch(p)).text();
      if (all.includes('news-5.txt') && all.includes('deleted')) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    await mkdir(out, { recursive: true });
    const page = await context.newPage();
    await page.goto(String(listening.explorer));
    await page.locator('#plot svg rect').first().waitFor({ timeout: 60_000 });
    await page.locator('#tree .badge').nth(4).waitFor({ timeout: 60_000 });
    await page.screenshot({ path: join(out, 'explorer-overview.png') });
    await page.locator('#tree .doc-link', { hasText: 'Resource List' }).first().click();
    await page.locator('#entries tbody tr', { hasText: 'news-1.txt' }).first().waitFor({ timeout: 60_000 });
    await page.locator('#entries .loc', { hasText: 'news-1.txt' }).first().click();
    await page.locator('#fixity').click();
    await page.locator('#fixity-result', { hasText: 'Fixity' }).waitFor({ timeout: 60_000 });
    await page.locator('#resource').scrollIntoViewIfNeeded();
    await page.screenshot({ path: join(out, 'explorer-resource.png') });
    await page.locator('#live-toggle').click();
    await page.locator('#live-state', { hasText: 'connected' }).waitFor({ timeout: 60_000 });
    await writeFile(join(col, 'arriving.txt'), 'live\n');
    await writeFile(join(col, 'news-1.txt'), 'news 1, updated live\n');
    await page.locator('#live-list li', { hasText: 'news-1.txt' }).first().waitFor({ timeout: 60_000 });
    await page.locator('#live').scrollIntoViewIfNeeded();
    await page.screenshot({ path: join(out, 'explorer-live.png') });
    process.stdout.write(`screenshots in ${out}\n`);
  } finally {
    await context.close();
    await rm(profile, { recursive: true, force: true });
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
