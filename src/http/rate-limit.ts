import type { Clock } from '../domain/clock.js';

export interface RateLimit {
  /** tokens added per second */
  rate: number;
  /** bucket size: how many requests may arrive at once */
  burst: number;
}

interface Bucket {
  tokens: number;
  at: number;
}

/** Beyond this many tracked clients, buckets that have refilled completely are forgotten. */
const MAX_TRACKED = 10_000;

/**
 * Token buckets keyed by API key (or client address for unauthenticated calls). A request takes
 * one token; an empty bucket answers with the seconds until the next token.
 */
export class TokenBuckets {
  private readonly buckets = new Map<string, Bucket>();

  constructor(
    readonly limit: RateLimit,
    private readonly clock: Clock,
  ) {}

  /** 0 when the request may pass, else the whole seconds to wait (for Retry-After). */
  take(key: string): number {
    const now = this.clock.now().getTime();
    const b = this.buckets.get(key) ?? { tokens: this.limit.burst, at: now };
    // A wall clock can step backwards; that must never drain a bucket.
    b.tokens = Math.min(this.limit.burst, b.tokens + (Math.max(0, now - b.at) / 1000) * this.limit.rate);
    b.at = now;
    if (!this.buckets.has(key)) {
      if (this.buckets.size >= MAX_TRACKED) this.prune(now);
      this.buckets.set(key, b);
    }
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return 0;
    }
    return Math.max(1, Math.ceil((1 - b.tokens) / this.limit.rate));
  }

  private prune(now: number): void {
    for (const [k, b] of this.buckets) {
      if (b.tokens + (Math.max(0, now - b.at) / 1000) * this.limit.rate >= this.limit.burst) this.buckets.delete(k);
    }
  }
}
