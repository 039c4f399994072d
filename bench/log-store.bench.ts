// The runtime log store on both drivers: append throughput with realistic lines, the newest 100
// lines of one project among 1,000,000 lines of 20 projects, searches, retention, and the size
// on disk; then the SQLite layouts that were weighed against the chosen one (docs/logs.md).
//
//   npx tsx bench/log-store.bench.ts [--lines 1000000] [--projects 20] [--batch 5000]
//
// PostgreSQL comes from SLIPWAY_TEST_PG_URL (as in the tests; a scratch database is created and
// dropped). Writes bench/results/log-store-<date>.json and prints it. Not part of the test suite.
import { mkdtempSync, rmSync, statSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import { sql } from 'kysely';
import type { LogLine, LogStore } from '../src/domain/logs.js';
import { LogWriter } from '../src/modules/logs/log-writer.js';
import { PostgresLogStore } from '../src/store/logs/postgres.log-store.js';
import { SqliteLogStore } from '../src/store/logs/sqlite.log-store.js';
import { createStore, type Store } from '../src/store/db.js';
import { freshDatabase } from '../test/factories/stores.js';
import { machine, quantile, round, writeResult } from './support.js';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  const v = i === -1 ? undefined : Number(process.argv[i + 1]);
  return v === undefined || !Number.isFinite(v) ? fallback : v;
}

const LINES = arg('lines', 1_000_000);
const PROJECTS = arg('projects', 20);
const BATCH = arg('batch', 5000);
const T0 = Date.parse('2026-11-26T00:00:00.000Z');
const NEEDLE = 'needle-7f3a';

// a deterministic generator, so every run stores the same lines
let seed = 42;
const rand = (n: number): number => {
  seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
  return seed % n;
};
const PATHS = ['/api/v1/orders', '/api/v1/users', '/healthz', '/static/app.js', '/api/v1/cart/items', '/login'];
const LEVELS = ['INFO', 'INFO', 'INFO', 'DEBUG', 'WARN', 'ERROR'];

/** ~120-byte access-log-like lines, spread over the projects as a collector would hand them over. */
function lineAt(i: number): LogLine {
  const project = i % PROJECTS;
  const ts = T0 + Math.floor(i / 10);
  const level = LEVELS[rand(LEVELS.length)] ?? 'INFO';
  // one line per project near its start carries the needle: a search must scan the whole project
  const needle = i < PROJECTS * 3 && i >= PROJECTS * 2 ? ` ${NEEDLE}` : '';
  const message = `${new Date(ts).toISOString()} ${level} [req-${rand(0xffffff).toString(16).padStart(6, '0')}] GET ${PATHS[rand(PATHS.length)] ?? '/'}/${rand(100_000).toString()} ${rand(10) < 9 ? '200' : '500'} ${rand(900).toString()}ms ua="Mozilla/5.0 (X11; Linux x86_64) Firefox/118.0"${needle}`;
  return {
    projectId: `project-${project.toString().padStart(2, '0')}`,
    workspaceId: `workspace-${(project % 5).toString()}`,
    deploymentId: `deployment-${project.toString()}-${(i % 3 === 0 ? 1 : 2).toString()}`,
    pod: `web-${(i % 2).toString()}`,
    stream: rand(10) === 0 ? 'stderr' : 'stdout',
    timestamp: ts,
    message,
  };
}

async function ingest(logs: LogStore, total: number): Promise<{ lines: number; seconds: number; lines_per_s: number; avg_message_bytes: number }> {
  let bytes = 0;
  const started = performance.now();
  for (let from = 0; from < total; from += BATCH) {
    const lines = Array.from({ length: Math.min(BATCH, total - from) }, (_, k) => lineAt(from + k));
    for (const l of lines) bytes += Buffer.byteLength(l.message);
    await logs.append({ lines, cursors: [{ containerId: `c-${(from % 40).toString()}`, projectId: lines[0]?.projectId ?? '', workspaceId: lines[0]?.workspaceId ?? '', timestamp: String(from), atTimestamp: 1 }] });
  }
  const seconds = (performance.now() - started) / 1000;
  return { lines: total, seconds: round(seconds, 2), lines_per_s: Math.round(total / seconds), avg_message_bytes: round(bytes / total, 1) };
}

/** The same lines through the batching writer (what the collector uses), written as 50-line chunks. */
async function viaWriter(logs: LogStore, total: number, offset: number): Promise<{ lines: number; lines_per_s: number; dropped: number }> {
  const writer = new LogWriter({ logs, maxBatchLines: BATCH, maxBufferedLines: 4 * BATCH, flushEveryMs: 50 });
  const started = performance.now();
  let written = 0;
  for (let i = 0; i < total; i += 50) {
    const chunk = Array.from({ length: 50 }, (_, k) => lineAt(offset + i + k));
    // a collector that waits when the buffer is full, so this measures the store, not drops
    while (writer.buffered + chunk.length > 4 * BATCH) await new Promise((r) => setTimeout(r, 1));
    written += writer.write(chunk);
  }
  await writer.close();
  const seconds = (performance.now() - started) / 1000;
  return { lines: written, lines_per_s: Math.round(written / seconds), dropped: writer.droppedLines };
}

