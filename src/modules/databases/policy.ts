import type { DatabaseProvisioner, DatabaseType } from '../../domain/database.js';
import { SERVERS } from './servers.js';

/** How databases are provisioned on this installation (`--database-*`, docs/configuration.md). */
export interface DatabasePolicy {
  /** the image each type runs; absent and not pullable: `slipway-local/<type>:latest` when built */
  images: Readonly<Record<DatabaseType, string>>;
  /** where a database's port is published on the host: not at all, on 127.0.0.1, or on every interface */
  publish: 'off' | 'loopback' | 'all';
  /** the address shown as `external_host` when publishing on every interface */
  publicHost: string;
  /** memory limit of each database container, MiB */
  memoryMb: number;
  /** how long a new server gets to accept a login before the database is `failed` */
  readyTimeoutMs: number;
  /**
   * The types provisioned on an existing server (`--database-shared-<type>`): its administrative
   * URL; a type without one gets a container per database
   */
  shared: Readonly<Partial<Record<DatabaseType, string>>>;
}

export const DEFAULT_DATABASE_POLICY: DatabasePolicy = {
  images: { postgresql: SERVERS.postgresql.defaultImage, mysql: SERVERS.mysql.defaultImage, redis: SERVERS.redis.defaultImage, mongo: SERVERS.mongo.defaultImage },
  publish: 'loopback',
  publicHost: 'localhost',
  memoryMb: 512,
  readyTimeoutMs: 180_000,
  shared: {},
};

/** How databases of `type` are provisioned under `policy`. */
export const provisionerOf = (policy: DatabasePolicy, type: DatabaseType): DatabaseProvisioner => (policy.shared[type] === undefined ? 'container' : 'shared');

/** The configured policy over the defaults (`databases` absent: the defaults). */
export const databasePolicy = (settings: { databases?: Partial<DatabasePolicy> | undefined }): DatabasePolicy => ({ ...DEFAULT_DATABASE_POLICY, ...settings.databases });

/** The secret box context of a database's password: a sealed value moved to another row does not open. */
export const passwordContext = (databaseId: string): string => `database:${databaseId}`;
