import { chmodSync, closeSync, existsSync, mkdirSync, openSync } from 'node:fs';
import { dirname } from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, Migrator, PostgresDialect, SqliteDialect } from 'kysely';
import type { Dialect } from './dialects.js';
import { migrationProvider } from './migrations/index.js';
import { AccessCache } from './repositories/access-cache.js';
import { repositories, type Repositories } from './repositories/index.js';
import { readsAlongside } from './prepared-query.js';
import { preparedOnce } from './statement-cache.js';
import type { DB } from './schema.js';
import { isPostgresUrl } from './url.js';

export interface Store {
  /**
   * For the migrations, tests of the store itself, and the log store's PostgreSQL driver
   * (src/modules/logs), whose tables live in this database but outside the repositories.
   */
  readonly db: Kysely<DB>;
  readonly dialect: Dialect;
  /** Every query of the control plane's tables goes through these. */
  readonly repos: Repositories;
  /** Runs `fn` in one transaction, with repositories bound to it; a throw rolls everything back. */
  transaction<T>(fn: (tx: Repositories) => Promise<T>): Promise<T>;
  /** Where the data lives, without credentials, for logs. */
  readonly description: string;
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** The part of the store a worker uses: these repositories, and transactions over them (a Store is one). */
export interface StoreOf<K extends keyof Repositories> {
  readonly repos: Pick<Repositories, K>;
  transaction<T>(fn: (tx: Pick<Repositories, K>) => Promise<T>): Promise<T>;
}

export { isPostgresUrl };

/** `postgres://…` selects PostgreSQL; anything else is an SQLite file path (`sqlite:` optional). */
export async function createStore(url: string, opts: { upTo?: string; readConnection?: boolean } = {}): Promise<Store> {
  // pg is loaded only for PostgreSQL
  const store = isPostgresUrl(url) ? openPostgres(url, (await import('pg')).default) : openSqlite(url.replace(/^sqlite:/, ''), opts.readConnection ?? true);
  try {
    await migrate(store, opts.upTo);
  } catch (err) {
    await store.close();
    throw err;
  }
  return store;
}

/**
 * The store holds key digests, sealed secrets and every tenant's data: its files are the
 * owner's only (0600). SQLite creates the -wal and -shm files with the database file's mode, so
 * the database file is made 0600 before SQLite opens it; an older install's files are corrected.
 */
function ownerOnly(file: string): void {
  if (!existsSync(file)) closeSync(openSync(file, 'a', 0o600));
  for (const f of [file, `${file}-wal`, `${file}-shm`, `${file}-journal`]) {
    if (existsSync(f)) chmodSync(f, 0o600);
  }
}

/** `readConnection`: the API's hot-path reads get a connection of their own (a one-shot command needs none). */
function openSqlite(file: string, readConnection: boolean): Store {
  if (file !== ':memory:') {
    mkdirSync(dirname(file), { recursive: true });
    ownerOnly(file);
  }
  const database = new SQLite(file);
  // WAL lets readers proceed during a write; busy_timeout waits instead of failing when another
  // process (the `slipway admin` command) holds the write lock; foreign keys are off by default.
  database.pragma('journal_mode = WAL');
  database.pragma('busy_timeout = 5000');
  database.pragma('foreign_keys = ON');
  database.pragma('synchronous = NORMAL');
  if (file !== ':memory:') ownerOnly(file);
  const db = new Kysely<DB>({ dialect: new SqliteDialect({ database: preparedOnce(database) }) });
  // the hot path's reads on a connection of their own (prepared-query.ts); an in-memory database
  // is private to its connection, so it has none
  const reader = file === ':memory:' || !readConnection ? undefined : new SQLite(file);
  if (reader !== undefined) {
    reader.pragma('busy_timeout = 5000');
    readsAlongside(db, preparedOnce(reader));
  }
  return {
    ...withRepositories(db, 'sqlite'),
    description: `sqlite:${file}`,
    ping: async () => {
      await db.selectFrom('users').select('id').limit(1).execute();
    },
    close: async () => {
      reader?.close();
      await db.destroy();
    },
  };
}

function openPostgres(url: string, pg: typeof import('pg').default): Store {
  const pool = new pg.Pool({ connectionString: url, max: 10 });
  // An idle client that loses its server emits 'error' on the pool; without a listener that
  // would crash the process. The next query reports the failure instead.
  pool.on('error', () => undefined);
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
  const safe = new URL(url);
  safe.password = '';
  return {
    ...withRepositories(db, 'postgres'),
    description: safe.toString(),
    ping: async () => {
      await db.selectFrom('users').select('id').limit(1).execute();
    },
    close: () => db.destroy(),
  };
}

function withRepositories(db: Kysely<DB>, dialect: Dialect): Pick<Store, 'db' | 'dialect' | 'repos' | 'transaction'> {
  const cache = new AccessCache();
  return {
    db,
    dialect,
    repos: repositories(db, dialect, cache),
    transaction: async (fn) => {
      const scoped = cache.forTransaction();
      const result = await db.transaction().execute((trx) => fn(repositories(trx, dialect, scoped)));
      scoped.committed();
      return result;
    },
  };
}

/** Migrate to the latest version, or (for tests of a migration itself) up to a named one. */
async function migrate(store: Store, upTo?: string): Promise<void> {
  const migrator = new Migrator({ db: store.db, provider: migrationProvider(store.dialect) });
  const { error, results } = upTo === undefined ? await migrator.migrateToLatest() : await migrator.migrateTo(upTo);
  if (error !== undefined) {
    const failed = results?.find((r) => r.status === 'Error')?.migrationName ?? 'unknown';
    throw new Error(`Store migration ${failed} failed: ${error instanceof Error ? error.message : JSON.stringify(error)}`);
  }
}

/** This installation's id (made by the migrations, stable for the life of the store). */
export function instanceId(store: Store): Promise<string> {
  return store.repos.meta.instanceId();
}
