import type { Readable } from 'node:stream';
import { iso, type Clock, type IdSource } from '../../domain/clock.js';
import type { Access } from '../../domain/access.js';
import type { DatabaseType } from '../../domain/database.js';
import { AppError, conflict, invalid, notFound } from '../../domain/errors.js';
import type { Late } from '../../domain/late.js';
import type { SecretBox } from '../../adapters/secrets/secret-box.js';
import type { StoreOf } from '../../store/db.js';
import type { BackupPolicyRow, BackupRow, DatabaseRow, RestoreRow } from '../../store/repositories/index.js';
import type { WalletService } from '../billing/wallet.service.js';
import { openArtifact, storedChecksum } from './artifact.js';
import type { Backup, BackupDetail, BackupPolicy, Restore } from './backups.schema.js';
import { nextRun, scheduleProblem } from './schedule.js';
import type { Destinations } from './destinations.js';
import { restoreProblem, toolsOfManifest } from './engines.js';
import { s3Error } from './s3.js';
import { keyPurpose, lastVerified, manifestKey, objectKey, type Manifest } from './policy.js';

/** The leader's backup worker as the API sees it: woken when there is work. */
export interface BackupWork {
  wake(): void;
}

export const idleBackupWork: BackupWork = { wake: () => undefined };

/**
 * The API side of backups (docs/backups.md): records, downloads and deletions. The backups
 * themselves are taken by the leader's BackupWorker, which takes `pending` rows as its work.
 */
export class BackupService {
  constructor(
    private readonly store: StoreOf<'backups' | 'databases'>,
    private readonly clock: Clock,
    private readonly ids: IdSource,
    private readonly secrets: Pick<SecretBox, 'derive'>,
    private readonly destinations: Destinations,
    private readonly wallets: Pick<WalletService, 'requireFunds'>,
    private readonly worker: Late<BackupWork>,
  ) {}

  async create(access: Access, dbSlug: string, input: { destination_id?: string | undefined }): Promise<Backup> {
    const db = await this.database(access, dbSlug);
    const destination = input.destination_id ?? (await this.store.repos.backups.policy(db.id))?.destination ?? 'local';
    await this.destinationOf(access, destination);
    if (db.status !== 'running') throw conflict(`The database is ${db.status}; a backup needs its server running.`);
    await this.wallets.requireFunds(access.workspace.id);
    const row = this.newBackup(db, 'manual', destination, access.caller.user.id);
    await this.store.transaction(async (tx) => {
      const active = await tx.backups.active(db.id);
      if (active !== undefined) throw conflict(`A backup of this database is already ${active.status} (${active.id}); one runs at a time.`);
      const restoring = await tx.backups.activeRestore(db.id);
      if (restoring !== undefined) throw conflict(`The database is being restored (${restoring.id}); take a backup once that has ended.`);
      await tx.backups.insert(row);
    });
    this.worker.get().wake();
    return backupView(row);
  }

  private newBackup(db: DatabaseRow, trigger: 'manual' | 'safety', destination: string, requestedBy: string): BackupRow {
    const id = this.ids.id();
    return {
      id,
      workspace_id: db.workspace_id,
      database_id: db.id,
      status: 'pending',
      trigger,
      destination,
      object_key: objectKey(db.workspace_id, db.id, id),
      size: null,
      checksum: null,
      manifest: null,
      started_at: null,
      finished_at: null,
      verified_at: null,
      restore_seconds: null,
      verify_status: null,
      verify_error: null,
      error: null,
      requested_by: requestedBy,
      created_at: iso(this.clock.now()),
    };
  }

