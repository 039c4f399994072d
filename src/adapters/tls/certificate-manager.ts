import type { Clock } from '../../domain/clock.js';
import { silentLog, type RouterLog, type TlsCertificate } from '../router/index.js';
import type { CertificateIssuer } from './acme-issuer.js';
import type { CertificateStore, StoredCertificate } from './certificate-store.js';

const DAY = 86_400_000;

export interface CertificateManagerOptions {
  store: CertificateStore;
  issuer: CertificateIssuer;
  /** hands every certificate held to the data plane (the router driver's setCertificates) */
  publish: (certificates: readonly TlsCertificate[]) => Promise<void>;
  clock: Clock;
  log?: RouterLog;
  /** renew when less than this is left (at most a third of the certificate's lifetime); default 30 days */
  renewBeforeMs?: number;
  /** how often every certificate's expiry is looked at; default 12 hours */
  checkEveryMs?: number;
  /** the wait after a failed order, doubled at each failure in a row up to `retryMaxMs`; defaults 5 minutes and 6 hours */
  retryMinMs?: number;
  retryMaxMs?: number;
  /** how long stop() waits for an order in progress; default 5 s */
  stopTimeoutMs?: number;
  /**
   * Slipway holds a certificate for `host`, a name the router serves: called once each time the
   * host appears in the route table (custom domains become `verified`).
   */
  onCertificate?: (host: string) => Promise<void>;
}

interface Failure {
  count: number;
  retryAt: number;
}

/**
 * When a certificate needs renewing: less than `renewBeforeMs` left, or less than a third of its
 * lifetime for short-lived certificates (else a 7-day certificate would be renewed at every check).
 */
export function renewalDue(c: Pick<StoredCertificate, 'notBefore' | 'notAfter'>, now: Date, renewBeforeMs = 30 * DAY): boolean {
  return c.notAfter.getTime() - now.getTime() < renewAt(c, renewBeforeMs);
}

function renewAt(c: Pick<StoredCertificate, 'notBefore' | 'notAfter'>, renewBeforeMs: number): number {
  return Math.min(renewBeforeMs, (c.notAfter.getTime() - c.notBefore.getTime()) / 3);
}

/**
 * One certificate per host the router serves: loaded from `<data-dir>/tls` at start, ordered
 * when a host appears without one, renewed when it runs short, and handed to the router after
 * each change. Orders run one at a time in the background, so routing never waits for a CA; a
 * failed order is logged and retried with a doubling back-off, per host.
 */
export class CertificateManager {
  private readonly log: RouterLog;
  private readonly renewBeforeMs: number;
  private readonly checkEveryMs: number;
  private readonly retryMinMs: number;
  private readonly retryMaxMs: number;
  private hosts = new Set<string>();
  private readonly held = new Map<string, StoredCertificate>();
  private readonly failures = new Map<string, Failure>();
  /** hosts whose onCertificate ran since they last appeared */
  private readonly announced = new Set<string>();
  private tail: Promise<void> = Promise.resolve();
  /** a pass waiting behind the running one: later requests share it */
  private queued: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private state: 'new' | 'started' | 'stopped' = 'new';

  /** the certificates on disk (`<data-dir>/tls`) */
  private readonly certificates: CertificateStore;
  private readonly issuer: CertificateIssuer;
  /** the option `publish`: the router driver's setCertificates */
  private readonly toDataPlane: (certificates: readonly TlsCertificate[]) => Promise<void>;
  private readonly clock: Clock;
  private readonly stopTimeoutMs: number;
  private readonly onCertificate: ((host: string) => Promise<void>) | undefined;

  constructor(o: CertificateManagerOptions) {
    this.certificates = o.store;
    this.issuer = o.issuer;
    this.toDataPlane = o.publish;
    this.clock = o.clock;
    this.stopTimeoutMs = o.stopTimeoutMs ?? 5_000;
    this.onCertificate = o.onCertificate;
    this.log = o.log ?? silentLog;
    this.renewBeforeMs = o.renewBeforeMs ?? 30 * DAY;
    this.checkEveryMs = o.checkEveryMs ?? DAY / 2;
    this.retryMinMs = o.retryMinMs ?? 5 * 60_000;
    this.retryMaxMs = o.retryMaxMs ?? 6 * 3_600_000;
  }

  /** Loads what is on disk and hands it to the router; the first check runs in the background. */
  async start(): Promise<void> {
    if (this.state !== 'new') throw new Error(`The certificate manager was already ${this.state}.`);
    await this.certificates.prepare();
    const { certificates, problems } = await this.certificates.loadAll();
    for (const p of problems) this.log.warn({ host: p.host, reason: p.reason }, 'tls: a stored certificate is unusable; it will be ordered again');
    for (const c of certificates) this.held.set(c.host, c);
    this.state = 'started';
    if (certificates.length > 0) await this.publish();
    this.log.info({ dir: this.certificates.dir, certificates: certificates.length }, 'tls: certificate manager started');
    this.kick();
  }

