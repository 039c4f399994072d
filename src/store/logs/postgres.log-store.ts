import { sql, type Kysely, type RawBuilder } from 'kysely';
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
import type { DB } from '../schema.js';
import { byProject, checkLine, DELETE_CHUNK, storedMessage, streamCode, streamName, utf8Bytes } from './log-query.js';
import { PagedLogStore } from './paged.js';

// The PostgreSQL driver, for installs whose replicas share one PostgreSQL store: the tables live
// in the main database (migration 2026-11-26T000000-runtime-logs). A batch is one transaction
// of a few statements whatever its size: the lines go in through unnest() of column arrays.
// docs/logs.md has the layout and the measurements behind it.

interface LineRow {
  id: string;
  ts: string;
  deployment_id: string;
  pod: string;
  stream: number;
  level: string | null;
  message: string;
}

const toEntry = (r: LineRow): LogEntry => ({
  id: Number(r.id),
  timestamp: Number(r.ts),
  deploymentId: r.deployment_id,
  pod: r.pod,
  stream: streamName(r.stream),
  message: r.message,
  level: r.level,
});

/** NOTIFY channel of stored batches, payload `<project id> <last id>`: every replica's live tail listens (src/modules/logs/live.ts). */
export const LOG_CHANNEL = 'slipway_logs';

/** pg returns bigint and count(*) as strings */
const num = (v: string | number | null): number => (v === null ? 0 : Number(v));

export class PostgresLogStore extends PagedLogStore implements LogStore {
  readonly driver = 'postgres';
  /** (project key, deployment, pod) → source key; only committed keys get here */
  private readonly sources = new Map<string, number>();

  /** `db` is the main store's: the log tables come with its migrations. */
  constructor(private readonly db: Kysely<DB>) {
    super();
  }

  async append(batch: LogBatch): Promise<void> {
    for (const line of batch.lines) checkLine(line);
    const fresh = new Map<string, number>();
    const announced: string[] = [];
    await this.db.transaction().execute(async (trx) => {
      const cols = { project: [] as number[], id: [] as number[], ts: [] as number[], source: [] as number[], stream: [] as number[], level: [] as (string | null)[], message: [] as string[] };
      // projects in id order: two replicas' batches lock their project rows in the same order
      for (const [projectId, lines] of byProject(batch.lines)) {
        const messages = lines.map((l) => storedMessage(l.message));
        const bytes = messages.reduce((s, m) => s + utf8Bytes(m), 0);
        const workspaceId = lines[0]?.workspaceId ?? '';
        const { rows } = await sql<{ key: number; last_id: string }>`
          insert into log_projects (project_id, workspace_id, last_id, lines, bytes)
          values (${projectId}, ${workspaceId}, ${lines.length}, ${lines.length}, ${bytes})
          on conflict (project_id) do update set last_id = log_projects.last_id + excluded.last_id,
            lines = log_projects.lines + excluded.lines, bytes = log_projects.bytes + excluded.bytes
          returning key, last_id`.execute(trx);
        const p = rows[0];
        if (p === undefined) throw new Error('log_projects upsert returned no row');
        const keyOf = (l: { deploymentId: string; pod: string }) => `${p.key.toString()}\u0000${l.deploymentId}\u0000${l.pod}`;
        const missing = new Map<string, { deploymentId: string; pod: string }>();
        for (const l of lines) {
          const k = keyOf(l);
          if (!this.sources.has(k) && !fresh.has(k)) missing.set(k, l);
        }
        if (missing.size > 0) {
          const pairs = [...missing.values()];
          const made = await sql<{ key: number; deployment_id: string; pod: string }>`
            insert into log_sources (project_key, deployment_id, pod)
            select ${p.key}, d, pod from unnest(${pairs.map((x) => x.deploymentId)}::text[], ${pairs.map((x) => x.pod)}::text[]) as u(d, pod)
            on conflict (project_key, deployment_id, pod) do update set pod = excluded.pod
            returning key, deployment_id, pod`.execute(trx);
          for (const r of made.rows) fresh.set(keyOf({ deploymentId: r.deployment_id, pod: r.pod }), r.key);
        }
        announced.push(`${projectId} ${p.last_id}`);
        let id = num(p.last_id) - lines.length;
        lines.forEach((l, i) => {
          cols.project.push(p.key);
          cols.id.push(++id);
          cols.ts.push(l.timestamp);
          cols.source.push(this.sources.get(keyOf(l)) ?? fresh.get(keyOf(l)) ?? 0);
          cols.stream.push(streamCode(l.stream));
          cols.level.push(l.level ?? null);
          cols.message.push(messages[i] ?? '');
        });
      }
      if (cols.id.length > 0) {
        await sql`insert into log_lines (project_key, id, ts, source_key, stream, level, message)
          select * from unnest(${cols.project}::integer[], ${cols.id}::bigint[], ${cols.ts}::bigint[], ${cols.source}::integer[],
            ${cols.stream}::smallint[], ${cols.level}::text[], ${cols.message}::text[])`.execute(trx);
        // delivered at commit, so a listener never reads before the lines are visible
        await sql`select pg_notify(${LOG_CHANNEL}, n) from unnest(${announced}::text[]) as n`.execute(trx);
      }
      for (const d of batch.dropped ?? []) {
        if (d.lines <= 0) continue;
        await sql`insert into log_projects (project_id, workspace_id, dropped) values (${d.projectId}, ${d.workspaceId}, ${d.lines})
          on conflict (project_id) do update set dropped = log_projects.dropped + excluded.dropped`.execute(trx);
      }
      // one row per container: ON CONFLICT cannot touch a row twice in one statement
      const cursors = [...new Map((batch.cursors ?? []).map((c) => [c.containerId, c])).values()];
      if (cursors.length > 0) {
        await sql`insert into log_cursors (container_id, project_id, workspace_id, timestamp, at_timestamp)
          select * from unnest(${cursors.map((c) => c.containerId)}::text[], ${cursors.map((c) => c.projectId)}::text[],
            ${cursors.map((c) => c.workspaceId)}::text[], ${cursors.map((c) => c.timestamp)}::text[], ${cursors.map((c) => c.atTimestamp)}::integer[])
          on conflict (container_id) do update set project_id = excluded.project_id, workspace_id = excluded.workspace_id,
            timestamp = excluded.timestamp, at_timestamp = excluded.at_timestamp`.execute(trx);
      }
    });
    for (const [k, v] of fresh) this.sources.set(k, v);
  }

