/**
 * A TCP proxy on 127.0.0.1 that makes loopback look like a wide-area network, for benchmarks: a delay per
 * direction (half the round trip each way), an optional bandwidth cap (a shared link per direction, as an
 * access line is), and optional loss of connections (a connection reset part-way through a response).
 *
 * What it emulates:
 * - Latency: every chunk reaches the other side `delayMs` after it was sent, in order.
 * - Connection set-up: the TCP handshake costs one round trip before a new connection can carry data (the
 *   client's first bytes are held until one round trip after the connection was accepted), so a client that
 *   opens connections pays for them as it would across a network. A TLS handshake goes through the proxy and
 *   pays its round trips naturally.
 * - Bandwidth: each direction is one link of `bandwidthBytesPerSec`: a chunk leaves when the link has sent
 *   everything queued before it (serialisation delay), then travels `delayMs`.
 * - Loss: with probability `lossRate` a new connection is cut (both sides reset) after a random number of
 *   response bytes below 64 KiB.
 *
 * Not emulated: TCP slow start and packet loss within a connection (loopback's window is large from the
 * start). Memory: bounded by what is in flight; a side is paused while more than 4 MiB of its data is queued.
 *
 * Stand-alone: `node --import tsx bench/wan/proxy.ts <listen-port> <target-port> <rtt-ms> [bytes/s] [loss]`.
 *
 * @module
 */
import { createServer, connect, type Server, type Socket } from 'node:net';

export interface ProxyOptions {
  /** Port of the real server on 127.0.0.1 (can be set later with {@link WanProxy.target}). */
  targetPort?: number;
  /** Round trip added, in ms (half of it each way). */
  rttMs?: number;
  /** Bandwidth of each direction in bytes/s (default unlimited). */
  bandwidthBytesPerSec?: number;
  /** Probability that a connection is cut part-way (default 0). */
  lossRate?: number;
  /** Listening port (default 0: any free port). */
  port?: number;
}

export interface ProxyStats {
  /** Connections accepted. */
  connections: number;
  /** Connections open now. */
  open: number;
  /**
   * Most connections opened since the last {@link WanProxy.resetStats} open at once (connections left from
   * before it, still closing, are not counted: they belong to the previous client).
   */
  maxOpen: number;
  /** Connections cut by the loss emulation. */
  cut: number;
  bytesUp: number;
  bytesDown: number;
}

export interface WanProxy {
  readonly port: number;
  readonly stats: ProxyStats;
  /** Changes the emulated network for new data (connections in flight keep their order). */
  set(options: Pick<ProxyOptions, 'rttMs' | 'bandwidthBytesPerSec' | 'lossRate' | 'targetPort'>): void;
  resetStats(): void;
  close(): Promise<void>;
}

const HIGH_WATER = 4 * 1024 * 1024;
const END = Symbol('end');

interface Link {
  /** When the link has sent everything queued so far (ms, performance.now()). */
  freeAt: number;
}

/** One direction of one connection: chunks delivered in order, each at its time. */
class Pipe {
  readonly #queue: { at: number; chunk: Buffer | typeof END }[] = [];
  #queued = 0;
  #timer: NodeJS.Timeout | undefined;
  #lastAt = 0;
  notBefore = 0;

  constructor(
    readonly from: Socket,
    readonly to: Socket,
    readonly link: Link,
    readonly net: () => { delay: number; bandwidth: number },
  ) {}

  push(chunk: Buffer | typeof END): void {
    const now = performance.now();
    const { delay, bandwidth } = this.net();
    let leave = Math.max(now, this.notBefore);
    if (bandwidth > 0 && chunk !== END) {
      this.link.freeAt = Math.max(this.link.freeAt, leave) + (chunk.length / bandwidth) * 1000;
      leave = this.link.freeAt;
    }
    const at = Math.max(leave + delay, this.#lastAt);
    this.#lastAt = at;
    this.#queue.push({ at, chunk });
    if (chunk !== END) {
      this.#queued += chunk.length;
      if (this.#queued > HIGH_WATER) this.from.pause();
    }
    this.#schedule();
  }

  #schedule(): void {
    if (this.#timer !== undefined) return;
    const head = this.#queue[0];
    if (head === undefined) return;
    const wait = head.at - performance.now();
    if (wait <= 0.5) {
      this.#flush();
      return;
    }
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#flush();
    }, wait);
  }

  #flush(): void {
    const now = performance.now();
    while (this.#queue.length > 0 && (this.#queue[0] as { at: number }).at <= now + 0.5) {
      const { chunk } = this.#queue.shift() as { at: number; chunk: Buffer | typeof END };
      if (this.to.destroyed) return;
      if (chunk === END) {
        this.to.end();
        continue;
      }
      this.#queued -= chunk.length;
      this.to.write(chunk);
    }
    if (this.#queued <= HIGH_WATER && this.from.isPaused()) this.from.resume();
    this.#schedule();
  }