async function latencies(runs: number, fn: (i: number) => Promise<unknown>): Promise<{ runs: number; p50_ms: number; p99_ms: number; max_ms: number }> {
  const ms: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    await fn(i);
    ms.push(performance.now() - t);
  }
  return { runs, p50_ms: round(quantile(ms, 0.5), 2), p99_ms: round(quantile(ms, 0.99), 2), max_ms: round(Math.max(...ms), 2) };
}

async function reads(logs: LogStore): Promise<Record<string, unknown>> {
  const project = (i: number) => `project-${(i % PROJECTS).toString().padStart(2, '0')}`;
  // warm the caches as a running server's would be
  for (let i = 0; i < PROJECTS; i++) await logs.query(project(i), { limit: 100 });
  const newest = await latencies(1000, (i) => logs.query(project(i * 7), { limit: 100 }));
  let pages = 0;
  const paging = await latencies(200, async (i) => {
    const first = await logs.query(project(i), { limit: 100 });
    await logs.query(project(i), { limit: 100, cursor: first.nextCursor ?? undefined });
    pages++;
  });
  const filtered = await latencies(200, (i) => logs.query(project(i), { limit: 100, stream: 'stderr', deploymentId: `deployment-${(i % PROJECTS).toString()}-1` }));
  const common = await latencies(50, (i) => logs.query(project(i), { limit: 100, q: 'cart/ITEMS' }));
  // the longest the event loop stood still during the searches: what a collector on it waits at most
  const loop = monitorEventLoopDelay({ resolution: 1 });
  loop.enable();
  const rare = await latencies(10, async (i) => {
    const page = await logs.query(project(i), { limit: 100, q: NEEDLE.toUpperCase() });
    if (page.entries.length !== 1) throw new Error(`the needle search found ${page.entries.length.toString()} lines`);
  });
  loop.disable();
  const span = LINES / 10;
  // ten seconds of log time from the oldest tenth: a scan from the newest end down to it
  const oldWindow = await latencies(50, (i) => logs.query(project(i), { limit: 100, start: T0 + span / 20, end: T0 + span / 20 + 10_000 }));
  const usage = await latencies(100, (i) => logs.usage(project(i)));
  const tail = await latencies(200, (i) => logs.tail(project(i), 100));
  return {
    newest_100: newest,
    two_pages_of_100: { ...paging, pages },
    newest_100_stderr_of_one_deployment: filtered,
    q_common_term_newest_100: common,
    q_rare_term_whole_project: { ...rare, event_loop_max_stall_ms: round(loop.max / 1e6, 1) },
    old_10_s_time_window: oldWindow,
    usage,
    tail_100: tail,
  };
}

async function retention(logs: LogStore): Promise<Record<string, unknown>> {
  // lines are 100 per second apart from T0: keep the newest half of each project
  const span = LINES / 10;
  const now = new Date(T0 + span + 86_400_000 - Math.floor(span / 2));
  const t = performance.now();
  const r = await logs.enforceRetention({ retentionDays: () => 1, maxBytesPerProject: null, now });
  return { deleted_lines: r.deletedLines, seconds: round((performance.now() - t) / 1000, 2), lines_per_s: Math.round(r.deletedLines / ((performance.now() - t) / 1000)) };
}

const fileSize = (file: string): number => [file, `${file}-wal`].reduce((s, f) => s + (existsSync(f) ? statSync(f).size : 0), 0);

