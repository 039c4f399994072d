import { iso, type Clock } from '../../../domain/clock.js';
import type { Repositories } from '../../../store/repositories/index.js';
import { sleep } from './sleep.js';

export interface LeadershipLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface LeadershipOptions {
  leases: Repositories['leases'];
  clock: Clock;
  log: LeadershipLog;
  /** the lease: one per kind of work that must run in one process only, e.g. `deploy-engine` */
  name: string;
  /** this process, unique among the processes that share the store */
  holder: string;
  ttlMs: number;
}

export interface LeaseHolder {
  holder: string;
  /** RFC 3339 */
  expiresAt: string;
}

export interface LeadOptions {
  /**
   * Take up the work. Renewals wait while it runs, so it should end well within the ttl. If it
   * throws, the lease is released and the campaign goes back to standby.
   */
  onElected(): Promise<void>;
  /** Stop the work: the lease was lost, or stop() was called. Follows each onElected that succeeded, once. */
  onDeposed(): Promise<void>;
  /** about ttl/3: two renewals may fail before the lease is at risk */
  renewEveryMs: number;
  retryEveryMs: number;
}

export interface Campaign {
  /** true from the end of onElected to the start of onDeposed */
  readonly leading: boolean;
  /** End the campaign: waits for a running callback, calls onDeposed if leading, then releases the lease. */
  stop(): Promise<void>;
}

/**
 * A named lease in the store that at most one process holds at a time: when several Slipway
 * processes share a store, only the holder runs the work it guards. Time is each process's own
 * clock, so the processes' clocks must agree to well within the ttl.
 */
export class Leadership {
  private until: Date | null = null;

  private readonly leases: Repositories['leases'];
  private readonly clock: Clock;
  private readonly log: LeadershipLog;
  private readonly name: string;
  /** this process's name on the lease */
  private readonly self: string;
  private readonly ttlMs: number;

  constructor(o: LeadershipOptions) {
    this.leases = o.leases;
    this.clock = o.clock;
    this.log = o.log;
    this.name = o.name;
    this.self = o.holder;
    this.ttlMs = o.ttlMs;
  }

  /** When the lease this process holds runs out, as of its last successful tryAcquire; null when it does not hold it. */
  get heldUntil(): Date | null {
    return this.until;
  }

  /**
   * Take the lease for ttlMs from now if it is free, expired or already ours (a renewal). One
   * statement, so two processes racing for it cannot both win. False while another's lease runs.
   */
  async tryAcquire(): Promise<boolean> {
    const { leases, clock, name, self, ttlMs } = this;
    const now = clock.now();
    const expiresAt = new Date(now.getTime() + ttlMs);
    const held = await leases.acquire(name, self, iso(now), iso(expiresAt));
    this.until = held ? expiresAt : null;
    return held;
  }

  /**
   * Take the lease from `dead`, a holder known to be gone (its process no longer exists), without
   * waiting for it to expire. Only succeeds while `dead` still holds it: one statement, so two
   * processes that both found it dead cannot both win.
   */
  async takeOver(dead: string): Promise<boolean> {
    const { leases, clock, name, self, ttlMs } = this;
    const now = clock.now();
    const expiresAt = new Date(now.getTime() + ttlMs);
    const taken = await leases.takeOver(name, dead, self, iso(now), iso(expiresAt));
    this.until = taken ? expiresAt : null;
    return taken;
  }

  /** Give the lease up, if this process holds it, so that another can take it without waiting for it to expire. */
  async release(): Promise<void> {
    this.until = null;
    await this.leases.release(this.name, this.self);
  }

  /** Who holds the lease now; null when nobody does (never taken, released or expired). */
  async holder(): Promise<LeaseHolder | null> {
    const row = await this.leases.holderAt(this.name, iso(this.clock.now()));
    return row === undefined ? null : { holder: row.holder, expiresAt: row.expires_at };
  }

  /** Campaign for the lease until stopped: lead while holding it, stand by (and retry) while another does. */
  lead(opts: LeadOptions): Campaign {
    return new Election(this, this.clock, this.log, { lease: this.name, holder: this.self }, opts);
  }
}

class Election implements Campaign {
  private isLeading = false;
  private readonly stopping = new AbortController();
  private readonly done: Promise<void>;

  constructor(
    private readonly lease: Leadership,
    private readonly clock: Clock,
    private readonly log: LeadershipLog,
    /** what each log line says about the lease: its name and this process */
    private readonly ctx: { lease: string; holder: string },
    private readonly opts: LeadOptions,
  ) {
    this.done = this.run();
  }

  get leading(): boolean {
    return this.isLeading;
  }

  stop(): Promise<void> {
    this.stopping.abort();
    return this.done;
  }

  /** Never rejects: every store call and callback below catches and logs its own failure. */
  private async run(): Promise<void> {
    while (!this.stopping.signal.aborted) {
      const wasLeading = this.isLeading;
      await this.tick();
      // Renew at once after an election: onElected may have taken a good part of the ttl.
      if (this.isLeading && !wasLeading) continue;
      await sleep(this.isLeading ? this.opts.renewEveryMs : this.opts.retryEveryMs, this.stopping.signal);
    }
    if (this.isLeading) {
      this.log.info(this.ctx, 'Stepping down: stopping');
      await this.stepDown();
    }
    // Only after the work has stopped, or the next leader could start while it still runs.
    await this.release();
  }

  private async tick(): Promise<void> {
    let held: boolean;
    try {
      held = await this.lease.tryAcquire();
    } catch (err) {
      // The store does not answer. Lead on while the lease surely runs; step down once the next
      // attempt would come too late, so that the work stops before another process may take over.
      const until = this.lease.heldUntil;
      if (this.isLeading && (until === null || this.clock.now().getTime() + this.opts.renewEveryMs >= until.getTime())) {
        this.log.error({ ...this.ctx, err }, 'Deposed: the lease could not be renewed before it runs out');
        await this.stepDown();
      } else {
        this.log.warn({ ...this.ctx, err }, 'Could not take or renew the lease');
      }
      return;
    }
    if (held && !this.isLeading && !this.stopping.signal.aborted) await this.elect();
    else if (!held && this.isLeading) {
      this.log.warn(this.ctx, 'Deposed: another process took the lease');
      await this.stepDown();
    }
  }

  private async elect(): Promise<void> {
    this.log.info(this.ctx, 'Elected: this process holds the lease');
    try {
      await this.opts.onElected();
      this.isLeading = true;
    } catch (err) {
      this.log.error({ ...this.ctx, err }, 'Could not take up the work of the lease; releasing it');
      await this.release();
    }
  }

  private async stepDown(): Promise<void> {
    this.isLeading = false;
    try {
      await this.opts.onDeposed();
    } catch (err) {
      this.log.error({ ...this.ctx, err }, 'Stopping the work of the lease failed');
    }
  }

  private async release(): Promise<void> {
    try {
      await this.lease.release();
    } catch (err) {
      this.log.warn({ ...this.ctx, err }, 'Could not release the lease; it will expire');
    }
  }
}
