/**
 * Option parsers shared by subcommands (commander argument parsers: they throw InvalidArgumentError, which
 * commander reports with the option's name and exits with a usage error).
 *
 * @module
 */
import { InvalidArgumentError } from 'commander';

/** A duration: a whole number with an optional unit `ms`, `s` (default), `m`, `h` or `d`; returns milliseconds. */
export function parseDuration(text: string): number {
  const m = /^(\d+)(ms|s|m|h|d)?$/.exec(text.trim());
  if (m === null) throw new InvalidArgumentError('a duration like 90s, 15m, 24h or 7d is expected');
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2] ?? 's'] ?? 1000;
  return Number(m[1]) * unit;
}

/** A whole number >= 1, written in digits only (`1e3`, `0x10` and ` 5 ` are refused). */
export function positiveInteger(text: string): number {
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(Number(text)) || Number(text) < 1)
    throw new InvalidArgumentError('a whole number >= 1 is expected');
  return Number(text);
}
