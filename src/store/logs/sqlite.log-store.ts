import { chmodSync, closeSync, existsSync, mkdirSync, openSync } from 'node:fs';
import { dirname } from 'node:path';
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import SQLite from 'better-sqlite3';
import type {
  CollectionCursor,
  LogBatch,
  LogDirection,
  LogEntry,
  LogFilter,
  LogStore,
  LogUsage,
  RetentionPolicy,
  RetentionResult,
} from '../../domain/logs.js';
import { byProject, checkLine, DELETE_CHUNK, storedMessage, streamCode, streamName, utf8Bytes } from './log-query.js';
import { PagedLogStore } from './paged.js';

// The embedded driver: its own database file next to the store's (`<data dir>/logs.db`), so that
// log volume never holds the control plane's write lock, on its own connection with WAL.
// better-sqlite3 is synchronous: every statement here is bounded (a window of ids, a chunk of
// rows) and long work yields to the event loop between them, so a search never stalls the
// collector or the API for long. docs/logs.md has the layout and the measurements behind it.

const SCHEMA = `
create table if not exists log_projects (
  key integer primary key,
  project_id text not null unique,
  workspace_id text not null,
  last_id integer not null default 0,
  lines integer not null default 0,
  bytes integer not null default 0,
  dropped integer not null default 0
);
create index if not exists log_projects_workspace on log_projects (workspace_id);
create table if not exists log_sources (
  key integer primary key,
  project_key integer not null,
  deployment_id text not null,
  pod text not null,
  unique (project_key, deployment_id, pod)
);
create table if not exists log_lines (
  project_key integer not null,
  id integer not null,
  ts integer not null,
  source_key integer not null,
  stream integer not null,
  level text,
  message text not null,
  primary key (project_key, id)
) without rowid;
create index if not exists log_lines_ts on log_lines (project_key, ts);
create table if not exists log_cursors (
  container_id text primary key,
  project_id text not null,
  workspace_id text not null,
  timestamp text not null,
  at_timestamp integer not null
);
create index if not exists log_cursors_project on log_cursors (project_id);
create index if not exists log_cursors_workspace on log_cursors (workspace_id);
`;

/** Ids one scan statement covers at most when a filter may skip most rows. */
const WINDOW = 20_000;
/**
 * The first and smallest windows. A row's cost depends on its message: `instr(lower(m), q)` on a
 * 16 KiB message and a 256-character `q` built to match almost everywhere takes about 0.5 ms, so
 * 20,000 such rows would hold the event loop for 10 s (issue 26). The window starts small and is
 * sized from the time the last statement took, so one statement takes about WINDOW_MS.
 */
const FIRST_WINDOW = 32;
const MIN_WINDOW = 8;
const WINDOW_MS = 5;

/** The next window, from how long the last one took: grows up to ×4 while quick, shrinks in proportion when slow. */
function nextWindow(window: number, tookMs: number): number {
  const scaled = tookMs <= 0 ? window * 4 : Math.floor((window * WINDOW_MS) / tookMs);
  return Math.max(MIN_WINDOW, Math.min(WINDOW, window * 4, scaled));
}

interface LineRow {
  id: number;
  ts: number;
  deployment_id: string;
  pod: string;
  stream: number;
  level: string | null;
  message: string;
}

interface ProjectRow {
  key: number;
  project_id: string;
  workspace_id: string;
  last_id: number;
  lines: number;
  bytes: number;
  dropped: number;
}

const toEntry = (r: LineRow): LogEntry => ({
  id: r.id,
  timestamp: r.ts,
  deploymentId: r.deployment_id,
  pod: r.pod,
  stream: streamName(r.stream),
  message: r.message,
  level: r.level,
});

type Param = string | number | null;

export class SqliteLogStore extends PagedLogStore implements LogStore {
  readonly driver = 'sqlite';
  private readonly db: SQLite.Database;
  private readonly statements = new Map<string, SQLite.Statement>();
  /** (project key, deployment, pod) → source key; only committed keys get here */
  private readonly sources = new Map<string, number>();
  private readonly appendTx: (batch: LogBatch) => Map<string, number>;

