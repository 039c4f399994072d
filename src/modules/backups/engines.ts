import { availableParallelism } from 'node:os';
import { PassThrough, Readable, type Writable } from 'node:stream';
import type { DatabaseAddress, DatabaseType } from '../../domain/database.js';
import type { Labels, Mount, Runtime, TaskResult } from '../../domain/runtime.js';
import { sleep } from '../deployments/engine/sleep.js';
import { countKeys, redisKeys, redisLogin } from './redis-keys.js';
import { SqlRowCounter } from './sql-rows.js';

/** What a backup holds, as the manifest records it and a restore is compared with. */
export type Contents = { kind: 'tables'; tables: { name: string; rows: number }[] } | { kind: 'keys'; keys: number } | { kind: 'collections'; collections: { name: string; documents: number }[] };

/**
 * A tenant on a shared server (docs/backups.md#shared-servers): the administrative URL (Redis:
 * SCAN and RESTORE, which tenants may not run) and its key prefix (`<name>:`).
 */
export interface SharedScope {
  admin: string;
  prefix: string;
}

/** Where and as whom a tool container runs beside a database (docs/backups.md#tools). */
export interface ToolContext {
  runtime: Pick<Runtime, 'task'>;
  /** the database server's own image: its tools are the server's version */
  image: string;
  /** the workspace network (the tool reaches the server by its name there) */
  network: string;
  /** the database's data volume */
  volume: string;
  owner: { workspace: string };
  labels: Labels;
  /** a name of the task container's own */
  name: string;
  /** the server as the tool reaches it, with the tenant's own credentials */
  server: DatabaseAddress;
  /** the server as Slipway reaches it (counts, snapshots, BGSAVE) */
  direct: DatabaseAddress;
  /** a database on a shared server: the server's administrative login and the tenant's key prefix (Redis) */
  shared?: SharedScope | undefined;
  memoryBytes: number;
  timeoutMs: number;
  signal: AbortSignal;
}

export interface DumpResult {
  engineVersion: string;
  tool: string;
  contents: Contents;
}

/** One engine's backup tools. */
export interface EngineTools {
  /** gzip over the dump (false: the tool compresses itself, as pg_dump's custom format does) */
  readonly compress: boolean;
  /** the file name a download gets, after the database's slug */
  readonly extension: string;
  /** the restore runs on a new server's empty volume before it first starts (Redis), or through a login once it accepts one */
  readonly restoreWhen: 'before-start' | 'after-ready';
  /** writes the raw dump to `out` (ended when the tool ends) */
  dump(ctx: ToolContext, out: Writable): Promise<DumpResult>;
  /** feeds a raw dump to the server (or its volume) */
  restore(ctx: ToolContext, source: Readable): Promise<void>;
  /** what the server holds now, in the manifest's terms (a shared server's tenant: only its own) */
  count(direct: DatabaseAddress, shared?: SharedScope): Promise<Contents>;
  /**
   * An in-place restore: what the running server's database holds is replaced by the dump, and
   * nothing else is left (docs/backups.md#in-place-restore). Absent (Redis): the worker replaces
   * the data set through replication from a scratch server.
   */
  replace?(ctx: ToolContext, source: Readable): Promise<void>;
}

/** The most tables (collections) a manifest lists; past it a backup fails, said so. */
const MAX_TABLES = 10_000;
const TOOL_MARK = 'slipway-tool:';

/** The task's first line of input is the password: it never appears in a command line, the environment or a label. */
const withPassword = (password: string, rest?: Readable): Readable => {
  if (rest === undefined) return Readable.from([Buffer.from(`${password}\n`)]);
  const out = new PassThrough();
  out.write(`${password}\n`);
  rest.once('error', (err) => out.destroy(err));
  rest.pipe(out);
  return out;
};

/** Fails with the tool's own words when it did not end well. */
export function checkTask(what: string, r: TaskResult): void {
  if (r.exitCode === 0 && !r.timedOut) return;
  const tail = r.stderr
    .split('\n')
    .filter((l) => l.trim() !== '' && !l.startsWith(TOOL_MARK))
    .slice(-5)
    .join(' | ')
    .slice(-600);
  const why = r.timedOut ? 'it timed out' : r.oomKilled ? 'it ran out of memory' : `it exited with code ${String(r.exitCode)}`;
  throw new Error(`${what} failed: ${why}${tail === '' ? '' : ` (${tail})`}.`);
}

