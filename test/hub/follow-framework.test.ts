// `sync --follow` (runFollow, in process) against a live directory Source with notifications attached
// (`attachSourceNotifications`, as `serve` wires them): the follower subscribes to the framework channel (or the
// framework topic with --callback) next to the change one, and with a poll interval of an hour learns of changes
// that were recorded while change notifications were suppressed ONLY through the framework notification about the
// regenerated Change List. A framework notification of another set (its `up`), or about another set's Capability
// List, triggers nothing; a deleted Capability List of our set is reported.
import assert from 'node:assert/strict';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { runFollow } from '../../src/cli/follow.js';
import { attachSourceNotifications, type SourceNotifications } from '../../src/hub/attach.js';
import { createFrameworkNotification, type FrameworkChange } from '../../src/notify/payloads.js';
import { type DirectorySource, openDirectorySource } from '../../src/source/index.js';
import { createSourceServer, type SourceServer } from '../../src/source/server.js';
import { delay, EventLog, withTempDir, freePort } from '../notify/helpers.js';

type Line = Record<string, unknown>;

interface LiveSource {
  readonly col: string;
  readonly baseUrl: string;
  readonly site: DirectorySource;
  readonly wired: SourceNotifications;
  readonly server: SourceServer;
  /** While true, recorded changes are not sent as change notifications (nor announced). */
  suppress: boolean;
  /** Has the Source regenerate the set's Change List (which announces it on the framework channel and topic). */
  regenerateChangeList(): Promise<void>;
  /** Publishes a raw framework notification payload on our set's framework channel. */
  publishFramework(payload: string): void;
  close(): Promise<void>;
}

async function startSource(
  dir: string,
  options: { hub?: boolean; advertiseFramework?: boolean; port?: number } = {},
): Promise<LiveSource> {
  const col = join(dir, 'col');
  if (options.port === undefined) {
    await mkdir(col);
    await writeFile(join(col, 'a.txt'), 'alpha');
  }
  let resolveSite: (s: DirectorySource) => void = () => {};
  const server = createSourceServer(new Promise<DirectorySource>((r) => (resolveSite = r)));
  const { url: baseUrl } = await server.listen(options.port ?? 0, '127.0.0.1');
  let wired: SourceNotifications | undefined;
  const site = await openDirectorySource({
    dir: col,
    baseUrl,
    watch: false,
    stateDir: join(dir, 'state'),
    fsync: false,
    limits: { changeListMaxEntries: 2 },
    // As `serve` does: each Capability List advertises the set's channels (and hub); the framework channel can be
    // left out to play a Source without framework notifications.
    capabilityListExtras: (set) =>
      wired === undefined
        ? undefined
        : {
            extraEntries: wired.notifier
              .capabilityListEntries(set)
              .filter((e) => options.advertiseFramework !== false || e.md?.capability !== 'framework-notification'),
            ...(wired.hubUrl === undefined ? {} : { hubUrl: wired.hubUrl }),
          },
  });
  resolveSite(site);
  const live: { -readonly [K in keyof LiveSource]: LiveSource[K] } = {
    col,
    baseUrl,
    site,
    server,
    suppress: false,
  } as LiveSource;
  wired = attachSourceNotifications({
    server: server.httpServer,
    baseUrl,
    site: {
      onChange: (listener) =>
        site.onChange((changes) => {
          if (!live.suppress) listener(changes);
        }),
      document: (p) => site.document(p),
      onDocuments: (listener) => site.onDocuments(listener),
      source: site.source,
    },
    frameworkIntervalMs: 50,
    ...(options.hub === true ? { hub: { db: join(dir, 'hub.db') } } : {}),
  });
  const urls = wired.notifier.urls('default');
  live.wired = wired;
  live.regenerateChangeList = async () => {
    await site.document(new URL(urls.changeList).pathname);
  };
  live.publishFramework = (payload) => {
    wired.notifier.channels!.channel(new URL(urls.frameworkChannel).pathname)!.publish(payload);
  };
  live.close = async () => {
    await wired.close();
    await server.close();
    await site.close();
  };
  return live as LiveSource;
}

/** Finds a file by name under `dir` (the copy's layout puts resources under a host folder). */
async function readCopy(dir: string, name: string): Promise<string | undefined> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true }).catch(() => []);
  for (const e of entries) {
    if (e.isFile() && e.name === name && !e.parentPath.includes('.resourcesync')) {
      return readFile(join(e.parentPath, e.name), 'utf8').catch(() => undefined);
    }
  }
  return undefined;
}

async function waitForCopy(dir: string, name: string, content: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const text = await readCopy(dir, name);
    if (text === content) return;
    if (Date.now() > deadline) throw new Error(`${name}: expected ${content}, found ${String(text)}`);
    await delay(25);
  }
}

