import { DEFAULT_PORTS, randomString, type DatabaseType } from '../../domain/database.js';
import { connectRedis } from './servers.js';

/**
 * The `shared` provisioner (docs/databases.md#shared-servers): a database of its own and a user
 * of its own on a server the operator runs (a managed PostgreSQL cluster, a MariaDB, a Redis),
 * instead of a container per database. Slipway logs in to that server with the operator's
 * administrative URL (`--database-shared-<type>`); tenants only ever get their own user.
 *
 * Every name Slipway creates there starts with the installation's prefix (`sw` and six hex
 * digits of its instance id), so two installations can share one server, and the leader can
 * tell its own leftovers (of a deleted workspace) from everything else on it.
 */
export interface SharedServer {
  /** the address apps and the host use: the administrative URL's host and port */
  readonly host: string;
  readonly port: number;
  /** creates (or brings up to date) the tenant's user and database; safe to run again after a crash halfway */
  create(t: SharedTenant): Promise<void>;
  /** drops the tenant's database (its data, its keys) and its user, ending its sessions; a tenant that is not there is no error */
  drop(name: string): Promise<void>;
  /** the names of this installation's tenants on the server (`prefix` is the installation's) */
  tenants(prefix: string): Promise<Set<string>>;
  /** refuses the tenant's logins and ends its sessions, keeping its data (billing's suspension); safe to run again */
  lock(name: string): Promise<void>;
  /** lets the tenant log in again after lock(); safe to run again */
  unlock(name: string): Promise<void>;
}

export interface SharedTenant {
  /** the user's and the database's name (for Redis, the user's, and `name:` its key prefix) */
  name: string;
  password: string;
}

/** The host and port apps reach a shared server at: the administrative URL's. */
export function sharedAddress(type: DatabaseType, url: string): { host: string; port: number } {
  const u = new URL(url);
  const host = u.hostname.startsWith('[') ? u.hostname.slice(1, -1) : u.hostname;
  return { host, port: u.port === '' ? DEFAULT_PORTS[type] : Number(u.port) };
}

/** The installation's prefix of every name on shared servers: `sw` and the first six hex digits of its instance id. */
export const sharedPrefix = (instanceId: string): string => `sw${instanceId.replace(/[^0-9a-f]/gi, '').slice(0, 6).toLowerCase()}_`;

/**
 * A tenant's name: the installation's prefix, the slug (up to 13 characters, `-` as `_`) and
 * 8 random characters, at most 31 in all (MySQL's user names stop at 32). Only `[a-z0-9_]`, so
 * it is a plain identifier on every server.
 */
export function sharedTenantName(prefix: string, slug: string, random: (n: number) => Buffer): string {
  const tail = randomString(random, 8, 'abcdefghijklmnopqrstuvwxyz0123456789');
  const middle = slug.replace(/-/g, '_').slice(0, 13).replace(/_+$/, '');
  return `${prefix}${middle === '' ? '' : `${middle}_`}${tail}`;
}

const PLAIN = /^[a-z0-9_]+$/;

/** A SQL LIKE pattern for the names starting with `prefix` (its `_` escaped: a wildcard in LIKE). */
const startingWith = (prefix: string): string => `${plain(prefix).replace(/_/g, '\\_')}%`;

/** Names go into statements as identifiers: only names Slipway made (`[a-z0-9_]`) ever do. */
function plain(name: string): string {
  if (!PLAIN.test(name)) throw new Error(`"${name}" is not a name Slipway makes on a shared server.`);
  return name;
}

const CONNECT_TIMEOUT_MS = 10_000;

export function sharedServer(type: DatabaseType, url: string): SharedServer {
  const { host, port } = sharedAddress(type, url);
  switch (type) {
    case 'postgresql':
      return { host, port, ...postgres(url) };
    case 'mysql':
      return { host, port, ...mysqlServer(url) };
    case 'redis':
      return { host, port, ...redisServer(url) };
    case 'mongo':
      return { host, port, ...mongoServer(url) };
  }
}

type Operations = Pick<SharedServer, 'create' | 'drop' | 'tenants' | 'lock' | 'unlock'>;

// ---------------------------------------------------------------------------------------------
// PostgreSQL: a LOGIN role and a database it owns; nobody else may connect to that database.

