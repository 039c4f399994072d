import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { InvitationService } from './invitations.service.js';
import { accessOf, presentedKey } from '../../http/auth.js';
import { ok } from '../../http/schemas.js';
import * as s from './invitations.schema.js';

export const invitationRoutes: FastifyPluginAsyncTypebox<{ invitations: InvitationService }> = async (app, { invitations }) => {
  const base = '/api/workspaces/:slug/invitations';

  app.post(base, { schema: s.createInvitation, config: { action: 'members.manage' } }, async (req, reply) =>
    reply.code(201).send(ok(await invitations.create(accessOf(req), req.body))),
  );

  app.get(base, { schema: s.listInvitations, config: { action: 'members.manage' } }, async (req) =>
    ok(await invitations.list(accessOf(req))),
  );

  app.delete(`${base}/:id`, { schema: s.deleteInvitation, config: { action: 'members.manage' } }, async (req) =>
    ok(await invitations.revoke(accessOf(req), req.params.id)),
  );

  // Public (rate-limited per client address): a new user has no key yet. The service reads the
  // X-API-Key itself when the invited address already has an account.
  app.post('/api/invitations/accept', { schema: s.acceptInvitation, config: { public: true } }, async (req, reply) =>
    reply.code(201).send(ok(await invitations.accept(req.body, presentedKey(req)))),
  );
};
