import { PassThrough, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip, createGzip } from 'node:zlib';
import { iso, type Clock, type IdSource } from '../../domain/clock.js';
import type { DatabaseAddress, DatabaseType } from '../../domain/database.js';
import type { Runtime } from '../../domain/runtime.js';
import type { SecretBox } from '../../adapters/secrets/secret-box.js';
import type { BackupRow, DatabaseRow, Repositories } from '../../store/repositories/index.js';
import type { DatabaseRestorer } from '../databases/databases.worker.js';
import { serverName } from '../databases/health.js';
import { passwordContext } from '../databases/policy.js';
import { Digest, Open, Seal } from './artifact.js';
import { compareContents, describeContents, TOOLS, type Contents, type ToolContext } from './engines.js';
import type { Destination } from './destinations.js';
import { BACKUP_LABEL, keyPurpose, manifestKey, type Manifest } from './policy.js';

export interface BackupWorkerLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface BackupWorkerOptions {
  repos: Pick<Repositories, 'backups' | 'databases' | 'workspaces'>;
  clock: Clock;
  ids: IdSource;
  secrets: Pick<SecretBox, 'open' | 'derive'>;
  runtime: Pick<Runtime, 'task' | 'inspect' | 'list' | 'remove'>;
  destination: Destination;
  /** this installation's labels: every task container carries them */
  labels: Readonly<Record<string, string>>;
  network: (ws: { id: string; slug: string }) => Promise<string>;
  upstreamMode: 'published' | 'network';
  log: BackupWorkerLog;
  /** how many backups run at once on this installation (default 2) */
  concurrency?: number;
  /** how long one tool run may take (default 2 h) */
  taskTimeoutMs?: number;
  /** the memory of a tool container, MiB (default 512) */
  taskMemoryMb?: number;
  pollMs?: number;
}

/**
 * The leader's backup worker (docs/backups.md#lifecycle): takes `pending` backups, runs the
 * engine's own tool in a container beside the database, compresses and seals what it writes,
 * stores the artifact and its manifest, reads the stored artifact back, and only then calls the
 * backup `succeeded`. It also restores new databases from backups (DatabaseRestorer).
 */
export class BackupWorker implements DatabaseRestorer {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private again = false;
  private stopped = false;
  private readonly busy = new Map<string, Promise<void>>();
  private readonly abort = new AbortController();
  private readonly o: Required<Pick<BackupWorkerOptions, 'concurrency' | 'taskTimeoutMs' | 'taskMemoryMb' | 'pollMs'>> & BackupWorkerOptions;
  private recovered = false;

  constructor(o: BackupWorkerOptions) {
    this.o = { concurrency: 2, taskTimeoutMs: 2 * 3600_000, taskMemoryMb: 512, pollMs: 2_000, ...o };
  }

