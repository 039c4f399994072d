import type { Database, Statement } from 'better-sqlite3';
import type { SqliteDatabase, SqliteStatement } from 'kysely';
import type { DirectReader } from './prepared-query.js';

/** Distinct statements kept prepared; `in (…)` lists of every length each count as one. */
const MAX_STATEMENTS = 500;

/**
 * Statements run on any store connection of this process, counted when they are prepared, which
 * is just before they run: Kysely prepares and runs a statement in one synchronous step, so no
 * read can come between the count and the statement's effect. A reader's version moves with it,
 * so this process's own commits are seen by the next read, whatever the event-loop turn.
 */
let statementsRun = 0;

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
  // Other processes' commits (another replica, `slipway admin`) show in `PRAGMA data_version`,
  // which costs two file-lock system calls: it is read at most once per event-loop turn, the
  // first time it is asked, and the turn's other reads use what it said. Such a commit is thus
  // seen from the next turn on (a few milliseconds at most under load), where a read per request
  // cost a seventh of the API's time; this process's own commits are seen at once.
  let external = 0;
  let lastSeen: number | undefined;
  let sampled = false;
  const nextTurn = (): void => {
    sampled = false;
  };
  return {
    close: () => {
      statements.clear();
      database.close();
    },
    // Kysely's way in, which may write
    prepare: (sql: string): SqliteStatement => {
      statementsRun += 1;
      return prepare(sql);
    },
    // the hot path's reads (prepared-query.ts), which never write
    all: (sql, parameters) => prepare(sql).all(...parameters),
    version: () => {
      if (!sampled) {
        sampled = true;
        setImmediate(nextTurn);
        const seen = dataVersion.get() as number;
        if (seen !== lastSeen) {
          lastSeen = seen;
          external += 1;
        }
      }
      // both only grow: the sum moves whenever either does
      return external + statementsRun;
    },
  };
}
