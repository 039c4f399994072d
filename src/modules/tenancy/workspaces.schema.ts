import { Type, type Static } from 'typebox';
import { authErrors, bodyErrors, Envelope, ErrorEnvelope, Name, RoleSchema, Slug, SlugParams, Timestamp } from '../../http/schemas.js';

export const WorkspaceSettings = Type.Object(
  {
    default_region: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    build_timeout_sec: Type.Integer({ minimum: 30, maximum: 7200 }),
    log_retention_days: Type.Integer({ minimum: 1, maximum: 365 }),
  },
  { additionalProperties: false },
);
export type WorkspaceSettings = Static<typeof WorkspaceSettings>;

export const Workspace = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    slug: Type.String(),
    namespace: Type.String({ description: '`ws-<slug>`: the container network / namespace.' }),
    settings: WorkspaceSettings,
    role: Type.Optional(RoleSchema),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { additionalProperties: false },
);
export type Workspace = Static<typeof Workspace>;

const tags = ['Workspaces'];

export const createWorkspace = {
  operationId: 'createWorkspace',
  tags,
  summary: 'Create a workspace; the caller becomes its owner',
  body: Type.Object({ name: Name, slug: Slug }, { additionalProperties: false }),
  response: { 201: Envelope(Workspace), ...authErrors, ...bodyErrors, 409: ErrorEnvelope },
};

export const listWorkspaces = {
  operationId: 'listWorkspaces',
  tags,
  summary: 'List the workspaces the caller belongs to',
  response: { 200: Envelope(Type.Array(Workspace)), ...authErrors },
};

export const getWorkspace = {
  operationId: 'getWorkspace',
  tags,
  summary: 'Get a workspace',
  params: SlugParams,
  response: { 200: Envelope(Workspace), ...authErrors },
};

export const updateWorkspace = {
  operationId: 'updateWorkspace',
  tags,
  summary: 'Rename a workspace or change its settings (owner)',
  params: SlugParams,
  body: Type.Object(
    { name: Type.Optional(Name), settings: Type.Optional(Type.Partial(WorkspaceSettings, { additionalProperties: false })) },
    { additionalProperties: false, minProperties: 1 },
  ),
  response: { 200: Envelope(Workspace), ...authErrors, ...bodyErrors },
};

export const deleteWorkspace = {
  operationId: 'deleteWorkspace',
  tags,
  summary: 'Delete a workspace and everything it owns (owner)',
  params: SlugParams,
  response: { 200: Envelope(Workspace), ...authErrors },
};
