// A static ResourceSync Source for Destination tests: a plain node:http file server over an in-memory map of
// documents and resources, with faults to inject (5xx, reset mid-body, stall, truncation), and builders for
// Resource List Indexes, Change List Indexes (closed and open lists), Resource Dumps and Change Dumps (yazl).
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import yazl from 'yazl';

/** `hang`: the request is read and never answered (no status line, no timer kept). */
export type Fault = 'status-500' | 'status-503' | 'reset-mid-body' | 'stall' | 'truncate' | 'not-found' | 'hang';

interface Route {
  body: Buffer;
  type: string;
  /** Delay before answering, ms. */
  delayMs?: number;
  /** Send the first `at` bytes, then the rest once `open` settles (or `reset`: close the connection instead). */
  gate?: { at: number; open: () => Promise<void>; reset?: boolean };
}

/** Hashes as a ResourceSync hash attribute. */
export function hashAttr(body: Buffer, algs: readonly ('md5' | 'sha-256')[] = ['md5', 'sha-256']): string {
  return algs
    .map(
      (a) =>
        `${a}:${createHash(a === 'md5' ? 'md5' : 'sha256')
          .update(body)
          .digest('hex')}`,
    )
    .join(' ');
}

export interface ResourceSpec {
  /** Path under the server root, e.g. `/res/a.txt`. */
  readonly path: string;
  readonly body: Buffer;
  readonly lastmod?: string;
  /** Hash algorithms to publish (default md5 + sha-256; [] publishes none). */
  readonly hashes?: readonly ('md5' | 'sha-256')[];
  /** Extra inner XML for the entry (e.g. rs:ln duplicate links). */
  readonly extra?: string;
}

export interface ChangeSpec {
  readonly path: string;
  readonly change: 'created' | 'updated' | 'deleted';
  /** Absent: an undated change (optional in §12.1; resync-build and the 1.0 simulator write none). */
  readonly datetime?: string;
  /** Content for created/updated (also served at `path` unless `serve` is false). */
  readonly body?: Buffer;
  /** Publish no hash for this change. */
  readonly noHash?: boolean;
}

export interface ChangeListSpec {
  readonly from: string;
  /** Absent for the open list. */
  readonly until?: string;
  /** `<lastmod>` of the list's entry in the Change List Index (absent: none). */
  readonly lastmod?: string;
  readonly changes: readonly ChangeSpec[];
}

const NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/"';

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** A ZIP built with yazl from name -> bytes (in order). */
export async function buildZip(files: readonly (readonly [string, Buffer])[]): Promise<Buffer> {
  const zip = new yazl.ZipFile();
  for (const [name, body] of files) zip.addBuffer(body, name, { compress: body.length > 512 });
  zip.end();
  const chunks: Buffer[] = [];
  for await (const c of zip.outputStream as AsyncIterable<Buffer>) chunks.push(c);
  return Buffer.concat(chunks);
}

export class StaticSource {
  readonly routes = new Map<string, Route>();
  readonly log: string[] = [];
  private readonly faults = new Map<string, Fault[]>();
  private readonly sockets = new Set<import('node:net').Socket>();
  /** Requests per path. */
  readonly hits = new Map<string, number>();
  /** Every request's path, headers and arrival time (`performance.now()`), in order. */
  readonly requests: { readonly path: string; readonly headers: IncomingMessage['headers']; readonly at: number }[] =
    [];
  private constructor(
    private readonly server: Server,
    readonly base: string,
  ) {}

  static async start(): Promise<StaticSource> {
    const server = createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as AddressInfo;
    const src = new StaticSource(server, `http://127.0.0.1:${port}`);
    server.on('request', (req, res) => src.handle(req, res));
    server.on('connection', (s) => {
      src.sockets.add(s);
      s.on('close', () => src.sockets.delete(s));
    });
    return src;
  }

  url(path: string): string {
    return this.base + path;
  }

  set(path: string, body: Buffer | string, type = 'application/octet-stream', delayMs?: number): void {
    const route: Route = { body: typeof body === 'string' ? Buffer.from(body) : body, type };
    if (delayMs !== undefined) route.delayMs = delayMs;
    this.routes.set(path, route);
  }

