import { PassThrough, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import { iso, type Clock, type IdSource } from '../../domain/clock.js';
import { DEFAULT_PORTS, generatePassword, usernameFor, type DatabaseAddress, type DatabaseType } from '../../domain/database.js';
import type { Runtime } from '../../domain/runtime.js';
import type { Mailer } from '../../adapters/notify/mailer.js';
import { randomBytes } from 'node:crypto';
import type { SecretBox } from '../../adapters/secrets/secret-box.js';
import type { BackupPolicyRow, BackupRow, DatabaseRow, Repositories, RestoreRow } from '../../store/repositories/index.js';
import type { DatabaseRestorer } from '../databases/databases.worker.js';
import { serverName } from '../databases/health.js';
import { passwordContext } from '../databases/policy.js';
import type { DatabasePolicy } from '../databases/policy.js';
import { localImage, login as realLogin, SERVERS } from '../databases/servers.js';
import { intervalMs, nextRun } from './schedule.js';
import { Digest, digestOf, openArtifact, Seal, storedChecksum } from './artifact.js';
import { compareContents, describeContents, redisReplicate, restoreProblem, toolsFor, toolsOfManifest, type Contents, type ToolContext } from './engines.js';
import type { Destination, Destinations } from './destinations.js';
import { s3Error } from './s3.js';
import { BACKUP_LABEL, keyPurpose, lastVerified, manifestKey, objectKey, type Manifest } from './policy.js';

export interface BackupWorkerLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface BackupWorkerOptions {
  repos: Pick<Repositories, 'backups' | 'databases' | 'workspaces' | 'members'>;
  clock: Clock;
  ids: IdSource;
  secrets: Pick<SecretBox, 'open' | 'derive'>;
  runtime: Pick<Runtime, 'task' | 'inspect' | 'inspectImage' | 'list' | 'remove' | 'run' | 'ensureVolume' | 'removeVolume' | 'listVolumes'>;
  /** the images each type runs (the tools of a shared server's backups come from them) and the shared servers' administrative URLs */
  databases: Pick<DatabasePolicy, 'images' | 'shared'>;
  /** e-mails the owners when backups of a database are in trouble; absent: the alert is in the records and the log only */
  mailer?: Mailer | undefined;
  /** logs in to a scratch server (the real clients by default) */
  login?: (a: DatabaseAddress) => Promise<void>;
  /** how long a scratch server gets to accept a login (default 2 min) */
  scratchReadyMs?: number;
  /** local and the workspaces' S3 destinations */
  destinations: Destinations;
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
  /** how often the alerts are looked at (default 30 s) */
  alertsEveryMs?: number;
  /** how often the local destination is swept of artifacts no record names (default 10 min) */
  sweepEveryMs?: number;
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
  private readonly o: Required<Pick<BackupWorkerOptions, 'concurrency' | 'taskTimeoutMs' | 'taskMemoryMb' | 'pollMs' | 'alertsEveryMs' | 'scratchReadyMs' | 'sweepEveryMs'>> & BackupWorkerOptions;
  private recovered = false;
  private verifying: Promise<void> | null = null;
  private lastAlerts = 0;
  private lastSweep = 0;

  constructor(o: BackupWorkerOptions) {
    this.o = { concurrency: 2, taskTimeoutMs: 2 * 3600_000, taskMemoryMb: 512, pollMs: 2_000, alertsEveryMs: 30_000, scratchReadyMs: 120_000, sweepEveryMs: 600_000, ...o };
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
    await this.verifying;
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
    await this.verifying;
  }

  private async pass(): Promise<void> {
    const { repos } = this.o;
    if (!this.recovered) {
      this.recovered = true;
      await this.recover();
    }
    await this.schedule();
    const now = this.o.clock.now().getTime();
    if (now - this.lastAlerts >= this.o.alertsEveryMs) {
      this.lastAlerts = now;
      await this.alerts();
    }
    if (now - this.lastSweep >= this.o.sweepEveryMs) {
      this.lastSweep = now;
      await this.sweep().catch((err: unknown) => { this.o.log.warn({ err }, 'backup worker: the sweep of the local destination failed; trying again later'); });
    }
    if (this.verifying === null) {
      const next = (await repos.backups.verifyQueue())[0];
      if (next !== undefined) {
        this.verifying = this.verify(next)
          .catch((err: unknown) => { this.o.log.error({ err, backup: next.id }, 'backup worker: unexpected failure of a verification'); })
          .finally(() => {
            this.verifying = null;
            this.wake();
          });
      }
    }
    for (const r of await repos.backups.restoresWithStatus(['pending'])) {
      if (this.stopped || this.busy.size >= this.o.concurrency) return;
      const key = `${r.database_id}:restore-${r.id}`;
      if (this.busy.has(key)) continue;
      const safety = await repos.backups.byId(r.safety_backup_id);
      if (safety !== undefined && (safety.status === 'pending' || safety.status === 'running')) continue;
      if (safety?.status !== 'succeeded') {
        // no safety backup, no restore: nothing was changed
        await repos.backups.updateRestore(r.id, 'pending', { status: 'failed', step: null, error: `The safety backup ${r.safety_backup_id} ${safety === undefined ? 'is gone' : `failed (${safety.error ?? 'no reason given'})`}; nothing was restored and the database was not changed.`, finished_at: iso(this.o.clock.now()) });
        continue;
      }
      if ([...this.busy.keys()].some((id) => id.startsWith(`${r.database_id}:`))) continue;
      const job = this.restoreInPlace(r)
        .catch((err: unknown) => { this.o.log.error({ err, restore: r.id }, 'backup worker: unexpected failure of a restore'); })
        .finally(() => {
          this.busy.delete(key);
          this.wake();
        });
      this.busy.set(key, job);
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
    await repos.backups.failRunningVerifications('Slipway stopped while this verification ran; it was not finished.');
    for (const r of await repos.backups.restoresWithStatus(['restoring'])) {
      await repos.backups.updateRestore(r.id, 'restoring', { status: 'failed', step: null, error: `Slipway stopped while this restore ran; the database may hold part of it. The safety backup ${r.safety_backup_id} holds what it held before.`, finished_at: iso(clock.now()) });
    }
    try {
      for (const c of await runtime.list({ labels })) {
        if (c.labels[BACKUP_LABEL] !== undefined) await runtime.remove(c.id);
      }
      for (const v of await runtime.listVolumes({ labels })) {
        if (v.labels[BACKUP_LABEL] !== undefined) await runtime.removeVolume(v.name);
      }
    } catch (err) {
      this.o.log.warn({ err }, 'backup worker: cannot remove the tool containers a previous run left');
    }
  }

  /**
   * The local destination's artifacts that no backup record names (docs/backups.md#sweep): the
   * directories of deleted databases (their records went with them), and, in the directories of
   * databases that exist, files of no record older than an hour (a deletion that failed half-way).
   */
  private async sweep(): Promise<void> {
    const { repos } = this.o;
    const local = this.o.destinations.local;
    const dirs = await local.databaseDirs();
    const remotes = await repos.backups.allDestinations();
    if (dirs.length === 0 && remotes.length === 0) return;
    const keys = await repos.backups.objectKeys();
    const named = new Set([...keys].flatMap((k) => [k, manifestKey(k)]));
    const databases = await repos.databases.ids();
    const hourAgo = Date.now() - 3_600_000;
    // each workspace's S3 destinations: the objects of its deleted databases, and strays older than an hour
    for (const row of remotes) {
      if (this.stopped) return;
      try {
        const d = this.o.destinations.s3(row);
        const files = await d.files(row.workspace_id);
        const byDatabase = new Map<string, { key: string; modifiedMs: number }[]>();
        for (const f of files) {
          const database = f.key.split('/')[1] ?? '';
          const list = byDatabase.get(database);
          if (list === undefined) byDatabase.set(database, [f]);
          else list.push(f);
        }
        for (const [database, list] of byDatabase) {
          const { gone, stale } = swept(list, databases.has(database), named, hourAgo);
          for (const key of stale) await d.delete(key);
          if (gone) this.o.log.info({ workspace: row.workspace_id, database, destination: row.id, objects: list.length }, 'backup sweep: removed the objects of a deleted database from an S3 destination');
        }
      } catch (err) {
        this.o.log.warn({ destination: row.id, error: s3Error(err).message }, 'backup sweep: cannot look at an S3 destination; trying again later');
      }
    }
    for (const { workspace, database } of dirs) {
      if (this.stopped) return;
      const files = await local.files(workspace, database);
      const { gone, stale } = swept(files, databases.has(database), named, hourAgo);
      if (gone) {
        await local.removeDatabaseDir(workspace, database);
        this.o.log.info({ workspace, database, files: files.length }, 'backup sweep: removed the artifacts of a deleted database');
        continue;
      }
      for (const key of stale) {
        await local.delete(key).catch(() => false);
        this.o.log.info({ key }, 'backup sweep: removed an artifact no backup names');
      }
    }
  }

  /** A failed backup, with the failing step's error; a scheduled one raises an alert (a failed e-mail changes nothing here). */
  private async fail(b: BackupRow, said: string): Promise<void> {
    const message = scrub(said);
    this.o.log.warn({ backup: b.id, database: b.database_id, error: message }, 'backup failed');
    await this.o.repos.backups.update(b.id, 'running', { status: 'failed', error: message, finished_at: iso(this.o.clock.now()) });
    if (b.trigger !== 'scheduled') return;
    const db = await this.o.repos.databases.byId(b.database_id);
    const p = db === undefined ? undefined : await this.o.repos.backups.policy(db.id);
    if (db !== undefined && p !== undefined) await this.raise(db, p, `The scheduled backup ${b.id} failed: ${message}`);
  }

  /** Where a backup is kept: its workspace's destination of that id. */
  private async at(b: Pick<BackupRow, 'workspace_id' | 'destination'>): Promise<Destination> {
    const d = await this.o.destinations.of(b.workspace_id, b.destination);
    if (d === null) throw new Error(`its destination (${b.destination}) no longer exists.`);
    return d;
  }

  private async run(b: BackupRow): Promise<void> {
    const { repos, clock } = this.o;
    const local = this.o.destinations.local;
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
    const type = db.type as DatabaseType;
    const shared = db.provisioner === 'shared';
    const tools = toolsFor(type, shared ? 'shared' : 'container');
    let step = 'preparing';
    const job = new AbortController();
    let remote: Destination | null = null;
    let uploaded = false;
    try {
      const target = await this.at(b);
      remote = target === local ? null : target;
      const ctx = { ...(await (shared ? this.sharedContext(db, b.id) : this.context(db, b.id))), signal: AbortSignal.any([this.abort.signal, job.signal]) };
      step = 'dumping';
      const raw = new PassThrough();
      const digest = new Digest();
      // the artifact is written here first; a remote destination gets it from this copy
      const stored = local.put(b.object_key, digest);
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
        image: ctx.image,
        layout: shared ? 'tenant' : 'server',
        taken_at: iso(startedAt),
        artifact: { key: b.object_key, size, sha256: checksum, compression: tools.compress ? 'gzip' : 'none', encryption: 'aes-256-gcm, 64 KiB records, key per backup' },
        contents: dumped.contents,
      };
      const manifestText = JSON.stringify(manifest, null, 2);
      await local.put(manifestKey(b.object_key), streamOf(manifestText));
      // counted only once it was read back from where it is kept
      step = 'reading back';
      await readBack(local, b.object_key, size, checksum);
      if (remote !== null) {
        const to = remote;
        step = `uploading to ${to.id}`;
        uploaded = true;
        await remoteStep(async () => {
          await to.put(b.object_key, await local.get(b.object_key), size);
          await to.put(manifestKey(b.object_key), streamOf(manifestText));
        });
        step = `reading back from ${to.id}`;
        await remoteStep(() => readBack(to, b.object_key, size, checksum));
        // the local copy goes only once the remote one is confirmed
        await local.delete(b.object_key);
        await local.delete(manifestKey(b.object_key));
      }
      await repos.backups.update(b.id, 'running', { status: 'succeeded', size, checksum, manifest: JSON.stringify(manifest), finished_at: iso(clock.now()), error: null });
      await this.afterSuccess(b, db);
      this.o.log.info({ backup: b.id, database: db.id, bytes: size, seconds: (clock.now().getTime() - startedAt.getTime()) / 1000 }, `backup succeeded: ${describeContents(dumped.contents)}`);
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      if (remote !== null && uploaded) {
        // what reached the remote destination is not a backup; the local copy stays (removed with the record)
        const to = remote;
        await to.delete(b.object_key).catch(() => undefined);
        await to.delete(manifestKey(b.object_key)).catch(() => undefined);
        await this.fail(b, `${step}: ${message} The local copy is kept until this backup is deleted.`);
        return;
      }
      await local.delete(b.object_key).catch(() => undefined);
      await local.delete(manifestKey(b.object_key)).catch(() => undefined);
      await this.fail(b, `${step}: ${message}`);
    }
  }

  /**
   * After a success: retention at its destination (the backup just taken is the newest, so
   * nothing is pruned before a newer one succeeded), a verification when the policy asks for one,
   * and the "no success" alert lifted.
   */
  private async afterSuccess(b: BackupRow, db: DatabaseRow): Promise<void> {
    const { repos } = this.o;
    const policy = await repos.backups.policy(db.id);
    if (policy !== undefined) {
      for (const destination of new Set([b.destination, policy.destination, 'local'])) await this.prune(db, policy, destination);
      if (b.trigger === 'scheduled' && policy.verify !== 'never') {
        const last = lastVerified(await repos.backups.succeeded(db.id));
        const weekAgo = this.o.clock.now().getTime() - 7 * 86_400_000;
        if (policy.verify === 'after-each' || last === null || Date.parse(last) < weekAgo) await repos.backups.updateVerify(b.id, null, { verify_status: 'pending' });
      }
      // a success lifts the alerts about backups not succeeding (not those about verification)
      if (policy.alert !== null && (policy.alert.startsWith('No backup') || policy.alert.startsWith('The scheduled backup') || policy.alert.startsWith('A scheduled backup was skipped'))) await repos.backups.setAlert(db.id, null, null);
    }
  }

  /** Retention by count and by age at one destination; the newest succeeded backup is always kept. */
  private async prune(db: DatabaseRow, policy: BackupPolicyRow, destination: string): Promise<void> {
    const { repos, clock } = this.o;
    // safety backups (taken before an in-place restore) are kept until deleted by hand
    const kept = (await repos.backups.succeeded(db.id, destination)).filter((x) => x.trigger !== 'safety');
    const oldest = policy.keep_days === null ? null : clock.now().getTime() - policy.keep_days * 86_400_000;
    for (const [i, x] of kept.entries()) {
      if (i === 0) continue;
      const tooMany = i >= policy.keep_count;
      const tooOld = oldest !== null && Date.parse(x.finished_at ?? x.created_at) < oldest;
      if (!tooMany && !tooOld) continue;
      if (x.verify_status === 'running') continue;
      try {
        const at = await this.at(x);
        await at.delete(x.object_key);
        await at.delete(manifestKey(x.object_key));
        await repos.backups.delete(x.id);
        this.o.log.info({ backup: x.id, database: db.id, reason: tooMany ? 'count' : 'age' }, 'backup removed by retention');
      } catch (err) {
        this.o.log.warn({ err, backup: x.id }, 'backup worker: retention could not remove a backup yet');
      }
    }
  }

  /**
   * The schedules that are due: each run is claimed by moving its policy's next run forward
   * (only one leader moves it), then queued; a run while the previous one still runs is recorded
   * as failed with that reason. A schedule missed while Slipway was down runs once.
   */
  private async schedule(): Promise<void> {
    const { repos, clock, ids } = this.o;
    const now = clock.now();
    for (const p of await repos.backups.policies()) {
      if (Date.parse(p.next_run_at) > now.getTime() || this.stopped) continue;
      const next = nextRun(p.schedule, p.timezone, now);
      if (next === null || !(await repos.backups.advance(p.database_id, p.next_run_at, iso(next)))) continue;
      const db = await repos.databases.byId(p.database_id);
      if (db === undefined) continue;
      const id = ids.id();
      const active = await repos.backups.active(db.id);
      const at = iso(now);
      await repos.backups.insert({
        id,
        workspace_id: db.workspace_id,
        database_id: db.id,
        status: active === undefined ? 'pending' : 'failed',
        trigger: 'scheduled',
        destination: p.destination,
        object_key: objectKey(db.workspace_id, db.id, id),
        size: null,
        checksum: null,
        manifest: null,
        started_at: active === undefined ? null : at,
        finished_at: active === undefined ? null : at,
        verified_at: null,
        restore_seconds: null,
        verify_status: null,
        verify_error: null,
        error: active === undefined ? null : `skipped: the previous backup (${active.id}) was still ${active.status}.`,
        requested_by: null,
        created_at: at,
      });
      if (active !== undefined) await this.raise(db, p, `A scheduled backup was skipped: the previous backup (${active.id}) was still ${active.status}.`);
    }
  }

  /**
   * The alerts in force (docs/backups.md#alerts): no success within 1.5× the schedule's interval,
   * or no verified restore for 14 days. Each is raised once (the policy keeps it) and lifted
   * by the next success.
   */
  private async alerts(): Promise<void> {
    const { repos, clock } = this.o;
    const now = clock.now();
    for (const p of await repos.backups.policies()) {
      const db = await repos.databases.byId(p.database_id);
      if (db === undefined) continue;
      const ok = await repos.backups.succeeded(db.id);
      const lastOk = ok[0]?.finished_at ?? null;
      const since = Date.parse(lastOk ?? p.created_at);
      const interval = intervalMs(p.schedule, p.timezone, now);
      if (now.getTime() - since > 1.5 * interval) {
        await this.raise(db, p, lastOk === null ? `No backup of this database has succeeded since its schedule was set (${p.created_at}).` : `No backup of this database has succeeded since ${lastOk}, more than 1.5 times its schedule's interval.`);
        continue;
      }
      if (p.verify !== 'never') {
        const verified = lastVerified(ok);
        const from = Date.parse(verified ?? p.created_at);
        if (now.getTime() - from > 14 * 86_400_000) await this.raise(db, p, verified === null ? 'No restore of a backup of this database has been verified in the 14 days since its schedule was set.' : `The last verified restore of this database's backups was at ${verified}, more than 14 days ago.`);
      }
    }
  }

  /** Raises an alert once: the policy and the database's events say so, the owners are e-mailed; a failed e-mail changes nothing else. */
  private async raise(db: DatabaseRow, p: BackupPolicyRow, message: string): Promise<void> {
    const { repos, clock } = this.o;
    if (p.alert === message) return;
    const at = iso(clock.now());
    await repos.backups.setAlert(db.id, message, at);
    p.alert = message;
    await repos.databases.addEvent({ id: this.o.ids.id(), database_id: db.id, at, message: `Backup alert: ${message}` }).catch(() => undefined);
    this.o.log.warn({ database: db.id, alert: message }, 'backup alert');
    const mailer = this.o.mailer;
    if (mailer === undefined) return;
    try {
      const ws = await repos.workspaces.byId(db.workspace_id);
      const owners = (await repos.members.list(db.workspace_id)).filter((m) => m.role === 'owner' && m.status === 'active');
      for (const o of owners) {
        await mailer.send({ to: o.email, subject: `Slipway: backups of ${db.name} (${ws?.slug ?? db.workspace_id}) need attention`, text: `${message}\n\nDatabase: ${db.slug} in workspace ${ws?.slug ?? db.workspace_id}.` });
      }
    } catch (err) {
      this.o.log.warn({ err, database: db.id }, 'backup alert: the e-mail could not be sent (the alert stays in the records)');
    }
  }

  /**
   * Proof (docs/backups.md#verification): the backup restored into a scratch server of the same
   * engine and image (capped CPU and memory, on the workspace's network), its contents compared
   * with the manifest, the time recorded, the scratch server removed whatever happened.
   */
  private async verify(b: BackupRow): Promise<void> {
    const { repos, clock, runtime } = this.o;
    if (!(await repos.backups.updateVerify(b.id, 'pending', { verify_status: 'running', verify_error: null }))) return;
    const started = clock.now().getTime();
    const name = `slipway-verify-${b.id}`;
    try {
      const db = await repos.databases.byId(b.database_id);
      if (db === undefined || b.manifest === null) throw new Error('the database or its manifest is gone.');
      const manifest = JSON.parse(b.manifest) as Manifest;
      const { direct } = await this.scratch(db, b, manifest, name, `verify-${b.id}`);
      // the scratch server is the backup's own: its whole contents are what was restored
      const differences = compareContents(manifest.contents, await toolsOfManifest(manifest).count(direct));
      if (differences.length > 0) throw new Error(`the restored copy does not hold what the manifest says: ${differences.join('; ')}.`);
      const seconds = Math.round((clock.now().getTime() - started) / 100) / 10;
      await repos.backups.updateVerify(b.id, 'running', { verify_status: 'succeeded', verified_at: iso(clock.now()), restore_seconds: seconds, verify_error: null });
      this.o.log.info({ backup: b.id, database: db.id, seconds }, `backup verified: ${describeContents(manifest.contents)} restored into a scratch server`);
    } catch (err) {
      const message = scrub(err instanceof Error ? err.message : String(err));
      await repos.backups.updateVerify(b.id, 'running', { verify_status: 'failed', verify_error: message });
      this.o.log.warn({ backup: b.id, error: message }, 'backup verification failed');
      const db = await repos.databases.byId(b.database_id);
      const p = db === undefined ? undefined : await repos.backups.policy(db.id);
      if (db !== undefined && p !== undefined) await this.raise(db, p, `The verification of backup ${b.id} failed: ${message}`);
    } finally {
      await runtime.remove(name).catch(() => undefined);
      await runtime.removeVolume(name).catch(() => undefined);
    }
  }

  /**
   * A scratch server of the backup's engine and image named `name` (capped CPU and memory, on the
   * workspace's network), the backup restored into it: where Slipway and the workspace's network
   * reach it. The caller removes the container and the volume of that name.
   */
  private async scratch(db: DatabaseRow, b: BackupRow, manifest: Manifest, name: string, taskId: string): Promise<{ direct: DatabaseAddress; inside: DatabaseAddress }> {
    const { runtime } = this.o;
    const labels = { ...this.o.labels, [BACKUP_LABEL]: taskId };
    const ws = await this.o.repos.workspaces.byId(db.workspace_id);
    if (ws === undefined) throw new Error('its workspace no longer exists.');
    {
      const type = db.type as DatabaseType;
      const tools = toolsOfManifest(manifest);
      const server = SERVERS[type];
      const network = await this.o.network({ id: ws.id, slug: ws.slug });
      const password = generatePassword((n) => randomBytes(n));
      // a server of its own, as a container database's (a shared server's tenant names mean nothing there)
      const username = db.provisioner === 'shared' ? usernameFor(type) : db.username;
      const inside: DatabaseAddress = { type, host: name, port: DEFAULT_PORTS[type], username, password, databaseName: db.database_name };
      await runtime.ensureVolume({ name, workspace: ws.id, labels });
      const at = { image: manifest.image, volume: name, network };
      if (tools.restoreWhen === 'before-start') await tools.restore(this.tool(db, taskId, { ...at, server: inside, direct: inside }), await this.plain(b, manifest, 'first'));
      const info = await runtime.run({
        name,
        image: manifest.image,
        env: server.env(inside, () => generatePassword((n) => randomBytes(n))),
        ...(server.command === undefined ? {} : { command: server.command(inside) }),
        owner: { workspace: ws.id },
        labels,
        cpu: 1,
        memoryBytes: this.o.taskMemoryMb * 1024 * 1024,
        network,
        aliases: [name],
        port: inside.port,
        publish: this.o.upstreamMode === 'published',
        mounts: [{ volume: name, path: server.dataPath }],
        restart: { kind: 'never' },
        init: true,
      });
      const direct: DatabaseAddress =
        this.o.upstreamMode === 'published' && info.hostPort !== null ? { ...inside, host: '127.0.0.1', port: info.hostPort } : { ...inside, host: info.networkAddress ?? name };
      await this.waitForLogin(direct, name);
      if (tools.restoreWhen === 'after-ready') await tools.restore(this.tool(db, taskId, { ...at, server: inside, direct }), await this.plain(b, manifest, 'first'));
      return { direct, inside };
    }
  }

  private async waitForLogin(a: DatabaseAddress, container: string): Promise<void> {
    const login = this.o.login ?? realLogin;
    const deadline = this.o.clock.now().getTime() + this.o.scratchReadyMs;
    let last = '';
    for (;;) {
      if (this.stopped) throw new Error('Slipway is stopping');
      try {
        await login(a);
        return;
      } catch (err) {
        last = err instanceof Error ? err.message : String(err);
      }
      const info = await this.o.runtime.inspect(container);
      if (info === null || info.state === 'exited' || info.state === 'dead') throw new Error(`the scratch server exited before it accepted a login${info?.oomKilled === true ? ' (out of memory)' : ''}.`);
      if (this.o.clock.now().getTime() > deadline) throw new Error(`the scratch server did not accept a login in time (last answer: ${last}).`);
      await new Promise((r) => setTimeout(r, 300));
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

  /**
   * A tenant of a shared server (docs/backups.md#shared-servers): the tools run with its own
   * credentials against the operator's server, in a container on the host's network (the server
   * is where the host reaches it), from the image its type runs as a container.
   */
  private async sharedContext(db: DatabaseRow, taskId: string): Promise<ToolContext> {
    const type = db.type as DatabaseType;
    const admin = this.o.databases.shared[type];
    if (admin === undefined) throw new Error(`no shared ${type} server is configured any more (--database-shared-${type}).`);
    const password = this.o.secrets.open(db.password, passwordContext(db.id));
    const a: DatabaseAddress = { type, host: db.host, port: db.port, username: db.username, password, databaseName: db.database_name };
    // Redis's tenant backups need no tool container; the image is what a verification restores into
    const image = type === 'redis' ? await this.toolImage(type).catch(() => this.o.databases.images[type]) : await this.toolImage(type);
    return { ...this.tool(db, taskId, { image, volume: '', network: 'host', server: a, direct: a }), shared: { admin, prefix: `${db.username}:` } };
  }

  /** The image a type runs when it is on this host, else the locally built one (never pulled here: the database worker pulls). */
  private async toolImage(type: DatabaseType): Promise<string> {
    const wanted = this.o.databases.images[type];
    if ((await this.o.runtime.inspectImage(wanted)) !== null) return wanted;
    const local = localImage(type);
    if ((await this.o.runtime.inspectImage(local)) !== null) return local;
    throw new Error(`the tools of ${type} come from its image, and neither ${wanted} nor ${local} is on this host (make db-images builds the latter).`);
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

  // --- in-place restores ----------------------------------------------------------------------

  /**
   * An in-place restore, once its safety backup has succeeded (docs/backups.md#in-place-restore):
   * the backup replaces what the running server's database holds (Redis: by replication from a
   * scratch server holding the backup), then the counts are compared with the manifest.
   */
  private async restoreInPlace(r: RestoreRow): Promise<void> {
    const { repos, clock, runtime } = this.o;
    const started = clock.now();
    if (!(await repos.backups.updateRestore(r.id, 'pending', { status: 'restoring', started_at: iso(started), step: `Restoring backup ${r.backup_id}.` }))) return;
    const step = async (text: string) => { await repos.backups.updateRestore(r.id, 'restoring', { step: text }); };
    const scratchName = `slipway-restore-${r.id}`;
    let db: DatabaseRow | undefined;
    try {
      db = await repos.databases.byId(r.database_id);
      if (db === undefined) throw new Error('the database no longer exists.');
      if (db.status !== 'running') throw new Error(`the database is ${db.status}; nothing was changed.`);
      const backup = await repos.backups.byId(r.backup_id);
      if (backup === undefined || backup.workspace_id !== db.workspace_id || backup.status !== 'succeeded' || backup.manifest === null) throw new Error(`the backup ${r.backup_id} is gone or did not succeed; nothing was changed.`);
      const manifest = JSON.parse(backup.manifest) as Manifest;
      const shared = db.provisioner === 'shared';
      const problem = restoreProblem(manifest, shared ? 'shared' : 'container');
      if (problem !== null) throw new Error(`${problem}; nothing was changed.`);
      // the database's own tools replace what it holds; a backup of another layout (a tenant's
      // Redis keys into a server of its own) goes through a scratch server and replication
      const tools = toolsFor(db.type as DatabaseType, shared ? 'shared' : 'container');
      const ctx = shared ? await this.sharedContext(db, `restore-${r.id}`) : await this.context(db, `restore-${r.id}`);
      if (tools.replace !== undefined && tools === toolsOfManifest(manifest)) {
        await step(`Replacing the database's contents with backup ${backup.id} (${describeContents(manifest.contents)}).`);
        await tools.replace(ctx, await this.plain(backup, manifest, 'first'));
      } else {
        await step(`Starting a scratch server holding backup ${backup.id} (${describeContents(manifest.contents)}).`);
        const { inside } = await this.scratch(db, backup, manifest, scratchName, `restore-${r.id}`);
        await step('Loading the backup into the database by replication from the scratch server.');
        await redisReplicate(ctx.direct, inside, this.abort.signal);
      }
      await step('Comparing what the database holds with the manifest.');
      const now = await tools.count(ctx.direct, ctx.shared);
      const differences = compareContents(manifest.contents, now);
      if (differences.length > 0) throw new Error(`the database was restored, but it does not hold what the manifest says: ${differences.join('; ')}.`);
      const seconds = ((clock.now().getTime() - started.getTime()) / 1000).toFixed(1);
      const result = `${describeContents(now)}, as in the manifest of backup ${backup.id}; restored in ${seconds} s.`;
      await repos.backups.updateRestore(r.id, 'restoring', { status: 'succeeded', step: null, result, finished_at: iso(clock.now()) });
      await repos.databases.addEvent({ id: this.o.ids.id(), database_id: db.id, at: iso(clock.now()), message: `Restored in place from backup ${backup.id}: ${result} The safety backup ${r.safety_backup_id} holds what it held before.` }).catch(() => undefined);
      this.o.log.info({ restore: r.id, database: db.id, backup: backup.id, seconds: Number(seconds) }, 'database restored in place');
    } catch (err) {
      const message = `${scrub(err instanceof Error ? err.message : String(err))} The safety backup ${r.safety_backup_id} holds what the database held before.`;
      await repos.backups.updateRestore(r.id, 'restoring', { status: 'failed', step: null, error: message, finished_at: iso(clock.now()) });
      if (db !== undefined) await repos.databases.addEvent({ id: this.o.ids.id(), database_id: db.id, at: iso(clock.now()), message: `The in-place restore ${r.id} failed: ${message}` }).catch(() => undefined);
      this.o.log.warn({ restore: r.id, database: r.database_id, error: message }, 'in-place restore failed');
    } finally {
      await runtime.remove(scratchName).catch(() => undefined);
      await runtime.removeVolume(scratchName).catch(() => undefined);
    }
  }

  // --- restores into a new database (DatabaseRestorer) -----------------------------------------

  /** The backup a new database is restored from, checked again (it may have been deleted meanwhile). */
  private async source(row: DatabaseRow): Promise<{ backup: BackupRow; manifest: Manifest }> {
    const backup = row.restore_from === null ? undefined : await this.o.repos.backups.byId(row.restore_from);
    if (backup === undefined || backup.workspace_id !== row.workspace_id) throw new Error('the backup it is restored from no longer exists.');
    if (backup.status !== 'succeeded' || backup.manifest === null) throw new Error(`the backup it is restored from is ${backup.status}, not succeeded.`);
    return { backup, manifest: JSON.parse(backup.manifest) as Manifest };
  }

  /**
   * The artifact opened and decompressed. `first`: its checksum is checked in full before the
   * first byte is given (an in-place restore changes nothing for a damaged artifact); otherwise
   * as it is read, the stream failing at its end (a new database or a scratch server, which a
   * damaged artifact only fails; each record is authenticated as it is opened either way).
   */
  private async plain(backup: BackupRow, manifest: Manifest, check: 'first' | 'as-read' = 'as-read'): Promise<Readable> {
    const destination = await this.at(backup);
    if (check === 'first' && (await storedChecksum(await destination.get(backup.object_key))) !== backup.checksum) throw new Error(`the stored artifact of backup ${backup.id} does not match its checksum: it was changed or damaged since it was taken.`);
    return openArtifact(() => destination.get(backup.object_key), this.o.secrets.derive(keyPurpose(backup.id)), manifest.artifact.compression, check === 'as-read' ? (backup.checksum ?? '') : undefined);
  }

  async beforeStart(row: DatabaseRow, at: { image: string; volume: string; network: string }): Promise<string | null> {
    const { backup, manifest } = await this.source(row);
    const tools = toolsOfManifest(manifest);
    if (tools.restoreWhen !== 'before-start') return null;
    const none = address(row, '', 0);
    await fed(await this.plain(backup, manifest), (source) => tools.restore(this.tool(row, `restore-${row.id}`, { ...at, server: none, direct: none }), source));
    return `Restoring from backup ${backup.id} (taken ${manifest.taken_at}: ${describeContents(manifest.contents)}): its snapshot was written into the new volume.`;
  }

  /**
   * `at`: the new database's container server; for a database on a shared server, only `direct`
   * counts (the tools reach the server as its tenant).
   */
  async afterReady(row: DatabaseRow, at: { image: string; volume: string; network: string; direct: DatabaseAddress }): Promise<string | null> {
    const { backup, manifest } = await this.source(row);
    const shared = row.provisioner === 'shared';
    const problem = restoreProblem(manifest, shared ? 'shared' : 'container');
    if (problem !== null) throw new Error(`backup ${backup.id} cannot be restored here: ${problem}.`);
    const tools = toolsOfManifest(manifest);
    const started = this.o.clock.now().getTime();
    const ctx = shared
      ? await this.sharedContext(row, `restore-${row.id}`)
      : this.tool(row, `restore-${row.id}`, { image: at.image, volume: at.volume, network: at.network, server: address(row, row.host, row.port, at.direct.password), direct: at.direct });
    if (tools.restoreWhen === 'after-ready') await fed(await this.plain(backup, manifest), (source) => tools.restore(ctx, source));
    const now = await toolsFor(row.type as DatabaseType, shared ? 'shared' : 'container').count(ctx.direct, ctx.shared);
    const differences = compareContents(manifest.contents, now);
    const seconds = ((this.o.clock.now().getTime() - started) / 1000).toFixed(1);
    if (differences.length > 0) throw new Error(`restored from backup ${backup.id}, but it does not hold what the manifest says: ${differences.join('; ')}.`);
    return `Restored from backup ${backup.id} in ${seconds} s: ${describeContents(now)}, as in the manifest.`;
  }
}

const address = (row: DatabaseRow, host: string, port: number, password = ''): DatabaseAddress => ({ type: row.type as DatabaseType, host, port, username: row.username, password, databaseName: row.database_name });

/**
 * What a sweep removes of one database's files at a destination (docs/backups.md#sweep): all of
 * them once the database is gone and no record names any (`gone`), else the files no record names
 * that are older than an hour.
 */
function swept(files: readonly { key: string; modifiedMs: number }[], exists: boolean, named: ReadonlySet<string>, hourAgo: number): { gone: boolean; stale: string[] } {
  const gone = !exists && !files.some((f) => named.has(f.key));
  return { gone, stale: files.filter((f) => gone || (!named.has(f.key) && f.modifiedMs <= hourAgo)).map((f) => f.key) };
}

/** Feeds `source` to a restore; a failure of the artifact itself (its checksum, a record) is the reason given, not the tool's. */
async function fed(source: Readable, restore: (source: Readable) => Promise<void>): Promise<void> {
  const state: { failed: Error | null } = { failed: null };
  source.once('error', (err) => { state.failed ??= err; });
  try {
    await restore(source);
  } catch (err) {
    throw state.failed ?? err;
  }
  if (state.failed !== null) throw state.failed;
}

/** The stored object read back in full: its size and SHA-256 must be what was written. */
async function readBack(d: Destination, key: string, size: number, checksum: string): Promise<void> {
  const back = await digestOf(await d.get(key));
  if (back.size !== size || back.hex !== checksum) {
    throw new Error(`the stored artifact does not match what was written (${String(back.size)} bytes, sha256 ${back.hex.slice(0, 12)}… where ${String(size)} bytes, ${checksum.slice(0, 12)}… were written).`);
  }
}

/** A step against a remote destination: its failure names the provider's own error code. */
async function remoteStep(fn: () => Promise<void>): Promise<void> {
  try {
    await fn();
  } catch (err) {
    if (err instanceof Error && !('$metadata' in err) && !('code' in err)) throw err;
    throw new Error(`${s3Error(err).message}.`);
  }
}

/** Credentials in a URL (a shared server's administrative one) never reach a record a tenant reads. */
const scrub = (message: string): string => message.replace(/([a-z][a-z0-9+.-]*:\/\/)[^\s/@]*@/gi, '$1<credentials>@');

const streamOf = (text: string): Readable => {
  const s = new PassThrough();
  s.end(text);
  return s;
};

export type { Contents };