const toolVersion = (r: TaskResult, fallback: string): string => {
  const line = r.stderr.split('\n').find((l) => l.startsWith(TOOL_MARK));
  return line === undefined ? fallback : line.slice(TOOL_MARK.length).trim().slice(0, 200);
};

const task = (ctx: ToolContext, command: string[], io: { stdin?: Readable; stdout?: Writable; mounts?: (Mount & { readOnly?: boolean })[]; network?: boolean }) =>
  ctx.runtime.task({
    name: ctx.name,
    image: ctx.image,
    command,
    owner: ctx.owner,
    labels: ctx.labels,
    ...(io.network === false ? {} : { network: ctx.network }),
    ...(io.mounts === undefined ? {} : { mounts: io.mounts }),
    cpu: TOOL_CPUS,
    memoryBytes: ctx.memoryBytes,
    stdin: io.stdin,
    stdout: io.stdout,
    timeoutMs: ctx.timeoutMs,
    signal: ctx.signal,
  });

/**
 * The CPU of a tool container: two (or the host's, when it has fewer). The tools are single
 * processes, but a quota of one CPU throttled them: pg_restore of a 1 GiB dump took 13.6 s capped
 * at one against 11.1 s at two, 10.8 s uncapped (docs/backups.md#benchmark).
 */
const TOOL_CPUS = Math.min(2, availableParallelism());

const sh = (script: string[], ...args: string[]): string[] => ['sh', '-c', ['set -e', 'umask 077', ...script].join('\n'), 'slipway', ...args];

// --- PostgreSQL ------------------------------------------------------------------------------

const quoteIdent = (s: string): string => `"${s.replace(/"/g, '""')}"`;

