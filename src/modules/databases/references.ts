import { connectionString, keyPrefixOf, type DatabaseType } from '../../domain/database.js';
import type { DatabaseRow } from '../../store/repositories/index.js';

/**
 * `${{databases.<db_slug>.<field>}}` in an env var's value: replaced at every deploy (and
 * restart) with that database's current value, so an app is wired to its database without the
 * secret being copied into its variables (docs/databases.md#references).
 */
export const REFERENCE_FIELDS = ['connection_string', 'host', 'port', 'username', 'password', 'database_name', 'key_prefix'] as const;
export type ReferenceField = (typeof REFERENCE_FIELDS)[number];

const REFERENCE = /\$\{\{\s*databases\.([^.}\s]*)\.([^}\s]*)\s*\}\}/g;

export interface Reference {
  /** the text as written, e.g. `${{databases.orders.password}}` */
  text: string;
  slug: string;
  field: string;
}

export function referencesIn(value: string): Reference[] {
  if (!value.includes('${{')) return [];
  return [...value.matchAll(REFERENCE)].map((m) => ({ text: m[0], slug: m[1] ?? '', field: m[2] ?? '' }));
}

const isField = (f: string): f is ReferenceField => (REFERENCE_FIELDS as readonly string[]).includes(f);

/**
 * Why the references in `value` cannot be resolved in a workspace with these databases, as a
 * sentence, or null. `what` names the variable.
 */
export function referenceProblem(what: string, value: string, databases: ReadonlyMap<string, Pick<DatabaseRow, 'status'>>): string | null {
  for (const r of referencesIn(value)) {
    if (!isField(r.field)) return `${what} references "${r.text}": a database reference ends in one of ${REFERENCE_FIELDS.join(', ')}.`;
    const db = databases.get(r.slug);
    if (db === undefined || db.status === 'deleting') return `${what} references the database "${r.slug}", which does not exist in this workspace.`;
  }
  return null;
}

/** The value with every reference replaced; `password` opens a database's sealed password. Throws the problem's sentence for a database that is gone. */
export function resolveReferences(what: string, value: string, databases: ReadonlyMap<string, DatabaseRow>, password: (row: DatabaseRow) => string): string {
  const problem = referenceProblem(what, value, databases);
  if (problem !== null) throw new Error(problem);
  return value.replace(REFERENCE, (_m, slug: string, field: string) => {
    const db = databases.get(slug);
    if (db === undefined) return '';
    const address = { type: db.type as DatabaseType, host: db.host, port: db.port, username: db.username, password: field === 'password' || field === 'connection_string' ? password(db) : '', databaseName: db.database_name };
    switch (field as ReferenceField) {
      case 'connection_string':
        return connectionString(address);
      case 'host':
        return db.host;
      case 'port':
        return db.port.toString();
      case 'username':
        return db.username;
      case 'password':
        return address.password;
      case 'database_name':
        return db.database_name;
      case 'key_prefix':
        return keyPrefixOf(db) ?? '';
    }
  });
}
