import type { TargetPolicy } from '../../adapters/notify/ssrf.js';

/** When a monitor's status changes (`--uptime-failures`, `--uptime-successes`). */
export interface UptimeRules {
  /** consecutive failed checks before `down` (the second one is the confirming re-check) */
  failures: number;
  /** consecutive successful checks before `up` again */
  successes: number;
  /** how soon a check that would change the status is confirmed, instead of waiting the interval */
  recheckMs: number;
}

export const DEFAULT_UPTIME_RULES: UptimeRules = { failures: 2, successes: 2, recheckMs: 2_000 };

/** Where chat webhooks may point (`--notify-allow-private`). */
export type NotifyPolicy = Pick<TargetPolicy, 'allowPrivate'>;
