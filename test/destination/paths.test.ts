import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, sep } from 'node:path';
import { after, describe, it } from 'node:test';
import fc from 'fast-check';
import { isResourceSyncError } from '../../src/core/errors.js';
import { encodePathSegment } from '../../src/core/uri-path.js';
import {
  createPathMapper,
  decodeSegment,
  encodeSegment,
  ensureParentDirectory,
  forgetVerifiedDirectories,
} from '../../src/destination/paths.js';

const ROOT = '/data/mirror';
const SOURCE = 'http://example.org/.well-known/resourcesync';

/**
 * `text` with the characters RFC 3986 allows nowhere in a path or query written as escapes (a `%` that starts no
 * escape included): what the mapping reads them as.
 */
function withoutInvalidCharacters(text: string): string {
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i] as string;
    const startsEscape = c === '%' && /^[0-9A-Fa-f]{2}$/.test(text.slice(i + 1, i + 3));
    out +=
      startsEscape || /[A-Za-z0-9\-._~!$&'()*+,;=:@/?#]/.test(c)
        ? c
        : `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

function throwsCode(fn: () => unknown, code: string): void {
  assert.throws(fn, (e: unknown) => isResourceSyncError(e) && e.code === code);
}

describe('createPathMapper (host-path layout)', () => {
  const m = createPathMapper({ root: ROOT, sourceUrl: SOURCE });
  const table: [string, string, string?][] = [
    ['http://example.org/a/b.html', 'example.org/a/b.html'],
    ['http://example.org/', 'example.org/%%index'],
    ['http://example.org/dir/', 'example.org/dir/%%index'],
    ['http://example.org/index', 'example.org/index'],
    ['http://example.org/a//b', 'example.org/a/%%index/b'],
    // A file name is the decoded segment when the URI writes it canonically (RFC 3986 pchar as is).
    ['http://example.org/C++', 'example.org/C++'],
    ['http://example.org/%23x', 'example.org/#x'],
    ['http://example.org/a+b', 'example.org/a+b'],
    ['http://example.org/50%25%20off', 'example.org/50% off'],
    ['http://example.org/a%20b', 'example.org/a b'],
    ['http://example.org/%C3%BC', 'example.org/ü'],
    ['http://example.org/%3Fq', 'example.org/?q'],
    ['http://example.org/%2541', 'example.org/%41'],
    ['http://example.org/%25%2541', 'example.org/%%25%41'],
    ["http://example.org/a:b*c;d=e,f&g$h@i!j'k(l)m~n", "example.org/a:b*c;d=e,f&g$h@i!j'k(l)m~n"],
    ['http://example.org/%5Ba%5D%7Cb%5E%22%3C%3E%5C', 'example.org/[a]|b^"<>\\'],
    ['http://example.org/caf%C3%A9/na%C3%AFve%20file.txt', 'example.org/café/naïve file.txt'],
    ['http://example.org/don%E2%80%99t', 'example.org/don’t'],
    // Non-canonical escapes and literal characters the canonical form escapes get other names.
    ['http://example.org/C%2B%2B', 'example.org/C%%2B%%2B'],
    ['http://example.org/%41', 'example.org/%%41'],
    ['http://example.org/caf%c3%a9', 'example.org/caf%%c3%%a9'],
    ['http://example.org/%7Euser/100%25', 'example.org/%%7Euser/100%'],
    ['http://example.org/a%2Fb', 'example.org/a%%2Fb'],
    ['http://example.org/a%00b%0A', 'example.org/a%%00b%%0A'],
    ['http://example.org/%FF%C3', 'example.org/%%FF%%C3'],
    // Characters no URI may hold as themselves are read as their only valid spelling, the escape.
    ['http://example.org/a[b]|c^', 'example.org/a[b]|c^', 'http://example.org/a%5Bb%5D%7Cc%5E'],
    ['http://example.org/50%%20off', 'example.org/50% off', 'http://example.org/50%25%20off'],
    ['http://example.org/x?a[]=1&b={c}', 'example.org/x%%-3Fa[]=1&b={c}', 'http://example.org/x?a%5B%5D=1&b=%7Bc%7D'],
    // Queries and fragments: distinct from the files whose names hold the same characters.
    ['http://example.org/item?id=1', 'example.org/item%%-3Fid=1'],
    ['http://example.org/search?q=a&b=c', 'example.org/search%%-3Fq=a&b=c'],
    ['http://example.org/search?q=1&r=a/b', 'example.org/search%%-3Fq=1&r=a%%-2Fb'],
    ['http://example.org/dir/?q', 'example.org/dir/%%-3Fq'],
    ['http://example.org/p#frag', 'example.org/p%%-23frag'],
    ['http://example.org/#x', 'example.org/%%-23x'],
    // Reserved and special names.
    ['http://example.org/.resourcesync/state.db', 'example.org/%%-2Eresourcesync/state.db'],
    ['http://example.org/.x.0123456789ab.tmp', 'example.org/%%-2Ex.0123456789ab.tmp'],
    ['http://example.org/%25%25self', 'example.org/%%25%self'],
    ['http://example.org/con.txt', 'example.org/con.txt'],
    ['http://example.org/trail.', 'example.org/trail.'],
    ['http://EXAMPLE.org:80/x', 'example.org/x'],
  ];
  for (const [uri, rel, back] of table) {
    it(`maps ${uri}`, () => {
      const local = m.toLocalPath(uri);
      assert.equal(local, join(ROOT, ...rel.split('/')));
      assert.equal(m.toUri(local), back ?? new URL(uri).href);
    });
  }

  it('puts a non-default port and another scheme in the host directory, when allowed', () => {
    const m2 = createPathMapper({ root: ROOT, sourceUrl: SOURCE, allowHosts: ['example.org:8080', 'cdn.example.org'] });
    const a = m2.toLocalPath('http://example.org:8080/x');
    assert.equal(a, join(ROOT, 'example.org_8080', 'x'));
    assert.equal(m2.toUri(a), 'http://example.org:8080/x');
    const b = m2.toLocalPath('https://cdn.example.org/y');
    assert.equal(b, join(ROOT, 'https+cdn.example.org', 'y'));
    assert.equal(m2.toUri(b), 'https://cdn.example.org/y');
  });

  it('checks the authority: same host and port, unless allowed or disabled', () => {
    assert.ok(m.isAllowed('http://example.org/x'));
    assert.ok(!m.isAllowed('http://example.org:8080/x'));
    assert.ok(!m.isAllowed('https://example.org/x'));
    assert.ok(!m.isAllowed('http://evil.example/x'));
    assert.ok(!m.isAllowed('file:///etc/passwd'));
    throwsCode(() => m.toLocalPath('http://evil.example/x'), 'RS_AUTHORITY');
    const open = createPathMapper({ root: ROOT, sourceUrl: SOURCE, authorityCheck: false });
    assert.ok(open.isAllowed('http://evil.example/x'));
    assert.equal(open.toLocalPath('http://evil.example/x'), join(ROOT, 'evil.example', 'x'));
  });

  it('refuses unsafe URIs', () => {
    throwsCode(() => m.toLocalPath('file:///etc/passwd'), 'RS_UNSAFE_PATH');
    throwsCode(() => m.toLocalPath('http://user:pw@example.org/x'), 'RS_UNSAFE_PATH');
    throwsCode(() => m.toLocalPath('not a uri'), 'RS_UNSAFE_PATH');
    // Dot segments are resolved by URL parsing and can never climb above the host directory.
    assert.equal(m.toLocalPath('http://example.org/a/../../../etc/passwd'), join(ROOT, 'example.org', 'etc', 'passwd'));
    assert.equal(m.toLocalPath('http://example.org/%2e%2e/%2E%2E/x'), join(ROOT, 'example.org', 'x'));
  });

  it('returns undefined for paths it does not produce', () => {
    assert.equal(m.toUri('/elsewhere/x'), undefined);
    assert.equal(m.toUri(ROOT), undefined);
    assert.equal(m.toUri(join(ROOT, '.resourcesync', 'state.db')), undefined);
    assert.equal(m.toUri(join(ROOT, 'example.org', 'bad%%zz')), undefined);
    assert.equal(m.toUri(join(ROOT, 'example.org', 'x%%25y')), undefined, 'not the canonical name of x%25y');
    assert.equal(m.toUri(join(ROOT, 'example.org', 'a%%-3Fb', 'c')), undefined, 'a query inside a directory name');
    assert.equal(m.toUri(join(ROOT, 'example.org', '%%self')), undefined);
    assert.equal(m.toUri(join(ROOT, 'example.org', '%%moving-0123')), undefined);
    assert.equal(m.toUri(join(ROOT, 'example.org', 'a', '%%self')), 'http://example.org/a');
    assert.equal(m.toUri(join(ROOT, 'example.org', '#x', '%%self')), 'http://example.org/%23x');
  });

  it('cuts names over 255 bytes with a hash suffix (not reversible)', () => {
    const long = 'é'.repeat(200);
    const a = m.toLocalPath(`http://example.org/${long}`);
    const b = m.toLocalPath(`http://example.org/${long}x`);
    const name = a.split(sep).pop() as string;
    assert.ok(Buffer.byteLength(name) <= 255);
    assert.notEqual(a, b);
    assert.equal(m.toUri(a), undefined);
  });

  it('escapes upper case with foldCase', () => {
    const f = createPathMapper({ root: ROOT, sourceUrl: SOURCE, foldCase: true });
    const a = f.toLocalPath('http://example.org/README.md');
    const b = f.toLocalPath('http://example.org/readme.md');
    assert.notEqual(a.toLowerCase(), b.toLowerCase());
    assert.equal(f.toUri(a), 'http://example.org/README.md');
  });
});

