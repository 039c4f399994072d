// The order in which the run's workers take the test files (docs/testing.md#workers):
// - the longest first, so that no long file starts last and keeps one worker busy while the others
//   are idle. A file vitest has timed before (its cache, in node_modules/.vite) is placed by that
//   time; on a clean clone, which has no cache, by the time measured here; files never timed come
//   after these, in vitest's own order;
// - Docker files and the others in turn, so that the workers do not all build images and start
//   containers at once: the Docker suites wait on the engine, which shares the same 2 cores.
import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { DOCKER } from './tiers.js';

/**
 * Seconds each file of 3 s or more took in a clean-clone `make test` on an idle 2-core machine, two
 * workers (2026-12-07, bench/results/test-tiers-2026-12-07.json). Files under 3 s come after these.
 */
const MEASURED: Record<string, number> = {
  'test/e2e/log-collection.test.ts': 81,
  'test/e2e/many-workspaces.test.ts': 79,
  'test/medium/runtime.conformance.test.ts': 64,
  'test/e2e/cli-crash.test.ts': 49,
  'test/e2e/crash.test.ts': 43,
  'test/e2e/databases-engine.test.ts': 40,
  'test/e2e/deploy.postgres.test.ts': 39,
  'test/e2e/standby.test.ts': 36,
  'test/e2e/cli-bootstrap.test.ts': 35,
  'test/e2e/deploy.sqlite.test.ts': 32,
  'test/e2e/logs.test.ts': 32,
  'test/e2e/installations.test.ts': 27,
  'test/e2e/crash-alerts.test.ts': 27,
  'test/e2e/cli-payments.test.ts': 27,
  'test/medium/ledger.property.test.ts': 24,
  'test/e2e/cli-config.test.ts': 19,
  'test/e2e/templates-engine.test.ts': 17,
  'test/medium/router.conformance.test.ts': 14,
  'test/e2e/image-retention.test.ts': 12,
  'test/e2e/billing-engine.test.ts': 12,
  'test/e2e/deploy-webhook.test.ts': 12,
  'test/e2e/permissions.test.ts': 12,
  'test/e2e/upstream-network.test.ts': 11,
  'test/e2e/deploy-reconcile.test.ts': 11,
  'test/e2e/live-logs.test.ts': 10,
  'test/e2e/billing.test.ts': 10,
  'test/e2e/hardening.test.ts': 8,
  'test/e2e/github-app-deploy.test.ts': 7,
  'test/e2e/tls.test.ts': 7,
  'test/e2e/access-cache.test.ts': 7,
  'test/e2e/isolation.test.ts': 7,
  'test/e2e/domain-routing.test.ts': 6,
  'test/e2e/github-installations.test.ts': 6,
  'test/e2e/invitations.test.ts': 6,
  'test/e2e/logs-deployed.test.ts': 5,
  'test/e2e/deploy-env.test.ts': 5,
  'test/medium/store.conformance.test.ts': 5,
  'test/e2e/errors.test.ts': 5,
  'test/e2e/databases-shared.test.ts': 5,
  'test/e2e/webhooks.test.ts': 4,
  'test/e2e/members.test.ts': 4,
  'test/e2e/uptime-checks.test.ts': 4,
  'test/e2e/billing-crash.test.ts': 4,
  'test/e2e/databases.test.ts': 3,
  'test/e2e/logs-analyze.test.ts': 3,
  'test/medium/git-source.test.ts': 3,
  'test/medium/leadership.test.ts': 3,
  'test/e2e/resource-metrics.test.ts': 3,
  'test/medium/router.nginx-logs.test.ts': 3,
  'test/medium/acme.test.ts': 3,
};

export default class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const ordered = await super.sort(files);
    const root = this.ctx.config.root;
    const seconds = (spec: TestSpecification): number => {
      const path = relative(root, spec.moduleId);
      const cached = this.ctx.cache.getFileTestResults(`${spec.project.name}:${path}`)?.duration;
      return cached === undefined ? (MEASURED[path] ?? 0) : cached / 1000;
    };
    const longest = ordered
      .map((spec, index) => ({ spec, index, seconds: seconds(spec) }))
      .sort((a, b) => b.seconds - a.seconds || a.index - b.index)
      .map(({ spec }) => spec);
    const docker = longest.filter((spec) => DOCKER.includes(relative(root, spec.moduleId)));
    const others = longest.filter((spec) => !docker.includes(spec));
    const turns: TestSpecification[] = [];
    while (docker.length > 0 || others.length > 0) {
      const d = docker.shift();
      const o = others.shift();
      if (d !== undefined) turns.push(d);
      if (o !== undefined) turns.push(o);
    }
    // vitest runs sequence.groupOrder groups one after the other: keep them in that order
    return turns.sort((a, b) => a.project.config.sequence.groupOrder - b.project.config.sequence.groupOrder);
  }
}
