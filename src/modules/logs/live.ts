import { setImmediate as yieldToLoop } from 'node:timers/promises';
import type pg from 'pg';
import { AppError } from '../../domain/errors.js';
import type { LogEntry, LogFilter, LogPosition, LogStore } from '../../domain/logs.js';
import { LOG_CHANNEL } from '../../store/logs/postgres.log-store.js';

// The live tail (`WS …/live-logs`): one hub per process. Per project with subscribers, one feed
// reads what the store holds past the last line it handed out, once per wake-up for all of that
// project's clients, and hands each line to every client without waiting for any of them. Wake-ups
// come from this process's LogWriter (`notify`), from PostgreSQL's NOTIFY (every replica's
// batches, sent in the batch's transaction), or on SQLite from a light poll (another process on
// the same file). docs/logs.md#live has the guarantees.

export const DEFAULT_TAIL = 100;
export const MAX_TAIL = 1000;
/** Entries one store read takes. */
const PAGE = 1000;

export const tooSlow = (): AppError => new AppError('UNAVAILABLE', 'client too slow');

/** Where a subscription starts. */
export interface LiveStart {
  /** the newest lines sent first, 0..1000 (default 100); not used with `since` */
  tail?: number | undefined;
  /** resume: every stored line after this id, or stamped at or after this time, then the new ones */
  since?: LogPosition | undefined;
}

/** A client's end of a subscription, written to without ever waiting. */
export interface LiveSink {
  /** queues one line; `written` runs once it has left the process (or could not be sent) */
  write(entry: LogEntry, written: () => void): void;
  /** bytes queued for the client and not yet written out */
  readonly bufferedAmount: number;
}

export interface LiveSubscription {
  /** resolves once closed; rejects with tooSlow() when the client fell behind, or when reading its start failed */
  readonly done: Promise<void>;
  close(): void;
}

export interface LiveLogsOptions {
  store: Pick<LogStore, 'tail' | 'after'>;
  /** the PostgreSQL store's URL: replicas announce new lines with NOTIFY, heard on one connection of this hub's */
  postgresUrl?: string | undefined;
  /** without PostgreSQL: how often subscribed projects are read for lines another process stored (default 1 s) */
  pollMs?: number | undefined;
  /** a client with this many lines or bytes waiting to be written out is dropped (defaults 10,000 and 8 MiB) */
  maxClientLines?: number | undefined;
  maxClientBytes?: number | undefined;
  onError?: ((err: unknown) => void) | undefined;
}

