import type { Clock, IdSource, Random } from '../../domain/clock.js';
import type { LogStore } from '../../domain/logs.js';
import { iso } from '../../domain/clock.js';
import { DATABASE_LABEL, generatePassword, type DatabaseAddress, type DatabaseType } from '../../domain/database.js';
import { HostPortTakenError, type ContainerInfo, type Runtime } from '../../domain/runtime.js';
import type { SecretBox } from '../../adapters/secrets/secret-box.js';
import type { DatabaseRow, Repositories } from '../../store/repositories/index.js';
import { serverName } from './health.js';
import { passwordContext, type DatabasePolicy } from './policy.js';
import { localImage, login as realLogin, SERVERS } from './servers.js';
import { sharedServer, type SharedServer } from './shared.js';

export { DATABASE_LABEL };

export interface DatabaseWorkerLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface DatabaseWorkerOptions {
  /** the databases (the work queue) and their workspaces */
  repos: Pick<Repositories, 'databases' | 'workspaces'>;
  clock: Clock;
  random: Random;
  ids: IdSource;
  secrets: SecretBox;
  runtime: Pick<Runtime, 'inspectImage' | 'pull' | 'ensureVolume' | 'removeVolume' | 'run' | 'inspect' | 'list' | 'stop' | 'remove'>;
  policy: DatabasePolicy;
  /** this installation's labels (its instance): every container and volume carries them */
  labels: Readonly<Record<string, string>>;
  /** the workspace's network, created when missing (the deploy engine's, so that apps and databases share it) */
  network: (ws: { id: string; slug: string }) => Promise<string>;
  /** published: Slipway reaches a database on its published port; network: on its address on the workspace network */
  upstreamMode: 'published' | 'network';
  log: DatabaseWorkerLog;
  /** how often the store is looked at for work without a wake-up (default 2 s) */
  pollMs?: number;
  /** how often the engine is looked at for missing or orphaned containers (default 10 s) */
  reconcileEveryMs?: number;
  /** logs in with the database's credentials; the real clients by default */
  login?: (a: DatabaseAddress) => Promise<void>;
  /** how long an image pull may take (default 5 min) */
  pullTimeoutMs?: number;
  /** the log store: a deleted database's server logs go with it */
  logs?: Pick<LogStore, 'deleteProject'>;
  /** this installation's prefix of names on shared servers (`sharedPrefix(instanceId)`): its leftovers there are found by it */
  sharedPrefix: string;
  /** an operator's server, by its administrative URL (the real clients by default) */
  sharedServer?: (type: DatabaseType, url: string) => SharedServer;
  /** restores a new database from the backup its record names (`restore_from`) before it is `running` (docs/backups.md#restore) */
  restorer?: DatabaseRestorer;
}

/**
 * The backups module's half of a restore into a new database: the snapshot written into its
 * empty volume before the server first starts (Redis), or fed through a login once it accepts
 * one (SQL); then what the server holds compared with the manifest. Each returns the sentence
 * for the database's events, and throws (the database is then `failed`) when it did not work.
 */
export interface DatabaseRestorer {
  beforeStart(row: DatabaseRow, at: { image: string; volume: string; network: string }): Promise<string | null>;
  afterReady(row: DatabaseRow, at: { image: string; volume: string; network: string; direct: DatabaseAddress }): Promise<string | null>;
}

const POLL_MS = 2_000;
const RECONCILE_EVERY_MS = 10_000;
const LOGIN_RETRY_MS = 200;
const IMAGE_WAIT_MS = 2_000;

/**
 * The deploy engine leader's half of managed databases (docs/databases.md#lifecycle): it
 * provisions `provisioning` rows (image, volume, container, then a real login before `running`),
 * removes the servers of `deleting` rows and of databases that are gone (a deleted workspace),
 * and brings back the container of a running database that disappeared, from its volume. The
 * rows are the work queue: a kill -9 leaves them as they were, and the next leader goes on.
 */
export class DatabaseWorker {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private again = false;
  private stopped = false;
  private lastReconcile = 0;
  /** databases being provisioned by this process: a pass never starts one twice */
  private readonly busy = new Map<string, Promise<void>>();
  private readonly abort = new AbortController();
  private readonly login: (a: DatabaseAddress) => Promise<void>;
  private readonly shared: (type: DatabaseType, url: string) => SharedServer;