  /** Up to `limit` entries past `from` (exclusive) in `direction`, in one statement. */
  protected async scan(projectId: string, filter: LogFilter, direction: LogDirection, from: number | null, limit: number): Promise<LogEntry[]> {
    const where: RawBuilder<unknown>[] = [sql`l.project_key = (select key from log_projects where project_id = ${projectId})`];
    if (from !== null) where.push(direction === 'asc' ? sql`l.id > ${from}` : sql`l.id < ${from}`);
    if (filter.start !== undefined) where.push(sql`l.ts >= ${filter.start}`);
    if (filter.end !== undefined) where.push(sql`l.ts < ${filter.end}`);
    if (filter.stream !== undefined) where.push(sql`l.stream = ${streamCode(filter.stream)}`);
    if (filter.deploymentId !== undefined) {
      where.push(sql`l.source_key in (select s2.key from log_sources s2 where s2.project_key = l.project_key and s2.deployment_id = ${filter.deploymentId})`);
    }
    // strpos, not ILIKE: no wildcard to escape, and lower() folds every script (docs/logs.md#search)
    if (filter.q !== undefined && filter.q !== '') where.push(sql`strpos(lower(l.message), lower(${filter.q})) > 0`);
    const order = direction === 'asc' ? sql`asc` : sql`desc`;
    const { rows } = await sql<LineRow>`
      select l.id, l.ts, s.deployment_id, s.pod, l.stream, l.level, l.message
      from log_lines l join log_sources s on s.key = l.source_key
      where ${sql.join(where, sql` and `)}
      order by l.id ${order} limit ${limit}`.execute(this.db);
    return rows.map(toEntry);
  }


  async usage(projectId: string): Promise<LogUsage> {
    const { rows } = await sql<{ lines: string; bytes: string; dropped: string; oldest: string | null; newest: string | null }>`
      select p.lines, p.bytes, p.dropped,
        (select min(ts) from log_lines where project_key = p.key) as oldest,
        (select max(ts) from log_lines where project_key = p.key) as newest
      from log_projects p where p.project_id = ${projectId}`.execute(this.db);
    const r = rows[0];
    if (r === undefined) return { bytes: 0, lines: 0, oldest: null, newest: null, droppedLines: 0 };
    return { bytes: num(r.bytes), lines: num(r.lines), oldest: r.oldest === null ? null : num(r.oldest), newest: r.newest === null ? null : num(r.newest), droppedLines: num(r.dropped) };
  }

  /**
   * Deletes the rows `ids` picks (at most DELETE_CHUNK) and takes exactly those off the usage, in
   * one statement: a row another replica deleted first is not counted twice.
   */
  private async deleteChunk(key: number, ids: RawBuilder<unknown>): Promise<{ lines: number; bytes: number }> {
    const { rows } = await sql<{ n: string; b: string }>`
      with gone as (
        delete from log_lines where project_key = ${key} and id in (${ids}) returning octet_length(message) as b
      ), counted as (
        update log_projects set lines = lines - (select count(*) from gone), bytes = bytes - (select coalesce(sum(b), 0) from gone)
        where key = ${key}
      )
      select count(*) as n, coalesce(sum(b), 0) as b from gone`.execute(this.db);
    return { lines: num(rows[0]?.n ?? 0), bytes: num(rows[0]?.b ?? 0) };
  }

