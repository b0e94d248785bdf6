/**
 * WebSocket notification channels (ResourceSync Notification draft 0.8, N-§3 and N-§6): a server that attaches
 * to an existing `http.Server` and answers upgrades on the channel paths advertised in the Capability List
 * (`ws://…/resourcesync/<set>/change-notification` and `…/framework-notification`, capability
 * `change-notification` / `framework-notification`, Example 3.1), broadcasting each payload as one text frame.
 *
 * - Messages only go from the Source to the Destinations (N-§6); anything a client sends is ignored (frames are
 *   bounded to 4 KiB).
 * - `publish()` writes to every socket at once: a notification leaves within the same event-loop turn.
 * - A slow consumer never delays the others: each connection's backlog (`ws.bufferedAmount` plus the messages
 *   not yet flushed) is bounded; a consumer past the bound is closed with code {@link CLOSE_TOO_SLOW} and a
 *   reason telling it to catch up from the Change List, and terminated if it does not read its close frame.
 * - Pings every `pingIntervalMs`: a peer that did not answer the previous ping is terminated.
 *
 * @module
 */
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { type WebSocket, WebSocketServer } from 'ws';
import { ResourceSyncError } from '../core/errors.js';
import type { Entry } from '../core/model.js';

/** Close code for a consumer too far behind (private-use range 4000–4999, RFC 6455 §7.4.2). */
export const CLOSE_TOO_SLOW = 4000;
/** Close code when the server shuts down a channel (RFC 6455 §7.4.1: 1001 going away). */
export const CLOSE_GOING_AWAY = 1001;
/** The reason sent with {@link CLOSE_TOO_SLOW}. */
export const TOO_SLOW_REASON = 'too far behind: catch up from the Change List';

export interface ChannelServerOptions {
  /** Ping interval (default 30 s); a peer silent for a whole interval is terminated. */
  readonly pingIntervalMs?: number;
  /** Bytes a connection may have waiting to be written (default 4 MiB). */
  readonly maxBufferedBytes?: number;
  /** Messages a connection may have waiting to be written (default 1,000). */
  readonly maxPendingMessages?: number;
  /** After a close frame, how long a peer has to finish the closing handshake before it is terminated (default 5 s). */
  readonly closeGraceMs?: number;
  /** Connections per channel (default 10,000); more are refused with 503. */
  readonly maxClientsPerChannel?: number;
  readonly onEvent?: (event: ChannelEvent) => void;
  /**
   * Channels created on first use: an upgrade to a path that is not a channel yet is accepted (and the channel
   * added) when this returns true, e.g. for sets of resources that appear while the Source runs.
   */
  readonly acceptPath?: (path: string) => boolean;
}

export type ChannelEvent =
  | { readonly type: 'open'; readonly path: string; readonly clients: number; readonly remote: string | undefined }
  | {
      readonly type: 'close';
      readonly path: string;
      readonly code: number;
      readonly reason: string;
      readonly clients: number;
    }
  | { readonly type: 'slow-consumer'; readonly path: string; readonly bufferedAmount: number; readonly pending: number }
  | { readonly type: 'dead-peer'; readonly path: string };

/** One notification channel: everything published goes to every connected client. */
export interface Channel {
  readonly path: string;
  /** Connected clients. */
  readonly clients: number;
  /** Broadcasts one payload (XML text). Returns the number of clients it was written to. */
  publish(payload: string): number;
}

interface Peer {
  readonly ws: WebSocket;
  alive: boolean;
  pending: number;
  closing: boolean;
}