  private readonly repos: DatabaseWorkerOptions['repos'];
  private readonly clock: Clock;
  private readonly random: Random;
  private readonly ids: IdSource;
  private readonly secrets: SecretBox;
  private readonly runtime: DatabaseWorkerOptions['runtime'];
  private readonly policy: DatabasePolicy;
  private readonly labels: Readonly<Record<string, string>>;
  private readonly network: (ws: { id: string; slug: string }) => Promise<string>;
  private readonly upstreamMode: 'published' | 'network';
  private readonly log: DatabaseWorkerLog;
  private readonly pollMs: number;
  private readonly reconcileEveryMs: number;
  private readonly pullTimeoutMs: number;
  private readonly logs: Pick<LogStore, 'deleteProject'> | undefined;
  private readonly sharedPrefix: string;
  private readonly restorer: DatabaseRestorer | undefined;

  constructor(o: DatabaseWorkerOptions) {
    this.restorer = o.restorer;
    this.repos = o.repos;
    this.clock = o.clock;
    this.random = o.random;
    this.ids = o.ids;
    this.secrets = o.secrets;
    this.runtime = o.runtime;
    this.policy = o.policy;
    this.labels = o.labels;
    this.network = o.network;
    this.upstreamMode = o.upstreamMode;
    this.log = o.log;
    this.pollMs = o.pollMs ?? POLL_MS;
    this.reconcileEveryMs = o.reconcileEveryMs ?? RECONCILE_EVERY_MS;
    this.pullTimeoutMs = o.pullTimeoutMs ?? 300_000;
    this.logs = o.logs;
    this.sharedPrefix = o.sharedPrefix;
    this.login = o.login ?? realLogin;
    this.shared = o.sharedServer ?? sharedServer;
  }

  start(): void {
    this.timer = setInterval(() => { this.wake(); }, this.pollMs);
    this.timer.unref();
    this.wake();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort();
    if (this.timer !== null) clearInterval(this.timer);
    await this.running;
    await Promise.allSettled([...this.busy.values()]);
  }

  /** Looks for work now (a database was created or deleted through this process). */
  wake(): void {
    if (this.stopped) return;
    if (this.running !== null) {
      this.again = true;
      return;
    }
    this.running = (async () => {
      try {
        do {
          this.again = false;
          await this.pass();
        } while (this.repeat());
      } catch (err) {
        this.log.error({ err }, 'database worker: a pass failed; trying again shortly');
      } finally {
        this.running = null;
      }
    })();
  }

  /** Another pass: a wake-up came during this one. */
  private repeat(): boolean {
    return this.again && !this.stopped;
  }

  /** Settles when every provisioning this process started has ended (tests). */
  async idle(): Promise<void> {
    await this.running;
    await Promise.allSettled([...this.busy.values()]);
  }

  private async pass(): Promise<void> {
    const repos = this.repos.databases;
    for (const row of await repos.withStatus(['provisioning', 'deleting'])) {
      if (this.stopped) return;
      if (this.busy.has(row.id)) continue;
      const shared = row.provisioner === 'shared';
      const job = (row.status === 'provisioning' ? (shared ? this.provisionShared(row) : this.provision(row)) : shared ? this.removeShared(row) : this.remove(row))
        .catch((err: unknown) => { this.log.error({ err, database: row.id }, 'database worker: unexpected failure'); })
        .finally(() => { this.busy.delete(row.id); });
      this.busy.set(row.id, job);
    }
    const now = this.clock.now().getTime();
    if (now - this.lastReconcile >= (this.reconcileEveryMs)) {
      this.lastReconcile = now;
      await this.reconcile();
    }
  }

  // ---------------------------------------------------------------------------------------------

