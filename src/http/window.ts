/**
 * The adaptive window of one origin: how many requests {@link HttpClient} keeps in flight to it (with HTTP/1.1,
 * how many connections it uses), sized to what the path and the server can take.
 *
 * A request takes a slot before it is sent and gives it back when its body has been read (or dropped). Time is
 * cut into epochs of at least {@link MIN_EPOCH_MS} and a few mean request latencies; at the end of an epoch in
 * which the window was the limit (some request had to wait for a slot), the completions per second decide:
 *
 * - the first such epoch (connection set-up, a cold process) is not compared;
 * - slow start: the window doubles while each doubling raises the rate by at least {@link START_GAIN} (see
 *   {@link gained}: the rate by Little's law, and the measured rate not falling much);
 * - otherwise, a change that did not raise the rate by {@link PROBE_GAIN} is undone, and the window holds for
 *   some epochs before probing a quarter more (the hold doubles after each failed probe, up to 32 epochs); a
 *   slow start that ended without gain is tried again twice first (a noisy epoch on a loaded machine can end
 *   it: at 100 ms that left the window at 8 for a whole run);
 * - latency rising to twice what it was when the window settled, with the rate falling, shrinks it by a quarter
 *   (not below its start);
 * - a 429 or 503 halves it (down to 1) and, with `Retry-After`, pauses the origin that long.
 *
 * So on a long round trip the window grows until the rate stops growing (or the ceiling), and on a short one,
 * where more requests in flight only add contention, it stays where it started. The ceiling and the start are
 * the caller's (`HttpClientOptions.maxConnections` always wins).
 *
 * `RESOURCESYNC_DEBUG_WINDOW=1` in the environment writes each epoch's measure to stderr.
 *
 * Memory: the waiting requests' callbacks (a request waiting for a slot cannot be withdrawn: an aborted one
 * takes its slot and fails at once).
 *
 * @module
 */

/** Shortest epoch (ms): shorter ones measure noise (timers, garbage collection, other processes). */
export const MIN_EPOCH_MS = 250;
/** Gain (ratio, by Little's law) a doubling must bring in slow start for the window to double again. */
export const START_GAIN = 1.25;
/** Gain (ratio, by Little's law) a probe must bring to be kept. */
export const PROBE_GAIN = 1.1;
/** Saturated epochs held before the first probe after slow start. */
const FIRST_HOLD = 4;
/** Slow starts tried (the first, and again after a hold) before the window only probes a quarter more. */
const START_TRIES = 3;
/** Longest hold between probes (epochs). */
const MAX_HOLD = 32;

/** Options of an {@link OriginWindow}. */
export interface WindowOptions {
  /** Requests in flight at first (and the floor of latency back-off). */
  readonly initial: number;
  /** Most requests in flight ever. */
  readonly ceiling: number;
  /** Clock (ms); tests pass their own. */
  readonly now?: () => number;
}

const DEBUG = process.env['RESOURCESYNC_DEBUG_WINDOW'] === '1';
type Phase = 'warmup' | 'start' | 'probe' | 'hold';

/** One epoch's measure: the window, completions per second, mean latency (ms). */
interface Sample {
  limit: number;
  rate: number;
  latency: number;
}

/**
 * Whether going from `a` to `b` (a larger window) paid. Two measures, because either alone is noisy: the rate the
 * window sustains by Little's law (requests in flight / latency: latency growing as fast as the window means the
 * extra requests only queued, as on loopback where the CPU is the limit) must grow by `minGain`, and the rate
 * measured (completions per second, lumpy on a long round trip where a window's requests complete together)
 * must grow by `minRateGain`.
 */
export function gained(a: Sample, b: Sample, minGain: number, minRateGain: number): boolean {
  const little = (b.limit / a.limit) * (a.latency / Math.max(b.latency, 0.001));
  return little >= minGain && b.rate >= a.rate * minRateGain;
}

/**
 * The slot gate and window controller of one origin (see the module comment).
 *
 * @example
 * ```ts
 * const w = new OriginWindow({ initial: 8, ceiling: 64 });
 * w.enqueue((slot) => send().finally(() => w.release(slot)));
 * ```
 */
