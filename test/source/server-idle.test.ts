// The idle-socket timeout of the Source server (a server 'timeout' listener): a socket whose request waits for
// the Source is spared, the timer starts again with the response and then drops a client that stopped reading;
// an idle keep-alive connection and a half-sent request are dropped as before.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, open, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type DirectorySource, openDirectorySource, type SourceSite } from '../../src/source/index.js';
import { createSourceServer, type RequestLogEntry } from '../../src/source/server.js';
import { sleep } from './server-helpers.js';

const BIG = 32 * 1024 * 1024;
let root = '';
let site: DirectorySource;

before(async () => {
  root = await mkdtemp(join(tmpdir(), 'rs-idle-'));
  const dir = join(root, 'c');
  await mkdir(dir);
  const fh = await open(join(dir, 'big.bin'), 'w');
  const chunk = Buffer.alloc(1024 * 1024, 0x61);
  for (let i = 0; i < BIG / chunk.length; i++) await fh.write(chunk);
  await fh.close();
  site = await openDirectorySource({ dir, baseUrl: 'http://example.test/', stateDir: join(root, 'state') });
});
after(async () => {
  await site?.close();
  await rm(root, { recursive: true, force: true });
});

/** The real Source, with a resource lookup that takes `ms` (longer than the idle timeout). */
function slowSite(ms: number): SourceSite {
  return {
    baseUrl: site.baseUrl,
    sourceDescriptionUrl: site.sourceDescriptionUrl,
    document: (p) => site.document(p),
    resource: async (p) => {
      await sleep(ms);
      return site.resource(p);
    },
    capabilityListUrl: (p) => site.capabilityListUrl(p),
    robotsTxt: () => site.robotsTxt(),
    onChange: (l) => site.onChange(l),
    close: async () => {},
  };
}

describe('idle-socket timeout', () => {
  it('a slow lookup is spared; the response then drops a client that stopped reading', async () => {
    const log: RequestLogEntry[] = [];
    const server = createSourceServer(slowSite(900), { idleTimeoutMs: 300, onRequest: (e) => log.push(e) });
    const { port } = await server.listen(0);
    const socket = connect(port, '127.0.0.1');
    let received = 0;
    const closed = new Promise<void>((r) => socket.on('close', () => r()));
    socket.on('connect', () => socket.write('GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n'));
    const first = new Promise<void>((resolve, reject) => {
      socket.once('data', (c: Buffer) => {
        received += c.length;
        socket.pause(); // stops reading after the first chunk
        resolve();
      });
      socket.once('close', () => reject(new Error('closed before the response started')));
    });
    socket.on('error', () => {});
    try {
      await first; // the lookup outlived the idle timeout three times, and the response started
      const deadline = Date.now() + 10_000;
      while (log.length === 0 && Date.now() < deadline) await sleep(50);
      assert.equal(log.length, 1, 'the stalled response was ended by the idle timeout');
      assert.equal(log[0]!.aborted, true);
      assert.equal(log[0]!.status, 200);
      socket.resume();
      socket.on('data', (c: Buffer) => {
        received += c.length;
      });
      await closed;
      assert.ok(received < BIG);
    } finally {
      socket.destroy();
      await server.close();
    }
  });

  it('a slow lookup answered in full on a keep-alive connection, which is then reused', async () => {
    const server = createSourceServer(slowSite(700), { idleTimeoutMs: 250, keepAliveTimeoutMs: 5_000 });
    const { port } = await server.listen(0);
    const socket = connect(port, '127.0.0.1');
    let text = '';
    socket.on('data', (c: Buffer) => {
      text += c.toString('latin1');
    });
    await new Promise<void>((r) => socket.on('connect', () => r()));
    socket.write('HEAD /big.bin HTTP/1.1\r\nHost: x\r\n\r\n');
    try {
      const deadline = Date.now() + 10_000;
      while (!text.includes('\r\n\r\n') && Date.now() < deadline) await sleep(20);
      assert.match(text, /^HTTP\/1\.1 200 /);
      socket.write('HEAD /big.bin HTTP/1.1\r\nHost: x\r\n\r\n');
      while (text.split('HTTP/1.1 200').length < 3 && Date.now() < deadline) await sleep(20);
      assert.equal(text.split('HTTP/1.1 200').length, 3, text);
    } finally {
      socket.destroy();
      await server.close();
    }
  });

  it('an idle connection with no request is dropped after the idle timeout', async () => {
    const server = createSourceServer(site, { idleTimeoutMs: 300, keepAliveTimeoutMs: 60_000 });
    const { port } = await server.listen(0);
    const socket = connect(port, '127.0.0.1');
    const t0 = Date.now();
    await new Promise<void>((r) => socket.on('close', () => r()));
    assert.ok(Date.now() - t0 < 8_000);
    await server.close();
  });
});
