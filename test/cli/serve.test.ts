// `resourcesync serve` and `resourcesync demo` as child processes: start on port 0, fetch, SIGTERM, exit 0;
// bad input gives exit 2 and a message naming the path or port.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { findSampleDir } from '../../src/cli/demo.js';

// From source (tsx) run src/cli/main.ts through tsx; compiled, run dist/src/cli/main.js.
const fromSource = import.meta.url.endsWith('.ts');
const MAIN = fileURLToPath(new URL(`../../src/cli/main.${fromSource ? 'ts' : 'js'}`, import.meta.url));
const NODE_ARGS = fromSource ? ['--import', 'tsx'] : [];

interface Run {
  readonly child: ChildProcess;
  readonly stdout: () => string;
  readonly stderr: () => string;
  readonly exit: Promise<number | null>;
}

const children = new Set<ChildProcess>();

function run(args: readonly string[]): Run {
  const child = spawn(process.execPath, [...NODE_ARGS, MAIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  child.on('exit', () => children.delete(child));
  let out = '';
  let err = '';
  child.stdout!.on('data', (c: Buffer) => {
    out += c.toString();
  });
  child.stderr!.on('data', (c: Buffer) => {
    err += c.toString();
  });
  const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, stdout: () => out, stderr: () => err, exit };
}

/** Resolves with the first JSON line on stdout whose `event` is `name` (rejects if the process exits first). */
function waitForEvent(r: Run, name: string, timeoutMs = 60_000): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`no ${name} event; stdout: ${r.stdout()} stderr: ${r.stderr()}`)),
      timeoutMs,
    );
    const check = () => {
      // Complete lines only (the last element is the unfinished one).
      for (const line of r.stdout().split('\n').slice(0, -1)) {
        if (!line.startsWith('{')) continue;
        const obj = JSON.parse(line) as Record<string, unknown>;
        if (obj.event === name) {
          clearTimeout(timer);
          r.child.stdout!.off('data', check);
          resolve(obj);
          return;
        }
      }
    };
    r.child.stdout!.on('data', check);
    check(); // it may have been printed already
    void r.exit.then((code) => {
      clearTimeout(timer);
      reject(new Error(`exited ${code} before ${name}; stderr: ${r.stderr()}`));
    });
  });
}

let root = '';
before(async () => {
  root = await mkdtemp(join(tmpdir(), 'rs-serve-cli-'));
  await mkdir(join(root, 'c', 'sub'), { recursive: true });
  await writeFile(join(root, 'c', 'hello.txt'), 'hello\n');
  await writeFile(join(root, 'c', 'sub', 'a b.txt'), 'space\n');
  await writeFile(join(root, 'c', 'sub', 'page.html'), '<html><head><title>p</title></head><body></body></html>\n');
});
after(async () => {
  // A test that failed half-way must not leave a server running.
  for (const child of children) child.kill('SIGKILL');
  await rm(root, { recursive: true, force: true });
});