  /** Opens (creating when missing) the log database file; readable by its owner only, like the store. */
  constructor(file: string) {
    super();
    if (file !== ':memory:') {
      mkdirSync(dirname(file), { recursive: true });
      if (!existsSync(file)) closeSync(openSync(file, 'a', 0o600));
    }
    this.db = new SQLite(file);
    // before the first table: lets retention hand freed pages back to the file system
    this.db.pragma('auto_vacuum = INCREMENTAL');
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = NORMAL');
    this.db.pragma('busy_timeout = 5000');
    this.db.exec(SCHEMA);
    if (file !== ':memory:') {
      for (const f of [file, `${file}-wal`, `${file}-shm`]) if (existsSync(f)) chmodSync(f, 0o600);
    }
    this.appendTx = this.db.transaction((batch: LogBatch) => this.write(batch));
  }

  private stmt(sql: string): SQLite.Statement {
    let s = this.statements.get(sql);
    if (s === undefined) {
      s = this.db.prepare(sql);
      this.statements.set(sql, s);
    }
    return s;
  }

  async append(batch: LogBatch): Promise<void> {
    for (const line of batch.lines) checkLine(line);
    const fresh = this.appendTx(batch);
    for (const [k, v] of fresh) this.sources.set(k, v);
  }

  /** Inside the append transaction; returns the source keys it created, cached once committed. */
  private write(batch: LogBatch): Map<string, number> {
    const fresh = new Map<string, number>();
    const upsertProject = this.stmt(`insert into log_projects (project_id, workspace_id, last_id, lines, bytes) values (?, ?, ?, ?, ?)
      on conflict (project_id) do update set last_id = last_id + excluded.last_id, lines = lines + excluded.lines, bytes = bytes + excluded.bytes
      returning key, last_id`);
    const upsertSource = this.stmt(`insert into log_sources (project_key, deployment_id, pod) values (?, ?, ?)
      on conflict (project_key, deployment_id, pod) do update set pod = excluded.pod returning key`);
    const insertLine = this.stmt('insert into log_lines (project_key, id, ts, source_key, stream, level, message) values (?, ?, ?, ?, ?, ?, ?)');
    for (const [projectId, lines] of byProject(batch.lines)) {
      const messages = lines.map((l) => storedMessage(l.message));
      const bytes = messages.reduce((sum, m) => sum + utf8Bytes(m), 0);
      const workspaceId = lines[0]?.workspaceId ?? '';
      const p = upsertProject.get(projectId, workspaceId, lines.length, lines.length, bytes) as { key: number; last_id: number };
      let id = p.last_id - lines.length;
      lines.forEach((line, i) => {
        const cacheKey = `${p.key.toString()}\u0000${line.deploymentId}\u0000${line.pod}`;
        let source = this.sources.get(cacheKey) ?? fresh.get(cacheKey);
        if (source === undefined) {
          source = (upsertSource.get(p.key, line.deploymentId, line.pod) as { key: number }).key;
          fresh.set(cacheKey, source);
        }
        insertLine.run(p.key, ++id, line.timestamp, source, streamCode(line.stream), line.level ?? null, messages[i] ?? '');
      });
    }
    const addDropped = this.stmt(`insert into log_projects (project_id, workspace_id, dropped) values (?, ?, ?)
      on conflict (project_id) do update set dropped = dropped + excluded.dropped`);
    for (const d of batch.dropped ?? []) if (d.lines > 0) addDropped.run(d.projectId, d.workspaceId, d.lines);
    const putCursor = this.stmt(`insert into log_cursors (container_id, project_id, workspace_id, timestamp, at_timestamp) values (?, ?, ?, ?, ?)
      on conflict (container_id) do update set project_id = excluded.project_id, workspace_id = excluded.workspace_id,
        timestamp = excluded.timestamp, at_timestamp = excluded.at_timestamp`);
    for (const c of batch.cursors ?? []) putCursor.run(c.containerId, c.projectId, c.workspaceId, c.timestamp, c.atTimestamp);
    return fresh;
  }

  private project(projectId: string): ProjectRow | undefined {
    return this.stmt('select * from log_projects where project_id = ?').get(projectId) as ProjectRow | undefined;
  }