  private async provision(row: DatabaseRow): Promise<void> {
    const type = row.type as DatabaseType;
    const started = this.clock.now().getTime();
    try {
      const ws = await this.repos.workspaces.byId(row.workspace_id);
      if (ws === undefined) return;
      const image = row.image ?? (await this.chooseImage(row, type));
      if (row.image === null) await this.patch(row, { image });
      const info = await this.ensureContainer(row, { id: ws.id, slug: ws.slug }, image);
      const address = this.loginAddress(row, info);
      await this.waitForLogin(row, address);
      if (row.restore_from !== null && this.restorer !== undefined) {
        const said = await this.restorer.afterReady(row, { image, volume: this.volumeName(row), network: await this.network({ id: ws.id, slug: ws.slug }), direct: address });
        if (said !== null) await this.event(row, said);
      }
      const ok = await this.patch(row, {
        status: 'running',
        error: null,
        ...this.external(info),
      });
      if (ok) await this.event(row, `Running: a login as ${row.username} succeeded after ${((this.clock.now().getTime() - started) / 1000).toFixed(1)} s.`);
    } catch (err) {
      if (this.stopped) return;
      const message = err instanceof Error ? err.message : String(err);
      this.log.warn({ database: row.id, error: message }, 'database provisioning failed');
      const ok = await this.patch(row, { status: 'failed', error: message });
      if (ok) await this.event(row, `Failed: ${message}`);
    }
  }

  /**
   * On the operator's server: the tenant's user and database (made again from scratch when a
   * crash stopped it halfway), then a real login with its own credentials before `running`.
   */
  private async provisionShared(row: DatabaseRow): Promise<void> {
    const started = this.clock.now().getTime();
    try {
      const server = this.sharedFor(row);
      const address = this.addressOf(row, server.host, server.port);
      await this.event(row, `Creating its user and database on the shared ${row.type} server at ${server.host}:${String(server.port)}.`);
      await server.create({ name: row.username, password: address.password });
      await this.waitForLogin(row, address);
      if (row.restore_from !== null && this.restorer !== undefined) {
        // the backup goes into the tenant's own database before it is `running` (docs/backups.md#shared-servers)
        await this.event(row, `Restoring from backup ${row.restore_from}.`);
        const said = await this.restorer.afterReady(row, { image: '', volume: '', network: 'host', direct: address });
        if (said !== null) await this.event(row, said);
      }
      const ok = await this.patch(row, { status: 'running', error: null });
      if (ok) await this.event(row, `Running: a login as ${row.username} succeeded after ${((this.clock.now().getTime() - started) / 1000).toFixed(1)} s.`);
    } catch (err) {
      if (this.stopped) return;
      const message = sharedError(err);
      this.log.warn({ database: row.id, error: message }, 'database provisioning on a shared server failed');
      const ok = await this.patch(row, { status: 'failed', error: message });
      if (ok) await this.event(row, `Failed: ${message}`);
    }
  }

  /**
   * Billing's suspension of a database on a shared server: its logins refused and its sessions
   * ended (`locked`), or allowed again. Its data stays. Fails with the server's readable error.
   */
  async setLocked(row: DatabaseRow, locked: boolean): Promise<void> {
    const server = this.sharedFor(row);
    try {
      await (locked ? server.lock(row.username) : server.unlock(row.username));
    } catch (err) {
      throw new Error(sharedError(err), { cause: err });
    }
  }

  /** The server a shared database lives on: the one configured for its type now. */
  private sharedFor(row: DatabaseRow): SharedServer {
    const type = row.type as DatabaseType;
    const url = this.policy.shared[type];
    if (url === undefined) throw new Error(`no shared ${type} server is configured any more (--database-shared-${type}).`);
    return this.shared(type, url);
  }

