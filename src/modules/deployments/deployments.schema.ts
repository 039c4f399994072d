import { Type, type Static } from 'typebox';
import { DEPLOYMENT_SOURCES, DEPLOYMENT_STATUSES } from '../../domain/deployment.js';
import { authErrors, Envelope, Nullable, PageQuery, ProjectParams, StringEnum, Timestamp } from '../../http/schemas.js';


export const Deployment = Type.Object(
  {
    id: Type.String(),
    project_id: Type.String(),
    status: StringEnum(DEPLOYMENT_STATUSES),
    source: StringEnum(DEPLOYMENT_SOURCES),
    image: Nullable(Type.String()),
    branch: Nullable(Type.String()),
    commit_sha: Nullable(Type.String()),
    commit_message: Nullable(Type.String()),
    error: Nullable(Type.String()),
    created_at: Timestamp,
    started_at: Nullable(Timestamp),
    finished_at: Nullable(Timestamp),
  },
  { additionalProperties: false },
);
export type Deployment = Static<typeof Deployment>;

export const DeploymentPage = Type.Object(
  { deployments: Type.Array(Deployment), total: Type.Integer(), page: Type.Integer(), limit: Type.Integer() },
  { additionalProperties: false },
);
export type DeploymentPage = Static<typeof DeploymentPage>;

const tags = ['Deployments'];

export const listDeployments = {
  operationId: 'listDeployments',
  tags,
  summary: 'List deployments, newest first',
  params: ProjectParams,
  querystring: PageQuery,
  response: {
    200: Envelope(DeploymentPage),
    ...authErrors,
  },
};

export const getDeployment = {
  operationId: 'getDeployment',
  tags,
  summary: 'Get a deployment',
  params: Type.Object({ slug: Type.String(), project_slug: Type.String(), id: Type.String() }),
  response: { 200: Envelope(Deployment), ...authErrors },
};
