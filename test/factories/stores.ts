import { copyFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes, randomUUID } from 'node:crypto';
import Database from 'better-sqlite3';
import pg from 'pg';
import { createStore } from '../../src/store/db.js';

export type StoreKind = 'sqlite' | 'postgres';
export const STORE_KINDS: StoreKind[] = ['sqlite', 'postgres'];

export const pgAdminUrl = (): string => process.env['SLIPWAY_TEST_PG_URL'] ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export interface TestDatabase {
  kind: StoreKind;
  url: string;
  /** a scratch directory that goes with the database */
  dir: string;
  drop(): Promise<void>;
}

/**
 * Templates of a migrated store, made once per test run by the global setup (test/global-setup.ts):
 * a fresh store copied from one skips the migrations (about 2 s on PostgreSQL, 0.4 s on SQLite,
 * on a busy 2-core machine), for each of the hundreds of test servers of a run.
 */
const SQLITE_TEMPLATE = 'SLIPWAY_TEST_SQLITE_TEMPLATE';
const PG_TEMPLATE = 'SLIPWAY_TEST_PG_TEMPLATE';

/** Makes the two templates and names them in the environment the test workers inherit; answers how to drop them. */
export async function makeStoreTemplates(): Promise<() => Promise<void>> {
  const dir = mkdtempSync(join(tmpdir(), 'slipway-template-'));
  const file = join(dir, 'slipway.db');
  await (await createStore(file)).close();
  const name = `slipway_tpl_${randomBytes(6).toString('hex')}`;
  await adminQuery(`CREATE DATABASE ${name}`);
  await (await createStore(databaseUrl(name))).close();
  process.env[SQLITE_TEMPLATE] = file;
  process.env[PG_TEMPLATE] = name;
  return async () => {
    rmSync(dir, { recursive: true, force: true });
    await adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  };
}

async function adminQuery(text: string): Promise<void> {
  const admin = new pg.Client({ connectionString: pgAdminUrl() });
  await admin.connect();
  try {
    await admin.query(text);
  } finally {
    await admin.end();
  }
}

function databaseUrl(name: string): string {
  const url = new URL(pgAdminUrl());
  url.pathname = `/${name}`;
  return url.toString();
}

// The copy is another installation: its own instance id (a migration wrote the template's), which
// labels what its engine creates on Docker and is what purges select.
const NEW_INSTANCE = `update meta set value = $1 where key = 'instance_id'`;

/**
 * A fresh store of the given kind: an SQLite file in a temp dir, or a new PostgreSQL database.
 * Empty by default (a test that migrates it step by step); `migrated`: with every migration applied,
 * copied from the run's template when the global setup made one.
 */
export async function freshDatabase(kind: StoreKind, opts: { migrated?: boolean } = {}): Promise<TestDatabase> {
  const dir = mkdtempSync(join(tmpdir(), 'slipway-test-'));
  const sqliteTemplate = opts.migrated === true ? process.env[SQLITE_TEMPLATE] : undefined;
  const pgTemplate = opts.migrated === true ? process.env[PG_TEMPLATE] : undefined;
  if (kind === 'sqlite') {
    if (sqliteTemplate !== undefined && existsSync(sqliteTemplate)) {
      copyFileSync(sqliteTemplate, join(dir, 'slipway.db'));
      const db = new Database(join(dir, 'slipway.db'));
      try {
        db.prepare(NEW_INSTANCE.replace('$1', '?')).run(randomUUID());
      } finally {
        db.close();
      }
    }
    return {
      kind,
      url: join(dir, 'slipway.db'),
      dir,
      drop: () => {
        rmSync(dir, { recursive: true, force: true });
        return Promise.resolve();
      },
    };
  }
  const name = `slipway_t_${randomBytes(6).toString('hex')}`;
  await adminQuery(pgTemplate === undefined ? `CREATE DATABASE ${name}` : `CREATE DATABASE ${name} TEMPLATE ${pgTemplate}`);
  const url = databaseUrl(name);
  if (pgTemplate !== undefined) {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      await c.query(NEW_INSTANCE, [randomUUID()]);
    } finally {
      await c.end();
    }
  }
  return {
    kind,
    url,
    dir,
    drop: async () => {
      rmSync(dir, { recursive: true, force: true });
      const c = new pg.Client({ connectionString: pgAdminUrl() });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}
