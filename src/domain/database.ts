/**
 * Managed databases: the four kinds, their statuses and the facts of each kind that do not
 * depend on how it is provisioned (docs/databases.md).
 */

export const DATABASE_TYPES = ['postgresql', 'mysql', 'redis', 'mongo'] as const;
export type DatabaseType = (typeof DATABASE_TYPES)[number];

export const isDatabaseType = (value: string): value is DatabaseType => (DATABASE_TYPES as readonly string[]).includes(value);

/**
 * `provisioning` until a real login with the credentials succeeded, then `running`; `failed`
 * with a readable error; `deleting` while its container and volume are removed; `suspended`
 * while its workspace's wallet stays empty past the grace period (its server stopped, its
 * volume kept; `running` again after a top-up).
 */
export const DATABASE_STATUSES = ['provisioning', 'running', 'failed', 'deleting', 'suspended'] as const;
export type DatabaseStatus = (typeof DATABASE_STATUSES)[number];

export const DATABASE_PROVISIONERS = ['container', 'shared'] as const;
export type DatabaseProvisioner = (typeof DATABASE_PROVISIONERS)[number];

/** The label that names the database a container or volume belongs to. */
export const DATABASE_LABEL = 'slipway.database';

/** How to reach one database and log in. */
export interface DatabaseAddress {
  type: DatabaseType;
  host: string;
  port: number;
  username: string;
  password: string;
  databaseName: string;
}

/** The port each server listens on inside its container. */
export const DEFAULT_PORTS: Readonly<Record<DatabaseType, number>> = { postgresql: 5432, mysql: 3306, redis: 6379, mongo: 27017 };

/** The user apps log in as: `slipway`, but Redis's password (`requirepass`) belongs to its `default` user. */
export const usernameFor = (type: DatabaseType): string => (type === 'redis' ? 'default' : 'slipway');

/** A Redis database on a shared server reaches only the keys (and channels) under `<its user>:`; the others have no prefix. */
export const keyPrefixOf = (db: { type: string; provisioner: string; username: string }): string | null =>
  db.type === 'redis' && db.provisioner === 'shared' ? `${db.username}:` : null;

/** The URL-style connection string (docs/databases.md#the-record): what apps put in DATABASE_URL and friends. */
export function connectionString(a: DatabaseAddress): string {
  const user = encodeURIComponent(a.username);
  const pass = encodeURIComponent(a.password);
  const at = `${user}:${pass}@${hostPart(a.host)}:${a.port.toString()}`;
  switch (a.type) {
    case 'postgresql':
      return `postgresql://${at}/${encodeURIComponent(a.databaseName)}`;
    case 'mysql':
      return `mysql://${at}/${encodeURIComponent(a.databaseName)}`;
    case 'redis':
      return `redis://${at}/0`;
    case 'mongo':
      return `mongodb://${at}/${encodeURIComponent(a.databaseName)}?authSource=admin`;
  }
}

const hostPart = (host: string): string => (host.includes(':') ? `[${host}]` : host);

/** 32 characters of [A-Za-z0-9] from `bytes` (a CSPRNG): safe in every connection string without escaping. */
export const generatePassword = (bytes: (n: number) => Buffer, length = 32): string =>
  randomString(bytes, length, 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789');

/**
 * `length` characters of `alphabet`, each equally likely, from `bytes` (a CSPRNG): a byte at or
 * above the largest multiple of the alphabet's size (248 for 62 letters) would make the first
 * letters likelier, so it is drawn again.
 */
export function randomString(bytes: (n: number) => Buffer, length: number, alphabet: string): string {
  const limit = Math.floor(256 / alphabet.length) * alphabet.length;
  let out = '';
  while (out.length < length) {
    for (const b of bytes(length * 2)) {
      if (b < limit && out.length < length) out += alphabet.charAt(b % alphabet.length);
    }
  }
  return out;
}

/** How a password is shown after the create response: like an API key, never again in full. */
export const MASKED_PASSWORD = '********';
