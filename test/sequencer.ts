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
 * Seconds the slowest files took one at a time on a 2-core machine (bench/results/test-tiers-2026-11-27.json,
 * `before`); the four cli-* parts are cli.test.ts's 162 s shared out by their process starts (estimates).
 */
const MEASURED: Record<string, number> = {
  'test/e2e/many-workspaces.test.ts': 62,
  'test/e2e/log-collection.test.ts': 58,
  'test/medium/runtime.conformance.test.ts': 58,
  'test/e2e/databases-engine.test.ts': 54,
  'test/e2e/cli-crash.test.ts': 50,
  'test/e2e/crash.test.ts': 42,
  'test/e2e/cli-bootstrap.test.ts': 40,
  'test/e2e/standby.test.ts': 40,
  'test/e2e/cli-payments.test.ts': 35,
  'test/e2e/cli-config.test.ts': 35,
  'test/e2e/deploy.postgres.test.ts': 33,
  'test/e2e/logs.test.ts': 30,
  'test/e2e/deploy.sqlite.test.ts': 29,
  'test/e2e/installations.test.ts': 26,
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