  /**
   * The configured image when the engine has it or can pull it; otherwise the locally built
   * `slipway-local/<type>:latest` (an air-gapped host), said in the log and the events.
   */
  private async chooseImage(row: DatabaseRow, type: DatabaseType): Promise<string> {
    const wanted = this.policy.images[type];
    if ((await this.runtime.inspectImage(wanted)) !== null) return wanted;
    let why: string;
    try {
      await this.event(row, `Pulling ${wanted}.`);
      await this.runtime.pull(wanted, { timeoutMs: this.pullTimeoutMs });
      return wanted;
    } catch (err) {
      why = err instanceof Error ? err.message : String(err);
    }
    const local = localImage(type);
    // `make run` builds the local images in the background: a first database may ask before they are there
    const deadline = this.clock.now().getTime() + this.policy.readyTimeoutMs;
    let waiting = false;
    while ((await this.runtime.inspectImage(local)) === null) {
      if (this.clock.now().getTime() >= deadline || this.stopped) {
        throw new Error(`the image ${wanted} is not on this host and cannot be pulled (${why}), and no locally built ${local} exists (make db-images builds it).`);
      }
      if (!waiting) {
        waiting = true;
        await this.event(row, `${wanted} is not on this host and cannot be pulled (${why}), and ${local} is not built yet; waiting for it (make db-images builds it).`);
      }
      await new Promise((r) => setTimeout(r, IMAGE_WAIT_MS));
    }
    this.log.warn({ database: row.id, image: wanted, fallback: local, reason: why }, 'database image not available; using the locally built one');
    await this.event(row, `${wanted} is not on this host and cannot be pulled (${why}); using the locally built ${local} instead.`);
    return local;
  }

  private containerName(row: DatabaseRow): string {
    return serverName(row.id);
  }

  private volumeName(row: DatabaseRow): string {
    return serverName(row.id);
  }

  /** Its container: the one there is when it runs (a restart of Slipway mid-provisioning), a new one otherwise. */
  private async ensureContainer(row: DatabaseRow, ws: { id: string; slug: string }, image: string, hostPort?: number): Promise<ContainerInfo> {
    const { runtime } = this;
    const name = this.containerName(row);
    const existing = await runtime.inspect(name);
    if (existing !== null) {
      // a container of that name is this database's only when its labels say so (this installation's, this database's)
      const mine = Object.entries(this.labels).every(([k, v]) => existing.labels[k] === v) && existing.labels[DATABASE_LABEL] === row.id;
      if (!mine) throw new Error(`a container named ${name} exists on the engine that is not this database's (another installation's, or not Slipway's); it is left alone.`);
      if (existing.state === 'running' || existing.state === 'restarting') return existing;
      await runtime.remove(existing.id);
    }
    const type = row.type as DatabaseType;
    const server = SERVERS[type];
    const address = this.addressOf(row, row.host, row.port);
    const labels = { ...this.labels, [DATABASE_LABEL]: row.id };
    const volume = this.volumeName(row);
    await runtime.ensureVolume({ name: volume, workspace: ws.id, labels });
    const network = await this.network(ws);
    // a new database restored from a backup: the snapshot goes into its empty volume before the first start
    if (row.status === 'provisioning' && row.restore_from !== null && this.restorer !== undefined) {
      const said = await this.restorer.beforeStart(row, { image, volume, network });
      if (said !== null) await this.event(row, said);
    }
    const publish = this.policy.publish;
    return runtime.run({
      name,
      image,
      env: server.env(address, () => generatePassword((n) => this.random.bytes(n))),
      ...(server.command === undefined ? {} : { command: server.command(address) }),
      owner: { workspace: ws.id },
      labels,
      cpu: 1,
      memoryBytes: row.memory_mb * 1024 * 1024,
      network,
      aliases: [row.host],
      port: row.port,
      publish: publish !== 'off' || this.upstreamMode === 'published',
      ...(publish === 'all' ? { publishAddress: '0.0.0.0' } : {}),
      ...(hostPort === undefined ? {} : { hostPort }),
      mounts: [{ volume, path: server.dataPath }],
      restart: { kind: 'unless-stopped' },
      init: true,
    });
  }

  /** Where Slipway itself logs in: the published port on loopback, or the container's address on the workspace network. */
  private loginAddress(row: DatabaseRow, info: ContainerInfo): DatabaseAddress {
    if (this.upstreamMode === 'published' && info.hostPort !== null) return this.addressOf(row, '127.0.0.1', info.hostPort);
    if (info.networkAddress === null) throw new Error('its container has no address on the workspace network.');
    return this.addressOf(row, info.networkAddress, row.port);
  }

  /** The database's credentials (its password opened) at `host:port`. */
  private addressOf(row: DatabaseRow, host: string, port: number): DatabaseAddress {
    const password = this.secrets.open(row.password, passwordContext(row.id));
    return { type: row.type as DatabaseType, host, port, username: row.username, password, databaseName: row.database_name };
  }

