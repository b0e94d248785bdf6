#!/usr/bin/env node
// A ResourceSync Source over a database-backed collection, with the adapter API of `resourcesync/source`.
//
// The "repository" is a SQLite database (better-sqlite3) with a table of items; triggers write every insert,
// update and delete into an event table, which is the adapter's change feed. Each item is published as two
// resources linked to each other (§14.5): its text, `items/<id>.txt`, `describedby` its Dublin Core record,
// `items/<id>.xml`, which `describes` it. The bytes are made from the row on request (the adapter's `open`);
// the Source reads them once to learn their length and hashes, and checks them again when it serves them.
//
//   npm run build
//   node examples/database-collection.mjs --db items.db --state ./db-state --port 8080
//   curl http://127.0.0.1:8080/.well-known/resourcesync
//   sqlite3 items.db "UPDATE items SET body = 'new text' WHERE id = 1"   # in the Change List within --poll-ms
//
// Options: --db FILE (created with --seed sample items when new), --state DIR, --port N (0: any free port),
// --host H (default 127.0.0.1), --base-url URL (default http://H:PORT/), --poll-ms N (default 2000), --seed N
// (default 3). Prints one JSON line {"url": ...} once it serves; stops on SIGINT/SIGTERM.
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { createSourceServer, openRepositorySource } from 'resourcesync/source';

const { values: opts } = parseArgs({
  options: {
    db: { type: 'string', default: 'items.db' },
    state: { type: 'string', default: 'db-state' },
    port: { type: 'string', default: '8080' },
    host: { type: 'string', default: '127.0.0.1' },
    'base-url': { type: 'string' },
    'poll-ms': { type: 'string', default: '2000' },
    seed: { type: 'string', default: '3' },
  },
});

// The repository's own database: items, and an event log filled by triggers.
const db = new Database(opts.db);
db.pragma('journal_mode = WAL');
const NOW_MS = "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)";
db.exec(`
  CREATE TABLE IF NOT EXISTS items (id INTEGER PRIMARY KEY, title TEXT NOT NULL, body TEXT NOT NULL, updated_at INTEGER);
  CREATE TABLE IF NOT EXISTS item_events (seq INTEGER PRIMARY KEY AUTOINCREMENT, item_id INTEGER NOT NULL, op TEXT NOT NULL);
  -- updated_at is kept by the database: set on insert, moved on by every edit (at least 1 ms, so it tells versions apart).
  CREATE TRIGGER IF NOT EXISTS items_ins AFTER INSERT ON items BEGIN
    UPDATE items SET updated_at = ${NOW_MS} WHERE id = NEW.id AND updated_at IS NULL;
    INSERT INTO item_events(item_id, op) VALUES (NEW.id, 'upsert'); END;
  CREATE TRIGGER IF NOT EXISTS items_edit AFTER UPDATE OF title, body ON items WHEN NEW.updated_at IS OLD.updated_at BEGIN
    UPDATE items SET updated_at = max(${NOW_MS}, OLD.updated_at + 1) WHERE id = NEW.id; END;
  CREATE TRIGGER IF NOT EXISTS items_upd AFTER UPDATE ON items BEGIN
    INSERT INTO item_events(item_id, op) VALUES (NEW.id, 'upsert'); END;
  CREATE TRIGGER IF NOT EXISTS items_del AFTER DELETE ON items BEGIN
    INSERT INTO item_events(item_id, op) VALUES (OLD.id, 'delete'); END;
`);
if (db.prepare('SELECT count(*) AS n FROM items').get().n === 0) {
  const add = db.prepare('INSERT INTO items(title, body) VALUES (?, ?)');
  for (let i = 1; i <= Number(opts.seed); i++) add.run(`Item ${i}`, `The text of item ${i}.\n`);
}

const getItem = db.prepare('SELECT id, title, body, updated_at FROM items WHERE id = ?');
const escapeXml = (s) => s.replace(/[<>&"]/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;' })[c]);
const dublinCore = (item) =>
  `<?xml version="1.0" encoding="UTF-8"?>\n<oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" xmlns:dc="http://purl.org/dc/elements/1.1/">\n  <dc:title>${escapeXml(item.title)}</dc:title>\n  <dc:identifier>item-${item.id}</dc:identifier>\n</oai_dc:dc>\n`;

/** The two records of an item (the adapter learns length and hashes from the bytes). */
function recordsOf(item) {
  const text = `items/${item.id}.txt`;
  const meta = `items/${item.id}.xml`;
  return [
    {
      uri: text,
      type: 'text/plain',
      lastmod: item.updated_at,
      links: [{ rel: 'describedby', href: meta, type: 'application/xml' }],
    },
    {
      uri: meta,
      type: 'application/xml',
      lastmod: item.updated_at,
      links: [
        { rel: 'describes', href: text, type: 'text/plain' },
        { rel: 'profile', href: 'http://purl.org/dc/elements/1.1/' },
      ],
    },
  ];
}

/** The adapter: what the repository holds, what changed, and the bytes. */
const repository = {
  async *list() {
    for (const item of db.prepare('SELECT id, title, body, updated_at FROM items ORDER BY id').iterate())
      yield* recordsOf(item);
  },
  async changes(cursor) {
    const after = cursor === undefined ? 0 : Number(cursor);
    const events = db.prepare('SELECT seq, item_id, op FROM item_events WHERE seq > ? ORDER BY seq LIMIT 1000').all(after);
    const changes = [];
    for (const e of events) {
      const item = e.op === 'delete' ? undefined : getItem.get(e.item_id);
      if (item === undefined)
        for (const uri of [`items/${e.item_id}.txt`, `items/${e.item_id}.xml`]) changes.push({ uri, change: 'deleted' });
      else for (const r of recordsOf(item)) changes.push({ ...r, change: 'updated' });
    }
    return { changes, cursor: String(events.at(-1)?.seq ?? after) };
  },
  async *open(record) {
    const m = /^items\/(\d+)\.(txt|xml)$/.exec(record.uri);
    const item = m === null ? undefined : getItem.get(Number(m[1]));
    if (item === undefined) return;
    yield Buffer.from(m[2] === 'txt' ? item.body : dublinCore(item));
  },
};

// Listen first (the port may be chosen by the system), then open the Source with its base URL; requests get
// 503 until it is open and the first sync (the baseline) is done.
let site;
let portKnown;
const port = new Promise((resolve) => {
  portKnown = resolve;
});
const opening = (async () => {
  site = await openRepositorySource({
    repository,
    baseUrl: opts['base-url'] ?? `http://${opts.host}:${await port}/`,
    stateDir: opts.state,
    onWarning: (m) => console.error(`warning: ${m}`),
  });
  // The first sync is the baseline; later ones find what changed while we were not running.
  await site.sync();
  site.start({ intervalMs: Number(opts['poll-ms']) });
  return site;
})();
opening.catch((e) => {
  console.error(`cannot open the Source: ${e.message}`);
  process.exit(1);
});
const server = createSourceServer(opening);
const address = await server.listen(Number(opts.port), opts.host);
portKnown(address.port);
console.log(JSON.stringify({ url: address.url }));

async function stop() {
  await server.close();
  await site?.close();
  db.close();
  process.exit(0);
}
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
