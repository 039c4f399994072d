import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';
import LongestFirst from './test/sequencer.js';
import { UNIT_ELSEWHERE } from './test/tiers.js';

// The tiers (docs/testing.md): `unit` needs neither PostgreSQL nor Docker and is run at every edit;
// `store` (test/medium) runs on real SQLite and PostgreSQL (and Docker for the runtime conformance);
// `e2e` runs the whole service with Docker, nginx and Git. `make test` runs the three at once.
const SERVICES = ['test/global-setup.ts', 'test/factories/images.ts'];

// Files at once: one per core (docs/testing.md#workers). On a 2-core machine, 1 worker (vitest's
// default there) took 19 minutes; 3 starved the Docker suites and the launcher's processes (the
// 100-workspace deploy and cli-* timed out); 2 overlaps the suites' waits on Docker, processes and
// sleeps without that. SLIPWAY_TEST_WORKERS overrides it (the timings were taken that way).
const workers = Number(process.env['SLIPWAY_TEST_WORKERS'] ?? Math.max(2, availableParallelism()));

// Files scripts/run-tests.mjs runs on their own after the rest (comma-separated): the ones that
// measure the control plane's own latency, which a second file on the other core would disturb.
const later = (process.env['SLIPWAY_TEST_EXCLUDE'] ?? '').split(',').filter((f) => f !== '');

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // A worker keeps its modules from one file to the next (docs/testing.md#workers): the API's
    // modules are imported, and its schemas compiled, once per worker instead of once per file
    // (the API files' CPU time halves). So a test file leaves nothing behind: its servers,
    // processes, timers and spies end in its own afterAll/finally.
    isolate: false,
    // Each file uses its own SQLite file and its own PostgreSQL database, so files run in parallel.
    fileParallelism: true,
    maxWorkers: workers,
    // the longest files first, across the tiers (test/sequencer.ts)
    sequence: { sequencer: LongestFirst },
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['src/**/*.test.ts', ...UNIT_ELSEWHERE],
          // no global setup: no PostgreSQL check, no base image. Threads that keep their modules
          // between files: the tier's CPU time falls from about 40 s to 15 s (docs/testing.md#unit),
          // so a unit test leaves no global state behind (timers, environment, module state).
          pool: 'threads',
          isolate: false,
        },
      },
      {
        extends: true,
        // the second builds the local busybox base image once and removes every labelled test resource at the end
        test: { name: 'store', include: ['test/medium/**/*.test.ts'], exclude: UNIT_ELSEWHERE, globalSetup: SERVICES },
      },
      {
        extends: true,
        test: { name: 'e2e', include: ['test/e2e/**/*.test.ts'], exclude: [...UNIT_ELSEWHERE, ...later], globalSetup: SERVICES },
      },
    ],
  },
});
