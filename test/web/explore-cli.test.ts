// `resourcesync explore` as a real child process: it serves the page for a Source and answers the API through
// its own client (with --token sent to the Source only); bad arguments exit 2.
import assert from 'node:assert/strict';
import { get as httpGet } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { killChildren, runCli, waitForEvent } from '../cli/cli-child.js';
import { type StaticSite, startStatic, urlset } from './helpers.js';

let site: StaticSite;

before(async () => {
  site = await startStatic({});
  site.files.set('/cap.xml', {
    body: urlset('capability="capabilitylist"', '', [
      `<url><loc>${site.url}rl.xml</loc><rs:md capability="resourcelist"/></url>`,
    ]),
  });
  site.files.set('/rl.xml', {
    body: urlset('capability="resourcelist" at="2024-01-01T00:00:00Z"', `<rs:ln rel="up" href="${site.url}cap.xml"/>`, [
      `<url><loc>${site.url}a</loc></url>`,
    ]),
  });
});

after(async () => {
  killChildren();
  await site.close();
});

describe('resourcesync explore', () => {
  it('serves the explorer for a Source on a local port', async () => {
    const run = runCli(['explore', `${site.url}cap.xml`, '--port', '0', '--json', '--token', 't0k']);
    const listening = await waitForEvent(run, 'listening');
    const page = String(listening.url);
    assert.match(page, /^http:\/\/127\.0\.0\.1:\d+\/explorer\/$/);
    const html = await fetch(page);
    assert.equal(html.status, 200);
    await html.arrayBuffer();
    const res = await fetch(`${page}api/discover`);
    const body = (await res.json()) as { set: { url: string; capabilities: Record<string, string[]> } };
    assert.equal(body.set.url, `${site.url}cap.xml`);
    assert.deepEqual(body.set.capabilities.resourcelist, [`${site.url}rl.xml`]);
    assert.ok(site.requests.every((r) => r.headers.authorization === 'Bearer t0k'));
    // DNS rebinding: a request naming another host is refused.
    const port = new URL(page).port;
    const rebound = await new Promise<number>((resolve, reject) => {
      const req = httpGet(`${page}api/discover`, { headers: { host: `evil.example:${port}` } }, (r) => {
        r.resume();
        resolve(r.statusCode ?? 0);
      });
      req.on('error', reject);
    });
    assert.equal(rebound, 403);
    run.child.kill('SIGTERM');
    assert.equal(await run.exit, 0);
  });

  it('sends --token to the hosts --token-host names, and to no other', async () => {
    const named = await startStatic({});
    const unnamed = await startStatic({});
    named.files.set('/x.txt', { body: 'x' });
    unnamed.files.set('/y.txt', { body: 'y' });
    try {
      const host = new URL(named.url).host;
      const run = runCli([
        'explore',
        `${site.url}cap.xml`,
        '--port',
        '0',
        '--json',
        '--token',
        't0k',
        '--token-host',
        host,
      ]);
      const page = String((await waitForEvent(run, 'listening')).url);
      for (const url of [`${named.url}x.txt`, `${unnamed.url}y.txt`]) {
        const res = await fetch(`${page}api/fixity?${new URLSearchParams({ url })}`);
        assert.equal(res.status, 200, url);
        await res.arrayBuffer();
      }
      assert.equal(named.requests.length, 1);
      assert.equal(named.requests[0]?.headers.authorization, 'Bearer t0k');
      assert.equal(unnamed.requests.length, 1);
      assert.equal(unnamed.requests[0]?.headers.authorization, undefined);
      run.child.kill('SIGTERM');
      assert.equal(await run.exit, 0);
    } finally {
      await named.close();
      await unnamed.close();
    }
  });

  it('exits 2 on bad arguments', async () => {
    const badPort = runCli(['explore', site.url, '--port', 'x']);
    assert.equal(await badPort.exit, 2);
    assert.match(badPort.stderr(), /port/);
    const badUrl = runCli(['explore', 'ftp://example.org/', '--port', '0']);
    assert.equal(await badUrl.exit, 2);
    assert.match(badUrl.stderr(), /http/);
  });
});