export class OriginWindow {
  /** Requests allowed in flight now. */
  limit: number;
  /** Requests in flight now. */
  inFlight = 0;
  readonly #initial: number;
  readonly #ceiling: number;
  readonly #now: () => number;
  #waiters: ((slot: number) => void)[] = [];
  #head = 0;
  #pausedUntil = 0;
  #pauseTimer: ReturnType<typeof setTimeout> | undefined;
  // The epoch being measured.
  #epochStart = -1;
  /** When the limit last changed. */
  #changedAt = Number.NEGATIVE_INFINITY;
  #done = 0;
  #latency = 0;
  #saturated = false;
  // The controller.
  #phase: Phase = 'warmup';
  /** The measure before the change under test. */
  #before: Sample | undefined;
  #hold = FIRST_HOLD;
  #holdLeft = 0;
  /** Rate and latency when the window settled (hold). */
  #settled: Sample | undefined;
  /** Slow starts that ended without gain. */
  #startTries = 0;

  constructor(options: WindowOptions) {
    this.#ceiling = Math.max(1, Math.floor(options.ceiling));
    this.#initial = Math.min(this.#ceiling, Math.max(1, Math.floor(options.initial)));
    this.limit = this.#initial;
    this.#now = options.now ?? Date.now;
  }

  /** Called with the new limit whenever it changes (the client sizes the origin's connection pool with it). */
  onLimit: ((limit: number) => void) | undefined;

  /** A slot at once (its start time, to give to {@link release}), or undefined when the caller must wait. */
  tryAcquire(): number | undefined {
    if (this.inFlight < this.limit && this.#head === this.#waiters.length && this.#pausedUntil === 0) {
      this.inFlight++;
      return this.#now();
    }
    this.#saturated = true;
    return undefined;
  }

  /** Runs `start` with a slot's start time as soon as one is free (FIFO), at once when one is. */
  enqueue(start: (slot: number) => void): void {
    const t = this.tryAcquire();
    if (t !== undefined) start(t);
    else this.#waiters.push(start);
  }

  /**
   * Gives a slot back; `start` is what acquiring returned, `sent` when the request went out on a connected
   * socket (so that connection set-up and queueing are not counted as the request's latency; default `start`).
   * Counts the request in the epoch.
   */
  release(start: number, sent = start): void {
    this.inFlight--;
    // A request sent before the last change of the limit measures the window before: not counted.
    if (start < this.#changedAt) {
      this.#wake();
      return;
    }
    const now = this.#now();
    if (this.#phase === 'warmup' && !this.#saturated) {
      // Until the window first fills (discovery, a list being read), nothing is measured.
      this.#epochStart = now;
      this.#wake();
      return;
    }
    if (this.#epochStart < 0) this.#epochStart = start;
    this.#done++;
    this.#latency += now - sent;
    const elapsed = now - this.#epochStart;
    const mean = this.#latency / this.#done;
    if (elapsed >= MIN_EPOCH_MS && elapsed >= 2 * mean && this.#done >= 8) {
      const before = this.limit;
      this.#endEpoch(now, elapsed, mean);
      if (this.limit !== before) {
        this.#changedAt = now;
        this.onLimit?.(this.limit);
      }
    }
    this.#wake();
  }

  /** The Source said it is overloaded (429, 503): halve the window; `retryAfterMs` pauses new requests. */
  overloaded(retryAfterMs: number | undefined): void {
    const limit = Math.max(1, Math.floor(this.limit / 2));
    if (limit !== this.limit) {
      this.limit = limit;
      this.#changedAt = this.#now();
      this.onLimit?.(limit);
    }
    this.#phase = 'hold';
    this.#hold = MAX_HOLD;
    this.#holdLeft = MAX_HOLD;
    this.#before = undefined;
    this.#settled = undefined;
    this.#restartEpoch(this.#now());
    if (retryAfterMs !== undefined && retryAfterMs > 0) {
      const until = this.#now() + retryAfterMs;
      if (until > this.#pausedUntil) {
        this.#pausedUntil = until;
        clearTimeout(this.#pauseTimer);
        this.#pauseTimer = setTimeout(() => {
          this.#pausedUntil = 0;
          this.#pauseTimer = undefined;
          this.#wake();
        }, retryAfterMs);
        this.#pauseTimer.unref?.();
      }
    }
  }

