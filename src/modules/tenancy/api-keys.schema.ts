import { Type, type Static } from 'typebox';
import { authErrors, bodyErrors, Envelope, Name, SlugParams, Timestamp } from '../../http/schemas.js';

const keyFields = {
  id: Type.String(),
  name: Type.String(),
  key_prefix: Type.String({ description: '`svc_sk_` + the first 6 hex + `...`' }),
  user_id: Type.String(),
  expires_at: Timestamp,
  created_at: Timestamp,
  last_used_at: Type.Union([Timestamp, Type.Null()]),
};

export const ApiKey = Type.Object(keyFields, { additionalProperties: false });
export type ApiKey = Static<typeof ApiKey>;
export const CreatedApiKey = Type.Object(
  { ...keyFields, key: Type.String({ description: 'The full key, `svc_sk_` + 40 hex; returned only here.' }) },
  { additionalProperties: false },
);
export type CreatedApiKey = Static<typeof CreatedApiKey>;

const tags = ['API keys'];

export const createApiKey = {
  operationId: 'createApiKey',
  tags,
  summary: 'Create an API key for the caller; the full key is returned only here',
  params: SlugParams,
  body: Type.Object(
    { name: Name, expires_in_days: Type.Optional(Type.Integer({ minimum: 1, maximum: 3650, default: 90 })) },
    { additionalProperties: false },
  ),
  response: { 201: Envelope(CreatedApiKey), ...authErrors, ...bodyErrors },
};

export const listApiKeys = {
  operationId: 'listApiKeys',
  tags,
  summary: "List API keys: everyone's for owners and admins, one's own for members",
  params: SlugParams,
  response: { 200: Envelope(Type.Array(ApiKey)), ...authErrors },
};

export const revokeApiKey = {
  operationId: 'revokeApiKey',
  tags,
  summary: "Revoke an API key (one's own; anyone's for owners and admins)",
  params: Type.Object({ slug: Type.String(), key_id: Type.String() }),
  response: { 200: Envelope(ApiKey), ...authErrors },
};
