import { randomUUID } from 'node:crypto';
import swagger from '@fastify/swagger';
import websocket from '@fastify/websocket';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyLoggerOptions } from 'fastify';
import { destination, type LoggerOptions } from 'pino';
import { collectDefaultMetrics, Histogram, Registry } from 'prom-client';
import { registerProjectGauges } from '../modules/metrics/prometheus.js';
import type { Parts } from './adapters.js';
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
import { backupRoutes } from '../modules/backups/backups.routes.js';
import { templateRoutes } from '../modules/templates/templates.routes.js';
import { domainsRoutes } from '../modules/domains/domains.routes.js';
import { gitRoutes } from '../modules/projects/git.routes.js';
import { githubRoutes } from '../modules/github/github.routes.js';
import { logRoutes } from '../modules/logs/logs.routes.js';
import { analyzeRoutes } from '../modules/logs/analyze.routes.js';
import { ANALYZE_RATE_LIMIT } from '../modules/logs/analysis-pool.js';
import { projectRoutes } from '../modules/projects/projects.routes.js';
import { metricsRoutes } from '../modules/metrics/metrics.routes.js';
import { paymentWebhookRoutes, walletRoutes } from '../modules/billing/wallet.routes.js';
import { envRoutes } from '../modules/env/env.routes.js';
import { uptimeRoutes } from '../modules/uptime/uptime.routes.js';
import { webhookRoutes } from '../modules/webhooks/webhooks.routes.js';
import { invitationRoutes } from '../modules/tenancy/invitations.routes.js';
import { memberRoutes } from '../modules/tenancy/members.routes.js';
import { systemRoutes } from '../modules/system/system.routes.js';
import { workspaceRoutes } from '../modules/tenancy/workspaces.routes.js';
import { ErrorEnvelopeSchema } from '../http/schemas.js';
import { createServices, leaderLinks, type Services } from './compose.js';
import type { ApiSettings } from './settings.js';
import { describeValidationError, validatorCompiler } from '../http/validation.js';
import { cachedSerializers } from '../http/serialization.js';

/** What the HTTP API is built from: the services' dependencies, its settings (settings.ts) and the live tail's hub. */
export interface AppDeps extends Parts, ApiSettings {
  /** the live tail's hub (src/modules/logs/live.ts), which the log writer notifies; absent: no …/live-logs route */
  liveLogs?: LiveLogs;
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

/**
 * The whole HTTP API, built but not listening (`slipway serve` and the tests both start it):
 * the Fastify instance and its shared plugins, every service (compose.ts), and each module's
 * routes with its own service(s). The leader links are idle until a leader sets them (leader.ts).
 */
export async function buildApp(deps: AppDeps) {
  const { app, metrics } = await createHttp(deps);
  const leader = leaderLinks();
  const services = createServices(deps, leader, {
    log: app.log,
    onLogsStored: (projectId) => { deps.liveLogs?.notify(projectId); },
    githubWebhookSecret: deps.githubWebhookSecret,
    llm: deps.llm,
    analysisPool: deps.analysis,
  });
  app.addHook('onClose', async () => services.logAnalysis.close());
  await registerRoutes(app, deps, services, metrics);
  // tenant containers never reach the control plane (docs/security.md#metrics-and-the-control-planes-ports)
  refuseTenants(app.server, deps.tenantNetworks ?? new TenantNetworks([]), app.log, 'API');
  return { app, services, leader, metrics };
}

export type App = Awaited<ReturnType<typeof buildApp>>['app'];

/**
 * The Fastify instance and what every route shares: the request log, request ids, the
 * validator, the latency histogram, the OpenAPI document, the error envelope and WebSockets.
 */
async function createHttp(deps: AppDeps) {
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
    // response serializers compiled once per schema in the process (src/http/serialization.ts)
    schemaController: { compilersFactory: { buildSerializer: cachedSerializers } },
  }).withTypeProvider<TypeBoxTypeProvider>();

  app.addHook('onClose', (_instance, done) => {
    access.flush();
    done();
  });
  app.setValidatorCompiler(validatorCompiler());
  app.addSchema(ErrorEnvelopeSchema);

  const metrics = new Registry();
  collectDefaultMetrics({ register: metrics, prefix: 'slipway_' });
  registerProjectGauges(metrics, deps.store.repos, deps.clock);
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
  return { app, metrics };
}

type Http = Awaited<ReturnType<typeof createHttp>>['app'];

/**
 * Each module's routes, with its own service(s), behind the auth plugin, which reaches the keys
 * and the members through its ports.
 */
async function registerRoutes(app: Http, deps: AppDeps, services: Services, metrics: Registry): Promise<void> {
  await app.register(authPlugin, {
    ports: {
      authenticate: (key) => services.apiKeys.authenticate(key),
      membership: (slug, userId) => deps.store.repos.members.accessBySlug(slug, userId),
      keyValidity: (keyId) => deps.store.repos.apiKeys.validity(keyId),
    },
    keyBuckets: new TokenBuckets(deps.rateLimit, deps.clock),
    addressBuckets: new TokenBuckets(deps.anonymousRateLimit, deps.clock),
    receiverBuckets: new TokenBuckets(deps.webhookRateLimit ?? WEBHOOK_RATE_LIMIT, deps.clock),
    clock: deps.clock,
    refusals: new RefusalLog(app.log, deps.refusalLogMs ?? 60_000),
    streamRecheckMs: deps.streamRecheckMs ?? 10_000,
    streamPingMs: deps.streamPingMs ?? PING_EVERY_MS,
  });

  await app.register(systemRoutes, { store: deps.store, metrics, metricsToken: deps.metricsToken ?? '' });
  await app.register(workspaceRoutes, { workspaces: services.workspaces });
  await app.register(memberRoutes, { members: services.members });
  await app.register(invitationRoutes, { invitations: services.invitations });
  await app.register(apiKeyRoutes, { apiKeys: services.apiKeys });
  await app.register(projectRoutes, { projects: services.projects, deploys: services.deploys });
  await app.register(metricsRoutes, { metrics: services.metrics });
  await app.register(gitRoutes, { git: services.git });
  await app.register(githubRoutes, { installations: services.installations });
  await app.register(deploymentRoutes, { deployments: services.deployments });
  await app.register(buildLogRoutes, { deployments: services.deployments, buildLog: services.buildLog });
  if (deps.liveLogs !== undefined) await app.register(liveLogRoutes, { projects: services.projects, live: deps.liveLogs });
  await app.register(deployActionRoutes, { deploys: services.deploys, projects: services.projects });
  await app.register(walletRoutes, { wallets: services.wallets });
  await app.register(envRoutes, { envVars: services.envVars });
  await app.register(domainsRoutes, { domains: services.domains });
  await app.register(uptimeRoutes, { uptime: services.uptime });
  await app.register(databaseRoutes, { databases: services.databases });
  await app.register(backupRoutes, { backups: services.backups, destinations: services.destinations });
  await app.register(templateRoutes, { templates: services.templates, envVars: services.envVars, domains: services.domains, deployments: services.deployments, deploys: services.deploys });
  await app.register(logRoutes, { logs: services.logs });
  await app.register(analyzeRoutes, {
    analysis: services.logAnalysis,
    buckets: new TokenBuckets(deps.analysis?.rateLimit ?? ANALYZE_RATE_LIMIT, deps.clock),
  });
  await app.register(webhookRoutes, { webhooks: services.webhooks });
  await app.register(paymentWebhookRoutes, { wallets: services.wallets });
}
