/**
 * Runs Debian's Catmandu OAI-PMH provider (`libdancer-plugin-catmandu-oai-perl`) over an SQLite file, as set up
 * in `test/fixtures/oai-catmandu/` (see its README): a real, independent OAI-PMH 2.0 implementation for the
 * bridge's tests and benchmark. Records are written straight into the SQLite table the provider reads. Not a
 * test file itself.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';

/** The Debian packages the provider needs. */
export const CATMANDU_PACKAGES =
  'libdancer-plugin-catmandu-oai-perl libcatmandu-dbi-perl libdbd-sqlite3-perl libcql-parser-perl';

/** Why the provider cannot run here (a message saying how to install it), or undefined when it can. */
export function catmanduMissing(): string | undefined {
  const r = spawnSync(
    'perl',
    [
      '-e',
      'use Dancer; use Dancer::Plugin::Catmandu::OAI; use Catmandu::Store::DBI; use DBD::SQLite; use CQL::Parser;',
    ],
    { stdio: 'ignore' },
  );
  if (r.status === 0) return undefined;
  return `Debian's Catmandu OAI-PMH provider is not installed: apt-get install -y ${CATMANDU_PACKAGES}`;
}

function fixtureDir(): string {
  // dist/test/source/ or test/source/ -> <repo>/test/fixtures/oai-catmandu
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++) {
    const candidate = join(dir, 'test', 'fixtures', 'oai-catmandu');
    if (existsSync(join(candidate, 'app.pl'))) return candidate;
    dir = resolve(dir, '..');
  }
  throw new Error('test/fixtures/oai-catmandu not found');
}

/** A record as the provider's store holds it. */
export interface CatmanduRecord {
  readonly id: string;
  /** `YYYY-MM-DDThh:mm:ssZ`. */
  readonly datestamp: string;
  readonly sets?: readonly string[];
  readonly title: string;
  readonly creator?: string;
  readonly deleted?: boolean;
}

/** The provider's SQLite store, written directly. */
export class CatmanduDb {
  readonly path: string;
  readonly #db: Database.Database;
  readonly #put;
  readonly #del;

  constructor(path: string) {
    this.path = path;
    this.#db = new Database(path);
    this.#db.pragma('journal_mode = WAL');
    // The table Catmandu::Store::DBI creates for the mapping of app.pl.
    this.#db.exec(
      'CREATE TABLE IF NOT EXISTS "data"("sets" TEXT,"data" BLOB,"datestamp" TEXT,"id" TEXT UNIQUE NOT NULL);' +
        'CREATE INDEX IF NOT EXISTS "data_datestamp_idx" ON "data"("datestamp");',
    );
    this.#put = this.#db.prepare(
      'INSERT INTO data(id, datestamp, sets, data) VALUES (?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET ' +
        'datestamp = excluded.datestamp, sets = excluded.sets, data = excluded.data',
    );
    this.#del = this.#db.prepare('DELETE FROM data WHERE id = ?');
  }

  /** Adds or replaces records (one transaction). */
  put(records: readonly CatmanduRecord[]): void {
    this.#db.transaction(() => {
      for (const r of records) {
        const data: Record<string, unknown> = { title: [r.title] };
        if (r.creator !== undefined) data.creator = [r.creator];
        if (r.deleted === true) data.deleted = 1;
        this.#put.run(r.id, r.datestamp, `|${(r.sets ?? []).join('|')}|`, Buffer.from(JSON.stringify(data), 'utf8'));
      }
    })();
  }

  /** Every record: id, sets, whether deleted. */
  records(): { id: string; sets: string[]; deleted: boolean }[] {
    return this.#db
      .prepare<[], { id: string; sets: string; data: Buffer }>('SELECT id, sets, data FROM data')
      .all()
      .map((r) => ({
        id: r.id,
        sets: r.sets.split('|').filter((x) => x !== ''),
        deleted: (JSON.parse(r.data.toString('utf8')) as { deleted?: number }).deleted === 1,
      }));
  }

  /** Removes records for good (what a provider without deleted-record support does). */
  purge(ids: readonly string[]): void {
    this.#db.transaction(() => {
      for (const id of ids) this.#del.run(id);
    })();
  }

  close(): void {
    this.#db.close();
  }
}

/** `YYYY-MM-DDThh:mm:ssZ` of a UTC instant. */
export function catmanduDatestamp(ms: number): string {
  return `${new Date(ms).toISOString().slice(0, 19)}Z`;
}

export interface CatmanduProviderOptions {
  readonly db: string;
  readonly deletedRecord?: 'no' | 'transient' | 'persistent';
  readonly granularity?: 'YYYY-MM-DD' | 'YYYY-MM-DDThh:mm:ssZ';
  /** Records per page (default 100). */
  readonly limit?: number;
}

export interface CatmanduProvider {
  /** The OAI-PMH base URL. */
  readonly url: string;
  readonly process: ChildProcess;
  /** What the provider wrote to stderr (its error log). */
  readonly stderr: () => string;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const s = createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      const port = typeof a === 'object' && a !== null ? a.port : 0;
      s.close(() => resolvePort(port));
    });
  });
}

/**
 * Starts the provider on 127.0.0.1 and a free port; resolves once it answers `Identify`. A port taken between
 * choosing and binding it is retried with another one.
 */
export async function startCatmanduProvider(options: CatmanduProviderOptions): Promise<CatmanduProvider> {
  const dir = fixtureDir();
  let lastError = '';
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    const child = spawn('perl', [join(dir, 'app.pl')], {
      cwd: dir,
      env: {
        ...process.env,
        OAI_DB: options.db,
        OAI_PORT: String(port),
        OAI_DELETED: options.deletedRecord ?? 'persistent',
        OAI_GRANULARITY: options.granularity ?? 'YYYY-MM-DDThh:mm:ssZ',
        OAI_LIMIT: String(options.limit ?? 100),
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let err = '';
    child.stderr?.on('data', (c: Buffer) => {
      err = (err + c.toString()).slice(-20_000);
    });
    let exited = false;
    child.on('exit', () => {
      exited = true;
    });
    const url = `http://127.0.0.1:${port}/oai`;
    const deadline = Date.now() + 60_000;
    while (!exited && Date.now() < deadline) {
      try {
        const res = await fetch(`${url}?verb=Identify`);
        const text = await res.text();
        if (res.status === 200 && text.includes('<Identify>')) {
          const stop = async (): Promise<void> => {
            if (exited) return;
            const gone = new Promise<void>((r) => child.once('exit', () => r()));
            child.kill('SIGTERM');
            await gone;
          };
          return { url, process: child, stderr: () => err, stop };
        }
      } catch {
        // not listening yet
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    if (!exited) {
      child.kill('SIGKILL');
      throw new Error(`the Catmandu provider did not answer within 60 s: ${err}`);
    }
    lastError = err;
  }
  throw new Error(`the Catmandu provider did not start: ${lastError}`);
}
