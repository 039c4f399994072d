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

// --- destinations -------------------------------------------------------------------------------

export const BackupDestination = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    kind: StringEnum(['s3'] as const),
    endpoint: Type.String({ description: 'The S3-compatible server: scheme, host and port.' }),
    region: Type.String(),
    bucket: Type.String(),
    prefix: Type.String({ description: 'Prepended to every object key ("" or ending in "/").' }),
    path_style: Type.Boolean({ description: 'Path-style addressing (`endpoint/bucket/key`), as most self-hosted servers need; false: virtual-hosted (`bucket.endpoint/key`).' }),
    access_key_id: Type.String({ description: 'Its first four characters only; the keys are stored encrypted and never shown again.' }),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { additionalProperties: false },
);
export type BackupDestination = Static<typeof BackupDestination>;

export const DestinationTest = Type.Object(
  {
    ok: Type.Boolean({ description: 'true when every step passed.' }),
    code: Nullable(Type.String({ description: "The provider's own error code at the first step that failed (AccessDenied, NoSuchBucket, ENOTFOUND…)." })),
    steps: Type.Array(
      Type.Object({ step: StringEnum(['write', 'list', 'read back', 'delete'] as const), ok: Type.Boolean(), error: Nullable(Type.String()) }, { additionalProperties: false }),
      { description: 'A canary object written, listed, read back and deleted through the same calls real backups make; the steps after a failed one are not run.' },
    ),
  },
  { additionalProperties: false },
);
export type DestinationTest = Static<typeof DestinationTest>;

const WorkspaceParams = Type.Object({ slug: Type.String() });
const DestinationParams = Type.Object({ slug: Type.String(), destination_id: Type.String() });
const DestinationFields = {
  name: Type.String({ minLength: 1, maxLength: 64 }),
  endpoint: Type.String({ minLength: 1, maxLength: 300, description: 'e.g. `https://s3.eu-west-1.amazonaws.com`; loopback, private and link-local hosts are refused unless the operator allows them (`--backup-allow-private`).' }),
  region: Type.String({ minLength: 1, maxLength: 64, description: 'Default `us-east-1`.' }),
  bucket: Type.String({ minLength: 3, maxLength: 63, pattern: '^[a-z0-9][a-z0-9.-]*[a-z0-9]$', description: 'An S3 bucket name: lower-case letters, digits, dots and hyphens.' }),
  prefix: Type.String({ maxLength: 200, pattern: "^[A-Za-z0-9!_.*'()/-]*$", description: 'Default "" (the bucket\'s root); a "/" is added at its end when missing.' }),
  path_style: Type.Boolean({ description: 'Default false (virtual-hosted, as AWS); true for MinIO, Garage, SeaweedFS and most self-hosted servers.' }),
  access_key_id: Type.String({ minLength: 1, maxLength: 256 }),
  secret_access_key: Type.String({ minLength: 1, maxLength: 256 }),
};
const dtags = ['Backup destinations'];

export const listBackupDestinations = {
  operationId: 'listBackupDestinations',
  tags: dtags,
  summary: "List the workspace's S3 backup destinations (`local` is always there and not listed)",
  params: WorkspaceParams,
  response: { 200: Envelope(Type.Array(BackupDestination)), ...authErrors },
};

export const createBackupDestination = {
  operationId: 'createBackupDestination',
  tags: dtags,
  summary: 'Add an S3-compatible backup destination; its keys are stored encrypted',
  params: WorkspaceParams,
  body: Type.Object(
    {
      name: DestinationFields.name,
      endpoint: DestinationFields.endpoint,
      region: Type.Optional(DestinationFields.region),
      bucket: DestinationFields.bucket,
      prefix: Type.Optional(DestinationFields.prefix),
      path_style: Type.Optional(DestinationFields.path_style),
      access_key_id: DestinationFields.access_key_id,
      secret_access_key: DestinationFields.secret_access_key,
    },
    { additionalProperties: false },
  ),
  response: { 201: Envelope(BackupDestination), ...authErrors, ...bodyErrors, 409: ErrorEnvelope },
};

