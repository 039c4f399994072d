import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { MemberService } from './members.service.js';
import { accessOf, callerOf } from '../../http/auth.js';
import { ok } from '../../http/schemas.js';
import * as s from './members.schema.js';

export const memberRoutes: FastifyPluginAsyncTypebox<{ members: MemberService }> = async (app, { members }) => {
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

  // No `action`: the caller's membership is pending, which admits to no workspace route. Only
  // the user the membership is offered to may take or refuse it (checked by the service).
  app.post(`${base}/:user_id/accept`, { schema: s.acceptMember }, async (req) =>
    ok(await members.accept(callerOf(req), req.params.slug, req.params.user_id)),
  );

  app.post(`${base}/:user_id/decline`, { schema: s.declineMember }, async (req) =>
    ok(await members.decline(callerOf(req), req.params.slug, req.params.user_id)),
  );

  // Leaving is open to every member; removing someone else is checked by the service.
  app.delete(`${base}/:user_id`, { schema: s.removeMember, config: { action: 'workspace.read' } }, async (req) =>
    ok(await members.remove(accessOf(req), req.params.user_id)),
  );
};
