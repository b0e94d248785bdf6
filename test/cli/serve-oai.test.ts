// `resourcesync serve --oai-pmh` as a child process against our own OAI-PMH server: 503 until the first harvest
// is done, then the records; harvests again on the interval; SIGTERM stops it with exit 0; bad input exits 2, a
// provider that cannot be harvested exits 1 with its error.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startOaiServer, type OaiTestServer } from '../source/oai-server.js';
import { killChildren, runCli, waitForEvent } from './cli-child.js';

describe('serve --oai-pmh', { timeout: 120_000 }, () => {
  let root = '';
  let provider: OaiTestServer;
  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'rs-serve-oai-'));
    await mkdir(join(root, 'dir'));
    provider = await startOaiServer({ pageSize: 5 });
    provider.now = Date.parse('2024-03-01T10:00:00Z');
    for (let i = 1; i <= 12; i++) provider.put(`oai:t:${i}`, `Title ${i}`, []);
    provider.now = Date.parse('2024-03-01T12:00:00Z');
  });
  after(async () => {
    killChildren();
    await provider.close();
    await rm(root, { recursive: true, force: true });
  });

  it('harvests, serves, harvests again on the interval, and stops on SIGTERM', async () => {
    // The provider holds the first page until released, so the 503 can be seen.
    let release: () => void = () => undefined;
    const held = new Promise<void>((r) => (release = r));
    provider.fault = (q) =>
      q.get('verb') === 'ListRecords'
        ? {
            headers: { 'content-type': 'text/xml' },
            body: async (res) => {
              await held;
              res.end(provider.render(q));
            },
          }
        : undefined;
    const r = runCli([
      'serve',
      '--oai-pmh',
      provider.url,
      '--metadata-prefix',
      'oai_dc',
      '--metadata-prefix',
      'mods',
      '--port',
      '0',
      '--json',
      '--state',
      join(root, 'state'),
      '--oai-interval',
      '1s',
    ]);
    const harvesting = await waitForEvent(r, 'harvesting');
    const url = String(harvesting.url);
    const early = await fetch(`${url}.well-known/resourcesync`);
    assert.equal(early.status, 503);
    await early.arrayBuffer();
    release();
    provider.fault = undefined;
    const first = await waitForEvent(r, 'harvest');
    assert.equal(first.created, 24);
    const listening = await waitForEvent(r, 'listening');
    assert.equal(listening.resources, 24);
    const res = await fetch(`${url}items/oai:t:3/mods.xml`);
    assert.equal(res.status, 200);
    assert.match(await res.text(), /<title>Title 3<\/title>/);
    // A change at the provider shows up after the interval.
    provider.now += 3_600_000;
    provider.put('oai:t:3', 'Title 3, revised', []);
    const next = await waitForEvent(r, 'harvest', (e) => e.updated === 2);
    assert.equal(next.logged, true);
    const cl = await (await fetch(`${url}resourcesync/default/changelist.xml`)).text();
    assert.match(cl, /items\/oai:t:3\/mods\.xml<\/loc>/);
    r.child.kill('SIGTERM');
    assert.equal(await r.exit, 0, r.stderr());
    assert.match(r.stdout(), /"event":"stopped"/);
  });

  it('killed (SIGKILL) in the middle of a harvest, goes on from the last page done: nothing lost, nothing doubled', async () => {
    const state = join(root, 'state-kill');
    const args = [
      'serve',
      '--oai-pmh',
      provider.url,
      '--port',
      '0',
      '--json',
      '--state',
      state,
      '--oai-interval',
      '1s',
    ];
    const r1 = runCli(args);
    await waitForEvent(r1, 'listening');
    const url = String((await waitForEvent(r1, 'listening')).url);
    // 20 records change (4 pages of 5); the third page stalls half-way, after the first two were applied.
    provider.now += 3_600_000;
    for (let i = 1; i <= 20; i++) provider.put(`oai:t:${i}`, `Title ${i}, second version`, []);
    let pages = 0;
    provider.fault = (q) => {
      if (q.get('verb') !== 'ListRecords' || q.get('resumptionToken') === null) return undefined;
      pages++;
      if (pages < 2) return undefined;
      const body = provider.render(q);
      return {
        headers: { 'content-type': 'text/xml' },
        body: (res) => void res.write(body.slice(0, body.indexOf('<record>', body.length / 2))),
      };
    };
    const entries = async (): Promise<string[]> => {
      const text = await (await fetch(`${url}resourcesync/default/changelist.xml`)).text();
      return [...text.matchAll(/<loc>([^<]*)<\/loc>/g)].map((m) => m[1]!);
    };
    const deadline = Date.now() + 60_000;
    while ((await entries()).length < 10 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    assert.equal((await entries()).length, 10, 'the first two pages were recorded');
    r1.child.kill('SIGKILL');
    await r1.exit;
    provider.fault = undefined;
    const r2 = runCli(args);
    const listening = await waitForEvent(r2, 'listening');
    const url2 = String(listening.url);
    await waitForEvent(r2, 'harvest', (e) => Number(e.created) + Number(e.updated) === 10);
    const text = await (await fetch(`${url2}resourcesync/default/changelist.xml`)).text();
    const locs = [...text.matchAll(/<loc>[^<]*\/items\/([^<]*)<\/loc>/g)].map((m) => m[1]!);
    assert.equal(locs.length, 20, text);
    assert.equal(new Set(locs).size, 20, 'no change recorded twice');
    r2.child.kill('SIGTERM');
    assert.equal(await r2.exit, 0, r2.stderr());
  });

  it('refuses bad arguments with exit 2', async () => {
    const both = runCli(['serve', join(root, 'dir'), '--oai-pmh', provider.url, '--port', '0']);
    assert.equal(await both.exit, 2);
    assert.match(both.stderr(), /a directory or --oai-pmh/);
    const stray = runCli(['serve', join(root, 'dir'), '--metadata-prefix', 'mods', '--port', '0']);
    assert.equal(await stray.exit, 2);
    assert.match(stray.stderr(), /--metadata-prefix goes with --oai-pmh/);
    const unknown = runCli([
      'serve',
      '--oai-pmh',
      provider.url,
      '--metadata-prefix',
      'marc21',
      '--port',
      '0',
      '--state',
      join(root, 'state-marc'),
    ]);
    assert.equal(await unknown.exit, 2);
    assert.match(unknown.stderr(), /does not offer metadata format marc21/);
  });

  it('exits 1 with the error when the provider cannot be harvested', async () => {
    provider.fault = (q) => (q.get('verb') === 'ListRecords' ? { body: '<html>not OAI</html>' } : undefined);
    try {
      const r = runCli(['serve', '--oai-pmh', provider.url, '--port', '0', '--state', join(root, 'state-bad')]);
      assert.equal(await r.exit, 1);
      assert.match(r.stderr(), /not an OAI-PMH 2.0 response/);
      assert.match(r.stderr(), /verb=ListRecords/);
    } finally {
      provider.fault = undefined;
    }
  });
});
