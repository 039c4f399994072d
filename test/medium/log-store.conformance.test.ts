import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppError } from '../../src/domain/errors.js';
import type { CollectionCursor, LogBatch, LogEntry, LogLine, LogPage, LogStore } from '../../src/domain/logs.js';
import { LogWriter } from '../../src/modules/logs/log-writer.js';
import { openLogStore, sqliteLogFile } from '../../src/store/logs/open.js';
import { createStore, type Store } from '../../src/store/db.js';
import { freshDatabase, STORE_KINDS, type TestDatabase } from '../factories/stores.js';

/**
 * What the log API, the live tail and the collector rely on from a log store, checked on every
 * driver: a new driver (a dedicated log engine) must pass this file unchanged.
 */
describe.each(STORE_KINDS)('log store conformance on %s', (kind) => {
  let database: TestDatabase;
  let store: Store;
  let logs: LogStore;
  let n = 0;
  const fresh = (p: string) => `${p}-${(n++).toString().padStart(4, '0')}`;
  const T0 = Date.parse('2026-11-26T10:00:00.000Z');
  const DAY = 86_400_000;

  beforeAll(async () => {
    database = await freshDatabase(kind);
    store = await createStore(database.url);
    logs = openLogStore(store, sqliteLogFile(database.url));
  });
  afterAll(async () => {
    await logs.close();
    await store.close();
    await database.drop();
  });

  function line(projectId: string, i: number, over: Partial<LogLine> = {}): LogLine {
    return { projectId, workspaceId: 'ws-main', deploymentId: 'dep-1', pod: 'web-1', stream: 'stdout', timestamp: T0 + i * 1000, message: `line ${i.toString()}`, ...over };
  }
  const lines = (projectId: string, from: number, count: number, over: Partial<LogLine> = {}) =>
    Array.from({ length: count }, (_, i) => line(projectId, from + i, over));
  const ids = (entries: readonly LogEntry[]) => entries.map((e) => e.id);
  const range = (a: number, b: number) => (a <= b ? Array.from({ length: b - a + 1 }, (_, i) => a + i) : Array.from({ length: a - b + 1 }, (_, i) => a - i));
  async function code(p: Promise<unknown>): Promise<string> {
    try {
      await p;
    } catch (err) {
      return err instanceof AppError ? err.code : String(err);
    }
    return 'resolved';
  }
  async function all(pagesOf: AsyncIterable<LogEntry[]>): Promise<LogEntry[][]> {
    const pages: LogEntry[][] = [];
    for await (const page of pagesOf) pages.push(page);
    return pages;
  }

  it('stores lines and reads them newest first by default, or oldest first', async () => {
    const p = fresh('p');
    await logs.append({ lines: [...lines(p, 1, 4), line(p, 5, { stream: 'stderr', level: 'error', pod: 'web-2', deploymentId: 'dep-2' })] });
    const desc = await logs.query(p, {});
    expect(ids(desc.entries)).toEqual([5, 4, 3, 2, 1]);
    expect(desc.nextCursor).toBeNull();
    expect(desc.entries[0]).toEqual({ id: 5, timestamp: T0 + 5000, deploymentId: 'dep-2', pod: 'web-2', stream: 'stderr', message: 'line 5', level: 'error' });
    expect(desc.entries[1]).toEqual({ id: 4, timestamp: T0 + 4000, deploymentId: 'dep-1', pod: 'web-1', stream: 'stdout', message: 'line 4', level: null });
    const asc = await logs.query(p, { direction: 'asc' });
    expect(asc.entries.map((e) => e.message)).toEqual(['line 1', 'line 2', 'line 3', 'line 4', 'line 5']);
    expect((await logs.query(fresh('unknown'), {})).entries).toEqual([]);
  });

  it('gives ids that grow per project in the order the lines were stored', async () => {
    const a = fresh('p');
    const b = fresh('p');
    // timestamps out of order: the id follows storage, not the clock
    await logs.append({ lines: [line(a, 9), line(b, 1), line(a, 2), line(b, 7)] });
    await logs.append({ lines: [line(b, 3), line(a, 1)] });
    expect((await logs.query(a, { direction: 'asc' })).entries.map((e) => [e.id, e.timestamp])).toEqual([[1, T0 + 9000], [2, T0 + 2000], [3, T0 + 1000]]);
    expect(ids((await logs.query(b, { direction: 'asc' })).entries)).toEqual([1, 2, 3]);
  });

  it('filters by time, deployment, stream and text, alone and together', async () => {
    const p = fresh('p');
    await logs.append({
      lines: [
        line(p, 1, { message: 'boot ok' }),
        line(p, 2, { stream: 'stderr', message: 'warn: slow' }),
        line(p, 3, { deploymentId: 'dep-2', message: 'boot ok again' }),
        line(p, 4, { deploymentId: 'dep-2', stream: 'stderr', message: 'error: boom' }),
        line(p, 5, { stream: 'build', message: 'step 1/3' }),
      ],
    });
    const msgs = async (f: Parameters<LogStore['query']>[1]) => (await logs.query(p, { direction: 'asc', ...f })).entries.map((e) => e.message);
    expect(await msgs({ start: T0 + 2000, end: T0 + 4000 })).toEqual(['warn: slow', 'boot ok again']);
    expect(await msgs({ start: T0 + 4000 })).toEqual(['error: boom', 'step 1/3']);
    expect(await msgs({ end: T0 + 2000 })).toEqual(['boot ok']);
    expect(await msgs({ deploymentId: 'dep-2' })).toEqual(['boot ok again', 'error: boom']);
    expect(await msgs({ deploymentId: 'dep-none' })).toEqual([]);
    expect(await msgs({ stream: 'stderr' })).toEqual(['warn: slow', 'error: boom']);
    expect(await msgs({ stream: 'build' })).toEqual(['step 1/3']);
    expect(await msgs({ q: 'boot' })).toEqual(['boot ok', 'boot ok again']);
    expect(await msgs({ q: 'BOOT', deploymentId: 'dep-2', stream: 'stdout', start: T0 + 3000, end: T0 + 3001 })).toEqual(['boot ok again']);
    expect(await msgs({ q: 'boot', stream: 'stderr' })).toEqual([]);
    expect(await msgs({ q: '' })).toHaveLength(5);
  });

  it('searches case-insensitively, with % and _ as plain characters', async () => {
    const p = fresh('p');
    const texts = ['100% done', '100 percent', 'a_b', 'axb', 'Hello WORLD', 'C:\\path\\x', 'quote \' here'];
    await logs.append({ lines: texts.map((message, i) => line(p, i, { message })) });
    const q = async (text: string) => (await logs.query(p, { direction: 'asc', q: text })).entries.map((e) => e.message);
    expect(await q('%')).toEqual(['100% done']);
    expect(await q('0%')).toEqual(['100% done']);
    expect(await q('_')).toEqual(['a_b']);
    expect(await q('a_b')).toEqual(['a_b']);
    expect(await q('world')).toEqual(['Hello WORLD']);
    expect(await q('hELLO w')).toEqual(['Hello WORLD']);
    expect(await q('\\path\\')).toEqual(['C:\\path\\x']);
    expect(await q("' h")).toEqual(["quote ' here"]);
  });

  it('pages with a cursor, without gaps or repeats while lines are appended', async () => {
    const p = fresh('p');
    await logs.append({ lines: lines(p, 1, 25) });
    const seen: number[] = [];
    let cursor: string | undefined;
    let appended = 25;
    for (;;) {
      // a page and an append at the same time
      const page: LogPage = (await Promise.all([logs.query(p, { limit: 10, cursor }), logs.append({ lines: lines(p, ++appended, 1) })]))[0];
      seen.push(...ids(page.entries));
      if (page.nextCursor === null) break;
      cursor = page.nextCursor;
    }
    // newest first: the first page started at 25 or 26, and every page went on below it
    expect(seen).toEqual(range(seen[0] ?? 0, 1));
    expect([25, 26]).toContain(seen[0]);

    const forward: number[] = [];
    cursor = undefined;
    for (let i = 0; i < 100; i++) {
      const more = i < 3 ? lines(p, appended + 1, 2) : [];
      appended += more.length;
      const page: LogPage = (await Promise.all([logs.query(p, { limit: 7, direction: 'asc', cursor }), logs.append({ lines: more })]))[0];
      forward.push(...ids(page.entries));
      if (page.nextCursor === null) break;
      cursor = page.nextCursor;
    }
    expect(forward).toEqual(range(1, appended));
    const u = await logs.usage(p);
    expect(u.lines).toBe(appended);
  });

  it('refuses a bad limit, filter or cursor', async () => {
    const p = fresh('p');
    await logs.append({ lines: lines(p, 1, 3) });
    for (const limit of [0, 1001, 1.5]) expect(await code(logs.query(p, { limit }))).toBe('INVALID');
    expect(ids((await logs.query(p, { limit: 1000 })).entries)).toEqual([3, 2, 1]);
    expect(await code(logs.query(p, { cursor: 'not a cursor' }))).toBe('INVALID');
    expect(await code(logs.query(p, { cursor: Buffer.from('d!').toString('base64url') }))).toBe('INVALID');
    const asc = await logs.query(p, { limit: 1, direction: 'asc' });
    expect(asc.nextCursor).not.toBeNull();
    expect(await code(logs.query(p, { cursor: asc.nextCursor ?? '', direction: 'desc' }))).toBe('INVALID');
    expect(ids((await logs.query(p, { cursor: asc.nextCursor ?? '', direction: 'asc' })).entries)).toEqual([2, 3]);
    expect(await code(logs.query(p, { q: 'x'.repeat(257) }))).toBe('INVALID');
    expect(await code(logs.query(p, { start: 1.5 }))).toBe('INVALID');
    expect(await code(logs.query(p, { stream: 'stdin' as 'stdout' }))).toBe('INVALID');
    expect(await code(logs.tail(p, 0))).toBe('INVALID');
  });

  it('streams every matching entry page by page, for downloads', async () => {
    const p = fresh('p');
    await logs.append({ lines: [...lines(p, 1, 1200), ...lines(p, 1201, 1300, { stream: 'stderr' })] });
    const pages = await all(logs.stream(p, {}, 1000));
    expect(pages.map((pg) => pg.length)).toEqual([1000, 1000, 500]);
    expect(pages.flat().map((e) => e.id)).toEqual(range(2500, 1));
    const errs = await all(logs.stream(p, { stream: 'stderr', direction: 'asc' }, 1000));
    expect(errs.map((pg) => pg.length)).toEqual([1000, 300]);
    expect(errs.flat().map((e) => e.id)).toEqual(range(1201, 2500));
    expect(await all(logs.stream(p, { q: 'nothing like this' }))).toEqual([]);
  });

  it('tails the newest lines, then goes on after an id or from a time', async () => {
    const p = fresh('p');
    await logs.append({ lines: [...lines(p, 1, 6), line(p, 7, { stream: 'stderr' })] });
    const tail = await logs.tail(p, 3);
    expect(ids(tail)).toEqual([5, 6, 7]);
    expect(ids(await logs.tail(p, 100))).toEqual(range(1, 7));
    expect(ids(await logs.tail(p, 2, { stream: 'stdout' }))).toEqual([5, 6]);
    expect(await logs.after(p, { afterId: 7 }, 10)).toEqual([]);
    await logs.append({ lines: lines(p, 8, 3) });
    expect(ids(await logs.after(p, { afterId: 7 }, 10))).toEqual([8, 9, 10]);
    expect(ids(await logs.after(p, { afterId: 7 }, 2))).toEqual([8, 9]);
    expect(ids(await logs.after(p, { afterId: 0 }, 3, { stream: 'stderr' }))).toEqual([7]);
    expect(ids(await logs.after(p, { since: T0 + 9000 }, 10))).toEqual([9, 10]);
    expect(ids(await logs.after(p, { since: T0 + 2000 }, 10, { start: T0 + 6000, end: T0 + 8000 }))).toEqual([6, 7]);
  });

  it('counts usage exactly: bytes, lines, oldest, newest and dropped lines', async () => {
    const p = fresh('p');
    expect(await logs.usage(p)).toEqual({ bytes: 0, lines: 0, oldest: null, newest: null, droppedLines: 0 });
    const messages = ['héllo ✓', 'plain', '日本語のログ', 'emoji 🚀 here'];
    await logs.append({ lines: messages.map((message, i) => line(p, [5, 1, 9, 3][i] ?? 0, { message })) });
    await logs.append({ lines: [], dropped: [{ projectId: p, workspaceId: 'ws-main', lines: 4 }] });
    await logs.append({ lines: [line(p, 2, { message: 'nul\u0000byte' }), line(p, 4, { message: 'y'.repeat(20_000) })], dropped: [{ projectId: p, workspaceId: 'ws-main', lines: 1 }] });
    const stored = (await logs.query(p, { direction: 'asc' })).entries;
    expect(stored[4]?.message).toBe('nulbyte');
    expect(stored[5]?.message.length).toBeLessThan(20_000);
    const bytes = stored.reduce((s, e) => s + Buffer.byteLength(e.message), 0);
    expect(await logs.usage(p)).toEqual({ bytes, lines: 6, oldest: T0 + 1000, newest: T0 + 9000, droppedLines: 5 });
    expect(bytes).toBe(messages.reduce((s, m) => s + Buffer.byteLength(m), 0) + 7 + Buffer.byteLength(stored[5]?.message ?? ''));
  });

  it('enforces retention per workspace, and drops the logs of a workspace that is gone', async () => {
    const [a, b, c] = [fresh('p'), fresh('p'), fresh('p')];
    const now = new Date(T0 + 30 * DAY);
    const aged = (projectId: string, workspaceId: string) =>
      [10, 3, 0.5, 0].map((daysAgo, i) => line(projectId, 0, { workspaceId, timestamp: now.getTime() - daysAgo * DAY, message: `m${i.toString()}` }));
    const [wa, wb, wc] = [fresh('ws'), fresh('ws'), fresh('ws')];
    // retention looks at every project: the earlier tests' go first (and deleting a workspace is tested on the way)
    await logs.deleteWorkspace('ws-main');
    await logs.append({ lines: [...aged(a, wa), ...aged(b, wb), ...aged(c, wc)], cursors: [cursor('c-gone', c, wc)] });
    const days = new Map<string, number>([[wa, 1], [wb, 7]]);
    const result = await logs.enforceRetention({ retentionDays: (ws) => days.get(ws) ?? (ws === wc ? null : 7), maxBytesPerProject: null, now });
    expect((await logs.query(a, { direction: 'asc' })).entries.map((e) => e.message)).toEqual(['m2', 'm3']);
    expect((await logs.query(b, { direction: 'asc' })).entries.map((e) => e.message)).toEqual(['m1', 'm2', 'm3']);
    expect((await logs.query(c, {})).entries).toEqual([]);
    expect(await logs.cursors(['c-gone'])).toEqual(new Map());
    expect(result).toEqual({ deletedLines: 2 + 1 + 4, deletedBytes: 2 * 7 });
    expect(await logs.usage(a)).toEqual({ bytes: 4, lines: 2, oldest: now.getTime() - DAY / 2, newest: now.getTime(), droppedLines: 0 });
    expect((await logs.usage(c)).lines).toBe(0);
    // ids go on where they were
    await logs.append({ lines: [line(a, 0, { workspaceId: wa, timestamp: now.getTime() })] });
    expect(ids((await logs.query(a, {})).entries)).toEqual([5, 4, 3]);
  });

  it('caps the size of each project by dropping its oldest lines first', async () => {
    const p = fresh('p');
    const q = fresh('p');
    const now = new Date(T0);
    await logs.append({ lines: [...lines(p, 1, 10, { message: 'x'.repeat(100) }), ...lines(q, 1, 2, { message: 'small' })] });
    const result = await logs.enforceRetention({ retentionDays: () => 365, maxBytesPerProject: 450, now });
    expect(result).toEqual({ deletedLines: 6, deletedBytes: 600 });
    expect(ids((await logs.query(p, { direction: 'asc' })).entries)).toEqual([7, 8, 9, 10]);
    expect(await logs.usage(p)).toMatchObject({ bytes: 400, lines: 4, oldest: T0 + 7000 });
    expect((await logs.usage(q)).lines).toBe(2);
  });

  it('handles projects larger than a deletion chunk and a scan window', async () => {
    const p = fresh('p');
    const ws = fresh('ws');
    const now = new Date(T0 + 100 * DAY);
    const old = lines(p, 0, 25_000, { workspaceId: ws, message: 'old line', timestamp: T0 });
    old[0] = line(p, 0, { workspaceId: ws, message: 'the NEEDLE', timestamp: T0 });
    await logs.append({ lines: old.slice(0, 12_500) });
    await logs.append({ lines: old.slice(12_500) });
    await logs.append({ lines: lines(p, 0, 3, { workspaceId: ws, timestamp: now.getTime(), message: 'new line' }) });
    expect(ids((await logs.query(p, { q: 'needle' })).entries)).toEqual([1]);
    expect(ids((await logs.query(p, { q: 'needle', direction: 'asc' })).entries)).toEqual([1]);
    // the other tests' projects keep their lines (far longer retention) but meet the same cap
    await logs.enforceRetention({ retentionDays: (w) => (w === ws ? 7 : 100_000), maxBytesPerProject: null, now });
    expect(await logs.usage(p)).toMatchObject({ lines: 3, bytes: 24 });
    await logs.enforceRetention({ retentionDays: (w) => (w === ws ? 7 : 100_000), maxBytesPerProject: 16, now });
    expect(await logs.usage(p)).toMatchObject({ lines: 2, bytes: 16 });
    expect(ids(await logs.tail(p, 10))).toEqual([25_002, 25_003]);
  });

  function cursor(containerId: string, projectId: string, workspaceId = 'ws-main', at = 1): CollectionCursor {
    return { containerId, projectId, workspaceId, timestamp: `2026-11-26T10:00:0${at.toString()}.123456789Z`, atTimestamp: at };
  }

  it('deletes the logs and cursors of a project, or of a whole workspace', async () => {
    const [wa, wb] = [fresh('ws'), fresh('ws')];
    const [p1, p2, p3] = [fresh('p'), fresh('p'), fresh('p')];
    await logs.append({
      lines: [...lines(p1, 1, 3, { workspaceId: wa }), ...lines(p2, 1, 2, { workspaceId: wa }), ...lines(p3, 1, 2, { workspaceId: wb })],
      cursors: [cursor('k1', p1, wa), cursor('k2', p2, wa), cursor('k3', p3, wb)],
      dropped: [{ projectId: p1, workspaceId: wa, lines: 2 }],
    });
    await logs.deleteProject(p1);
    expect(await logs.usage(p1)).toEqual({ bytes: 0, lines: 0, oldest: null, newest: null, droppedLines: 0 });
    expect((await logs.query(p1, {})).entries).toEqual([]);
    expect([...(await logs.cursors(['k1', 'k2', 'k3'])).keys()].sort()).toEqual(['k2', 'k3']);
    expect((await logs.usage(p2)).lines).toBe(2);
    await logs.deleteWorkspace(wa);
    expect((await logs.query(p2, {})).entries).toEqual([]);
    expect([...(await logs.cursors(['k1', 'k2', 'k3'])).keys()]).toEqual(['k3']);
    expect(ids((await logs.query(p3, {})).entries)).toEqual([2, 1]);
    await logs.deleteProject(fresh('never-logged'));
  });

  it('writes collection cursors in the same transaction as the lines', async () => {
    const p = fresh('p');
    await logs.append({ lines: lines(p, 1, 2), cursors: [cursor('c1', p), cursor('c2', p)] });
    expect(await logs.cursors(['c1', 'c2', 'c3'])).toEqual(new Map([['c1', cursor('c1', p)], ['c2', cursor('c2', p)]]));
    await logs.append({ lines: lines(p, 3, 1), cursors: [cursor('c1', p, 'ws-main', 2), cursor('c1', p, 'ws-main', 3)] });
    expect((await logs.cursors(['c1'])).get('c1')).toEqual(cursor('c1', p, 'ws-main', 3));

    // the cursor cannot be written: the lines (from a new pod) are not stored either
    const broken = { ...cursor('c1', p, 'ws-main', 4), projectId: null } as unknown as CollectionCursor;
    expect(await code(logs.append({ lines: lines(p, 4, 2, { pod: 'web-9' }), cursors: [broken], dropped: [{ projectId: p, workspaceId: 'ws-main', lines: 7 }] }))).not.toBe('resolved');
    expect((await logs.cursors(['c1'])).get('c1')).toEqual(cursor('c1', p, 'ws-main', 3));
    expect(await logs.usage(p)).toMatchObject({ lines: 3, droppedLines: 0 });
    expect(ids((await logs.query(p, {})).entries)).toEqual([3, 2, 1]);

    await logs.append({ lines: lines(p, 4, 1, { pod: 'web-9' }), cursors: [cursor('c1', p, 'ws-main', 5)] });
    expect((await logs.query(p, { limit: 1 })).entries[0]).toMatchObject({ id: 4, pod: 'web-9' });
    await logs.forgetCursors(['c1', 'c-unknown']);
    expect([...(await logs.cursors(['c1', 'c2'])).keys()]).toEqual(['c2']);
  });

  describe('the batching writer', () => {
    /** A store whose appends wait until released, recording each batch. */
    function gated(): { store: Pick<LogStore, 'append'>; batches: LogBatch[]; hold(): void; release(): void; fail: { next: boolean } } {
      let open: () => void = () => undefined;
      let gate = Promise.resolve();
      const batches: LogBatch[] = [];
      const fail = { next: false };
      return {
        batches,
        fail,
        hold: () => {
          gate = new Promise((r) => (open = r));
        },
        release: () => {
          open();
        },
        store: {
          append: async (batch) => {
            await gate;
            if (fail.next) {
              fail.next = false;
              throw new Error('store down');
            }
            batches.push(batch);
            await logs.append(batch);
          },
        },
      };
    }

    it('batches lines and stores each container cursor with its lines', async () => {
      const p = fresh('p');
      const g = gated();
      const writer = new LogWriter({ logs: g.store, flushEveryMs: 3_600_000, maxBatchLines: 4 });
      const stored: string[] = [];
      const w2 = new LogWriter({ logs: g.store, flushEveryMs: 3_600_000, maxBatchLines: 4, onStored: (ps) => stored.push(...ps) });
      for (let i = 0; i < 3; i++) expect(writer.write(lines(p, i * 3 + 1, 3), cursor('w1', p, 'ws-main', i + 1))).toBe(3);
      await writer.flush();
      expect(writer.buffered).toBe(0);
      expect(g.batches.length).toBeGreaterThanOrEqual(2);
      for (const b of g.batches) expect(b.lines.length).toBeLessThanOrEqual(4);
      // a cursor only ever travels with the lines before it
      for (const b of g.batches) for (const c of b.cursors ?? []) expect(b.lines.at(-1)?.timestamp).toBe(T0 + c.atTimestamp * 3000);
      expect((await logs.query(p, { direction: 'asc' })).entries.map((e) => e.timestamp)).toEqual(range(1, 9).map((i) => T0 + i * 1000));
      expect((await logs.cursors(['w1'])).get('w1')).toEqual(cursor('w1', p, 'ws-main', 3));
      w2.write(lines(p, 10, 1));
      await w2.close();
      expect(stored).toEqual([p]);
      expect(() => w2.write(lines(p, 11, 1))).toThrow();
      await writer.close();
    });

    it('drops what does not fit, counts it per project and never waits for the store', async () => {
      const p = fresh('p');
      const g = gated();
      g.hold();
      const writer = new LogWriter({ logs: g.store, flushEveryMs: 3_600_000, maxBatchLines: 2, maxBufferedLines: 5 });
      expect(writer.write(lines(p, 1, 3))).toBe(3); // a batch of 3 goes out and waits at the gate
      expect(writer.buffered).toBe(3);
      expect(writer.write(lines(p, 4, 4), cursor('d1', p))).toBe(2);
      expect(writer.write(lines(p, 8, 1))).toBe(0);
      expect(writer.droppedLines).toBe(3);
      expect(writer.buffered).toBe(5);
      g.release();
      await writer.flush();
      expect(await logs.usage(p)).toMatchObject({ lines: 5, droppedLines: 3 });
      expect((await logs.query(p, { direction: 'asc' })).entries.map((e) => e.message)).toEqual(['line 1', 'line 2', 'line 3', 'line 4', 'line 5']);
      expect((await logs.cursors(['d1'])).get('d1')).toEqual(cursor('d1', p));
    });

    it('keeps a batch that failed and stores it once later', async () => {
      const p = fresh('p');
      const g = gated();
      const errors: unknown[] = [];
      const writer = new LogWriter({ logs: g.store, flushEveryMs: 3_600_000, maxBatchLines: 100, onError: (e) => errors.push(e) });
      writer.write(lines(p, 1, 3));
      g.fail.next = true;
      expect(await code(writer.flush())).not.toBe('resolved');
      expect(writer.buffered).toBe(3);
      await writer.flush();
      expect(ids((await logs.query(p, { direction: 'asc' })).entries)).toEqual([1, 2, 3]);
      expect((await logs.usage(p)).lines).toBe(3);
    });
  });
});
