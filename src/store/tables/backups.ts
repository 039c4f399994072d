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
  /** why it failed, readable (the failing step's own error) */
  error: string | null;
  /** the user who asked for it; null for Slipway's own (scheduled, safety) */
  requested_by: string | null;
  created_at: string;
}

export interface BackupsTables {
  backups: BackupsTable;
}