  /** The hosts the router serves now (every host of the route table). */
  setHosts(hosts: Iterable<string>): void {
    const next = new Set(hosts);
    for (const h of this.announced) if (!next.has(h)) this.announced.delete(h);
    const changed = next.size !== this.hosts.size || [...next].some((h) => !this.hosts.has(h));
    this.hosts = next;
    if (changed) this.kick();
  }

  /** Runs a check now (after the one in progress): orders what is missing or due, retries what is due. */
  check(): Promise<void> {
    if (this.queued !== undefined) return this.queued;
    const run = this.tail.then(async () => {
      this.queued = undefined;
      await this.pass();
    });
    this.queued = run;
    this.tail = run.catch(() => undefined);
    return run;
  }

  /** The certificate held for a host, if any. */
  certificate(host: string): StoredCertificate | undefined {
    return this.held.get(host);
  }

  /** Stops the timer and lets an order in progress finish (its result is kept on disk, not published). */
  async stop(): Promise<void> {
    if (this.state === 'stopped') return;
    this.state = 'stopped';
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    let timeout: NodeJS.Timeout | undefined;
    const bound = new Promise<void>((resolve) => { timeout = setTimeout(resolve, this.stopTimeoutMs); });
    await Promise.race([this.tail, bound]);
    clearTimeout(timeout);
  }

  private kick(): void {
    if (this.state !== 'started') return;
    void this.check();
  }

  private async pass(): Promise<void> {
    for (const host of [...this.hosts].sort()) {
      if (this.state !== 'started') return;
      const held = this.held.get(host);
      const now = this.clock.now();
      if (held !== undefined && !renewalDue(held, now, this.renewBeforeMs)) {
        await this.announce(host);
        continue;
      }
      const failure = this.failures.get(host);
      if (failure !== undefined && failure.retryAt > now.getTime()) continue;
      await this.obtain(host, held, failure);
    }
    this.schedule();
  }

  private async obtain(host: string, held: StoredCertificate | undefined, failure: Failure | undefined): Promise<void> {
    const renewal = held !== undefined;
    try {
      const issued = await this.issuer.issue(host);
      const saved = await this.certificates.save(issued);
      this.held.set(host, saved);
      this.failures.delete(host);
      this.log.info({ host, notAfter: saved.notAfter.toISOString(), renewal }, renewal ? 'tls: certificate renewed' : 'tls: certificate issued');
    } catch (err) {
      const count = (failure?.count ?? 0) + 1;
      const wait = Math.min(this.retryMaxMs, this.retryMinMs * 2 ** (count - 1));
      this.failures.set(host, { count, retryAt: this.clock.now().getTime() + wait });
      this.log.warn(
        { host, err: errorMessage(err), failures: count, retryInMs: wait, ...(held === undefined ? {} : { expires: held.notAfter.toISOString() }) },
        renewal ? 'tls: certificate renewal failed; the current certificate is served until it is renewed' : 'tls: certificate order failed; the host is served over plain HTTP until it succeeds',
      );
      return;
    }
    if (this.state !== 'started') return;
    await this.publish();
    await this.announce(host);
  }

  private async publish(): Promise<void> {
    try {
      await this.toDataPlane([...this.held.values()]);
    } catch (err) {
      this.log.error({ err: errorMessage(err) }, 'tls: the router refused the certificates; it serves the ones it had');
    }
  }

  private async announce(host: string): Promise<void> {
    if (this.announced.has(host) || this.onCertificate === undefined) return;
    try {
      await this.onCertificate(host);
      this.announced.add(host);
    } catch (err) {
      this.log.warn({ host, err: errorMessage(err) }, 'tls: could not record the certificate of a host (retried at the next check)');
    }
  }

  /** The next check: the periodic one, or sooner for a retry or a renewal that falls due before it. */
  private schedule(): void {
    if (this.state !== 'started') return;
    const now = this.clock.now().getTime();
    let next = now + this.checkEveryMs;
    for (const host of this.hosts) {
      const failure = this.failures.get(host);
      if (failure !== undefined) {
        next = Math.min(next, failure.retryAt);
        continue;
      }
      const held = this.held.get(host);
      if (held !== undefined) next = Math.min(next, held.notAfter.getTime() - renewAt(held, this.renewBeforeMs));
    }
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.kick();
    }, Math.max(1_000, Math.min(next - now, this.checkEveryMs)));
    this.timer.unref();
  }
}

const errorMessage = (err: unknown): string => (err instanceof Error ? err.message : String(err));
