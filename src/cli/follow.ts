/**
 * `resourcesync sync --follow <url> <dir>`: the flags and the printing of `Destination.follow()` (see
 * src/destination/follow.ts for what following does: a first run, notifications over the channels the Source
 * advertises or WebSub with `--callback`, catch-up runs, a poll at `--poll` while no channel is up). Each event
 * is printed as a JSON line with `--json`, else as a line for people; warnings go to stderr. Ctrl-C (SIGINT or
 * SIGTERM) stops after the run in progress reaches a consistent state.
 *
 * @module
 */
import { isResourceSyncError, ResourceSyncError } from '../core/errors.js';
import { Destination, type DestinationOptions } from '../destination/destination.js';
import type { FollowEvent, FollowOptions } from '../destination/follow.js';
import { EXIT } from './exit.js';

export interface FollowCommandOptions
  extends Pick<
    FollowOptions,
    'callback' | 'listenHost' | 'catchUpIntervalMs' | 'frameworkCatchUpIntervalMs' | 'frameworkVerifyDelayMs' | 'direct'
  > {
  readonly destination: Omit<DestinationOptions, 'url' | 'dir' | 'signal'>;
  readonly json?: boolean;
  /** Stops the follower (default: the first SIGINT or SIGTERM). */
  readonly signal?: AbortSignal;
  /** Where lines go (default stdout / stderr). */
  readonly write?: (line: string) => void;
  readonly warn?: (line: string) => void;
}

/**
 * Follows a Source until stopped. Returns the exit code: 0 when stopped by the signal, 2 when the Source or its
 * notifications cannot be used at all, 1 on an unexpected failure.
 */
export async function runFollow(url: string, dir: string, options: FollowCommandOptions): Promise<number> {
  const write = options.write ?? ((l: string) => process.stdout.write(`${l}\n`));
  const warn = options.warn ?? ((l: string) => process.stderr.write(`resourcesync sync --follow: ${l}\n`));
  const abort = new AbortController();
  const onSignal = (): void => abort.abort(new ResourceSyncError('RS_ABORTED', 'interrupted'));
  if (options.signal === undefined) {
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
  } else if (options.signal.aborted) abort.abort();
  else options.signal.addEventListener('abort', onSignal, { once: true });
  const print = (e: FollowEvent): void => {
    const { message, ...fields } = e;
    if (options.json === true) write(JSON.stringify(fields));
    else if (message !== undefined) write(message);
  };
  const follow: { -readonly [K in keyof FollowOptions]: FollowOptions[K] } = { onEvent: print, onLog: warn };
  for (const k of [
    'callback',
    'listenHost',
    'catchUpIntervalMs',
    'frameworkCatchUpIntervalMs',
    'frameworkVerifyDelayMs',
    'direct',
  ] as const) {
    if (options[k] !== undefined) (follow as Record<string, unknown>)[k] = options[k];
  }
  try {
    await new Destination({ ...options.destination, url, dir, signal: abort.signal }).follow(follow);
    return EXIT.OK;
  } catch (e) {
    if (abort.signal.aborted && isResourceSyncError(e, 'RS_ABORTED')) return EXIT.OK;
    if (isResourceSyncError(e)) {
      warn(`${e.message} [${e.code}]`);
      return EXIT.USAGE;
    }
    throw e;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}
