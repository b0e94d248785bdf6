import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import fc from 'fast-check';
import type { Entry } from '../../src/core/model.js';
import { readDocument } from '../../src/xml/index.js';
import { forEachConcurrent } from '../../src/destination/concurrent.js';
import {
  type PlannedChange,
  agreesWithList,
  candidateUrls,
  coalesceChanges,
  findGap,
  isChangeApplied,
  isUpToDate,
  selectIntervals,
} from '../../src/destination/plan.js';
import { repoRoot } from './static-source.js';

const entry = (loc: string, change: string, datetime: string, extra: Partial<Entry['md']> = {}): Entry => ({
  element: 'url',
  loc,
  links: [],
  md: { change, datetime, ...extra },
});

/** A change without `datetime`, as the reference implementation's resync-build writes them. */
const undated = (loc: string, change: string, lastmod?: string, extra: Partial<Entry['md']> = {}): Entry => ({
  element: 'url',
  loc,
  links: [],
  ...(lastmod === undefined ? {} : { lastmod }),
  md: { change, ...extra },
});

describe('plan: coalescing changes', () => {
  it('keeps the last change per resource, in datetime order', () => {
    const p = coalesceChanges([
      entry('a', 'created', '2024-01-01T01:00:00Z'),
      entry('b', 'created', '2024-01-01T02:00:00Z'),
      entry('a', 'updated', '2024-01-01T03:00:00Z'),
      entry('b', 'deleted', '2024-01-01T04:00:00Z'),
    ]);
    assert.deepEqual(
      p.changes.map((c) => [c.uri, c.change]),
      [
        ['a', 'updated'],
        ['b', 'deleted'],
      ],
    );
    assert.equal(p.coalesced, 2);
    assert.equal(p.outOfOrder, 0);
    assert.equal(p.latest, '2024-01-01T04:00:00Z');
  });

  it('detects out-of-order entries and keeps the latest datetime, not the last position', () => {
    const p = coalesceChanges([
      entry('a', 'updated', '2024-01-01T05:00:00Z'),
      entry('a', 'deleted', '2024-01-01T04:00:00Z'),
      entry('b', 'created', '2024-01-01T03:00:00Z'),
    ]);
    assert.equal(p.outOfOrder, 2);
    assert.deepEqual(p.outOfOrderAt, [2, 3]);
    assert.deepEqual(
      p.changes.map((c) => [c.uri, c.change]),
      [
        ['b', 'created'],
        ['a', 'updated'],
      ],
    );
  });

  it('boundary: drops changes before the watermark, keeps those at it and after', () => {
    const p = coalesceChanges(
      [
        entry('before', 'updated', '2024-01-01T00:59:59Z'),
        entry('at', 'updated', '2024-01-01T01:00:00Z'),
        entry('at-offset', 'updated', '2024-01-01T02:00:00+01:00'),
        entry('after', 'updated', '2024-01-01T01:00:01Z'),
      ],
      '2024-01-01T01:00:00Z',
    );
    assert.deepEqual(
      p.changes.map((c) => c.uri),
      ['at', 'at-offset', 'after'],
    );
    assert.equal(p.before, 1);
  });

  it('rejects entries without change type or datetime, with reasons', () => {
    const p = coalesceChanges([
      entry('a', 'moved', '2024-01-01T00:00:00Z'),
      entry('b', 'updated', 'yesterday'),
      { element: 'url', loc: 'c', links: [] },
    ]);
    assert.equal(p.changes.length, 0);
    assert.equal(p.rejected.length, 3);
  });

  it('property: the plan has one change per resource, each the latest of its resource', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            uri: fc.constantFrom('a', 'b', 'c', 'd'),
            change: fc.constantFrom('created', 'updated', 'deleted'),
            t: fc.integer({ min: 0, max: 50 }),
          }),
          { maxLength: 40 },
        ),
        (items) => {
          const entries = items.map((i) =>
            entry(i.uri, i.change, new Date(Date.UTC(2024, 0, 1, 0, i.t)).toISOString()),
          );
          const p = coalesceChanges(entries);
          const uris = new Set(items.map((i) => i.uri));
          assert.equal(p.changes.length, uris.size);
          for (const c of p.changes) {
            const max = Math.max(...items.filter((i) => i.uri === c.uri).map((i) => i.t));
            assert.equal(c.datetimeMs, Date.UTC(2024, 0, 1, 0, max));
          }
          for (let i = 1; i < p.changes.length; i++)
            assert.ok((p.changes[i - 1] as PlannedChange).datetimeMs <= (p.changes[i] as PlannedChange).datetimeMs);
        },
      ),
    );
  });
});

