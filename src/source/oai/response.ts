/**
 * A streaming reader of OAI-PMH 2.0 responses (http://www.openarchives.org/OAI/openarchivesprotocol.html):
 * text in, the response's records (or headers) out as they complete, then what the response says besides
 * (`responseDate`, `error`s, `resumptionToken`, the `Identify` and `ListMetadataFormats` answers).
 *
 * Built on saxes (namespace-aware, well-formedness checked). Safe defaults: a DOCTYPE is refused
 * (`RS_XML_DTD`), so no entity but the five predefined ones and character references is ever expanded; element
 * nesting and the size of one record are bounded (`RS_LIMIT`); the root must be `<OAI-PMH>` in the OAI-PMH 2.0
 * namespace (`RS_OAI_PMH`). Every error names the URL, line and column.
 *
 * The metadata of a record (the one element inside `<metadata>`) is re-serialized as a standalone XML
 * document: `<?xml version="1.0" encoding="UTF-8"?>`, the element with its attributes and content as parsed,
 * character data escaped the one way (`&amp; &lt; &gt;`, CDATA sections as escaped text), empty elements as
 * `<x/>`, comments and processing instructions kept, and the namespace declarations it inherits from the
 * response copied onto its root: every prefixed one in scope at `<metadata>` (a prefix may be used inside
 * attribute values such as `xsi:type="dcterms:W3CDTF"`), and the default namespace only when an unprefixed
 * element of the record is in it. The same record therefore gives the same bytes however the provider
 * quotes, escapes or wraps it, and the bytes mean what they meant inside the response.
 *
 * Memory: the record being read (bounded by `maxRecordChars`) and the items completed by the last
 * {@link OaiResponseParser.write}, which the caller takes after each write.
 *
 * @module
 */
import { SaxesParser, type SaxesTagNS } from 'saxes';
import { ResourceSyncError } from '../../core/errors.js';
import { parseDatetime } from '../../core/datetime.js';
import { escapeAttribute, escapeText } from '../../xml/text.js';

/** The OAI-PMH 2.0 namespace of the response envelope. */
export const OAI_PMH_NS = 'http://www.openarchives.org/OAI/2.0/';

/** Default of {@link OaiParseOptions.maxRecordChars}: 16 Mi characters. */
export const DEFAULT_MAX_RECORD_CHARS = 16 * 1024 * 1024;
/** Default of {@link OaiParseOptions.maxDepth}. */
export const DEFAULT_MAX_DEPTH = 256;
/** Longest identifier, datestamp, setSpec or token accepted (characters). */
const MAX_FIELD_CHARS = 64 * 1024;

/** The header of a record (OAI-PMH §2.5, §3.5). */
export interface OaiHeader {
  readonly identifier: string;
  /** As the provider wrote it (`YYYY-MM-DD` or `YYYY-MM-DDThh:mm:ssZ`). */
  readonly datestamp: string;
  /** UTC epoch ms of the datestamp (its first instant for a day). */
  readonly datestampMs: number;
  /** `status="deleted"`. */
  readonly deleted: boolean;
  readonly setSpecs: readonly string[];
}

/** A record of `ListRecords` / `GetRecord`, or a header of `ListIdentifiers` (no `metadata`). */
export interface OaiItem {
  readonly header: OaiHeader;
  /** The metadata record as a standalone XML document (see the module comment); absent for deleted records. */
  readonly metadata?: string;
  /** Line of the item in the response (for messages). */
  readonly line: number;
}

/** An `<error>` of the response (OAI-PMH §3.6). */
export interface OaiErrorCondition {
  readonly code: string;
  readonly message: string;
}

/** A `<resumptionToken>` (OAI-PMH §3.5); `value` is empty on the last page of a list. */
export interface OaiResumptionToken {
  readonly value: string;
  readonly completeListSize?: number;
  readonly cursor?: number;
  readonly expirationDate?: string;
}

