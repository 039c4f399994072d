import { CompiledQuery, type Compilable, type Kysely } from 'kysely';
import type { DB } from './schema.js';

const MARK = '\u0000slipway-parameter-';

/** Reads outside Kysely: a second SQLite connection of the same file (see `readsAlongside`). */
export interface DirectReader {
  all(sql: string, parameters: readonly unknown[]): unknown[];
}

const readers = new WeakMap<Kysely<DB>, DirectReader>();

/**
 * Hot-path reads of `db` (not of its transactions) may go to `reader`: on SQLite, a connection of
 * their own, which sees every committed write (WAL) and never what an open transaction of the
 * store's connection has not committed yet, and which needs no turn behind Kysely's single
 * connection. A prepared read through it costs a third of one through Kysely.
 */
export function readsAlongside(db: Kysely<DB>, reader: DirectReader): void {
  readers.set(db, reader);
}

/**
 * A query of the API's hot path, built with Kysely once and then run with new arguments. Kysely
 * builds and compiles a query tree at every call; for the two or three queries behind every
 * request that was a tenth of the time. The query is built once per store kind (the SQL differs
 * between SQLite and PostgreSQL) with a marker in place of each argument; each run puts the
 * arguments where the markers were. Arguments must be plain values the builder passes through
 * unchanged (not lists, which expand to several parameters).
 */
export class PreparedQuery<A extends readonly string[], R> {
  private readonly compiled = new Map<string, { sql: string; slots: readonly ({ arg: number } | { value: unknown })[] }>();

  constructor(
    private readonly arity: A['length'],
    private readonly build: (db: Kysely<DB>, ...args: A) => Compilable<R>,
  ) {}

  /** All the rows, on `db` (the store or a transaction). `kind` keys the SQL: 'sqlite' or 'postgres'. */
  async rows(db: Kysely<DB>, kind: string, ...args: A): Promise<R[]> {
    let template = this.compiled.get(kind);
    if (template === undefined) {
      const marks = Array.from({ length: this.arity }, (_v, i) => `${MARK}${String(i)}`) as unknown as A;
      const { sql, parameters } = this.build(db, ...marks).compile();
      const slots = parameters.map((p) => {
        const i = typeof p === 'string' && p.startsWith(MARK) ? Number(p.slice(MARK.length)) : -1;
        return i >= 0 ? { arg: i } : { value: p };
      });
      if (slots.filter((s) => 'arg' in s).length !== this.arity) throw new Error('a prepared query must use each of its arguments exactly once');
      template = { sql, slots };
      this.compiled.set(kind, template);
    }
    const parameters = template.slots.map((s) => ('arg' in s ? args[s.arg] : s.value));
    const reader = readers.get(db);
    if (reader !== undefined) return reader.all(template.sql, parameters) as R[];
    const result = await db.executeQuery<R>(CompiledQuery.raw(template.sql, parameters));
    return result.rows;
  }

  async first(db: Kysely<DB>, kind: string, ...args: A): Promise<R | undefined> {
    return (await this.rows(db, kind, ...args))[0];
  }
}