/** Starts runFollow in this process; its JSON lines (and warnings, as `{ stderr }`) go to `log`. */
function follow(url: string, copy: string, extra: Partial<Parameters<typeof runFollow>[2]> = {}) {
  const log = new EventLog<Line>();
  const ac = new AbortController();
  const done = runFollow(url, copy, {
    destination: { durability: 'none' },
    json: true,
    signal: ac.signal,
    write: (l) => log.push(JSON.parse(l) as Line),
    warn: (l) => log.push({ stderr: l }),
    // A Change List update while the change stream is intact is checked about this much later (default 60 s).
    frameworkVerifyDelayMs: 1000,
    ...extra,
  });
  return {
    log,
    done,
    stop: async (): Promise<number> => {
      ac.abort();
      return done;
    },
  };
}

/** Waits until catch-up runs covered every reason in `reasons` (the catch-ups a connection triggers). */
async function waitCaughtUp(log: EventLog<Line>, reasons: readonly string[]): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const seen = new Set(log.events.filter((e) => e.event === 'caught-up').flatMap((e) => e.reasons as string[]));
    if (reasons.every((r) => seen.has(r))) return;
    if (Date.now() > deadline)
      throw new Error(`no catch-up for ${reasons.join(', ')}; saw ${JSON.stringify(log.events).slice(0, 3000)}`);
    await delay(20);
  }
}

/**
 * Waits until the follower has been quiet for `quietMs` (deadline 10 s): notifications caused by earlier runs (the
 * Source announces the documents they made it regenerate) are handled. Only makes the checks stricter.
 */
async function settle(log: EventLog<Line>, quietMs = 400): Promise<void> {
  const deadline = Date.now() + 10_000;
  let n = log.events.length;
  let since = Date.now();
  while (Date.now() - since < quietMs && Date.now() < deadline) {
    await delay(25);
    if (log.events.length !== n) {
      n = log.events.length;
      since = Date.now();
    }
  }
}

const caughtUps = (log: EventLog<Line>): Line[] => log.events.filter((e) => e.event === 'caught-up');

