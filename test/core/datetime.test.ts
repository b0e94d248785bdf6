import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  compareDatetimes,
  datetimeMs,
  formatDatetime,
  normalizeDatetime,
  parseDatetime,
} from '../../src/core/datetime.js';
import { isResourceSyncError } from '../../src/core/errors.js';

describe('W3C Datetime', () => {
  it('parses every granularity to the earliest instant it denotes', () => {
    assert.equal(parseDatetime('2013')?.ms, Date.UTC(2013, 0, 1));
    assert.equal(parseDatetime('2013')?.precision, 'year');
    assert.equal(parseDatetime('2013-02')?.ms, Date.UTC(2013, 1, 1));
    assert.equal(parseDatetime('2013-02-03')?.ms, Date.UTC(2013, 1, 3));
    assert.equal(parseDatetime('2013-02-03T04:05Z')?.ms, Date.UTC(2013, 1, 3, 4, 5));
    assert.equal(parseDatetime('2013-02-03T04:05:06Z')?.precision, 'second');
    assert.equal(parseDatetime('2013-02-03T04:05:06.7Z')?.ms, Date.UTC(2013, 1, 3, 4, 5, 6, 700));
    assert.equal(parseDatetime('2013-02-03T04:05:06.123456Z')?.ms, Date.UTC(2013, 1, 3, 4, 5, 6, 123));
    assert.equal(parseDatetime('2013-02-03T04:05:06+01:00')?.ms, Date.UTC(2013, 1, 3, 3, 5, 6));
    assert.equal(parseDatetime('2013-02-03T04:05:06-05:30')?.ms, Date.UTC(2013, 1, 3, 9, 35, 6));
    assert.equal(parseDatetime('2013-01-03T09:00:00Z')?.utc, true);
    assert.equal(parseDatetime('2013-01-03T09:00:00+00:00')?.utc, false);
  });

  it('refuses what is not a W3C Datetime', () => {
    for (const bad of [
      '',
      '13',
      '2013-1',
      '2013-13',
      '2013-00-10',
      '2013-02-29',
      '2013-04-31',
      '2013-01-03T09:00:00',
      '2013-01-03T09Z',
      '2013-01-03T24:00:00Z',
      '2013-01-03T09:60:00Z',
      '2013-01-03T09:00:61Z',
      '2013-01-03 09:00:00Z',
      '2013-01-03T09:00:00.Z',
      '2013-01-03T09:00:00+0100',
      ' 2013',
      '2013-01-03T09:00:00ZZ',
      '2013-01-03T09:00:00+25:00',
      'abcd',
    ]) {
      assert.equal(parseDatetime(bad), undefined, bad);
    }
    assert.equal(parseDatetime('2012-02-29')?.precision, 'day'); // leap year
  });

  it('compares across offsets', () => {
    assert.equal(compareDatetimes('2013-01-03T10:00:00+01:00', '2013-01-03T09:00:00Z'), 0);
    assert.ok(compareDatetimes('2013-01-03T09:00:01Z', '2013-01-03T10:00:00+01:00') > 0);
    assert.ok(compareDatetimes('2013', '2013-01-01T00:00:01Z') < 0);
    assert.throws(
      () => datetimeMs('yesterday'),
      (e) => isResourceSyncError(e, 'RS_INVALID_VALUE'),
    );
  });

  it('writes UTC with fractions only when needed', () => {
    assert.equal(formatDatetime(Date.UTC(2013, 0, 3, 9)), '2013-01-03T09:00:00Z');
    assert.equal(formatDatetime(new Date(Date.UTC(2013, 0, 3, 9, 0, 0, 250))), '2013-01-03T09:00:00.250Z');
    assert.equal(normalizeDatetime('2013-01-03T10:00:00+01:00'), '2013-01-03T09:00:00Z');
    assert.equal(normalizeDatetime('2013-01'), '2013-01');
    assert.throws(
      () => formatDatetime(Number.NaN),
      (e) => isResourceSyncError(e, 'RS_INVALID_VALUE'),
    );
  });

  it('property: format then parse gives the same instant, and offsets do not change the instant', () => {
    const instant = fc.integer({ min: Date.UTC(1, 0, 1), max: Date.UTC(9999, 11, 31, 23, 59, 59, 999) });
    fc.assert(
      fc.property(instant, (ms) => {
        const text = formatDatetime(ms);
        const dt = parseDatetime(text);
        assert.ok(dt, text);
        assert.equal(dt.ms, ms);
        assert.equal(dt.utc, true);
      }),
    );
    fc.assert(
      fc.property(
        fc.integer({ min: Date.UTC(1000, 0, 2), max: Date.UTC(9998, 11, 30) }),
        fc.integer({ min: -23 * 60 - 59, max: 23 * 60 + 59 }),
        (ms, offset) => {
          const whole = Math.floor(ms / 1000) * 1000;
          const local = new Date(whole + offset * 60_000).toISOString().slice(0, 19);
          const sign = offset < 0 ? '-' : '+';
          const a = Math.abs(offset);
          const tzd = `${sign}${String(Math.floor(a / 60)).padStart(2, '0')}:${String(a % 60).padStart(2, '0')}`;
          assert.equal(parseDatetime(local + tzd)?.ms, whole);
          assert.equal(compareDatetimes(local + tzd, formatDatetime(whole)), 0);
        },
      ),
    );
  });

  it('property: parse never throws and agrees with Date.parse on full UTC datetimes', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 30 }), (s) => {
        const dt = parseDatetime(s);
        if (dt !== undefined) assert.ok(Number.isFinite(dt.ms));
      }),
    );
    fc.assert(
      fc.property(
        fc.date({ min: new Date('1970-01-01T00:00:00Z'), max: new Date('2999-12-31T00:00:00Z'), noInvalidDate: true }),
        (d) => {
          const iso = d.toISOString();
          assert.equal(parseDatetime(iso)?.ms, Date.parse(iso));
        },
      ),
    );
  });
  it('property: instants agree with Date for every year 0000-9999, all granularities', () => {
    // The reference: Date.UTC, with its mapping of years 0-99 to 1900-1999 undone by setUTCFullYear.
    const reference = (y: number, mo: number, d: number, h: number, mi: number, s: number): number => {
      const date = new Date(Date.UTC(2000, mo - 1, d, h, mi, s));
      date.setUTCFullYear(y, mo - 1, d);
      return date.getTime();
    };
    const pad = (v: number, w: number): string => String(v).padStart(w, '0');
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 9999 }),
        fc.integer({ min: 1, max: 12 }),
        fc.integer({ min: 1, max: 31 }),
        fc.integer({ min: 0, max: 23 }),
        fc.integer({ min: 0, max: 59 }),
        fc.integer({ min: 0, max: 59 }),
        (y, mo, d, h, mi, s) => {
          const days = new Date(Date.UTC(2000, mo, 0)).getUTCDate(); // days of month mo in a leap year
          const leap = y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0);
          const day = Math.min(d, mo === 2 && !leap ? 28 : days);
          const ymd = `${pad(y, 4)}-${pad(mo, 2)}-${pad(day, 2)}`;
          assert.equal(parseDatetime(pad(y, 4))?.ms, reference(y, 1, 1, 0, 0, 0));
          assert.equal(parseDatetime(ymd.slice(0, 7))?.ms, reference(y, mo, 1, 0, 0, 0));
          assert.equal(parseDatetime(ymd)?.ms, reference(y, mo, day, 0, 0, 0));
          const full = `${ymd}T${pad(h, 2)}:${pad(mi, 2)}:${pad(s, 2)}Z`;
          assert.equal(parseDatetime(full)?.ms, reference(y, mo, day, h, mi, s), full);
        },
      ),
      { numRuns: 2000 },
    );
    assert.equal(parseDatetime('0000-03-01T00:00:00Z')?.ms, Date.UTC(2000, 2, 1) - 730_485 * 86_400_000);
    assert.equal(parseDatetime('1600-02-29')?.ms, Date.UTC(1600, 1, 29));
  });
});
