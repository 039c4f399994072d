import { randomUUID } from 'node:crypto';
import type { Writable } from 'node:stream';
import swagger from '@fastify/swagger';
import websocket from '@fastify/websocket';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyLoggerOptions } from 'fastify';
import { destination, type LoggerOptions } from 'pino';
import { collectDefaultMetrics, Histogram, Registry } from 'prom-client';
import { registerProjectGauges } from '../modules/metrics/prometheus.js';
import type { Deps } from '../modules/deps.js';
import { authPlugin } from '../http/auth.js';
import { clientErrorHandler, errorsPlugin, frameworkErrors } from '../http/errors.js';
import { redactUrl } from '../http/redact.js';
import { refuseTenants, TenantNetworks } from '../http/tenant-guard.js';
import { PING_EVERY_MS } from '../http/stream.js';
import { AccessLog, RefusalLog, RequestLogController, requestFields, requestLogger, type LogStream } from '../http/request-log.js';
import { TokenBuckets, type RateLimit } from '../http/rate-limit.js';
import { apiKeyRoutes } from '../modules/tenancy/api-keys.routes.js';
import { deployActionRoutes } from '../modules/deployments/actions.routes.js';
import { buildLogRoutes } from '../modules/deployments/build-logs.routes.js';
import { liveLogRoutes } from '../modules/logs/live-logs.routes.js';
import type { LiveLogs } from '../modules/logs/live.js';
import { deploymentRoutes } from '../modules/deployments/deployments.routes.js';
import { databaseRoutes } from '../modules/databases/databases.routes.js';
import { templateRoutes } from '../modules/templates/templates.routes.js';
import { domainsRoutes } from '../modules/domains/domains.routes.js';
import { gitRoutes } from '../modules/projects/git.routes.js';
import { githubRoutes } from '../modules/github/github.routes.js';
import { logRoutes } from '../modules/logs/logs.routes.js';
import { analyzeRoutes } from '../modules/logs/analyze.routes.js';
import { LogAnalysisService } from '../modules/logs/analysis.service.js';
import { LlmAnalyzer, type LlmOptions } from '../modules/logs/llm.js';
import { ANALYZE_RATE_LIMIT, AnalysisPool, type AnalysisPoolOptions } from '../modules/logs/analysis-pool.js';
import { projectRoutes } from '../modules/projects/projects.routes.js';
import { paymentWebhookRoutes, walletRoutes } from '../modules/billing/wallet.routes.js';
import { envRoutes } from '../modules/env/env.routes.js';
import { uptimeRoutes } from '../modules/uptime/uptime.routes.js';
import { webhookRoutes } from '../modules/webhooks/webhooks.routes.js';
import { invitationRoutes } from '../modules/tenancy/invitations.routes.js';
import { memberRoutes } from '../modules/tenancy/members.routes.js';
import { systemRoutes } from '../modules/system/system.routes.js';
import { workspaceRoutes } from '../modules/tenancy/workspaces.routes.js';
import { ErrorEnvelopeSchema } from '../http/schemas.js';
import { createServices, type Services } from './services.js';
import { describeValidationError, validatorCompiler } from '../http/validation.js';

