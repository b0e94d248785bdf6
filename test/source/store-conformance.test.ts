/**
 * Runs the SourceStore conformance suite against the SQLite store.
 */
import { join } from 'node:path';
import { openSqliteStore } from '../../src/source/index.js';
import { tempDir } from './helpers.js';
import { storeConformance } from './store-conformance.js';

storeConformance({
  name: 'SQLite',
  shared: false,
  async create() {
    const { dir, cleanup } = await tempDir('rs-store-');
    const path = join(dir, 'state', 'source.db');
    return { store: await openSqliteStore({ path }), open: () => openSqliteStore({ path }), cleanup };
  },
});
