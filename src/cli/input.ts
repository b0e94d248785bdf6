/**
 * Reading a command's file-or-URL argument as a byte stream: files through `fileSource`, `http(s)://` URLs
 * through undici with timeouts (connect and headers, then body idle), up to 5 redirects and a size bound.
 *
 * Errors that mean "the input cannot be read" are `ResourceSyncError`s with the codes in
 * {@link INPUT_ERROR_CODES} (`RS_IO`, `RS_HTTP`, `RS_TIMEOUT`, `RS_ABORTED`); commands exit with 2 on them,
 * whereas a document that was read but is malformed or invalid exits with 1.
 *
 * @module
 */
import { stat } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { Dispatcher } from 'undici';
import { type ErrorCode, ResourceSyncError } from '../core/errors.js';
import { fileSource } from '../xml/index.js';

/** Error codes of an input that could not be read (exit code 2), as opposed to a bad document (exit code 1). */
export const INPUT_ERROR_CODES: ReadonlySet<ErrorCode> = new Set(['RS_IO', 'RS_HTTP', 'RS_TIMEOUT', 'RS_ABORTED']);

/** True when `e` says the input could not be read (missing file, HTTP error, timeout). */
export function isInputError(e: unknown): e is ResourceSyncError {
  return e instanceof ResourceSyncError && INPUT_ERROR_CODES.has(e.code);
}

/** Options of {@link openInput}. */
export interface InputOptions {
  /** Connect and response-headers timeout, in ms (default 10,000). */
  readonly timeoutMs?: number;
  /** Longest pause between two chunks of the body, in ms (default 30,000). */
  readonly bodyTimeoutMs?: number;
  /** Most bytes read from a URL (default 256 MiB); more is an `RS_LIMIT` error. */
  readonly maxBytes?: number;
  /** Redirects followed (default 5). */
  readonly maxRedirections?: number;
  readonly signal?: AbortSignal;
}

/** An opened input: where it came from, its bytes (read once), and `close` to release the connection. */
export interface Input {
  /** The argument as given (a path or URL), used in messages. */
  readonly source: string;
  /** The final URL after redirects, for URLs. */
  readonly url?: string;
  /** The file system path, for files. */
  readonly path?: string;
  readonly bytes: AsyncIterable<Uint8Array>;
  close(): Promise<void>;
}

/** True when the argument is an http(s) URL rather than a path. */
export function isUrl(arg: string): boolean {
  return /^https?:\/\//i.test(arg);
}

/**
 * Opens a path, a `file:` URL, `-` (standard input) or an http(s) URL. For a URL the response headers have arrived (status checked) when this
 * resolves; the body is streamed by `bytes`. Memory: one chunk at a time.
 *
 * @throws ResourceSyncError `RS_IO` (file), `RS_HTTP` (status, network, redirects), `RS_TIMEOUT`, `RS_ABORTED`.
 */
