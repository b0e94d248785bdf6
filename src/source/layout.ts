/**
 * Where a Source's generated documents live: their URLs, and the files under a site directory that mirrors the
 * URL paths of the origin (so `publish` output can be served as is by any web server).
 *
 * ```
 * /.well-known/resourcesync                                   Source Description (§8, RFC 8615), or its Index
 * <base>resourcesync/description-0001.xml ...                 Source Descriptions of an Index (past 50,000 sets)
 * <base>resourcesync/<set>/capabilitylist.xml                 Capability List (§9)
 * <base>resourcesync/<set>/resourcelist.xml                   Resource List, or its Index (§10)
 * <base>resourcesync/<set>/resourcelist-0001.xml ...          parts of an Index
 * <base>resourcesync/<set>/resourcedump.xml                   Resource Dump, or its Index (§11)
 * <base>resourcesync/<set>/resourcedump-v<version>-0001.zip   packages (+ -manifest.xml copies)
 * <base>resourcesync/<set>/changelist.xml                     the Change List while there is one, else its Index (§12)
 * <base>resourcesync/<set>/changelist-0001.xml ...            Change Lists (the last one open)
 * <base>resourcesync/<set>/changelist-0001-0002.xml ...       more of a Change List past 50 MB
 * <base>resourcesync/<set>/changedump.xml                     Change Dump, or its Index (§13)
 * <base>resourcesync/<set>/changedump-<seq>-<seq>.zip         packages (+ -manifest.xml copies)
 * ```
 *
 * @module
 */
import { join } from 'node:path';
import { WELL_KNOWN_PATH } from '../core/constants.js';
import { requestRelativePath } from './paths.js';

/** The first path segment under the base URL reserved for generated documents. */
export const DOCUMENTS_DIR = 'resourcesync';

/** Document groups: each is regenerated as a whole when the store moved. */
export type GroupKind =
  | 'description'
  | 'capabilitylist'
  | 'resourcelist'
  | 'resourcedump'
  | 'changelist'
  | 'changedump';

/** A request pathname resolved to the group that produces it. */
export interface DocumentTarget {
  readonly group: GroupKind;
  readonly setName?: string;
  /**
   * File name inside the set directory (or `resourcesync` for the Source Description or its Index,
   * `description-0001.xml` for a Source Description listed by the Index).
   */
  readonly file: string;
  /** Absolute path of the file under the site directory. */
  readonly path: string;
}

/** URLs and file paths of one Source's documents. */
export class SiteLayout {
  readonly baseUrl: URL;
  readonly siteDir: string;
  readonly sourceDescriptionUrl: string;
  readonly #origin: URL;
  /** `/<base path>resourcesync/` as a request pathname without percent-encoding starts when it names a set document. */
  readonly #documentsPrefix: string | undefined;
  /** Capability List URLs by set name (a server puts one in the Link header of every resource response). */
  readonly #capabilityListUrls = new Map<string, string>();

  constructor(baseUrl: URL, siteDir: string) {
    this.baseUrl = baseUrl;
    this.siteDir = siteDir;
    this.#origin = new URL('/', baseUrl);
    this.sourceDescriptionUrl = new URL(WELL_KNOWN_PATH, baseUrl).href;
    try {
      this.#documentsPrefix = `/${decodeURIComponent(baseUrl.pathname).replace(/^\/+/, '')}${DOCUMENTS_DIR}/`;
    } catch {
      this.#documentsPrefix = undefined; // a base path that does not decode: every lookup takes the full way
    }
  }

  get sourceDescriptionPath(): string {
    return join(this.siteDir, '.well-known', 'resourcesync');
  }

  /**
   * URL of Source Description `n` (1-based) of a Source Description Index (§8: a Source with more sets than one
   * document holds publishes several Source Descriptions, grouped by the Index at the well-known URI).
   */
  sourceDescriptionPartUrl(n: number): string {
    return `${this.baseUrl.href}${DOCUMENTS_DIR}/${sourceDescriptionPartFile(n)}`;
  }

