import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { EnvService } from './env.service.js';
import { accessOf } from '../../http/auth.js';
import { ok } from '../../http/schemas.js';
import * as s from './env.schema.js';

export const envRoutes: FastifyPluginAsyncTypebox<{ envVars: EnvService }> = async (app, { envVars }) => {
  const base = '/api/workspaces/:slug/projects/:project_slug/env';

  app.get(base, { schema: s.listEnv, config: { action: 'workspace.read' } }, async (req) =>
    ok(await envVars.list(accessOf(req), req.params.project_slug)),
  );

  app.post(base, { schema: s.createEnv, config: { action: 'workspace.operate' } }, async (req, reply) =>
    reply.code(201).send(ok(await envVars.create(accessOf(req), req.params.project_slug, req.body))),
  );

  // A static segment: the router prefers it to `:env_id`, whatever the order of registration.
  app.put(`${base}/bulk`, { schema: s.bulkEnv, config: { action: 'workspace.operate' } }, async (req) =>
    ok(await envVars.bulk(accessOf(req), req.params.project_slug, req.body)),
  );

  app.put(`${base}/:env_id`, { schema: s.updateEnv, config: { action: 'workspace.operate' } }, async (req) =>
    ok(await envVars.update(accessOf(req), req.params.project_slug, req.params.env_id, req.body)),
  );

  app.delete(`${base}/:env_id`, { schema: s.deleteEnv, config: { action: 'workspace.operate' } }, async (req) =>
    ok(await envVars.remove(accessOf(req), req.params.project_slug, req.params.env_id)),
  );
};
