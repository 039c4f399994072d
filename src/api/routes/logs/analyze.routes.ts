import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { LogAnalysisService } from '../../../logs/analysis.service.js';
import { accessOf } from '../../plugins/auth.js';
import { ok } from '../../schemas.js';
import * as s from './analyze.schema.js';

/** 1 MiB of text grows when JSON-escaped (a newline is two characters): the route takes more, the service checks the text. */
const BODY_LIMIT = 3 * 1024 * 1024;

export const analyzeRoutes: FastifyPluginAsyncTypebox<{ analysis: LogAnalysisService }> = async (app, { analysis }) => {
  app.post(
    '/api/workspaces/:slug/projects/:project_slug/logs/analyze',
    { schema: s.analyzeLogs, bodyLimit: BODY_LIMIT, config: { action: 'workspace.read' } },
    async (req) => ok(await analysis.analyze(accessOf(req), req.params.project_slug, req.body?.logs)),
  );
};
