import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { UptimeService } from './uptime.service.js';
import { accessOf } from '../../http/auth.js';
import { ok } from '../../http/schemas.js';
import * as s from './uptime.schema.js';

export const uptimeRoutes: FastifyPluginAsyncTypebox<{ uptime: UptimeService }> = async (app, { uptime }) => {
  const path = '/api/workspaces/:slug/projects/:project_slug/uptime';

  app.get(path, { schema: s.getUptime, config: { action: 'workspace.read' } }, async (req) =>
    ok(await uptime.get(accessOf(req), req.params.project_slug)),
  );

  app.put(path, { schema: s.updateUptime, config: { action: 'workspace.operate' } }, async (req) =>
    ok(await uptime.update(accessOf(req), req.params.project_slug, req.body)),
  );

  app.get(`${path}/history`, { schema: s.uptimeHistory, config: { action: 'workspace.read' } }, async (req) =>
    ok(await uptime.history(accessOf(req), req.params.project_slug, req.query.period ?? '24h')),
  );

  app.get(`${path}/notifications`, { schema: s.uptimeNotifications, config: { action: 'workspace.read' } }, async (req) =>
    ok(await uptime.notifications(accessOf(req), req.params.project_slug, req.query.page, req.query.limit)),
  );

  app.post(`${path}/test`, { schema: s.uptimeTest, config: { action: 'workspace.operate' } }, async (req) =>
    ok(await uptime.test(accessOf(req), req.params.project_slug)),
  );
};
