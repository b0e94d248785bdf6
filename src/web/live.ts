/**
 * Live notifications for the page: the explorer connects to a Source's WebSocket change channel (N-§6) with our
 * own channel client and passes each event on as a server-sent event (`text/event-stream`), so the page needs
 * neither a WebSocket to another origin nor the Source's credentials.
 *
 * Memory: the channel client's bound (`maxQueued` events, here 1,000) plus one event; a page that stops reading
 * holds the stream's backpressure, the client pauses its socket, and the Source drops it as too slow (the
 * page is told on reconnection).
 *
 * @module
 */
import { ChannelClient } from '../notify/websocket-client.js';
import type { NotificationEvent } from '../notify/events.js';

/** Longest quiet time before a comment line keeps the stream (and any proxy) open. */
const KEEPALIVE_MS = 15_000;

/** An event as the page receives it (JSON in `data:`). */
function eventJson(e: NotificationEvent): unknown {
  switch (e.type) {
    case 'notification': {
      const n = e.notification;
      return {
        type: 'notification',
        kind: n.kind,
        receivedAt: new Date(e.receivedAt).toISOString(),
        capabilityList: n.capabilityListUrl,
        changes: n.changes.slice(0, 1000),
        count: n.changes.length,
      };
    }
    case 'connected':
      return { type: 'connected', reconnect: e.reconnect };
    case 'disconnected':
      return {
        type: 'disconnected',
        reason: e.reason,
        ...(e.retryInMs === undefined ? {} : { retryInMs: e.retryInMs }),
      };
    case 'refused':
      return { type: 'refused', reason: e.reason };
  }
}

/**
 * The server-sent events of one channel until `signal` aborts (the page went away or the server closes).
 * The first event is `open` (sent at once, so the page knows the stream works before the channel answers).
 */
export async function* channelEvents(
  url: string,
  signal: AbortSignal | undefined,
  headers: Readonly<Record<string, string>> = {},
): AsyncGenerator<Uint8Array> {
  const client = new ChannelClient({ url, headers, maxQueued: 1000, maxDelayMs: 5_000 });
  const encoder = new TextEncoder();
  const events = client.events();
  const abort = (): void => {
    void client.close();
  };
  signal?.addEventListener('abort', abort, { once: true });
  try {
    yield encoder.encode(`retry: 2000\nevent: open\ndata: ${JSON.stringify({ channel: url })}\n\n`);
    let pending: Promise<IteratorResult<NotificationEvent>> | undefined;
    while (signal?.aborted !== true) {
      pending ??= events.next();
      let timer: NodeJS.Timeout | undefined;
      const tick = new Promise<'tick'>((resolve) => {
        timer = setTimeout(() => resolve('tick'), KEEPALIVE_MS);
      });
      const r = await Promise.race([pending, tick]);
      clearTimeout(timer);
      if (r === 'tick') {
        yield encoder.encode(': keep-alive\n\n');
        continue;
      }
      pending = undefined;
      if (r.done === true) break;
      yield encoder.encode(`event: ${r.value.type}\ndata: ${JSON.stringify(eventJson(r.value))}\n\n`);
    }
  } finally {
    signal?.removeEventListener('abort', abort);
    await client.close();
  }
}