  /** File of Source Description `n` of a Source Description Index. */
  sourceDescriptionPartPath(n: number): string {
    const basePath = decodeURIComponent(this.baseUrl.pathname).replace(/^\/+/, '');
    return join(this.siteDir, basePath, DOCUMENTS_DIR, sourceDescriptionPartFile(n));
  }

  /** URL of a file of a set's directory. */
  url(setName: string, file: string): string {
    return `${this.baseUrl.href}${DOCUMENTS_DIR}/${encodeURIComponent(setName)}/${encodeURIComponent(file)}`;
  }

  /** Directory of a set's documents under the site directory. */
  setDir(setName: string): string {
    const basePath = decodeURIComponent(this.baseUrl.pathname).replace(/^\/+/, '');
    return join(this.siteDir, basePath, DOCUMENTS_DIR, setName);
  }

  path(setName: string, file: string): string {
    return join(this.setDir(setName), file);
  }

  capabilityListUrl(setName: string): string {
    let url = this.#capabilityListUrls.get(setName);
    if (url === undefined) {
      url = this.url(setName, 'capabilitylist.xml');
      // Bounded: set names come from the collection's folders (or the configuration).
      if (this.#capabilityListUrls.size >= 1000) this.#capabilityListUrls.clear();
      this.#capabilityListUrls.set(setName, url);
    }
    return url;
  }

  /** Resolves a request pathname (raw, percent-encoded) to a document; undefined when it names none. */
  resolve(pathname: string): DocumentTarget | undefined {
    // Most requests are for resources: without percent-encoding, the raw path is the decoded one, and a
    // document path is the Source Description or starts with the documents' directory.
    const documents = this.#documentsPrefix;
    if (
      documents !== undefined &&
      !pathname.includes('%') &&
      pathname !== WELL_KNOWN_PATH &&
      !pathname.startsWith(documents)
    )
      return undefined;
    const rel = requestRelativePath(this.#origin, pathname, true);
    if (rel === undefined) return undefined;
    if (`/${rel}` === WELL_KNOWN_PATH)
      return { group: 'description', file: 'resourcesync', path: this.sourceDescriptionPath };
    const basePath = decodeURIComponent(this.baseUrl.pathname).replace(/^\/+/, '');
    const prefix = `${basePath}${DOCUMENTS_DIR}/`;
    if (!rel.startsWith(prefix)) return undefined;
    const parts = rel.slice(prefix.length).split('/');
    // A Source Description of an Index sits beside the sets' directories (a set is a directory, never a file).
    if (parts.length === 1 && SOURCE_DESCRIPTION_PART.test(parts[0] as string)) {
      const file = parts[0] as string;
      return { group: 'description', file, path: join(this.siteDir, prefix, file) };
    }
    if (parts.length !== 2) return undefined;
    const [setName, file] = parts as [string, string];
    const group = groupOf(file);
    if (group === undefined) return undefined;
    return { group, setName, file, path: this.path(setName, file) };
  }
}

/** File names of the Source Descriptions of a Source Description Index. */
const SOURCE_DESCRIPTION_PART = /^description-\d{4,}\.xml$/;

function sourceDescriptionPartFile(n: number): string {
  return `description-${partName(n)}.xml`;
}

function groupOf(file: string): GroupKind | undefined {
  if (file === 'capabilitylist.xml') return 'capabilitylist';
  if (/^resourcelist(-\d{4,})?\.xml$/.test(file)) return 'resourcelist';
  if (/^resourcedump(-\d{4,}\.xml|\.xml|-v\d+-\d{4,}(\.zip|-manifest\.xml))$/.test(file)) return 'resourcedump';
  if (/^changelist(-\d{4,}){0,2}\.xml$/.test(file)) return 'changelist';
  if (/^changedump(-\d{4,}\.xml|\.xml|-\d+-\d+(\.zip|-manifest\.xml))$/.test(file)) return 'changedump';
  return undefined;
}

/** `0001`-style part number. */
export function partName(n: number): string {
  return String(n).padStart(4, '0');
}
