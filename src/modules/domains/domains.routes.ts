import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { DomainService } from './domains.service.js';
import { accessOf } from '../../http/auth.js';
import { ok } from '../../http/schemas.js';
import * as s from './domains.schema.js';

export const domainsRoutes: FastifyPluginAsyncTypebox<{ domains: DomainService }> = async (app, { domains }) => {
  const base = '/api/workspaces/:slug/projects/:project_slug/domains';

  app.get(base, { schema: s.listDomains, config: { action: 'workspace.read' } }, async (req) =>
    ok(await domains.list(accessOf(req), req.params.project_slug)),
  );

  app.post(base, { schema: s.addDomain, config: { action: 'workspace.operate' } }, async (req, reply) =>
    reply.code(201).send(ok(await domains.add(accessOf(req), req.params.project_slug, req.body))),
  );

  app.post(`${base}/:domain_id/verify`, { schema: s.verifyDomain, config: { action: 'workspace.operate' } }, async (req) =>
    ok(await domains.verify(accessOf(req), req.params.project_slug, req.params.domain_id)),
  );

  app.delete(`${base}/:domain_id`, { schema: s.removeDomain, config: { action: 'workspace.operate' } }, async (req) =>
    ok(await domains.remove(accessOf(req), req.params.project_slug, req.params.domain_id)),
  );
};