  /**
   * Up to `limit` entries past `from` (exclusive) in `direction`. With a filter that may skip
   * most rows, ids are scanned a window at a time, yielding between windows.
   */
  protected async scan(projectId: string, filter: LogFilter, direction: LogDirection, from: number | null, limit: number): Promise<LogEntry[]> {
    const p = this.project(projectId);
    if (p === undefined) return [];
    const where: string[] = [];
    const params: Param[] = [];
    if (filter.start !== undefined) {
      where.push('l.ts >= ?');
      params.push(filter.start);
    }
    if (filter.end !== undefined) {
      where.push('l.ts < ?');
      params.push(filter.end);
    }
    if (filter.stream !== undefined) {
      where.push('l.stream = ?');
      params.push(streamCode(filter.stream));
    }
    if (filter.deploymentId !== undefined) {
      where.push('l.source_key in (select key from log_sources where project_key = ? and deployment_id = ?)');
      params.push(p.key, filter.deploymentId);
    }
    if (filter.q !== undefined && filter.q !== '') {
      // instr, not LIKE: no wildcard to escape. lower() folds ASCII only (docs/logs.md#search).
      where.push('instr(lower(l.message), lower(?)) > 0');
      params.push(filter.q);
    }
    const order = direction === 'asc' ? 'asc' : 'desc';
    const sql = `select l.id, l.ts, s.deployment_id, s.pod, l.stream, l.level, l.message
      from log_lines l join log_sources s on s.key = l.source_key
      where l.project_key = ? and l.id >= ? and l.id < ?${where.map((w) => ` and ${w}`).join('')}
      order by l.id ${order} limit ?`;
    const statement = this.stmt(sql);
    const filtered = where.length > 0;
    let window = filtered ? FIRST_WINDOW : Number.MAX_SAFE_INTEGER;
    const lowest = (this.stmt('select id from log_lines where project_key = ? order by id asc limit 1').get(p.key) as { id: number } | undefined)?.id;
    if (lowest === undefined) return [];
    const out: LogEntry[] = [];
    // the half-open id range [lo, hi) still to scan
    let lo = direction === 'asc' ? Math.max(lowest, (from ?? 0) + 1) : lowest;
    let hi = direction === 'asc' ? p.last_id + 1 : Math.min(p.last_id + 1, from ?? Number.MAX_SAFE_INTEGER);
    while (lo < hi && out.length < limit) {
      const [a, b] = direction === 'asc' ? [lo, Math.min(hi, lo + window)] : [Math.max(lo, hi - window), hi];
      // elapsed time to pace the scan, not a time of the domain: not the injected clock
      const started = performance.now();
      const rows = statement.all(p.key, a, b, ...params, limit - out.length) as LineRow[];
      if (filtered) window = nextWindow(window, performance.now() - started);
      for (const r of rows) out.push(toEntry(r));
      if (direction === 'asc') lo = b;
      else hi = a;
      if (lo < hi && out.length < limit) await yieldToLoop();
    }
    return out;
  }


  usage(projectId: string): Promise<LogUsage> {
    const p = this.project(projectId);
    if (p === undefined) return Promise.resolve({ bytes: 0, lines: 0, oldest: null, newest: null, droppedLines: 0 });
    // one aggregate each, so that both are answered from the (project_key, ts) index
    const oldest = this.stmt('select min(ts) as t from log_lines where project_key = ?').get(p.key) as { t: number | null };
    const newest = this.stmt('select max(ts) as t from log_lines where project_key = ?').get(p.key) as { t: number | null };
    return Promise.resolve({ bytes: p.bytes, lines: p.lines, oldest: oldest.t, newest: newest.t, droppedLines: p.dropped });
  }

  /** Deletes the rows `select` picks (ids, at most DELETE_CHUNK) and takes them off the usage, in one transaction. */
  private deleteChunk(key: number, select: string, params: Param[]): { lines: number; bytes: number } {
    return this.db.transaction(() => {
      const gone = this.stmt(`delete from log_lines where project_key = ? and id in (${select}) returning length(cast(message as blob)) as b`).all(key, ...params) as { b: number }[];
      const bytes = gone.reduce((s, r) => s + r.b, 0);
      if (gone.length > 0) this.stmt('update log_projects set lines = lines - ?, bytes = bytes - ? where key = ?').run(gone.length, bytes, key);
      return { lines: gone.length, bytes };
    })();
  }

