import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { GitService } from './git.service.js';
import { accessOf } from '../../http/auth.js';
import { withWebhookOrigin } from '../../http/origin.js';
import { ok } from '../../http/schemas.js';
import * as s from './git.schema.js';

export const gitRoutes: FastifyPluginAsyncTypebox<{ git: GitService }> = async (app, { git }) => {
  const path = '/api/workspaces/:slug/projects/:project_slug/git';

  app.post(path, { schema: s.connectGit, config: { action: 'workspace.operate' } }, async (req, reply) =>
    reply.code(201).send(ok(withWebhookOrigin(req, await git.connect(accessOf(req), req.params.project_slug, req.body)))),
  );

  app.put(path, { schema: s.updateGit, config: { action: 'workspace.operate' } }, async (req) =>
    ok(withWebhookOrigin(req, await git.update(accessOf(req), req.params.project_slug, req.body))),
  );

  app.delete(path, { schema: s.deleteGit, config: { action: 'workspace.operate' } }, async (req) =>
    ok(withWebhookOrigin(req, await git.disconnect(accessOf(req), req.params.project_slug))),
  );

  app.post(`${path}/webhook-secret`, { schema: s.rotateWebhookSecret, config: { action: 'workspace.operate' } }, async (req) =>
    ok(withWebhookOrigin(req, await git.rotateWebhookSecret(accessOf(req), req.params.project_slug))),
  );
};
