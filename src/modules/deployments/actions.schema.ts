import { Type } from 'typebox';
import { authErrors, bodyErrors, Envelope, ErrorEnvelope, ProjectParams } from '../../http/schemas.js';
import { Project } from '../projects/projects.schema.js';
import { Deployment } from './deployments.schema.js';

const tags = ['Deployments'];
const DeploymentParams = Type.Object({ slug: Type.String(), project_slug: Type.String(), id: Type.String() });
const paid = { 402: ErrorEnvelope, 409: ErrorEnvelope };

export const deploy = {
  operationId: 'deployProject',
  tags,
  summary: 'Build the connected branch (or a given commit) and deploy it; answers 202 with the queued deployment',
  params: ProjectParams,
  body: Type.Object(
    {
      branch: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
      commit_sha: Type.Optional(Type.String({ pattern: '^[0-9a-f]{40}$', 'x-error': 'must be a full 40-character commit id' })),
    },
    { additionalProperties: false },
  ),
  response: { 202: Envelope(Deployment), ...authErrors, ...bodyErrors, ...paid },
};

export const redeploy = {
  operationId: 'redeployProject',
  tags,
  summary: 'Deploy the current image again, without a build; 202 with the queued deployment',
  params: ProjectParams,
  response: { 202: Envelope(Deployment), ...authErrors, ...paid },
};

export const rollback = {
  operationId: 'rollbackProject',
  tags,
  summary: "Deploy this deployment's image again as a new `rollback` deployment; 202",
  params: DeploymentParams,
  response: { 202: Envelope(Deployment), ...authErrors, ...paid },
};

export const stop = {
  operationId: 'stopDeployment',
  tags,
  summary: 'Stop a running deployment: its containers stop and the project is `stopped`',
  params: DeploymentParams,
  response: { 200: Envelope(Deployment), ...authErrors, 409: ErrorEnvelope },
};

export const restart = {
  operationId: 'restartProject',
  tags: ['Projects'],
  summary: "Restart the project's containers one at a time; 202 with the project",
  params: ProjectParams,
  response: { 202: Envelope(Project), ...authErrors, ...paid },
};