  /**
   * An in-place restore (docs/backups.md#in-place-restore): only with the database's slug typed
   * again in `confirm`, and only after a safety backup of what it holds now, queued here with it
   * in one transaction. The leader's worker does the rest; the record tells its progress.
   */
  async restoreInPlace(access: Access, dbSlug: string, input: { backup_id: string; confirm: string }): Promise<Restore> {
    const db = await this.database(access, dbSlug);
    if (input.confirm !== db.slug) throw invalid(`"confirm" must be the database's slug ("${db.slug}"): an in-place restore replaces everything it holds now.`);
    const { backup, type } = await this.restoreSource(access, input.backup_id, undefined, 'backup_id', db.provisioner === 'shared' ? 'shared' : 'container');
    if (type !== db.type) throw invalid(`"backup_id" names a ${type} backup; the database is ${db.type}.`);
    if (db.status !== 'running') throw conflict(`The database is ${db.status}; an in-place restore needs its server running.`);
    await this.wallets.requireFunds(access.workspace.id);
    const safety = this.newBackup(db, 'safety', 'local', access.caller.user.id);
    const row: RestoreRow = {
      id: this.ids.id(),
      workspace_id: db.workspace_id,
      database_id: db.id,
      backup_id: backup.id,
      safety_backup_id: safety.id,
      status: 'pending',
      step: 'Taking a safety backup of what the database holds now.',
      result: null,
      error: null,
      requested_by: access.caller.user.id,
      created_at: safety.created_at,
      started_at: null,
      finished_at: null,
    };
    await this.store.transaction(async (tx) => {
      const active = await tx.backups.active(db.id);
      if (active !== undefined) throw conflict(`A backup of this database is ${active.status} (${active.id}); restore once it has ended.`);
      const restoring = await tx.backups.activeRestore(db.id);
      if (restoring !== undefined) throw conflict(`The database is already being restored (${restoring.id}).`);
      await tx.backups.insert(safety);
      await tx.backups.insertRestore(row);
    });
    this.worker.get().wake();
    return restoreView(row);
  }

  async restores(access: Access, dbSlug: string): Promise<Restore[]> {
    const db = await this.database(access, dbSlug);
    return (await this.store.repos.backups.restoresOf(db.id)).map(restoreView);
  }

  async restoreOf(access: Access, dbSlug: string, id: string): Promise<Restore> {
    const db = await this.database(access, dbSlug);
    const r = await this.store.repos.backups.restore(id);
    if (r === undefined || r.database_id !== db.id) throw notFound('Restore');
    return restoreView(r);
  }

  async list(access: Access, dbSlug: string): Promise<Backup[]> {
    const db = await this.database(access, dbSlug);
    return (await this.store.repos.backups.ofDatabase(db.id)).map(backupView);
  }

  async get(access: Access, dbSlug: string, id: string): Promise<BackupDetail> {
    const { backup } = await this.backup(access, dbSlug, id);
    const m = backup.manifest === null ? null : (JSON.parse(backup.manifest) as Manifest);
    return {
      ...backupView(backup),
      manifest:
        m === null
          ? null
          : { engine: m.engine, tool: m.tool, image: m.image, taken_at: m.taken_at, compression: m.artifact.compression, encryption: m.artifact.encryption, contents: m.contents },
    };
  }

  /**
   * The dump in the engine's own form, decrypted and decompressed, after the stored artifact's
   * checksum was checked in full (a damaged artifact is a 409 with the reason, never a broken file).
   */
  async download(access: Access, dbSlug: string, id: string): Promise<{ filename: string; body: () => Readable }> {
    const { db, backup } = await this.backup(access, dbSlug, id);
    if (backup.status !== 'succeeded' || backup.manifest === null) throw conflict(`The backup is ${backup.status}; only a succeeded backup can be downloaded.`);
    const manifest = JSON.parse(backup.manifest) as Manifest;
    const destination = await this.destinations.of(backup.workspace_id, backup.destination);
    if (destination === null) throw conflict(`The backup's destination (${backup.destination}) no longer exists.`);
    let checksum: string;
    try {
      checksum = await storedChecksum(await destination.get(backup.object_key));
    } catch (err) {
      throw conflict(`The backup's artifact cannot be read from ${backup.destination}: ${err instanceof Error ? err.message : String(err)}`);
    }
    if (checksum !== backup.checksum) throw conflict("The backup's stored artifact does not match its checksum: it was changed or damaged since it was taken.");
    const ext = toolsOfManifest(manifest).extension;
    return {
      filename: `${db.slug}-${backup.id}.${ext}`,
      body: () => openArtifact(() => destination.get(backup.object_key), this.secrets.derive(keyPurpose(backup.id)), manifest.artifact.compression),
    };
  }

