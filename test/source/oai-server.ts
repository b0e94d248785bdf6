/**
 * A small OAI-PMH 2.0 provider of our own for tests (real HTTP on 127.0.0.1:0), with a controllable clock and
 * fault injection: the bridge's fault cases are played against it. Not a test file itself.
 *
 * Items hold one record per metadata format (`oai_dc`, `mods`); `datestamp` is the provider's clock at the
 * last change. Lists page by offset over the items sorted by identifier, `pageSize` at a time; tokens are
 * opaque and can be expired (then `badResumptionToken`).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { startServer } from '../destination/http-testserver.js';

export interface TestItem {
  identifier: string;
  datestampMs: number;
  sets: string[];
  deleted: boolean;
  title: string;
  /** Formats the item can be disseminated in (default both). */
  formats?: string[];
}

/** A response the fault hook forces instead of the normal one. */
export interface ForcedResponse {
  readonly status?: number;
  readonly headers?: Record<string, string>;
  /** Body; a function may write it slowly itself. */
  readonly body?: string | ((res: ServerResponse) => Promise<void> | void);
}

export interface OaiTestServerOptions {
  granularity?: 'YYYY-MM-DD' | 'YYYY-MM-DDThh:mm:ssZ';
  deletedRecord?: 'no' | 'transient' | 'persistent';
  pageSize?: number;
}

export interface OaiTestServer {
  readonly url: string;
  readonly items: Map<string, TestItem>;
  /** The provider's clock (UTC ms); tests move it. */
  now: number;
  options: Required<OaiTestServerOptions>;
  /** Every request's query string. */
  readonly requests: URLSearchParams[];
  /** Consulted first for every request: a response to force, or undefined for the normal one. */
  fault: ((q: URLSearchParams, n: number) => ForcedResponse | undefined) | undefined;
  /** Adds or changes an item (datestamp = now). */
  put(identifier: string, title: string, sets?: string[], formats?: string[]): void;
  /** Marks an item deleted (datestamp = now); with deletedRecord 'no' it vanishes. */
  remove(identifier: string): void;
  /** Invalidates every outstanding resumption token. */
  expireTokens(): void;
  /** The normal answer to a query (for faults that alter it), without logging it. */
  render(q: URLSearchParams): string;
  close(): Promise<void>;
}

const OAI_NS = 'http://www.openarchives.org/OAI/2.0/';
const FORMATS: Record<string, { schema: string; ns: string }> = {
  oai_dc: {
    schema: 'http://www.openarchives.org/OAI/2.0/oai_dc.xsd',
    ns: 'http://www.openarchives.org/OAI/2.0/oai_dc/',
  },
  mods: { schema: 'http://www.loc.gov/standards/mods/v3/mods-3-7.xsd', ns: 'http://www.loc.gov/mods/v3' },
};

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

function datestamp(ms: number, granularity: string): string {
  const iso = new Date(ms).toISOString();
  return granularity === 'YYYY-MM-DD' ? iso.slice(0, 10) : `${iso.slice(0, 19)}Z`;
}

/** The metadata element of an item in a format, as the provider writes it inside `<metadata>`. */
export function metadataXml(item: TestItem, prefix: string): string {
  if (prefix === 'mods')
    return `<mods xmlns="http://www.loc.gov/mods/v3"><titleInfo><title>${esc(item.title)}</title></titleInfo></mods>`;
  return (
    `<oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" xmlns:dc="http://purl.org/dc/elements/1.1/">` +
    `<dc:title>${esc(item.title)}</dc:title><dc:identifier>${esc(item.identifier)}</dc:identifier></oai_dc:dc>`
  );
}

/** Parses a `from`/`until` argument the way a provider must: day or seconds. */
function parseArg(text: string, until: boolean): number | undefined {
  if (/^\d{4}-\d{2}-\d{2}$/.test(text)) return Date.parse(`${text}T00:00:00Z`) + (until ? 86_399_999 : 0);
  if (/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/.test(text)) return Date.parse(text) + (until ? 999 : 0);
  return undefined;
}

