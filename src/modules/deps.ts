import type { BillingPolicy } from './billing/policy.js';
import type { Clock, IdSource, Random } from '../domain/clock.js';
import type { LogStore } from '../domain/logs.js';
import type { Mailer } from '../adapters/notify/mailer.js';
import type { SecretBox } from '../adapters/secrets/secret-box.js';
import type { Store } from '../store/db.js';

// What the leader-side workers (the deploy engine, the billing worker and meter, the uptime
// checker, notifier and crash alerts) are still built from, until each names what it uses
// (issue 27, point 3). The API-side services already take their own repositories, sources and
// policy; nothing new takes this bag.

/** The settings the leader-side workers read (from the configuration). */
export interface Platform {
  /** apps get `<project>-<workspace>.<appsDomain>` */
  appsDomain: string;
  /** the port the router serves apps on, for the URLs shown to users */
  routerPort: number;
  /** prices, grace period, top-up bounds (DEFAULT_BILLING_POLICY where absent) */
  billing?: Partial<BillingPolicy>;
}

/** What the leader-side workers are built from, injected by the composition root (or a test). */
export interface Deps {
  store: Store;
  clock: Clock;
  random: Random;
  ids: IdSource;
  secrets: SecretBox;
  platform: Platform;
  /** the apps' runtime logs (docs/logs.md); closed after the store's users stop */
  logs: LogStore;
  /** outgoing e-mail (`--smtp-url`); absent: Slipway sends none */
  mailer?: Mailer | undefined;
}
