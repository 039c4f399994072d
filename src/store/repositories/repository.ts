import type { Kysely } from 'kysely';
import type { Dialect } from '../dialects.js';
import type { DB } from '../schema.js';

/**
 * What every repository is built from: the store's Kysely instance, or a transaction of it
 * (both are Kysely<DB>), and the dialect for the few statements that differ.
 */
export abstract class Repository {
  constructor(
    protected readonly db: Kysely<DB>,
    protected readonly dialect: Dialect,
  ) {}
}