  /**
   * Serves `path` in two parts: its first `at` bytes at once, then, once `open()` settles, the rest (or, with
   * `reset`, the connection is destroyed instead: a download cut after `at` bytes).
   */
  gate(path: string, at: number, open: () => Promise<void>, reset = false): void {
    const route = this.routes.get(path);
    if (route === undefined) throw new Error(`no route ${path}`);
    route.gate = { at, open, reset };
  }

  remove(path: string): void {
    this.routes.delete(path);
  }

  /** The next `times` requests of `path` fail with `fault`. */
  fault(path: string, fault: Fault, times = 1): void {
    const list = this.faults.get(path) ?? [];
    for (let i = 0; i < times; i++) list.push(fault);
    this.faults.set(path, list);
  }

  clearFaults(): void {
    this.faults.clear();
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const path = new URL(req.url ?? '/', this.base).pathname;
    this.log.push(path);
    this.requests.push({ path, headers: req.headers, at: performance.now() });
    this.hits.set(path, (this.hits.get(path) ?? 0) + 1);
    const fault = this.faults.get(path)?.shift();
    const route = this.routes.get(path);
    if (fault === 'status-500' || fault === 'status-503') {
      res.writeHead(fault === 'status-500' ? 500 : 503, { 'content-type': 'text/plain' });
      res.end('fault');
      return;
    }
    if (fault === 'not-found' || route === undefined) {
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('not found');
      return;
    }
    if (fault === 'hang') return;
    if (fault === 'stall') {
      res.writeHead(200, { 'content-type': route.type, 'content-length': String(route.body.length) });
      res.write(route.body.subarray(0, Math.min(10, route.body.length >> 1)));
      return; // never ends
    }
    if (fault === 'reset-mid-body') {
      res.writeHead(200, { 'content-type': route.type, 'content-length': String(route.body.length) });
      res.write(route.body.subarray(0, route.body.length >> 1), () => req.socket.destroy());
      return;
    }
    const send = (): void => {
      if (fault === 'truncate') {
        // A complete HTTP response whose body is cut short (the server believes it is the whole file).
        const cut = route.body.subarray(0, Math.floor(route.body.length * 0.6));
        res.writeHead(200, { 'content-type': route.type, 'content-length': String(cut.length) });
        res.end(cut);
        return;
      }
      res.writeHead(200, { 'content-type': route.type, 'content-length': String(route.body.length) });
      const gate = route.gate;
      if (gate === undefined) {
        res.end(route.body);
        return;
      }
      res.write(route.body.subarray(0, gate.at));
      void gate.open().then(() => {
        if (gate.reset === true) req.socket.destroy();
        else res.end(route.body.subarray(gate.at));
      });
    };
    if (route.delayMs !== undefined) setTimeout(send, route.delayMs);
    else send();
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((r) => this.server.close(() => r()));
  }

  // ---- documents ----

  /**
   * Publishes a Capability List at `/capabilitylist.xml` (and a Source Description at
   * `/.well-known/resourcesync`) naming whichever documents exist.
   */
  publishCapabilities(): void {
    const caps: [string, string][] = [];
    if (this.routes.has('/resourcelist-index.xml')) caps.push(['resourcelist', '/resourcelist-index.xml']);
    if (this.routes.has('/resourcedump.xml')) caps.push(['resourcedump', '/resourcedump.xml']);
    if (this.routes.has('/changelist-index.xml')) caps.push(['changelist', '/changelist-index.xml']);
    if (this.routes.has('/changedump.xml')) caps.push(['changedump', '/changedump.xml']);
    const body = `<?xml version="1.0" encoding="UTF-8"?>
<urlset ${NS}>
  <rs:ln rel="describedby" href="${this.url('/about')}"/>
  <rs:ln rel="up" href="${this.url('/.well-known/resourcesync')}"/>
  <rs:md capability="capabilitylist"/>
${caps.map(([c, p]) => `  <url><loc>${this.url(p)}</loc><rs:md capability="${c}"/></url>`).join('\n')}
</urlset>`;
    this.set('/capabilitylist.xml', body, 'application/xml');
    this.set(
      '/.well-known/resourcesync',
      `<?xml version="1.0" encoding="UTF-8"?>
<urlset ${NS}>
  <rs:md capability="description"/>
  <url><loc>${this.url('/capabilitylist.xml')}</loc><rs:md capability="capabilitylist"/></url>
</urlset>`,
      'application/xml',
    );
  }