export const getBackupDestination = {
  operationId: 'getBackupDestination',
  tags: dtags,
  summary: 'Get one backup destination',
  params: DestinationParams,
  response: { 200: Envelope(BackupDestination), ...authErrors },
};

export const updateBackupDestination = {
  operationId: 'updateBackupDestination',
  tags: dtags,
  summary: 'Change a backup destination (the keys only when given)',
  params: DestinationParams,
  body: Type.Partial(Type.Object(DestinationFields), { additionalProperties: false, minProperties: 1 }),
  response: { 200: Envelope(BackupDestination), ...authErrors, ...bodyErrors, 409: ErrorEnvelope },
};

export const deleteBackupDestination = {
  operationId: 'deleteBackupDestination',
  tags: dtags,
  summary: 'Remove a backup destination no policy sends to and no backup is kept at (409 otherwise)',
  params: DestinationParams,
  response: { 200: Envelope(BackupDestination), ...authErrors, 409: ErrorEnvelope },
};

export const testBackupDestination = {
  operationId: 'testBackupDestination',
  tags: dtags,
  summary: "Test a destination: a canary object written, listed, read back and deleted as backups are; the provider's own error code when a step fails",
  params: DestinationParams,
  response: { 200: Envelope(DestinationTest), ...authErrors },
};

// --- in-place restores --------------------------------------------------------------------------

export const RESTORE_STATUSES = ['pending', 'restoring', 'succeeded', 'failed'] as const;

export const Restore = Type.Object(
  {
    id: Type.String(),
    database_id: Type.String(),
    backup_id: Type.String({ description: 'The backup restored.' }),
    safety_backup_id: Type.String({ description: 'The backup taken first (trigger `safety`): what the database held before; restore it to undo.' }),
    status: StringEnum(RESTORE_STATUSES, {
      description: '`pending` while the safety backup runs (a failed safety backup fails the restore, and nothing is changed), `restoring`, then `succeeded` once the counts match the manifest, or `failed` with `error`.',
    }),
    step: Nullable(Type.String({ description: 'What it is doing now, in words (progress).' })),
    result: Nullable(Type.String({ description: 'How it ended: the row or key counts compared with the manifest.' })),
    error: Nullable(Type.String()),
    created_at: Timestamp,
    started_at: Nullable(Timestamp),
    finished_at: Nullable(Timestamp),
  },
  { additionalProperties: false },
);
export type Restore = Static<typeof Restore>;

const RestoreParams = Type.Object({ slug: Type.String(), db_slug: Type.String(), restore_id: Type.String() });

export const restoreDatabase = {
  operationId: 'restoreDatabase',
  tags,
  summary: 'Restore a backup over this database (in place): a safety backup is taken first; runs in the background (202)',
  params: DatabaseParams,
  body: Type.Object(
    {
      backup_id: Type.String({ minLength: 1, maxLength: 100, description: 'A succeeded backup of this workspace, of the same type.' }),
      confirm: Type.String({ maxLength: 200, description: "The database's slug, typed again: what it holds now is replaced." }),
    },
    { additionalProperties: false },
  ),
  response: { 202: Envelope(Restore), ...authErrors, ...bodyErrors, 402: ErrorEnvelope, 409: ErrorEnvelope },
};

export const listRestores = {
  operationId: 'listRestores',
  tags,
  summary: 'List the in-place restores of a database, newest first',
  params: DatabaseParams,
  response: { 200: Envelope(Type.Array(Restore)), ...authErrors },
};

export const getRestore = {
  operationId: 'getRestore',
  tags,
  summary: 'Get one in-place restore (poll it for its progress)',
  params: RestoreParams,
  response: { 200: Envelope(Restore), ...authErrors },
};
