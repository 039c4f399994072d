/**
 * A short-lived read cache for the API's hot path (the key and the membership behind every
 * request), with two bounds on staleness:
 * - in this process, any write that could change an answer calls `invalidate()`, and a load that
 *   was under way when it happened is not kept (it may have read the old row);
 * - a write by another process (another replica, `slipway admin`) is seen once the entry's time
 *   is up: an entry lives `ttlMs` from the moment its load began, so an answer read before a
 *   revocation is never served more than `ttlMs` after the revocation.
 * Misses are not kept: a key that does not exist costs a query each time (and the address's rate
 * limit), and a new key works at once.
 */
export class ReadCache<V> {
  private entries = new Map<string, { value: V; until: number }>();
  private generation = 0;

  constructor(
    private readonly ttlMs: number,
    private readonly max: number,
    /** monotonic milliseconds: staleness is about real time, whatever clock the services are given */
    private readonly now: () => number = () => performance.now(),
  ) {}

  async get(key: string, load: () => Promise<V | undefined>): Promise<V | undefined> {
    const at = this.now();
    const hit = this.entries.get(key);
    if (hit !== undefined) {
      if (hit.until > at) return hit.value;
      this.entries.delete(key);
    }
    const generation = this.generation;
    const value = await load();
    if (value !== undefined && generation === this.generation && this.ttlMs > 0) {
      if (this.entries.size >= this.max) this.evictExpired(at);
      if (this.entries.size >= this.max) {
        const oldest = this.entries.keys().next().value;
        if (oldest !== undefined) this.entries.delete(oldest);
      }
      this.entries.set(key, { value, until: at + this.ttlMs });
    }
    return value;
  }

  /** Forget every answer, and any load under way now. */
  invalidate(): void {
    this.generation += 1;
    this.entries.clear();
  }

  get size(): number {
    return this.entries.size;
  }

  private evictExpired(at: number): void {
    for (const [key, entry] of this.entries) if (entry.until <= at) this.entries.delete(key);
  }
}
