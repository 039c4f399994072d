import { isIP } from 'node:net';
import { totalmem } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import { isPostgresUrl } from '../store/url.js';
import type { RateLimit } from '../http/rate-limit.js';
import type { DatabasePolicy } from '../modules/databases/policy.js';
import { sharedUrlProblem } from '../modules/databases/shared-url.js';
import { DATABASE_TYPES, type DatabaseType } from '../domain/database.js';
import { parseCidr, poolProblem, type NetworkPool } from '../adapters/runtime/docker/network-pool.js';
import { DOCKER_DEFAULT_BRIDGES } from '../http/tenant-guard.js';
import type { TenantLimits } from '../modules/tenancy/policy.js';
import { parseSmtpUrl, type SmtpSettings } from '../adapters/notify/mailer.js';
import type { BillingPolicy } from '../modules/billing/policy.js';
import { decimalToNanos, isCurrency } from '../domain/money.js';
import { isEmailAddress } from '../domain/email.js';

/** Where something listens: `:3000` means every interface. */
export interface ListenAddress {
  host: string;
  port: number;
}

export interface Config {
  listen: ListenAddress;
  dataDir: string;
  databaseUrl: string;
  routerListen: ListenAddress;
  appsDomain: string;
  gitBaseUrl: string;
  secretKeyFile: string;
  logLevel: string;
  rateLimit: RateLimit;
  anonymousRateLimit: RateLimit;
  /** signed GitHub deliveries per receiver (the App, or one Git connection's webhook) */
  webhookRateLimit: RateLimit;
  adminEmail: string;
  startingCredit: number;
  currency: string;
  billing: BillingPolicy;
  notifyAllowPrivate: boolean;
  backupAllowPrivate: boolean;
  uptime: { failures: number; successes: number };
  /** off: a top-up path without keys answers 503; sandbox: it confirms at once, without payment (docs/billing.md#sandbox) */
  payments: 'off' | 'sandbox';
  /** the gateway behind each top-up path; null: none (503, or the sandbox with `payments: 'sandbox'`) */
  stripe: { secretKey: string; webhookSecret: string; apiUrl: string } | null;
  paystack: { secretKey: string; apiUrl: string } | null;
  /** proxies whose X-Forwarded-For names the client (for per-address limits and logs) */
  trustProxy: string[];
  /** HMAC secret of GitHub App webhook deliveries (POST /api/webhooks/github); empty: that route answers 503 */
  githubWebhookSecret: string;
  /** the operator's metrics listener (GET /metrics); null: off */
  metricsListen: ListenAddress | null;
  /** bearer token that GET /metrics on the API answers to; empty: /metrics is not on the API */
  metricsToken: string;
  /** address blocks whose connections the API and metrics listeners refuse (tenant containers) */
  refuseNetworks: string[];
  /** the API's public address (https://slipway.example.com), for the webhook URLs shown; empty: paths alone */
  publicUrl: string;
  /** where e-mail goes (invitations); null: Slipway sends no e-mail */
  smtp: SmtpSettings | null;
  /** POST …/logs/analyze: its per-key limit, and the worker threads that analyse (docs/logs-analyzer.md#cost) */
  analysis: { rateLimit: RateLimit; timeoutMs: number; workers: number; queue: number };
  /** `--llm-base-url`: the model the log analyzer also asks; null: the built-in analyzer only */
  llm: { baseUrl: string; model: string; apiKey: string | undefined } | null;
  /** without SMTP: whether the invitation create response carries the token */
  invitationTokenInResponse: boolean;
  /** custom domains: dns, routed once ownership is proven; off, trusted at once (single-tenant installs) */
  domainVerification: 'dns' | 'off';
  /** resolvers that verification asks (`ip` or `ip:port`); empty: the system's */
  dnsServers: string[];
  /** this installation's public addresses: a custom domain that resolves to one of them is proven; empty: TXT records only */
  publicAddresses: string[];
  maxDomainsPerProject: number;
  engine: 'docker' | 'none';
  router: 'auto' | 'nginx' | 'node';
  /** where the router serves HTTPS; used only when ACME is on */
  routerTlsListen: ListenAddress;
  /** TLS for every routed host with certificates from an ACME CA; null: off (the default) */
  acme: AcmeConfig | null;
  buildConcurrency: number;
  healthTimeoutMs: number;
  /** how long a stopping Slipway lets deployments in progress finish before interrupting them */
  shutdownGraceMs: number;
  /** keep: nginx goes on serving while Slipway is down (the next start adopts it); stop: it stops with Slipway */
  routerOnExit: 'keep' | 'stop';
  /** how the router reaches app containers: their port published on 127.0.0.1, or their workspace-network address */
  upstreamMode: 'published' | 'network';
  /** images kept per project besides those running or in progress (rollback targets) */
  keepImages: number;
  /** bytes of log messages each project keeps (oldest lines go first); null: no cap */
  logMaxBytesPerProject: number | null;
  /** lines per second each container (replica) may write into the logs; the excess is dropped and counted */
  logRateLimit: number;
  /** workspaces a user may create and projects a workspace may hold through the API; 0: no limit */
  limits: TenantLimits;
  /** where workspace networks get their subnets; null: the engine's default pools */
  networkPool: NetworkPool | null;
  /** the most processes (and threads) each app, template and database container may run at once */
  pidsLimit: number;
  /** the Docker Engine's builder: buildkit, or classic (the legacy builder) */
  builder: 'buildkit' | 'classic';
  /** clientId and clientSecret: the app's OAuth client, which proves control of an installation when it is linked ('' when unset: linking is off) */
  githubApp: { id: string; privateKeyFile: string; apiUrl: string; clientId: string; clientSecret: string; webUrl: string } | null;
  baseImages: { node: string; go: string; python: string; static: string };
  databases: DatabasePolicy;
  /** `--template-catalog`: a file of catalog entries besides the shipped ones; '' for none */
  templateCatalog: string;
}

export interface AcmeConfig {
  directoryUrl: string;
  email: string | null;
  /** absolute path of a PEM bundle trusted for the directory, or null */
  caFile: string | null;
}

/**
 * Every setting: its flag, its environment variable and its default. The CLI, the validation
 * and docs/configuration.md are all read from this one table (a test checks the docs).
 */