  private external(info: ContainerInfo): Pick<DatabaseRow, 'external_host' | 'external_port'> {
    const publish = this.policy.publish;
    if (publish === 'off' || info.hostPort === null) return { external_host: null, external_port: null };
    return { external_host: publish === 'all' ? this.policy.publicHost : '127.0.0.1', external_port: info.hostPort };
  }

  /** Tries to log in until it works or the ready timeout passes; a container that exits fails at once. */
  private async waitForLogin(row: DatabaseRow, address: DatabaseAddress): Promise<void> {
    const deadline = this.clock.now().getTime() + this.policy.readyTimeoutMs;
    let last = 'no answer yet';
    for (;;) {
      if (this.stopped) throw new Error('Slipway is stopping');
      try {
        await this.login(address);
        return;
      } catch (err) {
        last = err instanceof Error ? err.message : String(err);
      }
      if (row.provisioner === 'container') {
        const info = await this.runtime.inspect(this.containerName(row));
        if (info === null) throw new Error('its container disappeared while the server was starting.');
        if (info.state === 'exited' || info.state === 'dead') {
          throw new Error(`the server exited with code ${String(info.exitCode)}${info.oomKilled ? ' (killed: out of memory)' : ''} before it accepted a login.`);
        }
      }
      if (this.clock.now().getTime() >= deadline) {
        throw new Error(`the server did not accept a login within ${(this.policy.readyTimeoutMs / 1000).toString()} s (last answer: ${last}).`);
      }
      await new Promise((r) => setTimeout(r, LOGIN_RETRY_MS));
    }
  }

  // ---------------------------------------------------------------------------------------------

  private async remove(row: DatabaseRow): Promise<void> {
    try {
      await this.removeServer(this.containerName(row), this.volumeName(row));
      await this.repos.databases.delete(row.id);
      await this.logs?.deleteProject(row.id).catch((err: unknown) => { this.log.warn({ err, database: row.id }, 'database worker: the logs of a deleted database stay until the retention pass'); });
      this.log.info({ database: row.id }, 'database deleted with its container and volume');
    } catch (err) {
      // the row stays `deleting`: the next pass tries again
      this.log.warn({ err, database: row.id }, 'database worker: cannot remove a database\'s server yet');
    }
  }

  /** Drops its database (its data) and its user on the shared server, then the record. */
  private async removeShared(row: DatabaseRow): Promise<void> {
    try {
      await this.sharedFor(row).drop(row.username);
      await this.repos.databases.delete(row.id);
      this.log.info({ database: row.id }, 'database dropped from its shared server');
    } catch (err) {
      // the row stays `deleting`: the next pass tries again
      const message = `Cannot drop it from the shared server yet: ${sharedError(err)}`;
      this.log.warn({ database: row.id, error: message }, 'database worker: cannot drop a database from its shared server yet');
      // said once, not every pass
      if (row.error !== message && (await this.patch(row, { error: message }))) await this.event(row, message);
    }
  }

  private async removeServer(container: string, volume: string): Promise<void> {
    await this.runtime.stop(container, { graceSeconds: 10 }).catch(() => undefined);
    await this.runtime.remove(container);
    await this.runtime.removeVolume(volume);
  }

