import { Type, type Static } from 'typebox';
import { DATABASE_PROVISIONERS, DATABASE_STATUSES, DATABASE_TYPES } from '../../domain/database.js';
import { authErrors, bodyErrors, Envelope, ErrorEnvelope, Name, Nullable, SlugParams, StringEnum, Timestamp } from '../../http/schemas.js';


const fields = {
  id: Type.String(),
  name: Type.String(),
  slug: Type.String({ description: 'From the name (lowercased, non-alphanumerics → `-`); addresses the database in paths.' }),
  type: StringEnum(DATABASE_TYPES),
  status: StringEnum(DATABASE_STATUSES, {
    description: '`provisioning` until a real login with the credentials succeeded, then `running`; `failed` (see `error`); `deleting` while its server and data are removed; `suspended` while the workspace\'s wallet is empty past the grace period (its server stopped, its data kept; `running` again after a top-up).',
  }),
  error: Nullable(Type.String({ description: 'Why it failed, readable.' })),
  provisioner: StringEnum(DATABASE_PROVISIONERS, { description: '`container`: a server of its own, with its own volume; `shared`: a database and a user of its own on a server the operator runs (`--database-shared-<type>`).' }),
  image: Nullable(Type.String({ description: 'The image its server runs, once chosen; null on a shared server.' })),
  host: Type.String({ description: 'The name apps on the workspace network reach it by: `<slug>.db`; on a shared server, that server\'s host.' }),
  port: Type.Integer({ description: 'Its port on the workspace network.' }),
  external_host: Nullable(Type.String({ description: 'Where the host reaches it (published port); null until running, or when publishing is off; on a shared server, that server\'s address.' })),
  external_port: Nullable(Type.Integer()),
  username: Type.String({ description: '`slipway` (`default` for Redis, whose password belongs to that user); on a shared server, a name of its own (`sw…`).' }),
  password: Type.String({ description: 'In full only in the create response; `********` afterwards.' }),
  database_name: Type.String({ description: 'The slug; on a shared server, the same name as its user.' }),
  connection_string: Type.String({ description: 'URL-style, for apps on the workspace network; the password masked after the create response.' }),
  external_connection_string: Nullable(Type.String({ description: 'The same through the published port, from the host.' })),
  key_prefix: Nullable(Type.String({ description: 'Redis on a shared server: every key and channel of this database starts with it (`<username>:`); null otherwise.' })),
  memory_mb: Type.Integer({ description: 'Memory limit of its server, MiB; 0 on a shared server.' }),
  restore_from: Nullable(Type.String({ description: 'The backup it was restored from (it stays `provisioning` until that restore ended and matched the manifest); null otherwise.' })),
  created_at: Timestamp,
  updated_at: Timestamp,
};

export const Database = Type.Object(fields, { additionalProperties: false });
export type Database = Static<typeof Database>;

export const DatabaseDetail = Type.Object(
  {
    ...fields,
    health: Type.Union([
      Type.Object(
        {
          status: Type.String({ description: "The container's state: running, restarting, exited…" }),
          restarts: Type.Integer({ description: 'Restarts by the engine after a crash.' }),
          started_at: Nullable(Timestamp),
          cpu_millicores: Type.Number({ description: 'CPU in use (1000 = one core).' }),
          memory_bytes: Type.Integer(),
          memory_limit_bytes: Nullable(Type.Integer()),
          volume_bytes: Nullable(Type.Integer({ description: 'Bytes its data volume holds.' })),
        },
        { additionalProperties: false },
      ),
      Type.Null(),
    ], { description: 'Its server as the engine sees it; null without an engine, before its container exists, or on a shared server.' }),
    events: Type.Array(Type.Object({ at: Timestamp, message: Type.String() }, { additionalProperties: false }), {
      description: 'What happened to it, oldest first (the newest 50): provisioning, the image used, failures, recoveries.',
    }),
  },
  { additionalProperties: false },
);
export type DatabaseDetail = Static<typeof DatabaseDetail>;

const DatabaseParams = Type.Object({ slug: Type.String(), db_slug: Type.String() });
const tags = ['Databases'];

export const createDatabase = {
  operationId: 'createDatabase',
  tags,
  summary: 'Create a managed database; its server is provisioned in the background (202, status `provisioning`)',
  params: SlugParams,
  body: Type.Object(
    {
      name: Name,
      type: Type.String({ description: `One of ${DATABASE_TYPES.join(', ')}.` }),
      restore_from: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: "A succeeded backup of one of this workspace's databases, of the same type: the new database starts with its data (docs/backups.md#restore)." })),
    },
    { additionalProperties: false },
  ),
  response: { 202: Envelope(Database), ...authErrors, ...bodyErrors, 402: ErrorEnvelope, 409: ErrorEnvelope },
};

export const listDatabases = {
  operationId: 'listDatabases',
  tags,
  summary: 'List the databases of a workspace (passwords masked)',
  params: SlugParams,
  response: { 200: Envelope(Type.Array(Database)), ...authErrors },
};

export const getDatabase = {
  operationId: 'getDatabase',
  tags,
  summary: 'Get one database (password masked) with its events',
  params: DatabaseParams,
  response: { 200: Envelope(DatabaseDetail), ...authErrors },
};

export const deleteDatabase = {
  operationId: 'deleteDatabase',
  tags,
  summary: 'Delete a database: its server and its data are removed in the background (202, status `deleting`)',
  params: DatabaseParams,
  response: { 202: Envelope(Database), ...authErrors },
};
