import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Services } from '../../services.js';
import { accessOf } from '../../plugins/auth.js';
import { ok } from '../../schemas.js';
import * as s from './uptime.schema.js';

export const uptimeRoutes: FastifyPluginAsyncTypebox<{ services: Services }> = async (app, { services }) => {
  const { uptime } = services;
  const path = '/api/workspaces/:slug/projects/:project_slug/uptime';

  app.get(path, { schema: s.getUptime, config: { action: 'workspace.read' } }, async (req) =>
    ok(await uptime.get(accessOf(req), req.params.project_slug)),
  );

  app.put(path, { schema: s.updateUptime, config: { action: 'workspace.operate' } }, async (req) =>
    ok(await uptime.update(accessOf(req), req.params.project_slug, req.body)),
  );
};
