import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { ProjectService } from './projects.service.js';
import type { Access } from '../../domain/access.js';
import type { ProjectRef } from './resolve.js';
import { accessOf } from '../../http/auth.js';
import { projectWithWebhookOrigin } from '../../http/origin.js';
import { ok } from '../../http/schemas.js';
import * as s from './projects.schema.js';

/** The deployments capability's part in a project's update (deploy.service.ts): a running project takes a new size at once. */
export interface Resizes {
  resized(access: Access, projectSlug: ProjectRef): Promise<void>;
}

export const projectRoutes: FastifyPluginAsyncTypebox<{ projects: ProjectService; deploys: Resizes }> = async (app, { projects, deploys }) => {
  const base = '/api/workspaces/:slug/projects';
  const one = `${base}/:project_slug`;

  app.post(base, { schema: s.createProject, config: { action: 'workspace.operate' } }, async (req, reply) =>
    reply.code(201).send(ok(await projects.create(accessOf(req), req.body))),
  );

  app.get(base, { schema: s.listProjects, config: { action: 'workspace.read' } }, async (req) =>
    ok((await projects.list(accessOf(req))).map((p) => projectWithWebhookOrigin(req, p))),
  );

  app.get(one, { schema: s.getProject, config: { action: 'workspace.read' } }, async (req) =>
    ok(projectWithWebhookOrigin(req, await projects.get(accessOf(req), req.params.project_slug))),
  );

  app.put(one, { schema: s.updateProject, config: { action: 'workspace.operate' } }, async (req) => {
    const access = accessOf(req);
    const updated = await projects.update(access, req.params.project_slug, req.body);
    const { replicas, cpu, ram } = req.body;
    if (replicas !== undefined || cpu !== undefined || ram !== undefined) await deploys.resized(access, req.params.project_slug);
    return ok(projectWithWebhookOrigin(req, updated));
  });

  app.delete(one, { schema: s.deleteProject, config: { action: 'workspace.operate' } }, async (req) =>
    ok(
      projectWithWebhookOrigin(
        req,
        await projects.delete(accessOf(req), req.params.project_slug, (err) => {
          req.log.error({ err }, 'the project is deleted, but its logs could not be; they age out with the workspace retention');
        }),
      ),
    ),
  );

  app.get(`${one}/status`, { schema: s.projectStatus, config: { action: 'workspace.read' } }, async (req) =>
    ok(await projects.status(accessOf(req), req.params.project_slug)),
  );
};
