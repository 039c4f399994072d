import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';

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

/** A fresh, empty store of the given kind: an SQLite file in a temp dir, or a new PostgreSQL database. */
export async function freshDatabase(kind: StoreKind): Promise<TestDatabase> {
  const dir = mkdtempSync(join(tmpdir(), 'slipway-test-'));
  if (kind === 'sqlite') {
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
  const admin = new pg.Client({ connectionString: pgAdminUrl() });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(pgAdminUrl());
  url.pathname = `/${name}`;
  return {
    kind,
    url: url.toString(),
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
