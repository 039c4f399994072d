/**
 * The few places where SQLite and PostgreSQL differ, each with its reason. Everything else in
 * the store is one query layer (Kysely) over the same schema.
 */
export type Dialect = 'sqlite' | 'postgres';

interface DriverError {
  code?: unknown;
}

/**
 * A unique-constraint violation. better-sqlite3 reports `SQLITE_CONSTRAINT_UNIQUE` (or
 * `SQLITE_CONSTRAINT_PRIMARYKEY`); pg reports SQLSTATE 23505.
 */
export function isUniqueViolation(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const code = (err as DriverError).code;
  return code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
}

/** pg returns `count(*)` and bigint columns as strings (they can exceed 2^53); SQLite as numbers. */
export const toNumber = (value: string | number | bigint): number => Number(value);

/**
 * Serialize membership changes of one workspace inside a transaction, so that two concurrent
 * demotions cannot both see "another owner remains". PostgreSQL needs a row lock; SQLite
 * already runs one writing transaction at a time (and `FOR UPDATE` compiles there, then fails).
 */
export function lockClause(dialect: Dialect): boolean {
  return dialect === 'postgres';
}