function matches(e: LogEntry, f: LogFilter | undefined): boolean {
  if (f === undefined) return true;
  if (f.start !== undefined && e.timestamp < f.start) return false;
  if (f.end !== undefined && e.timestamp >= f.end) return false;
  if (f.deploymentId !== undefined && e.deploymentId !== f.deploymentId) return false;
  if (f.stream !== undefined && e.stream !== f.stream) return false;
  return f.q === undefined || f.q === '' || e.message.toLowerCase().includes(f.q.toLowerCase());
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

class Subscription implements LiveSubscription {
  /** every line up to here has been handed to the sink or skipped by the filter */
  lastId = 0;
  closed = false;
  readonly done: Promise<void>;
  private pending = 0;
  private settle: (err?: Error) => void = () => undefined;
  private readonly written = () => {
    this.pending--;
  };

  constructor(
    private readonly hub: LiveLogs,
    readonly projectId: string,
    private readonly sink: LiveSink,
    readonly filter: LogFilter | undefined,
    private readonly limits: { lines: number; bytes: number },
  ) {
    this.done = new Promise<void>((resolve, reject) => {
      this.settle = (err) => {
        if (err === undefined) resolve();
        else reject(err);
      };
    });
    // whoever holds the subscription may only ever look at `done` after the fact
    this.done.catch(() => undefined);
  }

  /** From the feed, for every client at once: never waits. A client over its bound is dropped. */
  push(entries: readonly LogEntry[]): void {
    for (const e of entries) {
      if (this.closed) return;
      if (e.id <= this.lastId) continue;
      this.lastId = e.id;
      if (!matches(e, this.filter)) continue;
      if (this.pending >= this.limits.lines || this.sink.bufferedAmount >= this.limits.bytes) {
        this.end(tooSlow());
        return;
      }
      this.pending++;
      this.sink.write(e, this.written);
    }
  }

  /** The start, read for this client alone: it may wait for the client to read. */
  async deliver(entries: readonly LogEntry[]): Promise<void> {
    for (const e of entries) {
      while (!this.closed && (this.pending >= this.limits.lines / 2 || this.sink.bufferedAmount >= this.limits.bytes / 2)) await sleep(20);
      this.push([e]);
    }
  }

  /** a method, not the field: it changes while the start is read */
  isClosed(): boolean {
    return this.closed;
  }

  close(): void {
    this.end();
  }

  end(err?: Error): void {
    if (this.closed) return;
    this.closed = true;
    this.hub.leave(this);
    this.settle(err);
  }
}

/** One project's subscribers and the last line handed to them. */
class Feed {
  readonly subs = new Set<Subscription>();
  private reading = false;
  /** the highest id a wake-up during the current read announced (Infinity: unknown) */
  private wanted = 0;
  private retry: NodeJS.Timeout | null = null;

  constructor(
    private readonly store: LiveLogsOptions['store'],
    readonly projectId: string,
    public lastId: number,
    private readonly onError: (err: unknown) => void,
  ) {}

  /** Lines may follow `lastId` (up to `upTo`, when the announcement says). */
  wake(upTo?: number): void {
    if (upTo !== undefined && upTo <= this.lastId) return;
    this.wanted = Math.max(this.wanted, upTo ?? Number.POSITIVE_INFINITY);
    if (!this.reading) void this.read();
  }

  private async read(): Promise<void> {
    this.reading = true;
    try {
      let again: boolean;
      do {
        this.wanted = 0;
        const page = await this.store.after(this.projectId, { afterId: this.lastId }, PAGE);
        const last = page.at(-1);
        if (last !== undefined) this.lastId = last.id;
        for (const sub of [...this.subs]) sub.push(page);
        again = page.length === PAGE || this.wanted > this.lastId;
        // the sockets write out between pages (an SQLite read never leaves the event loop)
        if (again) await yieldToLoop();
      } while (again && this.subs.size > 0);
    } catch (err) {
      // nothing is lost: the next read starts after the last line handed out
      this.onError(err);
      this.retry ??= setTimeout(() => {
        this.retry = null;
        this.wake();
      }, 1000).unref();
    } finally {
      this.reading = false;
    }
  }

  stop(): void {
    if (this.retry !== null) clearTimeout(this.retry);
    this.retry = null;
  }
}

/**
 * The live tail's hub, one per process. `subscribe` sends a client the start it asked for, then
 * every line as it is stored, in the store's id order, with no gap and no repeat. Call `notify`
 * when this process stored lines (the LogWriter's onStored).
 */

/** the pg module, once a LISTEN connection was first wanted */
let pgModule: typeof pg | undefined;

export class LiveLogs {
  private readonly feeds = new Map<string, Feed>();
  private readonly subs = new Set<Subscription>();
  private readonly limits: { lines: number; bytes: number };
  private readonly onError: (err: unknown) => void;
  private poll: NodeJS.Timeout | null = null;
  private listener: pg.Client | null = null;
  private retryMs = 500;
  private closed = false;

  constructor(private readonly options: LiveLogsOptions) {
    this.limits = { lines: options.maxClientLines ?? 10_000, bytes: options.maxClientBytes ?? 8 * 1024 * 1024 };
    this.onError = options.onError ?? (() => undefined);
  }

  /** Lines of the project were stored (up to `lastId`, when known). */
  notify(projectId: string, lastId?: number): void {
    this.feeds.get(projectId)?.wake(lastId);
  }

  subscribe(projectId: string, start: LiveStart, sink: LiveSink, filter?: LogFilter): LiveSubscription {
    if (this.closed) throw new Error('The live log hub is closed.');
    const sub = new Subscription(this, projectId, sink, filter, this.limits);
    this.subs.add(sub);
    this.start(sub, start).catch((err: unknown) => {
      sub.end(err instanceof Error ? err : new Error(String(err)));
    });
    return sub;
  }

  /** Sends the start, then catches up until the project's feed can take the client over. */
  private async start(sub: Subscription, start: LiveStart): Promise<void> {
    const { store } = this.options;
    const { projectId, filter } = sub;
    const since = start.since;
    if (since === undefined) {
      const n = start.tail ?? DEFAULT_TAIL;
      if (n > 0) await sub.deliver(await store.tail(projectId, n, filter));
      else sub.lastId = (await store.tail(projectId, 1)).at(-1)?.id ?? 0;
    } else if ('afterId' in since) {
      sub.lastId = since.afterId;
    } else {
      // stamped at or after the time: lines stored before now with older stamps are not sent
      const newest = (await store.tail(projectId, 1)).at(-1)?.id ?? 0;
      let page = await store.after(projectId, since, PAGE, filter);
      await sub.deliver(page);
      while (page.length === PAGE && !sub.isClosed()) {
        page = await store.after(projectId, { afterId: sub.lastId }, PAGE, { ...filter, start: Math.max(filter?.start ?? since.since, since.since) });
        await sub.deliver(page);
      }
      sub.lastId = Math.max(sub.lastId, newest);
    }
    for (;;) {
      if (sub.isClosed()) return;
      const page = await store.after(projectId, { afterId: sub.lastId }, PAGE);
      await sub.deliver(page);
      if (sub.isClosed() || page.length === PAGE) continue;
      // Caught up with the feed: from here the feed hands it every line after the last one sent.
      const feed = this.feeds.get(projectId);
      if (feed === undefined) {
        const fresh = new Feed(store, projectId, sub.lastId, this.onError);
        fresh.subs.add(sub);
        this.feeds.set(projectId, fresh);
        this.started();
        // lines stored since the last read were announced to no feed
        fresh.wake();
        return;
      }
      if (sub.lastId >= feed.lastId) {
        feed.subs.add(sub);
        return;
      }
    }
  }

  /** A subscription ended. */
  leave(sub: Subscription): void {
    this.subs.delete(sub);
    const feed = this.feeds.get(sub.projectId);
    if (feed?.subs.delete(sub) === true && feed.subs.size === 0) {
      feed.stop();
      this.feeds.delete(sub.projectId);
    }
    if (this.feeds.size === 0 && this.poll !== null) {
      clearInterval(this.poll);
      this.poll = null;
    }
  }

  /** A feed exists: make sure something wakes it when another process stores lines. */
  private started(): void {
    if (this.options.postgresUrl !== undefined) {
      this.listen();
      return;
    }
    this.poll ??= setInterval(() => {
      for (const feed of this.feeds.values()) feed.wake();
    }, this.options.pollMs ?? 1000).unref();
  }

  /** One connection that LISTENs, kept once opened, reconnecting after a failure. */
  private listen(): void {
    const url = this.options.postgresUrl;
    if (url === undefined || this.listener !== null || this.closed) return;
    if (pgModule === undefined) {
      // the driver is loaded on PostgreSQL only
      import('pg').then(
        (m) => {
          pgModule = m.default;
          this.listen();
        },
        (err: unknown) => {
          this.onError(err);
        },
      );
      return;
    }
    const client = new pgModule.Client({ connectionString: url });
    this.listener = client;
    client.on('notification', (m) => {
      // `<project id> <last id>`
      const [projectId, lastId] = (m.payload ?? '').split(' ');
      if (m.channel === LOG_CHANNEL && projectId !== undefined) this.notify(projectId, Number(lastId));
    });
    client.on('error', (err) => {
      this.lost(client, err);
    });
    client.on('end', () => {
      this.lost(client);
    });
    client
      .connect()
      .then(() => client.query(`LISTEN ${LOG_CHANNEL}`))
      .then(
        () => {
          this.retryMs = 500;
          // whatever was stored while nobody listened
          for (const feed of this.feeds.values()) feed.wake();
        },
        (err: unknown) => {
          this.lost(client, err);
        },
      );
  }

  private lost(client: pg.Client, err?: unknown): void {
    if (this.listener !== client) return;
    this.listener = null;
    if (err !== undefined) this.onError(err);
    client.end().catch(() => undefined);
    if (this.closed) return;
    setTimeout(() => {
      this.listen();
    }, this.retryMs).unref();
    this.retryMs = Math.min(this.retryMs * 2, 10_000);
  }

  /** Ends every subscription (its client is told to reconnect) and the LISTEN connection. */
  async close(): Promise<void> {
    this.closed = true;
    for (const sub of [...this.subs]) sub.end(new AppError('UNAVAILABLE', 'The server is shutting down; reconnect to go on.'));
    if (this.poll !== null) clearInterval(this.poll);
    this.poll = null;
    const client = this.listener;
    this.listener = null;
    if (client !== null) await client.end().catch(() => undefined);
  }
}
