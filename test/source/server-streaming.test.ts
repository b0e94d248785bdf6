// Streaming behaviour of the Source server: backpressure with a slow consumer, aborted downloads leak no file
// descriptors, graceful close with an in-flight download, and the close deadline.
import assert from 'node:assert/strict';
import { mkdtemp, open, rm } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type DirectorySource, openDirectorySource, type SourceSite } from '../../src/source/index.js';
import { createSourceServer, type RequestLogEntry } from '../../src/source/server.js';
import { bytesReadByProcess, fetchRaw, openFdCount, sleep } from './server-helpers.js';

const BIG = 48 * 1024 * 1024;
let root = '';
let site: DirectorySource;

before(async () => {
  root = await mkdtemp(join(tmpdir(), 'rs-stream-'));
  const dir = join(root, 'c');
  const { mkdir } = await import('node:fs/promises');
  await mkdir(dir);
  const fh = await open(join(dir, 'big.bin'), 'w');
  const chunk = Buffer.alloc(1024 * 1024, 0x61);
  for (let i = 0; i < BIG / chunk.length; i++) await fh.write(chunk);
  await fh.close();
  site = await openDirectorySource({
    dir,
    baseUrl: 'http://example.test/',
    stateDir: join(root, 'state'),
    watch: false,
  });
});
after(async () => {
  await site?.close();
  await rm(root, { recursive: true, force: true });
});

/** Opens a connection, sends a GET for /big.bin and resolves once the first body bytes arrived, paused. */
interface Download {
  readonly socket: Socket;
  /** Bytes received, headers included. */
  readonly received: () => number;
  /** Body bytes received (headers excluded). */
  readonly body: () => number;
  readonly ended: Promise<void>;
}
function startDownload(port: number): Promise<Download> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let received = 0;
    let headerLength = -1;
    let head = '';
    let resolved = false;
    const ended = new Promise<void>((r) => socket.on('close', () => r()));
    socket.on('connect', () => socket.write('GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n'));
    socket.on('data', (c: Buffer) => {
      received += c.length;
      if (headerLength < 0) {
        head += c.toString('latin1');
        const end = head.indexOf('\r\n\r\n');
        if (end >= 0) headerLength = end + 4;
      }
      if (!resolved) {
        resolved = true;
        socket.pause();
        resolve({ socket, received: () => received, body: () => received - Math.max(0, headerLength), ended });
      }
    });
    socket.on('error', (e) => {
      if (!resolved) reject(e);
    });
  });
}

/**
 * Waits until `read()` has grown by less than `slack` for `quietMs` (reading /proc itself counts a little), or
 * `maxMs` elapsed; returns the last value.
 */
async function settle(read: () => number, quietMs = 400, maxMs = 8_000, slack = 64 * 1024): Promise<number> {
  const start = Date.now();
  let last = read();
  let since = Date.now();
  while (Date.now() - start < maxMs) {
    await sleep(50);
    const v = read();
    if (Math.abs(v - last) >= slack) {
      last = v;
      since = Date.now();
    } else if (Date.now() - since >= quietMs) break;
  }
  return last;
}