async function pgClient(a: DatabaseAddress) {
  const { default: pg } = await import('pg');
  const client = new pg.Client({ host: a.host, port: a.port, user: a.username, password: a.password, database: a.databaseName, connectionTimeoutMillis: 10_000 });
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

type Queryable = { query(sql: string): Promise<{ rows: Record<string, unknown>[] }> };

async function pgTables(c: Queryable): Promise<{ name: string; rows: number }[]> {
  const { rows } = await c.query(
    `SELECT n.nspname AS schema, c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp%'
      ORDER BY 1, 2 LIMIT ${String(MAX_TABLES + 1)}`,
  );
  if (rows.length > MAX_TABLES) throw new Error(`the database has more than ${String(MAX_TABLES)} tables; a manifest lists at most that many.`);
  const out: { name: string; rows: number }[] = [];
  for (const r of rows) {
    const schema = String(r['schema']);
    const name = String(r['name']);
    const counted = await c.query(`SELECT count(*) AS n FROM ${quoteIdent(schema)}.${quoteIdent(name)}`);
    out.push({ name: `${schema}.${name}`, rows: Number(counted.rows[0]?.['n'] ?? 0) });
  }
  return out;
}

const pgTarget = ['--no-password', '--host="$1"', '--port="$2"', '--username="$3"', '--dbname="$4"'].join(' ');

export const postgresql: EngineTools = {
  compress: false,
  extension: 'dump',
  restoreWhen: 'after-ready',
  async dump(ctx, out) {
    const c = await pgClient(ctx.direct);
    try {
      // the tool dumps the snapshot the rows are counted in: the manifest's counts are the dump's
      await c.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      const snapshot = String((await c.query<{ s: string }>('SELECT pg_export_snapshot() AS s')).rows[0]?.s);
      const version = (await c.query<{ server_version: string }>('SHOW server_version')).rows[0]?.server_version ?? 'unknown';
      // the rows are counted while the tool dumps the same snapshot (the exporting transaction stays open until both are done)
      const counting = pgTables(c);
      counting.catch(() => undefined);
      const s = ctx.server;
      const r = await task(
        ctx,
        sh(['IFS= read -r PGPASSWORD', 'export PGPASSWORD', `echo "${TOOL_MARK} $(pg_dump --version)" >&2`, `exec pg_dump --format=custom ${pgTarget} --snapshot="$5"`], s.host, String(s.port), s.username, s.databaseName, snapshot),
        { stdin: withPassword(s.password), stdout: out },
      );
      checkTask('pg_dump', r);
      const tables = await counting;
      return { engineVersion: `PostgreSQL ${version}`, tool: toolVersion(r, 'pg_dump'), contents: { kind: 'tables', tables } };
    } finally {
      await c.query('COMMIT').catch(() => undefined);
      await c.end().catch(() => undefined);
    }
  },
  async restore(ctx, source) {
    const s = ctx.server;
    const r = await task(
      ctx,
      // objects belong to the new database's own user; one transaction: all of it or nothing
      sh(['IFS= read -r PGPASSWORD', 'export PGPASSWORD', `exec pg_restore --no-owner --no-privileges --clean --if-exists --single-transaction --exit-on-error ${pgTarget}`], s.host, String(s.port), s.username, s.databaseName),
      { stdin: withPassword(s.password, source) },
    );
    checkTask('pg_restore', r);
  },
  async replace(ctx, source) {
    const s = ctx.server;
    // every schema of the database dropped, then the dump: one transaction, all of it or nothing
    const drop = [
      "DO $$ DECLARE s text; BEGIN FOR s IN SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%' AND nspname <> 'information_schema' LOOP EXECUTE format('DROP SCHEMA %I CASCADE', s); END LOOP; END $$;",
      'CREATE SCHEMA public;',
    ].join('\n');
    const r = await task(
      ctx,
      sh(
        ['IFS= read -r PGPASSWORD', 'export PGPASSWORD', '{ printf "%s\\n" "$5"; pg_restore --no-owner --no-privileges --clean --if-exists --file=- || printf "%s\\n" "$6"; } | psql --quiet --no-psqlrc --single-transaction --set=ON_ERROR_STOP=1 ' + pgTarget + ' >/dev/null'],
        s.host,
        String(s.port),
        s.username,
        s.databaseName,
        drop,
        // a dump that cannot be read to its end: psql meets an error, and the transaction is rolled back
        "DO $$ BEGIN RAISE EXCEPTION 'pg_restore could not read the dump to its end; nothing was changed'; END $$;",
      ),
      { stdin: withPassword(s.password, source) },
    );
    checkTask('pg_restore into psql', r);
  },
  async count(direct) {
    const c = await pgClient(direct);
    try {
      return { kind: 'tables', tables: await pgTables(c) };
    } finally {
      await c.end().catch(() => undefined);
    }
  },
};

// --- MySQL / MariaDB -------------------------------------------------------------------------

/** The client options file the tool reads its password from (written by the task's shell, 0600). */
const myConf = ['IFS= read -r pw', 'printf "[client]\\npassword=%s\\n" "$pw" > /tmp/slipway.cnf', 'unset pw'];
const myTarget = '--defaults-extra-file=/tmp/slipway.cnf --host="$1" --port="$2" --user="$3"';

export const mysql: EngineTools = {
  compress: true,
  extension: 'sql',
  restoreWhen: 'after-ready',
  async dump(ctx, out) {
    const s = ctx.server;
    const counter = new SqlRowCounter();
    counter.pipe(out);
    const version = await mysqlVersion(ctx.direct);
    const r = await task(
      ctx,
      sh(
        [
          ...myConf,
          'tool=$(command -v mariadb-dump || command -v mysqldump || true)',
          'if [ -z "$tool" ]; then echo "neither mariadb-dump nor mysqldump is in the image" >&2; exit 127; fi',
          `echo "${TOOL_MARK} $("$tool" --version)" >&2`,
          `exec "$tool" ${myTarget} --single-transaction --routines --triggers --events --hex-blob --no-tablespaces "$4"`,
        ],
        s.host,
        String(s.port),
        s.username,
        s.databaseName,
      ),
      { stdin: withPassword(s.password), stdout: counter },
    );
    checkTask('mysqldump', r);
    await new Promise<void>((resolve) => { if (counter.readableEnded || counter.writableFinished) resolve(); else counter.once('finish', () => { resolve(); }); });
    const tables = [...counter.rows].map(([name, rows]) => ({ name, rows })).sort((a, b) => a.name.localeCompare(b.name));
    return { engineVersion: version, tool: toolVersion(r, 'mysqldump'), contents: { kind: 'tables', tables } };
  },
  async restore(ctx, source) {
    const s = ctx.server;
    const r = await task(
      ctx,
      sh([...myConf, 'tool=$(command -v mariadb || command -v mysql)', `exec "$tool" ${myTarget} --batch "$4"`], s.host, String(s.port), s.username, s.databaseName),
      { stdin: withPassword(s.password, source) },
    );
    checkTask('the mysql client', r);
  },
  async replace(ctx, source) {
    // the database's tables and views dropped first (MySQL's DDL is not transactional), then the dump
    const conn = await mysqlConnect(ctx.direct);
    try {
      const [rows] = (await conn.query('SELECT table_name AS name, table_type AS type FROM information_schema.tables WHERE table_schema = DATABASE()')) as unknown as [{ name: string; type: string }[]];
      await conn.query('SET FOREIGN_KEY_CHECKS = 0');
      for (const t of rows) await conn.query(`DROP ${t.type === 'VIEW' ? 'VIEW' : 'TABLE'} IF EXISTS \`${t.name.replace(/`/g, '``')}\``);
    } finally {
      await conn.end().catch(() => undefined);
    }
    await mysql.restore(ctx, source);
  },
  async count(direct) {
    const conn = await mysqlConnect(direct);
    try {
      const [rows] = (await conn.query("SELECT table_name AS name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_type = 'BASE TABLE' ORDER BY 1")) as unknown as [{ name: string }[]];
      if (rows.length > MAX_TABLES) throw new Error(`the database has more than ${String(MAX_TABLES)} tables.`);
      const tables: { name: string; rows: number }[] = [];
      for (const t of rows) {
        const [counted] = (await conn.query(`SELECT count(*) AS n FROM \`${t.name.replace(/`/g, '``')}\``)) as unknown as [{ n: number | string }[]];
        tables.push({ name: t.name, rows: Number(counted[0]?.n ?? 0) });
      }
      return { kind: 'tables', tables };
    } finally {
      await conn.end().catch(() => undefined);
    }
  },
};

