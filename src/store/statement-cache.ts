import type { Database, Statement } from 'better-sqlite3';
import type { SqliteDatabase, SqliteStatement } from 'kysely';
import type { DirectReader } from './prepared-query.js';

/** Distinct statements kept prepared; `in (…)` lists of every length each count as one. */
const MAX_STATEMENTS = 500;

/**
 * better-sqlite3 behind Kysely, with each distinct SQL text prepared once. Kysely's SQLite driver
 * prepares every statement anew, which cost a fifth of the API's time on its hot path; a prepared
 * statement is reusable as long as it is not stepped twice at once, which Kysely's single
 * connection (one query at a time, behind its mutex) already guarantees. SQLite re-prepares a
 * statement by itself when a migration changes the schema under it.
 */
export function preparedOnce(database: Database, max = MAX_STATEMENTS): SqliteDatabase & DirectReader {
  const statements = new Map<string, Statement>();
  const prepare = (sql: string): Statement => {
    let statement = statements.get(sql);
    if (statement !== undefined) {
      // most recently used last: Map keeps insertion order
      statements.delete(sql);
    } else {
      statement = database.prepare(sql);
      if (statements.size >= max) {
        const oldest = statements.keys().next().value;
        if (oldest !== undefined) statements.delete(oldest);
      }
    }
    statements.set(sql, statement);
    return statement;
  };
  const dataVersion = database.prepare('PRAGMA data_version').pluck();
  return {
    close: () => {
      statements.clear();
      database.close();
    },
    prepare: (sql: string): SqliteStatement => prepare(sql),
    all: (sql, parameters) => prepare(sql).all(...parameters),
    version: () => dataVersion.get() as number,
  };
}
