import { Readable } from 'node:stream';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { LogService } from './logs.service.js';
import { accessOf } from '../../http/auth.js';
import { ok } from '../../http/schemas.js';
import * as s from './logs.schema.js';

export const logRoutes: FastifyPluginAsyncTypebox<{ logs: LogService }> = async (app, { logs }) => {
  const base = '/api/workspaces/:slug/projects/:project_slug/logs';

  app.get(base, { schema: s.queryLogs, config: { action: 'workspace.read' } }, async (req) =>
    ok(await logs.query(accessOf(req), req.params.project_slug, req.query)),
  );

  app.get(`${base}/download`, { schema: s.downloadLogs, config: { action: 'workspace.read' } }, async (req, reply) => {
    const file = await logs.download(accessOf(req), req.params.project_slug, req.query);
    reply.type('application/gzip').header('content-disposition', `attachment; filename="${file.filename}"`);
    // HEAD gets the headers only: the body would be read from the store and thrown away
    return reply.send(req.method === 'HEAD' ? Readable.from([]) : file.body());
  });

  app.get('/api/workspaces/:slug/databases/:db_slug/logs', { schema: s.queryDatabaseLogs, config: { action: 'workspace.read' } }, async (req) =>
    ok(await logs.queryDatabase(accessOf(req), req.params.db_slug, req.query)),
  );

  app.get(`${base}/usage`, { schema: s.logUsage, config: { action: 'workspace.read' } }, async (req) =>
    ok(await logs.usage(accessOf(req), req.params.project_slug)),
  );
};