async function mysqlConnect(a: DatabaseAddress) {
  const m = await import('mysql2/promise');
  const conn = await m.createConnection({ host: a.host, port: a.port, user: a.username, password: a.password, database: a.databaseName, connectTimeout: 10_000 });
  conn.on('error', () => undefined);
  return conn;
}

async function mysqlVersion(a: DatabaseAddress): Promise<string> {
  const conn = await mysqlConnect(a);
  try {
    const [rows] = (await conn.query('SELECT VERSION() AS v')) as unknown as [{ v: string }[]];
    return `MySQL ${rows[0]?.v ?? 'unknown'}`;
  } finally {
    await conn.end().catch(() => undefined);
  }
}

// --- Redis -----------------------------------------------------------------------------------


const infoField = (info: string, field: string): string | undefined => new RegExp(`^${field}:(.*)$`, 'm').exec(info)?.[1]?.trim();

/** How long a BGSAVE may take before the backup fails. */
const BGSAVE_WAIT_MS = 10 * 60_000;

export const redis: EngineTools = {
  compress: true,
  extension: 'rdb',
  restoreWhen: 'before-start',
  async dump(ctx, out) {
    const c = await redisLogin(ctx.direct);
    let keys = 0;
    let version = 'unknown';
    try {
      version = infoField(await c.info('server'), 'redis_version') ?? 'unknown';
      const deadline = Date.now() + BGSAVE_WAIT_MS;
      const before = Number(infoField(await c.info('persistence'), 'rdb_last_save_time') ?? 0);
      // DBSIZE and the fork in one transaction: the key count is the snapshot's
      for (;;) {
        const replies = await c.multi().dbsize().bgsave().exec();
        const failed = replies?.find(([err]) => err !== null)?.[0];
        if (replies !== null && failed === undefined) {
          keys = Number(replies[0]?.[1] ?? 0);
          break;
        }
        const why = failed instanceof Error ? failed.message : 'the transaction was aborted';
        if (!/in progress/i.test(why) || Date.now() > deadline) throw new Error(`BGSAVE was refused: ${why}`);
        await pause(500, ctx.signal);
      }
      for (;;) {
        const info = await c.info('persistence');
        if (infoField(info, 'rdb_bgsave_in_progress') === '0' && Number(infoField(info, 'rdb_last_save_time') ?? 0) >= before) {
          if (infoField(info, 'rdb_last_bgsave_status') !== 'ok') throw new Error('BGSAVE failed on the server (rdb_last_bgsave_status is not ok; see the database\'s logs).');
          break;
        }
        if (Date.now() > deadline) throw new Error('BGSAVE did not finish in time.');
        await pause(200, ctx.signal);
      }
    } finally {
      c.disconnect();
    }
    const r = await task(ctx, ['cat', '/data/dump.rdb'], { stdout: out, mounts: [{ volume: ctx.volume, path: '/data', readOnly: true }], network: false });
    checkTask('reading the RDB snapshot', r);
    return { engineVersion: `Redis ${version}`, tool: 'BGSAVE (RDB snapshot)', contents: { kind: 'keys', keys } };
  },
  async restore(ctx, source) {
    // the server keeps an append-only file (Redis 7's multi-part layout): the snapshot becomes its base, loaded at the first start
    const r = await task(
      ctx,
      sh([
        'mkdir -p /data/appendonlydir',
        'cat > /data/appendonlydir/appendonly.aof.1.base.rdb',
        'printf "file appendonly.aof.1.base.rdb seq 1 type b\\n" > /data/appendonlydir/appendonly.aof.manifest',
        'chmod -R a+rX,u+w /data/appendonlydir',
      ]),
      { stdin: source, mounts: [{ volume: ctx.volume, path: '/data' }], network: false },
    );
    checkTask('writing the RDB snapshot into the new volume', r);
  },
  // a server of its own: DBSIZE
  count: (direct) => countKeys(direct),
};

