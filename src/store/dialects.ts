/**
 * The few places where SQLite and PostgreSQL differ, each with its reason. Everything else in
 * the store is one query layer (Kysely) over the same schema.
 */
import { Duplicate } from '../domain/errors.js';

export type Dialect = 'sqlite' | 'postgres';

interface DriverError {
  code?: unknown;
}

/**
 * A unique-constraint violation. better-sqlite3 reports `SQLITE_CONSTRAINT_UNIQUE` (or
 * `SQLITE_CONSTRAINT_PRIMARYKEY`); pg reports SQLSTATE 23505; a repository that already said
 * which value was taken throws the domain's Duplicate.
 */
export function isUniqueViolation(err: unknown): boolean {
  if (err instanceof Duplicate) return true;
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

/**
 * Runs a write; a unique violation becomes the domain's Duplicate with `message` (409), anything
 * else is thrown as it is. Inside a transaction the error still rolls the transaction back.
 */
export async function orDuplicate<T>(write: Promise<T>, message: () => string): Promise<T> {
  try {
    return await write;
  } catch (err) {
    if (isUniqueViolation(err) && !(err instanceof Duplicate)) throw new Duplicate(message(), { cause: err });
    throw err;
  }
}
