/**
 * The reference pattern of a harvester that fetches one resource at a time (as resync's `--baseline` does):
 * one kept-alive connection, the Resource List found from the Source Description, then each resource GET and
 * written to a file before the next request goes out. Used by the WAN benchmark as the ratio's denominator.
 *
 * @module
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { Agent, get } from 'node:http';
import { dirname, join } from 'node:path';

function fetchText(url: string, agent: Agent): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    get(url, { agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        res.statusCode === 200 ? resolve(Buffer.concat(chunks)) : reject(new Error(`${res.statusCode} ${url}`)),
      );
      res.on('error', reject);
    }).on('error', reject);
  });
}

/** The `<loc>` of the `<url>` entries of a sitemap whose `rs:md` has the capability (any when undefined). */
function locs(xml: string, capability?: string): string[] {
  const out: string[] = [];
  for (const part of xml.split(/<url>|<sitemap>/).slice(1)) {
    if (capability !== undefined && !part.includes(`capability="${capability}"`)) continue;
    const m = /<loc>([^<]+)<\/loc>/.exec(part);
    if (m?.[1] !== undefined) out.push(m[1].replace(/&amp;/g, '&'));
  }
  return out;
}

/**
 * Harvests up to `limit` resources of the Source at `origin` into `dir`, one request at a time. Returns how
 * many were fetched and the ms from the first resource request to the last file written (discovery excluded).
 */
export async function sequentialHarvest(
  origin: string,
  dir: string,
  limit: number,
): Promise<{ count: number; ms: number }> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  try {
    const description = (await fetchText(new URL('/.well-known/resourcesync', origin).href, agent)).toString();
    const capabilityList = locs(description)[0];
    if (capabilityList === undefined) throw new Error('no Capability List');
    const caps = (await fetchText(capabilityList, agent)).toString();
    const list = locs(caps, 'resourcelist')[0];
    if (list === undefined) throw new Error('no Resource List');
    let xml = (await fetchText(list, agent)).toString();
    if (xml.includes('<sitemapindex')) {
      const parts = locs(xml);
      xml = (await Promise.all(parts.map(async (p) => (await fetchText(p, agent)).toString()))).join('');
    }
    const uris = locs(xml).slice(0, limit);
    const t0 = performance.now();
    for (const uri of uris) {
      const body = await fetchText(uri, agent);
      const file = join(dir, new URL(uri).pathname);
      await mkdir(dirname(file), { recursive: true });
      await writeFile(file, body);
    }
    return { count: uris.length, ms: performance.now() - t0 };
  } finally {
    agent.destroy();
  }
}