function postgres(url: string): Operations {
  async function withAdmin<T>(fn: (c: import('pg').Client) => Promise<T>): Promise<T> {
    const { default: pg } = await import('pg');
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
    client.on('error', () => undefined);
    await client.connect();
    try {
      return await fn(client);
    } finally {
      await client.end().catch(() => undefined);
    }
  }
  return {
    create: (t) =>
      withAdmin(async (c) => {
        const role = c.escapeIdentifier(plain(t.name));
        const password = c.escapeLiteral(t.password);
        const hasRole = (await c.query('select 1 from pg_roles where rolname = $1', [t.name])).rowCount === 1;
        await c.query(`${hasRole ? 'alter' : 'create'} role ${role} with login nosuperuser nocreatedb nocreaterole noreplication password ${password}`);
        const hasDb = (await c.query('select 1 from pg_database where datname = $1', [t.name])).rowCount === 1;
        if (!hasDb) await c.query(`create database ${role} owner ${role}`);
        // by default every role may connect to a new database (and make temporary tables there)
        await c.query(`revoke all on database ${role} from public`);
      }),
    drop: (name) =>
      withAdmin(async (c) => {
        const ident = c.escapeIdentifier(plain(name));
        // WITH (FORCE) ends the sessions still connected to it (PostgreSQL 13 and later)
        await c.query(`drop database if exists ${ident} with (force)`);
        await c.query(`drop role if exists ${ident}`);
      }),
    tenants: (prefix) =>
      withAdmin(async (c) => {
        const like = startingWith(prefix);
        const roles = await c.query<{ name: string }>('select rolname as name from pg_roles where rolname like $1', [like]);
        const dbs = await c.query<{ name: string }>('select datname as name from pg_database where datname like $1', [like]);
        return new Set([...roles.rows, ...dbs.rows].map((r) => r.name));
      }),
    lock: (name) =>
      withAdmin(async (c) => {
        await c.query(`alter role ${c.escapeIdentifier(plain(name))} nologin`);
        await c.query('select pg_terminate_backend(pid) from pg_stat_activity where usename = $1', [name]);
      }),
    unlock: (name) =>
      withAdmin(async (c) => {
        await c.query(`alter role ${c.escapeIdentifier(plain(name))} login`);
      }),
  };
}

// ---------------------------------------------------------------------------------------------
// MySQL and MariaDB: a database and a user with every privilege on it alone.

function mysqlServer(url: string): Operations {
  async function withAdmin<T>(fn: (c: import('mysql2/promise').Connection) => Promise<T>): Promise<T> {
    const mysql = await import('mysql2/promise');
    const u = new URL(url);
    // mysql2 reads mysql:// URLs only
    const conn = await mysql.createConnection({ uri: u.protocol === 'mariadb:' ? `mysql:${url.slice('mariadb:'.length)}` : url, connectTimeout: CONNECT_TIMEOUT_MS, multipleStatements: false });
    conn.on('error', () => undefined);
    try {
      return await fn(conn);
    } finally {
      await conn.end().catch(() => undefined);
    }
  }
  // in GRANT, `_` and `%` in a database name are wildcards: escaped, the grant names this database alone
  const grantName = (name: string): string => plain(name).replace(/_/g, '\\_');
  const endSessions = async (c: import('mysql2/promise').Connection, name: string): Promise<void> => {
    const [rows] = await c.query('select id from information_schema.processlist where user = ?', [name]);
    for (const r of rows as { id: number }[]) await c.query('kill ?', [r.id]).catch(() => undefined);
  };
  return {
    create: (t) =>
      withAdmin(async (c) => {
        const name = plain(t.name);
        await c.query(`create database if not exists \`${name}\``);
        await c.query("create user if not exists ?@'%' identified by ?", [name, t.password]);
        await c.query("alter user ?@'%' identified by ?", [name, t.password]);
        await c.query(`grant all privileges on \`${grantName(name)}\`.* to ?@'%'`, [name]);
      }),
    drop: (name) =>
      withAdmin(async (c) => {
        plain(name);
        await c.query("drop user if exists ?@'%'", [name]);
        await endSessions(c, name);
        await c.query(`drop database if exists \`${name}\``);
      }),
    tenants: (prefix) =>
      withAdmin(async (c) => {
        const like = startingWith(prefix);
        const [users] = await c.query('select user as name from mysql.user where user like ?', [like]);
        const [dbs] = await c.query('select schema_name as name from information_schema.schemata where schema_name like ?', [like]);
        return new Set([...(users as { name: string }[]), ...(dbs as { name: string }[])].map((r) => r.name));
      }),
    lock: (name) =>
      withAdmin(async (c) => {
        await c.query("alter user ?@'%' account lock", [plain(name)]);
        await endSessions(c, name);
      }),
    unlock: (name) =>
      withAdmin(async (c) => {
        await c.query("alter user ?@'%' account unlock", [plain(name)]);
      }),
  };
}

// ---------------------------------------------------------------------------------------------
// Redis: an ACL user that reaches only the keys and channels under its prefix `<name>:`.

/**
 * What a tenant's user may not run, besides the `@admin` and `@dangerous` categories (KEYS,
 * FLUSHALL, INFO, CONFIG, MONITOR, …): commands that are not bound to keys and so would list,
 * count, move or drop what other tenants keep (SCAN, RANDOMKEY, DBSIZE, SELECT, MOVE, PUBSUB
 * CHANNELS, FUNCTION, SCRIPT FLUSH, tracking every key).
 */
const REDIS_DENIED = ['-@admin', '-@dangerous', '-scan', '-randomkey', '-dbsize', '-select', '-move', '-pubsub', '-function', '-fcall', '-fcall_ro', '-script|flush', '-script|kill', '-client|tracking'];

