/**
 * W3C Datetime (https://www.w3.org/TR/NOTE-datetime), the profile of ISO 8601 the standard uses for `at`,
 * `completed`, `from`, `until`, `datetime`, `modified` and `<lastmod>` (§7, Table 3).
 *
 * Granularities: `YYYY`, `YYYY-MM`, `YYYY-MM-DD`, `YYYY-MM-DDThh:mmTZD`, `YYYY-MM-DDThh:mm:ssTZD`,
 * `YYYY-MM-DDThh:mm:ss.sTZD` where TZD is `Z` or `±hh:mm`. A time always carries a zone designator.
 * Values are compared by the instant they denote (the earliest instant for reduced granularities), so
 * `2013-01-03T10:00:00+01:00` equals `2013-01-03T09:00:00Z`. We write datetimes in UTC as the standard
 * recommends: `YYYY-MM-DDThh:mm:ss[.sss]Z`.
 *
 * @module
 */
import { ResourceSyncError } from './errors.js';

/** Granularity of a W3C Datetime value. */
export type DatetimePrecision = 'year' | 'month' | 'day' | 'minute' | 'second' | 'fraction';

/** A parsed W3C Datetime. */
export interface W3CDatetime {
  /** UTC epoch milliseconds of the earliest instant the value denotes (fractions beyond ms are truncated). */
  readonly ms: number;
  readonly precision: DatetimePrecision;
  /** True when the value is a full UTC time `...Z` (what §7 recommends). */
  readonly utc: boolean;
  readonly text: string;
}

const DAYS_IN_MONTH = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

function digits(s: string, start: number, count: number): number {
  let n = 0;
  for (let i = start; i < start + count; i++) {
    const c = s.charCodeAt(i) - 48;
    if (c < 0 || c > 9) return -1;
    n = n * 10 + c;
  }
  return n;
}

/**
 * Parses a W3C Datetime; `undefined` when the text is not one. Surrounding whitespace is not allowed.
 *
 * @example
 * ```ts
 * parseDatetime('2013-01-03T09:00:00Z')?.ms === Date.UTC(2013, 0, 3, 9)
 * parseDatetime('2013-01')?.precision === 'month'
 * ```
 */
export function parseDatetime(text: string): W3CDatetime | undefined {
  const n = text.length;
  if (n < 4) return undefined;
  const year = digits(text, 0, 4);
  if (year < 0) return undefined;
  if (n === 4) return { ms: utcMs(year, 1, 1, 0, 0, 0, 0), precision: 'year', utc: false, text };
  if (text.charCodeAt(4) !== 45 /* - */ || n < 7) return undefined;
  const month = digits(text, 5, 2);
  if (month < 1 || month > 12) return undefined;
  if (n === 7) return { ms: utcMs(year, month, 1, 0, 0, 0, 0), precision: 'month', utc: false, text };
  if (text.charCodeAt(7) !== 45 || n < 10) return undefined;
  const day = digits(text, 8, 2);
  if (day < 1 || day > daysIn(year, month)) return undefined;
  if (n === 10) return { ms: utcMs(year, month, day, 0, 0, 0, 0), precision: 'day', utc: false, text };
  if (text.charCodeAt(10) !== 84 /* T */ || n < 17) return undefined;
  const hour = digits(text, 11, 2);
  const minute = digits(text, 14, 2);
  if (text.charCodeAt(13) !== 58 /* : */ || hour < 0 || hour > 23 || minute < 0 || minute > 59) return undefined;
  let i = 16;
  let second = 0;
  let ms = 0;
  let precision: DatetimePrecision = 'minute';
  if (text.charCodeAt(i) === 58) {
    second = digits(text, i + 1, 2);
    if (second < 0 || second > 59) return undefined;
    i += 3;
    precision = 'second';
    if (text.charCodeAt(i) === 46 /* . */) {
      const start = ++i;
      while (i < n && text.charCodeAt(i) >= 48 && text.charCodeAt(i) <= 57) i++;
      if (i === start) return undefined;
      const frac = text.slice(start, Math.min(i, start + 3)).padEnd(3, '0');
      ms = Number(frac);
      precision = 'fraction';
    }
  }
  // Time zone designator: mandatory when a time is present.
  const tz = text.charCodeAt(i);
  let offsetMinutes = 0;
  let utc = false;
  if (tz === 90 /* Z */ && i + 1 === n) {
    utc = true;
  } else if ((tz === 43 /* + */ || tz === 45) /* - */ && i + 6 === n && text.charCodeAt(i + 3) === 58) {
    const oh = digits(text, i + 1, 2);
    const om = digits(text, i + 4, 2);
    if (oh < 0 || oh > 23 || om < 0 || om > 59) return undefined;
    offsetMinutes = (oh * 60 + om) * (tz === 43 ? 1 : -1);
  } else {
    return undefined;
  }
  const epoch = utcMs(year, month, day, hour, minute, second, ms) - offsetMinutes * 60_000;
  return { ms: epoch, precision, utc, text };
}

