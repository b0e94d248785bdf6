/** The OAI-PMH bridge's per-record links (§14): `via` GetRecord, `alternate` the item's other formats. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { openOaiBridge } from '../../src/source/oai/bridge.js';
import { recordKey } from '../../src/source/oai/model.js';
import { resourceUrl } from '../../src/source/paths.js';
import { crawl, tempDir } from './helpers.js';
import { startOaiServer } from './oai-server.js';

describe('OAI-PMH bridge: per-record links', { timeout: 60_000 }, () => {
  it('links each format to the item’s other formats that exist, and to its GetRecord; siblings follow', async () => {
    const server = await startOaiServer({ pageSize: 10 });
    const { dir, cleanup } = await tempDir('rs-oai-links-');
    const bridge = await openOaiBridge({
      provider: server.url,
      baseUrl: 'http://127.0.0.1:9/',
      stateDir: dir,
      metadataPrefixes: ['oai_dc', 'mods'],
      httpOptions: { retries: 2, retryBaseDelayMs: 10, maxRetryDelayMs: 50 },
      fsync: false,
      regenerateAfterMs: Number.POSITIVE_INFINITY,
    });
    try {
      server.now = Date.parse('2024-03-01T10:00:00Z');
      server.put('oai:t:1', 'One');
      server.put('oai:t:2', 'Two', [], ['oai_dc']);
      server.now = Date.parse('2024-03-01T11:00:00Z');
      await bridge.harvest();
      const via = (id: string, p: string) =>
        `${server.url}?verb=GetRecord&identifier=${encodeURIComponent(id)}&metadataPrefix=${p}`;
      const linksOf = async (id: string, p: string) => (await bridge.store.getResource(recordKey(id, p)))?.links;
      assert.deepEqual(await linksOf('oai:t:1', 'oai_dc'), [
        { rel: 'via', href: via('oai:t:1', 'oai_dc') },
        { rel: 'alternate', href: recordKey('oai:t:1', 'mods'), type: 'application/xml' },
      ]);
      assert.deepEqual(await linksOf('oai:t:1', 'mods'), [
        { rel: 'via', href: via('oai:t:1', 'mods') },
        { rel: 'alternate', href: recordKey('oai:t:1', 'oai_dc'), type: 'application/xml' },
      ]);
      assert.deepEqual(await linksOf('oai:t:2', 'oai_dc'), [{ rel: 'via', href: via('oai:t:2', 'oai_dc') }]);

      // Item 2 gains the mods format: its oai_dc record gets the alternate link (no change logged for it).
      server.now = Date.parse('2024-03-01T12:00:00Z');
      server.put('oai:t:2', 'Two', [], ['oai_dc', 'mods']);
      server.now = Date.parse('2024-03-01T13:00:00Z');
      await bridge.harvest();
      assert.deepEqual(await linksOf('oai:t:2', 'oai_dc'), [
        { rel: 'via', href: via('oai:t:2', 'oai_dc') },
        { rel: 'alternate', href: recordKey('oai:t:2', 'mods'), type: 'application/xml' },
      ]);

      // The published documents carry them, resolved against the base URL.
      const { docs } = await crawl(bridge, bridge.sourceDescriptionUrl);
      const rl = docs.find((d) => d.doc.kind === 'resource-list');
      const url = (id: string, p: string) => resourceUrl(new URL('http://127.0.0.1:9/'), recordKey(id, p));
      const dc1 = rl?.doc.entries.find((e) => e.loc === url('oai:t:1', 'oai_dc'));
      assert.deepEqual(
        dc1?.links.map((l) => [l.rel, l.href]),
        [
          ['via', via('oai:t:1', 'oai_dc')],
          ['alternate', url('oai:t:1', 'mods')],
        ],
      );
      const cl = docs.filter((d) => d.doc.kind === 'change-list').flatMap((d) => d.doc.entries);
      const mods2 = cl.find((e) => e.loc === url('oai:t:2', 'mods'));
      assert.equal(mods2?.md?.change, 'created');
      assert.deepEqual(
        mods2?.links.map((l) => l.rel),
        ['via', 'alternate'],
      );
    } finally {
      await bridge.close();
      await server.close();
      await cleanup();
    }
  });
});