async function sqliteRun(): Promise<Record<string, unknown>> {
  const dir = mkdtempSync(join(tmpdir(), 'slipway-logbench-'));
  const file = join(dir, 'logs.db');
  const logs = new SqliteLogStore(file);
  try {
    const append = await ingest(logs, LINES);
    const writer = await viaWriter(logs, 100_000, LINES);
    const size = fileSize(file);
    const read = await reads(logs);
    const ret = await retention(logs);
    return { append, via_writer: writer, bytes_on_disk: size, bytes_per_line: round(size / (LINES + 100_000), 1), ...read, retention: ret };
  } finally {
    await logs.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function postgresRun(): Promise<Record<string, unknown>> {
  const database = await freshDatabase('postgres');
  let store: Store | undefined;
  try {
    store = await createStore(database.url);
    const logs = new PostgresLogStore(store.db);
    const append = await ingest(logs, LINES);
    const writer = await viaWriter(logs, 100_000, LINES);
    await sql`vacuum analyze log_lines`.execute(store.db);
    const size = await sql<{ b: string }>`select pg_total_relation_size('log_lines') as b`.execute(store.db);
    const bytes = Number(size.rows[0]?.b ?? 0);
    const read = await reads(logs);
    const ret = await retention(logs);
    const version = await sql<{ v: string }>`select version() as v`.execute(store.db);
    return { server: version.rows[0]?.v ?? '', append, via_writer: writer, bytes_on_disk: bytes, bytes_per_line: round(bytes / (LINES + 100_000), 1), ...read, retention: ret };
  } finally {
    await store?.close();
    await database.drop();
  }
}

/**
 * SQLite layouts weighed against the chosen one (clustered by project and id, plus a time index):
 * without the time index, and a rowid table with both as secondary indexes. Each gets the same
 * 300,000 lines; what differs is the ingest rate, the newest-100 latency and the file size.
 */
async function sqliteLayouts(): Promise<Record<string, unknown>> {
  const count = Math.min(LINES, 300_000);
  const out: Record<string, unknown> = {};
  const variants: Record<string, { before?: string; after?: string }> = {
    chosen_clustered_with_ts_index: {},
    clustered_without_ts_index: { after: 'drop index log_lines_ts' },
    rowid_table_with_two_indexes: {
      before: `create table log_lines (project_key integer not null, id integer not null, ts integer not null, source_key integer not null,
        stream integer not null, level text, message text not null);
        create unique index log_lines_pk on log_lines (project_key, id);`,
    },
  };
  for (const [name, v] of Object.entries(variants)) {
    const dir = mkdtempSync(join(tmpdir(), 'slipway-logbench-'));
    const file = join(dir, 'logs.db');
    if (v.before !== undefined) {
      const pre = new SQLite(file);
      pre.pragma('auto_vacuum = INCREMENTAL');
      pre.exec(v.before);
      pre.close();
    }
    const logs = new SqliteLogStore(file);
    if (v.after !== undefined) {
      const side = new SQLite(file);
      side.exec(v.after);
      side.close();
    }
    try {
      const append = await ingest(logs, count);
      const newest = await latencies(500, (i) => logs.query(`project-${(i % PROJECTS).toString().padStart(2, '0')}`, { limit: 100 }));
      const t = performance.now();
      const r = await logs.enforceRetention({ retentionDays: () => 1, maxBytesPerProject: null, now: new Date(T0 + 86_400_000 + count / 20) });
      out[name] = { lines: count, lines_per_s: append.lines_per_s, newest_100: newest, bytes_per_line: round(fileSize(file) / count, 1), retention_half: { deleted: r.deletedLines, seconds: round((performance.now() - t) / 1000, 2) } };
    } finally {
      await logs.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }
  return out;
}

/**
 * A trigram index (pg_trgm, in Debian's postgresql package) weighed for `q` on PostgreSQL: what
 * it costs every append and what it saves a search for a rare term, on 300,000 lines.
 */
async function postgresTrigram(): Promise<Record<string, unknown>> {
  const count = Math.min(LINES, 300_000);
  const database = await freshDatabase('postgres');
  let store: Store | undefined;
  try {
    store = await createStore(database.url);
    const db = store.db;
    const logs = new PostgresLogStore(db);
    const before = await ingest(logs, count);
    const created = await sql`create extension if not exists pg_trgm`.execute(db).then(() => true, () => false);
    if (!created) return { available: false };
    const rare = (op: 'strpos' | 'ilike') =>
      latencies(10, (i) => {
        const project = `project-${(i % PROJECTS).toString().padStart(2, '0')}`;
        const cond = op === 'strpos' ? sql`strpos(lower(message), lower(${NEEDLE})) > 0` : sql`message ilike ${`%${NEEDLE}%`}`;
        return sql`select id from log_lines where project_key = (select key from log_projects where project_id = ${project}) and ${cond} order by id desc limit 100`.execute(db);
      });
    const scan = await rare('ilike');
    const t = performance.now();
    await sql`create index log_lines_trgm on log_lines using gin (message gin_trgm_ops)`.execute(db);
    const build = round((performance.now() - t) / 1000, 2);
    await sql`analyze log_lines`.execute(db);
    const indexed = await rare('ilike');
    seed = 7;
    const after = await ingest(logs, count);
    return { lines: count, append_without_index_lines_per_s: before.lines_per_s, append_with_index_lines_per_s: after.lines_per_s, index_build_s: build, rare_ilike_scan: scan, rare_ilike_indexed: indexed };
  } finally {
    await store?.close();
    await database.drop();
  }
}

const report = {
  date: new Date().toISOString(),
  machine: await machine(),
  setup: { lines: LINES, projects: PROJECTS, batch_lines: BATCH, note: 'lines ~120 B of message, spread evenly over the projects; 10 lines per ms of log time' },
  sqlite: await sqliteRun(),
  postgres: await postgresRun(),
  sqlite_layouts: await sqliteLayouts(),
  postgres_trigram: await postgresTrigram(),
};
const file = writeResult('log-store', report);
console.log(JSON.stringify(report, null, 2));
console.log(`written to ${file}`);
