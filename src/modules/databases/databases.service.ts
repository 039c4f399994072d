import type { WalletService } from '../billing/wallet.service.js';
import { iso, type Clock, type IdSource, type Random } from '../../domain/clock.js';
import {
  connectionString,
  DATABASE_TYPES,
  DEFAULT_PORTS,
  generatePassword,
  isDatabaseType,
  keyPrefixOf,
  MASKED_PASSWORD,
  usernameFor,
  type DatabaseProvisioner,
  type DatabaseStatus,
  type DatabaseType,
} from '../../domain/database.js';
import { invalid, notFound } from '../../domain/errors.js';
import type { Engine } from '../../domain/ports.js';
import { slugify } from '../../domain/slug.js';
import type { DatabaseRow, Repositories } from '../../store/repositories/index.js';
import type { StoreOf } from '../../store/db.js';
import type { SecretBox } from '../../adapters/secrets/secret-box.js';
import type { Access } from '../../domain/access.js';
import type { Late } from '../../domain/late.js';
import { holdDatabaseRoom, holdMemoryRoom, type TenantLimits } from '../tenancy/policy.js';
import { passwordContext, type DatabasePolicy } from './policy.js';
import { sharedAddress, sharedPrefix, sharedTenantName } from './shared.js';
import type { Database, DatabaseDetail } from './databases.schema.js';

/** The leader's database worker, woken when there is work (it also looks by itself every few seconds). */
export interface DatabaseWork {
  wake(): void;
  /** refuses (or allows again) the logins of a database on a shared server */
  setLocked(row: DatabaseRow, locked: boolean): Promise<void>;
}

/** No leader's worker in this process (a standby, `--engine none`): the rows wait in the store for the leader's. */
export const idleDatabaseWork: DatabaseWork = { wake: () => undefined, setLocked: () => Promise.resolve() };

/**
 * The API side of managed databases (docs/databases.md): records, credentials and statuses. The
 * servers themselves are created and removed by the deploy engine's leader (DatabaseWorker),
 * which takes `provisioning` and `deleting` rows as its work.
 */
export class DatabaseService {
  constructor(
    private readonly store: StoreOf<'databases' | 'capacity' | 'meta'>,
    private readonly clock: Clock,
    private readonly random: Random,
    private readonly ids: IdSource,
    /** seals the passwords */
    private readonly secrets: Pick<SecretBox, 'seal'>,
    private readonly policy: DatabasePolicy,
    private readonly limits: TenantLimits,
    private readonly wallets: WalletService,
    private readonly engine: Late<Pick<Engine, 'databaseHealth'>>,
    /** the leader's worker in this process, woken when there is work (idle without one) */
    private readonly worker: Late<DatabaseWork>,
    /** where `restore_from` is checked: a succeeded backup of this workspace, of the same type */
    private readonly backups?: { restoreSource(access: Access, id: string, type: string | undefined, field: string, into: 'container' | 'shared'): Promise<{ backup: { id: string } }> },
  ) {}

  async create(access: Access, input: { name: string; type: string; restore_from?: string | undefined }): Promise<Database> {
    const { row, password } = await this.prepare(access, input, null);
    if (input.restore_from !== undefined) {
      if (this.backups === undefined) throw invalid('"restore_from": backups are not available on this installation.');
      // a new database, never production: its server is provisioned, then the backup restored into it before it is `running`
      const { backup } = await this.backups.restoreSource(access, input.restore_from, input.type, 'restore_from', row.provisioner === 'shared' ? 'shared' : 'container');
      row.restore_from = backup.id;
    }
    await this.wallets.requireFunds(access.workspace.id);
    // a slug the workspace has already: 409 from the repository
    await this.store.transaction((tx) => this.insert(tx, row));
    this.worker.get().wake();
    return databaseView(row, password);
  }