  /** Serves the resources and a Resource List Index at `/resourcelist-index.xml` with `parts` lists. */
  publishResourceList(resources: readonly ResourceSpec[], at: string, parts = 2, serve = true): void {
    if (serve) for (const r of resources) this.set(r.path, r.body);
    const per = Math.max(1, Math.ceil(resources.length / parts));
    const locs: string[] = [];
    for (let p = 0; p * per < resources.length || (p === 0 && resources.length === 0); p++) {
      const slice = resources.slice(p * per, (p + 1) * per);
      const path = `/resourcelist-${p + 1}.xml`;
      locs.push(path);
      this.set(path, resourceListXml(this.base, slice, at, this.url('/resourcelist-index.xml')), 'application/xml');
    }
    this.set(
      '/resourcelist-index.xml',
      `<?xml version="1.0" encoding="UTF-8"?>
<sitemapindex ${NS}>
  <rs:ln rel="up" href="${this.url('/capabilitylist.xml')}"/>
  <rs:md capability="resourcelist" at="${at}" completed="${at}"/>
${locs.map((l) => `  <sitemap><loc>${this.url(l)}</loc><rs:md at="${at}"/></sitemap>`).join('\n')}
</sitemapindex>`,
      'application/xml',
    );
  }

  /** Builds `packages` Resource Dump packages of the resources and a Resource Dump at `/resourcedump.xml`. */
  async publishResourceDump(resources: readonly ResourceSpec[], at: string, packages = 2): Promise<Buffer[]> {
    const per = Math.max(1, Math.ceil(resources.length / packages));
    const zips: Buffer[] = [];
    const entries: string[] = [];
    for (let p = 0; p * per < resources.length; p++) {
      const slice = resources.slice(p * per, (p + 1) * per);
      const manifest = `<?xml version="1.0" encoding="UTF-8"?>
<urlset ${NS}>
  <rs:ln rel="up" href="${this.url('/capabilitylist.xml')}"/>
  <rs:md capability="resourcedump-manifest" at="${at}" completed="${at}"/>
${slice
  .map(
    (r) =>
      `  <url><loc>${esc(this.url(r.path))}</loc><rs:md ${hashPart(r.body, r.hashes)}length="${r.body.length}" path="/resources${esc(r.path)}"/></url>`,
  )
  .join('\n')}
</urlset>`;
      const zip = await buildZip([
        ['manifest.xml', Buffer.from(manifest)],
        ...slice.map((r) => [`resources${r.path}`, r.body] as const),
      ]);
      zips.push(zip);
      const zpath = `/dump-${p + 1}.zip`;
      const mpath = `/dump-${p + 1}-manifest.xml`;
      this.set(zpath, zip, 'application/zip');
      this.set(mpath, manifest, 'application/xml');
      entries.push(
        `  <url><loc>${this.url(zpath)}</loc><rs:md type="application/zip" length="${zip.length}" at="${at}"/><rs:ln rel="contents" href="${this.url(mpath)}" type="application/xml"/></url>`,
      );
    }
    this.set(
      '/resourcedump.xml',
      `<?xml version="1.0" encoding="UTF-8"?>
<urlset ${NS}>
  <rs:ln rel="up" href="${this.url('/capabilitylist.xml')}"/>
  <rs:md capability="resourcedump" at="${at}" completed="${at}"/>
${entries.join('\n')}
</urlset>`,
      'application/xml',
    );
    return zips;
  }