describe('plan: changes without a datetime', () => {
  const WM = '2024-05-01T10:00:00Z';

  it('keeps undated changes whose lastmod is before the watermark (a deletion carries the old lastmod)', () => {
    // resync-build: no datetime, no from; a deleted entry carries the removed file's lastmod.
    const p = coalesceChanges(
      [
        undated('u', 'updated', '2024-05-01T10:05:00Z', { length: 15 }),
        undated('d1', 'deleted', '2024-05-01T09:00:00Z', { length: 7 }),
        undated('d2', 'deleted', '2024-04-01T00:00:00Z', { length: 7 }),
        undated('c', 'created', '2024-05-01T10:05:00Z', { length: 4 }),
      ],
      WM,
    );
    assert.deepEqual(
      p.changes.map((c) => [c.uri, c.change, c.dated, c.datetime]),
      [
        ['u', 'updated', false, WM],
        ['d1', 'deleted', false, WM],
        ['d2', 'deleted', false, WM],
        ['c', 'created', false, WM],
      ],
    );
    assert.equal(p.before, 0);
    assert.equal(p.undated, 4);
    assert.equal(p.outOfOrder, 0, 'lastmod is not a change time: no order to break');
    assert.equal(p.latest, undefined, 'undated changes do not move the watermark');
  });

  it('the later entry wins when either change is undated', () => {
    const p = coalesceChanges(
      [
        entry('a', 'created', '2024-05-01T11:00:00Z'),
        undated('a', 'deleted', '2024-01-01T00:00:00Z'),
        undated('b', 'deleted'),
        entry('b', 'created', '2024-05-01T12:00:00Z'),
      ],
      WM,
    );
    assert.deepEqual(
      p.changes.map((c) => [c.uri, c.change, c.datetime]),
      [
        ['a', 'deleted', '2024-05-01T11:00:00Z'],
        ['b', 'created', '2024-05-01T12:00:00Z'],
      ],
    );
    assert.equal(p.coalesced, 2);
    assert.equal(p.latest, '2024-05-01T12:00:00Z');
  });

  it('drops undated changes listed before a dated change that is before the watermark', () => {
    const p = coalesceChanges(
      [
        undated('x', 'updated'),
        entry('y', 'updated', '2024-05-01T09:00:00Z'),
        undated('z', 'updated'),
        entry('w', 'updated', '2024-05-01T10:30:00Z'),
        undated('v', 'updated'),
      ],
      WM,
    );
    assert.deepEqual(
      p.changes.map((c) => [c.uri, c.datetime]),
      [
        ['z', WM],
        ['w', '2024-05-01T10:30:00Z'],
        ['v', '2024-05-01T10:30:00Z'],
      ],
    );
    assert.equal(p.before, 2);
    // Out of order: positions say nothing reliable, so nothing undated is dropped.
    const q = coalesceChanges(
      [
        entry('y', 'updated', '2024-05-01T09:30:00Z'),
        entry('y2', 'updated', '2024-05-01T09:00:00Z'),
        undated('x', 'updated'),
        entry('w', 'updated', '2024-05-01T09:45:00Z'),
      ],
      WM,
    );
    assert.deepEqual(
      q.changes.map((c) => c.uri),
      ['x'],
    );
  });

  it('Example 19: the update with neither datetime nor lastmod is kept and wins over the dated one', async () => {
    const file = join(repoRoot(), 'test', 'fixtures', 'spec-examples', 'example-19.xml');
    const doc = await readDocument([await readFile(file)]);
    for (const wm of ['2013-01-03T00:00:00Z', '2013-01-04T00:00:00Z']) {
      const p = coalesceChanges(doc.entries, wm);
      const res2 = p.changes.find((c) => c.uri === 'http://example.com/res2.pdf');
      assert.equal(res2?.dated, false, wm);
      assert.equal(res2?.change, 'updated');
      assert.equal(p.rejected.length, 0);
    }
    assert.equal(coalesceChanges(doc.entries, '2013-01-04T00:00:00Z').changes.length, 1);
  });

  it('property: in a chronological list, each resource keeps its last change unless it is provably before the watermark', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            uri: fc.constantFrom('a', 'b', 'c'),
            change: fc.constantFrom('created', 'updated', 'deleted'),
            step: fc.integer({ min: 0, max: 3 }),
            dated: fc.boolean(),
          }),
          { maxLength: 30 },
        ),
        fc.integer({ min: 0, max: 60 }),
        (items, wmMinute) => {
          let t = 0;
          const listed = items.map((i) => ({ ...i, t: (t += i.step) }));
          const at = (m: number): string => new Date(Date.UTC(2024, 0, 1, 0, m)).toISOString();
          const entries = listed.map((i) => (i.dated ? entry(i.uri, i.change, at(i.t)) : undated(i.uri, i.change)));
          const p = coalesceChanges(entries, at(wmMinute));
          for (const uri of ['a', 'b', 'c']) {
            const lastPos = listed.map((i): string => i.uri).lastIndexOf(uri);
            const planned = p.changes.find((c) => c.uri === uri);
            if (lastPos < 0) {
              assert.equal(planned, undefined);
              continue;
            }
            const last = listed[lastPos] as (typeof listed)[number];
            // Provably before: dated before the watermark, or listed before a dated entry before it.
            const before =
              (last.dated && last.t < wmMinute) || listed.slice(lastPos + 1).some((i) => i.dated && i.t < wmMinute);
            if (before) assert.equal(planned, undefined, `${uri} is before the watermark`);
            else {
              assert.equal(planned?.change, last.change, `${uri}: its last change`);
              assert.equal(planned?.position, lastPos + 1);
            }
          }
        },
      ),
    );
  });

  it('isChangeApplied compares an undated change by content, never by datetime', () => {
    const [del, upd, bare] = coalesceChanges(
      [
        undated('d', 'deleted', '2024-01-01T00:00:00Z'),
        undated('u', 'updated', '2024-05-01T10:05:00Z', { length: 15 }),
        undated('b', 'updated'),
      ],
      WM,
    ).changes as [PlannedChange, PlannedChange, PlannedChange];
    // The record's datetime (a baseline's at) is after the lastmod: a dated rule would call it applied.
    const baseline = { sourceDatetime: WM, length: 7, lastmod: '2024-01-01T00:00:00Z' };
    assert.equal(isChangeApplied(baseline, del), false);
    assert.equal(isChangeApplied({ ...baseline, deleted: true }, del), true);
    assert.equal(isChangeApplied(baseline, upd), false);
    assert.equal(isChangeApplied({ ...baseline, length: 15, lastmod: '2024-05-01T10:05:00Z' }, upd), true);
    assert.equal(isChangeApplied({ ...baseline, sourceDatetime: '2030-01-01T00:00:00Z' }, bare), false);
  });
});

