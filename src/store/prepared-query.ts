import { CompiledQuery, type Compilable, type Kysely } from 'kysely';
import type { DB } from './schema.js';

const MARK = '\u0000slipway-parameter-';

/** Reads outside Kysely: a second SQLite connection of the same file (see `readsAlongside`). */
export interface DirectReader {
  all(sql: string, parameters: readonly unknown[]): unknown[];
  /**
   * Changes whenever any other connection (this process's writer, another process) has committed
   * since the last call: SQLite's `PRAGMA data_version` on the reading connection.
   */
  version(): number;
}

/** Answers kept per query (see PreparedQuery.rows). */
const REMEMBERED = 256;

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
  /** per reader: the rows each argument list read, and the database version they were read at */
  private readonly remembered = new WeakMap<DirectReader, Map<string, { version: number; rows: readonly R[] }>>();

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
    if (reader !== undefined) return this.readDirect(reader, template.sql, parameters, args);
    const result = await db.executeQuery<R>(CompiledQuery.raw(template.sql, parameters));
    return result.rows;
  }

  /**
   * On the reading connection, an answer is kept until the database changes: the version is
   * read before the query, so rows kept under a version are never older than the database at
   * that version, and any commit anywhere (a new version) makes the next call read again. The
   * kept rows are frozen and shared between callers.
   */
  private readDirect(reader: DirectReader, sql: string, parameters: readonly unknown[], args: A): R[] {
    let kept = this.remembered.get(reader);
    if (kept === undefined) {
      kept = new Map();
      this.remembered.set(reader, kept);
    }
    const key = args.join('\u0000');
    const version = reader.version();
    const hit = kept.get(key);
    if (hit !== undefined && hit.version === version) return hit.rows as R[];
    const rows = (reader.all(sql, parameters) as R[]).map((row) => Object.freeze(row));
    kept.delete(key);
    if (kept.size >= REMEMBERED) {
      const oldest = kept.keys().next().value;
      if (oldest !== undefined) kept.delete(oldest);
    }
    kept.set(key, { version, rows: Object.freeze(rows) });
    return rows;
  }

  async first(db: Kysely<DB>, kind: string, ...args: A): Promise<R | undefined> {
    return (await this.rows(db, kind, ...args))[0];
  }
}
