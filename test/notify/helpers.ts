/** Test helpers for notify/ and hub/: event logs with waits, raw HTTP servers on loopback, temp dirs. */
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { type AddressInfo, createServer as createNetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { NotificationEvent } from '../../src/notify/events.js';

/** Collects events; `waitFor` resolves with the first (past or future) event matching, or rejects after a timeout. */
export class EventLog<T> {
  readonly events: T[] = [];
  readonly #waiters: { pred: (e: T) => boolean; resolve: (e: T) => void }[] = [];

  push = (e: T): void => {
    this.events.push(e);
    for (const w of [...this.#waiters]) {
      if (w.pred(e)) {
        this.#waiters.splice(this.#waiters.indexOf(w), 1);
        w.resolve(e);
      }
    }
  };

  waitFor(pred: (e: T) => boolean, timeoutMs = 8000, what = 'event'): Promise<T> {
    const found = this.events.find(pred);
    if (found !== undefined) return Promise.resolve(found);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiters.splice(this.#waiters.indexOf(waiter), 1);
        reject(new Error(`timed out waiting for ${what}; saw ${JSON.stringify(this.events).slice(0, 2000)}`));
      }, timeoutMs);
      const waiter = {
        pred,
        resolve: (e: T): void => {
          clearTimeout(timer);
          resolve(e);
        },
      };
      this.#waiters.push(waiter);
    });
  }

  count(pred: (e: T) => boolean): number {
    return this.events.filter(pred).length;
  }
}

/** Pulls events from a receiver into a log in the background. */
export function drain(events: AsyncIterable<NotificationEvent>, log: EventLog<NotificationEvent>): Promise<void> {
  return (async () => {
    for await (const e of events) log.push(e);
  })();
}

export interface RawServer {
  readonly url: string;
  readonly server: Server;
  close(): Promise<void>;
}

/** A plain node:http server on 127.0.0.1:0 with the given handler. */
export async function startServer(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<RawServer> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    server,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Reads a request body as text. */
export async function bodyText(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of req as AsyncIterable<Buffer>) chunks.push(c);
  return Buffer.concat(chunks).toString('utf8');
}

export async function withTempDir<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), 'rs-notify-'));
  try {
    return await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The repository root (the nearest folder with a package.json above this file, from src or dist). */
export function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const up = dirname(dir);
    if (up === dir) throw new Error(`no package.json above ${fileURLToPath(import.meta.url)}`);
    dir = up;
  }
  return dir;
}

/** Command line to run the `resourcesync` CLI: the compiled one when the tests run compiled, else from source. */
export function cliCommand(): string[] {
  const root = repoRoot();
  return fileURLToPath(import.meta.url).endsWith('.js')
    ? [join(root, 'dist', 'src', 'cli', 'main.js')]
    : ['--import', 'tsx', join(root, 'src', 'cli', 'main.ts')];
}

/** A spec example from the repository's copy of the standard's examples (test/fixtures). */
export function specExample(name: string): Buffer {
  return readFileSync(join(repoRoot(), 'test', 'fixtures', 'spec-examples', name));
}

/** A loopback TCP port free at the time of the call (for a process that must be told its port in advance). */
export async function freePort(): Promise<number> {
  const s = createNetServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', () => resolve()));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}