  async delete(access: Access, dbSlug: string, id: string): Promise<Backup> {
    const { backup } = await this.backup(access, dbSlug, id);
    if (backup.status === 'pending' || backup.status === 'running') throw conflict(`The backup is ${backup.status}; it can be deleted once it has ended.`);
    const at = await this.destinations.of(backup.workspace_id, backup.destination);
    try {
      for (const d of new Set([at, this.destinations.local])) {
        // a failed upload keeps its local copy: it goes with the record
        if (d === null) continue;
        await d.delete(backup.object_key);
        await d.delete(manifestKey(backup.object_key));
      }
    } catch (err) {
      throw new AppError('BAD_GATEWAY', `The backup's artifact could not be deleted at ${backup.destination} (${s3Error(err).message}); the backup is kept. Try again.`);
    }
    await this.store.repos.backups.delete(backup.id);
    return backupView(backup);
  }

  /** Queues a verification (a restore into a scratch server compared with the manifest). */
  async verify(access: Access, dbSlug: string, id: string): Promise<Backup> {
    const { backup } = await this.backup(access, dbSlug, id);
    if (backup.status !== 'succeeded') throw conflict(`The backup is ${backup.status}; only a succeeded backup can be verified.`);
    if (backup.verify_status === 'pending' || backup.verify_status === 'running') throw conflict(`Its verification is already ${backup.verify_status}.`);
    await this.wallets.requireFunds(access.workspace.id);
    await this.store.repos.backups.updateVerify(backup.id, backup.verify_status, { verify_status: 'pending', verify_error: null });
    this.worker.get().wake();
    return backupView({ ...backup, verify_status: 'pending', verify_error: null });
  }

  async getPolicy(access: Access, dbSlug: string): Promise<BackupPolicy | null> {
    const db = await this.database(access, dbSlug);
    const row = await this.store.repos.backups.policy(db.id);
    return row === undefined ? null : this.policyView(row);
  }

  async putPolicy(
    access: Access,
    dbSlug: string,
    input: { schedule: string; timezone?: string | undefined; keep_count?: number | undefined; keep_days?: number | null | undefined; destination_id?: string | undefined; verify?: 'after-each' | 'weekly' | 'never' | undefined },
  ): Promise<BackupPolicy> {
    const db = await this.database(access, dbSlug);
    const timezone = input.timezone ?? 'UTC';
    const problem = scheduleProblem(input.schedule, timezone);
    if (problem !== null) throw invalid(problem);
    const destination = input.destination_id ?? 'local';
    await this.destinationOf(access, destination);
    const now = this.clock.now();
    const next = nextRun(input.schedule, timezone, now);
    if (next === null) throw invalid('"schedule" never runs.');
    const old = await this.store.repos.backups.policy(db.id);
    const row: BackupPolicyRow = {
      database_id: db.id,
      workspace_id: db.workspace_id,
      schedule: input.schedule.trim().replace(/\s+/g, ' '),
      timezone,
      keep_count: input.keep_count ?? 7,
      keep_days: input.keep_days ?? null,
      destination,
      verify: input.verify ?? 'weekly',
      next_run_at: iso(next),
      alert: null,
      alerted_at: null,
      created_at: old?.created_at ?? iso(now),
      updated_at: iso(now),
    };
    await this.store.repos.backups.putPolicy(row);
    this.worker.get().wake();
    return this.policyView(row);
  }

  async deletePolicy(access: Access, dbSlug: string): Promise<{ deleted: boolean }> {
    const db = await this.database(access, dbSlug);
    return { deleted: await this.store.repos.backups.deletePolicy(db.id) };
  }