describe('plan: decisions', () => {
  it('isUpToDate: hash first, else length + lastmod', () => {
    const rec = { length: 3, md5: 'aa'.repeat(16), lastmod: '2024-01-01T00:00:00Z' };
    assert.equal(isUpToDate(rec, { hashes: { md5: 'aa'.repeat(16) } }, 3), true);
    assert.equal(isUpToDate(rec, { hashes: { md5: 'bb'.repeat(16) } }, 3), false);
    assert.equal(isUpToDate(rec, { hashes: { md5: 'aa'.repeat(16) } }, 4), false, 'file size changed on disk');
    assert.equal(isUpToDate(rec, { length: 3, lastmod: '2024-01-01T01:00:00+01:00' }, 3), true);
    assert.equal(isUpToDate(rec, { length: 3, lastmod: '2024-01-02T00:00:00Z' }, 3), false);
    assert.equal(isUpToDate(rec, { length: 3 }, 3), false, 'nothing to compare: fetch');
    assert.equal(isUpToDate(undefined, { length: 3 }, 3), false);
    assert.equal(isUpToDate({ ...rec, deleted: true }, { hashes: { md5: 'aa'.repeat(16) } }, 3), false);
  });

  it('agreesWithList: compares what the list gives, a length alone included', () => {
    const rec = { length: 7, md5: 'aa'.repeat(16), lastmod: '2024-01-01T00:00:00Z' };
    assert.equal(agreesWithList(rec, { length: 7 }, 7), true, 'a length-only list');
    assert.equal(agreesWithList(rec, { length: 8 }, 7), false);
    assert.equal(agreesWithList({ length: 7 }, { length: 7 }, 8), false, 'file edited behind the state');
    assert.equal(agreesWithList(rec, {}, 7), true, 'nothing given: presence');
    assert.equal(agreesWithList(rec, { length: 7, lastmod: '2024-01-01T01:00:00+01:00' }, 7), true);
    assert.equal(agreesWithList(rec, { length: 7, lastmod: '2024-02-01T00:00:00Z' }, 7), false);
    assert.equal(agreesWithList({ length: 7 }, { lastmod: '2024-01-01T00:00:00Z' }, 7), false);
    assert.equal(
      agreesWithList(rec, { hashes: { md5: 'aa'.repeat(16) }, lastmod: '2024-02-01T00:00:00Z' }, 7),
      true,
      'a common hash decides',
    );
    assert.equal(agreesWithList(rec, { hashes: { md5: 'bb'.repeat(16) } }, 7), false);
    assert.equal(agreesWithList(rec, { hashes: { 'sha-1': 'cc'.repeat(20) } }, 7), false, 'unverifiable hash alone');
    assert.equal(agreesWithList({ ...rec, deleted: true }, { length: 7 }, 7), false);
  });

  it('isChangeApplied: later record skips; equal datetime needs a matching hash', () => {
    const c = coalesceChanges([entry('a', 'updated', '2024-01-01T01:00:00Z', { hash: `md5:${'cc'.repeat(16)}` })])
      .changes[0] as PlannedChange;
    assert.equal(isChangeApplied({ sourceDatetime: '2024-01-01T02:00:00Z' }, c), true);
    assert.equal(isChangeApplied({ sourceDatetime: '2024-01-01T00:00:00Z' }, c), false);
    assert.equal(isChangeApplied({ sourceDatetime: '2024-01-01T01:00:00Z', md5: 'cc'.repeat(16) }, c), true);
    assert.equal(isChangeApplied({ sourceDatetime: '2024-01-01T01:00:00Z', md5: 'dd'.repeat(16) }, c), false);
    const noHash = coalesceChanges([entry('a', 'updated', '2024-01-01T01:00:00Z')]).changes[0] as PlannedChange;
    assert.equal(
      isChangeApplied({ sourceDatetime: '2024-01-01T01:00:00Z' }, noHash),
      false,
      're-applied at the boundary',
    );
    const del = coalesceChanges([entry('a', 'deleted', '2024-01-01T01:00:00Z')]).changes[0] as PlannedChange;
    assert.equal(isChangeApplied({ sourceDatetime: '2024-01-01T01:00:00Z', deleted: true }, del), true);
  });

  it('candidateUrls: http(s) mirrors by pri, then the loc', () => {
    const e: Entry = {
      element: 'url',
      loc: 'http://s/r',
      links: [
        { rel: 'duplicate', href: 'http://m3/r' },
        { rel: 'duplicate', href: 'http://m2/r', pri: 2 },
        { rel: 'duplicate', href: 'gsiftp://g/r', pri: 0 },
        { rel: 'alternate', href: 'http://alt/r' },
        { rel: 'duplicate', href: 'http://m1/r', pri: 1 },
      ],
    };
    assert.deepEqual(candidateUrls(e), ['http://m1/r', 'http://m2/r', 'http://m3/r', 'http://s/r']);
  });

  it('selectIntervals skips lists ending at or before the watermark; findGap', () => {
    const docs = [
      { url: 'open', from: '2024-01-03T00:00:00Z', position: 3 },
      { url: 'd1', from: '2024-01-01T00:00:00Z', until: '2024-01-02T00:00:00Z', position: 1 },
      { url: 'd2', from: '2024-01-02T00:00:00Z', until: '2024-01-03T00:00:00Z', position: 2 },
    ];
    assert.deepEqual(
      selectIntervals(docs, '2024-01-02T00:00:00Z').map((d) => d.url),
      ['d2', 'open'],
    );
    assert.deepEqual(
      selectIntervals(docs, '2023-01-01T00:00:00Z').map((d) => d.url),
      ['d1', 'd2', 'open'],
    );
    // <lastmod> precise to the second and ending before the watermark: nothing after it there.
    const withLastmod = docs.map((d) => (d.url === 'open' ? { ...d, lastmod: '2024-01-03T05:00:00Z' } : d));
    assert.deepEqual(
      selectIntervals(withLastmod, '2024-01-03T05:00:01Z').map((d) => d.url),
      [],
    );
    assert.deepEqual(
      selectIntervals(withLastmod, '2024-01-03T05:00:00.500Z').map((d) => d.url),
      ['open'],
    );
    assert.deepEqual(
      selectIntervals(
        docs.map((d) => (d.url === 'open' ? { ...d, lastmod: '2024-01-03' } : d)),
        '2024-01-05T00:00:00Z',
      ).map((d) => d.url),
      ['open'],
    );
    assert.equal(findGap(docs, undefined, '2024-01-01T00:00:00Z'), undefined);
    assert.equal(findGap(docs, undefined, '2023-12-31T23:59:59Z'), '2024-01-01T00:00:00Z');
    assert.equal(findGap([], '2024-02-01T00:00:00Z', '2024-01-01T00:00:00Z'), '2024-02-01T00:00:00Z');
  });
});

describe('forEachConcurrent', () => {
  it('never runs more than the limit and pulls lazily', async () => {
    let running = 0;
    let max = 0;
    let pulled = 0;
    async function* source(): AsyncGenerator<number> {
      for (let i = 0; i < 50; i++) {
        pulled++;
        yield i;
      }
    }
    const seen: number[] = [];
    await forEachConcurrent(source(), 4, async (i) => {
      running++;
      max = Math.max(max, running);
      assert.ok(pulled - seen.length <= 5, 'no read-ahead beyond the slots');
      await new Promise((r) => setTimeout(r, i % 3));
      seen.push(i);
      running--;
    });
    assert.equal(seen.length, 50);
    assert.ok(max <= 4);
  });

  it('stops pulling after a worker throws and rethrows', async () => {
    let pulled = 0;
    async function* source(): AsyncGenerator<number> {
      for (let i = 0; i < 1000; i++) {
        pulled++;
        yield i;
      }
    }
    await assert.rejects(
      forEachConcurrent(source(), 2, async (i) => {
        if (i === 5) throw new Error('boom');
      }),
      /boom/,
    );
    assert.ok(pulled < 20);
  });
});
