// The administrative URL of a shared database server, checked without loading the servers' clients
// (the settings read it at every start of the CLI).
import type { DatabaseType } from '../../domain/database.js';

/** The URL schemes the administrative URL of each type may have. */
const SCHEMES: Readonly<Record<DatabaseType, readonly string[]>> = {
  postgresql: ['postgres:', 'postgresql:'],
  mysql: ['mysql:', 'mariadb:'],
  redis: ['redis:', 'rediss:'],
  mongo: ['mongodb:'],
};

/** Why `url` cannot be the administrative URL of a shared `type` server, or null (config validation). */
export function sharedUrlProblem(type: DatabaseType, url: string): string | null {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return 'is not a URL';
  }
  if (!SCHEMES[type].includes(u.protocol)) return `must start with ${SCHEMES[type].map((s) => `${s}//`).join(' or ')}`;
  if (u.hostname === '') return 'names no host';
  return null;
}
