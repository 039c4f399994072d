import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { DatabaseService } from './databases.service.js';
import { accessOf } from '../../http/auth.js';
import { ok } from '../../http/schemas.js';
import * as s from './databases.schema.js';

export const databaseRoutes: FastifyPluginAsyncTypebox<{ databases: DatabaseService }> = async (app, { databases }) => {
  const base = '/api/workspaces/:slug/databases';

  app.post(base, { schema: s.createDatabase, config: { action: 'workspace.operate' } }, async (req, reply) =>
    reply.code(202).send(ok(await databases.create(accessOf(req), req.body))),
  );

  app.get(base, { schema: s.listDatabases, config: { action: 'workspace.read' } }, async (req) => ok(await databases.list(accessOf(req))));

  app.get(`${base}/:db_slug`, { schema: s.getDatabase, config: { action: 'workspace.read' } }, async (req) =>
    ok(await databases.get(accessOf(req), req.params.db_slug)),
  );

  app.delete(`${base}/:db_slug`, { schema: s.deleteDatabase, config: { action: 'workspace.operate' } }, async (req, reply) =>
    reply.code(202).send(ok(await databases.delete(accessOf(req), req.params.db_slug))),
  );
};
