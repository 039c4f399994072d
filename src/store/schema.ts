// One tables file per capability, named after its module (the wallet's and payments' tables: tables/billing.ts, as modules/billing/); a new capability adds one file here and one line to DB.
import type { BackupsTables } from './tables/backups.js';
import type { BillingTables } from './tables/billing.js';
import type { DatabasesTables } from './tables/databases.js';
import type { DeploymentsTables } from './tables/deployments.js';
import type { DomainsTables } from './tables/domains.js';
import type { EnvTables } from './tables/env.js';
import type { GithubTables } from './tables/github.js';
import type { MetricsTables } from './tables/metrics.js';
import type { ProjectsTables } from './tables/projects.js';
import type { SystemTables } from './tables/system.js';
import type { TenancyTables } from './tables/tenancy.js';
import type { UptimeTables } from './tables/uptime.js';
import type { WebhooksTables } from './tables/webhooks.js';

/**
 * The tables as the query layer sees them. Ids are UUIDv7 text, timestamps RFC 3339 text
 * (sortable, and identical on SQLite and PostgreSQL), booleans 0/1 integers, JSON as text:
 * one representation on both dialects keeps the repositories free of per-dialect branches.
 */
export interface DB
  extends TenancyTables,
    ProjectsTables,
    EnvTables,
    DomainsTables,
    DeploymentsTables,
    DatabasesTables,
    BackupsTables,
    BillingTables,
    UptimeTables,
    MetricsTables,
    GithubTables,
    WebhooksTables,
    SystemTables {}

export type * from './tables/backups.js';
export type * from './tables/billing.js';
export type * from './tables/databases.js';
export type * from './tables/deployments.js';
export type * from './tables/domains.js';
export type * from './tables/env.js';
export type * from './tables/github.js';
export type * from './tables/metrics.js';
export type * from './tables/projects.js';
export type * from './tables/system.js';
export type * from './tables/tenancy.js';
export type * from './tables/uptime.js';
export type * from './tables/webhooks.js';
