import type { LogDirection, LogEntry, LogFilter, LogPage, LogPageRequest, LogPosition } from '../../domain/logs.js';
import { checkCount, checkFilter, encodeCursor, resolvePage } from './log-query.js';

/**
 * Pages, streams, tails and resumptions, the same for every driver: each is a `scan` of the
 * project's lines in id order from a position, which is all a driver has to provide.
 */
export abstract class PagedLogStore {
  /** Up to `limit` lines matching `filter`, in `direction` of id, after (asc) or before (desc) id `from` when given. */
  protected abstract scan(projectId: string, filter: LogFilter, direction: LogDirection, from: number | null, limit: number): Promise<LogEntry[]>;

  async query(projectId: string, request: LogPageRequest): Promise<LogPage> {
    const { limit, direction, from } = resolvePage(request);
    const rows = await this.scan(projectId, request, direction, from, limit + 1);
    const entries = rows.slice(0, limit);
    const last = entries.at(-1);
    return { entries, nextCursor: rows.length > limit && last !== undefined ? encodeCursor(direction, last.id) : null };
  }

  async *stream(projectId: string, filter: LogFilter & { direction?: LogDirection | undefined }, pageSize = 1000): AsyncIterable<LogEntry[]> {
    checkFilter(filter);
    checkCount(pageSize, 'pageSize');
    const direction = filter.direction ?? 'desc';
    let from: number | null = null;
    for (;;) {
      const page = await this.scan(projectId, filter, direction, from, pageSize);
      const last = page.at(-1);
      if (last === undefined) return;
      yield page;
      if (page.length < pageSize) return;
      from = last.id;
    }
  }

  async tail(projectId: string, n: number, filter: LogFilter = {}): Promise<LogEntry[]> {
    checkFilter(filter);
    checkCount(n, 'n');
    return (await this.scan(projectId, filter, 'desc', null, n)).reverse();
  }

  async after(projectId: string, position: LogPosition, limit: number, filter: LogFilter = {}): Promise<LogEntry[]> {
    checkFilter(filter);
    checkCount(limit, 'limit');
    if ('afterId' in position) return this.scan(projectId, filter, 'asc', position.afterId, limit);
    const start = filter.start === undefined ? position.since : Math.max(filter.start, position.since);
    return this.scan(projectId, { ...filter, start }, 'asc', null, limit);
  }
}
