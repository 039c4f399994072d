import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Services } from '../../services.js';
import { accessOf } from '../../plugins/auth.js';
import { ok } from '../../schemas.js';
import * as s from './members.schema.js';

export const memberRoutes: FastifyPluginAsyncTypebox<{ services: Services }> = async (app, { services }) => {
  const { members } = services;
  const base = '/api/workspaces/:slug/members';

  app.get(base, { schema: s.listMembers, config: { action: 'workspace.read' } }, async (req) =>
    ok(await members.list(accessOf(req))),
  );

  app.post(base, { schema: s.addMember, config: { action: 'members.manage' } }, async (req, reply) =>
    reply.code(201).send(ok(await members.add(accessOf(req), req.body))),
  );

  app.put(`${base}/:user_id`, { schema: s.updateMember, config: { action: 'members.manage' } }, async (req) =>
    ok(await members.updateRole(accessOf(req), req.params.user_id, req.body.role)),
  );

  // Leaving is open to every member; removing someone else is checked by the service.
  app.delete(`${base}/:user_id`, { schema: s.removeMember, config: { action: 'workspace.read' } }, async (req) =>
    ok(await members.remove(accessOf(req), req.params.user_id)),
  );
};