  /**
   * A new database's record and its password, not stored yet: `insert` stores it (in the
   * caller's transaction, e.g. a template instance's), then `wake()` starts its provisioning.
   * `owner`: the template instance it belongs to.
   */
  async prepare(access: Access, input: { name: string; type: string }, owner: string | null): Promise<{ row: DatabaseRow; password: string }> {
    if (!isDatabaseType(input.type)) throw invalid(`"type" must be one of ${DATABASE_TYPES.join(', ')}.`);
    const slug = slugify(input.name);
    if (slug === '') throw invalid('"name" must contain at least one ASCII letter or digit.');
    const type = input.type;
    const { policy } = this;
    const id = this.ids.id();
    const password = generatePassword((n) => this.random.bytes(n));
    const now = iso(this.clock.now());
    const row: DatabaseRow = {
      id,
      workspace_id: access.workspace.id,
      name: input.name,
      slug,
      type,
      provisioner: 'container',
      status: 'provisioning',
      error: null,
      image: null,
      host: databaseHost(slug),
      port: DEFAULT_PORTS[type],
      external_host: null,
      external_port: null,
      username: usernameFor(type),
      password: this.secrets.seal(password, passwordContext(id)),
      database_name: databaseName(type, slug),
      memory_mb: policy.memoryMb,
      owner_project_id: owner,
      restore_from: null,
      created_at: now,
      updated_at: now,
    };
    const sharedUrl = policy.shared[type];
    if (sharedUrl !== undefined) {
      // on the operator's server: a user and a database named for this installation and tenant
      // (slugs repeat across workspaces; these names never do), reached at the server's address
      const { host, port } = sharedAddress(type, sharedUrl);
      const name = sharedTenantName(await this.sharedPrefix(), slug, (n) => this.random.bytes(n));
      Object.assign(row, { provisioner: 'shared', host, port, external_host: host, external_port: port, username: name, database_name: name, memory_mb: 0 });
    }
    return { row, password };
  }

  /**
   * Stores a prepared database with its first event, inside the limits: the workspace's number
   * of databases (403) and, for a container of its own, the memory all tenants' containers may
   * reserve on this installation (409).
   */
  async insert(tx: Pick<Repositories, 'databases' | 'capacity'>, row: DatabaseRow): Promise<void> {
    await holdDatabaseRoom(this.limits, tx, row.workspace_id);
    if (row.provisioner === 'container') await holdMemoryRoom(this.limits, tx, row.id, row.memory_mb);
    await tx.databases.insert(row);
    await tx.databases.addEvent({ id: this.ids.id(), database_id: row.id, at: row.created_at, message: `Created; a ${row.type} server is being provisioned.` });
  }

  /** Tells the leader's worker there is work (after a transaction that stored prepared databases). */
  /**
   * Billing stops the workspace's databases (WorkControl): `running` ones become `suspended`; the
   * leader's worker removes their servers and keeps their volumes; a shared server's tenant can no
   * longer log in. Returns how many.
   */
  async suspendWorkspace(workspaceId: string): Promise<number> {
    return this.moveAll(workspaceId, 'running', 'suspended', 'Suspended: the workspace\'s wallet stayed empty past the grace period. Its data is kept; a top-up starts it again.');
  }

  /** After a top-up: `suspended` databases are `running` again; the worker starts their servers on their volumes (a shared one's logins are allowed again). */
  async resumeWorkspace(workspaceId: string): Promise<number> {
    return this.moveAll(workspaceId, 'suspended', 'running', 'Resumed after a top-up: its server starts again on its volume.');
  }

  /**
   * Moves the workspace's databases in `from` to `to`: a container's server is removed or started
   * by the leader's worker; a shared server's tenant is locked or unlocked here first, and stays
   * in `from` when its server does not answer (the billing worker tries again at its next pass,
   * after the others moved: then this throws).
   */
  private async moveAll(workspaceId: string, from: DatabaseStatus, to: DatabaseStatus, message: string): Promise<number> {
    let moved = 0;
    const failures: string[] = [];
    const now = iso(this.clock.now());
    for (const row of await this.store.repos.databases.inWorkspace(workspaceId)) {
      if (row.status !== from) continue;
      if (row.provisioner === 'shared') {
        try {
          await this.worker.get().setLocked(row, to === 'suspended');
        } catch (err) {
          failures.push(`${row.slug}: ${err instanceof Error ? err.message : String(err)}`);
          continue;
        }
      }
      if (await this.store.repos.databases.update(row.id, from, { status: to, updated_at: now })) {
        await this.store.repos.databases.addEvent({ id: this.ids.id(), database_id: row.id, at: now, message });
        moved++;
      }
    }
    if (moved > 0) this.worker.get().wake();
    if (failures.length > 0) throw new Error(`databases on a shared server could not be ${to === 'suspended' ? 'suspended' : 'resumed'}: ${failures.join('; ')}`);
    return moved;
  }