  stop(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#queue.length = 0;
  }
}

/** Starts a proxy on 127.0.0.1. */
export async function startProxy(options: ProxyOptions = {}): Promise<WanProxy> {
  let targetPort = options.targetPort;
  let rtt = options.rttMs ?? 0;
  let bandwidth = options.bandwidthBytesPerSec ?? 0;
  let loss = options.lossRate ?? 0;
  const up: Link = { freeAt: 0 };
  const down: Link = { freeAt: 0 };
  const stats: ProxyStats = { connections: 0, open: 0, maxOpen: 0, cut: 0, bytesUp: 0, bytesDown: 0 };
  const sockets = new Set<Socket>();
  /** Connections opened since the last resetStats that are still open. */
  let openSinceReset = 0;
  let generation = 0;
  const net = (): { delay: number; bandwidth: number } => ({ delay: rtt / 2, bandwidth });
  const server: Server = createServer({ noDelay: true, allowHalfOpen: true }, (client) => {
    if (targetPort === undefined) {
      client.destroy();
      return;
    }
    stats.connections++;
    stats.open++;
    const born = generation;
    openSinceReset++;
    stats.maxOpen = Math.max(stats.maxOpen, openSinceReset);
    const upstream = connect({ host: '127.0.0.1', port: targetPort, noDelay: true, allowHalfOpen: true });
    sockets.add(client);
    sockets.add(upstream);
    const toServer = new Pipe(client, upstream, up, net);
    const toClient = new Pipe(upstream, client, down, net);
    // The handshake's round trip: nothing the client sends is carried before one round trip has passed.
    toServer.notBefore = performance.now() + rtt;
    const cutAfter = Math.random() < loss ? Math.floor(Math.random() * 65_536) : -1;
    let downBytes = 0;
    let closed = 0;
    let cut = false;
    // A side that ends or closes has its end carried to the other side after the delay, behind its data (never
    // a destroy, which would drop bytes still queued in the socket); the connection is done when both closed.
    const onClosed = (): void => {
      if (++closed < 2) return;
      stats.open--;
      if (born === generation) openSinceReset--;
      toServer.stop();
      toClient.stop();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    const fail = (): void => {
      client.destroy();
      upstream.destroy();
    };
    client.on('data', (chunk: Buffer) => {
      stats.bytesUp += chunk.length;
      toServer.push(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (cut) return;
      stats.bytesDown += chunk.length;
      downBytes += chunk.length;
      if (cutAfter >= 0 && downBytes > cutAfter) {
        cut = true;
        stats.cut++;
        client.resetAndDestroy();
        upstream.destroy();
        return;
      }
      toClient.push(chunk);
    });
    let upEnded = false;
    let downEnded = false;
    const endUp = (): void => {
      if (upEnded) return;
      upEnded = true;
      toServer.push(END);
    };
    const endDown = (): void => {
      if (downEnded) return;
      downEnded = true;
      toClient.push(END);
    };
    client.on('end', endUp);
    upstream.on('end', endDown);
    client.on('error', fail);
    upstream.on('error', fail);
    client.on('close', () => {
      endUp();
      onClosed();
    });
    upstream.on('close', () => {
      endDown();
      onClosed();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('proxy: no port');
  return {
    port: address.port,
    stats,
    set(o) {
      if (o.rttMs !== undefined) rtt = o.rttMs;
      if (o.bandwidthBytesPerSec !== undefined) bandwidth = o.bandwidthBytesPerSec;
      if (o.lossRate !== undefined) loss = o.lossRate;
      if (o.targetPort !== undefined) targetPort = o.targetPort;
    },
    resetStats() {
      generation++;
      openSinceReset = 0;
      stats.connections = 0;
      stats.maxOpen = 0;
      stats.cut = 0;
      stats.bytesUp = 0;
      stats.bytesDown = 0;
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [listen, target, rtt, bw, loss] = process.argv.slice(2).map(Number);
  if (target === undefined || Number.isNaN(target)) {
    process.stderr.write('usage: proxy.ts <listen-port> <target-port> <rtt-ms> [bytes/s] [loss 0..1]\n');
    process.exit(2);
  }
  const p = await startProxy({
    port: listen ?? 0,
    targetPort: target,
    rttMs: rtt ?? 0,
    bandwidthBytesPerSec: bw ?? 0,
    lossRate: loss ?? 0,
  });
  process.stdout.write(`proxy on 127.0.0.1:${p.port} -> 127.0.0.1:${target}, rtt ${rtt ?? 0} ms\n`);
}
