import type { Kysely } from 'kysely';
import type { Dialect } from '../dialects.js';
import type { DB } from '../schema.js';
import type { AccessCache } from './access-cache.js';

/**
 * What every repository is built from: the store's Kysely instance, or a transaction of it
 * (both are Kysely<DB>), the dialect for the few statements that differ, and the store's cache
 * of keys and memberships (AccessCache), which the repositories that change them invalidate.
 */
export abstract class Repository {
  constructor(
    protected readonly db: Kysely<DB>,
    protected readonly dialect: Dialect,
    protected readonly cache: AccessCache,
  ) {}

  /** Reads outside a transaction may come from the cache; inside one they see the transaction. */
  protected get cacheable(): boolean {
    return !this.db.isTransaction;
  }
}
