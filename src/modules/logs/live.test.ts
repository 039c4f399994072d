import { afterEach, describe, expect, it } from 'vitest';
import type { LogEntry, LogLine } from '../../domain/logs.js';
import { LiveLogs, type LiveSink } from './live.js';
import { SqliteLogStore } from '../../store/logs/sqlite.log-store.js';

const line = (i: number, over: Partial<LogLine> = {}): LogLine => ({
  projectId: 'p1',
  workspaceId: 'w1',
  deploymentId: 'd1',
  pod: 'web-1',
  stream: 'stdout',
  timestamp: 1_700_000_000_000 + i,
  message: `line ${i.toString()}`,
  ...over,
});
const range = (a: number, b: number) => Array.from({ length: b - a + 1 }, (_, i) => a + i);

/** A client whose socket writes out at once, or (held) never. */
function client(held = false): LiveSink & { got: LogEntry[] } {
  const got: LogEntry[] = [];
  return {
    got,
    bufferedAmount: 0,
    write(entry, written) {
      got.push(entry);
      if (!held) written();
    },
  };
}

async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !check(); i++) await new Promise((r) => setTimeout(r, 5));
  expect(check()).toBe(true);
}

describe('LiveLogs', () => {
  const store = new SqliteLogStore(':memory:');
  let live: LiveLogs;
  let reads = 0;
  const counted = {
    tail: store.tail.bind(store),
    after: (...args: Parameters<SqliteLogStore['after']>) => {
      reads++;
      return store.after(...args);
    },
  };
  afterEach(async () => {
    await live.close();
    await store.deleteProject('p1');
  });

  it('reads once per wake-up for all of a project\'s clients, each getting every line once, in order', async () => {
    live = new LiveLogs({ store: counted });
    await store.append({ lines: range(1, 5).map((i) => line(i)) });
    const clients = [client(), client(), client()];
    for (const c of clients) live.subscribe('p1', { tail: 2 }, c);
    await until(() => clients.every((c) => c.got.length === 2));
    // the last client joins the feed right after its start
    await new Promise((r) => setTimeout(r, 20));
    reads = 0;
    await store.append({ lines: range(6, 8).map((i) => line(i)) });
    live.notify('p1');
    live.notify('p1', 8);
    await until(() => clients.every((c) => c.got.length === 5));
    expect(reads).toBe(1);
    for (const c of clients) expect(c.got.map((e) => e.id)).toEqual([4, 5, 6, 7, 8]);
    // an announcement of lines already handed out reads nothing
    live.notify('p1', 8);
    expect(reads).toBe(1);
  });

  it('applies a filter to the start and to new lines', async () => {
    live = new LiveLogs({ store });
    await store.append({ lines: [line(1, { stream: 'stderr' }), line(2), line(3, { stream: 'stderr' })] });
    const c = client();
    live.subscribe('p1', { tail: 10 }, c, { stream: 'stderr' });
    await until(() => c.got.length === 2);
    await new Promise((r) => setTimeout(r, 20));
    await store.append({ lines: [line(4), line(5, { stream: 'stderr' })] });
    live.notify('p1');
    await until(() => c.got.length === 3);
    expect(c.got.map((e) => e.id)).toEqual([1, 3, 5]);
  });

  it('drops a client past its bound without holding up the others', async () => {
    live = new LiveLogs({ store, maxClientLines: 10 });
    const slow = client(true);
    const fast = client();
    const slowSub = live.subscribe('p1', { since: { afterId: 0 } }, slow);
    live.subscribe('p1', { since: { afterId: 0 } }, fast);
    await store.append({ lines: [line(1)] });
    live.notify('p1');
    await until(() => fast.got.length === 1 && slow.got.length === 1);
    await new Promise((r) => setTimeout(r, 20));
    await store.append({ lines: range(2, 30).map((i) => line(i)) });
    live.notify('p1');
    await expect(slowSub.done).rejects.toThrow('client too slow');
    await until(() => fast.got.length === 30);
    expect(slow.got.length).toBe(10);
  });

  it('ends its clients when closed', async () => {
    live = new LiveLogs({ store });
    const sub = live.subscribe('p1', {}, client());
    await live.close();
    await expect(sub.done).rejects.toThrow('The server is shutting down; reconnect to go on.');
  });
});
