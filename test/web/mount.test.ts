// The explorer mounted in a Source server (as serve does): it explores the server's own Source through the
// listening address even when the documents name another (public) base URL, and fetches nothing else.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type DirectorySource, openDirectorySource } from '../../src/source/index.js';
import { createSourceServer, type SourceServer } from '../../src/source/server.js';
import { type MountedExplorer, mountExplorer } from '../../src/web/mount.js';
import type { Json } from './helpers.js';

const PUBLIC = 'http://public.example.invalid/';
let root = '';
let site: DirectorySource;
let server: SourceServer;
let explorer: MountedExplorer;
let local = '';

before(async () => {
  root = await mkdtemp(join(tmpdir(), 'rs-explorer-mount-'));
  await mkdir(join(root, 'col'));
  await writeFile(join(root, 'col', 'a.txt'), 'alpha\n');
  let resolveSite: (s: DirectorySource) => void = () => {};
  const sitePromise = new Promise<DirectorySource>((r) => {
    resolveSite = r;
  });
  server = createSourceServer(sitePromise);
  local = (await server.listen(0, '127.0.0.1')).url;
  site = await openDirectorySource({
    dir: join(root, 'col'),
    baseUrl: PUBLIC,
    watch: false,
    stateDir: join(root, 'state'),
  });
  resolveSite(site);
  explorer = mountExplorer(server.handler, { baseUrl: PUBLIC, listenUrl: local });
});

after(async () => {
  await explorer.close();
  await server.close();
  await site.close();
  await rm(root, { recursive: true, force: true });
});

async function api(name: string, params: Record<string, string> = {}): Promise<{ status: number; body: Json }> {
  const res = await fetch(`${local}explorer/api/${name}?${new URLSearchParams(params)}`);
  return { status: res.status, body: await res.json() };
}

describe('explorer mounted in the Source server', () => {
  it('is served at /explorer/ and named under the public base URL', async () => {
    assert.equal(explorer.url, `${PUBLIC}explorer/`);
    const res = await fetch(`${local}explorer/`);
    assert.equal(res.status, 200);
    assert.match(await res.text(), /ResourceSync explorer/);
  });

  it('explores its own Source through the listening address, showing the public URLs', async () => {
    const { status, body } = await api('discover');
    assert.equal(status, 200, JSON.stringify(body));
    assert.equal(body.set.url, `${PUBLIC}resourcesync/default/capabilitylist.xml`);
    const list = body.set.capabilities.resourcelist[0] as string;
    const page = await api('document', { url: list });
    assert.deepEqual(
      page.body.entries.map((e: { loc: string }) => e.loc),
      [`${PUBLIC}a.txt`],
    );
  });

  it('fetches nothing outside its own origin', async () => {
    const { status, body } = await api('fixity', { url: 'http://127.0.0.2:1/x' });
    assert.equal(status, 400);
    assert.match(body.error.message, /does not fetch/);
    const channel = await fetch(`${local}explorer/api/notifications?url=${encodeURIComponent('ws://other.invalid/c')}`);
    assert.equal(channel.status, 400);
    await channel.arrayBuffer();
  });
});