  /**
   * Publishes Change Lists (the last one open when it has no `until`) under a Change List Index at
   * `/changelist-index.xml`, and serves the new content of created/updated resources.
   */
  publishChangeLists(lists: readonly ChangeListSpec[], options: { serve?: boolean } = {}): void {
    const locs: string[] = [];
    lists.forEach((l, i) => {
      const path = `/changelist-${i + 1}.xml`;
      locs.push(
        `  <sitemap><loc>${this.url(path)}</loc>${l.lastmod === undefined ? '' : `<lastmod>${l.lastmod}</lastmod>`}<rs:md from="${l.from}"${l.until === undefined ? '' : ` until="${l.until}"`}/></sitemap>`,
      );
      this.set(path, changeListXml(this.base, l, this.url('/changelist-index.xml')), 'application/xml');
    });
    if (options.serve ?? true) applyChangesToRoutes(this, lists);
    this.set(
      '/changelist-index.xml',
      `<?xml version="1.0" encoding="UTF-8"?>
<sitemapindex ${NS}>
  <rs:ln rel="up" href="${this.url('/capabilitylist.xml')}"/>
  <rs:md capability="changelist" from="${lists[0]?.from ?? '2020-01-01T00:00:00Z'}"/>
${locs.join('\n')}
</sitemapindex>`,
      'application/xml',
    );
  }

  /**
   * Publishes one Change Dump package per list under `/changedump.xml`. The bitstreams of the changes to
   * `corrupt` (paths) get one byte flipped in the package, their manifest entries still describing the
   * right content.
   */
  async publishChangeDump(lists: readonly ChangeListSpec[], corrupt: readonly string[] = []): Promise<void> {
    const entries: string[] = [];
    for (let i = 0; i < lists.length; i++) {
      const l = lists[i] as ChangeListSpec;
      const files: [string, Buffer][] = [];
      const urls = l.changes.map((c, j) => {
        const p = `/changes/${j}${c.path}`;
        if (c.body !== undefined && c.change !== 'deleted') {
          const stored = Buffer.from(c.body);
          if (corrupt.includes(c.path)) stored[0] = (stored[0] as number) ^ 0xff;
          files.push([p.slice(1), stored]);
        }
        const md =
          c.change === 'deleted' || c.body === undefined
            ? `change="${c.change}"${dt(c)}`
            : `change="${c.change}"${dt(c)} ${hashPart(c.body)}length="${c.body.length}" path="${esc(p)}"`;
        return `  <url><loc>${esc(this.url(c.path))}</loc><rs:md ${md}/></url>`;
      });
      const manifest = `<?xml version="1.0" encoding="UTF-8"?>
<urlset ${NS}>
  <rs:ln rel="up" href="${this.url('/capabilitylist.xml')}"/>
  <rs:md capability="changedump-manifest" from="${l.from}"${l.until === undefined ? '' : ` until="${l.until}"`}/>
${urls.join('\n')}
</urlset>`;
      const zip = await buildZip([['manifest.xml', Buffer.from(manifest)], ...files]);
      const zpath = `/changedump-${i + 1}.zip`;
      this.set(zpath, zip, 'application/zip');
      entries.push(
        `  <url><loc>${this.url(zpath)}</loc><rs:md type="application/zip" length="${zip.length}" from="${l.from}"${l.until === undefined ? '' : ` until="${l.until}"`}/></url>`,
      );
    }
    this.set(
      '/changedump.xml',
      `<?xml version="1.0" encoding="UTF-8"?>
<urlset ${NS}>
  <rs:ln rel="up" href="${this.url('/capabilitylist.xml')}"/>
  <rs:md capability="changedump" from="${lists[0]?.from ?? '2020-01-01T00:00:00Z'}"/>
${entries.join('\n')}
</urlset>`,
      'application/xml',
    );
  }
}

function applyChangesToRoutes(src: StaticSource, lists: readonly ChangeListSpec[]): void {
  for (const l of lists)
    for (const c of l.changes) {
      if (c.change === 'deleted') src.remove(c.path);
      else if (c.body !== undefined) src.set(c.path, c.body);
    }
}

function hashPart(body: Buffer, algs?: readonly ('md5' | 'sha-256')[]): string {
  if (algs !== undefined && algs.length === 0) return '';
  return `hash="${hashAttr(body, algs)}" `;
}

