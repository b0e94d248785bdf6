/**
 * The PostgreSQL store's schema, as numbered migrations shipped in the package. A store's schema records the
 * migrations applied to it (`schema_migrations`); opening it applies the missing ones in order, each in its own
 * transaction, and refuses a schema that has a migration this version does not know (written by a newer
 * resourcesync). `{s}` stands for the quoted schema name.
 *
 * Keys compare in binary (`COLLATE "C"`): the order the directory scan merges in and the SQLite store keeps.
 *
 * @module
 */

/** One step of the schema. Never edit a released step: add the next one. */
export interface Migration {
  readonly version: number;
  readonly description: string;
  readonly sql: string;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    description: 'inventory, change log, Change Lists, versions, metadata, batch ids',
    sql: `
CREATE TABLE {s}.state (
  id integer PRIMARY KEY CHECK (id = 1),
  seq bigint NOT NULL,
  version bigint NOT NULL,
  last_ms bigint,
  floor_ms bigint NOT NULL,
  created_ms bigint NOT NULL
);
INSERT INTO {s}.state (id, seq, version, last_ms, floor_ms, created_ms)
  VALUES (1, 0, 0, NULL, 0, (extract(epoch FROM clock_timestamp()) * 1000)::bigint);
CREATE TABLE {s}.resources (
  uri text COLLATE "C" PRIMARY KEY,
  set_name text COLLATE "C" NOT NULL,
  length bigint NOT NULL,
  type text,
  md5 text,
  sha1 text,
  sha256 text,
  lastmod_ms bigint NOT NULL,
  file_id text
);
CREATE INDEX resources_by_set ON {s}.resources (set_name, uri);
CREATE TABLE {s}.changes (
  seq bigint PRIMARY KEY,
  uri text COLLATE "C" NOT NULL,
  change text NOT NULL CHECK (change IN ('created', 'updated', 'deleted')),
  datetime_ms bigint NOT NULL,
  set_name text COLLATE "C" NOT NULL,
  length bigint,
  type text,
  md5 text,
  sha1 text,
  sha256 text,
  lastmod_ms bigint
);
CREATE INDEX changes_by_set ON {s}.changes (set_name, seq);
CREATE TABLE {s}.change_lists (
  set_name text COLLATE "C" NOT NULL,
  number integer NOT NULL,
  from_ms bigint NOT NULL,
  until_ms bigint,
  count integer NOT NULL DEFAULT 0,
  last_seq bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (set_name, number)
);
CREATE TABLE {s}.set_versions (set_name text COLLATE "C" PRIMARY KEY, version bigint NOT NULL);
CREATE TABLE {s}.meta (key text COLLATE "C" PRIMARY KEY, value text NOT NULL);
CREATE TABLE {s}.batches (id uuid PRIMARY KEY, first_seq bigint NOT NULL, last_seq bigint NOT NULL, at_ms bigint NOT NULL);
CREATE INDEX batches_by_time ON {s}.batches (at_ms);
`,
  },
  {
    version: 2,
    description: 'links of resources and changes (§14), JSON as in the SQLite store',
    sql: `
ALTER TABLE {s}.resources ADD COLUMN links text;
ALTER TABLE {s}.changes ADD COLUMN links text;
`,
  },
];

/** The highest migration this version of resourcesync knows. */
export const SCHEMA_VERSION: number = MIGRATIONS[MIGRATIONS.length - 1]!.version;