export interface AppDeps extends Deps {
  rateLimit: RateLimit;
  /** Requests from one client address without a valid key (failed auth, invitation accept). */
  anonymousRateLimit: RateLimit;
  /** Signed GitHub deliveries per receiver, counted after the signature check (default 10/s, burst 200). */
  webhookRateLimit?: RateLimit;
  log: { level: string; stream?: Writable };
  /** reverse proxies whose X-Forwarded-For is believed; empty: the TCP peer is the client */
  trustProxy?: string[];
  /** `--metrics-token`: GET /metrics on the API answers to this bearer token only; absent or empty: 404 there (the metrics listener serves it) */
  metricsToken?: string;
  /** the address blocks of tenant containers (the workspace networks), whose connections are refused; absent: none */
  tenantNetworks?: TenantNetworks;
  /** `--github-webhook-secret`: verifies POST /api/webhooks/github; absent or empty refuses every delivery */
  githubWebhookSecret?: string;
  version: string;
  /** how often open streams re-check their caller (default and maximum 10 s; tests use less) */
  streamRecheckMs?: number;
  /** how often open streams ping their clients (default 30 s; tests use less) */
  streamPingMs?: number;
  /** rate-limit refusals are logged once per client per this interval (default 60 s) */
  refusalLogMs?: number;
  /** the live tail's hub (src/modules/logs/live.ts), which the log writer notifies; absent: no …/live-logs route */
  liveLogs?: LiveLogs;
  /** `--llm-base-url`: the OpenAI-compatible model POST …/logs/analyze also asks (docs/logs-analyzer.md) */
  llm?: Pick<LlmOptions, 'baseUrl' | 'model' | 'apiKey' | 'timeoutMs'> | null;
  /** POST …/logs/analyze: its own per-key rate limit, and the worker pool's size, queue and budget (docs/logs-analyzer.md#cost) */
  analysis?: { rateLimit?: RateLimit | undefined } & AnalysisPoolOptions;
}

export const BODY_LIMIT = 1024 * 1024;

/** `--webhook-rate-limit` and its burst: far above what one repository's pushes send at once. */
export const WEBHOOK_RATE_LIMIT: RateLimit = { rate: 10, burst: 200 };

export { redactUrl };

/** Accept a caller's request id when it looks sane; otherwise make one. */
function requestId(header: string | string[] | undefined): string {
  return typeof header === 'string' && /^[A-Za-z0-9._-]{1,64}$/.test(header) ? header : randomUUID();
}

export function loggerOptions(log: AppDeps['log'], stream: LogStream): FastifyLoggerOptions & LoggerOptions {
  return {
    level: log.level,
    stream,
    // `req` is logged by the serializer below, which never writes headers: redacting paths under
    // it cost a third of each request line's time for nothing
    redact: { paths: ['headers["x-api-key"]', 'headers.authorization', 'headers.cookie'], censor: '[redacted]' },
    serializers: { req: requestFields },
  };
}

