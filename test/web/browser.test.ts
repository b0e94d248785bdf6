// The explorer in a real browser (Debian's chromium through playwright-core): the page served by `serve` at
// /explorer/ for a live directory Source (tree, plot, search, fixity, a live change arriving), and by the
// explorer's own server for a broken Source (its validator issues shown). Every wait is for a condition.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { type CliRun, killChildren, runCli, waitForEvent } from '../cli/cli-child.js';
import { type Browser, launch, skipReason, WAIT_MS, waitForText } from './browser.js';
import { type RunningExplorer, type StaticSite, startExplorer, startStatic, urlset } from './helpers.js';

const skip = skipReason();

/** Polls `check` every 100 ms until it is true (bounded by WAIT_MS). */
async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('explorer in a browser, served by serve', { skip }, () => {
  let root = '';
  let collection = '';
  let serve: CliRun;
  let explorerUrl = '';
  let changeList = '';
  let browser: Browser;
  let page: Page;

  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'rs-explorer-browser-'));
    collection = join(root, 'collection');
    await mkdir(join(collection, 'docs'), { recursive: true });
    await writeFile(join(collection, 'a.txt'), 'alpha\n');
    await writeFile(join(collection, 'b.txt'), 'bravo\n');
    await writeFile(join(collection, 'docs', 'findme.txt'), 'needle\n');
    serve = runCli(['serve', collection, '--port', '0', '--json', '--state', join(root, 'state'), '--rescan', '3600']);
    const listening = await waitForEvent(serve, 'listening', () => true, WAIT_MS);
    explorerUrl = String(listening.explorer);
    const changeLists = listening.changeLists as string[] | undefined;
    const base = String(listening.baseUrl);
    changeList = changeLists?.[0] ?? `${base}resourcesync/default/changelist.xml`;
    // A change, so that the Change Lists have something to plot.
    await writeFile(join(collection, 'c-created.txt'), 'charlie\n');
    await until('the change to reach the Change List', async () => {
      const res = await fetch(changeList);
      const text = await res.text();
      if (text.includes('c-created.txt')) return true;
      // An index: look in its lists.
      const parts = [...text.matchAll(/<loc>([^<]+)<\/loc>/g)].map((m) => m[1] as string);
      for (const p of parts) if ((await (await fetch(p)).text()).includes('c-created.txt')) return true;
      return false;
    });
    browser = await launch();
    page = await browser.newPage();
  });

  after(async () => {
    await browser?.close();
    if (serve !== undefined && serve.child.exitCode === null) {
      serve.child.kill('SIGTERM');
      await serve.exit;
    }
    killChildren();
    await rm(root, { recursive: true, force: true });
  });

  it('shows the discovery path and the tree of documents, and pages the Capability List', async () => {
    assert.match(explorerUrl, /\/explorer\/$/);
    await page.goto(explorerUrl);
    await waitForText(page, '#tree', 'Capability List');
    await waitForText(page, '#tree', 'Resource List');
    await waitForText(page, '#tree', 'Change List');
    await waitForText(page, '#discovery-path li', 'capability-list');
    await waitForText(page, '#entries tbody', 'resourcelist.xml');
    await waitForText(page, '#doc-title', 'Capability List');
  });

  it('plots the changes of the Change Lists', async () => {
    await page.waitForSelector('#plot svg rect.created', { timeout: WAIT_MS });
    await waitForText(page, '#changes-table tbody', '1');
  });

  it('opens the Resource List from the keyboard and finds a resource by URI', async () => {
    const link = page.locator('#tree .doc-link', { hasText: 'Resource List' }).first();
    await link.focus();
    await page.keyboard.press('Enter');
    await waitForText(page, '#doc-title', 'Resource List');
    await waitForText(page, '#entries tbody', 'a.txt');
    await page.locator('#search-q').fill('findme');
    await page.keyboard.press('Enter');
    await waitForText(page, '#search-list', 'docs/findme.txt');
    const items = await page.locator('#search-list li').count();
    assert.equal(items, 1);
  });

  it('shows a resource with its metadata and checks its fixity on demand', async () => {
    await page.locator('#search-list button', { hasText: 'findme.txt' }).click();
    await waitForText(page, '#res-url', 'docs/findme.txt');
    await waitForText(page, '#res-md', 'sha-256');
    await page.locator('#fixity').click();
    await waitForText(page, '#fixity-result', 'Fixity OK');
    await waitForText(page, '#fixity-result', 'hash matches');
  });

  it('shows a change arriving on the live channel', async () => {
    await page.waitForSelector('#live:not([hidden])', { timeout: WAIT_MS });
    await page.locator('#live-toggle').click();
    await waitForText(page, '#live-state', 'connected');
    await writeFile(join(collection, 'live-arrival.txt'), 'new\n');
    await waitForText(page, '#live-list', 'live-arrival.txt');
    await waitForText(page, '#live-list li.created', 'created');
  });
});

describe('explorer in a browser, for a broken Source', { skip }, () => {
  let site: StaticSite;
  let explorer: RunningExplorer;
  let browser: Browser;

  before(async () => {
    site = await startStatic({});
    const base = site.url;
    site.files.set('/cap.xml', {
      body: urlset('capability="capabilitylist"', '', [
        `<url><loc>${base}cl.xml</loc><rs:md capability="changelist"/></url>`,
      ]),
    });
    site.files.set('/cl.xml', {
      body: urlset('capability="changelist"', `<rs:ln rel="up" href="${base}cap.xml"/>`, [
        `<url><loc>${base}x</loc><rs:md change="modified" datetime="2024-01-01T10:00:00Z"/></url>`,
      ]),
    });
    explorer = await startExplorer(`${base}cap.xml`);
    browser = await launch();
  });

  after(async () => {
    await browser?.close();
    await explorer?.close();
    await site?.close();
  });

  it('shows each validator issue with its rule, section and location', async () => {
    const page = await browser.newPage();
    await page.goto(explorer.page);
    // The Change List has no `from` (App. A) and an unknown change type: both in the issues of checked documents.
    await waitForText(page, '#issues-table tbody', 'change-invalid');
    const row = page.locator('#issues-table tbody tr', { hasText: 'change-invalid' }).first();
    const text = (await row.textContent()) ?? '';
    assert.match(text, /§/);
    assert.match(text, /entry 1/);
    await waitForText(page, '#tree .badge.error', 'error');
  });
});
