/**
 * Character-level helpers shared by the reader and the writer: entity decoding (the five predefined entities
 * and numeric character references, XML 1.0 §4.1, §4.6), attribute-value normalisation (§3.3.3), XML 1.0
 * character legality (§2.2) and escaping.
 *
 * @module
 */

/** Called with a message and the offset (in the input string) of the offending reference. Never returns. */
export type Fail = (message: string, offset: number) => never;

const PREDEFINED: Record<string, string> = { lt: '<', gt: '>', amp: '&', quot: '"', apos: "'" };

/** True when `cp` is a character XML 1.0 allows in a document (§2.2, production [2] Char). */
export function isXmlChar(cp: number): boolean {
  return cp >= 0x20
    ? cp <= 0xd7ff || (cp >= 0xe000 && cp <= 0xfffd) || (cp >= 0x10000 && cp <= 0x10ffff)
    : cp === 0x9 || cp === 0xa || cp === 0xd;
}

/**
 * Replaces entity and character references in `s` (which contains at least one `&`).
 * Unknown named entities and references to characters XML does not allow are refused through `fail`.
 */
export function decodeReferences(s: string, fail: Fail): string {
  let out = '';
  let last = 0;
  let amp = s.indexOf('&');
  while (amp >= 0) {
    const semi = s.indexOf(';', amp + 1);
    if (semi < 0) fail("'&' must start an entity or character reference (write &amp;)", amp);
    const ref = s.slice(amp + 1, semi);
    let rep: string | undefined;
    if (ref.charCodeAt(0) === 35 /* # */) {
      const hex = ref.charCodeAt(1) === 120; /* x */
      const digits = ref.slice(hex ? 2 : 1);
      if (digits.length === 0 || !(hex ? /^[0-9a-fA-F]+$/ : /^[0-9]+$/).test(digits) || digits.length > 8)
        fail(`bad character reference &${ref};`, amp);
      const cp = Number.parseInt(digits, hex ? 16 : 10);
      if (!isXmlChar(cp)) fail(`character reference &${ref}; names a character XML does not allow`, amp);
      rep = String.fromCodePoint(cp);
    } else {
      rep = Object.hasOwn(PREDEFINED, ref) ? PREDEFINED[ref] : undefined;
      if (rep === undefined) {
        if (!/^[A-Za-z_:][\w.:-]*$/.test(ref))
          fail("'&' must start an entity or character reference (write &amp;)", amp);
        fail(`unknown entity &${ref}; (only the five predefined entities are allowed; DTDs are refused)`, amp);
      }
    }
    out += s.slice(last, amp) + rep;
    last = semi + 1;
    amp = s.indexOf('&', last);
  }
  return out + s.slice(last);
}

/** Line-end normalisation (XML 1.0 §2.11): CR LF and lone CR become LF. */
export function normalizeNewlines(s: string): string {
  return s.indexOf('\r') < 0 ? s : s.replace(/\r\n?/g, '\n');
}

/**
 * Attribute-value normalisation for CDATA attributes (§3.3.3): literal tab, CR, LF (and CR LF) become one
 * space each, then references are replaced (a `&#10;` stays a newline).
 */
export function normalizeAttribute(raw: string, fail: Fail): string {
  let v = raw;
  if (/[\t\n\r]/.test(v)) v = v.replace(/\r\n|[\t\n\r]/g, ' ');
  if (v.indexOf('&') >= 0) {
    // Offsets reported by `fail` are into the normalised value; CR LF pairs shift them by at most one.
    v = decodeReferences(v, fail);
  }
  return v;
}

/** True for the four XML white-space characters (§2.3 production [3]). */
export function isXmlSpace(c: number): boolean {
  return c === 32 || c === 10 || c === 9 || c === 13;
}

/** Trims XML white space (not Unicode white space) from both ends. */
export function trimXml(s: string): string {
  const n = s.length;
  if (n === 0) return s;
  let a = 0;
  let b = n;
  while (a < b && isXmlSpace(s.charCodeAt(a))) a++;
  while (b > a && isXmlSpace(s.charCodeAt(b - 1))) b--;
  return a === 0 && b === n ? s : s.slice(a, b);
}

// ---------------------------------------------------------------------------------------------------------
// Writing

/** Characters that need escaping in text or attributes, or that XML 1.0 forbids (C0 controls, U+FFFE/FFFF, surrogates). */
const NEEDS_WORK_ATTR = /[&<>"\u0000-\u001f\ud800-\udfff\ufffe\uffff]/;
const NEEDS_WORK_TEXT = /[&<>\r\u0000-\u0008\u000b\u000c\u000e-\u001f\ud800-\udfff\ufffe\uffff]/;

/** Thrown by the escapers for a character XML 1.0 cannot represent; the writer turns it into RS_INVALID_VALUE. */
export class IllegalCharacterError extends Error {
  constructor(readonly codePoint: number) {
    super(`U+${codePoint.toString(16).toUpperCase().padStart(4, '0')} cannot be written in XML 1.0`);
  }
}

function escapeSlow(s: string, attr: boolean): string {
  let out = '';
  let last = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    let rep: string | undefined;
    switch (c) {
      case 38:
        rep = '&amp;';
        break;
      case 60:
        rep = '&lt;';
        break;
      case 62:
        rep = '&gt;';
        break;
      case 34:
        if (attr) rep = '&quot;';
        break;
      case 9:
        if (attr) rep = '&#9;';
        break;
      case 10:
        if (attr) rep = '&#10;';
        break;
      case 13:
        rep = '&#13;';
        break;
      default:
        if (c < 0x20 || c === 0xfffe || c === 0xffff) throw new IllegalCharacterError(c);
        if (c >= 0xd800 && c <= 0xdfff) {
          const d = s.charCodeAt(i + 1);
          if (c <= 0xdbff && d >= 0xdc00 && d <= 0xdfff) i++;
          else throw new IllegalCharacterError(c);
        }
    }
    if (rep !== undefined) {
      out += s.slice(last, i) + rep;
      last = i + 1;
    }
  }
  return last === 0 ? s : out + s.slice(last);
}

/** Escapes `& < > "` (and tab, LF, CR as character references) for an attribute value in double quotes. */
export function escapeAttribute(s: string): string {
  return NEEDS_WORK_ATTR.test(s) ? escapeSlow(s, true) : s;
}

/** Escapes `& < >` (and CR as a character reference) for element content. */
export function escapeText(s: string): string {
  return NEEDS_WORK_TEXT.test(s) ? escapeSlow(s, false) : s;
}