/** How long the live server may take to load a scratch server's data set by replication. */
const REPLICATION_WAIT_MS = 10 * 60_000;

/**
 * An in-place restore of Redis without a restart (docs/backups.md#in-place-restore): the live
 * server becomes a replica of `source` (a scratch server holding the backup, reached on the
 * workspace's network), loads its data set by a full resynchronization, and is made a primary
 * again. Whatever happens, it is a primary again at the end, without the scratch server's password.
 */
export async function redisReplicate(live: DatabaseAddress, source: { host: string; port: number; password: string }, signal: AbortSignal): Promise<void> {
  const c = await redisLogin(live);
  try {
    await c.call('CONFIG', 'SET', 'masterauth', source.password);
    await c.call('REPLICAOF', source.host, String(source.port));
    const deadline = Date.now() + REPLICATION_WAIT_MS;
    for (;;) {
      await pause(300, signal);
      const info = await c.info('replication');
      if (infoField(info, 'master_link_status') === 'up' && infoField(info, 'master_sync_in_progress') === '0') break;
      if (Date.now() > deadline) throw new Error(`the server did not load the backup's data set in time (link ${infoField(info, 'master_link_status') ?? 'unknown'}).`);
    }
  } finally {
    await c.call('REPLICAOF', 'NO', 'ONE').catch(() => undefined);
    await c.call('CONFIG', 'SET', 'masterauth', '').catch(() => undefined);
    c.disconnect();
  }
}

// --- MongoDB (the official tools' documented contract; not run on these machines: docs/backups.md#mongodb) ---

const mongoConf = ['IFS= read -r pw', 'printf "password: \\"%s\\"\\n" "$pw" > /tmp/slipway.yaml', 'unset pw'];

export const mongo: EngineTools = {
  compress: false,
  extension: 'archive.gz',
  restoreWhen: 'after-ready',
  async dump(ctx, out) {
    const s = ctx.server;
    const r = await task(
      ctx,
      sh([...mongoConf, `echo "${TOOL_MARK} $(mongodump --version | head -n 1)" >&2`, 'exec mongodump --config=/tmp/slipway.yaml --host="$1" --port="$2" --username="$3" --authenticationDatabase=admin --db="$4" --archive --gzip'], s.host, String(s.port), s.username, s.databaseName),
      { stdin: withPassword(s.password), stdout: out },
    );
    checkTask('mongodump', r);
    return { engineVersion: 'MongoDB', tool: toolVersion(r, 'mongodump'), contents: await mongo.count(ctx.direct) };
  },
  async restore(ctx, source) {
    const s = ctx.server;
    const r = await task(
      ctx,
      sh([...mongoConf, 'exec mongorestore --config=/tmp/slipway.yaml --host="$1" --port="$2" --username="$3" --authenticationDatabase=admin --archive --gzip --drop --nsFrom="$5.*" --nsTo="$4.*"'], s.host, String(s.port), s.username, s.databaseName, s.databaseName),
      { stdin: withPassword(s.password, source) },
    );
    checkTask('mongorestore', r);
  },
  async replace(ctx, source) {
    // --drop replaces each collection of the dump; collections the dump does not have are left (docs/backups.md#mongodb)
    await mongo.restore(ctx, source);
  },
  async count(direct) {
    const { MongoClient } = await import('mongodb');
    const client = new MongoClient(`mongodb://${encodeURIComponent(direct.username)}:${encodeURIComponent(direct.password)}@${direct.host}:${String(direct.port)}/?authSource=admin`, { directConnection: true, serverSelectionTimeoutMS: 10_000 });
    try {
      await client.connect();
      const db = client.db(direct.databaseName);
      const names = (await db.listCollections({}, { nameOnly: true }).toArray()).map((c) => c.name).sort();
      const collections: { name: string; documents: number }[] = [];
      for (const name of names.slice(0, MAX_TABLES)) collections.push({ name, documents: await db.collection(name).countDocuments() });
      return { kind: 'collections', collections };
    } finally {
      await client.close().catch(() => undefined);
    }
  },
};