export const SETTINGS = [
  { flag: 'listen', env: 'SLIPWAY_LISTEN', def: ':3000', help: 'address of the REST + WebSocket API, `[host]:port`' },
  { flag: 'metrics-listen', env: 'SLIPWAY_METRICS_LISTEN', def: '127.0.0.1:9464', help: 'the operator\'s own listener for Prometheus (GET /metrics: it names workspaces and projects, so it is not on the API), `[host]:port`; off: none' },
  { flag: 'metrics-token', env: 'SLIPWAY_METRICS_TOKEN', def: '', help: 'bearer token (at least 32 characters) that GET /metrics on the API port answers to, for a Prometheus that cannot reach the metrics listener; empty: /metrics is not served on the API (404)' },
  { flag: 'api-refuse-networks', env: 'SLIPWAY_API_REFUSE_NETWORKS', def: 'workspaces', help: 'address blocks whose connections the API and metrics listeners refuse, so tenant containers never reach the control plane: workspaces (the --network-pool block, or Docker\'s default bridge pools 172.17-31.0.0/16 when it is empty), none, or comma-separated CIDRs added to workspaces\' (e.g. workspaces,172.16.0.0/16)' },
  { flag: 'data-dir', env: 'SLIPWAY_DATA_DIR', def: './data', help: 'directory for the SQLite store, the secret key and the bootstrap key' },
  { flag: 'database-url', env: 'SLIPWAY_DATABASE_URL', def: '', help: 'control-plane store: `postgres://…` selects PostgreSQL; empty means SQLite at `<data-dir>/slipway.db`' },
  { flag: 'router-listen', env: 'SLIPWAY_ROUTER_LISTEN', def: ':8000', help: 'address of the HTTP router that serves the deployed apps' },
  { flag: 'apps-domain', env: 'SLIPWAY_APPS_DOMAIN', def: 'localhost', help: 'apps get `<project>-<workspace>.<apps-domain>`' },
  { flag: 'git-base-url', env: 'SLIPWAY_GIT_BASE_URL', def: 'https://github.com', help: 'where `owner/repo` is cloned from (`file://…` for local paths)' },
  { flag: 'secret-key-file', env: 'SLIPWAY_SECRET_KEY_FILE', def: '', help: '32-byte key that encrypts secrets at rest; generated on first start; empty means `<data-dir>/secret.key`' },
  { flag: 'log-level', env: 'SLIPWAY_LOG_LEVEL', def: 'info', help: 'one of fatal, error, warn, info, debug, trace, silent' },
  { flag: 'rate-limit', env: 'SLIPWAY_RATE_LIMIT', def: '20', help: 'requests per second per API key (token bucket refill rate)' },
  { flag: 'rate-limit-burst', env: 'SLIPWAY_RATE_LIMIT_BURST', def: '100', help: 'requests an API key may send at once (bucket size)' },
  { flag: 'anonymous-rate-limit', env: 'SLIPWAY_ANONYMOUS_RATE_LIMIT', def: '5', help: 'requests per second per client address without a valid key (failed auth, invitation accept, GitHub deliveries whose signature or webhook URL is wrong)' },
  { flag: 'anonymous-rate-limit-burst', env: 'SLIPWAY_ANONYMOUS_RATE_LIMIT_BURST', def: '20', help: 'burst for requests without a valid key' },
  { flag: 'webhook-rate-limit', env: 'SLIPWAY_WEBHOOK_RATE_LIMIT', def: '10', help: 'correctly signed GitHub deliveries per second per receiver (the GitHub App, or one Git connection\'s webhook URL), counted after the signature check' },
  { flag: 'webhook-rate-limit-burst', env: 'SLIPWAY_WEBHOOK_RATE_LIMIT_BURST', def: '200', help: 'signed GitHub deliveries one receiver may get at once (GitHub sends bursts and does not retry)' },
  { flag: 'admin-email', env: 'SLIPWAY_ADMIN_EMAIL', def: 'admin@localhost', help: 'e-mail of the owner created on first start' },
  { flag: 'starting-credit', env: 'SLIPWAY_STARTING_CREDIT', def: '500', help: 'credit of a new workspace wallet, in minor units (500 = 5.00)' },
  { flag: 'currency', env: 'SLIPWAY_CURRENCY', def: 'USD', help: 'ISO 4217 code of wallet balances' },
  { flag: 'trust-proxy', env: 'SLIPWAY_TRUST_PROXY', def: '', help: 'comma-separated addresses/CIDRs of reverse proxies whose X-Forwarded-For is believed (empty: none)' },
  { flag: 'domain-verification', env: 'SLIPWAY_DOMAIN_VERIFICATION', def: 'dns', help: 'dns: a custom domain is routed (and gets certificates) once its owner proves it with a DNS TXT record (or, with --public-addresses, by pointing it here); off: every custom domain is trusted and verified at once (single-tenant installs only: any tenant can take any name\'s traffic on this router)' },
  { flag: 'dns-servers', env: 'SLIPWAY_DNS_SERVERS', def: '', help: 'comma-separated resolvers that domain verification asks, `ip` or `ip:port`; empty: the system\'s resolvers' },
  { flag: 'public-addresses', env: 'SLIPWAY_PUBLIC_ADDRESSES', def: '', help: 'comma-separated public IP addresses of this installation: a custom domain whose A/AAAA records include one is verified too, when no other project claims it; empty: TXT records only' },
  { flag: 'max-domains-per-project', env: 'SLIPWAY_MAX_DOMAINS_PER_PROJECT', def: '20', help: 'custom domains a project may have (pending and verified)' },
  { flag: 'engine', env: 'SLIPWAY_ENGINE', def: 'docker', help: 'container engine that runs deployments: docker (DOCKER_HOST or /var/run/docker.sock), or none (API only: deployments queue)' },
  { flag: 'router', env: 'SLIPWAY_ROUTER', def: 'auto', help: 'router data plane: nginx, node (built-in proxy), or auto (nginx when installed)' },
  { flag: 'acme-directory-url', env: 'SLIPWAY_ACME_DIRECTORY_URL', def: '', help: 'ACME directory of the CA that issues certificates for every routed host (Let\'s Encrypt: https://acme-v02.api.letsencrypt.org/directory); empty: TLS off' },
  { flag: 'acme-email', env: 'SLIPWAY_ACME_EMAIL', def: '', help: 'contact e-mail of the ACME account (expiry notices); empty: none' },
  { flag: 'acme-ca-file', env: 'SLIPWAY_ACME_CA_FILE', def: '', help: 'PEM bundle trusted, besides the system CAs, for the ACME directory\'s HTTPS (a private CA); empty: system CAs only' },
  { flag: 'router-tls-listen', env: 'SLIPWAY_ROUTER_TLS_LISTEN', def: ':8443', help: 'address where the router serves HTTPS when ACME is on, `[host]:port`' },
  { flag: 'build-concurrency', env: 'SLIPWAY_BUILD_CONCURRENCY', def: '2', help: 'deployments built and rolled out at once (one at a time per project)' },
  { flag: 'health-timeout', env: 'SLIPWAY_HEALTH_TIMEOUT', def: '60', help: 'seconds new containers get to answer on their port before the deployment fails' },
  { flag: 'shutdown-grace', env: 'SLIPWAY_SHUTDOWN_GRACE', def: '30', help: 'seconds a stopping Slipway (SIGTERM, SIGINT) lets deployments in progress finish; then they are interrupted and fail' },
  { flag: 'builder', env: 'SLIPWAY_BUILDER', def: 'buildkit', help: 'how the Docker Engine builds images: buildkit, or classic (the legacy builder, for engines without BuildKit)' },
  { flag: 'max-workspaces-per-user', env: 'SLIPWAY_MAX_WORKSPACES_PER_USER', def: '10', help: 'workspaces a user may create (those that still exist, whoever owns them now): POST /api/workspaces beyond it answers 403 (the bootstrap and `slipway admin` are not limited); 0: no limit' },
  { flag: 'max-projects-per-workspace', env: 'SLIPWAY_MAX_PROJECTS_PER_WORKSPACE', def: '50', help: 'projects a workspace may hold: creating one more answers 403; 0: no limit' },
  { flag: 'max-databases-per-workspace', env: 'SLIPWAY_MAX_DATABASES_PER_WORKSPACE', def: '10', help: 'databases a workspace may hold, those its template instances made included: creating one more (or an instance with one) answers 403; 0: no limit' },
  { flag: 'max-reserved-memory', env: 'SLIPWAY_MAX_RESERVED_MEMORY', def: 'auto', help: 'GiB of memory the containers of all tenants may reserve together (projects and template instances: replicas × memory; databases: their memory limit): a deploy, redeploy, rollback, restart, resize, template deploy or database that would pass it answers 409 before anything starts; auto: the memory of the host Slipway runs on (set it when the Docker Engine is another machine); 0: no bound' },
  { flag: 'network-pool', env: 'SLIPWAY_NETWORK_POOL', def: '10.213.0.0/16', help: 'IPv4 block that workspace networks get their subnets from (one per workspace, never one another engine network uses); it must not be used on the host\'s own networks; empty: the engine\'s default pools (about 30 networks)' },
  { flag: 'network-size', env: 'SLIPWAY_NETWORK_SIZE', def: '24', help: 'prefix length of each workspace network in the pool: 24 gives 256 networks of 254 addresses in a /16' },
  { flag: 'keep-images', env: 'SLIPWAY_KEEP_IMAGES', def: '5', help: 'images of the newest deployments each project keeps for rollbacks (besides running ones); older images are removed' },
  { flag: 'log-max-bytes-per-project', env: 'SLIPWAY_LOG_MAX_BYTES_PER_PROJECT', def: '1073741824', help: 'bytes of log messages each project keeps; past it the oldest lines go, checked hourly with the workspace\'s log retention; 0: no cap' },
  { flag: 'log-rate-limit', env: 'SLIPWAY_LOG_RATE_LIMIT', def: '1000', help: 'lines per second each app container may write into the logs; the excess of a second is dropped, counted in the usage and replaced by one marker line' },
  { flag: 'pids-limit', env: 'SLIPWAY_PIDS_LIMIT', def: '512', help: 'the most processes (and threads) each app, template and database container may run at once; a fork past it fails, so a fork bomb stops there (16 to 1048576)' },
  { flag: 'upstream-mode', env: 'SLIPWAY_UPSTREAM_MODE', def: 'published', help: 'how the router reaches apps: published (their port on 127.0.0.1) or network (their address on the workspace network, when Slipway runs in a container)' },
  { flag: 'router-on-exit', env: 'SLIPWAY_ROUTER_ON_EXIT', def: 'keep', help: 'keep: the nginx router goes on serving the apps while Slipway is stopped or upgraded, and the next start adopts it; stop: it stops with Slipway (the built-in Node router always stops)' },
  { flag: 'github-app-id', env: 'SLIPWAY_GITHUB_APP_ID', def: '', help: 'GitHub App id: with its private key, installation_id is exchanged for clone tokens; empty: clone anonymously' },
  { flag: 'github-app-private-key-file', env: 'SLIPWAY_GITHUB_APP_PRIVATE_KEY_FILE', def: '', help: 'PEM private key of the GitHub App' },
  { flag: 'github-api-url', env: 'SLIPWAY_GITHUB_API_URL', def: 'https://api.github.com', help: 'GitHub API base URL (GitHub Enterprise: https://HOST/api/v3)' },
  { flag: 'github-app-client-id', env: 'SLIPWAY_GITHUB_APP_CLIENT_ID', def: '', help: 'client ID of the GitHub App: with its client secret, admins link installations to workspaces (GET /api/github/setup proves control through the user\'s authorization); empty: installations cannot be linked' },
  { flag: 'github-app-client-secret', env: 'SLIPWAY_GITHUB_APP_CLIENT_SECRET', def: '', help: 'client secret of the GitHub App (never logged)' },
  { flag: 'github-web-url', env: 'SLIPWAY_GITHUB_WEB_URL', def: 'https://github.com', help: 'GitHub web address, where authorization codes are exchanged (GitHub Enterprise: https://HOST)' },
  { flag: 'base-image-node', env: 'SLIPWAY_BASE_IMAGE_NODE', def: 'node:20-alpine', help: 'base image of generated Dockerfiles for Node apps' },
  { flag: 'base-image-go', env: 'SLIPWAY_BASE_IMAGE_GO', def: 'golang:1.22', help: 'base image of generated Dockerfiles for Go apps' },
  { flag: 'base-image-python', env: 'SLIPWAY_BASE_IMAGE_PYTHON', def: 'python:3.12-slim', help: 'base image of generated Dockerfiles for Python apps' },
  { flag: 'base-image-static', env: 'SLIPWAY_BASE_IMAGE_STATIC', def: 'busybox:1.36', help: 'base image of generated Dockerfiles for static sites' },
  { flag: 'github-webhook-secret', env: 'SLIPWAY_GITHUB_WEBHOOK_SECRET', def: '', help: 'webhook secret of the GitHub App, for its deliveries to /api/webhooks/github (repository webhooks use each Git connection\'s own secret); empty: App deliveries are refused' },
  { flag: 'public-url', env: 'SLIPWAY_PUBLIC_URL', def: '', help: 'the API\'s address as GitHub reaches it, e.g. https://slipway.example.com: Git connections show their webhook URL under it; empty: under the origin each request reached (its Host header, or X-Forwarded-Proto/Host from a --trust-proxy proxy)' },
  { flag: 'smtp-url', env: 'SLIPWAY_SMTP_URL', def: '', help: 'SMTP server that sends e-mail (invitations), `smtp://[user:password@]host[:port]` or `smtps://…`; empty: no e-mail' },
  { flag: 'smtp-from', env: 'SLIPWAY_SMTP_FROM', def: 'Slipway <slipway@localhost>', help: 'From address of the e-mail Slipway sends' },
  { flag: 'llm-base-url', env: 'SLIPWAY_LLM_BASE_URL', def: '', help: 'an OpenAI-compatible API (`…/v1`) that POST …/logs/analyze also asks, sending only redacted line templates; its key comes from the environment variable SLIPWAY_LLM_API_KEY (never a flag); empty: the built-in analyzer only' },
  { flag: 'llm-model', env: 'SLIPWAY_LLM_MODEL', def: '', help: 'the model asked at --llm-base-url (needed with it)' },
  { flag: 'analyze-rate-limit', env: 'SLIPWAY_ANALYZE_RATE_LIMIT', def: '1', help: 'log analyses (POST …/logs/analyze) per second per API key, a bucket of their own besides --rate-limit; past it 429 with Retry-After' },
  { flag: 'analyze-rate-limit-burst', env: 'SLIPWAY_ANALYZE_RATE_LIMIT_BURST', def: '5', help: 'log analyses an API key may send at once' },
  { flag: 'analyze-timeout-ms', env: 'SLIPWAY_ANALYZE_TIMEOUT_MS', def: '5000', help: 'milliseconds one log analysis may run in its worker thread; past it the worker is stopped and the request answers 422' },
  { flag: 'analyze-workers', env: 'SLIPWAY_ANALYZE_WORKERS', def: '1', help: 'worker threads that run log analyses, off the event loop (started when first needed)' },
  { flag: 'analyze-queue', env: 'SLIPWAY_ANALYZE_QUEUE', def: '4', help: 'log analyses that may wait for a busy worker; past it 503 with Retry-After' },
  { flag: 'database-image-postgresql', env: 'SLIPWAY_DATABASE_IMAGE_POSTGRESQL', def: 'postgres:16', help: 'image of postgresql databases (the official image\'s POSTGRES_* contract); absent and not pullable: the locally built slipway-local/postgresql:latest' },
  { flag: 'database-image-mysql', env: 'SLIPWAY_DATABASE_IMAGE_MYSQL', def: 'mysql:8.4', help: 'image of mysql databases (MYSQL_* contract); absent and not pullable: slipway-local/mysql:latest (MariaDB)' },
  { flag: 'database-image-redis', env: 'SLIPWAY_DATABASE_IMAGE_REDIS', def: 'redis:7', help: 'image of redis databases (`redis-server --requirepass`); absent and not pullable: slipway-local/redis:latest' },
  { flag: 'database-image-mongo', env: 'SLIPWAY_DATABASE_IMAGE_MONGO', def: 'mongo:7', help: 'image of mongo databases (MONGO_INITDB_* contract, authSource=admin)' },
  { flag: 'database-publish', env: 'SLIPWAY_DATABASE_PUBLISH', def: 'loopback', help: 'where database ports are published for access from the host (external_host/external_port): loopback (127.0.0.1), all (every interface), or off' },
  { flag: 'database-public-host', env: 'SLIPWAY_DATABASE_PUBLIC_HOST', def: 'localhost', help: 'the host name shown as external_host with --database-publish all' },
  { flag: 'database-memory', env: 'SLIPWAY_DATABASE_MEMORY', def: '512', help: 'memory limit of each database server, MiB' },
  { flag: 'database-ready-timeout', env: 'SLIPWAY_DATABASE_READY_TIMEOUT', def: '180', help: 'seconds a new database server gets to accept a login with its credentials before the database is failed' },
  { flag: 'database-shared-postgresql', env: 'SLIPWAY_DATABASE_SHARED_POSTGRESQL', def: '', help: 'administrative URL of an existing PostgreSQL server (`postgresql://admin:password@host:5432/postgres`, a role with CREATEROLE and CREATEDB): postgresql databases are then a role and a database of their own there (the shared provisioner) instead of a container each; empty: containers. Give it in the environment, not as a flag: it holds a password (never logged)' },
  { flag: 'database-shared-mysql', env: 'SLIPWAY_DATABASE_SHARED_MYSQL', def: '', help: 'administrative URL of an existing MySQL or MariaDB server (`mysql://root:password@host:3306`, a user with CREATE USER and GRANT OPTION): mysql databases are then a database and a user of their own there; empty: containers' },
  { flag: 'database-shared-redis', env: 'SLIPWAY_DATABASE_SHARED_REDIS', def: '', help: 'administrative URL of an existing Redis 6.2+ server (`redis://default:password@host:6379`, a user allowed ACL): redis databases are then an ACL user limited to its own key prefix there; empty: containers' },
  { flag: 'database-shared-mongo', env: 'SLIPWAY_DATABASE_SHARED_MONGO', def: '', help: 'administrative URL of an existing MongoDB server (`mongodb://admin:password@host:27017/?authSource=admin`, with userAdminAnyDatabase): mongo databases are then a user in admin owning a database of its own there; empty: containers' },
  { flag: 'template-catalog', env: 'SLIPWAY_TEMPLATE_CATALOG', def: '', help: 'a JSON file of template catalog entries (the schema of catalog/templates.json) added to the shipped catalog; an entry with a shipped key replaces it; every entry is checked at start; empty: the shipped catalog alone' },
  { flag: 'price-vcpu-minute', env: 'SLIPWAY_PRICE_VCPU_MINUTE', def: '0.000463', help: 'price of one vCPU for one minute, in major units of --currency (up to nine decimals); a project pays replicas × cpu of it every minute it runs' },
  { flag: 'price-gib-minute', env: 'SLIPWAY_PRICE_GIB_MINUTE', def: '0.000231', help: 'price of one GiB of memory for one minute (replicas × ram of a project)' },
  { flag: 'price-database-gib-minute', env: 'SLIPWAY_PRICE_DATABASE_GIB_MINUTE', def: '0.000231', help: 'price of one GiB of a managed database\'s memory (--database-memory) for one minute' },
  { flag: 'price-backup-gib-month', env: 'SLIPWAY_PRICE_BACKUP_GIB_MONTH', def: '0.023', help: 'price of one GiB of stored database backups (their artifacts at rest, at every destination) for a month of 30 days, charged by the minute' },
  { flag: 'billing-grace', env: 'SLIPWAY_BILLING_GRACE', def: '86400', help: 'seconds a workspace\'s running work goes on once its wallet is empty (its owners are warned); then it is stopped and marked suspended until a top-up' },
  { flag: 'topup-min', env: 'SLIPWAY_TOPUP_MIN', def: '100', help: 'smallest top-up, in minor units of --currency (100 = 1.00)' },
  { flag: 'topup-max', env: 'SLIPWAY_TOPUP_MAX', def: '1000000', help: 'largest top-up, in minor units (1000000 = 10,000.00)' },
  { flag: 'payments', env: 'SLIPWAY_PAYMENTS', def: 'off', help: 'off: top-ups go only through the gateways given keys (--stripe-*, --paystack-*), a path without keys answers 503; sandbox: every path without keys confirms at once and credits the wallet WITHOUT ANY PAYMENT (development and demos with trusted tenants only: any workspace owner or admin can give themselves credit; every start logs a warning; `make run` turns it on). To credit a wallet by hand, use `slipway admin grant-credit`' },
  { flag: 'stripe-secret-key', env: 'SLIPWAY_STRIPE_SECRET_KEY', def: '', help: 'Stripe secret key (sk_…): top-ups through gatewaya become Stripe Checkout Sessions; empty: gatewaya is off (503), or the sandbox with --payments sandbox. Give it in the environment (never logged)' },
  { flag: 'stripe-webhook-secret', env: 'SLIPWAY_STRIPE_WEBHOOK_SECRET', def: '', help: 'signing secret (whsec_…) of the Stripe webhook endpoint POST /api/webhooks/payments/gatewaya (needed with --stripe-secret-key)' },
  { flag: 'stripe-api-url', env: 'SLIPWAY_STRIPE_API_URL', def: 'https://api.stripe.com', help: 'where Stripe\'s API is reached' },
  { flag: 'paystack-secret-key', env: 'SLIPWAY_PAYSTACK_SECRET_KEY', def: '', help: 'Paystack secret key (sk_…): top-ups through gatewayb become Paystack transactions, whose webhooks (POST /api/webhooks/payments/gatewayb) are signed with this key; empty: gatewayb is off (503), or the sandbox with --payments sandbox. Give it in the environment (never logged)' },
  { flag: 'paystack-api-url', env: 'SLIPWAY_PAYSTACK_API_URL', def: 'https://api.paystack.co', help: 'where Paystack\'s API is reached' },
  { flag: 'notify-allow-private', env: 'SLIPWAY_NOTIFY_ALLOW_PRIVATE', def: 'no', help: 'yes: uptime chat webhooks may target loopback, link-local and private addresses (a chat server on your own network); no: such targets are refused, when saved and again at send time after DNS resolution' },
  { flag: 'backup-allow-private', env: 'SLIPWAY_BACKUP_ALLOW_PRIVATE', def: 'no', help: 'yes: S3 backup destinations may point at loopback, link-local and private addresses (MinIO on your own network); no: such endpoints are refused, when saved and again at connect time after DNS resolution' },
  { flag: 'uptime-failures', env: 'SLIPWAY_UPTIME_FAILURES', def: '2', help: 'consecutive failed checks before a monitor is down and notifies (the second is a re-check two seconds after the first)' },
  { flag: 'uptime-successes', env: 'SLIPWAY_UPTIME_SUCCESSES', def: '2', help: 'consecutive successful checks before a down monitor is up again and notifies' },
  { flag: 'invitation-token-in-response', env: 'SLIPWAY_INVITATION_TOKEN_IN_RESPONSE', def: 'yes', help: 'without SMTP: yes, the inviter gets the invitation token in the create response to hand over; no, invitations cannot be created (with SMTP the token only travels by e-mail)' },
] as const;

