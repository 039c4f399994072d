import type { DatabaseAddress, DatabaseType } from '../../domain/database.js';

/**
 * How each kind of server is started in a container of its own, following its official image's
 * documented contract (docs/databases.md#images): the environment it reads on first start, the
 * command, and where it keeps its data. The locally built `slipway-local/<type>` images honour
 * the same contract (scripts/ensure-db-images.sh).
 */
export interface ServerContract {
  /** the production default (`--database-image-<type>`) */
  defaultImage: string;
  /** the data directory inside the container: the database's volume is mounted there */
  dataPath: string;
  /** `freshSecret`: a new random password, for a credential nobody keeps (MySQL's root) */
  env(a: DatabaseAddress, freshSecret: () => string): Record<string, string>;
  /** replaces the image's command; undefined keeps it */
  command?(a: DatabaseAddress): string[];
}

/** The environment variable a Redis container gets its password in. */
export const REDIS_PASSWORD_ENV = 'SLIPWAY_REDIS_PASSWORD';

/**
 * How a Redis container starts: Redis reads its password from no environment variable, and
 * `--requirepass` would show it on the command line (to `ps` and `docker inspect`), so a shell
 * writes it into a config file only the server's user can read, drops the variable, and hands
 * over to the image's own entrypoint (which makes /data the redis user's and runs the server as
 * that user) with the file as the server's config. The password is `[A-Za-z0-9]` (generatePassword),
 * safe in double quotes. The options after the file are the official image's defaults, spelt out:
 * a config file turns off the local image's own.
 */
const REDIS_START = [
  'set -e',
  'umask 077',
  'conf=/tmp/slipway-redis.conf',
  `printf 'requirepass "%s"\\n' "$${REDIS_PASSWORD_ENV}" > "$conf"`,
  `unset ${REDIS_PASSWORD_ENV}`,
  'if [ "$(id -u)" = 0 ] && id redis >/dev/null 2>&1; then chown redis "$conf"; fi',
  'exec docker-entrypoint.sh redis-server "$conf" --bind "* -::*" --protected-mode no --dir /data --appendonly yes',
].join('\n');

export const SERVERS: Readonly<Record<DatabaseType, ServerContract>> = {
  // postgres: POSTGRES_USER is the superuser created at initdb, POSTGRES_DB its database
  postgresql: {
    defaultImage: 'postgres:16',
    dataPath: '/var/lib/postgresql/data',
    env: (a) => ({ POSTGRES_USER: a.username, POSTGRES_PASSWORD: a.password, POSTGRES_DB: a.databaseName }),
  },
  // mysql: MYSQL_USER gets ALL on MYSQL_DATABASE; root gets a random password nobody keeps
  // (given, not MYSQL_RANDOM_ROOT_PASSWORD, which the image prints: it would land in the logs)
  mysql: {
    defaultImage: 'mysql:8.4',
    dataPath: '/var/lib/mysql',
    env: (a, freshSecret) => ({ MYSQL_ROOT_PASSWORD: freshSecret(), MYSQL_USER: a.username, MYSQL_PASSWORD: a.password, MYSQL_DATABASE: a.databaseName }),
  },
  // redis: the password is the `default` user's (`requirepass`); the append-only file makes writes survive a restart
  redis: {
    defaultImage: 'redis:7',
    dataPath: '/data',
    env: (a) => ({ [REDIS_PASSWORD_ENV]: a.password }),
    command: () => ['sh', '-c', REDIS_START],
  },
  // mongo: MONGO_INITDB_ROOT_* creates the user in `admin` (hence authSource=admin)
  mongo: {
    defaultImage: 'mongo:7',
    dataPath: '/data/db',
    env: (a) => ({ MONGO_INITDB_ROOT_USERNAME: a.username, MONGO_INITDB_ROOT_PASSWORD: a.password, MONGO_INITDB_DATABASE: a.databaseName }),
  },
};

/** The image Slipway builds on hosts that reach no registry (`make db-images`). */
export const localImage = (type: DatabaseType): string => `slipway-local/${type}:latest`;

const CONNECT_TIMEOUT_MS = 5_000;

/**
 * Logs in with the database's own credentials and runs the smallest query there is, with the
 * official Node client of its kind. Resolves when the server accepted the login; throws the
 * client's error otherwise (refused, not ready yet, wrong password).
 */
export async function login(a: DatabaseAddress): Promise<void> {
  switch (a.type) {
    case 'postgresql': {
      const { default: pg } = await import('pg');
      const client = new pg.Client({ host: a.host, port: a.port, user: a.username, password: a.password, database: a.databaseName, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
      // an error after connect (the server going away) must not become an unhandled 'error' event
      client.on('error', () => undefined);
      try {
        await client.connect();
        await client.query('select 1');
      } finally {
        await client.end().catch(() => undefined);
      }
      return;
    }
    case 'mysql': {
      const mysql = await import('mysql2/promise');
      const conn = await mysql.createConnection({ host: a.host, port: a.port, user: a.username, password: a.password, database: a.databaseName, connectTimeout: CONNECT_TIMEOUT_MS });
      conn.on('error', () => undefined);
      try {
        await conn.query('select 1');
      } finally {
        await conn.end().catch(() => undefined);
      }
      return;
    }
    case 'redis': {
      const { Redis } = await import('ioredis');
      const client = new Redis({
        host: a.host,
        port: a.port,
        username: a.username,
        password: a.password,
        connectTimeout: CONNECT_TIMEOUT_MS,
        lazyConnect: true,
        maxRetriesPerRequest: 0,
        retryStrategy: () => null,
        enableOfflineQueue: false,
      });
      try {
        await connectRedis(client);
        // AUTH (with the password) runs on connect: a wrong one rejects there
        await client.ping();
      } finally {
        client.disconnect();
      }
      return;
    }
    case 'mongo': {
      const { MongoClient } = await import('mongodb');
      const client = new MongoClient(`mongodb://${encodeURIComponent(a.username)}:${encodeURIComponent(a.password)}@${a.host}:${a.port.toString()}/${encodeURIComponent(a.databaseName)}?authSource=admin`, {
        serverSelectionTimeoutMS: CONNECT_TIMEOUT_MS,
        connectTimeoutMS: CONNECT_TIMEOUT_MS,
        directConnection: true,
      });
      try {
        await client.connect();
        await client.db(a.databaseName).command({ ping: 1 });
      } finally {
        await client.close().catch(() => undefined);
      }
      return;
    }
  }
}

/**
 * Connects an ioredis client made with `lazyConnect`, failing with the reason: a refused
 * connection or a refused AUTH arrives as an 'error' event, after which connect() only says
 * "Connection is closed."
 */
export async function connectRedis(client: { on(event: 'error', listener: (err: Error) => void): unknown; connect(): Promise<void> }): Promise<void> {
  let reason: unknown = null;
  client.on('error', (err) => {
    reason ??= err;
  });
  await client.connect().catch((err: unknown) => {
    throw reason ?? err;
  });
}