export const TOOLS: Readonly<Record<DatabaseType, EngineTools>> = { postgresql, mysql, redis, mongo };

/** How an artifact was taken: the server's whole data set, or one tenant's part of a shared server. */
export type DumpLayout = 'server' | 'tenant';

/**
 * The tools of a database's engine for databases provisioned so (`shared`: a tenant on a shared
 * server); for Redis, a shared tenant's backup is its keys, not the server's RDB snapshot.
 */
export const toolsFor = (type: DatabaseType, provisioner: 'container' | 'shared'): EngineTools => (type === 'redis' && provisioner === 'shared' ? redisKeys : TOOLS[type]);

/** The tools that read an artifact back, from its manifest (older manifests: the server's layout). */
export const toolsOfManifest = (m: { database: { type: DatabaseType }; layout?: DumpLayout | undefined }): EngineTools =>
  m.database.type === 'redis' && m.layout === 'tenant' ? redisKeys : TOOLS[m.database.type];

/**
 * Why an artifact cannot be restored into a database provisioned so, or null: a Redis RDB
 * snapshot is a whole server's data set, which a shared server's tenant cannot be given.
 */
export function restoreProblem(m: { database: { type: DatabaseType }; layout?: DumpLayout | undefined }, provisioner: 'container' | 'shared'): string | null {
  if (m.database.type === 'redis' && m.layout !== 'tenant' && provisioner === 'shared') return "it is a snapshot of a whole Redis server (RDB), which cannot be restored into a database on a shared server; restore it into a database of its own server";
  return null;
}

/** Waits (the engine's own sleep), and fails once Slipway is stopping. */
async function pause(ms: number, signal: AbortSignal): Promise<void> {
  await sleep(ms, signal);
  if (signal.aborted) throw new Error('Slipway is stopping');
}

/** The differences between what a manifest says and what a server holds, as sentences; empty when they agree. */
export function compareContents(manifest: Contents, actual: Contents): string[] {
  if (manifest.kind === 'keys' && actual.kind === 'keys') return manifest.keys === actual.keys ? [] : [`${String(actual.keys)} keys where the manifest has ${String(manifest.keys)}`];
  const entries = (c: Contents): Map<string, number> =>
    new Map(c.kind === 'tables' ? c.tables.map((t) => [t.name, t.rows]) : c.kind === 'collections' ? c.collections.map((t) => [t.name, t.documents]) : []);
  const want = entries(manifest);
  const got = entries(actual);
  const out: string[] = [];
  for (const name of new Set([...want.keys(), ...got.keys()])) {
    const w = want.get(name) ?? 0;
    const g = got.get(name) ?? 0;
    if (w !== g) out.push(`${name}: ${String(g)} where the manifest has ${String(w)}`);
  }
  return out.slice(0, 20);
}

/** The contents in a few words ("3 tables, 1,200 rows", "42 keys"). */
export function describeContents(c: Contents): string {
  if (c.kind === 'keys') return `${c.keys.toLocaleString('en-US')} keys`;
  const list = c.kind === 'tables' ? c.tables.map((t) => t.rows) : c.collections.map((t) => t.documents);
  const total = list.reduce((a, b) => a + b, 0);
  return c.kind === 'tables' ? `${String(list.length)} tables, ${total.toLocaleString('en-US')} rows` : `${String(list.length)} collections, ${total.toLocaleString('en-US')} documents`;
}