export async function startOaiServer(opts: OaiTestServerOptions = {}): Promise<OaiTestServer> {
  const items = new Map<string, TestItem>();
  const requests: URLSearchParams[] = [];
  const tokens = new Map<
    string,
    { verb: string; prefix: string; from?: number; until?: number; set?: string; offset: number }
  >();
  let tokenSeq = 0;
  const state: OaiTestServer = {
    url: '',
    items,
    now: Date.parse('2024-03-01T12:00:00Z'),
    options: {
      granularity: opts.granularity ?? 'YYYY-MM-DDThh:mm:ssZ',
      deletedRecord: opts.deletedRecord ?? 'persistent',
      pageSize: opts.pageSize ?? 10,
    },
    requests,
    fault: undefined,
    put(identifier, title, sets = [], formats) {
      const item: TestItem = { identifier, datestampMs: state.now, sets, deleted: false, title };
      if (formats !== undefined) item.formats = formats;
      items.set(identifier, item);
    },
    remove(identifier) {
      if (state.options.deletedRecord === 'no') {
        items.delete(identifier);
        return;
      }
      const it = items.get(identifier);
      if (it !== undefined) {
        it.deleted = true;
        it.datestampMs = state.now;
      }
    },
    expireTokens() {
      tokens.clear();
    },
    render: (q) => answer(q),
    close: () => http.close(),
  };

  const envelope = (q: URLSearchParams, inner: string): string => {
    let req = '<request';
    for (const [k, v] of q) req += ` ${k}="${esc(v)}"`;
    return (
      `<?xml version="1.0" encoding="UTF-8"?>\n<OAI-PMH xmlns="${OAI_NS}" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">\n` +
      `<responseDate>${datestamp(state.now, 'YYYY-MM-DDThh:mm:ssZ')}</responseDate>\n${req}>${esc(state.url)}</request>\n${inner}\n</OAI-PMH>\n`
    );
  };
  const error = (code: string, msg: string): string => `<error code="${code}">${esc(msg)}</error>`;
  const header = (it: TestItem): string =>
    `<header${it.deleted ? ' status="deleted"' : ''}><identifier>${esc(it.identifier)}</identifier>` +
    `<datestamp>${datestamp(it.datestampMs, state.options.granularity)}</datestamp>` +
    it.sets.map((s) => `<setSpec>${esc(s)}</setSpec>`).join('') +
    '</header>';
  const record = (it: TestItem, prefix: string): string =>
    `<record>${header(it)}${it.deleted ? '' : `<metadata>${metadataXml(it, prefix)}</metadata>`}</record>`;
  const inSet = (it: TestItem, set: string | undefined): boolean =>
    set === undefined || it.sets.some((s) => s === set || s.startsWith(`${set}:`));
  const hasFormat = (it: TestItem, prefix: string): boolean => (it.formats ?? ['oai_dc', 'mods']).includes(prefix);

  const answer = (q: URLSearchParams): string => {
    const verb = q.get('verb');
    switch (verb) {
      case 'Identify':
        return envelope(
          q,
          `<Identify><repositoryName>test</repositoryName><baseURL>${esc(state.url)}</baseURL><protocolVersion>2.0</protocolVersion>` +
            `<adminEmail>a@example.org</adminEmail><earliestDatestamp>2000-01-01${state.options.granularity === 'YYYY-MM-DD' ? '' : 'T00:00:00Z'}</earliestDatestamp>` +
            `<deletedRecord>${state.options.deletedRecord}</deletedRecord><granularity>${state.options.granularity}</granularity></Identify>`,
        );
      case 'ListMetadataFormats':
        return envelope(
          q,
          `<ListMetadataFormats>${Object.entries(FORMATS)
            .map(
              ([p, f]) =>
                `<metadataFormat><metadataPrefix>${p}</metadataPrefix><schema>${f.schema}</schema><metadataNamespace>${f.ns}</metadataNamespace></metadataFormat>`,
            )
            .join('')}</ListMetadataFormats>`,
        );
      case 'ListSets': {
        const specs = [...new Set([...items.values()].flatMap((it) => it.sets))].sort();
        if (specs.length === 0) return envelope(q, error('noSetHierarchy', 'no sets'));
        return envelope(
          q,
          `<ListSets>${specs.map((x) => `<set><setSpec>${esc(x)}</setSpec><setName>${esc(x)}</setName></set>`).join('')}</ListSets>`,
        );
      }
      case 'GetRecord': {
        const prefix = q.get('metadataPrefix') ?? '';
        const it = items.get(q.get('identifier') ?? '');
        if (FORMATS[prefix] === undefined) return envelope(q, error('cannotDisseminateFormat', prefix));
        if (it === undefined) return envelope(q, error('idDoesNotExist', q.get('identifier') ?? ''));
        if (!hasFormat(it, prefix)) return envelope(q, error('cannotDisseminateFormat', prefix));
        return envelope(q, `<GetRecord>${record(it, prefix)}</GetRecord>`);
      }
      case 'ListRecords':
      case 'ListIdentifiers': {
        let list: { verb: string; prefix: string; from?: number; until?: number; set?: string; offset: number };
        const t = q.get('resumptionToken');
        if (t !== null) {
          const found = tokens.get(t);
          if (found === undefined || found.verb !== verb) return envelope(q, error('badResumptionToken', t));
          list = found;
        } else {
          const prefix = q.get('metadataPrefix');
          if (prefix === null) return envelope(q, error('badArgument', 'metadataPrefix is missing'));
          if (FORMATS[prefix] === undefined) return envelope(q, error('cannotDisseminateFormat', prefix));
          list = { verb, prefix, offset: 0 };
          for (const k of ['from', 'until'] as const) {
            const v = q.get(k);
            if (v === null) continue;
            const ms = parseArg(v, k === 'until');
            const dayArg = /^\d{4}-\d{2}-\d{2}$/.test(v);
            if (ms === undefined || (!dayArg && state.options.granularity === 'YYYY-MM-DD'))
              return envelope(q, error('badArgument', `bad ${k} ${v}`));
            list[k] = ms;
          }
          const set = q.get('set');
          if (set !== null) list.set = set;
        }
        // Datestamps compare at the provider's granularity.
        const g = (ms: number): number =>
          state.options.granularity === 'YYYY-MM-DD'
            ? Date.parse(datestamp(ms, 'YYYY-MM-DD'))
            : Math.floor(ms / 1000) * 1000;
        const all = [...items.values()]
          .filter((it) => hasFormat(it, list.prefix) && inSet(it, list.set))
          .filter(
            (it) =>
              (list.from === undefined || g(it.datestampMs) >= list.from) &&
              (list.until === undefined || g(it.datestampMs) <= list.until),
          )
          .sort((a, b) => (a.identifier < b.identifier ? -1 : a.identifier > b.identifier ? 1 : 0));
        if (all.length === 0) return envelope(q, error('noRecordsMatch', 'no records'));
        const page = all.slice(list.offset, list.offset + state.options.pageSize);
        const next = list.offset + page.length;
        let token = '';
        if (next < all.length) {
          token = `tok${++tokenSeq}`;
          tokens.set(token, { ...list, offset: next });
        }
        const body = page.map((it) => (verb === 'ListRecords' ? record(it, list.prefix) : header(it))).join('\n');
        return envelope(
          q,
          `<${verb}>${body}<resumptionToken completeListSize="${all.length}" cursor="${list.offset}">${token}</resumptionToken></${verb}>`,
        );
      }
      default:
        return envelope(q, error('badVerb', `illegal verb ${verb ?? ''}`));
    }
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://x');
    const q = url.searchParams;
    requests.push(q);
    const forced = state.fault?.(q, requests.length);
    if (forced !== undefined) {
      res.statusCode = forced.status ?? 200;
      for (const [k, v] of Object.entries(forced.headers ?? {})) res.setHeader(k, v);
      if (typeof forced.body === 'function') await forced.body(res);
      else res.end(forced.body ?? '');
      return;
    }
    res.setHeader('content-type', 'text/xml; charset=utf-8');
    res.end(answer(q));
  };

  const http = await startServer((req, res) => handle(req, res));
  (state as { url: string }).url = `${http.url}/oai`;
  return state;
}
