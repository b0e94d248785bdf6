import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { connect } from 'node:net';
import type { Duplex } from 'node:stream';
import { after, describe, it } from 'node:test';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { isResourceSyncError, type ResourceSyncError } from '../../src/core/errors.js';
import {
  DEFAULT_USER_AGENT,
  HttpClient,
  httpStatusOf,
  isRetriable,
  parseRetryAfter,
  readBody,
  retryWhole,
} from '../../src/http/client.js';
import { startServer, type TestServer, text } from '../destination/http-testserver.js';

const servers: TestServer[] = [];
const clients: HttpClient[] = [];
after(async () => {
  for (const c of clients) await c.destroy();
  for (const s of servers) await s.close();
});

async function serve(handler: Parameters<typeof startServer>[0]): Promise<TestServer> {
  const s = await startServer(handler);
  servers.push(s);
  return s;
}

function client(options: ConstructorParameters<typeof HttpClient>[0] = {}): HttpClient {
  const c = new HttpClient({ retryBaseDelayMs: 5, ...options });
  clients.push(c);
  return c;
}

async function rejectsWith(p: Promise<unknown>, code: string): Promise<ResourceSyncError> {
  try {
    await p;
  } catch (e) {
    assert.ok(isResourceSyncError(e), `expected ResourceSyncError, got ${String(e)}`);
    assert.equal(e.code, code, e.message);
    return e;
  }
  assert.fail(`expected ${code}`);
}

