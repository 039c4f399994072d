import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { GitHubInstallationService } from './installations.js';
import { accessOf } from '../../http/auth.js';
import { ok } from '../../http/schemas.js';
import * as s from './github.schema.js';

export const githubRoutes: FastifyPluginAsyncTypebox<{ installations: GitHubInstallationService }> = async (app, { installations }) => {
  const base = '/api/workspaces/:slug/github/installations';

  app.post(`${base}/link`, { schema: s.startLink, config: { action: 'integrations.manage' } }, async (req, reply) =>
    reply.code(201).send(ok(await installations.startLink(accessOf(req)))),
  );

  app.get(base, { schema: s.listInstallations, config: { action: 'workspace.read' } }, async (req) => ok(await installations.list(accessOf(req))));

  app.delete(`${base}/:installation_id`, { schema: s.unlinkInstallation, config: { action: 'integrations.manage' } }, async (req) =>
    ok(await installations.unlink(accessOf(req), Number(req.params.installation_id))),
  );

  // Public: GitHub sends the browser here; the signed state, not a key, says who asked.
  app.get('/api/github/setup', { schema: s.setup, config: { public: true } }, async (req, reply) =>
    reply.code(201).send(ok(await installations.completeSetup(req.query))),
  );
};
