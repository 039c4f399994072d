import type { DatabaseType } from '../../domain/database.js';
import type { Contents, DumpLayout } from './engines.js';

/** How backups are kept and run on this installation (docs/backups.md, docs/configuration.md). */
export interface BackupPolicy {
  /** the local destination's directory (`<data dir>/backups`) */
  dir: string;
  /** `--backup-allow-private`: S3 endpoints may be loopback, link-local or private addresses */
  allowPrivate: boolean;
}

/** The label of a tool container: the backup (or `restore-<database>`) it works for. */
export const BACKUP_LABEL = 'slipway.backup';

/** The secret box purpose of a backup's own key: each artifact opens with its own key only. */
export const keyPurpose = (backupId: string): string => `backup:${backupId}`;

/** The secret box context of a destination's sealed access key id or secret key. */
export const credentialContext = (destinationId: string, which: 'access' | 'secret'): string => `backup-destination:${destinationId}:${which}`;

/** Where a backup's artifact is kept at its destination: made of ids only. */
export const objectKey = (workspaceId: string, databaseId: string, backupId: string): string => `${workspaceId}/${databaseId}/${backupId}.slwb`;

/** The manifest is kept beside its artifact. */
export const manifestKey = (key: string): string => `${key}.manifest.json`;

/** What a backup's manifest records (kept beside the artifact and in its record). */
export interface Manifest {
  format: 'slipway-backup/1';
  backup_id: string;
  database: { id: string; slug: string; type: DatabaseType };
  /** the server's own version, e.g. "PostgreSQL 15.20" */
  engine: string;
  /** the tool and its version, e.g. "pg_dump (PostgreSQL) 15.20" */
  tool: string;
  /** the image whose tools took it */
  image: string;
  /** `tenant`: one tenant's part of a shared server (a Redis tenant: its keys); absent or `server`: the database's own server */
  layout?: DumpLayout;
  taken_at: string;
  artifact: { key: string; size: number; sha256: string; compression: 'gzip' | 'none'; encryption: string };
  contents: Contents;
}

/** The newest verified restore among `backups`; null when none was verified. */
export const lastVerified = (backups: readonly { verified_at: string | null }[]): string | null =>
  backups.map((b) => b.verified_at).filter((at): at is string => at !== null).sort().at(-1) ?? null;
