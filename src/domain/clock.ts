import { randomBytes } from 'node:crypto';

/** Time, randomness and ids come from here so that tests can make them exact. */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

export interface Random {
  bytes(n: number): Buffer;
}

export const systemRandom: Random = { bytes: (n) => randomBytes(n) };

/** RFC 3339 UTC with milliseconds, the one timestamp format of the API and the store. */
export const iso = (d: Date): string => d.toISOString();

export const addDays = (d: Date, days: number): Date => new Date(d.getTime() + days * 86_400_000);

/** UUIDv7 (RFC 9562): 48-bit Unix milliseconds, version, 74 random bits; sorts by creation time. */
export function uuidv7(clock: Clock, random: Random): string {
  return format(BigInt(clock.now().getTime()), randomTail(random));
}

/** A random UUID (version 4, RFC 9562 §5.4) from `random`. */
export function uuidv4(random: Random): string {
  const b = Buffer.from(random.bytes(16));
  b[6] = ((b[6] ?? 0) & 0x0f) | 0x40;
  b[8] = ((b[8] ?? 0) & 0x3f) | 0x80;
  const hex = b.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

export interface IdSource {
  id(): string;
}

const TAIL_BITS = 74n;
const TAIL_MAX = (1n << TAIL_BITS) - 1n;

/**
 * UUIDv7 ids that strictly increase within one source (RFC 9562 §6.2, method 3): an id made in
 * the same millisecond as the previous one (or after the clock stepped back) is the previous one
 * plus a random step below 2^32, so rows made in one millisecond still sort by creation.
 */
export const idSource = (clock: Clock, random: Random): IdSource => {
  let lastMs = -1n;
  let lastTail = 0n;
  return {
    id: () => {
      const ms = BigInt(clock.now().getTime());
      if (ms > lastMs) {
        lastMs = ms;
        lastTail = randomTail(random);
      } else {
        lastTail += 1n + BigInt(random.bytes(4).readUInt32BE(0));
        if (lastTail > TAIL_MAX) {
          // the millisecond is used up: borrow the next one
          lastMs += 1n;
          lastTail = randomTail(random) >> 1n;
        }
      }
      return format(lastMs, lastTail);
    },
  };
};

/** 74 random bits, the top one clear so that many steps fit in one millisecond. */
function randomTail(random: Random): bigint {
  return BigInt(`0x${random.bytes(10).toString('hex')}`) & (TAIL_MAX >> 1n);
}

function format(ms: bigint, tail: bigint): string {
  const randA = (tail >> 62n) & 0xfffn;
  const randB = tail & ((1n << 62n) - 1n);
  const hex = (ms & 0xffff_ffff_ffffn).toString(16).padStart(12, '0') + (0x7000n | randA).toString(16).padStart(4, '0') + ((0b10n << 62n) | randB).toString(16).padStart(16, '0');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** Where time, randomness and ids come from; a service takes the ones it uses. */
export interface Sources {
  clock: Clock;
  random: Random;
  ids: IdSource;
}

/** The system's clock, randomness and ids, which every process outside the tests runs on. */
export const systemSources = (): Sources => ({
  clock: systemClock,
  random: systemRandom,
  ids: idSource(systemClock, systemRandom),
});
