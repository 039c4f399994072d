import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Registry } from 'prom-client';
import { Type } from 'typebox';
import type { Store } from '../../../store/db.js';
import { send } from '../../plugins/errors.js';
import { Envelope, ErrorEnvelope, ok } from '../../schemas.js';

const Status = Envelope(Type.Object({ status: Type.String() }, { additionalProperties: false }));
const tags = ['System'];

export const systemRoutes: FastifyPluginAsyncTypebox<{ store: Store; metrics: Registry }> = async (app, { store, metrics }) => {
  app.get(
    '/healthz',
    { schema: { tags, summary: 'Liveness: the process answers', security: [], response: { 200: Status } }, config: { probe: true } },
    async () => ok({ status: 'ok' }),
  );

  app.get(
    '/readyz',
    {
      schema: { tags, summary: 'Readiness: the store answers', security: [], response: { 200: Status, 503: ErrorEnvelope } },
      config: { probe: true },
    },
    async (req, reply) => {
      try {
        await store.ping();
        return ok({ status: 'ready' });
      } catch (err) {
        req.log.warn({ err }, 'store is not ready');
        return send(reply, 503, 'The store does not answer.');
      }
    },
  );

  app.get(
    '/metrics',
    {
      schema: { tags, summary: 'Prometheus metrics (text exposition format)', security: [], produces: ['text/plain'] },
      config: { probe: true },
    },
    async (_req, reply) => reply.type(metrics.contentType).send(await metrics.metrics()),
  );

  app.get(
    '/api/openapi.json',
    {
      schema: { tags, summary: 'This OpenAPI 3.1 document (served as is, without the envelope)', security: [] },
      config: { public: true },
    },
    async (_req, reply) => reply.type('application/json; charset=utf-8').send(JSON.stringify(app.swagger())),
  );
};
