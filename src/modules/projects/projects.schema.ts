import { Type, type Static } from 'typebox';
import { PROJECT_STATUSES } from '../../domain/project.js';
import { DECIMAL_PATTERN } from './resources.js';
import { authErrors, bodyErrors, Envelope, ErrorEnvelope, Name, ProjectParams, SlugParams, StringEnum, Timestamp } from '../../http/schemas.js';

const Decimal = (what: string, example: string) =>
  Type.String({ pattern: DECIMAL_PATTERN, 'x-error': `must be a decimal number in a string, like "${example}" (${what})`, examples: [example] });

export const sizeFields = {
  port: Type.Integer({ minimum: 1, maximum: 65535, description: 'Port the application listens on (default 8080).' }),
  replicas: Type.Integer({ minimum: 0, maximum: 10, description: '0 = scaled to zero (default 1).' }),
  cpu: Decimal('vCPU, 0.1 to 8', '0.5'),
  ram: Decimal('GiB, 0.125 to 32', '0.5'),
};

export const GitConnection = Type.Object(
  {
    repo_full_name: Type.String(),
    branch: Type.String(),
    installation_id: Type.Integer(),
    auto_deploy: Type.Boolean(),
    dockerfile_path: Type.String(),
    root_dir: Type.String(),
    created_at: Timestamp,
    updated_at: Timestamp,
    webhook_url: Type.Union([Type.String(), Type.Null()], {
      description:
        'Where this connection\'s GitHub repository webhook delivers, an absolute URL (`…/api/webhooks/github/<webhook id>`): under `--public-url` when set, ' +
        'otherwise under the origin this request reached (X-Forwarded-Proto/Host believed only from `--trust-proxy`). Its secret is shown only when made.',
    }),
  },
  { additionalProperties: false },
);
export type GitConnection = Static<typeof GitConnection>;

export const Project = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    slug: Type.String(),
    status: StringEnum(PROJECT_STATUSES),
    port: Type.Integer(),
    replicas: Type.Integer(),
    cpu: Type.String(),
    ram: Type.String(),
    default_domain: Type.String({ description: '`<host label>.<apps domain>`: the label is `<project>-<workspace>`, stored when the project is made and unique on the platform' }),
    url: Type.String({ description: 'Where the router serves the project.' }),
    git: Type.Union([GitConnection, Type.Null()]),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { additionalProperties: false },
);
export type Project = Static<typeof Project>;

const Usage = Type.Object({ used: Type.String(), limit: Type.String() }, { additionalProperties: false });

export const ProjectStatus = Type.Object(
  {
    project: Type.Object({ slug: Type.String(), status: StringEnum(PROJECT_STATUSES) }, { additionalProperties: false }),
    pods: Type.Object(
      {
        ready: Type.Integer(),
        total: Type.Integer(),
        items: Type.Array(
          Type.Object(
            { name: Type.String(), status: Type.String(), restarts: Type.Integer(), age: Type.String() },
            { additionalProperties: false },
          ),
        ),
      },
      { additionalProperties: false },
    ),
    resources: Type.Object({ cpu: Usage, memory: Usage }, { additionalProperties: false }),
    latestDeployment: Type.Union([
      Type.Object({ id: Type.String(), status: Type.String(), created_at: Timestamp }, { additionalProperties: false }),
      Type.Null(),
    ]),
  },
  { additionalProperties: false },
);
export type ProjectStatus = Static<typeof ProjectStatus>;

/** A project's resource history for charts (docs/uptime.md#resource-metrics). */
export const ProjectMetrics = Type.Object(
  {
    period: StringEnum(['1h', '24h', '7d'] as const),
    from: Timestamp,
    to: Timestamp,
    step_sec: Type.Integer(),
    memory_limit_bytes: Type.Union([Type.Integer(), Type.Null()]),
    points: Type.Array(
      Type.Object(
        {
          start: Timestamp,
          cpu_millicores: Type.Integer({ description: 'Average over the step, all replicas together.' }),
          memory_bytes: Type.Integer({ description: 'Average over the step, all replicas together.' }),
          rx_bytes: Type.Integer({ description: 'Received over the step.' }),
          tx_bytes: Type.Integer({ description: 'Sent over the step.' }),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);
export type ProjectMetrics = Static<typeof ProjectMetrics>;

const CreateBody = Type.Object(
  {
    name: Name,
    port: Type.Optional(sizeFields.port),
    replicas: Type.Optional(sizeFields.replicas),
    cpu: Type.Optional(sizeFields.cpu),
    ram: Type.Optional(sizeFields.ram),
  },
  { additionalProperties: false },
);

const tags = ['Projects'];

export const createProject = {
  operationId: 'createProject',
  tags,
  summary: 'Create a project (status pending); its slug derives from the name',
  params: SlugParams,
  body: CreateBody,
  response: { 201: Envelope(Project), ...authErrors, ...bodyErrors, 409: ErrorEnvelope },
};

export const listProjects = {
  operationId: 'listProjects',
  tags,
  summary: 'List the projects of a workspace',
  params: SlugParams,
  response: { 200: Envelope(Type.Array(Project)), ...authErrors },
};

export const getProject = {
  operationId: 'getProject',
  tags,
  summary: 'Get a project, with its Git connection',
  params: ProjectParams,
  response: { 200: Envelope(Project), ...authErrors },
};

export const updateProject = {
  operationId: 'updateProject',
  tags,
  summary: 'Change a project (the slug stays when the name changes)',
  params: ProjectParams,
  body: Type.Partial(CreateBody, { additionalProperties: false, minProperties: 1 }),
  response: { 200: Envelope(Project), ...authErrors, ...bodyErrors, 402: ErrorEnvelope, 409: ErrorEnvelope },
};

export const deleteProject = {
  operationId: 'deleteProject',
  tags,
  summary: 'Delete a project and everything under it',
  params: ProjectParams,
  response: { 200: Envelope(Project), ...authErrors },
};

export const projectStatus = {
  operationId: 'getProjectStatus',
  tags,
  summary: "A project's pods, resource use and latest deployment",
  params: ProjectParams,
  response: { 200: Envelope(ProjectStatus), ...authErrors },
};

export const projectMetrics = {
  operationId: 'getProjectMetrics',
  tags,
  summary: "A project's CPU, memory and network over the last hour (per minute), day (per 15 minutes) or week (per hour), for charts",
  params: ProjectParams,
  querystring: Type.Object({ period: Type.Optional(StringEnum(['1h', '24h', '7d'] as const, { default: '1h' })) }, { additionalProperties: false }),
  response: {
    200: Envelope(ProjectMetrics),
    ...authErrors,
  },
};