describe('createPathMapper (path layout)', () => {
  const m = createPathMapper({ root: ROOT, sourceUrl: 'http://example.org:8080/rs/', layout: 'path' });
  it('maps the one origin without a host directory', () => {
    const p = m.toLocalPath('http://example.org:8080/a/b?x');
    assert.equal(p, join(ROOT, 'a', 'b%%-3Fx'));
    assert.equal(m.toUri(p), 'http://example.org:8080/a/b?x');
  });
  it('never targets the state directory', () => {
    assert.equal(m.toLocalPath('http://example.org:8080/.resourcesync'), join(ROOT, '%%-2Eresourcesync'));
    assert.equal(m.toLocalPath('http://example.org:8080/.ReSourceSync/x'), join(ROOT, '%%-2EReSourceSync', 'x'));
  });
  it('refuses another origin even when the authority check is off', () => {
    const open = createPathMapper({
      root: ROOT,
      sourceUrl: 'http://example.org/',
      layout: 'path',
      authorityCheck: false,
    });
    throwsCode(() => open.toLocalPath('http://other.org/x'), 'RS_AUTHORITY');
  });
});

describe('segment encoding properties', () => {
  const segmentChars = fc.constantFrom(
    ...'abcXYZ019-._~!$&\'()*+,;=:@/?#[] %"<>\\^`{|}'.split(''),
    'é',
    'ß',
    '日本',
    '😀',
    '\u2028',
    '\u0085',
    '%41',
    '%7e',
    '%C3%A9',
    '%2F',
    '%2B',
    '%2b',
    '%25',
    '%00',
    '%FF',
    '%E2%80%99',
    '%%',
    '%',
    'index',
    '.resourcesync',
    '..',
    '.',
    'con',
    '.tmp',
  );
  const pathArb = fc.array(
    fc.array(segmentChars, { maxLength: 8 }).map((a) => a.join('')),
    { minLength: 1, maxLength: 5 },
  );
  const queryArb = fc.option(
    fc.array(segmentChars, { maxLength: 6 }).map((a) => a.join('')),
    { nil: undefined },
  );

  it('toUri(toLocalPath(u)) === u and the path stays inside the root', () => {
    const mappers = [
      { foldCase: false, windowsNames: false },
      { foldCase: true, windowsNames: false },
      { foldCase: true, windowsNames: true },
    ].map((names) =>
      createPathMapper({ root: ROOT, sourceUrl: 'http://example.org/', allowHosts: ['other.example:8081'], ...names }),
    );
    const hostArb = fc.constantFrom('http://example.org', 'http://other.example:8081');
    fc.assert(
      fc.property(fc.constantFrom(...mappers), hostArb, pathArb, queryArb, (m, host, segs, query) => {
        let u: URL;
        try {
          u = new URL(`${host}/${segs.join('/')}${query === undefined ? '' : `?${query}`}`);
        } catch {
          return; // not a URL at all
        }
        const href = u.href;
        if (!m.isAllowed(href)) return;
        const local = m.toLocalPath(href);
        assert.ok(local.startsWith(ROOT + sep), local);
        for (const part of local.slice(ROOT.length + 1).split(sep)) {
          assert.ok(part !== '' && part !== '.' && part !== '..', local);
          assert.notEqual(part.toLowerCase(), '.resourcesync');
        }
        // A valid URI (RFC 3986) comes back as it is; characters no URI may hold as themselves come back escaped.
        assert.equal(m.toUri(local), withoutInvalidCharacters(href));
      }),
      { numRuns: 2000 },
    );
  });

  it('decodeSegment inverts encodeSegment on any ASCII URI text, with every name option', () => {
    const options = fc.record({ foldCase: fc.boolean(), windowsNames: fc.boolean() });
    fc.assert(
      fc.property(fc.string({ unit: 'binary-ascii', maxLength: 40 }), options, (text, o) => {
        const name = encodeSegment(text, o);
        if (name.includes('%%~')) return;
        assert.ok(!name.includes('/') && !name.includes('\0'), name);
        assert.equal(decodeSegment(name, o), withoutInvalidCharacters(text));
      }),
      { numRuns: 3000 },
    );
  });

  it('names the canonical URI of any file name after the name itself', () => {
    // What a Source of ours publishes for a file is the canonical encoding: the copy gets the same name.
    const name = fc
      .string({ unit: 'grapheme', minLength: 1, maxLength: 12 })
      .filter((s) => !s.includes('/') && !/[\x00-\x1f\x7f-\x9f]/.test(s) && s !== '.' && s !== '..')
      .filter((s) => !(s.startsWith('.') && s.toLowerCase().endsWith('.tmp')) && s.toLowerCase() !== '.resourcesync')
      // `%%` starts the escapes: a name holding it is the one ordinary name written otherwise (`%%25`).
      .filter((s) => !s.includes('%%'));
    fc.assert(
      fc.property(name, (n) => {
        const canonical = encodePathSegment(n.normalize('NFC'));
        assert.equal(encodeSegment(canonical), n.normalize('NFC'));
      }),
      { numRuns: 3000 },
    );
  });
});