  /**
   * The engine against the rows: a container (and volume) of a database that no longer exists
   * goes; a running database whose container is gone is started again on its volume.
   */
  private async reconcile(): Promise<void> {
    const repos = this.repos.databases;
    let containers: ContainerInfo[];
    try {
      containers = (await this.runtime.list({ labels: this.labels })).filter((c) => c.labels[DATABASE_LABEL] !== undefined);
    } catch (err) {
      this.log.warn({ err }, 'database worker: cannot list the containers');
      return;
    }
    await this.reconcileShared();
    const ids = await repos.ids();
    for (const c of containers) {
      const id = c.labels[DATABASE_LABEL] ?? '';
      if (ids.has(id)) continue;
      try {
        await this.removeServer(c.id, serverName(id));
        this.log.info({ database: id, container: c.name }, 'removed the server of a database that no longer exists');
      } catch (err) {
        this.log.warn({ err, container: c.name }, 'database worker: cannot remove the server of a deleted database');
      }
    }
    const present = new Map(containers.map((c) => [c.labels[DATABASE_LABEL], c]));
    // suspended (billing): the server goes, the volume stays; `running` again recreates it below
    for (const row of await repos.withStatus(['suspended'])) {
      const c = present.get(row.id);
      if (c === undefined || this.busy.has(row.id)) continue;
      try {
        await this.runtime.remove(c.id);
        this.log.info({ database: row.id }, 'stopped the server of a suspended database; its volume is kept');
      } catch (err) {
        this.log.warn({ err, database: row.id }, 'database worker: cannot stop the server of a suspended database');
      }
    }
    for (const row of await repos.withStatus(['running'])) {
      if (row.provisioner !== 'container') continue;
      const c = present.get(row.id);
      if (c !== undefined) {
        // the engine may publish another port after a restart: the record follows
        const external = this.external(c);
        if (c.state === 'running' && c.hostPort !== null && external.external_port !== row.external_port && !this.busy.has(row.id)) {
          await this.patch(row, external);
          await this.event(row, `Its server restarted; it is now published on port ${String(external.external_port)}.`);
        }
        continue;
      }
      if (this.busy.has(row.id) || row.image === null) continue;
      const job = this.recreate(row, row.image).finally(() => { this.busy.delete(row.id); });
      this.busy.set(row.id, job);
    }
  }

  /**
   * This installation's tenants on each shared server that no record names any more (their
   * workspace was deleted, which takes the records with it) are dropped. The names on the
   * server are read before the records, so a database created meanwhile is never taken for one.
   */
  private async reconcileShared(): Promise<void> {
    for (const [type, url] of Object.entries(this.policy.shared) as [DatabaseType, string][]) {
      try {
        const server = this.shared(type, url);
        const there = await server.tenants(this.sharedPrefix);
        if (there.size === 0) continue;
        const known = await this.repos.databases.sharedNames(type);
        for (const name of there) {
          if (known.has(name) || this.stopped) continue;
          await server.drop(name);
          this.log.info({ type, name }, 'dropped a database of a deleted workspace from its shared server');
        }
      } catch (err) {
        this.log.warn({ type, error: sharedError(err) }, 'database worker: cannot look at a shared server');
      }
    }
  }

  /** A running database's container was removed behind Slipway's back: the same server again, on the same volume (and host port, when free). */
  private async recreate(row: DatabaseRow, image: string): Promise<void> {
    try {
      const ws = await this.repos.workspaces.byId(row.workspace_id);
      if (ws === undefined) return;
      let info: ContainerInfo;
      try {
        info = await this.ensureContainer(row, { id: ws.id, slug: ws.slug }, image, row.external_port ?? undefined);
      } catch (err) {
        if (!(err instanceof HostPortTakenError)) throw err;
        info = await this.ensureContainer(row, { id: ws.id, slug: ws.slug }, image);
      }
      await this.patch(row, { ...this.external(info) });
      await this.event(row, 'Its container was gone; started again on its volume.');
      this.log.info({ database: row.id }, 'recreated the container of a database from its volume');
    } catch (err) {
      this.log.warn({ err, database: row.id }, 'database worker: cannot recreate a database\'s container');
    }
  }

  // ---------------------------------------------------------------------------------------------

  /** Changes the row while it still has the status this worker read (a DELETE meanwhile wins). */
  private async patch(row: DatabaseRow, patch: Partial<DatabaseRow>): Promise<boolean> {
    const ok = await this.repos.databases.update(row.id, row.status, { ...patch, updated_at: iso(this.clock.now()) });
    if (ok) Object.assign(row, patch);
    return ok;
  }

  private async event(row: DatabaseRow, message: string): Promise<void> {
    await this.repos.databases.addEvent({ id: this.ids.id(), database_id: row.id, at: iso(this.clock.now()), message }).catch(() => undefined);
  }
}

/** A shared server's error as a sentence: the client's message, never the administrative URL it was given. */
function sharedError(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  return message.replace(/[a-z][a-z0-9+.-]*:\/\/[^\s]*/gi, '<server>');
}