  wake(): void {
    this.worker.get().wake();
  }

  /** Marks every database `owner` (a template instance being deleted) provisioned as `deleting`, in `tx`. */
  async deleteOwnedBy(tx: Pick<Repositories, 'databases'>, owner: string): Promise<void> {
    const now = iso(this.clock.now());
    for (const row of await tx.databases.ownedBy(owner)) {
      if (row.status === 'deleting') continue;
      await tx.databases.update(row.id, row.status, { status: 'deleting', updated_at: now });
      await tx.databases.addEvent({ id: this.ids.id(), database_id: row.id, at: now, message: 'Deleting with its template instance: its server and its data are being removed.' });
    }
  }

  async list(access: Access): Promise<Database[]> {
    const rows = await this.store.repos.databases.inWorkspace(access.workspace.id);
    return rows.map((r) => databaseView(r, null));
  }

  async get(access: Access, slug: string): Promise<DatabaseDetail> {
    const row = await this.resolve(access, slug);
    const [events, health] = await Promise.all([this.store.repos.databases.events(row.id), this.engine.get().databaseHealth(row.id)]);
    return {
      ...databaseView(row, null),
      health:
        health === null
          ? null
          : {
              status: health.status,
              restarts: health.restarts,
              started_at: health.startedAt === null ? null : iso(health.startedAt),
              cpu_millicores: health.cpuMillicores,
              memory_bytes: health.memoryBytes,
              memory_limit_bytes: health.memoryLimitBytes,
              volume_bytes: health.volumeBytes,
            },
      events: events.map((e) => ({ at: e.at, message: e.message })),
    };
  }

  /** Marks it `deleting`: the leader removes its server (container and volume), then the record. */
  async delete(access: Access, slug: string): Promise<Database> {
    const row = await this.resolve(access, slug);
    if (row.status !== 'deleting') {
      const now = iso(this.clock.now());
      await this.store.transaction(async (tx) => {
        await tx.databases.update(row.id, row.status, { status: 'deleting', updated_at: now });
        await tx.databases.addEvent({ id: this.ids.id(), database_id: row.id, at: now, message: 'Deleting: its server and its data are being removed.' });
      });
      row.status = 'deleting';
      row.updated_at = now;
    }
    this.worker.get().wake();
    return databaseView(row, null);
  }

  private prefix: string | null = null;

  private async sharedPrefix(): Promise<string> {
    this.prefix ??= sharedPrefix(await this.store.repos.meta.instanceId());
    return this.prefix;
  }

  private async resolve(access: Access, slug: string): Promise<DatabaseRow> {
    const row = await this.store.repos.databases.bySlug(access.workspace.id, slug);
    if (row === undefined) throw notFound('Database');
    return row;
  }
}

/** Apps on the workspace network reach a database by this name (projects are reached by their bare slug, so no clash). */
export const databaseHost = (slug: string): string => `${slug}.db`;

/** The database inside the server: its slug (MySQL and PostgreSQL take `-` in quoted names; the images quote them). */
const databaseName = (_type: DatabaseType, slug: string): string => slug;

/** The record as the API shows it: the password (and the connection strings) in full only when `password` is given. */
export function databaseView(row: DatabaseRow, password: string | null): Database {
  const type = row.type as DatabaseType;
  const shown = password ?? MASKED_PASSWORD;
  const address = { type, username: row.username, password: shown, databaseName: row.database_name };
  return {
    id: row.id,
    name: row.name,
    slug: row.slug,
    type,
    status: row.status as DatabaseStatus,
    error: row.error,
    provisioner: row.provisioner as DatabaseProvisioner,
    image: row.image,
    host: row.host,
    port: row.port,
    external_host: row.external_host,
    external_port: row.external_port,
    username: row.username,
    password: shown,
    database_name: row.database_name,
    connection_string: connectionString({ ...address, host: row.host, port: row.port }),
    external_connection_string:
      row.external_host === null || row.external_port === null ? null : connectionString({ ...address, host: row.external_host, port: row.external_port }),
    key_prefix: keyPrefixOf(row),
    restore_from: row.restore_from,
    memory_mb: row.memory_mb,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}