  async enforceRetention(policy: RetentionPolicy): Promise<RetentionResult> {
    const result: RetentionResult = { deletedLines: 0, deletedBytes: 0 };
    const add = (d: { lines: number; bytes: number }) => {
      result.deletedLines += d.lines;
      result.deletedBytes += d.bytes;
    };
    const projects = this.stmt('select * from log_projects order by key').all() as ProjectRow[];
    const days = new Map<string, number | null>();
    for (const p of projects) {
      if (!days.has(p.workspace_id)) days.set(p.workspace_id, await policy.retentionDays(p.workspace_id));
      const keep = days.get(p.workspace_id) ?? null;
      if (keep === null) {
        const before = this.project(p.project_id);
        await this.deleteProject(p.project_id);
        add({ lines: before?.lines ?? 0, bytes: before?.bytes ?? 0 });
        continue;
      }
      const cutoff = policy.now.getTime() - keep * 86_400_000;
      for (;;) {
        const d = this.deleteChunk(p.key, `select id from log_lines where project_key = ? and ts < ? limit ${DELETE_CHUNK}`, [p.key, cutoff]);
        add(d);
        if (d.lines < DELETE_CHUNK) break;
        await yieldToLoop();
      }
      if (policy.maxBytesPerProject !== null) add(await this.cap(p.key, policy.maxBytesPerProject));
    }
    this.db.pragma('incremental_vacuum');
    return result;
  }

  /** Deletes the project's oldest lines until its messages fit in `maxBytes`. */
  private async cap(key: number, maxBytes: number): Promise<{ lines: number; bytes: number }> {
    const total = { lines: 0, bytes: 0 };
    for (;;) {
      const p = this.stmt('select bytes from log_projects where key = ?').get(key) as { bytes: number } | undefined;
      const excess = (p?.bytes ?? 0) - maxBytes;
      if (excess <= 0) return total;
      const rows = this.stmt(`select id, length(cast(message as blob)) as b from log_lines where project_key = ? order by id limit ${DELETE_CHUNK}`).all(key) as { id: number; b: number }[];
      if (rows.length === 0) return total;
      let sum = 0;
      let upTo = rows[0]?.id ?? 0;
      for (const r of rows) {
        sum += r.b;
        upTo = r.id;
        if (sum >= excess) break;
      }
      const d = this.deleteChunk(key, 'select id from log_lines where project_key = ? and id <= ?', [key, upTo]);
      total.lines += d.lines;
      total.bytes += d.bytes;
      await yieldToLoop();
    }
  }

  async deleteProject(projectId: string): Promise<void> {
    const p = this.project(projectId);
    if (p !== undefined) {
      while (this.deleteChunk(p.key, `select id from log_lines where project_key = ? limit ${DELETE_CHUNK}`, [p.key]).lines > 0) await yieldToLoop();
      this.db.transaction(() => {
        this.stmt('delete from log_lines where project_key = ?').run(p.key);
        this.stmt('delete from log_sources where project_key = ?').run(p.key);
        this.stmt('delete from log_projects where key = ?').run(p.key);
      })();
      const prefix = `${p.key.toString()}\u0000`;
      for (const k of this.sources.keys()) if (k.startsWith(prefix)) this.sources.delete(k);
    }
    this.stmt('delete from log_cursors where project_id = ?').run(projectId);
  }

  async deleteWorkspace(workspaceId: string): Promise<void> {
    const projects = this.stmt('select project_id from log_projects where workspace_id = ?').all(workspaceId) as { project_id: string }[];
    for (const p of projects) await this.deleteProject(p.project_id);
    this.stmt('delete from log_cursors where workspace_id = ?').run(workspaceId);
  }

  cursors(containerIds: readonly string[]): Promise<Map<string, CollectionCursor>> {
    const out = new Map<string, CollectionCursor>();
    const get = this.stmt('select * from log_cursors where container_id = ?');
    for (const id of containerIds) {
      const r = get.get(id) as { container_id: string; project_id: string; workspace_id: string; timestamp: string; at_timestamp: number } | undefined;
      if (r !== undefined) out.set(id, { containerId: r.container_id, projectId: r.project_id, workspaceId: r.workspace_id, timestamp: r.timestamp, atTimestamp: r.at_timestamp });
    }
    return Promise.resolve(out);
  }

  forgetCursors(containerIds: readonly string[]): Promise<void> {
    const del = this.stmt('delete from log_cursors where container_id = ?');
    this.db.transaction(() => {
      for (const id of containerIds) del.run(id);
    })();
    return Promise.resolve();
  }

  close(): Promise<void> {
    this.db.close();
    return Promise.resolve();
  }
}