/** The whole HTTP API, built but not listening: `main` and the tests both start it. */
export async function buildApp(deps: AppDeps) {
  // pino's own default when none is given: standard output, written asynchronously
  const access = new AccessLog(deps.log.stream ?? destination(1));
  const app = Fastify({
    logger: loggerOptions(deps.log, access.ordered),
    bodyLimit: BODY_LIMIT,
    genReqId: (req) => requestId(req.headers['x-request-id']),
    requestIdHeader: false,
    // Fastify's own 503 while closing is not our envelope; in-flight and keep-alive requests
    // are simply served until the server has closed.
    return503OnClosing: false,
    trustProxy: deps.trustProxy !== undefined && deps.trustProxy.length > 0 ? deps.trustProxy : false,
    schemaErrorFormatter: (errors, part) => new Error(describeValidationError(errors, part)),
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 200 },
    frameworkErrors,
    logController: new RequestLogController(access),
    childLoggerFactory: requestLogger,
    clientErrorHandler,
  }).withTypeProvider<TypeBoxTypeProvider>();

  app.addHook('onClose', (_instance, done) => {
    access.flush();
    done();
  });
  app.setValidatorCompiler(validatorCompiler());
  app.addSchema(ErrorEnvelopeSchema);

  const services = createServices(deps, (projectId) => { deps.liveLogs?.notify(projectId); });
  const metrics = new Registry();
  collectDefaultMetrics({ register: metrics, prefix: 'slipway_' });
  registerProjectGauges(metrics, deps);
  const latency = new Histogram({
    name: 'slipway_http_request_duration_seconds',
    help: 'HTTP request latency by route and status',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [metrics],
  });

  // callback hooks, not async ones: every request runs them, and a promise each is measurable.
  // The request id is set as the request arrives, not in an onSend hook: errors keep the headers
  // already set, and a route without onSend hooks skips their runner.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    done();
  });
  // one bound series per method, route and status: prom-client hashes a label object at every observe
  const series = new Map<string, Histogram.Internal<'method' | 'route' | 'status'>>();
  app.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions.url ?? 'unmatched';
    const status = String(reply.statusCode);
    const key = `${request.method} ${route} ${status}`;
    let observer = series.get(key);
    if (observer === undefined) {
      observer = latency.labels({ method: request.method, route, status });
      series.set(key, observer);
    }
    observer.observe(reply.elapsedTime / 1000);
    done();
  });

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'Slipway API', version: deps.version, description: 'REST API of the Slipway deployment platform.', license: { name: 'MIT', identifier: 'MIT' } },
      // relative: the origin the document was read from, behind any proxy (docs/api.md#the-openapi-document)
      servers: [{ url: '/', description: 'The origin that served this document.' }],
      components: { securitySchemes: { apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' } } },
      security: [{ apiKey: [] }],
    },
    // shared schemas are components named by their $id (ErrorEnvelope), not def-0
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`) },
  });
  await app.register(errorsPlugin);
  await app.register(websocket, { options: { maxPayload: 64 * 1024 } });
  await app.register(authPlugin, {
    store: deps.store,
    apiKeys: services.apiKeys,
    keyBuckets: new TokenBuckets(deps.rateLimit, deps.clock),
    addressBuckets: new TokenBuckets(deps.anonymousRateLimit, deps.clock),
    receiverBuckets: new TokenBuckets(deps.webhookRateLimit ?? WEBHOOK_RATE_LIMIT, deps.clock),
    clock: deps.clock,
    refusals: new RefusalLog(app.log, deps.refusalLogMs ?? 60_000),
    streamRecheckMs: deps.streamRecheckMs ?? 10_000,
    streamPingMs: deps.streamPingMs ?? PING_EVERY_MS,
  });

  await app.register(systemRoutes, { store: deps.store, metrics, metricsToken: deps.metricsToken ?? '' });
  await app.register(workspaceRoutes, { services });
  await app.register(memberRoutes, { services });
  await app.register(invitationRoutes, { services });
  await app.register(apiKeyRoutes, { services });
  await app.register(projectRoutes, { services });
  await app.register(gitRoutes, { services });
  await app.register(githubRoutes, { services });
  await app.register(deploymentRoutes, { services });
  await app.register(buildLogRoutes, { services });
  if (deps.liveLogs !== undefined) await app.register(liveLogRoutes, { services, live: deps.liveLogs });
  await app.register(deployActionRoutes, { services });
  await app.register(walletRoutes, { services });
  await app.register(envRoutes, { services });
  await app.register(domainsRoutes, { services });
  await app.register(uptimeRoutes, { services });
  await app.register(databaseRoutes, { services });
  await app.register(templateRoutes, { services });
  await app.register(logRoutes, { services });
  const llm =
    deps.llm === undefined || deps.llm === null
      ? undefined
      : new LlmAnalyzer({ ...deps.llm, onFallback: (reason) => { app.log.warn({ reason }, 'log analysis: the model gave no usable answer; the built-in analysis was returned'); } });
  const pool = new AnalysisPool(deps.analysis);
  app.addHook('onClose', async () => pool.close());
  await app.register(analyzeRoutes, {
    analysis: new LogAnalysisService(deps, deps.logs, services.envVars, llm, pool),
    buckets: new TokenBuckets(deps.analysis?.rateLimit ?? ANALYZE_RATE_LIMIT, deps.clock),
  });
  await app.register(webhookRoutes, { services, githubSecret: deps.githubWebhookSecret ?? '' });
  await app.register(paymentWebhookRoutes, { services });

  // tenant containers never reach the control plane (docs/security.md#metrics-and-the-control-planes-ports)
  refuseTenants(app.server, deps.tenantNetworks ?? new TenantNetworks([]), app.log, 'API');

  return { app, services: services satisfies Services, metrics };
}

export type App = Awaited<ReturnType<typeof buildApp>>['app'];
