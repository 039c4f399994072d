// Runs once before the suite: the PostgreSQL URL must answer, or every postgres case would fail
// one by one with a less clear message. `make test` provides it (scripts/ensure-postgres.sh).
// Then the run's migrated store templates (stores.ts), which every test server is copied from.
import pg from 'pg';
import { makeStoreTemplates } from './factories/stores.js';

export default async function setup(): Promise<(() => Promise<void>) | undefined> {
  const url = process.env['SLIPWAY_TEST_PG_URL'] ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  process.env['SLIPWAY_TEST_PG_URL'] = url;
  const client = new pg.Client({ connectionString: url });
  try {
    await client.connect();
    await client.query('select 1');
  } catch (err) {
    throw new Error(`PostgreSQL for the tests does not answer at ${url} (run \`make test\`, which starts it): ${String(err)}`);
  } finally {
    await client.end().catch(() => undefined);
  }
  // the store and e2e tiers both name this setup: the first run makes the templates for both
  if (process.env['SLIPWAY_TEST_PG_TEMPLATE'] !== undefined) return undefined;
  return makeStoreTemplates();
}
