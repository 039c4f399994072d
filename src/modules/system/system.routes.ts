import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Registry } from 'prom-client';
import { Type } from 'typebox';
import type { Store } from '../../store/db.js';
import { send } from '../../http/errors.js';
import { Envelope, ErrorEnvelope, ok } from '../../http/schemas.js';

const Status = Envelope(Type.Object({ status: Type.String() }, { additionalProperties: false }));
const tags = ['System'];

/** What prom-client's registry sends (`Registry.contentType` without its charset). */
const PROMETHEUS_TEXT = 'text/plain; version=0.0.4';

export interface SystemOptions {
  store: Store;
  metrics: Registry;
  /** `--metrics-token`: /metrics on the API answers only with `Authorization: Bearer <token>`; empty: not on the API at all */
  metricsToken: string;
}

export const METRICS_ELSEWHERE =
  'Metrics are served to the operator only: on the metrics listener (--metrics-listen, loopback by default), or here with the bearer token of --metrics-token.';
export const METRICS_TOKEN_WRONG = 'GET /metrics needs the header "Authorization: Bearer <token>" with the token of --metrics-token.';

/** The bearer token of an Authorization header, compared with `token` in constant time. */
function bearerMatches(header: string | undefined, token: string): boolean {
  const m = header === undefined ? null : /^Bearer\s+(\S+)\s*$/i.exec(header);
  const given = createHash('sha256').update(m?.[1] ?? '').digest();
  return m !== null && timingSafeEqual(given, createHash('sha256').update(token).digest());
}

export const systemRoutes: FastifyPluginAsyncTypebox<SystemOptions> = async (app, { store, metrics, metricsToken }) => {
  app.get(
    '/healthz',
    { schema: { operationId: 'checkLiveness', tags, summary: 'Liveness: the process answers', security: [], response: { 200: Status } }, config: { probe: true } },
    async () => ok({ status: 'ok' }),
  );

  app.get(
    '/readyz',
    {
      schema: { operationId: 'checkReadiness', tags, summary: 'Readiness: the store answers', security: [], response: { 200: Status, 503: ErrorEnvelope } },
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
      schema: {
        operationId: 'getMetrics',
        tags,
        summary: 'Prometheus metrics (text exposition format), for the operator only',
        description:
          'The per-project gauges name workspaces and projects, so metrics are not public: they are served on the operator\'s own listener ' +
          '(`--metrics-listen`, 127.0.0.1:9464 by default), and here only when `--metrics-token` is set, to `Authorization: Bearer <token>` (else 401). ' +
          'Without `--metrics-token` this route answers 404.',
        security: [],
        response: {
          200: {
            description: 'The Prometheus text exposition format 0.0.4 (sent as a string, not serialized).',
            content: { [PROMETHEUS_TEXT]: { schema: Type.String() } },
          },
          401: ErrorEnvelope,
          404: ErrorEnvelope,
        },
      },
      config: { probe: true },
    },
    async (req, reply) => {
      if (metricsToken === '') return send(reply, 404, METRICS_ELSEWHERE);
      if (!bearerMatches(req.headers.authorization, metricsToken)) return send(reply, 401, METRICS_TOKEN_WRONG, { 'www-authenticate': 'Bearer realm="slipway-metrics"' });
      return reply.type(metrics.contentType).send(await metrics.metrics());
    },
  );

  app.get(
    '/api/openapi.json',
    {
      schema: {
        operationId: 'getOpenApiDocument',
        tags,
        summary: 'This OpenAPI 3.1 document (served as is, without the envelope)',
        security: [],
        response: {
          200: {
            description: 'An OpenAPI 3.1 document (sent as a string, not serialized).',
            // typed as the string the route sends: Fastify sends a string as it is, without serializing
            content: { 'application/json': { schema: Type.Unsafe<string>(Type.Object({ openapi: Type.String() }, { additionalProperties: true, description: 'https://spec.openapis.org/oas/v3.1.0' })) } },
          },
          429: ErrorEnvelope,
        },
      },
      config: { public: true },
    },
    async (_req, reply) => reply.type('application/json; charset=utf-8').send(JSON.stringify(app.swagger())),
  );
};
