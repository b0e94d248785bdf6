// Helpers for the Source server tests: real HTTP over loopback, raw requests over `net`.
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { connect } from 'node:net';
import { readdirSync, readFileSync } from 'node:fs';

export interface Reply {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
}

/** One request with a raw path (not normalised by URL), the body read whole (small test files). */
export function fetchRaw(
  port: number,
  path: string,
  options: { method?: string; headers?: Record<string, string>; agent?: false } = {},
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: '127.0.0.1', port, path, method: options.method ?? 'GET', headers: options.headers ?? {}, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/**
 * Sends `text` as is on a fresh TCP connection (without half-closing it: Node's server aborts a request whose
 * client sent FIN) and returns everything the server sends until it closes. `text` should ask for
 * `Connection: close`.
 */
export function rawExchange(port: number, text: string | Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('connect', () => socket.write(text));
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('end', () => resolve(Buffer.concat(chunks).toString('latin1')));
    socket.on('error', reject);
  });
}

/** Status code of a raw HTTP response text. */
export function statusOf(raw: string): number {
  return Number(/^HTTP\/1\.1 (\d{3})/.exec(raw)?.[1] ?? 0);
}

/** Number of open file descriptors of this process (Linux). */
export function openFdCount(): number {
  return readdirSync('/proc/self/fd').length;
}

/** Bytes this process has read through read(2)/pread(2) so far (Linux /proc/self/io `rchar`). */
export function bytesReadByProcess(): number {
  return Number(/^rchar:\s*(\d+)/m.exec(readFileSync('/proc/self/io', 'utf8'))?.[1] ?? Number.NaN);
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
