import { ReadCache } from '../read-cache.js';
import type { KeyWithUser } from './api-keys.js';
import type { WorkspaceAccess } from './workspaces.js';

/**
 * How long an API key or a membership read for the hot path may be answered from memory. A
 * change made through this process is seen at once (the repositories that write call
 * `invalidate`); one made by another replica or by `slipway admin`, within this long.
 */
export const ACCESS_CACHE_MS = 1000;
const MAX_ENTRIES = 10_000;

/**
 * The two reads behind every API request (the key by its digest, the caller's membership of
 * the workspace in the path), kept per store (per process) for at most ACCESS_CACHE_MS
 * (docs/decisions.md#hot-path). Reads inside a transaction never use it.
 */
export class AccessCache {
  constructor(
    readonly keys = new ReadCache<KeyWithUser>(ACCESS_CACHE_MS, MAX_ENTRIES),
    readonly memberships = new ReadCache<WorkspaceAccess>(ACCESS_CACHE_MS, MAX_ENTRIES),
  ) {}

  /** After any write to keys, members or workspaces. */
  invalidate(): void {
    this.keys.invalidate();
    this.memberships.invalidate();
  }

  /**
   * The cache as the repositories of one transaction see it: on PostgreSQL another request may
   * read (and keep) the old row between the write and the commit, so the store invalidates
   * again after a commit that invalidated.
   */
  forTransaction(): TransactionAccessCache {
    return new TransactionAccessCache(this);
  }
}

export class TransactionAccessCache extends AccessCache {
  private invalidated = false;

  constructor(private readonly parent: AccessCache) {
    super(parent.keys, parent.memberships);
  }

  override invalidate(): void {
    this.invalidated = true;
    this.parent.invalidate();
  }

  /** After the commit: forget again what was read while the transaction was open. */
  committed(): void {
    if (this.invalidated) this.parent.invalidate();
  }
}
