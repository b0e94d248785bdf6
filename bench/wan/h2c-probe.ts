// Why `serve` offers no cleartext HTTP/2 (h2c), measured: 2 KB responses on loopback, 16 callers, 4,000 requests.
//
//   node --import tsx bench/wan/h2c-probe.ts
//
// 1. undici 7's Agent/Pool drop `useH2c` (Pool builds its own connector without it): the request goes out as
//    HTTP/1.1 and the h2c server's answer fails to parse (printed below). Only a bare `Client`/`H2CClient` (one
//    connection) speaks h2c by prior knowledge.
// 2. h2c and HTTP/1.1 on one port needs the first bytes read to tell them apart: a socket handed to a node:http2
//    server after that (`socket.unshift` + `emit('connection')`) loses them (the session answers GOAWAY); a JS
//    Duplex in between works but is slow (rates below).
// 3. Even on its own port, node:http2 serves fewer requests per second than node:http on loopback (rates below),
//    and loopback is where this project's harvest is CPU-bound: h2c there could only lose.
import { createServer as createHttp1, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttp2, type Http2ServerRequest, type Http2ServerResponse } from 'node:http2';
import { createRequire } from 'node:module';
import { createServer as createNet, type AddressInfo, type Socket } from 'node:net';
import { Duplex } from 'node:stream';
import type * as Undici from 'undici';

const undici = createRequire(import.meta.url)('undici') as typeof Undici;
const body = Buffer.alloc(2048, 'x');
const handler = (req: IncomingMessage | Http2ServerRequest, res: ServerResponse | Http2ServerResponse): void => {
  res.setHeader('x-version', req.httpVersion);
  res.end(body);
};
const h1 = createHttp1({ keepAlive: true }, handler);
const h2 = createHttp2(handler);
const h2Direct = createHttp2(handler);
/** One port, both protocols: the first bytes decide; h2c goes through a JS Duplex (see 2.). */
const front = createNet((socket: Socket) => {
  socket.once('data', (chunk: Buffer) => {
    socket.pause();
    if (chunk.subarray(0, 3).toString() !== 'PRI') {
      socket.unshift(chunk);
      h1.emit('connection', socket);
      socket.resume();
      return;
    }
    const duplex = new Duplex({
      read: () => void socket.resume(),
      write: (c: Buffer, _e, cb) => void socket.write(c, cb),
      final: (cb) => {
        socket.end();
        cb();
      },
      destroy: (err, cb) => {
        socket.destroy(err ?? undefined);
        cb(err);
      },
    });
    socket.on('data', (d: Buffer) => {
      if (!duplex.push(d)) socket.pause();
    });
    socket.on('end', () => duplex.push(null));
    socket.on('close', () => duplex.destroy());
    duplex.push(chunk);
    h2.emit('connection', duplex);
  });
});
const listen = async (s: { listen(p: number, h: string, cb: () => void): unknown; address(): unknown }) => {
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
};
const frontUrl = await listen(front);
const h1Url = await listen(h1);
const h2Url = await listen(h2Direct);

async function rate(name: string, url: string, dispatcher: Undici.Dispatcher, n = 4000): Promise<void> {
  let next = 0;
  let version = '';
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < n) {
        next++;
        const r = await undici.request(`${url}/x`, { dispatcher });
        version = String(r.headers['x-version']);
        await r.body.arrayBuffer();
      }
    }),
  );
  process.stdout.write(`${name}: ${(n / ((performance.now() - t0) / 1000)).toFixed(0)}/s (HTTP/${version})\n`);
}

const h2c = (): Undici.Dispatcher =>
  new undici.Agent({ factory: (o) => new undici.H2CClient(o as string, { maxConcurrentStreams: 100 }) });
await rate(
  'Agent { allowH2, useH2c } (1.)',
  h2Url,
  new undici.Agent({ allowH2: true, useH2c: true } as Undici.Agent.Options),
).catch((e: unknown) => process.stdout.write(`Agent { allowH2, useH2c } (1.): ${String(e)}\n`));
for (let round = 0; round < 2; round++) {
  await rate('HTTP/1.1, 8 connections', h1Url, new undici.Agent({ connections: 8 }));
  await rate('HTTP/1.1 through the one-port front', frontUrl, new undici.Agent({ connections: 8 }));
  await rate('h2c through the one-port front (JS Duplex)', frontUrl, h2c());
  await rate('h2c on its own port, 1 connection', h2Url, h2c());
}
process.exit(0);
