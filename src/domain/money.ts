/**
 * Money as Slipway keeps it (docs/billing.md#units): micro-units of the currency (1 USD =
 * 1,000,000), integers, so per-minute usage loses nothing to rounding. The API shows minor units
 * (cents) as the spec says; amounts of the ledger may then carry up to four decimals.
 *
 * Usage rates are computed in a finer unit still, 1/1,024,000,000 of a micro-unit ("q"), in which
 * every rate is an integer: vCPU and GiB come in thousandths (the projects' sizes have at most
 * three decimals), prices in nano-units (at most nine decimals), and a database's MiB is 1/1024
 * GiB. What is below one micro-unit is carried from minute to minute, never dropped.
 */

/** q per micro-unit */
export const Q_PER_MICRO = 1_024_000_000n;

const MICROS_PER_MAJOR = 1_000_000;

/** The ISO 4217 codes this Node knows, upper case. */
const KNOWN = new Set(Intl.supportedValuesOf('currency').map((c) => c.toUpperCase()));

export const isCurrency = (code: string): boolean => /^[A-Z]{3}$/.test(code) && KNOWN.has(code);

/** by currency: an Intl.NumberFormat costs ICU work each time it is made */
const digitsOf = new Map<string, number>();

/** Digits after the point of the currency's minor unit: 2 for USD, 0 for JPY. */
export function minorDigits(currency: string): number {
  let digits = digitsOf.get(currency);
  if (digits === undefined) {
    digits = new Intl.NumberFormat('en', { style: 'currency', currency }).resolvedOptions().maximumFractionDigits ?? 2;
    // only the codes this Node knows are kept: the map stays as small as ISO 4217
    if (KNOWN.has(currency)) digitsOf.set(currency, digits);
  }
  return digits;
}

/** micro-units in one minor unit: 10,000 for USD (cents), 1,000,000 for JPY */
export const microsPerMinor = (currency: string): number => MICROS_PER_MAJOR / 10 ** minorDigits(currency);

/** minor units in one major unit: 100 for USD */
export const minorPerMajor = (currency: string): number => 10 ** minorDigits(currency);

/** A balance shown in whole minor units: rounded down, so nobody sees credit they do not have. */
export const floorMinor = (micros: number, currency: string): number => Math.floor(micros / microsPerMinor(currency));

/** An amount of the ledger in minor units, exact (up to four decimals for USD). */
export const exactMinor = (micros: number, currency: string): number => micros / microsPerMinor(currency);

/**
 * A price or amount written as a decimal ("0.000463") in nano-units (463000), exactly; null when
 * it is not a non-negative decimal with at most nine decimals.
 */
export function decimalToNanos(text: string): bigint | null {
  const m = /^(\d{1,12})(?:\.(\d{1,9}))?$/.exec(text.trim());
  if (m === null) return null;
  return BigInt(m[1] ?? '0') * 1_000_000_000n + BigInt((m[2] ?? '').padEnd(9, '0'));
}

/**
 * A decimal written as text ("12.50", "1e-7", "1.5e+3"), times 10^`decimals`, exactly: null when
 * that is not a whole number (more decimals than `decimals`, trailing zeros aside) or the text is
 * not a plain decimal. No floating point is involved.
 */
export function scaledDecimal(text: string, decimals: number): bigint | null {
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d{1,4}))?$/.exec(text);
  if (m === null) return null;
  const fraction = m[3] ?? '';
  const digits = (m[2] ?? '') + fraction;
  // text = digits × 10^(exponent − fraction's length)
  const shift = Number(m[4] ?? '0') - fraction.length + decimals;
  let n: bigint;
  if (shift >= 0) {
    n = BigInt(digits) * 10n ** BigInt(shift);
  } else {
    const keep = digits.length + shift;
    if (/[^0]/.test(digits.slice(Math.max(0, keep)))) return null;
    n = keep <= 0 ? 0n : BigInt(digits.slice(0, keep));
  }
  return m[1] === '-' ? -n : n;
}

/**
 * A JSON number times 10^`decimals`, exactly, or null (see scaledDecimal). The number is read in
 * its shortest exact decimal form (what `String()` gives, the digits that name this double and no
 * other), so 0.999999999, 1e-7 or 1.005 keep every decimal they were written with; only digits
 * past a double's precision (beyond 15 significant digits) were already gone when the JSON was
 * parsed.
 */
export const scaledNumber = (value: number, decimals: number): bigint | null => (Number.isFinite(value) ? scaledDecimal(String(value), decimals) : null);

/** "0.5" (vCPU or GiB with at most three decimals) → 500 thousandths */
export const thousandths = (text: string): number => Math.round(Number(text) * 1000);

/** Prices of one minute of use, in nano-units of the currency. */
export interface Prices {
  vcpuMinute: bigint;
  gibMinute: bigint;
  databaseGibMinute: bigint;
  /** one GiB of stored backup artifacts for a month of 30 days (docs/backups.md#metering) */
  backupGibMonth: bigint;
}

/** What a running resource is charged for, per minute. */
export type Meterable =
  | { kind: 'project' | 'template'; replicas: number; vcpuMilli: number; ramMilli: number }
  | { kind: 'database'; memoryMb: number }
  | { kind: 'backups'; storedMib: number };

/** The minutes of the 30-day month a storage price is quoted for. */
const MONTH_MINUTES = 30n * 24n * 60n;

/** The charge of one minute of `r`, in q (see the top of this file). */
export function rateQ(r: Meterable, prices: Prices): bigint {
  if (r.kind === 'database') return BigInt(r.memoryMb) * prices.databaseGibMinute * 1000n;
  // MiB × nanos per GiB-month: a MiB is 1/1024 GiB and a q is 1/1,024,000,000 micro (1/1,024,000 nano)
  if (r.kind === 'backups') return (BigInt(r.storedMib) * prices.backupGibMonth * 1000n) / MONTH_MINUTES;
  return BigInt(r.replicas) * (BigInt(r.vcpuMilli) * prices.vcpuMinute + BigInt(r.ramMilli) * prices.gibMinute) * 1024n;
}

/** `minutes` of a resource at `rate` q per minute, with the carry from before: whole micro-units charged, and the new carry. */
export function charge(minutes: number, rate: bigint, carry: bigint): { micros: number; carry: bigint } {
  const total = BigInt(minutes) * rate + carry;
  return { micros: Number(total / Q_PER_MICRO), carry: total % Q_PER_MICRO };
}
