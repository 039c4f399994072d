import type { Readable } from 'node:stream';
import { Type, type Static } from 'typebox';
import { authErrors, bodyErrors, Envelope, ErrorEnvelope, Nullable, StringEnum, Timestamp } from '../../http/schemas.js';

export const BACKUP_STATUSES = ['pending', 'running', 'succeeded', 'failed'] as const;
export const BACKUP_TRIGGERS = ['manual', 'scheduled', 'safety'] as const;
export const VERIFY_STATUSES = ['pending', 'running', 'succeeded', 'failed'] as const;
export const VERIFY_MODES = ['after-each', 'weekly', 'never'] as const;


export const Backup = Type.Object(
  {
    id: Type.String(),
    database_id: Type.String(),
    status: StringEnum(BACKUP_STATUSES, {
      description: '`pending` until the leader starts it, `running` while the tool runs and the artifact is stored, `succeeded` only once the stored artifact was read back and matched (size and SHA-256), `failed` with `error` otherwise (a skipped run too).',
    }),
    trigger: StringEnum(BACKUP_TRIGGERS, { description: '`manual` (POST …/backups), `scheduled` (the backup policy), `safety` (before an in-place restore).' }),
    destination: Type.String({ description: '`local` (under the data dir), or a destination\'s id.' }),
    size: Nullable(Type.Integer({ description: 'Bytes of the artifact at rest (compressed and encrypted).' })),
    checksum: Nullable(Type.String({ description: 'SHA-256 (hex) of the artifact at rest, as read back.' })),
    started_at: Nullable(Timestamp),
    finished_at: Nullable(Timestamp),
    verified_at: Nullable(Timestamp),
    restore_seconds: Nullable(Type.Number({ description: 'How long the last verified restore of it took.' })),
    error: Nullable(Type.String({ description: 'Why it failed: the failing step and its own error.' })),
    verify_status: Nullable(StringEnum(VERIFY_STATUSES, { description: 'Its verification: restored into a scratch server of the same engine and compared with the manifest (POST …/verify, or the policy). null: never asked.' })),
    verify_error: Nullable(Type.String({ description: 'Why the verification failed.' })),
    created_at: Timestamp,
  },
  { additionalProperties: false },
);
export type Backup = Static<typeof Backup>;

export const BackupPolicy = Type.Object(
  {
    schedule: Type.String({ description: 'Five-field cron, at most hourly, e.g. `0 3 * * *`.' }),
    timezone: Type.String({ description: 'The IANA time zone the schedule is read in.' }),
    keep_count: Type.Integer({ description: 'Succeeded backups kept per destination (the newest).' }),
    keep_days: Nullable(Type.Integer({ description: 'And none older than this (the newest is always kept); null: no age limit.' })),
    destination_id: Type.String(),
    verify: StringEnum(VERIFY_MODES, { description: '`after-each` scheduled backup, `weekly` (after a scheduled backup when the last verified restore is a week old or more; the default), or `never`.' }),
    next_run_at: Timestamp,
    alert: Nullable(Type.String({ description: 'What is wrong, when something is: no success within 1.5× the interval, no verified restore for 14 days, a skipped or failed verification. Lifted by the next success.' })),
    alerted_at: Nullable(Timestamp),
    last_success_at: Nullable(Timestamp),
    last_verified_at: Nullable(Timestamp),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { additionalProperties: false },
);
export type BackupPolicy = Static<typeof BackupPolicy>;

const Contents = Type.Unknown({ description: 'What it holds: `{kind: "tables", tables: [{name, rows}]}`, `{kind: "keys", keys}` or `{kind: "collections", collections: [{name, documents}]}`.' });

export const BackupDetail = Type.Object(
  {
    ...Backup.properties,
    manifest: Nullable(
      Type.Object(
        {
          engine: Type.String(),
          tool: Type.String(),
          image: Type.String(),
          taken_at: Timestamp,
          compression: Type.String(),
          encryption: Type.String(),
          contents: Contents,
        },
        { additionalProperties: false, description: 'Recorded once it succeeded; kept beside the artifact too.' },
      ),
    ),
  },
  { additionalProperties: false },
);
export type BackupDetail = Static<typeof BackupDetail>;

const DatabaseParams = Type.Object({ slug: Type.String(), db_slug: Type.String() });
const BackupParams = Type.Object({ slug: Type.String(), db_slug: Type.String(), backup_id: Type.String() });
const tags = ['Backups'];

export const createBackup = {
  operationId: 'createBackup',
  tags,
  summary: 'Take a backup of a database now; it runs in the background (202, status `pending`)',
  params: DatabaseParams,
  body: Type.Object({ destination_id: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'Where to keep it; default `local`.' })) }, { additionalProperties: false }),
  response: { 202: Envelope(Backup), ...authErrors, ...bodyErrors, 402: ErrorEnvelope, 409: ErrorEnvelope },
};

