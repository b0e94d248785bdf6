import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { runInspect } from '../../src/cli/inspect.js';
import { type CommandOutput, runValidate } from '../../src/cli/validate.js';

function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) dir = dirname(dir);
  return dir;
}
const ROOT = repoRoot();
const FIXTURES = join(ROOT, 'test', 'fixtures', 'spec-examples');
const fixture = (name: string) => join(FIXTURES, name);

function capture(): CommandOutput & { out: () => string; err: () => string } {
  let out = '';
  let err = '';
  return {
    stdout: (t) => {
      out += t;
    },
    stderr: (t) => {
      err += t;
    },
    out: () => out,
    err: () => err,
  };
}

const VALID_CHANGE_LIST = `<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">
  <rs:ln rel="up" href="http://example.com/capabilitylist.xml"/>
  <rs:md capability="changelist" from="2013-01-03T00:00:00Z"/>
  <url><loc>http://example.com/a</loc><rs:md change="created" datetime="2013-01-03T01:00:00Z"/></url>
</urlset>
`;

describe('validate command (in process)', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rs-cli-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('exits 0 on a valid document and prints a summary', async () => {
    const io = capture();
    assert.equal(await runValidate([fixture('example-14.xml')], {}, io), 0);
    assert.match(io.out(), /example-14\.xml: resource-list, 2 entries: 0 errors, 0 warnings\n$/);
  });

  it('exits 1 on an invalid document, one line per issue with line, code and section', async () => {
    const io = capture();
    assert.equal(await runValidate([fixture('example-27.xml')], {}, io), 1);
    const lines = io.out().trim().split('\n');
    assert.match(
      lines[0] ?? '',
      /example-27\.xml:8: error hash-digest-invalid sha-256 digest ".*" is not 64 hex digits \(§7\)$/,
    );
    assert.match(lines.at(-1) ?? '', /4 errors, 0 warnings - INVALID$/);
  });

  it('warnings alone exit 0, or 1 with --strict', async () => {
    assert.equal(await runValidate([fixture('example-18.xml')], { strict: true }, capture()), 0);
    const file = join(dir, 'rdm.xml');
    await writeFile(
      file,
      VALID_CHANGE_LIST.replace('changelist" from', 'resourcedump-manifest" at').replace(
        '<rs:md change="created" datetime="2013-01-03T01:00:00Z"/>',
        '<rs:md path="/a"/>',
      ),
    );
    const io = capture();
    assert.equal(await runValidate([file], {}, io), 0, io.out());
    assert.match(io.out(), /warning type-recommended/);
    assert.equal(await runValidate([file], { strict: true }, capture()), 1);
  });

  it('a malformed document is an error issue with the reader code (exit 1)', async () => {
    const file = join(dir, 'broken.xml');
    await writeFile(file, VALID_CHANGE_LIST.replace('</url>', '</urlx>'));
    const io = capture();
    assert.equal(await runValidate([file], { json: true }, io), 1);
    const r = JSON.parse(io.out()) as { valid: boolean; issues: { code: string; line: number }[] };
    assert.equal(r.valid, false);
    assert.equal(r.issues[0]?.code, 'RS_XML_SYNTAX');
    assert.equal(r.issues[0]?.line, 5);
    const html = join(dir, 'page.html');
    await writeFile(html, '<html><head></head></html>');
    const io2 = capture();
    assert.equal(await runValidate([html], {}, io2), 1);
    assert.match(io2.out(), /error RS_NOT_RESOURCESYNC/);
  });

  it('exits 2 when an input cannot be read, and still reports the others', async () => {
    const io = capture();
    const code = await runValidate([join(dir, 'missing.xml'), fixture('example-01.xml')], {}, io);
    assert.equal(code, 2);
    assert.match(io.err(), /missing\.xml: no such file \[RS_IO\]/);
    assert.match(io.out(), /error up-missing/);
    assert.match(io.out(), /2 documents: 0 valid, 1 invalid, 1 unreadable/);
  });

  it('--json prints one object per document (JSON lines)', async () => {
    const io = capture();
    await runValidate(
      [fixture('example-01.xml'), fixture('notification-example-4-1.xml'), join(dir, 'nope.xml')],
      { json: true },
      io,
    );
    const lines = io
      .out()
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.equal(lines.length, 3);
    assert.deepEqual(
      lines.map((l) => [l['kind'], l['entries'], l['valid'], l['readable']]),
      [
        ['resource-list', 2, false, true],
        ['change-notification', 2, true, true],
        [undefined, undefined, undefined, false],
      ],
    );
    const issues = lines[0]?.['issues'] as { code: string; section: string; severity: string }[];
    assert.deepEqual(issues, [
      {
        code: 'up-missing',
        severity: 'error',
        message: 'a Resource List must link to the Capability List with <rs:ln rel="up">',
        section: '§10.1',
        element: 'rs:ln',
      },
    ]);
  });

  it('--expect makes another kind an error', async () => {
    const io = capture();
    assert.equal(await runValidate([fixture('example-14.xml')], { expect: 'change-list' }, io), 1);
    assert.match(io.out(), /error kind-unexpected expected a change-list, found a resource-list/);
  });
});

