// Debian's chromium driven by playwright-core, for the explorer's browser tests. Not a test file itself.
// Robust on a loaded machine: every wait is for a condition with a generous bound, never a fixed sleep.
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BrowserContext, chromium, type Page } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';
/** Bound of any wait in the browser tests (the machine may be busy with other test files). */
export const WAIT_MS = 90_000;

/** Why the browser tests cannot run here, or undefined when they can. */
export function skipReason(): string | undefined {
  return existsSync(CHROMIUM) ? undefined : `no ${CHROMIUM} (apt-get install chromium; .ci/run does)`;
}

export interface Browser {
  newPage(): Promise<Page>;
  close(): Promise<void>;
}

/** Starts chromium headless with a fresh profile directory (removed on close). */
export async function launch(): Promise<Browser> {
  const profile = await mkdtemp(join(tmpdir(), 'rs-chromium-'));
  let context: BrowserContext;
  try {
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      timeout: WAIT_MS,
      viewport: { width: 1280, height: 900 },
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
  } catch (e) {
    await rm(profile, { recursive: true, force: true });
    throw e;
  }
  context.setDefaultTimeout(WAIT_MS);
  return {
    async newPage() {
      const page = await context.newPage();
      page.setDefaultTimeout(WAIT_MS);
      return page;
    },
    async close() {
      await context.close();
      await rm(profile, { recursive: true, force: true });
    },
  };
}

/** Waits until `selector` matches an element whose text contains `text` (case-insensitive), or one inside it does. */
export async function waitForText(page: Page, selector: string, text: string): Promise<void> {
  await page.locator(selector, { hasText: text }).first().waitFor({ state: 'attached', timeout: WAIT_MS });
}