describe('streaming', () => {
  it('a client that does not read does not make the server read (and buffer) the file', async () => {
    const server = createSourceServer(site, { closeTimeoutMs: 200 });
    const { port } = await server.listen(0);
    const before = bytesReadByProcess();
    const dl = await startDownload(port);
    const readDuring = (await settle(bytesReadByProcess)) - before;
    // Socket buffers on loopback hold a few MB; a server that ignored backpressure would read all 48 MB at once.
    assert.ok(readDuring < BIG / 2, `server read ${readDuring} bytes of ${BIG} for a client that reads nothing`);
    dl.socket.destroy();
    await server.close();
  });

  it('many aborted downloads leave no file descriptor open', async () => {
    const log: RequestLogEntry[] = [];
    const server = createSourceServer(site, { onRequest: (e) => log.push(e) });
    const { port } = await server.listen(0);
    const baseline = openFdCount();
    const N = 60;
    for (let i = 0; i < N; i += 10) {
      const batch = await Promise.all(Array.from({ length: 10 }, () => startDownload(port)));
      for (const d of batch) d.socket.destroy();
      await Promise.all(batch.map((d) => d.ended));
    }
    const deadline = Date.now() + 8_000;
    while ((log.length < N || openFdCount() > baseline) && Date.now() < deadline) await sleep(25);
    assert.equal(log.length, N);
    assert.ok(log.every((e) => e.aborted && e.status === 200));
    assert.ok(openFdCount() <= baseline, `fds: ${openFdCount()} > baseline ${baseline}`);
    await server.close();
  });

  it('close() lets an in-flight download finish, refuses new connections, then resolves', async () => {
    const server = createSourceServer(site, { closeTimeoutMs: 20_000 });
    const { port } = await server.listen(0);
    const dl = await startDownload(port);
    let closed = false;
    const closing = server.close().then(() => {
      closed = true;
    });
    await sleep(50);
    await assert.rejects(
      new Promise((resolve, reject) => {
        const s = connect(port, '127.0.0.1');
        s.on('connect', () => {
          s.destroy();
          resolve(undefined);
        });
        s.on('error', reject);
      }),
      /ECONNREFUSED/,
    );
    assert.equal(closed, false, 'close() waits for the in-flight response');
    dl.socket.resume();
    await dl.ended;
    await closing;
    // The whole body arrived before the server closed the connection.
    assert.equal(dl.body(), BIG);
  });

  it('close() destroys a download that does not finish before the deadline', async () => {
    const server = createSourceServer(site, { closeTimeoutMs: 300 });
    const { port } = await server.listen(0);
    const dl = await startDownload(port);
    const t0 = Date.now();
    await server.close();
    assert.ok(Date.now() - t0 < 5_000);
    // A paused socket does not notice the close; read what was buffered, then it ends.
    dl.socket.resume();
    await dl.ended;
    assert.ok(dl.received() < BIG, `received ${dl.received()} of ${BIG}`);
  });

  it('a client that stops reading is dropped after the idle timeout', async () => {
    const log: RequestLogEntry[] = [];
    const server = createSourceServer(site, { idleTimeoutMs: 300, onRequest: (e) => log.push(e) });
    const { port } = await server.listen(0);
    const dl = await startDownload(port);
    const deadline = Date.now() + 10_000;
    while (log.length === 0 && Date.now() < deadline) await sleep(50);
    assert.equal(log.length, 1);
    assert.equal(log[0]!.aborted, true);
    dl.socket.resume();
    await dl.ended;
    assert.ok(dl.body() < BIG);
    await server.close();
  });

  it('a slow lookup (cold generation) is not cut by the idle timeout; the response then is', async () => {
    // Fault injection around the real Source: document() takes longer than the idle timeout.
    const slow: SourceSite = {
      baseUrl: site.baseUrl,
      sourceDescriptionUrl: site.sourceDescriptionUrl,
      document: async (p) => {
        await sleep(900);
        return site.document(p);
      },
      resource: (p) => site.resource(p),
      capabilityListUrl: (p) => site.capabilityListUrl(p),
      robotsTxt: () => site.robotsTxt(),
      onChange: (l) => site.onChange(l),
      close: async () => {},
    };
    const server = createSourceServer(slow, { idleTimeoutMs: 300 });
    const { port } = await server.listen(0);
    const r = await fetchRaw(port, '/.well-known/resourcesync');
    assert.equal(r.status, 200);
    assert.match(r.body.toString(), /capability="description"/);
    await server.close();
  });

  it('a client that never finishes its headers gets 408 and is closed', async () => {
    const server = createSourceServer(site, { headersTimeoutMs: 300, requestTimeoutMs: 600 });
    const { port } = await server.listen(0);
    const socket = connect(port, '127.0.0.1');
    let reply = '';
    socket.on('data', (c: Buffer) => {
      reply += c.toString('latin1');
    });
    const closed = new Promise<void>((r) => socket.on('close', () => r()));
    socket.write('GET /big.bin HTTP/1.1\r\nHost: x\r\n');
    await closed;
    assert.match(reply, /^HTTP\/1\.1 408 /);
    await server.close();
  });

  it('connections beyond maxConnections are refused', async () => {
    const server = createSourceServer(site, { maxConnections: 2 });
    const { port } = await server.listen(0);
    const open = (): Promise<{ socket: Socket; closed: Promise<void> }> =>
      new Promise((resolve) => {
        const socket = connect(port, '127.0.0.1');
        const closed = new Promise<void>((r) => socket.on('close', () => r()));
        socket.on('error', () => {});
        socket.on('connect', () => resolve({ socket, closed }));
      });
    const a = await open();
    const b = await open();
    await sleep(50);
    const c = await open();
    await c.closed; // dropped by the server
    const r = await fetchRaw(port, '/big.bin', { method: 'HEAD' }).catch((e: unknown) => e);
    assert.ok(r instanceof Error, 'a fourth connection is refused too while two are open');
    a.socket.destroy();
    b.socket.destroy();
    await Promise.all([a.closed, b.closed]);
    await sleep(50);
    assert.equal((await fetchRaw(port, '/big.bin', { method: 'HEAD' })).status, 200);
    await server.close();
  });

  it('an idle keep-alive connection does not hold close() up', async () => {
    const server = createSourceServer(site, { keepAliveTimeoutMs: 60_000, closeTimeoutMs: 30_000 });
    const { port } = await server.listen(0);
    const socket = connect(port, '127.0.0.1');
    await new Promise<void>((resolve) => {
      socket.on('data', (c: Buffer) => {
        if (c.toString('latin1').includes('\r\n\r\n')) resolve();
      });
      socket.write('HEAD /big.bin HTTP/1.1\r\nHost: x\r\n\r\n');
    });
    const t0 = Date.now();
    await server.close();
    assert.ok(Date.now() - t0 < 5_000);
    socket.destroy();
  });
});
