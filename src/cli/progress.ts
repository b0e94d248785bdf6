/**
 * A one-line progress display on stderr for long phases of a Destination run (discovery, document reads, dump
 * package downloads, installs, audits): what is being done, resources handled with their rate, bytes, a bar
 * and ETA when the total is known, and the time elapsed. Redrawn by a timer (every 250 ms), so a phase that
 * emits nothing (waiting for a Source to build a package) still shows it is alive. Commands show it only when
 * stderr is a TTY (or `--progress` forces it) and not with `--json`.
 *
 * @module
 */
import type { SyncEvent } from '../destination/events.js';
import type { CommandOutput } from './output.js';

/** Options of {@link ProgressLine}. */
export interface ProgressOptions {
  /** Width of the terminal: the line is cut to one less (a wrapped line cannot be redrawn in place). */
  readonly columns?: number;
  /** Redraw interval in ms (default 250). */
  readonly intervalMs?: number;
  /** Text shown before the operation starts (default "discovering"). */
  readonly initial?: string;
}

/** Sizes as people read them. */
export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 ** 2) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1024 ** 3) return `${(n / 1024 ** 2).toFixed(1)} MiB`;
  return `${(n / 1024 ** 3).toFixed(2)} GiB`;
}

/** A duration in seconds as `42s`, `3m05s` or `1h02m`. */
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

function lastSegment(url: string): string {
  const path = url.replace(/[?#].*$/, '').replace(/\/+$/, '');
  return path.slice(path.lastIndexOf('/') + 1) || url;
}

/** See the module comment. Call {@link update} with every event, {@link clear} before printing the result. */
export class ProgressLine {
  private readonly started = Date.now();
  private phaseStarted = Date.now();
  private timer: NodeJS.Timeout | undefined;
  private drawn = false;
  private label: string;
  private op = '';
  private done = 0;
  private total: number | undefined;
  private bytes = 0;
  private failed = 0;
  private activity = '';
  private download: { url: string; bytes: number; total?: number; since: number; at: number } | undefined;
  private lastDraw = 0;

  constructor(
    private readonly out: CommandOutput,
    private readonly options: ProgressOptions = {},
  ) {
    this.label = options.initial ?? 'discovering';
    this.timer = setInterval(() => this.draw(), options.intervalMs ?? 250);
    this.timer.unref();
  }

  update(e: SyncEvent): void {
    switch (e.type) {
      case 'start':
        this.op = e.operation;
        this.label = e.operation;
        this.phaseStarted = Date.now();
        this.done = 0;
        break;
      case 'progress':
        this.done = e.done;
        this.total = e.total;
        this.bytes = e.bytes;
        break;
      case 'document':
        this.activity = `reading ${lastSegment(e.url)}`;
        this.download = undefined;
        break;
      case 'package':
        this.activity = `installing ${e.files} files of ${lastSegment(e.url)}`;
        this.download = undefined;
        break;
      case 'download': {
        const now = Date.now();
        const since = this.download?.url === e.url ? this.download.since : now;
        this.download = {
          url: e.url,
          bytes: e.bytes,
          since,
          at: now,
          ...(e.total === undefined ? {} : { total: e.total }),
        };
        break;
      }
      case 'resource':
        if (e.action === 'failed' || e.action === 'refused') this.failed++;
        break;
      default:
        return;
    }
    // Events redraw at most every 100 ms; the timer covers the silences.
    if (Date.now() - this.lastDraw >= 100) this.draw();
  }

  /** The current line (without control characters). */
  text(): string {
    const now = Date.now();
    const parts: string[] = [this.label];
    const d = this.download;
    if (d !== undefined) {
      const secs = Math.max(0.001, (d.at - d.since) / 1000);
      const rate = d.bytes / secs;
      let s = `downloading ${lastSegment(d.url)} ${formatBytes(d.bytes)}`;
      if (d.total !== undefined && d.total > 0) {
        s += ` of ${formatBytes(d.total)} (${Math.floor((100 * d.bytes) / d.total)}%)`;
        if (rate > 0 && d.bytes > 0 && d.bytes < d.total) s += `, ETA ${formatDuration((d.total - d.bytes) / rate)}`;
      }
      if (d.bytes > 0) s += `, ${formatBytes(rate)}/s`;
      parts.push(s);
    } else if (this.activity !== '') parts.push(this.activity);
    if (this.op !== '') {
      const secs = Math.max(0.001, (now - this.phaseStarted) / 1000);
      const rate = this.done / secs;
      let s: string;
      if (this.total !== undefined && this.total > 0) {
        const frac = Math.min(1, this.done / this.total);
        const width = 20;
        const full = Math.round(frac * width);
        s = `[${'#'.repeat(full)}${'.'.repeat(width - full)}] ${this.done}/${this.total}`;
        if (rate > 0 && this.done < this.total) s += `, ETA ${formatDuration((this.total - this.done) / rate)}`;
      } else s = `${this.done} resources`;
      if (this.done > 0) s += ` (${Math.round(rate)}/s)`;
      s += `, ${formatBytes(this.bytes)}`;
      if (this.failed > 0) s += `, ${this.failed} failed`;
      parts.push(s);
    }
    parts.push(formatDuration((now - this.started) / 1000));
    return parts.join(' · ');
  }

  private draw(): void {
    this.lastDraw = Date.now();
    let line = this.text();
    const max = (this.options.columns ?? 0) - 1;
    if (max > 10 && line.length > max) line = `${line.slice(0, max - 1)}…`;
    this.out.stderr(`\r${line}\x1b[K`);
    this.drawn = true;
  }

  /** Erases the line and stops the timer (call before printing the summary). */
  clear(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    if (this.drawn) this.out.stderr('\r\x1b[K');
    this.drawn = false;
  }
}