class ChannelImpl implements Channel {
  readonly path: string;
  readonly peers = new Set<Peer>();
  readonly #server: ChannelServer;
  constructor(path: string, server: ChannelServer) {
    this.path = path;
    this.#server = server;
  }
  get clients(): number {
    return this.peers.size;
  }
  publish(payload: string): number {
    const data = Buffer.from(payload, 'utf8');
    let sent = 0;
    for (const peer of this.peers) if (this.#server.sendTo(this, peer, data)) sent++;
    return sent;
  }
}

/**
 * The channels of a Source. Memory bound: per connection at most `maxBufferedBytes` plus one message.
 *
 * @example
 * ```ts
 * const channels = new ChannelServer();
 * const change = channels.addChannel('/resourcesync/default/change-notification');
 * channels.attach(httpServer);
 * change.publish(payloadXml);
 * ```
 */
export class ChannelServer {
  readonly #wss: WebSocketServer;
  readonly #channels = new Map<string, ChannelImpl>();
  readonly #maxBufferedBytes: number;
  readonly #maxPending: number;
  readonly #closeGraceMs: number;
  readonly #maxClients: number;
  readonly #onEvent: (e: ChannelEvent) => void;
  readonly #acceptPath: ((path: string) => boolean) | undefined;
  readonly #pingTimer: NodeJS.Timeout;
  readonly #detach: (() => void)[] = [];
  #closed = false;
  readonly stats = { sent: 0, slowClosed: 0, deadTerminated: 0 };