export const listBackups = {
  operationId: 'listBackups',
  tags,
  summary: 'List the backups of a database, newest first',
  params: DatabaseParams,
  response: { 200: Envelope(Type.Array(Backup)), ...authErrors },
};

export const getBackup = {
  operationId: 'getBackup',
  tags,
  summary: 'Get one backup with its manifest',
  params: BackupParams,
  response: { 200: Envelope(BackupDetail), ...authErrors },
};

export const downloadBackup = {
  operationId: 'downloadBackup',
  tags,
  summary: "Download a backup in the engine's own format (pg_restore's custom format, SQL, RDB), decrypted and decompressed; streamed",
  params: BackupParams,
  response: {
    200: {
      description: "The dump, as the engine's own tool reads it back; streamed after the artifact's checksum was checked.",
      content: { 'application/octet-stream': { schema: Type.Unsafe<Readable>({ type: 'string', format: 'binary' }) } },
    },
    ...authErrors,
    409: ErrorEnvelope,
  },
};

export const deleteBackup = {
  operationId: 'deleteBackup',
  tags,
  summary: 'Delete a backup and its artifact',
  params: BackupParams,
  response: { 200: Envelope(Backup), ...authErrors, 409: ErrorEnvelope },
};

export const verifyBackup = {
  operationId: 'verifyBackup',
  tags,
  summary: 'Verify a backup now: restore it into a scratch server and compare it with its manifest, in the background (202)',
  params: BackupParams,
  response: { 202: Envelope(Backup), ...authErrors, 402: ErrorEnvelope, 409: ErrorEnvelope },
};

export const getBackupPolicy = {
  operationId: 'getBackupPolicy',
  tags,
  summary: "Get the database's backup schedule, retention and alert (null when it has none)",
  params: DatabaseParams,
  response: { 200: Envelope(Nullable(BackupPolicy)), ...authErrors },
};

export const putBackupPolicy = {
  operationId: 'putBackupPolicy',
  tags,
  summary: "Set the database's backup schedule, retention, destination and verification",
  params: DatabaseParams,
  body: Type.Object(
    {
      schedule: Type.String({ minLength: 1, maxLength: 100 }),
      timezone: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'Default UTC.' })),
      keep_count: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, description: 'Default 7.' })),
      keep_days: Type.Optional(Nullable(Type.Integer({ minimum: 1, maximum: 3650, description: 'Default null (no age limit).' }))),
      destination_id: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'Default `local`.' })),
      verify: Type.Optional(StringEnum(VERIFY_MODES, { description: 'Default `weekly`.' })),
    },
    { additionalProperties: false },
  ),
  response: { 200: Envelope(BackupPolicy), ...authErrors, ...bodyErrors, 409: ErrorEnvelope },
};

export const deleteBackupPolicy = {
  operationId: 'deleteBackupPolicy',
  tags,
  summary: "Remove the database's backup schedule (its backups stay)",
  params: DatabaseParams,
  response: { 200: Envelope(Type.Object({ deleted: Type.Boolean() }, { additionalProperties: false })), ...authErrors },
};
