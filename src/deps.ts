import type { Clock, IdSource, Random } from './domain/clock.js';
import type { SecretBox } from './secrets/secret-box.js';
import type { Store } from './store/db.js';

/** Platform-wide settings the services need (from the configuration). */
export interface Platform {
  /** apps get `<project>-<workspace>.<appsDomain>` */
  appsDomain: string;
  /** the port the router serves apps on, for the URLs shown to users */
  routerPort: number;
  /** credit of a new workspace's wallet, in minor units */
  startingCredit: number;
  currency: string;
}

/** What every service is built from, injected by the composition root (or a test). */
export interface Deps {
  store: Store;
  clock: Clock;
  random: Random;
  ids: IdSource;
  secrets: SecretBox;
  platform: Platform;
}
