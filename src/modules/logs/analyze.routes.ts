import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { AppError } from '../../domain/errors.js';
import type { LogAnalysisService } from './analysis.service.js';
import { accessOf, callerOf } from '../../http/auth.js';
import type { TokenBuckets } from '../../http/rate-limit.js';
import { ok } from '../../http/schemas.js';
import * as s from './analyze.schema.js';

/** 1 MiB of text grows when JSON-escaped (a newline is two characters): the route takes more, the service checks the text. */
const BODY_LIMIT = 3 * 1024 * 1024;

const plural = (n: number, word: string): string => `${String(n)} ${word}${n === 1 ? '' : 's'}`;

export const analyzeRoutes: FastifyPluginAsyncTypebox<{ analysis: LogAnalysisService; buckets: TokenBuckets }> = async (app, { analysis, buckets }) => {
  app.post(
    '/api/workspaces/:slug/projects/:project_slug/logs/analyze',
    {
      schema: s.analyzeLogs,
      bodyLimit: BODY_LIMIT,
      config: { action: 'workspace.read' },
      // after the general per-key limit and the permission check (the auth plugin's hook), before the body is read
      onRequest: async (req) => {
        const wait = buckets.take(callerOf(req).keyId);
        if (wait === 0) return;
        const { rate, burst } = buckets.limit;
        throw new AppError('RATE_LIMITED', `Too many log analyses with this API key (the analysis limit is ${String(rate)} per second, ${String(burst)} at once); retry in ${plural(wait, 'second')}.`, {
          'retry-after': String(wait),
        });
      },
    },
    async (req) => ok(await analysis.analyze(accessOf(req), req.params.project_slug, req.body?.logs)),
  );
};