describe('validate and inspect over HTTP (loopback server)', () => {
  let server: Server;
  let base: string;
  before(async () => {
    server = createServer((req, res) => {
      const path = req.url ?? '/';
      if (path === '/cl.xml') {
        res.setHeader('content-type', 'application/xml');
        res.end(VALID_CHANGE_LIST);
      } else if (path === '/cl.xml.gz') {
        res.end(gzipSync(VALID_CHANGE_LIST));
      } else if (path.startsWith('/hop/')) {
        const n = Number(path.slice(5));
        res.statusCode = 302;
        res.setHeader('location', n <= 1 ? '/cl.xml' : `/hop/${n - 1}`);
        res.end();
      } else if (path === '/stall-headers') {
        // never answers; the client's header timeout must fire
      } else if (path === '/stall-body') {
        res.writeHead(200, { 'content-type': 'application/xml' });
        res.write('<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">');
      } else if (path === '/big') {
        res.writeHead(200);
        res.end(VALID_CHANGE_LIST + ' '.repeat(100_000));
      } else {
        res.statusCode = 404;
        res.end('not found');
      }
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('reads a URL, gzip or not, following up to 5 redirects', async () => {
    for (const path of ['/cl.xml', '/cl.xml.gz', '/hop/5']) {
      const io = capture();
      assert.equal(await runValidate([`${base}${path}`], {}, io), 0, io.out() + io.err());
      assert.match(io.out(), /change-list, 1 entry: 0 errors, 0 warnings/);
    }
  });

  it('exits 2 on HTTP errors, too many redirects and timeouts', async () => {
    const cases: [string, RegExp][] = [
      ['/missing', /HTTP 404 .*\[RS_HTTP\]/],
      ['/hop/6', /too many redirects .*\[RS_HTTP\]/],
      ['/stall-headers', /timed out .*\[RS_TIMEOUT\]/],
      ['/stall-body', /timed out .*\[RS_TIMEOUT\]/],
    ];
    for (const [path, message] of cases) {
      const io = capture();
      const code = await runValidate([`${base}${path}`], { timeoutMs: 300, bodyTimeoutMs: 300 }, io);
      assert.equal(code, 2, `${path}: ${io.out()}${io.err()}`);
      assert.match(io.err(), message, path);
    }
  });

  it('refuses a body over the size bound (exit 1: the document is refused)', async () => {
    const io = capture();
    assert.equal(await runValidate([`${base}/big`], { maxBytes: 10_000 }, io), 1);
    assert.match(io.out(), /error RS_LIMIT/);
  });

  it('inspect summarises a URL; exit 2 when unreadable', async () => {
    const io = capture();
    assert.equal(await runInspect(`${base}/hop/2`, { json: true }, io), 0);
    const s = JSON.parse(io.out()) as Record<string, unknown>;
    assert.equal(s['kind'], 'change-list');
    assert.equal(s['from'], '2013-01-03T00:00:00Z');
    assert.deepEqual(s['changes'], { created: 1 });
    assert.equal(await runInspect(`${base}/missing`, {}, capture()), 2);
  });
});

describe('inspect command (in process)', () => {
  it('reports kind, header, links, time ranges and change counts', async () => {
    const io = capture();
    assert.equal(await runInspect(fixture('example-21.xml'), { json: true }, io), 0);
    const s = JSON.parse(io.out()) as Record<string, unknown>;
    assert.deepEqual(
      { ...s, source: undefined },
      {
        source: undefined,
        kind: 'change-list',
        root: 'urlset',
        capability: 'changelist',
        from: '2013-01-02T00:00:00Z',
        until: '2013-01-03T00:00:00Z',
        links: [
          { rel: 'up', href: 'http://example.com/dataset1/capabilitylist.xml' },
          { rel: 'index', href: 'http://example.com/dataset1/changelist.xml' },
        ],
        entries: 4,
        datetime: { min: '2013-01-02T12:00:00Z', max: '2013-01-02T20:00:00Z' },
        changes: { created: 1, updated: 2, deleted: 1 },
        capabilities: {},
        errors: 0,
        warnings: 0,
      },
    );
    const human = capture();
    assert.equal(await runInspect(fixture('example-13.xml'), {}, human), 0);
    assert.match(human.out(), /kind: +capability-list/);
    assert.match(human.out(), /capabilities: resourcelist 1, resourcedump 1, changelist 1, changedump 1/);
  });
  it('exit 1 for a file that is not a document, 2 for a missing one', async () => {
    assert.equal(await runInspect(fixture('example-09.html'), {}, capture()), 1);
    assert.equal(await runInspect(join(FIXTURES, 'nope.xml'), {}, capture()), 2);
  });
});

/** The real executable, as a child process: exit codes and --help. */
function run(args: string[], stdin?: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const compiled = join(ROOT, 'dist', 'src', 'cli', 'main.js');
  const fromSource = !fileURLToPath(import.meta.url).includes(`${join('dist', 'test')}`);
  const argv = fromSource ? ['--import', 'tsx', join(ROOT, 'src', 'cli', 'main.ts'), ...args] : [compiled, ...args];
  return new Promise((resolve) => {
    const child = execFile(process.execPath, argv, { cwd: ROOT, timeout: 60_000 }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1;
      resolve({ code, stdout, stderr });
    });
    child.stdin?.end(stdin ?? '');
  });
}

describe('resourcesync executable', () => {
  it('validate: exit 0 / 1 / 2, and the help explains them', async () => {
    // Three processes only (each one starts Node): stdin (exit 0), an invalid file (1), a usage error (2).
    const [stdin, bad, usage] = await Promise.all([
      run(['validate', '-'], VALID_CHANGE_LIST),
      run(['validate', fixture('example-01.xml'), fixture('example-14.xml')]),
      run(['validate', '--expect', 'nonsense', fixture('example-14.xml')]),
    ]);
    assert.equal(stdin.code, 0, stdin.stderr);
    assert.match(stdin.stdout, /^-: change-list, 1 entry: 0 errors, 0 warnings\n$/);
    assert.equal(bad.code, 1, bad.stderr);
    assert.match(bad.stdout, /example-01\.xml: error up-missing/);
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /Exit codes:\n +0 +every document is valid/);
  });
});
