/**
 * The runtime log port: where the lines of the apps' containers (and, later, of builds) are kept
 * and how they are read back. Drivers: src/store/logs/sqlite.log-store.ts (the embedded default) and
 * src/store/logs/postgres.log-store.ts (multi-replica installs); each passes
 * test/medium/log-store.conformance.test.ts. A driver for a dedicated log engine implements the
 * same interface. Layout and measurements: docs/logs.md.
 */

/** `build`: a deployment's build output (src/modules/deployments/build-log.ts, docs/logs.md#build-lines); collection writes the other two. */
export type LogStreamKind = 'stdout' | 'stderr' | 'build';
export const LOG_STREAMS: readonly LogStreamKind[] = ['stdout', 'stderr', 'build'];

/** One line as the collector hands it over. */
export interface LogLine {
  projectId: string;
  /** the project's workspace: retention and deletion go by workspace */
  workspaceId: string;
  deploymentId: string;
  /** the container (replica) the line came from, as pods are named */
  pod: string;
  stream: LogStreamKind;
  /** Unix milliseconds, as the engine stamped the line */
  timestamp: number;
  message: string;
  level?: string | null | undefined;
}

/** A stored line. */
export interface LogEntry {
  /** increases per project in the order lines were stored: "after id X" is exact */
  id: number;
  timestamp: number;
  deploymentId: string;
  pod: string;
  stream: LogStreamKind;
  message: string;
  level: string | null;
}

/** Where the collection of one container stands, stored in the same transaction as its lines. */
export interface CollectionCursor {
  containerId: string;
  projectId: string;
  workspaceId: string;
  /**
   * Where collection stands, opaque to the store: the collector writes one position per stream,
   * `stdout=<engine stamp>#<n> stderr=<engine stamp>#<n>` (src/modules/logs/collector.ts); a plain
   * engine stamp means both streams
   */
  timestamp: string;
  /** how many lines carrying exactly the position's stamp(s) are stored (a restart skips as many) */
  atTimestamp: number;
}

/** Lines the writer could not keep (its buffer was full), counted in the project's usage. */
export interface DroppedLines {
  projectId: string;
  workspaceId: string;
  lines: number;
}

export interface LogBatch {
  lines: readonly LogLine[];
  cursors?: readonly CollectionCursor[] | undefined;
  dropped?: readonly DroppedLines[] | undefined;
}

/** Every field narrows; absent fields do not. */
export interface LogFilter {
  /** Unix ms, inclusive */
  start?: number | undefined;
  /** Unix ms, exclusive */
  end?: number | undefined;
  deploymentId?: string | undefined;
  stream?: LogStreamKind | undefined;
  /** a case-insensitive substring of the message; `%` and `_` are plain characters */
  q?: string | undefined;
}

export type LogDirection = 'asc' | 'desc';

export interface LogPageRequest extends LogFilter {
  /** 1..1000, default 100 */
  limit?: number | undefined;
  /** by id, that is storage order; default `desc` (newest first) */
  direction?: LogDirection | undefined;
  /** a page's `nextCursor`; it carries its direction and must be used with the same filters */
  cursor?: string | undefined;
}

export interface LogPage {
  entries: LogEntry[];
  /** null when no entry follows (at the time of the query) */
  nextCursor: string | null;
}

/** Where a live stream resumes: after a stored id, or from a time on. */
export type LogPosition = { afterId: number } | { since: number };

export interface LogUsage {
  /** UTF-8 bytes of the stored messages */
  bytes: number;
  lines: number;
  /** Unix ms of the oldest and newest stored line, null without lines */
  oldest: number | null;
  newest: number | null;
  droppedLines: number;
}

export interface RetentionPolicy {
  /** the workspace's `log_retention_days`; null when the workspace is gone (its logs go too) */
  retentionDays(workspaceId: string): number | null | Promise<number | null>;
  /** per project; the oldest lines go first. null: no cap */
  maxBytesPerProject: number | null;
  now: Date;
}

export interface RetentionResult {
  deletedLines: number;
  deletedBytes: number;
}

export interface LogStore {
  /** `sqlite` or `postgres`, for logs and metrics */
  readonly driver: string;
  /**
   * Stores the lines, advances the cursors and counts the dropped lines, all in one transaction:
   * after a crash either all of it is stored or none.
   */
  append(batch: LogBatch): Promise<void>;
  /** One page, in the requested order. Throws INVALID for a bad limit, filter or cursor. */
  query(projectId: string, request: LogPageRequest): Promise<LogPage>;
  /** Every matching entry, page by page, in constant memory (downloads). */
  stream(projectId: string, filter: LogFilter & { direction?: LogDirection | undefined }, pageSize?: number): AsyncIterable<LogEntry[]>;
  /** The newest `n` matching entries, oldest first: the start of a live tail. */
  tail(projectId: string, n: number, filter?: LogFilter): Promise<LogEntry[]>;
  /** Up to `limit` matching entries after the position, oldest first: how a live tail goes on. */
  after(projectId: string, position: LogPosition, limit: number, filter?: LogFilter): Promise<LogEntry[]>;
  /** Exact: counters kept in the same transactions as the lines. */
  usage(projectId: string): Promise<LogUsage>;
  /** Drops lines past each workspace's retention and over the per-project size cap. */
  enforceRetention(policy: RetentionPolicy): Promise<RetentionResult>;
  deleteProject(projectId: string): Promise<void>;
  deleteWorkspace(workspaceId: string): Promise<void>;
  /** The stored cursors of these containers (absent: never collected). */
  cursors(containerIds: readonly string[]): Promise<Map<string, CollectionCursor>>;
  /** The containers are gone: their cursors are no longer needed. */
  forgetCursors(containerIds: readonly string[]): Promise<void>;
  close(): Promise<void>;
}
