import { decimalToNanos, type Prices } from '../../domain/money.js';

/** How usage is priced and wallets are run on this installation (`--price-*`, `--billing-*`, `--topup-*`; docs/billing.md). */
export interface BillingPolicy {
  prices: Prices;
  /** how long work keeps running once the available balance is 0, before it is suspended */
  graceMs: number;
  /** bounds of one top-up, minor units */
  topupMin: number;
  topupMax: number;
}

/** Near the hosted platforms' list prices: 0.000463 per vCPU-minute, 0.000231 per GiB-minute. */
export const DEFAULT_PRICES = { vcpuMinute: '0.000463', gibMinute: '0.000231', databaseGibMinute: '0.000231', backupGibMonth: '0.023' } as const;

const nanos = (text: string): bigint => {
  const n = decimalToNanos(text);
  if (n === null) throw new Error(`bad price ${text}`);
  return n;
};

export const DEFAULT_BILLING_POLICY: BillingPolicy = {
  prices: { vcpuMinute: nanos(DEFAULT_PRICES.vcpuMinute), gibMinute: nanos(DEFAULT_PRICES.gibMinute), databaseGibMinute: nanos(DEFAULT_PRICES.databaseGibMinute), backupGibMonth: nanos(DEFAULT_PRICES.backupGibMonth) },
  graceMs: 24 * 3_600_000,
  topupMin: 100,
  topupMax: 1_000_000,
};

/** The configured policy over the defaults (`billing` absent: the defaults). */
export const billingPolicy = (settings: { billing?: Partial<BillingPolicy> | undefined }): BillingPolicy => ({ ...DEFAULT_BILLING_POLICY, ...settings.billing });