  start(): void {
    this.timer = setInterval(() => { this.wake(); }, this.o.pollMs);
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
        this.o.log.error({ err }, 'backup worker: a pass failed; trying again shortly');
      } finally {
        this.running = null;
      }
    })();
  }

  /** Another pass: a wake-up came during this one. */
  private repeat(): boolean {
    return this.again && !this.stopped;
  }

  /** Settles when the backups this process started have ended (tests). */
  async idle(): Promise<void> {
    await this.running;
    await Promise.allSettled([...this.busy.values()]);
  }

  private async pass(): Promise<void> {
    const { repos } = this.o;
    if (!this.recovered) {
      this.recovered = true;
      await this.recover();
    }
    for (const b of await repos.backups.withStatus(['pending'])) {
      if (this.stopped || this.busy.size >= this.o.concurrency) return;
      if (this.busy.has(b.id) || [...this.busy.keys()].some((id) => id.startsWith(`${b.database_id}:`))) continue;
      const key = `${b.database_id}:${b.id}`;
      const job = this.run(b)
        .catch((err: unknown) => { this.o.log.error({ err, backup: b.id }, 'backup worker: unexpected failure'); })
        .finally(() => {
          this.busy.delete(key);
          this.wake();
        });
      this.busy.set(key, job);
    }
  }

  /**
   * What a previous leader left: a backup it was running is failed, said so (never left
   * `running`), and the tool containers of this installation that no backup runs are removed.
   */
  private async recover(): Promise<void> {
    const { repos, clock, runtime, labels } = this.o;
    for (const b of await repos.backups.withStatus(['running'])) {
      await repos.backups.update(b.id, 'running', { status: 'failed', error: 'Slipway stopped while this backup ran; it was not finished. Take another one.', finished_at: iso(clock.now()) });
    }
    try {
      for (const c of await runtime.list({ labels })) {
        if (c.labels[BACKUP_LABEL] !== undefined) await runtime.remove(c.id);
      }
    } catch (err) {
      this.o.log.warn({ err }, 'backup worker: cannot remove the tool containers a previous run left');
    }
  }

  private async fail(b: BackupRow, message: string): Promise<void> {
    this.o.log.warn({ backup: b.id, database: b.database_id, error: message }, 'backup failed');
    await this.o.repos.backups.update(b.id, 'running', { status: 'failed', error: message, finished_at: iso(this.o.clock.now()) });
  }

  private async run(b: BackupRow): Promise<void> {
    const { repos, clock, destination } = this.o;
    const startedAt = clock.now();
    if (!(await repos.backups.update(b.id, 'pending', { status: 'running', started_at: iso(startedAt) }))) return;
    const db = await repos.databases.byId(b.database_id);
    if (db === undefined) {
      await this.fail(b, 'the database no longer exists.');
      return;
    }
    // a skipped run is a failed one, with its reason (never only a log line)
    if (db.status !== 'running') {
      await this.fail(b, `skipped: the database is ${db.status}${db.status === 'suspended' ? " (the workspace's wallet is empty)" : ''}; a backup needs its server running.`);
      return;
    }
    if (db.provisioner !== 'container' || db.image === null) {
      await this.fail(b, 'databases on a shared server cannot be backed up yet (docs/backups.md#shared-servers).');
      return;
    }
    const type = db.type as DatabaseType;
    const tools = TOOLS[type];
    let step = 'preparing';
    const job = new AbortController();
    try {
      const ctx = { ...(await this.context(db, b.id)), signal: AbortSignal.any([this.abort.signal, job.signal]) };
      step = 'dumping';
      const raw = new PassThrough();
      const digest = new Digest();
      const stored = destination.put(b.object_key, digest);
      // a destination that fails stops the tool instead of leaving it blocked on a full pipe
      stored.catch((err: unknown) => { job.abort(); raw.destroy(err as Error); });
      const sealing = pipeline([raw, ...(tools.compress ? [createGzip({ level: 6 })] : []), new Seal(this.o.secrets.derive(keyPurpose(b.id))), digest]);
      let dumped;
      try {
        dumped = await tools.dump(ctx, raw);
      } catch (err) {
        raw.destroy(err as Error);
        await Promise.allSettled([sealing, stored]);
        throw err;
      }
      step = 'storing';
      await sealing;
      await stored;
      const size = digest.size;
      const checksum = digest.hex();
      const manifest: Manifest = {
        format: 'slipway-backup/1',
        backup_id: b.id,
        database: { id: db.id, slug: db.slug, type },
        engine: dumped.engineVersion,
        tool: dumped.tool,
        image: db.image,
        taken_at: iso(startedAt),
        artifact: { key: b.object_key, size, sha256: checksum, compression: tools.compress ? 'gzip' : 'none', encryption: 'aes-256-gcm, 64 KiB records, key per backup' },
        contents: dumped.contents,
      };
      await destination.put(manifestKey(b.object_key), streamOf(JSON.stringify(manifest, null, 2)));
      // counted only once it was read back from where it is kept
      step = 'reading back';
      const back = new Digest();
      await pipeline(await destination.get(b.object_key), back);
      if (back.size !== size || back.hex() !== checksum) {
        throw new Error(`the stored artifact does not match what was written (${String(back.size)} bytes, sha256 ${back.hex().slice(0, 12)}… where ${String(size)} bytes, ${checksum.slice(0, 12)}… were written).`);
      }
      await repos.backups.update(b.id, 'running', { status: 'succeeded', size, checksum, manifest: JSON.stringify(manifest), finished_at: iso(clock.now()), error: null });
      this.o.log.info({ backup: b.id, database: db.id, bytes: size, seconds: (clock.now().getTime() - startedAt.getTime()) / 1000 }, `backup succeeded: ${describeContents(dumped.contents)}`);
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      await destination.delete(b.object_key).catch(() => undefined);
      await this.fail(b, `${step}: ${message}`);
    }
  }

  /** The tool container's and Slipway's view of the database's server. */
  private async context(db: DatabaseRow, taskId: string): Promise<ToolContext> {
    const ws = await this.o.repos.workspaces.byId(db.workspace_id);
    if (ws === undefined) throw new Error('its workspace no longer exists.');
    const network = await this.o.network({ id: ws.id, slug: ws.slug });
    const info = await this.o.runtime.inspect(serverName(db.id));
    if (info?.state !== 'running') throw new Error("its server's container is not running.");
    const password = this.o.secrets.open(db.password, passwordContext(db.id));
    const address = (host: string, port: number): DatabaseAddress => ({ type: db.type as DatabaseType, host, port, username: db.username, password, databaseName: db.database_name });
    let direct: DatabaseAddress;
    if (this.o.upstreamMode === 'published' && info.hostPort !== null) direct = address('127.0.0.1', info.hostPort);
    else if (info.networkAddress !== null) direct = address(info.networkAddress, db.port);
    else throw new Error('its server has no address Slipway reaches.');
    return this.tool(db, taskId, { image: db.image ?? '', volume: serverName(db.id), network, server: address(db.host, db.port), direct });
  }

  private tool(db: DatabaseRow, taskId: string, at: Pick<ToolContext, 'image' | 'volume' | 'network' | 'server' | 'direct'>): ToolContext {
    return {
      runtime: this.o.runtime,
      ...at,
      owner: { workspace: db.workspace_id },
      labels: { ...this.o.labels, [BACKUP_LABEL]: taskId },
      name: `${serverName(db.id)}-task-${this.o.ids.id().slice(-12)}`,
      memoryBytes: this.o.taskMemoryMb * 1024 * 1024,
      timeoutMs: this.o.taskTimeoutMs,
      signal: this.abort.signal,
    };
  }

  // --- restores into a new database (DatabaseRestorer) -----------------------------------------

  /** The backup a new database is restored from, checked again (it may have been deleted meanwhile). */
  private async source(row: DatabaseRow): Promise<{ backup: BackupRow; manifest: Manifest }> {
    const backup = row.restore_from === null ? undefined : await this.o.repos.backups.byId(row.restore_from);
    if (backup === undefined || backup.workspace_id !== row.workspace_id) throw new Error('the backup it is restored from no longer exists.');
    if (backup.status !== 'succeeded' || backup.manifest === null) throw new Error(`the backup it is restored from is ${backup.status}, not succeeded.`);
    return { backup, manifest: JSON.parse(backup.manifest) as Manifest };
  }

  /** The artifact opened and decompressed, after its checksum was checked in full. */
  private async plain(backup: BackupRow, manifest: Manifest): Promise<Readable> {
    const check = new Digest();
    await pipeline(await this.o.destination.get(backup.object_key), check);
    if (check.hex() !== backup.checksum) throw new Error(`the stored artifact of backup ${backup.id} does not match its checksum: it was changed or damaged since it was taken.`);
    const stages: NodeJS.ReadWriteStream[] = [new Open(this.o.secrets.derive(keyPurpose(backup.id)))];
    if (manifest.artifact.compression === 'gzip') stages.push(createGunzip());
    const out = new PassThrough();
    void pipeline([await this.o.destination.get(backup.object_key), ...stages, out]).catch((err: unknown) => { out.destroy(err as Error); });
    return out;
  }

  async beforeStart(row: DatabaseRow, at: { image: string; volume: string; network: string }): Promise<string | null> {
    const tools = TOOLS[row.type as DatabaseType];
    if (tools.restoreWhen !== 'before-start') return null;
    const { backup, manifest } = await this.source(row);
    const none = address(row, '', 0);
    await tools.restore(this.tool(row, `restore-${row.id}`, { ...at, server: none, direct: none }), await this.plain(backup, manifest));
    return `Restoring from backup ${backup.id} (taken ${manifest.taken_at}: ${describeContents(manifest.contents)}): its snapshot was written into the new volume.`;
  }

  async afterReady(row: DatabaseRow, at: { image: string; volume: string; network: string; direct: DatabaseAddress }): Promise<string | null> {
    const tools = TOOLS[row.type as DatabaseType];
    const { backup, manifest } = await this.source(row);
    const started = this.o.clock.now().getTime();
    if (tools.restoreWhen === 'after-ready') {
      await tools.restore(this.tool(row, `restore-${row.id}`, { image: at.image, volume: at.volume, network: at.network, server: address(row, row.host, row.port, at.direct.password), direct: at.direct }), await this.plain(backup, manifest));
    }
    const now = await tools.count(at.direct);
    const differences = compareContents(manifest.contents, now);
    const seconds = ((this.o.clock.now().getTime() - started) / 1000).toFixed(1);
    if (differences.length > 0) throw new Error(`restored from backup ${backup.id}, but it does not hold what the manifest says: ${differences.join('; ')}.`);
    return `Restored from backup ${backup.id} in ${seconds} s: ${describeContents(now)}, as in the manifest.`;
  }
}

const address = (row: DatabaseRow, host: string, port: number, password = ''): DatabaseAddress => ({ type: row.type as DatabaseType, host, port, username: row.username, password, databaseName: row.database_name });

const streamOf = (text: string): Readable => {
  const s = new PassThrough();
  s.end(text);
  return s;
};

export type { Contents };
