import { Type, type Static } from 'typebox';
import { ENV_KEY_PATTERN, MAX_BULK_VARIABLES, MAX_ENV_KEY_LENGTH, MAX_ENV_TOTAL_BYTES, MAX_ENV_VALUE_BYTES } from './env.service.js';
import { authErrors, bodyErrors, Envelope, ErrorEnvelope, ProjectParams, Timestamp } from '../../http/schemas.js';

const KEY_RULE = `a letter or underscore, then letters, digits and underscores, at most ${MAX_ENV_KEY_LENGTH} characters`;

export const EnvKey = Type.String({
  pattern: ENV_KEY_PATTERN,
  maxLength: MAX_ENV_KEY_LENGTH,
  description: `The variable name: ${KEY_RULE}. Case-sensitive.`,
  example: 'DATABASE_URL',
  'x-error': `must be a variable name: ${KEY_RULE}`,
});

/** Characters here; the service also holds the value to 32 KiB of UTF-8 bytes. */
export const EnvValue = Type.String({
  maxLength: MAX_ENV_VALUE_BYTES,
  description: `At most ${MAX_ENV_VALUE_BYTES} bytes (32 KiB) of UTF-8, without a NUL byte or an unpaired surrogate (a container's environment cannot carry them); all of a project's variables together at most ${MAX_ENV_TOTAL_BYTES} bytes as the engine receives them.`,
});

export const EnvVar = Type.Object(
  {
    id: Type.String(),
    key: Type.String(),
    value: Type.String({ description: '"" for a secret: a secret value is never returned.' }),
    is_secret: Type.Boolean(),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { additionalProperties: false },
);
export type EnvVar = Static<typeof EnvVar>;

export const BulkCounts = Type.Object(
  {
    created: Type.Integer({ minimum: 0 }),
    updated: Type.Integer({ minimum: 0, description: 'Only variables whose value changed.' }),
    deleted: Type.Integer({ minimum: 0 }),
  },
  { additionalProperties: false },
);
export type BulkCounts = Static<typeof BulkCounts>;

const EnvParams = Type.Object({ slug: Type.String(), project_slug: Type.String(), env_id: Type.String() });
const tags = ['Environment variables'];

export const listEnv = {
  operationId: 'listEnvVars',
  tags,
  summary: 'List the environment variables of a project, by key; secret values come back as ""',
  params: ProjectParams,
  response: { 200: Envelope(Type.Array(EnvVar)), ...authErrors },
};

export const createEnv = {
  operationId: 'createEnvVar',
  tags,
  summary: 'Add an environment variable; a secret value is sealed at rest and never returned',
  params: ProjectParams,
  body: Type.Object(
    { key: EnvKey, value: EnvValue, is_secret: Type.Optional(Type.Boolean({ default: false })) },
    { additionalProperties: false },
  ),
  response: { 201: Envelope(EnvVar), ...authErrors, ...bodyErrors, 409: ErrorEnvelope },
};

export const updateEnv = {
  operationId: 'updateEnvVar',
  tags,
  summary: 'Change the value and/or the secrecy of a variable; making a secret plain needs a new value',
  params: EnvParams,
  body: Type.Object(
    { value: Type.Optional(EnvValue), is_secret: Type.Optional(Type.Boolean()) },
    { additionalProperties: false, minProperties: 1 },
  ),
  response: { 200: Envelope(EnvVar), ...authErrors, ...bodyErrors },
};

export const deleteEnv = {
  operationId: 'deleteEnvVar',
  tags,
  summary: 'Remove a variable; answers it as it was (value "" if secret)',
  params: EnvParams,
  response: { 200: Envelope(EnvVar), ...authErrors },
};

export const bulkEnv = {
  operationId: 'setEnvVarsInBulk',
  tags,
  summary: 'Set many variables in one transaction; merge: false also deletes every variable not named',
  params: ProjectParams,
  body: Type.Object(
    {
      variables: Type.Record(Type.String({ pattern: ENV_KEY_PATTERN }), EnvValue, {
        // propertyNames carries the whole rule (length too) and is checked before the values.
        propertyNames: { ...EnvKey, 'x-error': `must be keyed by variable names: ${KEY_RULE}` },
        additionalProperties: false,
        maxProperties: MAX_BULK_VARIABLES,
        'x-error': `must hold at most ${MAX_BULK_VARIABLES} variables`,
        description: 'Variable name → value. New variables are plain; an existing secret stays secret.',
      }),
      merge: Type.Optional(
        Type.Boolean({ default: true, description: 'true: upsert the given variables; false: the given set replaces all.' }),
      ),
    },
    { additionalProperties: false },
  ),
  response: { 200: Envelope(BulkCounts), ...authErrors, ...bodyErrors },
};
