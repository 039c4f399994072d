// Which test files belong to which tier when their folder does not say it (docs/testing.md), read by
// vitest.config.ts and test/sequencer.ts.

/**
 * Tests outside src/ that need no PostgreSQL, Docker, nginx, Git or child process (file checks and
 * clients against in-process fake servers): they run in the unit tier and nowhere else.
 */
export const UNIT_ELSEWHERE = [
  'test/medium/architecture.test.ts',
  'test/medium/migrations.test.ts',
  'test/medium/llm-analyzer.test.ts',
  'test/medium/github-app.test.ts',
  'test/medium/notify-channels.test.ts',
  'test/medium/payment-gateways.test.ts',
  'test/medium/backup-destinations.s3.test.ts',
  'test/e2e/decisions.test.ts',
  'test/e2e/docs.test.ts',
];

/** The files that build images and run containers on the Docker Engine (the engine, the runtime, `serve --engine docker`). */
export const DOCKER = [
  'test/medium/runtime.conformance.test.ts',
  'test/medium/runtime-task.test.ts',
  'test/e2e/billing-crash.test.ts',
  'test/e2e/billing-engine.test.ts',
  'test/e2e/control-plane-ports.test.ts',
  'test/e2e/crash-alerts.test.ts',
  'test/e2e/crash.test.ts',
  'test/e2e/backups-engine.test.ts',
  'test/e2e/backups-shared.test.ts',
  'test/e2e/databases-engine.test.ts',
  'test/e2e/deploy-env.test.ts',
  'test/e2e/deploy-reconcile.test.ts',
  'test/e2e/deploy-webhook.test.ts',
  'test/e2e/deploy.postgres.test.ts',
  'test/e2e/deploy.sqlite.test.ts',
  'test/e2e/domain-routing.test.ts',
  'test/e2e/github-app-deploy.test.ts',
  'test/e2e/image-retention.test.ts',
  'test/e2e/installations.test.ts',
  'test/e2e/log-collection.test.ts',
  'test/e2e/logs-deployed.test.ts',
  'test/e2e/many-workspaces.test.ts',
  'test/e2e/resource-metrics.test.ts',
  'test/e2e/standby.test.ts',
  'test/e2e/templates-engine.test.ts',
  'test/e2e/tls.test.ts',
  'test/e2e/upstream-network.test.ts',
  'test/e2e/uptime-engine.test.ts',
];
