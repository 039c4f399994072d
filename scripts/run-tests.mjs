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

const out = 'test-results/vitest.json';
mkdirSync('test-results', { recursive: true });
rmSync(out, { force: true });
const args = ['vitest', 'run', '--reporter=default', '--reporter=json', `--outputFile.json=${out}`, ...process.argv.slice(2)];
const run = spawnSync('npx', args, { stdio: 'inherit' });

let passed = 0;
let failed = 0;
let skipped = 0;
try {
  const report = JSON.parse(readFileSync(out, 'utf8'));
  passed = report.numPassedTests;
  failed = report.numFailedTests;
  skipped = report.numPendingTests + report.numTodoTests;
  // A file that fails to load or whose hooks fail has no failed test, but it failed.
  for (const file of report.testResults) {
    if (file.status === 'failed' && !file.assertionResults.some((a) => a.status === 'failed')) failed += 1;
  }
} catch {
  failed = Math.max(failed, 1);
}
if (run.status !== 0 && failed === 0) failed = 1;
console.log(`${passed} passed, ${failed} failed${skipped > 0 ? `, ${skipped} skipped` : ''}`);
process.exit(failed > 0 ? 1 : 0);
