import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { accessOf } from '../../http/auth.js';
import { ok } from '../../http/schemas.js';
import { projectMetrics } from '../projects/projects.schema.js';
import type { MetricsService } from './metrics.service.js';

/** A project's resource history, for charts (the Prometheus text of GET /metrics is the system routes'). */
export const metricsRoutes: FastifyPluginAsyncTypebox<{ metrics: MetricsService }> = async (app, { metrics }) => {
  app.get('/api/workspaces/:slug/projects/:project_slug/metrics', { schema: projectMetrics, config: { action: 'workspace.read' } }, async (req) =>
    ok(await metrics.project(accessOf(req), req.params.project_slug, req.query.period ?? '1h')),
  );
};