function daysIn(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return DAYS_IN_MONTH[month - 1] ?? 31;
}

/**
 * Epoch milliseconds of a proleptic Gregorian UTC date and time, by arithmetic (what `Date.UTC` gives for
 * years 100-9999, without its mapping of years 0-99 to 1900-1999; twice as fast as calling it). Days from
 * the civil date after H. Hinnant's `days_from_civil`.
 */
function utcMs(y: number, mo: number, d: number, h: number, mi: number, s: number, ms: number): number {
  const yy = mo <= 2 ? y - 1 : y;
  const era = Math.floor(yy / 400);
  const yoe = yy - era * 400; // 0-399
  const doy = Math.floor((153 * (mo > 2 ? mo - 3 : mo + 9) + 2) / 5) + d - 1; // 0-365, from March 1st
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy; // 0-146096
  const days = era * 146_097 + doe - 719_468; // 719,468 days from 0000-03-01 to 1970-01-01
  return days * 86_400_000 + ((h * 60 + mi) * 60 + s) * 1000 + ms;
}

/** True when `text` is a valid W3C Datetime. */
export function isDatetime(text: string): boolean {
  return parseDatetime(text) !== undefined;
}

/**
 * UTC epoch milliseconds of a W3C Datetime.
 * @throws ResourceSyncError `RS_INVALID_VALUE` when the text is not a W3C Datetime.
 */
export function datetimeMs(text: string): number {
  const dt = parseDatetime(text);
  if (dt === undefined) throw new ResourceSyncError('RS_INVALID_VALUE', `not a W3C Datetime: ${JSON.stringify(text)}`);
  return dt.ms;
}

/**
 * Compares two W3C Datetimes by the instant they denote: negative, 0 or positive.
 * @throws ResourceSyncError `RS_INVALID_VALUE` when either is not a W3C Datetime.
 */
export function compareDatetimes(a: string, b: string): number {
  if (a === b) return 0;
  return datetimeMs(a) - datetimeMs(b);
}

/**
 * Formats an instant as `YYYY-MM-DDThh:mm:ssZ`, with `.sss` only when the milliseconds are not zero
 * (the form §7 recommends).
 *
 * @example
 * ```ts
 * formatDatetime(Date.UTC(2013, 0, 3, 9)) === '2013-01-03T09:00:00Z'
 * ```
 */
export function formatDatetime(time: number | Date): string {
  const ms = typeof time === 'number' ? time : time.getTime();
  if (!Number.isFinite(ms)) throw new ResourceSyncError('RS_INVALID_VALUE', `not a valid time: ${String(time)}`);
  const iso = new Date(ms).toISOString(); // YYYY-MM-DDThh:mm:ss.sssZ (years 0–9999)
  return iso.endsWith('.000Z') ? `${iso.slice(0, -5)}Z` : iso;
}

/**
 * Rewrites a W3C Datetime carrying a time in UTC form (`+01:00` offsets resolved); date-only values are
 * returned unchanged so their granularity is kept.
 * @throws ResourceSyncError `RS_INVALID_VALUE` when the text is not a W3C Datetime.
 */
export function normalizeDatetime(text: string): string {
  const dt = parseDatetime(text);
  if (dt === undefined) throw new ResourceSyncError('RS_INVALID_VALUE', `not a W3C Datetime: ${JSON.stringify(text)}`);
  if (dt.precision === 'year' || dt.precision === 'month' || dt.precision === 'day') return text;
  return formatDatetime(dt.ms);
}
