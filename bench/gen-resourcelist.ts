/**
 * Generates the benchmark Resource Lists: `bench/data/resourcelist-50k.xml` and `resourcelist-500k.xml`
 * (git-ignored), ~196 bytes per entry:
 *
 * ```xml
 *   <url>
 *     <loc>http://example.com/res/000123</loc>
 *     <lastmod>2013-01-02T13:00:00Z</lastmod>
 *     <rs:md hash="md5:..." length="12345" type="text/html"/>
 *   </url>
 * ```
 *
 * Run: `node --import tsx bench/gen-resourcelist.ts [count...]` (default 50000 500000). Files already present
 * with the right size are kept.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const DATA_DIR = join(dirname(fileURLToPath(import.meta.url)), 'data');

export function resourceListPath(count: number): string {
  return join(DATA_DIR, `resourcelist-${count >= 1000 ? `${count / 1000}k` : count}.xml`);
}

/** The text of a Resource List with `count` entries (built in pieces; fine up to a few hundred MB). */
export function resourceListChunks(count: number): string[] {
  const parts: string[] = [
    '<?xml version="1.0" encoding="UTF-8"?>\n' +
      '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">\n' +
      '  <rs:ln rel="up" href="http://example.com/capabilitylist.xml"/>\n' +
      '  <rs:md capability="resourcelist" at="2013-01-03T09:00:00Z"/>\n',
  ];
  let s = '';
  for (let i = 0; i < count; i++) {
    const id = String(i).padStart(6, '0');
    const md5 = createHash('md5').update(id).digest('hex');
    const len = 1000 + ((i * 7919) % 90000);
    s +=
      `  <url>\n    <loc>http://example.com/res/${id}</loc>\n    <lastmod>2013-01-02T13:00:00Z</lastmod>\n` +
      `    <rs:md hash="md5:${md5}" length="${String(len).padStart(5, '0')}" type="text/html"/>\n  </url>\n`;
    if (s.length > 1 << 20) {
      parts.push(s);
      s = '';
    }
  }
  parts.push(s + '</urlset>\n');
  return parts;
}

export function ensureResourceList(count: number): string {
  const path = resourceListPath(count);
  try {
    if (statSync(path).size > count * 190) return path;
  } catch {
    // not there yet
  }
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, resourceListChunks(count).join(''));
  return path;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const counts = process.argv.slice(2).map(Number);
  for (const n of counts.length > 0 ? counts : [50_000, 500_000]) {
    const p = ensureResourceList(n);
    console.log(`${p}: ${(statSync(p).size / 1e6).toFixed(1)} MB, ${n} entries`);
  }
}
