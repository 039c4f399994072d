// What both log store drivers share: the checks of a request, the opaque page cursor, how a line
// is normalised before it is stored, and how a stream code maps to its name.
import { invalid } from '../../domain/errors.js';
import type { LogDirection, LogFilter, LogLine, LogPageRequest, LogStreamKind } from '../../domain/logs.js';

export const DEFAULT_LIMIT = 100;
export const MAX_LIMIT = 1000;
/** Longer messages are cut (the engine splits lines at 16 KiB itself). */
export const MAX_MESSAGE = 16_384;
/** Longer searches are refused: a substring scan is linear in its length. */
export const MAX_Q = 256;
/** Rows one retention or deletion statement removes, so no transaction holds locks for long. */
export const DELETE_CHUNK = 10_000;

const STREAM_CODES: Record<LogStreamKind, number> = { stdout: 0, stderr: 1, build: 2 };
const STREAM_NAMES: readonly LogStreamKind[] = ['stdout', 'stderr', 'build'];

export const streamCode = (s: LogStreamKind): number => STREAM_CODES[s];

export function streamName(code: number): LogStreamKind {
  const name = STREAM_NAMES[code];
  if (name === undefined) throw new Error(`unknown log stream code ${code}`);
  return name;
}

/** A line as it is stored: no NUL (PostgreSQL text refuses it), at most MAX_MESSAGE characters. */
export function storedMessage(message: string): string {
  let m = message.includes('\u0000') ? message.replaceAll('\u0000', '') : message;
  if (m.length > MAX_MESSAGE) {
    // never cut a surrogate pair in two
    const cut = /[\uD800-\uDBFF]/.test(m.charAt(MAX_MESSAGE - 1)) ? MAX_MESSAGE - 1 : MAX_MESSAGE;
    m = `${m.slice(0, cut)}…`;
  }
  return m;
}

export function checkLine(line: LogLine): void {
  if (!(line.stream in STREAM_CODES)) throw invalid(`Unknown log stream ${line.stream}.`);
  if (!Number.isSafeInteger(line.timestamp)) throw invalid('A log line needs an integer timestamp (Unix ms).');
}

export interface Resolved {
  limit: number;
  direction: LogDirection;
  /** the id the page starts after (exclusive), in its direction */
  from: number | null;
}

export function checkFilter(filter: LogFilter): void {
  for (const [name, v] of [['start', filter.start], ['end', filter.end]] as const) {
    if (v !== undefined && !Number.isSafeInteger(v)) throw invalid(`${name} must be an integer (Unix ms).`);
  }
  if (filter.stream !== undefined && !(filter.stream in STREAM_CODES)) throw invalid('stream must be stdout, stderr or build.');
  if (filter.q !== undefined && filter.q.length > MAX_Q) throw invalid(`q is longer than ${MAX_Q} characters.`);
}

export function resolvePage(request: LogPageRequest): Resolved {
  checkFilter(request);
  const limit = request.limit ?? DEFAULT_LIMIT;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT) throw invalid(`limit must be 1..${MAX_LIMIT}.`);
  const direction = request.direction ?? 'desc';
  if (request.cursor === undefined) return { limit, direction, from: null };
  const c = decodeCursor(request.cursor);
  if (c.direction !== direction) throw invalid('The cursor belongs to a page of the other direction.');
  return { limit, direction, from: c.id };
}

/**
 * Opaque to clients: the last id a page returned and its direction. Ids only grow, so the next
 * page is exactly the entries past it, whatever was appended in between.
 */
export const encodeCursor = (direction: LogDirection, id: number): string => Buffer.from(`${direction === 'asc' ? 'a' : 'd'}${id.toString(36)}`).toString('base64url');

function decodeCursor(cursor: string): { direction: LogDirection; id: number } {
  const text = /^[A-Za-z0-9_-]{1,32}$/.test(cursor) ? Buffer.from(cursor, 'base64url').toString('latin1') : '';
  const m = /^([ad])([0-9a-z]{1,12})$/.exec(text);
  const id = m === null ? Number.NaN : Number.parseInt(m[2] ?? '', 36);
  if (m === null || !Number.isSafeInteger(id)) throw invalid('The cursor is not one this server gave out.');
  return { direction: m[1] === 'a' ? 'asc' : 'desc', id };
}

/** A positive page size for the internal scans (tail, after, stream). */
export function checkCount(n: number, what: string): void {
  if (!Number.isInteger(n) || n < 1 || n > 100_000) throw invalid(`${what} must be 1..100000.`);
}

/** Projects sorted by id: batches lock their project rows in this order, so two never deadlock. */
export function byProject<T extends { projectId: string }>(items: readonly T[]): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const g = groups.get(item.projectId);
    if (g === undefined) groups.set(item.projectId, [item]);
    else g.push(item);
  }
  return new Map([...groups].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

export const utf8Bytes = (s: string): number => Buffer.byteLength(s, 'utf8');