  #wake(): void {
    if (this.#pausedUntil !== 0) return;
    const waiters = this.#waiters;
    while (this.inFlight < this.limit && this.#head < waiters.length) {
      const start = waiters[this.#head] as (slot: number) => void;
      waiters[this.#head++] = noop;
      this.inFlight++;
      start(this.#now());
    }
    if (this.#head === waiters.length) {
      this.#waiters = [];
      this.#head = 0;
    } else if (this.#head > 1024) {
      this.#waiters = waiters.slice(this.#head);
      this.#head = 0;
    }
  }

  #restartEpoch(now: number): void {
    this.#epochStart = now;
    this.#done = 0;
    this.#latency = 0;
    this.#saturated = this.#head < this.#waiters.length;
  }

  #endEpoch(now: number, elapsed: number, mean: number): void {
    const rate = (this.#done * 1000) / elapsed;
    const saturated = this.#saturated;
    if (DEBUG)
      process.stderr.write(
        `window ${this.#phase} limit ${this.limit} saturated ${saturated} rate ${rate.toFixed(0)}/s latency ${mean.toFixed(1)} ms (${this.#done} in ${elapsed} ms)\n`,
      );
    this.#restartEpoch(now);
    // The window was not the limit: the rate says nothing about it.
    if (!saturated) return;
    const limit = this.limit;
    const here = { limit, rate, latency: mean };
    if (this.#phase === 'warmup') {
      // The first saturated epoch carries connection set-up and a cold process: it is not compared.
      this.#phase = 'start';
      return;
    }
    const before = this.#before;
    if (this.#phase === 'hold') {
      const s = this.#settled;
      if (s === undefined) this.#settled = here;
      else if (mean > 2 * s.latency && rate < 0.85 * s.rate && limit > this.#initial) {
        // Latency rising while the rate falls: the path or the server is congested.
        this.limit = Math.max(this.#initial, Math.floor(limit * 0.75));
        this.#settled = undefined;
        this.#holdLeft = this.#hold;
        return;
      } else {
        s.rate = 0.75 * s.rate + 0.25 * rate;
        s.latency = 0.75 * s.latency + 0.25 * mean;
      }
      if (--this.#holdLeft > 0 || limit >= this.#ceiling) return;
      // A slow start that a noisy epoch may have cut short (on a loaded machine) is tried again, twice; after
      // that, the window probes a quarter more.
      if (this.#startTries < START_TRIES) {
        this.#phase = 'start';
        this.#grow(here, 2);
      } else {
        this.#phase = 'probe';
        this.#grow(here, 1.25);
      }
      return;
    }
    if (before === undefined) {
      // Slow start's first measured epoch.
      this.#grow(here, 2);
      return;
    }
    const start = this.#phase === 'start';
    if (gained(before, here, start ? START_GAIN : PROBE_GAIN, start ? 0.8 : 1.05)) {
      if (limit >= this.#ceiling) this.#settle(here);
      else this.#grow(here, start ? 2 : 1.25);
      return;
    }
    // No gain: back to the limit before, and hold (longer after each failed probe) before the next try.
    this.limit = before.limit;
    if (start) this.#startTries++;
    else this.#hold = Math.min(MAX_HOLD, this.#hold * 2);
    this.#settle(before);
  }

  #grow(here: Sample, factor: number): void {
    this.#before = here;
    this.limit = Math.min(this.#ceiling, Math.max(here.limit + 1, Math.round(here.limit * factor)));
    if (this.limit === here.limit) this.#settle(here);
  }

  #settle(at: Sample): void {
    this.#phase = 'hold';
    this.#before = undefined;
    this.#holdLeft = this.#hold;
    this.#settled = { ...at };
  }
}

function noop(): void {}