  async enforceRetention(policy: RetentionPolicy): Promise<RetentionResult> {
    const result: RetentionResult = { deletedLines: 0, deletedBytes: 0 };
    const add = (d: { lines: number; bytes: number }) => {
      result.deletedLines += d.lines;
      result.deletedBytes += d.bytes;
    };
    const { rows: projects } = await sql<{ key: number; project_id: string; workspace_id: string; lines: string; bytes: string }>`
      select key, project_id, workspace_id, lines, bytes from log_projects order by key`.execute(this.db);
    const days = new Map<string, number | null>();
    for (const p of projects) {
      if (!days.has(p.workspace_id)) days.set(p.workspace_id, await policy.retentionDays(p.workspace_id));
      const keep = days.get(p.workspace_id) ?? null;
      if (keep === null) {
        add({ lines: num(p.lines), bytes: num(p.bytes) });
        await this.deleteProject(p.project_id);
        continue;
      }
      const cutoff = policy.now.getTime() - keep * 86_400_000;
      for (;;) {
        const d = await this.deleteChunk(p.key, sql`select id from log_lines where project_key = ${p.key} and ts < ${cutoff} limit ${DELETE_CHUNK}`);
        add(d);
        if (d.lines < DELETE_CHUNK) break;
      }
      if (policy.maxBytesPerProject !== null) add(await this.cap(p.key, policy.maxBytesPerProject));
    }
    return result;
  }

  /** Deletes the project's oldest lines until its messages fit in `maxBytes`. */
  private async cap(key: number, maxBytes: number): Promise<{ lines: number; bytes: number }> {
    const total = { lines: 0, bytes: 0 };
    for (;;) {
      const { rows: p } = await sql<{ bytes: string }>`select bytes from log_projects where key = ${key}`.execute(this.db);
      const excess = num(p[0]?.bytes ?? 0) - maxBytes;
      if (excess <= 0) return total;
      // the id where the running total of the oldest lines' bytes first covers the excess
      const { rows } = await sql<{ id: string | null }>`
        select coalesce(
          (select id from (select id, sum(octet_length(message)) over (order by id) as run
                           from (select id, message from log_lines where project_key = ${key} order by id limit ${DELETE_CHUNK}) oldest) r
           where run >= ${excess} order by id limit 1),
          (select max(id) from (select id from log_lines where project_key = ${key} order by id limit ${DELETE_CHUNK}) oldest)) as id`.execute(this.db);
      const upTo = rows[0]?.id;
      if (upTo === undefined || upTo === null) return total;
      const d = await this.deleteChunk(key, sql`select id from log_lines where project_key = ${key} and id <= ${num(upTo)}`);
      total.lines += d.lines;
      total.bytes += d.bytes;
    }
  }

  async deleteProject(projectId: string): Promise<void> {
    const { rows } = await sql<{ key: number }>`select key from log_projects where project_id = ${projectId}`.execute(this.db);
    const key = rows[0]?.key;
    if (key !== undefined) {
      while ((await this.deleteChunk(key, sql`select id from log_lines where project_key = ${key} limit ${DELETE_CHUNK}`)).lines > 0) {
        // chunk by chunk: no transaction holds a million rows' locks
      }
      await this.db.transaction().execute(async (trx) => {
        // the row lock first: an append racing with the delete waits, then starts a new key
        await sql`delete from log_projects where key = ${key}`.execute(trx);
        await sql`delete from log_lines where project_key = ${key}`.execute(trx);
        await sql`delete from log_sources where project_key = ${key}`.execute(trx);
      });
      const prefix = `${key.toString()}\u0000`;
      for (const k of this.sources.keys()) if (k.startsWith(prefix)) this.sources.delete(k);
    }
    await sql`delete from log_cursors where project_id = ${projectId}`.execute(this.db);
  }

  async deleteWorkspace(workspaceId: string): Promise<void> {
    const { rows } = await sql<{ project_id: string }>`select project_id from log_projects where workspace_id = ${workspaceId}`.execute(this.db);
    for (const p of rows) await this.deleteProject(p.project_id);
    await sql`delete from log_cursors where workspace_id = ${workspaceId}`.execute(this.db);
  }

  async cursors(containerIds: readonly string[]): Promise<Map<string, CollectionCursor>> {
    const out = new Map<string, CollectionCursor>();
    if (containerIds.length === 0) return out;
    const { rows } = await sql<{ container_id: string; project_id: string; workspace_id: string; timestamp: string; at_timestamp: number }>`
      select * from log_cursors where container_id = any(${[...containerIds]}::text[])`.execute(this.db);
    for (const r of rows) out.set(r.container_id, { containerId: r.container_id, projectId: r.project_id, workspaceId: r.workspace_id, timestamp: r.timestamp, atTimestamp: r.at_timestamp });
    return out;
  }

  async forgetCursors(containerIds: readonly string[]): Promise<void> {
    if (containerIds.length === 0) return;
    await sql`delete from log_cursors where container_id = any(${[...containerIds]}::text[])`.execute(this.db);
  }

  /** The connection pool is the store's: closing it is the store's business. */
  async close(): Promise<void> {
    this.sources.clear();
  }
}