/** The ACL rules of a tenant (ACL SETUSER), its password included. */
export function redisAclRules(t: SharedTenant): string[] {
  const prefix = `${plain(t.name)}:`;
  return ['reset', 'on', `>${t.password}`, `~${prefix}*`, `&${prefix}*`, '+@all', ...REDIS_DENIED];
}

function redisServer(url: string): Operations {
  async function withAdmin<T>(fn: (c: import('ioredis').Redis) => Promise<T>): Promise<T> {
    const { Redis } = await import('ioredis');
    const client = new Redis(url, { connectTimeout: CONNECT_TIMEOUT_MS, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, enableOfflineQueue: false });
    await connectRedis(client);
    try {
      return await fn(client);
    } finally {
      client.disconnect();
    }
  }
  /** Keeps the users in the server's ACL file, when it has one (without one, they live until the server restarts: docs). */
  const save = async (c: import('ioredis').Redis): Promise<void> => {
    await c.call('ACL', 'SAVE').catch((err: unknown) => {
      if (!String(err).includes('ACL file')) throw err;
    });
  };
  return {
    create: (t) =>
      withAdmin(async (c) => {
        await c.call('ACL', 'SETUSER', plain(t.name), ...redisAclRules(t));
        await save(c);
      }),
    drop: (name) =>
      withAdmin(async (c) => {
        const user = plain(name);
        // no new logins, no session left, then its keys a batch at a time, and the user last: a
        // crash halfway leaves the user, which the leader finds and drops again
        await c.call('ACL', 'SETUSER', user, 'off');
        await c.call('CLIENT', 'KILL', 'USER', user).catch(() => undefined);
        let cursor = '0';
        do {
          const [next, keys] = (await c.call('SCAN', cursor, 'MATCH', `${user}:*`, 'COUNT', '1000')) as [string, string[]];
          if (keys.length > 0) await c.call('UNLINK', ...keys);
          cursor = next;
        } while (cursor !== '0');
        await c.call('ACL', 'DELUSER', user);
        await save(c);
      }),
    tenants: (prefix) =>
      withAdmin(async (c) => {
        const users = (await c.call('ACL', 'USERS')) as string[];
        return new Set(users.filter((u) => u.startsWith(plain(prefix))));
      }),
    lock: (name) =>
      withAdmin(async (c) => {
        await c.call('ACL', 'SETUSER', plain(name), 'off');
        await c.call('CLIENT', 'KILL', 'USER', name).catch(() => undefined);
        await save(c);
      }),
    unlock: (name) =>
      withAdmin(async (c) => {
        await c.call('ACL', 'SETUSER', plain(name), 'on');
        await save(c);
      }),
  };
}

// ---------------------------------------------------------------------------------------------
// MongoDB: a user in `admin` (hence authSource=admin, as for the container) owning its own database.

function mongoServer(url: string): Operations {
  async function withAdmin<T>(fn: (c: import('mongodb').MongoClient) => Promise<T>): Promise<T> {
    const { MongoClient } = await import('mongodb');
    const client = new MongoClient(url, { serverSelectionTimeoutMS: CONNECT_TIMEOUT_MS, connectTimeoutMS: CONNECT_TIMEOUT_MS });
    await client.connect();
    try {
      return await fn(client);
    } finally {
      await client.close().catch(() => undefined);
    }
  }
  const USER_EXISTS = 51003;
  const USER_NOT_FOUND = 11;
  const codeOf = (err: unknown): number | undefined => (typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'number' ? err.code : undefined);
  return {
    create: (t) =>
      withAdmin(async (c) => {
        const name = plain(t.name);
        const admin = c.db('admin');
        const roles = [{ role: 'dbOwner', db: name }];
        try {
          await admin.command({ createUser: name, pwd: t.password, roles });
        } catch (err) {
          if (codeOf(err) !== USER_EXISTS) throw err;
          await admin.command({ updateUser: name, pwd: t.password, roles });
        }
      }),
    drop: (name) =>
      withAdmin(async (c) => {
        plain(name);
        try {
          await c.db('admin').command({ dropUser: name });
        } catch (err) {
          if (codeOf(err) !== USER_NOT_FOUND) throw err;
        }
        await c.db(name).dropDatabase();
      }),
    tenants: (prefix) =>
      withAdmin(async (c) => {
        const p = plain(prefix);
        const users = (await c.db('admin').command({ usersInfo: 1 })) as { users?: { user: string }[] };
        const dbs = await c.db('admin').admin().listDatabases({ nameOnly: true });
        return new Set([...(users.users ?? []).map((u) => u.user), ...dbs.databases.map((d) => d.name)].filter((n) => n.startsWith(p)));
      }),
    // MongoDB has no account lock: the user keeps its password and loses its role (its sessions
    // then can do nothing), and gets it back
    lock: (name) =>
      withAdmin(async (c) => {
        await c.db('admin').command({ updateUser: plain(name), roles: [] });
      }),
    unlock: (name) =>
      withAdmin(async (c) => {
        await c.db('admin').command({ updateUser: plain(name), roles: [{ role: 'dbOwner', db: plain(name) }] });
      }),
  };
}