export async function openInput(arg: string, options: InputOptions = {}): Promise<Input> {
  if (isUrl(arg)) return openUrl(arg, options);
  if (arg === '-') return { source: '-', bytes: mapFileErrors('standard input', process.stdin), close: async () => {} };
  if (/^file:\/\//i.test(arg)) return openInput(fileURLToPath(arg), options);
  try {
    const s = await stat(arg);
    if (!s.isFile()) throw new ResourceSyncError('RS_IO', `${arg} is not a file`, { url: arg });
  } catch (e) {
    if (e instanceof ResourceSyncError) throw e;
    const code = (e as NodeJS.ErrnoException).code;
    const reason = code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : String(e);
    throw new ResourceSyncError('RS_IO', `cannot read ${arg}: ${reason}`, { cause: e });
  }
  return { source: arg, path: arg, bytes: mapFileErrors(arg, fileSource(arg)), close: async () => {} };
}

async function* mapFileErrors(path: string, source: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
  try {
    yield* source;
  } catch (e) {
    if (e instanceof ResourceSyncError) throw e;
    throw new ResourceSyncError('RS_IO', `cannot read ${path}: ${String(e)}`, { cause: e });
  }
}

async function openUrl(url: string, options: InputOptions): Promise<Input> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const bodyTimeoutMs = options.bodyTimeoutMs ?? 30_000;
  const maxBytes = options.maxBytes ?? 256 * 1024 * 1024;
  // Loaded here, for URLs only: a local file does not pay undici's ~60 ms of module loading.
  const { Agent, interceptors, request } = await import('undici');
  const agent = new Agent({ connect: { timeout: timeoutMs }, headersTimeout: timeoutMs, bodyTimeout: bodyTimeoutMs });
  const dispatcher: Dispatcher = agent.compose(
    interceptors.redirect({ maxRedirections: options.maxRedirections ?? 5 }),
  );
  const close = async (): Promise<void> => {
    await agent.close().catch(() => {});
  };
  let res: Dispatcher.ResponseData;
  try {
    res = await request(url, {
      dispatcher,
      method: 'GET',
      headers: { accept: 'application/xml, text/xml;q=0.9, */*;q=0.5', 'user-agent': 'resourcesync' },
      signal: options.signal,
    });
  } catch (e) {
    await close();
    throw httpError(url, e);
  }
  if (res.statusCode >= 300) {
    await res.body.dump().catch(() => {});
    await close();
    const what = res.statusCode < 400 ? 'too many redirects' : `HTTP ${res.statusCode}`;
    throw new ResourceSyncError('RS_HTTP', `cannot read: ${what}`, { url });
  }
  async function* body(): AsyncGenerator<Uint8Array> {
    let total = 0;
    try {
      for await (const chunk of res.body as AsyncIterable<Uint8Array>) {
        total += chunk.byteLength;
        if (total > maxBytes) throw new ResourceSyncError('RS_LIMIT', `more than ${maxBytes} bytes`, { url });
        yield chunk;
      }
    } catch (e) {
      throw e instanceof ResourceSyncError ? e : httpError(url, e);
    } finally {
      res.body.destroy();
      await close();
    }
  }
  const closeAll = async (): Promise<void> => {
    res.body.destroy();
    await close();
  };
  return { source: url, url, bytes: body(), close: closeAll };
}

function httpError(url: string, e: unknown): ResourceSyncError {
  const code = (e as { code?: string } | undefined)?.code ?? '';
  const name = (e as { name?: string } | undefined)?.name ?? '';
  if (name === 'AbortError' || code === 'ABORT_ERR')
    return new ResourceSyncError('RS_ABORTED', 'aborted', { url, cause: e });
  if (code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT')
    return new ResourceSyncError('RS_TIMEOUT', `timed out (${code})`, { url, cause: e });
  const message = e instanceof Error ? e.message : String(e);
  return new ResourceSyncError('RS_HTTP', `cannot read ${url}: ${message}${code ? ` (${code})` : ''}`, {
    url,
    cause: e,
  });
}

/**
 * The first chunk of a byte stream, and the whole stream again (the first chunk included) to read from.
 * Returning early from `rest` closes the source; call `close` when `rest` is not read at all.
 */
export async function peekBytes(source: AsyncIterable<Uint8Array>): Promise<{
  readonly head: Uint8Array | undefined;
  readonly rest: AsyncIterable<Uint8Array>;
  close(): Promise<void>;
}> {
  const it = source[Symbol.asyncIterator]();
  const first = await it.next();
  let closed = false;
  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    await it.return?.();
  };
  async function* rest(): AsyncGenerator<Uint8Array> {
    try {
      if (first.done === true) return;
      yield first.value;
      for (let r = await it.next(); r.done !== true; r = await it.next()) yield r.value;
    } finally {
      await close();
    }
  }
  return { head: first.done === true ? undefined : first.value, rest: rest(), close };
}
