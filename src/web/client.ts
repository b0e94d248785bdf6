/**
 * The explorer's HTTP client: our pooled {@link HttpClient}, with credentials confined to the Source's origin.
 *
 * A Source's documents may point anywhere (a Capability List on another host, resources on a CDN, `duplicate`
 * mirrors): the explorer follows them, but a bearer token or extra headers given for the Source go only to the
 * origin they were given for, plus the hosts named in `credentialHosts` (`explore --token-host`): the
 * {@link HttpClient}'s own `credentialHosts` rule, the one `sync` uses, so the two never differ.
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
  /**
   * The origin (or any URL of it) that receives `bearerToken` and `headers`; other origins get neither, except
   * those `credentialHosts` names too.
   */
  readonly credentialsOrigin: string;
  /** Fetch URLs starting with `from` at `to` instead (same path after the prefix). */
  readonly via?: { readonly from: string; readonly to: string };
}

/**
 * An {@link HttpClient} sending credentials only to one origin (and `credentialHosts`; see the module comment).
 * Memory: as {@link HttpClient}.
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
  readonly #via: { readonly from: string; readonly to: string } | undefined;

  constructor(options: ConfinedClientOptions) {
    const { credentialsOrigin, via, ...httpOptions } = options;
    const origin = new URL(credentialsOrigin).origin;
    super({ ...httpOptions, credentialHosts: [origin, ...(httpOptions.credentialHosts ?? [])] });
    this.credentialsOrigin = origin;
    this.#via = via;
  }

  /** GET, through `via` when it applies. */
  override get(url: string, init: RequestInit = {}): Promise<HttpResponse> {
    return this.#send('get', url, init);
  }

  /** HEAD, as {@link ConfinedClient.get}. */
  override head(url: string, init: RequestInit = {}): Promise<HttpResponse> {
    return this.#send('head', url, init);
  }

  async #send(method: 'get' | 'head', url: string, init: RequestInit): Promise<HttpResponse> {
    const via = this.#via;
    if (via === undefined || !url.startsWith(via.from)) return super[method](url, init);
    const res = await super[method](via.to + url.slice(via.from.length), init);
    if (!res.url.startsWith(via.to)) return res;
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
