/**
 * HTTP byte ranges (RFC 9110 §14): parsing a `Range` header against a representation length.
 *
 * Pure functions, no I/O. Memory: O(number of ranges in the header), and the header itself is bounded by the
 * server's header size limit.
 *
 * Policy (documented in the server): one range is answered with 206; several ranges are answered with the
 * whole representation (200), which RFC 9110 §14.2 allows ("a server MAY ignore the Range header field"), so
 * no multipart/byteranges bodies are ever produced.
 *
 * @module
 */

/** An inclusive byte range `[start, end]` within a representation. */
export interface ByteRange {
  readonly start: number;
  /** Inclusive. */
  readonly end: number;
}

/** The outcome of evaluating a `Range` header. */
export type RangeResult =
  /** No usable Range header (absent, another unit, syntax error, or several ranges): send the whole body (200). */
  | { readonly kind: 'none'; readonly reason: 'absent' | 'invalid' | 'unit' | 'multiple' | 'empty' }
  /** One satisfiable range: send 206 with `Content-Range: bytes start-end/length`. */
  | { readonly kind: 'single'; readonly range: ByteRange }
  /** Syntactically valid but no range overlaps the representation: send 416 with `Content-Range: bytes *\/length`. */
  | { readonly kind: 'unsatisfiable' };

const MAX_RANGES = 100;
const DIGITS = /^[0-9]{1,16}$/;

/**
 * Evaluates a `Range` header value for a representation of `length` bytes.
 *
 * - `bytes=a-b` (b clamped to the last byte), `bytes=a-`, `bytes=-n` (the last n bytes; the whole body when
 *   n >= length).
 * - A syntax error or another unit means the header is ignored (RFC 9110 §14.2).
 * - Several ranges: ignored (`multiple`) unless all but one are unsatisfiable, in which case the single
 *   satisfiable one is used; none satisfiable gives `unsatisfiable`.
 * - A zero-length representation: a suffix range is ignored (whole, empty, body), any other range is unsatisfiable.
 *
 * @example
 * ```ts
 * evaluateRange('bytes=0-99', 1000) // { kind: 'single', range: { start: 0, end: 99 } }
 * evaluateRange('bytes=-10', 1000)  // { kind: 'single', range: { start: 990, end: 999 } }
 * evaluateRange('bytes=5000-', 1000) // { kind: 'unsatisfiable' }
 * ```
 */
export function evaluateRange(header: string | undefined, length: number): RangeResult {
  if (header === undefined) return { kind: 'none', reason: 'absent' };
  const eq = header.indexOf('=');
  if (eq < 0) return { kind: 'none', reason: 'invalid' };
  const unit = header.slice(0, eq).trim().toLowerCase();
  if (unit !== 'bytes') return { kind: 'none', reason: 'unit' };
  const specs = header
    .slice(eq + 1)
    .split(',')
    .map((s) => s.trim());
  // Empty list elements are allowed by the list syntax (RFC 9110 §5.6.1), but at least one must be present.
  const nonEmpty = specs.filter((s) => s !== '');
  if (nonEmpty.length === 0 || nonEmpty.length > MAX_RANGES) return { kind: 'none', reason: 'invalid' };
  const satisfiable: ByteRange[] = [];
  let sawSuffixOnEmpty = false;
  for (const spec of nonEmpty) {
    const dash = spec.indexOf('-');
    if (dash < 0) return { kind: 'none', reason: 'invalid' };
    const first = spec.slice(0, dash).trim();
    const last = spec.slice(dash + 1).trim();
    if (first === '') {
      // suffix-range: -n
      if (!DIGITS.test(last)) return { kind: 'none', reason: 'invalid' };
      const n = Number(last);
      if (n === 0) continue; // unsatisfiable
      if (length === 0) {
        sawSuffixOnEmpty = true;
        continue;
      }
      satisfiable.push({ start: Math.max(0, length - n), end: length - 1 });
      continue;
    }
    if (!DIGITS.test(first)) return { kind: 'none', reason: 'invalid' };
    const start = Number(first);
    let end: number;
    if (last === '') end = length - 1;
    else {
      if (!DIGITS.test(last)) return { kind: 'none', reason: 'invalid' };
      end = Number(last);
      if (end < start) return { kind: 'none', reason: 'invalid' };
      end = Math.min(end, length - 1);
    }
    if (start >= length) continue; // unsatisfiable
    satisfiable.push({ start, end });
  }
  if (satisfiable.length === 0) {
    return sawSuffixOnEmpty ? { kind: 'none', reason: 'empty' } : { kind: 'unsatisfiable' };
  }
  if (satisfiable.length > 1) return { kind: 'none', reason: 'multiple' };
  return { kind: 'single', range: satisfiable[0]! };
}

/** `Content-Range` value of a 206 response. */
export function formatContentRange(range: ByteRange, length: number): string {
  return `bytes ${range.start}-${range.end}/${length}`;
}

/** `Content-Range` value of a 416 response. */
export function formatUnsatisfiedRange(length: number): string {
  return `bytes */${length}`;
}
