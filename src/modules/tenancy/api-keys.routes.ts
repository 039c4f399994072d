import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { ApiKeyService } from './api-keys.service.js';
import { accessOf } from '../../http/auth.js';
import { ok } from '../../http/schemas.js';
import * as s from './api-keys.schema.js';

export const apiKeyRoutes: FastifyPluginAsyncTypebox<{ apiKeys: ApiKeyService }> = async (app, { apiKeys }) => {
  const base = '/api/workspaces/:slug/api-keys';

  app.post(base, { schema: s.createApiKey, config: { action: 'keys.manage' } }, async (req, reply) =>
    reply.code(201).send(ok(await apiKeys.create(accessOf(req), req.body))),
  );

  app.get(base, { schema: s.listApiKeys, config: { action: 'keys.manage' } }, async (req) =>
    ok(await apiKeys.list(accessOf(req))),
  );

  app.delete(`${base}/:key_id`, { schema: s.revokeApiKey, config: { action: 'keys.manage' } }, async (req) =>
    ok(await apiKeys.revoke(accessOf(req), req.params.key_id)),
  );
};