export type SettingName = (typeof SETTINGS)[number]['flag'];
export type RawSettings = Partial<Record<SettingName, string>>;

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

/** 1 PiB: far past any disk, and exact in a double. */
const MAX_LOG_BYTES = 2 ** 50;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/** Flags win over `SLIPWAY_*` variables, which win over defaults. All problems are reported at once. */
export function resolveConfig(flags: RawSettings, env: NodeJS.ProcessEnv, cwd = process.cwd()): Config {
  const problems: string[] = [];
  const raw = (name: SettingName): string => {
    const s = SETTINGS.find((x) => x.flag === name);
    if (s === undefined) throw new Error(`unknown setting ${name}`);
    return flags[name] ?? env[s.env] ?? s.def;
  };
  const where = (name: SettingName) => {
    const s = SETTINGS.find((x) => x.flag === name);
    return flags[name] !== undefined ? `--${name}` : (s?.env ?? name);
  };

  const address = (name: SettingName): ListenAddress => {
    const value = raw(name);
    const m = /^(.*):(\d{1,5})$/.exec(value);
    const port = m === null ? NaN : Number(m[2]);
    if (m === null || port > 65535) {
      problems.push(`${where(name)} must be [host]:port, like :3000 or 127.0.0.1:3000 (got "${value}").`);
      return { host: '0.0.0.0', port: 0 };
    }
    const host = (m[1] ?? '').replace(/^\[(.*)\]$/, '$1');
    return { host: host === '' ? '0.0.0.0' : host, port };
  };
  const positive = (name: SettingName): number => {
    const n = Number(raw(name));
    if (!Number.isFinite(n) || n <= 0) problems.push(`${where(name)} must be a positive number (got "${raw(name)}").`);
    return n;
  };

  function oneOf<const T extends readonly string[]>(name: SettingName, values: T): T[number] {
    const v = raw(name);
    if (!values.includes(v)) problems.push(`${where(name)} must be one of ${values.join(', ')} (got "${v}").`);
    return (values.includes(v) ? v : values[0]) as T[number];
  }
  function wholeNumber(name: SettingName, min: number, max: number): number {
    const n = Number(raw(name));
    if (!Number.isInteger(n) || n < min || n > max) problems.push(`${where(name)} must be a whole number from ${min.toString()} to ${max.toString()} (got "${raw(name)}").`);
    return n;
  }
  /** `a, b`: IP addresses (with `withPort`, also `ip:port` and `[v6]:port`), as Node's resolver takes them. */
  function addressList(name: SettingName, withPort: boolean): string[] {
    const items = raw(name).split(',').map((x) => x.trim()).filter((x) => x !== '');
    for (const item of items) {
      const m = withPort ? /^\[([^\]]+)\]:(\d{1,5})$|^([^:]+):(\d{1,5})$/.exec(item) : null;
      const ip = m === null ? item : (m[1] ?? m[3] ?? '');
      const port = m === null ? 1 : Number(m[2] ?? m[4]);
      if (isIP(ip) === 0 || port < 1 || port > 65535) {
        problems.push(`${where(name)} must be a comma-separated list of IP addresses${withPort ? ' (each optionally with :port)' : ''} (got "${item}").`);
      }
    }
    return items;
  }
  /** `--max-reserved-memory`: GiB (decimals allowed) as MiB; `auto`: the host's memory; 0: no bound. */
  function reservedMemory(): number {
    const value = raw('max-reserved-memory').trim();
    if (value === 'auto') return Math.floor(totalmem() / 1024 ** 2);
    const n = Number(value);
    if (value === '' || !Number.isFinite(n) || n < 0 || n > 1_048_576) {
      problems.push(`${where('max-reserved-memory')} must be a number of GiB from 0 to 1048576 (0: no bound), or auto (got "${value}").`);
      return 0;
    }
    return Math.round(n * 1024);
  }
  function githubApp(): Config['githubApp'] {
    const id = raw('github-app-id');
    const keyFile = raw('github-app-private-key-file');
    if (id === '' && keyFile === '') {
      if (raw('github-app-client-id') !== '' || raw('github-app-client-secret') !== '') {
        problems.push(`${where(raw('github-app-client-id') !== '' ? 'github-app-client-id' : 'github-app-client-secret')} needs the GitHub App itself too (--github-app-id and --github-app-private-key-file).`);
      }
      return null;
    }
    if (id === '' || keyFile === '') {
      problems.push(`${where(id === '' ? 'github-app-id' : 'github-app-private-key-file')} is needed too: a GitHub App takes both its id and its private key file.`);
      return null;
    }
    const clientId = raw('github-app-client-id');
    const clientSecret = raw('github-app-client-secret');
    if ((clientId === '') !== (clientSecret === '')) {
      problems.push(`${where(clientId === '' ? 'github-app-client-id' : 'github-app-client-secret')} is needed too: linking installations takes both the client id and the client secret of the GitHub App.`);
    }
    const webUrl = raw('github-web-url').replace(/\/+$/, '');
    if (!/^https?:\/\/[^/]/.test(webUrl)) problems.push(`${where('github-web-url')} must be an http(s):// URL, like https://github.com.`);
    return { id, privateKeyFile: resolve(cwd, keyFile), apiUrl: raw('github-api-url').replace(/\/+$/, ''), clientId, clientSecret, webUrl };
  }

  function smtp(): SmtpSettings | null {
    const url = raw('smtp-url');
    const from = raw('smtp-from');
    if (!/^[^\r\n]*<?[^@\s<>]+@[^@\s<>]+>?$/.test(from)) problems.push(`${where('smtp-from')} must be an e-mail address, optionally with a name: Name <address@example.com> (got "${from}").`);
    if (url === '') return null;
    const parsed = parseSmtpUrl(url, from);
    // Never echo the URL: it may carry the SMTP password.
    if (typeof parsed === 'string') problems.push(`${where('smtp-url')} ${parsed}.`);
    return typeof parsed === 'string' ? null : parsed;
  }

  function llm(): Config['llm'] {
    const baseUrl = raw('llm-base-url').replace(/\/+$/, '');
    const model = raw('llm-model');
    if (baseUrl === '') return null;
    if (!/^https?:\/\/[^/]/.test(baseUrl)) problems.push(`${where('llm-base-url')} must be an http(s):// URL, like https://api.openai.com/v1.`);
    if (model === '') problems.push(`${where('llm-model')} is needed with --llm-base-url: the model to ask.`);
    const apiKey = env['SLIPWAY_LLM_API_KEY'];
    return { baseUrl, model, apiKey: apiKey === undefined || apiKey === '' ? undefined : apiKey };
  }

  const dataDir = resolve(cwd, raw('data-dir'));
  const databaseUrl = raw('database-url') === '' ? join(dataDir, 'slipway.db') : raw('database-url');
  if (/^[a-z]+:\/\//.test(databaseUrl) && !isPostgresUrl(databaseUrl)) {
    problems.push(`${where('database-url')} must be a postgres:// URL or an SQLite file path (got a ${databaseUrl.split(':')[0] ?? ''} URL).`);
  }
  const secret = raw('secret-key-file');
  const gitBaseUrl = raw('git-base-url').replace(/\/+$/, '');
  if (!/^(https?|file):\/\//.test(gitBaseUrl)) problems.push(`${where('git-base-url')} must be an http(s):// or file:// URL.`);
  const appsDomain = raw('apps-domain').toLowerCase();
  if (!/^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$/.test(appsDomain)) problems.push(`${where('apps-domain')} must be a host name.`);
  const logLevel = raw('log-level');
  if (!LOG_LEVELS.includes(logLevel)) problems.push(`${where('log-level')} must be one of ${LOG_LEVELS.join(', ')}.`);
  const startingCredit = Number(raw('starting-credit'));
  if (!Number.isSafeInteger(startingCredit) || startingCredit < 0) {
    problems.push(`${where('starting-credit')} must be a whole number of minor units, 0 or more (got "${raw('starting-credit')}").`);
  }
  const currency = raw('currency').toUpperCase();
  if (!isCurrency(currency)) problems.push(`${where('currency')} must be an ISO 4217 currency code like USD (got "${raw('currency')}").`);

  function price(name: SettingName): bigint {
    const n = decimalToNanos(raw(name));
    if (n === null) problems.push(`${where(name)} must be a decimal number, 0 or more, with at most nine decimals, like 0.000463 (got "${raw(name)}").`);
    return n ?? 0n;
  }
  function billing(): BillingPolicy {
    const topupMin = wholeNumber('topup-min', 1, 1_000_000_000_000);
    const topupMax = wholeNumber('topup-max', 1, 1_000_000_000_000);
    if (topupMin > topupMax) problems.push(`${where('topup-min')} must not exceed ${where('topup-max')}.`);
    return {
      prices: { vcpuMinute: price('price-vcpu-minute'), gibMinute: price('price-gib-minute'), databaseGibMinute: price('price-database-gib-minute'), backupGibMonth: price('price-backup-gib-month') },
      graceMs: wholeNumber('billing-grace', 0, 365 * 86400) * 1000,
      topupMin,
      topupMax,
    };
  }
  function apiUrl(name: SettingName): string {
    const url = raw(name).replace(/\/+$/, '');
    if (!/^https?:\/\/[^/]+/.test(url)) problems.push(`${where(name)} must be an http(s):// URL (got "${raw(name)}").`);
    return url;
  }
  function stripe(): Config['stripe'] {
    const secretKey = raw('stripe-secret-key');
    const webhookSecret = raw('stripe-webhook-secret');
    if (secretKey === '') {
      if (webhookSecret !== '') problems.push(`${where('stripe-webhook-secret')} is set without ${where('stripe-secret-key')}.`);
      return null;
    }
    if (webhookSecret === '') problems.push(`${where('stripe-secret-key')} needs ${where('stripe-webhook-secret')}: without it no payment could ever be confirmed.`);
    return { secretKey, webhookSecret, apiUrl: apiUrl('stripe-api-url') };
  }
  function paystack(): Config['paystack'] {
    const secretKey = raw('paystack-secret-key');
    return secretKey === '' ? null : { secretKey, apiUrl: apiUrl('paystack-api-url') };
  }
  const adminEmail = raw('admin-email');
  if (!isEmailAddress(adminEmail)) problems.push(`${where('admin-email')} must be an e-mail address.`);

  function acme(routerListen: ListenAddress, tlsListen: ListenAddress): AcmeConfig | null {
    const directoryUrl = raw('acme-directory-url');
    if (directoryUrl === '') return null;
    let url: URL | undefined;
    try {
      url = new URL(directoryUrl);
    } catch {
      url = undefined;
    }
    if (url?.protocol !== 'https:') problems.push(`${where('acme-directory-url')} must be an https:// URL, like https://acme-v02.api.letsencrypt.org/directory (got "${directoryUrl}").`);
    const email = raw('acme-email');
    if (email !== '' && !/^[^@\s]+@[^@\s]+$/.test(email)) problems.push(`${where('acme-email')} must be an e-mail address (got "${email}").`);
    if (tlsListen.port === routerListen.port && tlsListen.port !== 0) {
      problems.push(`${where('router-tls-listen')} must be another port than the router's plain HTTP port ${routerListen.port.toString()}.`);
    }
    const caFile = raw('acme-ca-file');
    return { directoryUrl, email: email === '' ? null : email, caFile: caFile === '' ? null : resolve(cwd, caFile) };
  }

  /** `--database-shared-<type>`: the types provisioned on an operator's server, by its administrative URL. */
  function sharedServers(): DatabasePolicy['shared'] {
    const out: Partial<Record<DatabaseType, string>> = {};
    for (const type of DATABASE_TYPES) {
      const flag = `database-shared-${type}` as const;
      const url = raw(flag);
      if (url === '') continue;
      const problem = sharedUrlProblem(type, url);
      // never echo the URL: it carries the server's administrative password
      if (problem !== null) problems.push(`${where(flag)} ${problem}.`);
      else out[type] = url;
    }
    return out;
  }

  function publicUrl(): string {
    const value = raw('public-url').replace(/\/+$/, '');
    if (value === '') return '';
    let url: URL | undefined;
    try {
      url = new URL(value);
    } catch {
      url = undefined;
    }
    if ((url?.protocol !== 'https:' && url?.protocol !== 'http:') || url.search !== '' || url.hash !== '' || url.username !== '' || url.password !== '') {
      problems.push(`${where('public-url')} must be an http(s):// URL without query or credentials, like https://slipway.example.com (got "${value}").`);
    }
    return value;
  }

  function networkPool(): NetworkPool | null {
    if (raw('network-pool').trim() === '') return null;
    const pool = { cidr: raw('network-pool').trim(), size: Number(raw('network-size')) };
    const problem = poolProblem(pool);
    if (problem !== null) problems.push(`${where('network-pool')} with ${where('network-size')} ${problem}.`);
    return pool;
  }

  const routerListen = address('router-listen');
  function metricsListen(): ListenAddress | null {
    if (raw('metrics-listen').trim() === 'off') return null;
    const at = address('metrics-listen');
    const api = address('listen');
    if (at.port !== 0 && at.port === api.port) problems.push(`${where('metrics-listen')} must be another port than the API's ${api.port.toString()} (or off).`);
    return at;
  }
  function metricsToken(): string {
    const token = raw('metrics-token');
    if (token !== '' && (token.length < 32 || /\s/.test(token))) problems.push(`${where('metrics-token')} must be at least 32 characters without spaces (got ${token.length.toString()} characters).`);
    return token;
  }
  function refuseNetworks(pool: NetworkPool | null): string[] {
    const items = raw('api-refuse-networks').split(',').map((x) => x.trim()).filter((x) => x !== '');
    if (items.length === 1 && items[0] === 'none') return [];
    const out: string[] = [];
    for (const item of items) {
      if (item === 'workspaces') out.push(...(pool === null ? DOCKER_DEFAULT_BRIDGES : [pool.cidr]));
      else if (parseCidr(item) === null) problems.push(`${where('api-refuse-networks')} must be workspaces, none, or IPv4 CIDR blocks like 10.0.0.0/8 (got "${item}").`);
      else out.push(item);
    }
    return out;
  }
  const pool = networkPool();
  const logMaxBytes = wholeNumber('log-max-bytes-per-project', 0, MAX_LOG_BYTES);
  const routerTlsListen = address('router-tls-listen');
  const config: Config = {
    listen: address('listen'),
    dataDir,
    databaseUrl,
    routerListen,
    appsDomain,
    gitBaseUrl,
    secretKeyFile: secret === '' ? join(dataDir, 'secret.key') : isAbsolute(secret) ? secret : resolve(cwd, secret),
    logLevel,
    rateLimit: { rate: positive('rate-limit'), burst: positive('rate-limit-burst') },
    anonymousRateLimit: { rate: positive('anonymous-rate-limit'), burst: positive('anonymous-rate-limit-burst') },
    webhookRateLimit: { rate: positive('webhook-rate-limit'), burst: positive('webhook-rate-limit-burst') },
    adminEmail,
    startingCredit,
    currency,
    billing: billing(),
    notifyAllowPrivate: oneOf('notify-allow-private', ['yes', 'no'] as const) === 'yes',
    backupAllowPrivate: oneOf('backup-allow-private', ['yes', 'no'] as const) === 'yes',
    uptime: { failures: wholeNumber('uptime-failures', 1, 10), successes: wholeNumber('uptime-successes', 1, 10) },
    payments: oneOf('payments', ['off', 'sandbox'] as const),
    stripe: stripe(),
    paystack: paystack(),
    trustProxy: raw('trust-proxy').split(',').map((x) => x.trim()).filter((x) => x !== ''),
    githubWebhookSecret: raw('github-webhook-secret'),
    publicUrl: publicUrl(),
    smtp: smtp(),
    llm: llm(),
    analysis: {
      rateLimit: { rate: positive('analyze-rate-limit'), burst: positive('analyze-rate-limit-burst') },
      timeoutMs: wholeNumber('analyze-timeout-ms', 100, 600_000),
      workers: wholeNumber('analyze-workers', 1, 64),
      queue: wholeNumber('analyze-queue', 0, 10_000),
    },
    invitationTokenInResponse: oneOf('invitation-token-in-response', ['yes', 'no'] as const) === 'yes',
    domainVerification: oneOf('domain-verification', ['dns', 'off'] as const),
    dnsServers: addressList('dns-servers', true),
    publicAddresses: addressList('public-addresses', false),
    maxDomainsPerProject: wholeNumber('max-domains-per-project', 1, 10_000),
    engine: oneOf('engine', ['docker', 'none'] as const),
    router: oneOf('router', ['auto', 'nginx', 'node'] as const),
    routerTlsListen,
    acme: acme(routerListen, routerTlsListen),
    buildConcurrency: wholeNumber('build-concurrency', 1, 32),
    healthTimeoutMs: wholeNumber('health-timeout', 1, 3600) * 1000,
    shutdownGraceMs: wholeNumber('shutdown-grace', 0, 3600) * 1000,
    routerOnExit: oneOf('router-on-exit', ['keep', 'stop'] as const),
    upstreamMode: oneOf('upstream-mode', ['published', 'network'] as const),
    keepImages: wholeNumber('keep-images', 1, 1000),
    logMaxBytesPerProject: logMaxBytes === 0 ? null : logMaxBytes,
    logRateLimit: wholeNumber('log-rate-limit', 1, 1_000_000),
    pidsLimit: wholeNumber('pids-limit', 16, 1_048_576),
    limits: {
      maxWorkspacesPerUser: wholeNumber('max-workspaces-per-user', 0, 1_000_000),
      maxProjectsPerWorkspace: wholeNumber('max-projects-per-workspace', 0, 1_000_000),
      maxDatabasesPerWorkspace: wholeNumber('max-databases-per-workspace', 0, 1_000_000),
      maxReservedMemoryMb: reservedMemory(),
    },
    networkPool: pool,
    metricsListen: metricsListen(),
    metricsToken: metricsToken(),
    refuseNetworks: refuseNetworks(pool),
    builder: oneOf('builder', ['buildkit', 'classic'] as const),
    githubApp: githubApp(),
    databases: {
      images: { postgresql: raw('database-image-postgresql'), mysql: raw('database-image-mysql'), redis: raw('database-image-redis'), mongo: raw('database-image-mongo') },
      publish: oneOf('database-publish', ['loopback', 'all', 'off'] as const),
      publicHost: raw('database-public-host'),
      memoryMb: wholeNumber('database-memory', 32, 1_048_576),
      readyTimeoutMs: wholeNumber('database-ready-timeout', 1, 3600) * 1000,
      shared: sharedServers(),
    },
    templateCatalog: raw('template-catalog') === '' ? '' : resolve(cwd, raw('template-catalog')),
    baseImages: {
      node: raw('base-image-node'),
      go: raw('base-image-go'),
      python: raw('base-image-python'),
      static: raw('base-image-static'),
    },
  };
  if (problems.length > 0) throw new ConfigError(problems);
  return config;
}
