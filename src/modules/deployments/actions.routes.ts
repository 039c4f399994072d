import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { DeployService } from './deploy.service.js';
import type { ProjectService } from '../projects/projects.service.js';
import { accessOf } from '../../http/auth.js';
import { ok } from '../../http/schemas.js';
import * as s from './actions.schema.js';

export const deployActionRoutes: FastifyPluginAsyncTypebox<{ deploys: DeployService; projects: ProjectService }> = async (app, { deploys, projects }) => {
  const project = '/api/workspaces/:slug/projects/:project_slug';
  const operate = { action: 'workspace.operate' } as const;

  app.post(
    `${project}/deploy`,
    {
      schema: s.deploy,
      config: operate,
      // The body is optional: no body means "the connected branch, its newest commit".
      preValidation: async (req) => {
        if ((req.body as unknown) === undefined) req.body = {};
      },
    },
    async (req, reply) => reply.code(202).send(ok(await deploys.deploy(accessOf(req), req.params.project_slug, req.body))),
  );

  app.post(`${project}/redeploy`, { schema: s.redeploy, config: operate }, async (req, reply) =>
    reply.code(202).send(ok(await deploys.redeploy(accessOf(req), req.params.project_slug))),
  );

  app.post(`${project}/deployments/:id/rollback`, { schema: s.rollback, config: operate }, async (req, reply) =>
    reply.code(202).send(ok(await deploys.rollback(accessOf(req), req.params.project_slug, req.params.id))),
  );

  app.post(`${project}/deployments/:id/stop`, { schema: s.stop, config: operate }, async (req) =>
    ok(await deploys.stop(accessOf(req), req.params.project_slug, req.params.id)),
  );

  app.post(`${project}/restart`, { schema: s.restart, config: operate }, async (req, reply) => {
    const access = accessOf(req);
    await deploys.restart(access, req.params.project_slug);
    return reply.code(202).send(ok(await projects.get(access, req.params.project_slug)));
  });
};