export function resourceListXml(base: string, resources: readonly ResourceSpec[], at: string, index?: string): string {
  return `<?xml version="1.0" encoding="UTF-8"?>
<urlset ${NS}>
  <rs:ln rel="up" href="${base}/capabilitylist.xml"/>
${index === undefined ? '' : `  <rs:ln rel="index" href="${index}"/>\n`}  <rs:md capability="resourcelist" at="${at}" completed="${at}"/>
${resources
  .map(
    (r) =>
      `  <url><loc>${esc(base + r.path)}</loc>${r.lastmod === undefined ? '' : `<lastmod>${r.lastmod}</lastmod>`}<rs:md ${hashPart(r.body, r.hashes)}length="${r.body.length}"/>${r.extra ?? ''}</url>`,
  )
  .join('\n')}
</urlset>`;
}

/** ` datetime="…"` of a change, or nothing for an undated one. */
function dt(c: ChangeSpec): string {
  return c.datetime === undefined ? '' : ` datetime="${c.datetime}"`;
}

export function changeListXml(base: string, l: ChangeListSpec, index?: string): string {
  return `<?xml version="1.0" encoding="UTF-8"?>
<urlset ${NS}>
  <rs:ln rel="up" href="${base}/capabilitylist.xml"/>
${index === undefined ? '' : `  <rs:ln rel="index" href="${index}"/>\n`}  <rs:md capability="changelist" from="${l.from}"${l.until === undefined ? '' : ` until="${l.until}"`}/>
${l.changes
  .map((c) => {
    const content =
      c.body === undefined || c.change === 'deleted' || c.noHash === true
        ? ''
        : ` ${hashPart(c.body)}length="${c.body.length}"`;
    return `  <url><loc>${esc(base + c.path)}</loc><rs:md change="${c.change}"${dt(c)}${content}/></url>`;
  })
  .join('\n')}
</urlset>`;
}

/** n resources of `size` bytes at /res/r<i>.txt with deterministic content. */
export function makeResources(n: number, size = 64, seed = 'v1'): ResourceSpec[] {
  const out: ResourceSpec[] = [];
  for (let i = 0; i < n; i++) {
    const head = `${seed} resource ${i}\n`;
    const body = Buffer.alloc(Math.max(size, head.length), 'x');
    body.write(head);
    out.push({ path: `/res/r${i}.txt`, body, lastmod: '2024-01-01T00:00:00Z' });
  }
  return out;
}

/** Every regular file under `dir` (relative path -> bytes), skipping `.resourcesync`. */
export function readTree(dir: string): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  const walk = (d: string, rel: string): void => {
    if (!existsSync(d)) return;
    for (const name of readdirSync(d).sort()) {
      if (rel === '' && name === '.resourcesync') continue;
      const p = join(d, name);
      const r = rel === '' ? name : `${rel}/${name}`;
      if (statSync(p).isDirectory()) walk(p, r);
      else out.set(r, readFileSync(p));
    }
  };
  walk(dir, '');
  return out;
}

/** The local relative path of a resource of `src` in the default host-path layout. */
export function localPathOf(src: StaticSource, path: string): string {
  const u = new URL(src.base);
  return `${u.hostname}_${u.port}${path}`;
}

/** The repository root (works from test/ under tsx and from dist/test/ after tsc), else the working directory. */
export function repoRoot(): string {
  let d = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(d, 'package.json'))) {
    const up = dirname(d);
    if (up === d) return process.cwd(); // compiled elsewhere: the working directory will do
    d = up;
  }
  return d;
}

/** argv to run the CLI in a child: from source under tsx, or compiled (the CLI sits at ../../src/cli/ from here). */
export function cliCommand(): { cmd: string; args: string[] } {
  const here = fileURLToPath(import.meta.url);
  const fromSource = here.endsWith('.ts');
  const main = join(dirname(here), '..', '..', 'src', 'cli', fromSource ? 'main.ts' : 'main.js');
  return { cmd: process.execPath, args: fromSource ? ['--import', 'tsx', main] : [main] };
}