  private async policyView(r: BackupPolicyRow): Promise<BackupPolicy> {
    const ok = await this.store.repos.backups.succeeded(r.database_id);
    return {
      schedule: r.schedule,
      timezone: r.timezone,
      keep_count: r.keep_count,
      keep_days: r.keep_days,
      destination_id: r.destination,
      verify: r.verify as BackupPolicy['verify'],
      next_run_at: r.next_run_at,
      alert: r.alert,
      alerted_at: r.alerted_at,
      last_success_at: ok[0]?.finished_at ?? null,
      last_verified_at: lastVerified(ok),
      created_at: r.created_at,
      updated_at: r.updated_at,
    };
  }

  /**
   * The backup a new database of this workspace is restored from (POST …/databases with
   * `restore_from`): one of its own databases', succeeded, of the same type.
   */
  /** A succeeded backup of this workspace that can be restored into a database of `type` provisioned as `into`; 400 otherwise. */
  async restoreSource(access: Access, id: string, type: string | undefined, field = 'restore_from', into: 'container' | 'shared' = 'container'): Promise<{ backup: BackupRow; type: DatabaseType }> {
    const backup = await this.store.repos.backups.byId(id);
    // another workspace's backup is as unknown as one that does not exist
    if (backup === undefined || backup.workspace_id !== access.workspace.id) throw invalid(`"${field}" names no backup of this workspace.`);
    if (backup.status !== 'succeeded' || backup.manifest === null) throw invalid(`"${field}" names a backup that is ${backup.status}; only a succeeded backup can be restored.`);
    const manifest = JSON.parse(backup.manifest) as Manifest;
    if (type !== undefined && type !== manifest.database.type) throw invalid(`"${field}" names a ${manifest.database.type} backup; "type" is ${type}.`);
    const problem = restoreProblem(manifest, into);
    if (problem !== null) throw invalid(`"${field}": ${problem}.`);
    return { backup, type: manifest.database.type };
  }

  /** A destination of this workspace: `local`, or one of its own (another workspace's is unknown). */
  private async destinationOf(access: Access, id: string): Promise<void> {
    if ((await this.destinations.of(access.workspace.id, id)) === null) throw invalid(`"destination_id" names no backup destination of this workspace (use "local" or the id of one of GET …/backup-destinations).`);
  }

  private async database(access: Access, slug: string): Promise<DatabaseRow> {
    const row = await this.store.repos.databases.bySlug(access.workspace.id, slug);
    if (row === undefined) throw notFound('Database');
    return row;
  }

  private async backup(access: Access, dbSlug: string, id: string): Promise<{ db: DatabaseRow; backup: BackupRow }> {
    const db = await this.database(access, dbSlug);
    const backup = await this.store.repos.backups.byId(id);
    if (backup === undefined || backup.database_id !== db.id) throw notFound('Backup');
    return { db, backup };
  }
}

export function backupView(r: BackupRow): Backup {
  return {
    id: r.id,
    database_id: r.database_id,
    status: r.status as Backup['status'],
    trigger: r.trigger as Backup['trigger'],
    destination: r.destination,
    size: r.size,
    checksum: r.checksum,
    started_at: r.started_at,
    finished_at: r.finished_at,
    verified_at: r.verified_at,
    restore_seconds: r.restore_seconds,
    error: r.error,
    verify_status: r.verify_status as Backup['verify_status'],
    verify_error: r.verify_error,
    created_at: r.created_at,
  };
}

export function restoreView(r: RestoreRow): Restore {
  return {
    id: r.id,
    database_id: r.database_id,
    backup_id: r.backup_id,
    safety_backup_id: r.safety_backup_id,
    status: r.status as Restore['status'],
    step: r.step,
    result: r.result,
    error: r.error,
    created_at: r.created_at,
    started_at: r.started_at,
    finished_at: r.finished_at,
  };
}
