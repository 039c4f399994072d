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
  const b = random.bytes(16);
  let ms = BigInt(clock.now().getTime());
  for (let i = 5; i >= 0; i--) {
    b[i] = Number(ms & 0xffn);
    ms >>= 8n;
  }
  b[6] = ((b[6] ?? 0) & 0x0f) | 0x70;
  b[8] = ((b[8] ?? 0) & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

export interface IdSource {
  id(): string;
}

export const idSource = (clock: Clock, random: Random): IdSource => ({ id: () => uuidv7(clock, random) });
