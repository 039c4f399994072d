/** A backup of a managed database (docs/backups.md): one run of the engine's own tool, then its read-back. */
export interface BackupsTable {
  id: string;
  workspace_id: string;
  database_id: string;
  /** pending | running | succeeded | failed */
  status: string;
  /** manual | scheduled | safety */
  trigger: string;
  /** where the artifact is kept: `local` (under the data dir) */
  destination: string;
  /** the artifact's name at its destination (the manifest's is this + `.manifest.json`) */
  object_key: string;
  /** bytes of the artifact at rest (compressed and sealed); null until it was read back */
  size: number | null;
  /** SHA-256 (hex) of the artifact at rest, as read back */
  checksum: string | null;
  /** the manifest (JSON): engine and tool versions, compression, the tables' row counts or the key count */
  manifest: string | null;
  started_at: string | null;
  finished_at: string | null;
  verified_at: string | null;
  restore_seconds: number | null;
  /** null (never asked) | pending | running | succeeded | failed: a restore into a scratch server compared with the manifest */
  verify_status: string | null;
  verify_error: string | null;
  /** why it failed, readable (the failing step's own error) */
  error: string | null;
  /** the user who asked for it; null for Slipway's own (scheduled, safety) */
  requested_by: string | null;
  created_at: string;
}

/** A database's backup schedule (docs/backups.md#policies). */
export interface BackupPoliciesTable {
  database_id: string;
  workspace_id: string;
  /** five-field cron */
  schedule: string;
  /** IANA time zone the schedule is read in */
  timezone: string;
  /** succeeded backups kept per destination (the newest) */
  keep_count: number;
  /** and none older than this many days (the newest is always kept); null: no age limit */
  keep_days: number | null;
  destination: string;
  /** after-each | weekly | never */
  verify: string;
  /** the next scheduled run; moved forward by the leader that takes it */
  next_run_at: string;
  /** the alert in force (no success within 1.5× the interval, an old verification, a failed run); null when all is well */
  alert: string | null;
  alerted_at: string | null;
  created_at: string;
  updated_at: string;
}

/** A workspace's S3-compatible backup destination (docs/backups.md#destinations). */
export interface BackupDestinationsTable {
  id: string;
  workspace_id: string;
  name: string;
  /** s3 */
  kind: string;
  endpoint: string;
  region: string;
  bucket: string;
  prefix: string;
  /** 1: path-style addressing (most self-hosted servers) */
  path_style: number;
  /** sealed with the secret key (context `backup-destination:<id>:access`) */
  access_key_id: string;
  /** sealed (context `backup-destination:<id>:secret`) */
  secret_access_key: string;
  created_at: string;
  updated_at: string;
}

/** An in-place restore of a managed database (docs/backups.md#in-place-restore). */
export interface RestoresTable {
  id: string;
  workspace_id: string;
  database_id: string;
  /** the backup restored (kept when the backup is deleted later) */
  backup_id: string;
  /** the backup taken first (trigger `safety`) */
  safety_backup_id: string;
  /** pending (its safety backup runs) | restoring | succeeded | failed */
  status: string;
  /** what it is doing now, in words */
  step: string | null;
  /** how it ended: the counts compared with the manifest */
  result: string | null;
  error: string | null;
  requested_by: string | null;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
}

export interface BackupsTables {
  restores: RestoresTable;
  backup_destinations: BackupDestinationsTable;
  backups: BackupsTable;
  backup_policies: BackupPoliciesTable;
}
