import type { Kysely, Migration, MigrationProvider } from 'kysely';
import type { Dialect } from '../dialects.js';
import * as m20261121T000000 from './2026-11-21T000000-tenancy.js';
import * as m20261121T010000 from './2026-11-21T010000-projects.js';
import * as m20261122T000000 from './2026-11-22T000000-deploy-queue.js';
import * as m20261123T000000 from './2026-11-23T000000-leases.js';
import * as m20261124T000000 from './2026-11-24T000000-restart-requests.js';
import * as m20261125T010000 from './2026-11-25T010000-github-installations.js';
import * as m20261125T020000 from './2026-11-25T020000-webhook-secrets.js';
import * as m20261125T030000 from './2026-11-25T030000-hosts.js';
import * as m20261125T090000 from './2026-11-25T090000-workspace-creators.js';
import * as m20261126T000000 from './2026-11-26T000000-runtime-logs.js';
import * as m20261127T000000 from './2026-11-27T000000-databases.js';
import * as m20261128T000000 from './2026-11-28T000000-templates.js';
import * as m20261129T000000 from './2026-11-29T000000-billing.js';
import * as m20261130T000000 from './2026-11-30T000000-uptime.js';
import * as m20261201T000000 from './2026-12-01T000000-consent.js';
import * as m20261207T000000 from './2026-12-07T000000-backups.js';
import * as m20261207T120000 from './2026-12-07T120000-restores.js';

interface DialectMigration {
  up(db: Kysely<unknown>, dialect: Dialect): Promise<void>;
}

/**
 * Ordered, append-only. Static imports (no FileMigrationProvider) so a bundled build still finds
 * them; the dialect is passed in because a migration cannot detect it (kysely #1191).
 */
const ALL: Record<string, DialectMigration> = {
  '2026-11-21T000000-tenancy': m20261121T000000,
  '2026-11-21T010000-projects': m20261121T010000,
  '2026-11-22T000000-deploy-queue': m20261122T000000,
  '2026-11-23T000000-leases': m20261123T000000,
  '2026-11-24T000000-restart-requests': m20261124T000000,
  '2026-11-25T010000-github-installations': m20261125T010000,
  '2026-11-25T020000-webhook-secrets': m20261125T020000,
  '2026-11-25T030000-hosts': m20261125T030000,
  '2026-11-25T090000-workspace-creators': m20261125T090000,
  '2026-11-26T000000-runtime-logs': m20261126T000000,
  '2026-11-27T000000-databases': m20261127T000000,
  '2026-11-28T000000-templates': m20261128T000000,
  '2026-11-29T000000-billing': m20261129T000000,
  '2026-11-30T000000-uptime': m20261130T000000,
  '2026-12-01T000000-consent': m20261201T000000,
  '2026-12-07T000000-backups': m20261207T000000,
  '2026-12-07T120000-restores': m20261207T120000,
};

export function migrationProvider(dialect: Dialect): MigrationProvider {
  return {
    getMigrations() {
      const out: Record<string, Migration> = {};
      for (const [name, m] of Object.entries(ALL)) {
        out[name] = { up: (db) => m.up(db, dialect) };
      }
      return Promise.resolve(out);
    },
  };
}