  constructor(options: ChannelServerOptions = {}) {
    this.#wss = new WebSocketServer({
      noServer: true,
      maxPayload: 4096,
      perMessageDeflate: false,
      clientTracking: false,
    });
    this.#maxBufferedBytes = options.maxBufferedBytes ?? 4 * 1024 * 1024;
    this.#maxPending = options.maxPendingMessages ?? 1000;
    this.#closeGraceMs = options.closeGraceMs ?? 5000;
    this.#maxClients = options.maxClientsPerChannel ?? 10_000;
    this.#onEvent = options.onEvent ?? ((): void => {});
    this.#acceptPath = options.acceptPath;
    this.#pingTimer = setInterval(() => this.#ping(), options.pingIntervalMs ?? 30_000);
    this.#pingTimer.unref();
  }

  /** Adds (or returns) the channel at a request path, e.g. `/resourcesync/default/change-notification`. */
  addChannel(path: string): Channel {
    if (!path.startsWith('/')) throw new ResourceSyncError('RS_CONFIG', `a channel path must start with /: ${path}`);
    let ch = this.#channels.get(path);
    if (ch === undefined) {
      ch = new ChannelImpl(path, this);
      this.#channels.set(path, ch);
    }
    return ch;
  }

  channel(path: string): Channel | undefined {
    return this.#channels.get(path);
  }

  /** Channel paths, in the order they were added. */
  get paths(): string[] {
    return [...this.#channels.keys()];
  }

  /**
   * Listens for upgrades on `server`. Upgrades to other paths are left to other listeners, or refused with 404
   * when this is the only one. Returns a function that detaches.
   */
  attach(server: Server): () => void {
    const listener = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
      if (this.handleUpgrade(req, socket, head)) return;
      if (server.listenerCount('upgrade') === 1) {
        socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      }
    };
    server.on('upgrade', listener);
    const detach = (): void => {
      server.off('upgrade', listener);
    };
    this.#detach.push(detach);
    return detach;
  }

  /** Completes an upgrade when the path is a channel's; returns false (and does nothing) otherwise. */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): boolean {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    let ch = this.#channels.get(path);
    if (ch === undefined && this.#acceptPath?.(path) === true && !this.#closed) {
      this.addChannel(path);
      ch = this.#channels.get(path);
    }
    if (ch === undefined) return false;
    if (this.#closed || ch.peers.size >= this.#maxClients) {
      socket.end('HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      return true;
    }
    socket.on('error', () => socket.destroy());
    this.#wss.handleUpgrade(req, socket, head, (ws) => this.#connected(ch, ws, req));
    return true;
  }

  #connected(ch: ChannelImpl, ws: WebSocket, req: IncomingMessage): void {
    const peer: Peer = { ws, alive: true, pending: 0, closing: false };
    ch.peers.add(peer);
    ws.on('pong', () => {
      peer.alive = true;
    });
    ws.on('message', () => {
      // N-§6: no client-to-server messages are defined; ignore.
    });
    ws.on('error', () => ws.terminate());
    ws.on('close', (code, reason) => {
      ch.peers.delete(peer);
      this.#onEvent({ type: 'close', path: ch.path, code, reason: reason.toString('utf8'), clients: ch.peers.size });
    });
    this.#onEvent({ type: 'open', path: ch.path, clients: ch.peers.size, remote: req.socket.remoteAddress });
  }

  /** @internal Writes one message to one peer, or closes the peer when it is too far behind. */
  sendTo(ch: ChannelImpl, peer: Peer, data: Buffer): boolean {
    const ws = peer.ws;
    if (peer.closing || ws.readyState !== ws.OPEN) return false;
    // Too far behind: the backlog plus this message would pass the bound (a message alone never does: one larger
    // than the bound still goes to a peer that has nothing waiting).
    const backlog = ws.bufferedAmount;
    if ((backlog > 0 && backlog + data.length > this.#maxBufferedBytes) || peer.pending >= this.#maxPending) {
      this.stats.slowClosed++;
      this.#onEvent({ type: 'slow-consumer', path: ch.path, bufferedAmount: ws.bufferedAmount, pending: peer.pending });
      this.#closePeer(peer, CLOSE_TOO_SLOW, TOO_SLOW_REASON);
      return false;
    }
    peer.pending++;
    ws.send(data, { binary: false }, () => {
      peer.pending--;
    });
    this.stats.sent++;
    return true;
  }

  #closePeer(peer: Peer, code: number, reason: string): void {
    peer.closing = true;
    for (const ch of this.#channels.values()) ch.peers.delete(peer);
    peer.ws.close(code, reason);
    const timer = setTimeout(() => peer.ws.terminate(), this.#closeGraceMs);
    timer.unref();
    peer.ws.once('close', () => clearTimeout(timer));
  }

  #ping(): void {
    for (const ch of this.#channels.values()) {
      for (const peer of ch.peers) {
        if (!peer.alive) {
          this.stats.deadTerminated++;
          this.#onEvent({ type: 'dead-peer', path: ch.path });
          ch.peers.delete(peer);
          peer.ws.terminate();
          continue;
        }
        peer.alive = false;
        peer.ws.ping();
      }
    }
  }

  /** Closes every connection (1001 going away), detaches from the servers. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#pingTimer);
    const closing: Promise<void>[] = [];
    for (const ch of this.#channels.values()) {
      for (const peer of ch.peers) {
        closing.push(new Promise((resolve) => peer.ws.once('close', () => resolve())));
        this.#closePeer(peer, CLOSE_GOING_AWAY, 'server closing');
      }
    }
    await Promise.all(closing);
    // Detached last: until then, a client reconnecting at once gets 503, not the host server's 404.
    for (const d of this.#detach) d();
    await new Promise<void>((resolve) => this.#wss.close(() => resolve()));
  }
}

/**
 * The WebSocket URLs of the two channels of a set of resources, under the Source's base URL:
 * `<base>resourcesync/<set>/change-notification` and `…/framework-notification`, with `ws:`/`wss:` for
 * `http:`/`https:` (N-§6). The server side adds each with `addChannel(new URL(url).pathname)`.
 */
export function channelUrls(
  baseUrl: string | URL,
  setName: string,
): { readonly change: string; readonly framework: string } {
  const base = new URL(baseUrl);
  if (!base.pathname.endsWith('/')) base.pathname += '/';
  const set = encodeURIComponent(setName);
  return {
    change: toWebSocketUrl(new URL(`resourcesync/${set}/change-notification`, base)),
    framework: toWebSocketUrl(new URL(`resourcesync/${set}/framework-notification`, base)),
  };
}

/** `http:` -> `ws:`, `https:` -> `wss:` (N-§6). */
export function toWebSocketUrl(url: string | URL): string {
  const u = new URL(url);
  if (u.protocol === 'http:') u.protocol = 'ws:';
  else if (u.protocol === 'https:') u.protocol = 'wss:';
  else if (u.protocol !== 'ws:' && u.protocol !== 'wss:') {
    throw new ResourceSyncError('RS_CONFIG', `not an http(s) or ws(s) URL: ${u.href}`);
  }
  return u.href;
}

/**
 * The Capability List entries advertising the two channels of a set (N-§3, Example 3.1): `<loc>` the `ws://` or
 * `wss://` URL, `rs:md capability="change-notification"` / `"framework-notification"`.
 */
export function channelEntries(urls: { readonly change: string; readonly framework: string }): Entry[] {
  return [
    { element: 'url', loc: urls.change, md: { capability: 'change-notification' }, links: [] },
    { element: 'url', loc: urls.framework, md: { capability: 'framework-notification' }, links: [] },
  ];
}
