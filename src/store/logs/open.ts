import { dirname, join } from 'node:path';
import type { LogStore } from '../../domain/logs.js';
import type { Store } from '../db.js';
import { PostgresLogStore } from './postgres.log-store.js';
import { SqliteLogStore } from './sqlite.log-store.js';

/** The log file of an SQLite store: `logs.db` next to the store's own file. */
export const sqliteLogFile = (storeFile: string): string => join(dirname(storeFile), 'logs.db');

/**
 * The log store that goes with the main store: PostgreSQL keeps the logs in its own database
 * (every replica sees them), SQLite in a file of their own (docs/logs.md#layout).
 */
export function openLogStore(store: Store, sqliteFile: string): LogStore {
  switch (store.dialect) {
    case 'postgres':
      return new PostgresLogStore(store.db);
    case 'sqlite':
      return new SqliteLogStore(sqliteFile);
  }
}
