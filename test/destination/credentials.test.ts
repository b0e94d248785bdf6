// Credentials (--token, --header) go to the Source's origin only: a mirror (rel="duplicate") or a resource on
// another origin gets none, unless the caller names that host too (credentialHosts, --token-host).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import { Destination } from '../../src/destination/destination.js';
import { StaticSource, cliCommand, localPathOf, repoRoot } from './static-source.js';

const AT = '2024-06-01T00:00:00Z';

describe('credentials stay with the Source', () => {
  let src: StaticSource;
  let mirror: StaticSource;
  let dir: string;
  const dirs: string[] = [];
  before(async () => {
    src = await StaticSource.start();
    mirror = await StaticSource.start(); // another port: another origin
  });
  after(async () => {
    await src.close();
    await mirror.close();
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rs-cred-'));
    dirs.push(dir);
    src.requests.length = 0;
    mirror.requests.length = 0;
    const body = Buffer.from('from the mirror\n');
    mirror.set('/copies/a.txt', body);
    src.publishResourceList(
      [
        {
          path: '/res/a.txt',
          body,
          extra: `<rs:ln rel="duplicate" href="${mirror.url('/copies/a.txt')}" pri="1"/>`,
        },
        { path: '/res/b.txt', body: Buffer.from('b\n') },
      ],
      AT,
      1,
    );
    src.publishChangeLists([{ from: AT, changes: [] }]);
    src.publishCapabilities();
  });
  const http = { bearerToken: 'secret-token', headers: { 'X-Api-Key': 'secret-key' }, retries: 0 };
  const credentialed = (s: StaticSource): string[] =>
    s.requests
      .filter((r) => r.headers.authorization !== undefined || r.headers['x-api-key'] !== undefined)
      .map((r) => r.path);

  it('sends --token and --header to the Source, not to a mirror on another origin', async () => {
    const s = await new Destination({ url: src.url('/capabilitylist.xml'), dir, durability: 'none', http }).sync();
    assert.equal(s.counts.failed, 0, JSON.stringify(s.failures));
    assert.ok(
      mirror.requests.some((r) => r.path === '/copies/a.txt'),
      'the mirror was used',
    );
    assert.equal(await readFile(join(dir, localPathOf(src, '/res/a.txt')), 'utf8'), 'from the mirror\n');
    assert.deepEqual(credentialed(mirror), []);
    // The Source got them on every request.
    assert.ok(src.requests.length > 0);
    assert.deepEqual(
      src.requests.filter((r) => r.headers.authorization !== 'Bearer secret-token').map((r) => r.path),
      [],
    );
    assert.ok(src.requests.every((r) => r.headers['x-api-key'] === 'secret-key'));
  });

  it('sends them to a host named with --token-host', async () => {
    const { cmd, args } = cliCommand();
    const host = new URL(mirror.base).host;
    const child = spawn(
      cmd,
      [
        ...args,
        'sync',
        src.url('/capabilitylist.xml'),
        dir,
        '--token',
        'secret-token',
        '--header',
        'X-Api-Key: secret-key',
        '--token-host',
        host,
        '--durability',
        'none',
        '--json',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], cwd: repoRoot() },
    );
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.stdout.resume();
    const code = await new Promise<number>((r) => child.on('close', (c) => r(c ?? -1)));
    assert.ok(code === 0 || code === 3, `exit ${code}: ${stderr}`);
    assert.deepEqual(credentialed(mirror), ['/copies/a.txt']);
  });
});
