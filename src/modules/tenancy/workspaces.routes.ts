import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { WorkspaceService } from './workspaces.service.js';
import { accessOf, callerOf } from '../../http/auth.js';
import { ok } from '../../http/schemas.js';
import * as s from './workspaces.schema.js';

export const workspaceRoutes: FastifyPluginAsyncTypebox<{ workspaces: WorkspaceService }> = async (app, { workspaces }) => {

  app.post('/api/workspaces', { schema: s.createWorkspace }, async (req, reply) => {
    return reply.code(201).send(ok(await workspaces.create(callerOf(req), req.body)));
  });

  app.get('/api/workspaces', { schema: s.listWorkspaces }, async (req) => ok(await workspaces.list(callerOf(req))));

  app.get('/api/workspaces/:slug', { schema: s.getWorkspace, config: { action: 'workspace.read' } }, async (req) =>
    ok(workspaces.get(accessOf(req))),
  );

  app.put('/api/workspaces/:slug', { schema: s.updateWorkspace, config: { action: 'workspace.own' } }, async (req) =>
    ok(await workspaces.update(accessOf(req), req.body)),
  );

  app.delete('/api/workspaces/:slug', { schema: s.deleteWorkspace, config: { action: 'workspace.own' } }, async (req) =>
    ok(
      await workspaces.delete(accessOf(req), (err) => {
        req.log.error({ err }, 'the workspace is deleted, but its logs could not be; the next log retention pass removes them');
      }),
    ),
  );
};