describe('resourcesync serve', () => {
  it('starts on port 0, serves the Source Description and resources, stops on SIGTERM with exit 0', async () => {
    const r = run(['serve', join(root, 'c'), '--port', '0', '--state', join(root, 'state'), '--json', '--no-watch']);
    const ev = await waitForEvent(r, 'listening');
    const url = ev.url as string;
    assert.match(url, /^http:\/\/127\.0\.0\.1:\d+\/$/);
    assert.equal(ev.sourceDescription, new URL('.well-known/resourcesync', url).href);
    assert.ok((ev.capabilityLists as string[]).length >= 1);
    assert.ok((ev.resourceLists as string[]).length >= 1);
    const sd = await fetch(ev.sourceDescription as string);
    assert.equal(sd.status, 200);
    assert.match(await sd.text(), /capability="description"/);
    const rl = await fetch((ev.resourceLists as string[])[0]!);
    const text = await rl.text();
    assert.ok(text.includes(`${url}sub/a%20b.txt`), text);
    const res = await fetch(`${url}sub/a%20b.txt`);
    assert.equal(await res.text(), 'space\n');
    assert.match(res.headers.get('link') ?? '', /rel="resourcesync"/);
    r.child.kill('SIGTERM');
    assert.equal(await r.exit, 0, r.stderr());
    assert.match(r.stdout(), /"event":"stopped"/);
  });

  it('--sets top-level, --html-links, --log, --base-url with a path', async () => {
    const r = run([
      'serve',
      join(root, 'c'),
      '--port',
      '0',
      '--state',
      join(root, 'state-sets'),
      '--json',
      '--no-watch',
      '--sets',
      'top-level',
      '--html-links',
      '--log',
      '--base-url',
      'http://example.test/rs/',
    ]);
    const ev = await waitForEvent(r, 'listening');
    const url = ev.url as string;
    const base = 'http://example.test/rs/';
    assert.equal(ev.baseUrl, base);
    assert.equal(ev.sourceDescription, 'http://example.test/.well-known/resourcesync');
    assert.deepEqual(ev.capabilityLists, [
      `${base}resourcesync/default/capabilitylist.xml`,
      `${base}resourcesync/sub/capabilitylist.xml`,
    ]);
    assert.equal((await fetch(`${url}.well-known/resourcesync`)).status, 200);
    const sub = await fetch(`${url}rs/sub/a%20b.txt`);
    assert.equal(await sub.text(), 'space\n');
    assert.equal(sub.headers.get('link'), `<${base}resourcesync/sub/capabilitylist.xml>; rel="resourcesync"`);
    assert.equal((await fetch(`${url}sub/a%20b.txt`)).status, 404, 'outside the base path');
    // --html-links is accepted but ignored (warned): the page is served as it is, the link is in the header.
    const page = await fetch(`${url}rs/sub/page.html`);
    assert.equal(await page.text(), '<html><head><title>p</title></head><body></body></html>\n');
    assert.equal(page.headers.get('link'), `<${base}resourcesync/sub/capabilitylist.xml>; rel="resourcesync"`);
    assert.match((await waitForEvent(r, 'warning')).message as string, /--html-links is ignored/);
    const logged = await waitForEvent(r, 'request');
    assert.equal(logged.method, 'GET');
    r.child.kill('SIGTERM');
    assert.equal(await r.exit, 0, r.stderr());
  });

  it('watching: a file created while serving appears in the Resource List and is served', async () => {
    await mkdir(join(root, 'w'));
    await writeFile(join(root, 'w', 'first.txt'), 'first\n');
    const r = run(['serve', join(root, 'w'), '--port', '0', '--state', join(root, 'state-w'), '--json']);
    const ev = await waitForEvent(r, 'listening');
    const url = ev.url as string;
    await writeFile(join(root, 'w', 'new file.txt'), 'new\n');
    const deadline = Date.now() + 20_000;
    let listed = false;
    while (!listed && Date.now() < deadline) {
      const list = await (await fetch((ev.resourceLists as string[])[0]!)).text();
      listed = list.includes(`${url}new%20file.txt`);
      if (!listed) await new Promise((res) => setTimeout(res, 200));
    }
    assert.ok(listed, 'the new file is in the Resource List');
    assert.equal(await (await fetch(`${url}new%20file.txt`)).text(), 'new\n');
    r.child.kill('SIGTERM');
    assert.equal(await r.exit, 0, r.stderr());
  });

  it('--changelist-max-entries rotates the Change Lists; bad values exit 2', async () => {
    await mkdir(join(root, 'rot'));
    await writeFile(join(root, 'rot', 'start.txt'), 'start\n');
    const r = run([
      'serve',
      join(root, 'rot'),
      '--port',
      '0',
      '--state',
      join(root, 'state-rot'),
      '--json',
      '--changelist-max-entries',
      '2',
    ]);
    const ev = await waitForEvent(r, 'listening');
    const capabilityList = await (await fetch((ev.capabilityLists as string[])[0]!)).text();
    const changes = /<loc>([^<]*changelist[^<]*)<\/loc>/.exec(capabilityList)?.[1];
    assert.ok(changes !== undefined, capabilityList);
    for (let i = 0; i < 5; i++) await writeFile(join(root, 'rot', `f${i}.txt`), `file ${i}\n`);
    // Five changes, two per Change List: an index of three lists, the first two closed (with until).
    const deadline = Date.now() + 20_000;
    let index = '';
    while (Date.now() < deadline) {
      index = await (await fetch(changes)).text();
      if ((index.match(/<sitemap>/g) ?? []).length >= 3) break;
      await new Promise((res) => setTimeout(res, 200));
    }
    assert.match(index, /capability="changelist"/);
    assert.equal((index.match(/<sitemap>/g) ?? []).length, 3, index);
    assert.equal((index.match(/until="/g) ?? []).length, 2, index);
    r.child.kill('SIGTERM');
    assert.equal(await r.exit, 0, r.stderr());
    for (const bad of [
      ['--changelist-max-entries', '0'],
      ['--changelist-period', 'soon'],
    ]) {
      const b = run(['serve', join(root, 'rot'), '--port', '0', '--state', join(root, 'state-rot'), ...bad]);
      assert.equal(await b.exit, 2, bad.join(' '));
      assert.match(b.stderr(), new RegExp(bad[0]!), b.stderr());
    }
  });

  it('restarts on the same state and serves again', async () => {
    const r = run(['serve', join(root, 'c'), '--port', '0', '--state', join(root, 'state'), '--json', '--no-watch']);
    const ev = await waitForEvent(r, 'listening');
    assert.equal((await fetch(ev.sourceDescription as string)).status, 200);
    r.child.kill('SIGINT');
    assert.equal(await r.exit, 0, r.stderr());
  });

  it('port in use: exit 2 naming the port', async () => {
    const blocker: Server = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const port = (blocker.address() as { port: number }).port;
    const r = run(['serve', join(root, 'c'), '--port', String(port), '--state', join(root, 'state2'), '--no-watch']);
    const code = await r.exit;
    blocker.close();
    assert.equal(code, 2);
    assert.match(r.stderr(), new RegExp(`port ${port}`));
  });

  it('missing directory, bad base URL, unusable state dir, bad port: exit 2 with a clear message', async () => {
    const missing = join(root, 'missing');
    // A state "directory" below a regular file cannot be created (works even as root, unlike chmod).
    await writeFile(join(root, 'a-file'), 'x');
    const state = join(root, 'a-file', 'state');
    const cases: [string[], RegExp | string][] = [
      [['serve', missing, '--port', '0'], missing],
      ...['ftp://example.org/', 'not a url', '/relative/'].map((bad): [string[], RegExp] => [
        ['serve', join(root, 'c'), '--port', '0', '--base-url', bad, '--state', join(root, 's3')],
        /base-url|base URL/,
      ]),
      [['serve', join(root, 'c'), '--port', '0', '--state', state], state],
      [['serve', join(root, 'c'), '--port', '70000'], /--port/],
      [['serve', join(root, 'c'), '--sets', 'bogus'], /--sets/],
    ];
    // Run them side by side: each is a short-lived process.
    const runs = cases.map(([args]) => run(args));
    for (const [i, r] of runs.entries()) {
      const [args, expected] = cases[i]!;
      assert.equal(await r.exit, 2, args.join(' '));
      if (typeof expected === 'string') assert.ok(r.stderr().includes(expected), r.stderr());
      else assert.match(r.stderr(), expected);
    }
  });
});

describe('resourcesync demo', () => {
  it('every HTML page is served as listed: its length and sha-256 match the Resource List (fixity)', async () => {
    const r = run(['demo', '--port', '0', '--json']);
    const ev = await waitForEvent(r, 'listening');
    const list = await (await fetch((ev.resourceLists as string[])[0]!)).text();
    const entries = [...list.matchAll(/<url>\s*<loc>([^<]+)<\/loc>.*?<rs:md ([^>]*)\/>/gs)].map((m) => ({
      loc: m[1]!,
      length: Number(/length="(\d+)"/.exec(m[2]!)?.[1]),
      sha: /sha-256:([0-9a-f]+)/.exec(m[2]!)?.[1],
      type: /type="([^"]+)"/.exec(m[2]!)?.[1],
    }));
    const html = entries.filter((e) => e.type?.startsWith('text/html'));
    assert.ok(html.length >= 7, `HTML pages listed: ${html.length}`);
    const failed: string[] = [];
    for (const e of html) {
      const res = await fetch(e.loc.replace(/^http:\/\/[^/]+\//, ev.url as string));
      const body = Buffer.from(await res.arrayBuffer());
      const sha = createHash('sha256').update(body).digest('hex');
      if (body.length !== e.length || sha !== e.sha) failed.push(`${e.loc}: ${body.length} bytes, listed ${e.length}`);
      assert.match(res.headers.get('link') ?? '', /rel="resourcesync"/, e.loc);
    }
    assert.deepEqual(failed, [], `${failed.length} of ${html.length} HTML pages fail the fixity check`);
    r.child.kill('SIGTERM');
    assert.equal(await r.exit, 0, r.stderr());
  });

  it('finds sample/ from src/cli (tsx) and from dist/src/cli (compiled)', () => {
    let repo = fileURLToPath(new URL('.', import.meta.url));
    while (!existsSync(join(repo, 'package.json'))) repo = dirname(repo);
    const sample = join(repo, 'sample');
    assert.equal(findSampleDir(join(repo, 'src', 'cli', 'demo.ts')), sample);
    assert.equal(findSampleDir(join(repo, 'dist', 'src', 'cli', 'demo.js')), sample);
    assert.throws(() => findSampleDir('/demo.js'), /sample/);
  });

  it('serves the bundled sample, stops on SIGTERM with exit 0', async () => {
    const r = run(['demo', '--port', '0', '--json']);
    const ev = await waitForEvent(r, 'listening');
    const url = ev.url as string;
    const sd = await fetch(`${url}.well-known/resourcesync`);
    assert.equal(sd.status, 200);
    assert.ok((await sd.text()).includes(`rel="describedby" href="${url}index.html"`));
    const root = await fetch(url);
    assert.equal(root.status, 200, 'the directory index of the sample');
    assert.match(root.headers.get('content-type') ?? '', /^text\/html/);
    const page = await fetch(`${url}index.html`);
    assert.match(page.headers.get('link') ?? '', /rel="resourcesync"/);
    // The sample's home page declares the link itself (§6.3.3, Example 9): part of its listed bytes.
    assert.match(await page.text(), /<link rel="resourcesync" href="\/resourcesync\/default\/capabilitylist.xml">/);
    const cafe = await fetch(`${url}docs/caf%C3%A9.txt`);
    assert.equal(cafe.status, 200);
    r.child.kill('SIGTERM');
    assert.equal(await r.exit, 0, r.stderr());
  });
});