describe('HttpClient', () => {
  it('retries a 500 and then succeeds', async () => {
    const s = await serve((_req, res, n) => {
      if (n === 1) {
        res.statusCode = 500;
        res.end('boom');
      } else res.end('fine');
    });
    const c = client();
    const res = await c.get(`${s.url}/a`);
    assert.equal(await text(res.body), 'fine');
    assert.equal(s.log.length, 2);
    assert.equal(c.stats.retries, 1);
  });

  it('gives up after the retry count with RS_HTTP naming URL and status', async () => {
    const s = await serve((_req, res) => {
      res.statusCode = 502;
      res.end();
    });
    const c = client({ retries: 2 });
    const e = await rejectsWith(c.get(`${s.url}/bad`), 'RS_HTTP');
    assert.equal(httpStatusOf(e), 502);
    assert.equal(e.url, `${s.url}/bad`);
    assert.ok(isRetriable(e));
    assert.equal(s.log.length, 3);
  });

  it('does not retry a 404, and returns statuses listed in accept', async () => {
    const s = await serve((_req, res) => {
      res.statusCode = 404;
      res.end('nope');
    });
    const c = client();
    const e = await rejectsWith(c.get(`${s.url}/missing`), 'RS_HTTP');
    assert.equal(httpStatusOf(e), 404);
    assert.ok(!isRetriable(e));
    assert.equal(s.log.length, 1);
    const res = await c.get(`${s.url}/missing`, { accept: [404] });
    assert.equal(res.status, 404);
    assert.equal(await text(res.body), 'nope');
  });

  it('honours Retry-After (seconds) on 503', async () => {
    const s = await serve((_req, res, n) => {
      if (n === 1) {
        res.statusCode = 503;
        res.setHeader('retry-after', '1');
        res.end();
      } else res.end('ok');
    });
    const c = client({ retryBaseDelayMs: 1 });
    const t0 = Date.now();
    const res = await c.get(`${s.url}/x`);
    await res.discard();
    assert.ok(Date.now() - t0 >= 900, `waited ${Date.now() - t0} ms`);
    assert.equal(s.log.length, 2);
  });

  it('caps Retry-After at maxRetryDelayMs (429)', async () => {
    const s = await serve((_req, res, n) => {
      if (n === 1) {
        res.statusCode = 429;
        res.setHeader('retry-after', '3600');
        res.end();
      } else res.end('ok');
    });
    const c = client({ maxRetryDelayMs: 50 });
    const res = await c.get(`${s.url}/x`);
    assert.equal(await text(res.body), 'ok');
  });

  it('parses Retry-After seconds and HTTP dates', () => {
    const now = Date.parse('2024-01-01T00:00:00Z');
    assert.equal(parseRetryAfter('120', now), 120_000);
    assert.equal(parseRetryAfter('Mon, 01 Jan 2024 00:00:30 GMT', now), 30_000);
    assert.equal(parseRetryAfter('Sun, 31 Dec 2023 00:00:30 GMT', now), 0);
    assert.equal(parseRetryAfter('soon', now), undefined);
    assert.equal(parseRetryAfter(undefined, now), undefined);
  });

  it('retries a connection closed before the headers', async () => {
    const s = await serve((req, res, n) => {
      if (n === 1) req.socket.destroy();
      else res.end('second');
    });
    const c = client();
    const res = await c.get(`${s.url}/r`);
    assert.equal(await text(res.body), 'second');
    assert.equal(c.stats.retries, 1);
  });

  it('retries a refused connection a bounded number of times', async () => {
    const s = await serve((_req, res) => res.end());
    const url = `${s.url}/x`;
    await s.close();
    servers.splice(servers.indexOf(s), 1);
    const c = client({ retries: 2 });
    const e = await rejectsWith(c.get(url), 'RS_HTTP');
    assert.match(e.message, /ECONNREFUSED/);
    assert.equal(c.stats.retries, 2);
  });

  it('rejects the body iteration when the connection resets mid-body, and retryWhole recovers', async () => {
    const s = await serve((req, res, n) => {
      res.setHeader('content-length', '100000');
      res.write(Buffer.alloc(1000, 97));
      if (n <= 2) setTimeout(() => req.socket.destroy(), 20);
      else res.end(Buffer.alloc(99000, 98));
    });
    const c = client();
    const res = await c.get(`${s.url}/big`);
    const e = await rejectsWith(readBody(res), 'RS_HTTP');
    assert.ok(isRetriable(e));
    assert.equal(e.url, `${s.url}/big`);
    let attempts = 0;
    const body = await retryWhole(
      async () => {
        attempts++;
        return readBody(await c.get(`${s.url}/big`));
      },
      { baseDelayMs: 1 },
    );
    assert.equal(body.length, 100000);
    assert.equal(attempts, 2);
  });

  it('fires the idle body timeout when a server stalls mid-body', async () => {
    const s = await serve((_req, res) => {
      res.setHeader('content-length', '10');
      res.write('abc'); // and never more
    });
    const c = client({ bodyIdleTimeoutMs: 150 });
    const res = await c.get(`${s.url}/stall`);
    const t0 = Date.now();
    const e = await rejectsWith(text(res.body), 'RS_TIMEOUT');
    assert.ok(Date.now() - t0 < 5000);
    assert.ok(isRetriable(e));
  });

  it('does not time out a slow consumer (backpressure), and delivers every byte', async () => {
    const total = 32 * 1024 * 1024;
    let written = 0;
    const s = await serve((_req, res) => {
      res.setHeader('content-length', String(total));
      const chunk = Buffer.alloc(64 * 1024, 7);
      const pump = (): void => {
        while (written < total) {
          written += chunk.byteLength;
          if (!res.write(chunk)) {
            res.once('drain', pump);
            return;
          }
        }
        res.end();
      };
      pump();
    });
    const c = client({ bodyIdleTimeoutMs: 300 });
    const res = await c.get(`${s.url}/big`);
    let n = 0;
    let pauses = 0;
    let writtenAfterFirstPause = -1;
    for await (const chunk of res.body) {
      n += chunk.byteLength;
      if (pauses < 3) {
        pauses++;
        await new Promise((resolve) => setTimeout(resolve, 700));
        if (writtenAfterFirstPause < 0) writtenAfterFirstPause = written;
      }
    }
    assert.equal(n, total);
    // The server was held back by the slow consumer (so the test did exercise backpressure).
    assert.ok(writtenAfterFirstPause < total, 'the whole body was buffered before the consumer resumed');
  });

  it('fires the idle body timeout when a server stalls right after the headers', async () => {
    const s = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/xml' });
      res.flushHeaders();
    });
    const c = client({ bodyIdleTimeoutMs: 150 });
    const res = await c.get(`${s.url}/stall`);
    await rejectsWith(text(res.body), 'RS_TIMEOUT');
  });

  it('enforces a whole-request deadline against a server trickling bytes', async () => {
    const s = await serve((_req, res) => {
      res.setHeader('content-length', '1000');
      const timer = setInterval(() => res.write('x'), 20);
      res.on('close', () => clearInterval(timer));
    });
    const c = client({ bodyIdleTimeoutMs: 1000, requestTimeoutMs: 300 });
    const res = await c.get(`${s.url}/trickle`);
    const t0 = Date.now();
    const e = await rejectsWith(text(res.body), 'RS_TIMEOUT');
    assert.match(e.message, /within 300 ms/);
    assert.ok(isRetriable(e));
    assert.ok(Date.now() - t0 < 3000);
    // A caller's abort is still RS_ABORTED, and a quick response is not affected.
    const quick = await serve((_req, r) => r.end('fast'));
    assert.equal(await text((await c.get(`${quick.url}/q`, { timeoutMs: 5000 })).body), 'fast');
    await rejectsWith(c.get(`${s.url}/t`, { signal: AbortSignal.abort() }), 'RS_ABORTED');
  });

  it('times out waiting for headers (and retries first)', async () => {
    const s = await serve(() => {
      // never answers
    });
    const c = client({ headersTimeoutMs: 100, retries: 1 });
    const e = await rejectsWith(c.get(`${s.url}/silent`), 'RS_TIMEOUT');
    assert.match(e.message, /headers timeout/);
    assert.equal(s.log.length, 2);
  });

  it('decodes gzip, deflate and br bodies', async () => {
    const payload = 'hello '.repeat(1000);
    const s = await serve((req, res) => {
      const enc = req.url?.slice(1) ?? '';
      assert.match(String(req.headers['accept-encoding']), /gzip/);
      res.setHeader('content-encoding', enc);
      const data =
        enc === 'gzip' ? gzipSync(payload) : enc === 'deflate' ? deflateSync(payload) : brotliCompressSync(payload);
      res.end(data);
    });
    const c = client();
    for (const enc of ['gzip', 'deflate', 'br'])
      assert.equal(await text((await c.get(`${s.url}/${enc}`)).body), payload, enc);
  });

  it('reports a corrupt gzip body', async () => {
    const s = await serve((_req, res) => {
      res.setHeader('content-encoding', 'gzip');
      res.end('this is not gzip');
    });
    const c = client();
    const e = await rejectsWith(text((await c.get(`${s.url}/x`)).body), 'RS_HTTP');
    assert.match(e.message, /decode gzip/);
  });

  it('follows redirects (relative Location, each status) to the final URL', async () => {
    const s = await serve((req, res) => {
      const m = /^\/r(\d+)\/(\d)$/.exec(req.url ?? '');
      if (m !== null) {
        res.statusCode = Number(m[1]);
        res.setHeader('location', Number(m[2]) > 0 ? `../r${m[1]}/${Number(m[2]) - 1}` : '/final?x=1');
        res.end();
        return;
      }
      res.end(`at ${req.url}`);
    });
    const c = client();
    for (const status of [301, 302, 303, 307, 308]) {
      const res = await c.get(`${s.url}/r${status}/2`);
      assert.equal(res.url, `${s.url}/final?x=1`);
      assert.equal(await text(res.body), 'at /final?x=1');
    }
    assert.equal(c.stats.redirects, 15);
  });

  it('stops redirect loops and long chains', async () => {
    const s = await serve((req, res) => {
      res.statusCode = 302;
      if (req.url === '/a') res.setHeader('location', '/b');
      else if (req.url === '/b') res.setHeader('location', '/a');
      else res.setHeader('location', `/n${Number(req.url?.slice(2) ?? 0) + 1}`);
      res.end();
    });
    const c = client({ maxRedirects: 5 });
    const loop = await rejectsWith(c.get(`${s.url}/a`), 'RS_HTTP');
    assert.match(loop.message, /redirect loop/);
    const chain = await rejectsWith(c.get(`${s.url}/n0`), 'RS_HTTP');
    assert.match(chain.message, /more than 5 redirects/);
  });

  it('sends the bearer token, custom headers and User-Agent on every request, redirects included', async () => {
    const s = await serve((req, res) => {
      if (req.url === '/start') {
        res.statusCode = 301;
        res.setHeader('location', '/end');
        res.end();
      } else res.end('ok');
    });
    const c = client({ bearerToken: 'sekrit', headers: { 'X-Test': 'yes' } });
    await (await c.get(`${s.url}/start`)).discard();
    await (await c.head(`${s.url}/other`)).discard();
    assert.equal(s.log.length, 3);
    for (const r of s.log) {
      assert.equal(r.headers.authorization, 'Bearer sekrit');
      assert.equal(r.headers['x-test'], 'yes');
      assert.equal(r.headers['user-agent'], DEFAULT_USER_AGENT);
    }
    assert.match(DEFAULT_USER_AGENT, /^resourcesync\/0\.1 \(\+https:\/\/github\.com\//);
  });

  it('does not send the token to another origin on a redirect', async () => {
    const other = await serve((_req, res) => res.end('other'));
    const s = await serve((_req, res) => {
      res.statusCode = 302;
      res.setHeader('location', `${other.url.replace('127.0.0.1', 'localhost')}/x`);
      res.end();
    });
    const c = client({ bearerToken: 'sekrit' });
    const res = await c.get(`${s.url}/go`);
    assert.equal(await text(res.body), 'other');
    assert.equal(s.log[0]?.headers.authorization, 'Bearer sekrit');
    assert.equal(other.log[0]?.headers.authorization, undefined);
  });

  it('keeps requests in flight per host within connectionsPerHost', async () => {
    let inFlight = 0;
    let max = 0;
    const s = await serve((_req, res) => {
      inFlight++;
      max = Math.max(max, inFlight);
      setTimeout(() => {
        inFlight--;
        res.end('x');
      }, 30);
    });
    const c = client({ connectionsPerHost: 3 });
    await Promise.all(
      Array.from({ length: 12 }, async (_, i) => {
        const res = await c.get(`${s.url}/${i}`);
        await text(res.body);
      }),
    );
    assert.equal(s.log.length, 12);
    assert.ok(max <= 3, `max in flight ${max}`);
    assert.ok(max >= 2, `max in flight ${max}`);
  });

  it('spaces requests to a host by the politeness delay', async () => {
    const s = await serve((_req, res) => res.end('x'));
    const times: number[] = [];
    s.server.on('request', () => times.push(Date.now()));
    const c = client({ politenessDelayMs: 80 });
    await Promise.all(Array.from({ length: 4 }, async (_, i) => text((await c.get(`${s.url}/${i}`)).body)));
    times.sort((a, b) => a - b);
    assert.ok(
      (times[3] as number) - (times[0] as number) >= 3 * 80 * 0.75,
      `spread ${(times[3] as number) - (times[0] as number)}`,
    );
  });

  it('bounds body size (RS_LIMIT)', async () => {
    const s = await serve((_req, res) => res.end(Buffer.alloc(5000)));
    const c = client({ maxDocumentBytes: 1000 });
    await rejectsWith(text((await c.get(`${s.url}/x`, { maxBytes: 'document' })).body), 'RS_LIMIT');
    await rejectsWith(text((await c.get(`${s.url}/x`, { maxBytes: 100 })).body), 'RS_LIMIT');
    assert.equal((await readBody(await c.get(`${s.url}/x`))).length, 5000);
  });

  it('aborts with RS_ABORTED, while waiting for headers or for a retry', async () => {
    const s = await serve((req, res) => {
      if (req.url === '/retry') {
        res.statusCode = 503;
        res.setHeader('retry-after', '60');
        res.end();
      }
    });
    const c = client({ maxRetryDelayMs: 60_000 });
    await rejectsWith(c.get(`${s.url}/hang`, { signal: AbortSignal.timeout(100) }), 'RS_ABORTED');
    await rejectsWith(c.get(`${s.url}/retry`, { signal: AbortSignal.timeout(100) }), 'RS_ABORTED');
  });

  it('counts requests and bytes', async () => {
    const s = await serve((_req, res) => res.end('12345'));
    const c = client();
    for (let i = 0; i < 3; i++) await text((await c.get(`${s.url}/${i}`)).body);
    assert.equal(c.stats.requests, 3);
    assert.equal(c.stats.bytes, 15);
  });

  it('goes through an HTTP proxy (CONNECT tunnel) when configured', async () => {
    const s = await serve((req, res) => res.end(`origin saw ${req.url}`));
    const tunnels: string[] = [];
    const proxy = await serve((_req, res) => {
      res.statusCode = 405;
      res.end();
    });
    proxy.server.on('connect', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      tunnels.push(req.url ?? '');
      const [host, port] = (req.url ?? '').split(':');
      const upstream = connect(Number(port), host as string, () => {
        socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        upstream.write(head);
        upstream.pipe(socket);
        socket.pipe(upstream);
      });
      upstream.on('error', () => socket.destroy());
      socket.on('error', () => upstream.destroy());
    });
    const c = client({ proxy: proxy.url });
    const res = await c.get(`${s.url}/via-proxy`);
    assert.equal(await text(res.body), 'origin saw /via-proxy');
    assert.deepEqual(tunnels, [s.url.replace('http://', '')]);
    assert.throws(
      () => new HttpClient({ proxy: 'not a url' }),
      (e: unknown) => isResourceSyncError(e, 'RS_CONFIG'),
    );
  });

  it('refuses other URL schemes', async () => {
    await rejectsWith(client().get('ftp://example.org/x'), 'RS_HTTP');
  });
});