describe('sync --follow with framework notifications', () => {
  it('WebSocket: learns of a Change List only through a framework notification; ignores other sets', async (t) => {
    await withTempDir(async (dir) => {
      const src = await startSource(dir);
      const copy = join(dir, 'copy');
      const f = follow(src.baseUrl, copy, { catchUpIntervalMs: 3_600_000 });
      try {
        const following = await f.log.waitFor((e) => e.event === 'following', 10_000, 'following');
        assert.deepEqual(following.transports, ['change', 'framework']);
        const urls = src.wired.notifier.urls('default');
        assert.deepEqual(following.channels, { change: urls.changeChannel, framework: urls.frameworkChannel });
        assert.equal(following.frameworkCatchUpIntervalMs, 3_600_000);
        await waitCaughtUp(f.log, ['connected: change', 'connected: framework']);
        await waitForCopy(copy, 'a.txt', 'alpha');

        await settle(f.log); // what the connection catch-ups caused (documents regenerated, announced) is over
        // Changes recorded while change notifications are suppressed: only the Change Lists have them, and with
        // a poll interval of an hour only a framework notification can tell the follower.
        src.suppress = true;
        for (const name of ['b', 'c', 'd']) {
          await writeFile(join(src.col, `${name}.txt`), name);
          await src.site.scanPaths([`${name}.txt`]);
        }
        const runsBefore = caughtUps(f.log).length;
        const eventsBefore = f.log.events.length;
        await src.regenerateChangeList(); // rotates (2 entries per Change List): a Change List created
        const t0 = Date.now();
        await waitForCopy(copy, 'd.txt', 'd');
        const learnedMs = Date.now() - t0;
        await waitForCopy(copy, 'b.txt', 'b');
        // The rotation is announced too (a Change List created, under the index); the catch-up that the first
        // framework notification triggered may already have read it.
        const isNewList = (e: Line): boolean =>
          e.event === 'framework' &&
          e.action === 'catch-up' &&
          (e.documents as { capability: string; change: string }[]).some(
            (d) => d.capability === 'changelist' && d.change === 'created',
          );
        await f.log.waitFor((e) => isNewList(e) && f.log.events.indexOf(e) >= eventsBefore, 10_000, 'new Change List');
        // The run that installed them has reported by now or soon.
        await f.log.waitFor((e) => e.event === 'caught-up' && caughtUps(f.log).indexOf(e) >= runsBefore);
        const runs = caughtUps(f.log).slice(runsBefore);
        assert.ok(
          runs.every((r) => (r.reasons as string[]).every((x) => x.startsWith('framework:'))),
          `only framework-triggered catch-ups since: ${JSON.stringify(runs)}`,
        );
        assert.ok(
          !f.log.events.some((e) => e.event === 'applied' && e.operation === 'notification'),
          'nothing came as a change notification',
        );

        // Another set's notification (its `up`), and ours about another set's Capability List: nothing to do.
        // (Catch-ups keep happening meanwhile: each run reads the Change List and Change Dump, which the Source
        // regenerates and announces. So the check is on what triggered each run, not on their number.)
        await settle(f.log);
        const other = 'http://other.test/resourcesync/other/capabilitylist.xml';
        const foreign: FrameworkChange = {
          uri: 'http://other.test/resourcesync/other/changelist.xml',
          capability: 'changelist',
          change: 'updated',
        };
        src.publishFramework(createFrameworkNotification([foreign], other));
        src.publishFramework(
          createFrameworkNotification(
            [{ uri: other, capability: 'capabilitylist', change: 'created' }],
            urls.capabilityList,
          ),
        );
        const ignored = await f.log.waitFor(
          (e) => e.event === 'framework' && String(e.reason).includes('another set'),
          10_000,
          'ignored',
        );
        assert.equal(ignored.action, 'ignore');
        const ignored2 = await f.log.waitFor((e) => e.event === 'framework' && e.reason === 'nothing of this set');
        assert.equal(ignored2.action, 'ignore');
        // Then ours (arriving after them on the same channel): whatever run follows covers every trigger since
        // the previous run, and none of them is another set's.
        const runsAtForeign = caughtUps(f.log).length;
        await writeFile(join(src.col, 'e.txt'), 'echo');
        await src.site.scanPaths(['e.txt']);
        await src.regenerateChangeList();
        await waitForCopy(copy, 'e.txt', 'echo');
        await f.log.waitFor((e) => e.event === 'caught-up' && caughtUps(f.log).indexOf(e) >= runsAtForeign);
        await settle(f.log);
        const reasons = caughtUps(f.log).flatMap((r) => r.reasons as string[]);
        assert.ok(
          !reasons.some((r) => r.includes('other.test') || r.includes('nothing of this set')),
          `no catch-up for another set: ${JSON.stringify(reasons)}`,
        );

        // Our Capability List deleted: reported clearly, the copy kept, still following.
        src.publishFramework(
          createFrameworkNotification(
            [{ uri: urls.capabilityList, capability: 'capabilitylist', change: 'deleted' }],
            urls.capabilityList,
          ),
        );
        const deleted = await f.log.waitFor((e) => e.event === 'set-deleted', 10_000, 'set-deleted');
        assert.equal(deleted.capabilityList, urls.capabilityList);
        await f.log.waitFor((e) => String(e.stderr).includes('deleted the Capability List'), 10_000, 'warning');
        assert.equal(await readCopy(copy, 'a.txt'), 'alpha');

        assert.equal(await f.stop(), 0);
        const stopped = f.log.events.find((e) => e.event === 'stopped')!;
        assert.deepEqual(stopped.transports, ['change', 'framework']);
        assert.ok(Number(stopped.frameworkNotifications) >= 5, JSON.stringify(stopped));
        assert.ok(Number(stopped.frameworkCatchUps) >= 2, JSON.stringify(stopped));
        assert.ok(Number(stopped.frameworkIgnored) >= 2, JSON.stringify(stopped));
        t.diagnostic(
          `Change List regenerated -> framework notification -> catch-up -> file in the copy: ${learnedMs} ms`,
        );
      } finally {
        await f.stop();
        await src.close();
      }
    });
  });

  it('WebSub (--callback): both topics through one callback URL; the framework topic alone delivers', async () => {
    await withTempDir(async (dir) => {
      const src = await startSource(dir, { hub: true });
      const copy = join(dir, 'copy');
      const cbPort = await freePort();
      const f = follow(src.baseUrl, copy, {
        callback: `http://127.0.0.1:${cbPort}/cb/f1`,
        catchUpIntervalMs: 400,
        frameworkCatchUpIntervalMs: 3_600_000,
      });
      try {
        const following = await f.log.waitFor((e) => e.event === 'following', 10_000, 'following');
        const urls = src.wired.notifier.urls('default');
        assert.equal(following.transport, 'websub');
        assert.deepEqual(following.channels, { change: urls.changeTopic, framework: urls.frameworkTopic });
        await waitCaughtUp(f.log, ['connected: change', 'connected: framework']);
        await waitForCopy(copy, 'a.txt', 'alpha');
        // Both subscriptions are at the hub, with callbacks on the one port.
        const subs = [urls.changeTopic, urls.frameworkTopic].map((t) => src.wired.hub!.subscriptions(t));
        assert.deepEqual(
          subs.map((s) => s.length),
          [1, 1],
        );
        // The router answers only the two callback paths.
        const stray = await fetch(`http://127.0.0.1:${cbPort}/cb/other`);
        assert.equal(stray.status, 404);
        await stray.text();

        // A change notification still goes straight to the copy.
        await writeFile(join(src.col, 'b.txt'), 'bravo');
        await src.site.scanPaths(['b.txt']);
        await waitForCopy(copy, 'b.txt', 'bravo');

        src.suppress = true;
        await writeFile(join(src.col, 'c.txt'), 'charlie');
        await src.site.scanPaths(['c.txt']);
        const runsBefore = caughtUps(f.log).length;
        await src.regenerateChangeList();
        await waitForCopy(copy, 'c.txt', 'charlie');
        await f.log.waitFor((e) => e.event === 'caught-up' && caughtUps(f.log).indexOf(e) >= runsBefore);
        const runs = caughtUps(f.log).slice(runsBefore);
        assert.ok(
          runs.length >= 1 && runs.every((r) => (r.reasons as string[]).every((x) => x.startsWith('framework:'))),
          JSON.stringify(runs),
        );
        // With the framework topic verified the poll is the hour-long safety net, not the 400 ms one.
        assert.ok(
          !runs.some((r) => (r.reasons as string[]).includes('safety net')),
          `no short poll while framework notifications are up: ${JSON.stringify(runs)}`,
        );
        assert.equal(await f.stop(), 0);
        const stopped = f.log.events.find((e) => e.event === 'stopped')!;
        assert.ok(Number(stopped.frameworkNotifications) >= 1 && Number(stopped.frameworkCatchUps) >= 1);
      } finally {
        await f.stop();
        await src.close();
      }
    });
  });

  it('a Source restart: the framework channel reconnects (catch-up) and delivers again', async () => {
    await withTempDir(async (dir) => {
      let src = await startSource(dir);
      const port = Number(new URL(src.baseUrl).port);
      const copy = join(dir, 'copy');
      const f = follow(src.baseUrl, copy, { catchUpIntervalMs: 3_600_000 });
      try {
        await waitCaughtUp(f.log, ['connected: change', 'connected: framework']);
        await src.close();
        await f.log.waitFor((e) => e.event === 'disconnected' && e.transport === 'framework', 10_000, 'disconnected');
        src = await startSource(dir, { port });
        await f.log.waitFor((e) => e.event === 'reconnected' && e.transport === 'framework', 10_000, 'reconnected');
        await waitCaughtUp(f.log, ['reconnected: change', 'reconnected: framework']);
        await settle(f.log);
        src.suppress = true;
        await writeFile(join(src.col, 'b.txt'), 'bravo');
        await src.site.scanPaths(['b.txt']);
        const runsBefore = caughtUps(f.log).length;
        await src.regenerateChangeList();
        await waitForCopy(copy, 'b.txt', 'bravo');
        await f.log.waitFor((e) => e.event === 'caught-up' && caughtUps(f.log).indexOf(e) >= runsBefore);
        const reasons = caughtUps(f.log)
          .slice(runsBefore)
          .flatMap((r) => r.reasons as string[]);
        assert.ok(reasons.length > 0 && reasons.every((r) => r.startsWith('framework:')), JSON.stringify(reasons));
        assert.equal(await f.stop(), 0);
      } finally {
        await f.stop();
        await src.close();
      }
    });
  });

  it('without an advertised framework channel: change channel only, polling every 60 s by default', async () => {
    await withTempDir(async (dir) => {
      const src = await startSource(dir, { advertiseFramework: false });
      const copy = join(dir, 'copy');
      const f = follow(src.baseUrl, copy);
      try {
        const following = await f.log.waitFor((e) => e.event === 'following', 10_000, 'following');
        assert.deepEqual(following.transports, ['change']);
        assert.equal(following.catchUpIntervalMs, 60_000);
        assert.equal(following.frameworkCatchUpIntervalMs, undefined);
        await waitCaughtUp(f.log, ['connected: change']);
        await writeFile(join(src.col, 'b.txt'), 'bravo');
        await src.site.scanPaths(['b.txt']);
        await waitForCopy(copy, 'b.txt', 'bravo');
        assert.equal(await f.stop(), 0);
        assert.equal(f.log.events.find((e) => e.event === 'stopped')!.frameworkNotifications, 0);
      } finally {
        await f.stop();
        await src.close();
      }
    });
  });
});
