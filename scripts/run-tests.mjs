#!/usr/bin/env node
// Runs the vitest suite (or the tiers named by `--project unit|store|e2e`) and closes with the plain
// line CI reads: "N passed, N failed".
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';

// The service URLs `make test` wrote (scripts/ensure-postgres.sh, ensure-shared-servers.sh), so that
// `npm run test:store` works after one `make test`; a variable already set wins.
if (existsSync('.test-env')) {
  for (const line of readFileSync('.test-env', 'utf8').split('\n')) {
    const eq = line.indexOf('=');
    if (eq > 0 && !line.startsWith('#')) process.env[line.slice(0, eq)] ??= line.slice(eq + 1);
  }
}

// Files that measure the control plane's own latency (/healthz within 50 ms while an attack is
// analysed): on a 2-core machine a second test file beside them takes the core they measure, so the
// whole run ends with them, alone (docs/testing.md#workers). Named files or a tier: one run as given.
const ALONE = ['test/e2e/logs-analyze-abuse.test.ts'];

mkdirSync('test-results', { recursive: true });

/** One vitest run; its JSON report's counts (a file that fails to load or whose hooks fail counts as failed). */
function vitest(name, extra, env = {}) {
  const out = `test-results/vitest${name}.json`;
  rmSync(out, { force: true });
  const run = spawnSync('npx', ['vitest', 'run', '--reporter=default', '--reporter=json', `--outputFile.json=${out}`, ...extra], { stdio: 'inherit', env: { ...process.env, ...env } });
  let passed = 0;
  let failed = 0;
  let skipped = 0;
  try {
    const report = JSON.parse(readFileSync(out, 'utf8'));
    passed = report.numPassedTests;
    failed = report.numFailedTests;
    skipped = report.numPendingTests + report.numTodoTests;
    for (const file of report.testResults) {
      if (file.status === 'failed' && !file.assertionResults.some((a) => a.status === 'failed')) failed += 1;
    }
  } catch {
    failed = Math.max(failed, 1);
  }
  if (run.status !== 0 && failed === 0) failed = 1;
  return { passed, failed, skipped };
}

const given = process.argv.slice(2);
const runs =
  given.length > 0
    ? [vitest('', given)]
    : [vitest('', [], { SLIPWAY_TEST_EXCLUDE: ALONE.join(',') }), vitest('-alone', [...ALONE, '--maxWorkers=1'])];
const passed = runs.reduce((n, r) => n + r.passed, 0);
const failed = runs.reduce((n, r) => n + r.failed, 0);
const skipped = runs.reduce((n, r) => n + r.skipped, 0);
console.log(`${passed} passed, ${failed} failed${skipped > 0 ? `, ${skipped} skipped` : ''}`);
process.exit(failed > 0 ? 1 : 0);