/** The `Identify` answer (OAI-PMH §4.2). */
export interface OaiIdentify {
  readonly repositoryName: string;
  readonly baseURL: string;
  readonly protocolVersion: string;
  readonly earliestDatestamp: string;
  /** `no`, `transient` or `persistent`. */
  readonly deletedRecord: string;
  /** `YYYY-MM-DD` or `YYYY-MM-DDThh:mm:ssZ`. */
  readonly granularity: string;
  readonly adminEmails: readonly string[];
  readonly compressions: readonly string[];
}

/** One `<metadataFormat>` of `ListMetadataFormats` (OAI-PMH §4.4). */
export interface OaiMetadataFormat {
  readonly metadataPrefix: string;
  readonly schema: string;
  readonly metadataNamespace: string;
}

/** One `<set>` of `ListSets` (OAI-PMH §4.6). */
export interface OaiSet {
  readonly setSpec: string;
  readonly setName: string;
}

/** What a response says besides its items; complete after {@link OaiResponseParser.close}. */
export interface OaiResponseInfo {
  /** The verb element met (`ListRecords`, `Identify`, ...), undefined for an error response. */
  verb?: string;
  responseDate?: string;
  readonly errors: OaiErrorCondition[];
  resumptionToken?: OaiResumptionToken;
  identify?: OaiIdentify;
  readonly formats: OaiMetadataFormat[];
  readonly sets: OaiSet[];
}

/** Options of {@link OaiResponseParser}. */
export interface OaiParseOptions {
  /** URL of the response, named in errors. */
  readonly url: string;
  /** Largest metadata record, in characters of its serialization (default 16 Mi); larger is `RS_LIMIT`. */
  readonly maxRecordChars?: number;
  /** Deepest element nesting (default 256); deeper is `RS_LIMIT`. */
  readonly maxDepth?: number;
}

// What an open element is to the reader.
const R_ROOT = 0;
const R_FIELD = 1; // simple text content we keep (responseDate, identifier, datestamp, ...)
const R_VERB = 2;
const R_RECORD = 3;
const R_HEADER = 4;
const R_METADATA = 5;
const R_CAPTURE = 6; // inside the metadata record
const R_SKIP = 7; // content we do not need (about, description, request, ...)
const R_CONTAINER = 8; // metadataFormat, set
const R_ERROR = 9;
const R_TOKEN = 10;

interface Frame {
  readonly role: number;
  readonly local: string;
  /** Namespace bindings in scope (shared with the parent when the element declares none). */
  readonly bindings: Map<string, string>;
}

/** Serializes the metadata element's subtree (see the module comment). */
class RecordWriter {
  readonly #parts: string[] = [];
  #chars = 0;
  #pendingOpen = false;
  #rootStart = '';
  readonly #rootName: string;
  /** Prefixes the root declares itself ('' for a default namespace). */
  readonly #rootOwn: ReadonlySet<string>;
  readonly #inherited: Map<string, string>;
  /** Elements of the record now open that declare a default namespace. */
  #defaultDeclarations = 0;
  readonly #declaresDefault: boolean[] = [];
  #usesInheritedDefault = false;
  readonly #max: number;
  readonly #fail: (code: 'RS_LIMIT', message: string) => never;

  constructor(
    root: SaxesTagNS,
    inherited: Map<string, string>,
    max: number,
    fail: (code: 'RS_LIMIT', message: string) => never,
  ) {
    this.#rootName = root.name;
    this.#inherited = inherited;
    this.#max = max;
    this.#fail = fail;
    this.#rootOwn = new Set(Object.keys(root.ns));
    this.#rootStart = this.#startTag(root);
  }

  #add(s: string): void {
    this.#chars += s.length;
    if (this.#chars > this.#max) this.#fail('RS_LIMIT', `metadata record larger than ${this.#max} characters`);
    this.#parts.push(s);
  }

