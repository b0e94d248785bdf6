import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { loadAgents } from '../../src/http/undici.js';

describe('loadAgents', () => {
  it("gives undici's own dispatcher classes, with the request API", async () => {
    const undici = await import('undici');
    const agents = loadAgents();
    assert.equal(agents.Agent, undici.Agent);
    assert.equal(agents.ProxyAgent, undici.ProxyAgent);
    assert.equal(agents.EnvHttpProxyAgent, undici.EnvHttpProxyAgent);
    assert.equal(typeof new agents.Agent().request, 'function');
  });

  it("loads them without undici's index (the whole package) in a fresh process", () => {
    const module = fileURLToPath(new URL('../../src/http/undici.js', import.meta.url));
    const script = `
      import { createRequire } from 'node:module';
      const { loadAgents } = await import(${JSON.stringify(module)});
      const { Agent } = loadAgents();
      const agent = new Agent();
      await agent.close();
      const cache = Object.keys(createRequire(import.meta.url).cache);
      console.log(JSON.stringify({
        index: cache.some((f) => /node_modules\\/undici\\/index\\.js$/.test(f)),
        agent: cache.some((f) => /undici\\/lib\\/dispatcher\\/agent\\.js$/.test(f)),
      }));`;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
    assert.deepEqual(JSON.parse(out), { index: false, agent: true });
  });
});
