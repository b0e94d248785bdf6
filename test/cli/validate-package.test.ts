import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { after, before, describe, it } from 'node:test';
import yazl from 'yazl';
import { runInspect } from '../../src/cli/inspect.js';
import { type CommandOutput, runValidate, validateInput } from '../../src/cli/validate.js';

const NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/"';
const md5 = (s: string) => createHash('md5').update(s).digest('hex');

function manifest(entries: string, capability = 'resourcedump-manifest" at="2013-01-03T09:00:00Z'): string {
  return `<?xml version="1.0" encoding="UTF-8"?>
<urlset ${NS}>
  <rs:ln rel="up" href="http://example.com/capabilitylist.xml"/>
  <rs:md capability="${capability}"/>
${entries}
</urlset>
`;
}
function entry(res: string, path: string, content: string, extra = ''): string {
  return `  <url><loc>http://example.com/${res}</loc><rs:md path="${path}" type="text/plain" length="${content.length}" hash="md5:${md5(content)}"${extra}/></url>`;
}

async function zip(file: string, files: Record<string, string>): Promise<string> {
  const z = new yazl.ZipFile();
  for (const [name, content] of Object.entries(files)) z.addBuffer(Buffer.from(content), name);
  z.end();
  await pipeline(z.outputStream, createWriteStream(file));
  return file;
}

function capture(): CommandOutput & { out: () => string } {
  let out = '';
  return { stdout: (t) => void (out += t), stderr: (t) => void (out += t), out: () => out };
}

async function codesOf(file: string, verify = true): Promise<string[]> {
  const o = await validateInput(file, { verify });
  assert.ok('result' in o, JSON.stringify(o));
  return o.result.issues.map((i) => i.code);
}

describe('validate: dump packages (ZIP with manifest.xml)', () => {
  let dir: string;
  let good: string;
  let server: Server;
  let base: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rs-pkg-'));
    good = await zip(join(dir, 'good.zip'), {
      'manifest.xml': manifest(`${entry('a', '/resources/a', 'hello')}\n${entry('b', '/resources/b', 'world!')}`),
      'resources/a': 'hello',
      'resources/b': 'world!',
    });
    server = createServer((req, res) => {
      void readFile(good).then((b) => res.end(req.url === '/good.zip' ? b : ''));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await rm(dir, { recursive: true, force: true });
  });

  it('a good package: manifest valid, every bitstream present and matching', async () => {
    assert.deepEqual(await codesOf(good), []);
    const io = capture();
    assert.equal(await runValidate([good, `${base}/good.zip`], {}, io), 0, io.out());
    assert.match(io.out(), /good\.zip: resource-dump-manifest, 2 entries: 0 errors, 0 warnings/);
  });

  it('missing bitstream, wrong length, wrong hash, unlisted file', async () => {
    const bad = await zip(join(dir, 'bad.zip'), {
      'manifest.xml': manifest(
        [
          entry('a', '/resources/a', 'hello'),
          entry('b', '/resources/b', 'world!'),
          entry('c', '/resources/c', 'same size'),
          entry('d', '/resources/missing', 'x'),
        ].join('\n'),
      ),
      'resources/a': 'hello',
      'resources/b': 'world',
      'resources/c': 'SAME SIZE',
      'extra.txt': 'not in the manifest',
    });
    const codes = await codesOf(bad);
    assert.deepEqual(codes.sort(), [
      'package-file-unlisted',
      'package-hash-mismatch',
      'package-hash-mismatch',
      'package-length-mismatch',
      'package-path-missing',
    ]);
    assert.deepEqual((await codesOf(bad, false)).sort(), ['package-file-unlisted', 'package-path-missing']);
    const io = capture();
    assert.equal(await runValidate([bad], {}, io), 1);
    assert.match(
      io.out(),
      /bad\.zip:\d+: error package-length-mismatch "\/resources\/b" has 5 bytes, the manifest says 6/,
    );
  });

  it('inspect summarises the manifest of a package, from a file or a URL', async () => {
    for (const input of [good, `${base}/good.zip`]) {
      const io = capture();
      assert.equal(await runInspect(input, { json: true }, io), 0, io.out());
      const s = JSON.parse(io.out()) as Record<string, unknown>;
      assert.equal(s['kind'], 'resource-dump-manifest');
      assert.equal(s['entries'], 2);
      assert.equal(s['errors'], 0);
    }
    const notZip = join(dir, 'not.zip');
    await pipeline([Buffer.from('PK\u0003\u0004 garbage')], createWriteStream(notZip));
    assert.equal(await runInspect(notZip, {}, capture()), 1);
  });

  it('no manifest.xml, a manifest of another kind, a damaged ZIP', async () => {
    const none = await zip(join(dir, 'none.zip'), { 'resources/a': 'hello' });
    assert.deepEqual(await codesOf(none), ['RS_ZIP']);
    const list = await zip(join(dir, 'list.zip'), {
      'manifest.xml': manifest('', 'resourcelist" at="2013-01-03T09:00:00Z'),
    });
    assert.deepEqual(await codesOf(list), ['package-manifest-kind']);
    const bytes = await readFile(good);
    const truncated = join(dir, 'truncated.zip');
    await pipeline([bytes.subarray(0, bytes.length - 30)], createWriteStream(truncated));
    assert.deepEqual(await codesOf(truncated), ['RS_ZIP']);
  });
});
