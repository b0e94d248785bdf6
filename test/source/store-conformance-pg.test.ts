/**
 * Runs the SourceStore conformance suite against the PostgreSQL store (skipped without RESOURCESYNC_TEST_PG).
 */
import { describe } from 'node:test';
import { openPgStore, type PgStore } from '../../src/source/pg-store.js';
import { PG_SKIP, PG_URL, openTestPgStore } from './pg-helpers.js';
import { storeConformance } from './store-conformance.js';

if (PG_SKIP === false) {
  storeConformance({
    name: 'PostgreSQL',
    shared: true,
    async create() {
      const { store, schema, drop } = await openTestPgStore();
      const opened: PgStore[] = [];
      return {
        store,
        open: async () => {
          const s = await openPgStore({ url: PG_URL!, schema });
          opened.push(s);
          return s;
        },
        cleanup: async () => {
          for (const s of opened) await s.close();
          await drop();
        },
      };
    },
  });
} else {
  describe('SourceStore conformance: PostgreSQL', { skip: PG_SKIP }, () => {});
}
