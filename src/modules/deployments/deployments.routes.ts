import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { DeploymentService } from './deployments.service.js';
import { accessOf } from '../../http/auth.js';
import { ok } from '../../http/schemas.js';
import * as s from './deployments.schema.js';

export const deploymentRoutes: FastifyPluginAsyncTypebox<{ deployments: DeploymentService }> = async (app, { deployments }) => {
  const base = '/api/workspaces/:slug/projects/:project_slug/deployments';

  app.get(base, { schema: s.listDeployments, config: { action: 'workspace.read' } }, async (req) =>
    ok(await deployments.list(accessOf(req), req.params.project_slug, req.query.page, req.query.limit)),
  );

  app.get(`${base}/:id`, { schema: s.getDeployment, config: { action: 'workspace.read' } }, async (req) =>
    ok(await deployments.get(accessOf(req), req.params.project_slug, req.params.id)),
  );
};
