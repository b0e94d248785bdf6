/**
 * RFC 8288 `Link` headers: the one parser of the HTTP stack (discovery's `describedby` / `resourcesync` links,
 * WebSub's `hub` and `self`), and the header WebSub publishers send.
 *
 * @module
 */
import { ResourceSyncError } from '../core/errors.js';

/** One parsed link of an HTTP `Link` header (RFC 8288). */
export interface WebLink {
  /** Target, resolved against the base URL when one was given. */
  readonly href: string;
  /** Relation types, lower-cased. */
  readonly rel: readonly string[];
  /** Other parameters, names lower-cased (first occurrence wins, as RFC 8288 §3 says). */
  readonly params: Readonly<Record<string, string>>;
}

/**
 * Parses `Link` header values (RFC 8288 §3): several links per value and several values, quoted-string
 * parameters with escapes, parameters without values, several relation types per `rel`. Malformed links are
 * skipped. Targets are resolved against `base`.
 *
 * @example
 * ```ts
 * parseLinkHeader('<cl.xml>; rel="resourcesync describedby", </x>; rel=up', 'http://e.org/a/');
 * // [{ href: 'http://e.org/a/cl.xml', rel: ['resourcesync', 'describedby'], ... }, { href: 'http://e.org/x', rel: ['up'], ... }]
 * ```
 */
export function parseLinkHeader(value: string | readonly string[] | undefined, base?: string): WebLink[] {
  if (value === undefined) return [];
  const values = typeof value === 'string' ? [value] : value;
  const out: WebLink[] = [];
  for (const v of values) {
    let i = 0;
    const n = v.length;
    const skipWs = (): void => {
      while (i < n && /[\s]/.test(v[i] as string)) i++;
    };
    while (i < n) {
      skipWs();
      if (v[i] === ',') {
        i++;
        continue;
      }
      if (v[i] !== '<') {
        // Not a link: skip to the next comma outside quotes.
        i = skipToComma(v, i);
        continue;
      }
      const close = v.indexOf('>', i);
      if (close < 0) break;
      const target = v.slice(i + 1, close).trim();
      i = close + 1;
      const params: Record<string, string> = {};
      for (;;) {
        skipWs();
        if (v[i] !== ';') break;
        i++;
        skipWs();
        const m = matchAt(TOKEN, v, i);
        if (m === null) {
          i = skipToComma(v, i);
          break;
        }
        const name = m[0].toLowerCase();
        i += m[0].length;
        skipWs();
        let val = '';
        if (v[i] === '=') {
          i++;
          skipWs();
          if (v[i] === '"') {
            i++;
            while (i < n && v[i] !== '"') {
              if (v[i] === '\\' && i + 1 < n) i++;
              val += v[i];
              i++;
            }
            i++;
          } else {
            const t = matchAt(BARE_VALUE, v, i);
            val = t?.[0] ?? '';
            i += val.length;
          }
        }
        if (!(name in params)) params[name] = val;
      }
      let href = target;
      if (base !== undefined) {
        try {
          href = new URL(target, base).href;
        } catch {
          continue;
        }
      }
      const rel = (params.rel ?? '')
        .split(/\s+/)
        .filter((r) => r !== '')
        .map((r) => r.toLowerCase());
      out.push({ href, rel, params });
    }
  }
  return out;
}

const TOKEN = /[!#$%&'*+\-.^_`|~0-9A-Za-z]+/y;
const BARE_VALUE = /[^;,\s]*/y;

/** Matches a sticky regular expression at `at` without copying the rest of the text (linear scans). */
function matchAt(re: RegExp, text: string, at: number): RegExpExecArray | null {
  re.lastIndex = at;
  return re.exec(text);
}

function skipToComma(v: string, i: number): number {
  let quoted = false;
  for (; i < v.length; i++) {
    const c = v[i];
    if (c === '"') quoted = !quoted;
    else if (c === '\\' && quoted) i++;
    else if (c === ',' && !quoted) return i + 1;
  }
  return i;
}

/**
 * The target of the first link with relation `rel` in `Link` header values, resolved against `base` when given.
 *
 * @example
 * ```ts
 * findLink('<https://hub.example/>; rel="hub", <https://e.org/cl.xml>; rel="self"', 'hub'); // 'https://hub.example/'
 * ```
 */
export function findLink(
  value: string | readonly string[] | undefined,
  rel: string,
  base?: string,
): string | undefined {
  const wanted = rel.toLowerCase();
  return parseLinkHeader(value, base).find((l) => l.rel.includes(wanted))?.href;
}

/**
 * Formats a `Link` header value for the WebSub pair (WebSub §4, §7): `<hub>; rel="hub", <topic>; rel="self"`.
 * URLs containing `>` or control characters are refused (they would break the header).
 */
export function formatWebSubLinks(hubUrl: string, topicUrl: string): string {
  for (const u of [hubUrl, topicUrl]) {
    if (/[<>\s"]/.test(u)) throw new ResourceSyncError('RS_CONFIG', `URL not usable in a Link header: ${u}`);
  }
  return `<${hubUrl}>; rel="hub", <${topicUrl}>; rel="self"`;
}
