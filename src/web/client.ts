/**
 * The explorer's HTTP client: our pooled {@link HttpClient}, with credentials confined to the Source's origin.
 *
 * A Source's documents may point anywhere (a Capability List on another host, resources on a CDN, `duplicate`
 * mirrors): the explorer follows them, but a bearer token or extra headers given for the Source go only to the
 * origin they were given for (as `fetch` and curl do on redirects, here also on first requests). Requests to any
 * other origin go through a second client without them.
 *
 * It can also fetch a Source through another address than the one its documents name (`serve` explores
 * itself over loopback while its documents carry a public base URL): `via` maps a URL prefix to another; the
 * responses carry the URLs as the documents name them.
 *
 * @module
 */
import { HttpClient, type HttpClientOptions, type HttpResponse, type RequestInit } from '../http/client.js';

/** Options of {@link ConfinedClient}. */
export interface ConfinedClientOptions extends HttpClientOptions {
  /** The origin (or any URL of it) that receives `bearerToken` and `headers`; other origins get neither. */
  readonly credentialsOrigin: string;
  /** Fetch URLs starting with `from` at `to` instead (same path after the prefix). */
  readonly via?: { readonly from: string; readonly to: string };
}

/**
 * An {@link HttpClient} sending credentials only to one origin (see the module comment).
 *
 * @example
 * ```ts
 * const client = new ConfinedClient({ credentialsOrigin: 'https://example.org/', bearerToken: 'secret' });
 * await client.get('https://example.org/capabilitylist.xml'); // with Authorization
 * await client.get('https://cdn.example.net/a.txt'); // without
 * ```
 */
export class ConfinedClient extends HttpClient {
  /** The origin that gets the credentials. */
  readonly credentialsOrigin: string;
  readonly #plain: HttpClient | undefined;
  readonly #via: { readonly from: string; readonly to: string } | undefined;

  constructor(options: ConfinedClientOptions) {
    const { credentialsOrigin, via, ...httpOptions } = options;
    super(httpOptions);
    this.credentialsOrigin = new URL(credentialsOrigin).origin;
    this.#via = via;
    const hasCredentials = httpOptions.bearerToken !== undefined || Object.keys(httpOptions.headers ?? {}).length > 0;
    if (hasCredentials) {
      const { bearerToken: _token, headers: _headers, ...rest } = httpOptions;
      this.#plain = new HttpClient(rest);
    }
  }

  /** GET through the client that may receive credentials for `url`'s origin. */
  override get(url: string, init: RequestInit = {}): Promise<HttpResponse> {
    return this.#send('get', url, init);
  }

  /** HEAD, as {@link ConfinedClient.get}. */
  override head(url: string, init: RequestInit = {}): Promise<HttpResponse> {
    return this.#send('head', url, init);
  }

  override async close(): Promise<void> {
    await Promise.all([super.close(), this.#plain?.close()]);
  }

  override async destroy(): Promise<void> {
    await Promise.all([super.destroy(), this.#plain?.destroy()]);
  }

  async #send(method: 'get' | 'head', url: string, init: RequestInit): Promise<HttpResponse> {
    const target =
      this.#via !== undefined && url.startsWith(this.#via.from) ? this.#via.to + url.slice(this.#via.from.length) : url;
    let origin: string | undefined;
    try {
      origin = new URL(url).origin;
    } catch {
      origin = undefined;
    }
    const client = origin === this.credentialsOrigin || this.#plain === undefined ? undefined : this.#plain;
    const res = client === undefined ? await super[method](target, init) : await client[method](target, init);
    const via = this.#via;
    if (via === undefined || !res.url.startsWith(via.to)) return res;
    // The response as the documents name it: relative links resolve against the public URL.
    const publicUrl = via.from + res.url.slice(via.to.length);
    return {
      url: publicUrl,
      status: res.status,
      headers: res.headers,
      body: res.body,
      discard: () => res.discard(),
    };
  }
}