  #startTag(tag: SaxesTagNS): string {
    const own = tag.ns;
    const declares = Object.hasOwn(own, '');
    this.#declaresDefault.push(declares);
    if (declares) this.#defaultDeclarations++;
    else if (tag.prefix === '' && tag.uri !== '' && this.#defaultDeclarations === 0) this.#usesInheritedDefault = true;
    let s = `<${tag.name}`;
    for (const [prefix, uri] of Object.entries(own))
      s += prefix === '' ? ` xmlns="${escapeAttribute(uri)}"` : ` xmlns:${prefix}="${escapeAttribute(uri)}"`;
    for (const [name, attr] of Object.entries(tag.attributes)) {
      if (name === 'xmlns' || name.startsWith('xmlns:')) continue;
      s += ` ${name}="${escapeAttribute(attr.value)}"`;
    }
    return s;
  }

  #closePending(): void {
    if (this.#pendingOpen) {
      this.#add('>');
      this.#pendingOpen = false;
    }
  }

  open(tag: SaxesTagNS): void {
    this.#closePending();
    this.#add(this.#startTag(tag));
    this.#pendingOpen = true;
  }

  /** Closes an element of the record; true when it was the record's root. */
  close(name: string): boolean {
    if (this.#declaresDefault.pop() === true) this.#defaultDeclarations--;
    if (this.#pendingOpen) {
      this.#add('/>');
      this.#pendingOpen = false;
    } else this.#add(`</${name}>`);
    return this.#declaresDefault.length === 0;
  }

  /** The root was opened by the constructor: its start tag is completed by the first content. */
  begin(): void {
    this.#pendingOpen = true;
  }

  text(t: string): void {
    this.#closePending();
    this.#add(escapeText(t));
  }

  comment(c: string): void {
    this.#closePending();
    this.#add(`<!--${c}-->`);
  }

  pi(target: string, body: string): void {
    this.#closePending();
    this.#add(body === '' ? `<?${target}?>` : `<?${target} ${body}?>`);
  }

  /** The whole document. */
  finish(): string {
    let decls = '';
    const rootStart = this.#rootStart;
    const ownStart = rootStart.slice(this.#rootName.length + 1);
    for (const [prefix, uri] of this.#inherited) {
      if (prefix === 'xml' || prefix === 'xmlns') continue;
      if (this.#rootOwn.has(prefix)) continue; // the root's own declaration wins
      if (prefix === '') {
        if (this.#usesInheritedDefault && uri !== '') decls += ` xmlns="${escapeAttribute(uri)}"`;
      } else decls += ` xmlns:${prefix}="${escapeAttribute(uri)}"`;
    }
    return `<?xml version="1.0" encoding="UTF-8"?>\n<${this.#rootName}${decls}${ownStart}${this.#parts.join('')}\n`;
  }
}

/**
 * Push parser of one OAI-PMH response. Feed decoded text with {@link write}, take the completed items with
 * {@link takeItems} after each write, then call {@link close} for the rest of the response.
 *
 * @example
 * ```ts
 * const p = new OaiResponseParser({ url });
 * for (const text of chunks) { p.write(text); for (const item of p.takeItems()) use(item); }
 * const info = p.close(); // info.resumptionToken, info.errors ...
 * ```
 */
export class OaiResponseParser {
  readonly info: OaiResponseInfo = { errors: [], formats: [], sets: [] };
  readonly #url: string;
  readonly #sax: SaxesParser<{ xmlns: true; position: true }>;
  readonly #stack: Frame[] = [];
  readonly #maxDepth: number;
  readonly #maxRecordChars: number;
  #items: OaiItem[] = [];
  #text = '';
  #collecting = false;
  /** The fields of the element being read (header, metadataFormat, set, Identify). */
  #fields = new Map<string, string[]>();
  #identifyFields = new Map<string, string[]>();
  #headerDeleted = false;
  #headerLine = 0;
  #recordHeader: OaiHeader | undefined;
  #recordLine = 0;
  #recordMetadata: string | undefined;
  #writer: RecordWriter | undefined;
  #tokenAttrs: Record<string, string> = {};
  #errorCode = '';
  #rootSeen = false;
  #closed = false;

  constructor(options: OaiParseOptions) {
    this.#url = options.url;
    this.#maxDepth = options.maxDepth ?? DEFAULT_MAX_DEPTH;
    this.#maxRecordChars = options.maxRecordChars ?? DEFAULT_MAX_RECORD_CHARS;
    const sax = new SaxesParser({ xmlns: true, position: true });
    this.#sax = sax;
    sax.on('error', (e) => {
      throw this.#error('RS_XML_SYNTAX', `malformed XML: ${stripPosition(e.message)}`, e);
    });
    sax.on('doctype', () => {
      throw this.#error('RS_XML_DTD', 'a DOCTYPE (DTD) in an OAI-PMH response is refused');
    });
    sax.on('xmldecl', (d) => {
      if (d.encoding !== undefined && !/^utf-?8$/i.test(d.encoding))
        throw this.#error('RS_OAI_PMH', `encoding ${JSON.stringify(d.encoding)}: OAI-PMH responses must be UTF-8`);
    });
    sax.on('opentag', (tag) => this.#open(tag as SaxesTagNS));
    sax.on('closetag', (tag) => this.#close(tag as SaxesTagNS));
    sax.on('text', (t) => this.#onText(t));
    sax.on('cdata', (t) => this.#onText(t));
    sax.on('comment', (c) => this.#writer?.comment(c));
    sax.on('processinginstruction', (pi) => this.#writer?.pi(pi.target, pi.body));
  }

  /** Parses the next piece of the response. @throws ResourceSyncError (see the module comment). */
  write(text: string): void {
    this.#sax.write(text);
  }

  /** The items completed since the last call. */
  takeItems(): OaiItem[] {
    const out = this.#items;
    if (out.length > 0) this.#items = [];
    return out;
  }

  /** Ends the response (checks it is complete) and returns what it said. */
  close(): OaiResponseInfo {
    if (!this.#closed) {
      this.#closed = true;
      this.#sax.close();
      if (!this.#rootSeen) throw this.#error('RS_XML_SYNTAX', 'empty response: no root element');
    }
    return this.info;
  }

  #error(code: 'RS_XML_SYNTAX' | 'RS_XML_DTD' | 'RS_LIMIT' | 'RS_OAI_PMH', message: string, cause?: unknown) {
    return new ResourceSyncError(code, message, {
      url: this.#url,
      line: this.#sax.line,
      column: this.#sax.column,
      ...(cause === undefined ? {} : { cause }),
    });
  }

  #field(local: string): string | undefined {
    return this.#fields.get(local)?.[0];
  }

  #open(tag: SaxesTagNS): void {
    const parent = this.#stack[this.#stack.length - 1];
    if (this.#stack.length >= this.#maxDepth)
      throw this.#error('RS_LIMIT', `elements nested deeper than ${this.#maxDepth}`);
    let bindings = parent?.bindings ?? new Map<string, string>();
    const own = Object.entries(tag.ns);
    if (own.length > 0) {
      bindings = new Map(bindings);
      for (const [p, u] of own) bindings.set(p, u);
    }
    this.#stack.push({ role: this.#enter(tag, parent), local: tag.local, bindings });
  }

  /** What an opening element is to the reader (and what it starts). */
  #enter(tag: SaxesTagNS, parent: Frame | undefined): number {
    if (parent === undefined) {
      if (tag.uri !== OAI_PMH_NS || tag.local !== 'OAI-PMH')
        throw this.#error(
          'RS_OAI_PMH',
          `not an OAI-PMH 2.0 response: the root element is <${tag.name}>${tag.uri === '' ? '' : ` in ${tag.uri}`}`,
        );
      this.#rootSeen = true;
      return R_ROOT;
    }
    const role = parent.role;
    if (role === R_CAPTURE) {
      this.#writer!.open(tag);
      return R_CAPTURE;
    }
    if (role === R_SKIP || role === R_FIELD || role === R_ERROR || role === R_TOKEN) {
      // Elements inside simple content: ignored (the text collected is that of the whole element).
      return R_SKIP;
    }
    if (role === R_METADATA) {
      if (this.#writer !== undefined || this.#recordMetadata !== undefined)
        throw this.#error('RS_OAI_PMH', 'more than one element inside <metadata>');
      this.#writer = new RecordWriter(tag, parent.bindings, this.#maxRecordChars, (code, message) => {
        throw this.#error(code, message);
      });
      this.#writer.begin();
      return R_CAPTURE;
    }
    const inOai = tag.uri === OAI_PMH_NS;
    const local = tag.local;
    if (role === R_ROOT) {
      if (!inOai) return R_SKIP;
      if (local === 'responseDate') return this.#startField();
      if (local === 'error') {
        this.#errorCode = tag.attributes.code?.value ?? '';
        this.#text = '';
        this.#collecting = true;
        return R_ERROR;
      }
      if (local === 'request') return R_SKIP;
      this.info.verb = local;
      this.#identifyFields = new Map();
      return R_VERB;
    }
    if (!inOai) return R_SKIP;
    if (role === R_VERB) {
      if (local === 'record') {
        this.#recordHeader = undefined;
        this.#recordMetadata = undefined;
        this.#recordLine = this.#sax.line;
        return R_RECORD;
      }
      if (local === 'header') return this.#startHeader(tag);
      if (local === 'resumptionToken') {
        this.#tokenAttrs = {};
        for (const [n, a] of Object.entries(tag.attributes)) this.#tokenAttrs[n] = a.value;
        this.#text = '';
        this.#collecting = true;
        return R_TOKEN;
      }
      if (local === 'metadataFormat' || local === 'set') {
        this.#fields = new Map();
        return R_CONTAINER;
      }
      if (this.info.verb === 'Identify' && local !== 'description') return this.#startField();
      return R_SKIP;
    }
    if (role === R_RECORD) {
      if (local === 'header') return this.#startHeader(tag);
      if (local === 'metadata') return R_METADATA;
      return R_SKIP; // <about>
    }
    if (role === R_HEADER || role === R_CONTAINER) return this.#startField();
    return R_SKIP;
  }

  #startField(): number {
    this.#text = '';
    this.#collecting = true;
    return R_FIELD;
  }

  #startHeader(tag: SaxesTagNS): number {
    this.#fields = new Map();
    this.#headerDeleted = tag.attributes.status?.value === 'deleted';
    this.#headerLine = this.#sax.line;
    return R_HEADER;
  }

  #onText(t: string): void {
    if (this.#collecting) {
      if (this.#text.length + t.length > MAX_FIELD_CHARS)
        throw this.#error('RS_LIMIT', `element text longer than ${MAX_FIELD_CHARS} characters`);
      this.#text += t;
      return;
    }
    const top = this.#stack[this.#stack.length - 1];
    if (top?.role === R_CAPTURE) this.#writer!.text(t);
  }

  #close(tag: SaxesTagNS): void {
    const frame = this.#stack.pop()!;
    const parent = this.#stack[this.#stack.length - 1];
    switch (frame.role) {
      case R_CAPTURE:
        if (this.#writer!.close(tag.name)) {
          this.#recordMetadata = this.#writer!.finish();
          this.#writer = undefined;
        }
        return;
      case R_FIELD: {
        this.#collecting = false;
        const value = this.#text.trim();
        if (parent?.role === R_ROOT) {
          if (frame.local === 'responseDate') this.info.responseDate = value;
        } else if (parent?.role === R_VERB) {
          const list = this.#identifyFields.get(frame.local);
          if (list === undefined) this.#identifyFields.set(frame.local, [value]);
          else list.push(value);
        } else {
          const list = this.#fields.get(frame.local);
          if (list === undefined) this.#fields.set(frame.local, [value]);
          else list.push(value);
        }
        return;
      }
      case R_ERROR:
        this.#collecting = false;
        this.info.errors.push({ code: this.#errorCode, message: this.#text.trim() });
        return;
      case R_TOKEN:
        this.#collecting = false;
        this.info.resumptionToken = this.#token(this.#text.trim());
        return;
      case R_HEADER: {
        const header = this.#header();
        if (parent?.role === R_RECORD) this.#recordHeader = header;
        else this.#items.push({ header, line: this.#headerLine });
        return;
      }
      case R_RECORD: {
        if (this.#recordHeader === undefined) throw this.#error('RS_OAI_PMH', '<record> without <header>');
        const item: { header: OaiHeader; metadata?: string; line: number } = {
          header: this.#recordHeader,
          line: this.#recordLine,
        };
        if (this.#recordMetadata !== undefined) item.metadata = this.#recordMetadata;
        this.#items.push(item);
        this.#recordHeader = undefined;
        this.#recordMetadata = undefined;
        return;
      }
      case R_CONTAINER:
        if (frame.local === 'metadataFormat') {
          const prefix = this.#field('metadataPrefix');
          if (prefix === undefined || prefix === '')
            throw this.#error('RS_OAI_PMH', '<metadataFormat> without <metadataPrefix>');
          this.info.formats.push({
            metadataPrefix: prefix,
            schema: this.#field('schema') ?? '',
            metadataNamespace: this.#field('metadataNamespace') ?? '',
          });
        } else {
          this.info.sets.push({ setSpec: this.#field('setSpec') ?? '', setName: this.#field('setName') ?? '' });
        }
        return;
      case R_VERB:
        if (frame.local === 'Identify') this.info.identify = this.#identify();
        return;
      default:
        return;
    }
  }

  #header(): OaiHeader {
    const identifier = this.#field('identifier');
    if (identifier === undefined || identifier === '') throw this.#error('RS_OAI_PMH', '<header> without <identifier>');
    const datestamp = this.#field('datestamp');
    if (datestamp === undefined) throw this.#error('RS_OAI_PMH', `<header> of ${identifier} without <datestamp>`);
    const ms = datestampMs(datestamp);
    if (ms === undefined)
      throw this.#error('RS_OAI_PMH', `bad <datestamp> ${JSON.stringify(datestamp)} of ${identifier}`);
    return {
      identifier,
      datestamp,
      datestampMs: ms,
      deleted: this.#headerDeleted,
      setSpecs: this.#fields.get('setSpec') ?? [],
    };
  }

  #token(value: string): OaiResumptionToken {
    const t: { -readonly [K in keyof OaiResumptionToken]: OaiResumptionToken[K] } = { value };
    const size = this.#tokenAttrs.completeListSize;
    if (size !== undefined && /^\d+$/.test(size)) t.completeListSize = Number(size);
    const cursor = this.#tokenAttrs.cursor;
    if (cursor !== undefined && /^\d+$/.test(cursor)) t.cursor = Number(cursor);
    const exp = this.#tokenAttrs.expirationDate;
    if (exp !== undefined) t.expirationDate = exp;
    return t;
  }

  #identify(): OaiIdentify {
    const f = this.#identifyFields;
    const one = (k: string): string => f.get(k)?.[0] ?? '';
    return {
      repositoryName: one('repositoryName'),
      baseURL: one('baseURL'),
      protocolVersion: one('protocolVersion'),
      earliestDatestamp: one('earliestDatestamp'),
      deletedRecord: one('deletedRecord'),
      granularity: one('granularity'),
      adminEmails: f.get('adminEmail') ?? [],
      compressions: f.get('compression') ?? [],
    };
  }
}

/**
 * UTC epoch ms of an OAI-PMH datestamp: `YYYY-MM-DD` (its first instant) or `YYYY-MM-DDThh:mm:ssZ`; also
 * accepted, since providers write them: fractions of a second and `±hh:mm` offsets. Undefined for anything else.
 */
export function datestampMs(text: string): number | undefined {
  const d = parseDatetime(text);
  if (d === undefined) return undefined;
  if (d.precision === 'day' || d.precision === 'second' || d.precision === 'fraction') return d.ms;
  return undefined;
}

/** saxes appends its own position to messages; ours is in the error's location. */
function stripPosition(message: string): string {
  return message.replace(/^(?:[^:\s]*:)?\d+:\d+: /, '');
}