describe('ensureParentDirectory', () => {
  const dirs: string[] = [];
  after(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  it('creates parents one by one and refuses a symlink escaping the root', async () => {
    const base = await mkdtemp(join(tmpdir(), 'rs-paths-'));
    dirs.push(base);
    const root = join(base, 'root');
    const outside = join(base, 'outside');
    await mkdir(root);
    await mkdir(outside);
    await ensureParentDirectory(root, join(root, 'h', 'a', 'b', 'file'));
    await writeFile(join(root, 'h', 'a', 'b', 'file'), 'x');
    await symlink(outside, join(root, 'h', 'link'));
    await assert.rejects(ensureParentDirectory(root, join(root, 'h', 'link', 'file')), (e: unknown) =>
      isResourceSyncError(e, 'RS_UNSAFE_PATH'),
    );
    await assert.rejects(ensureParentDirectory(root, join(root, 'h', 'link', 'deeper', 'file')), (e: unknown) =>
      isResourceSyncError(e, 'RS_UNSAFE_PATH'),
    );
    await assert.rejects(ensureParentDirectory(root, join(base, 'outside', 'x')), (e: unknown) =>
      isResourceSyncError(e, 'RS_UNSAFE_PATH'),
    );
    // A file where a directory is needed: the file of a resource below which others arrive, moved to %%self.
    await ensureParentDirectory(root, join(root, 'h', 'a', 'b', 'file', 'child'));
    assert.equal(await readFile(join(root, 'h', 'a', 'b', 'file', '%%self'), 'utf8'), 'x');
    forgetVerifiedDirectories(root);
  });

  it('accepts a root that is itself a symlink (the user chose it)', async () => {
    const base = await mkdtemp(join(tmpdir(), 'rs-paths-'));
    dirs.push(base);
    await mkdir(join(base, 'real'));
    await symlink(join(base, 'real'), join(base, 'root'));
    await ensureParentDirectory(join(base, 'root'), join(base, 'root', 'x', 'y'));
    await writeFile(join(base, 'real', 'x', 'y'), 'ok');
    forgetVerifiedDirectories();
  });
});
