import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, describe, it } from 'node:test';
import { HttpClient, readBody } from '../../src/http/client.js';
import { createSourceHandler } from '../../src/source/http/handler.js';
import { createNodeServer, type RequestLogEntry, type SourceServer } from '../../src/source/http/node.js';
import { cliCommand } from '../destination/static-source.js';

const openssl = ['/usr/bin/openssl', '/usr/local/bin/openssl'].find((p) => existsSync(p));

describe('HTTP/2 over TLS (serve --tls-cert, the client by ALPN)', {
  skip: openssl === undefined,
  timeout: 120_000,
}, () => {
  let dir = '';
  let cert: Buffer;
  let key: Buffer;
  const cleanup: (() => Promise<void> | void)[] = [];
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rs-h2-'));
    execFileSync(
      openssl as string,
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
        '-days',
        '2',
        '-subj',
        '/CN=127.0.0.1',
        '-addext',
        'subjectAltName=IP:127.0.0.1',
      ],
      { stdio: 'ignore' },
    );
    cert = await readFile(join(dir, 'cert.pem'));
    key = await readFile(join(dir, 'key.pem'));
  });
  after(async () => {
    for (const c of cleanup.reverse()) await c();
    await rm(dir, { recursive: true, force: true });
  });

  /** A TLS Source whose /r/ route answers after `delayMs`, logging versions and counting connections. */
  async function tlsServer(
    delayMs: number,
  ): Promise<{ url: string; log: RequestLogEntry[]; connections: () => number }> {
    const log: RequestLogEntry[] = [];
    const handler = createSourceHandler(new Promise(() => undefined));
    handler.mount('/r/', async (req) => {
      await new Promise((r) => setTimeout(r, delayMs));
      return { status: 200, headers: { 'content-type': 'text/plain' }, body: Buffer.from(`resource ${req.subpath}`) };
    });
    const server: SourceServer = createNodeServer(handler, { tls: { cert, key }, onRequest: (e) => log.push(e) });
    let connections = 0;
    server.httpServer.on('secureConnection', (_s: Socket) => connections++);
    const { url } = await server.listen(0, '127.0.0.1');
    cleanup.push(() => server.close());
    return { url, log, connections: () => connections };
  }

  it("the client speaks HTTP/2 when the Source offers it: the window's requests share one connection", async () => {
    const src = await tlsServer(30);
    const client = new HttpClient({ ca: cert });
    cleanup.push(() => client.close());
    const bodies = await Promise.all(
      Array.from({ length: 24 }, async (_, i) => (await readBody(await client.get(`${src.url}r/${i}`))).toString()),
    );
    assert.deepEqual(
      bodies,
      Array.from({ length: 24 }, (_, i) => `resource ${i}`),
    );
    assert.deepEqual(new Set(src.log.map((e) => e.version)), new Set(['2.0']));
    assert.equal(src.connections(), 1, `HTTP/2 streams on one connection: ${src.connections()}`);
  });

  it('http2: false keeps HTTP/1.1 (a connection per request in flight)', async () => {
    const src = await tlsServer(30);
    const client = new HttpClient({ ca: cert, http2: false });
    cleanup.push(() => client.close());
    await Promise.all(Array.from({ length: 8 }, async (_, i) => readBody(await client.get(`${src.url}r/${i}`))));
    assert.deepEqual(new Set(src.log.map((e) => e.version)), new Set(['1.1']));
    assert.ok(src.connections() > 1);
  });

  it('serve --tls-cert/--tls-key and sync over https: every request is HTTP/2', async () => {
    const coll = join(dir, 'collection');
    await mkdir(coll, { recursive: true });
    for (let i = 0; i < 30; i++) await writeFile(join(coll, `f${i}.txt`), `file ${i}\n`.repeat(20));
    const { cmd, args } = cliCommand();
    const serve = spawn(
      cmd,
      [
        ...args,
        'serve',
        coll,
        '--port',
        '0',
        '--json',
        '--log',
        '--no-notify',
        '--no-explorer',
        '--state',
        join(dir, 'state'),
        '--tls-cert',
        join(dir, 'cert.pem'),
        '--tls-key',
        join(dir, 'key.pem'),
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    cleanup.push(() => {
      serve.kill('SIGKILL');
    });
    const lines: Record<string, unknown>[] = [];
    const listening = new Promise<string>((resolve, reject) => {
      createInterface({ input: serve.stdout }).on('line', (line) => {
        const e = JSON.parse(line) as Record<string, unknown>;
        lines.push(e);
        if (e['event'] === 'listening') resolve(e['url'] as string);
      });
      serve.on('exit', (code) => reject(new Error(`serve exited ${code}`)));
    });
    const url = await listening;
    assert.match(url, /^https:/);
    const copy = join(dir, 'copy');
    const sync = spawn(cmd, [...args, 'sync', '--json', '--no-dumps', url, copy], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, NODE_EXTRA_CA_CERTS: join(dir, 'cert.pem') },
    });
    let out = '';
    let err = '';
    sync.stdout.on('data', (d: Buffer) => (out += d.toString()));
    sync.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const code = await new Promise<number | null>((r) => sync.on('close', r));
    assert.equal(code, 0, `${out}${err}`);
    const summary = JSON.parse(out) as { counts: { created: number; failed: number } };
    assert.equal(summary.counts.created, 30);
    assert.equal(await readFile(join(copy, '127.0.0.1_' + new URL(url).port, 'f7.txt'), 'utf8'), 'file 7\n'.repeat(20));
    const requests = lines.filter((e) => e['event'] === 'request');
    assert.ok(requests.length >= 31, `${requests.length} requests logged`);
    assert.deepEqual(new Set(requests.map((e) => e['version'])), new Set(['2.0']));
  });
});
