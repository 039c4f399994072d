import { iso, type Clock, type IdSource } from '../../domain/clock.js';
import { floorMinor, microsPerMinor, minorDigits, minorPerMajor } from '../../domain/money.js';
import { everyInterval } from '../../domain/periodic.js';
import type { Mailer } from '../../adapters/notify/mailer.js';
import type { StoreOf } from '../../store/db.js';
import type { Wallet } from '../../store/repositories/index.js';
import { meterPass, type EngineContainers, type MeterPass, type Metering } from './meter.js';
import type { BillingPolicy } from './policy.js';

/** What stops and resumes a workspace's work: its projects and instances (DeployService), its databases (DatabaseService). */
export interface WorkControl {
  suspendWorkspace(workspaceId: string): Promise<number>;
  resumeWorkspace(workspaceId: string): Promise<number>;
}

/** Several WorkControls as one: each in turn, counting what they stopped or resumed. */
export function allWork(...parts: WorkControl[]): WorkControl {
  const each = async (fn: (w: WorkControl) => Promise<number>) => {
    let n = 0;
    for (const w of parts) n += await fn(w);
    return n;
  };
  return { suspendWorkspace: (ws) => each((w) => w.suspendWorkspace(ws)), resumeWorkspace: (ws) => each((w) => w.resumeWorkspace(ws)) };
}

export interface BillingLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface BillingWorkerOptions {
  /** the meters and accruals, the wallets, and the workspaces' names and owners for the notices */
  store: StoreOf<'billing' | 'wallets' | 'workspaces' | 'members'>;
  clock: Clock;
  ids: IdSource;
  /** the prices and the grace period */
  policy: Pick<BillingPolicy, 'prices' | 'graceMs'>;
  /** the owners' notices (`--smtp-url`); absent: a log line only */
  mailer?: Mailer | undefined;
  /** what stops and resumes a workspace's work */
  work: WorkControl;
  log: BillingLog;
  /** what the engine runs: the containers metered (engineContainers() over the runtime) */
  containers: EngineContainers;
}

/** A wallet notice: below the alert threshold, empty (the grace period starts), suspended. */
export type Notice = 'below' | 'empty' | 'suspended';

/** How often the worker meters; a minute is charged once seen running, so a few passes per minute. */
export const BILLING_PASS_MS = 15_000;

/**
 * The leader's billing work (docs/billing.md): meter what the engine runs, post finished hours, then look at
 * every wallet: notify its owners when it falls below its threshold, reaches 0 and is
 * suspended (each once per crossing), stop its work once it stayed empty past the grace period,
 * and resume it once a top-up brought it back above 0.
 */
export class BillingWorker {
  private stopTimer: (() => Promise<void>) | null = null;
  private running: Promise<void> | null = null;

  private readonly store: BillingWorkerOptions['store'];
  private readonly clock: Clock;
  private readonly graceMs: number;
  private readonly mailer: Mailer | undefined;
  private readonly work: WorkControl;
  private readonly log: BillingLog;
  private readonly containers: EngineContainers;
  private readonly metering: Metering;

  constructor(o: BillingWorkerOptions) {
    this.store = o.store;
    this.clock = o.clock;
    this.graceMs = o.policy.graceMs;
    this.mailer = o.mailer;
    this.work = o.work;
    this.log = o.log;
    this.containers = o.containers;
    this.metering = { store: o.store, clock: o.clock, ids: o.ids, prices: o.policy.prices };
  }

  start(everyMs = BILLING_PASS_MS): void {
    this.stopTimer = everyInterval(() => this.pass().then(() => undefined), everyMs, (err) => {
      this.log.error({ err }, 'billing pass failed; retrying at the next one');
    });
  }

  async stop(): Promise<void> {
    await this.stopTimer?.();
    this.stopTimer = null;
  }

  /** A workspace was credited: look at it now rather than at the next pass. */
  credited(workspaceId: string): void {
    void this.checkWallet(workspaceId).catch((err: unknown) => {
      this.log.error({ err, workspace: workspaceId }, 'wallet check after a credit failed; the next pass retries');
    });
  }

  /** One pass; concurrent calls share it. */
  pass(): Promise<MeterPass | null> {
    if (this.running !== null) return this.running.then(() => null);
    let result: MeterPass | null = null;
    this.running = (async () => {
      result = await meterPass(this.metering, await this.containers());
      await this.checkWallets();
    })().finally(() => {
      this.running = null;
    });
    return this.running.then(() => result);
  }

  async checkWallets(): Promise<void> {
    const unbilled = await this.store.repos.billing.unbilledByWorkspace();
    for (const wallet of await this.store.repos.wallets.all()) {
      // one workspace whose work cannot be stopped or resumed now (a shared server down) does not hold up the others
      try {
        await this.check(wallet, unbilled.get(wallet.workspace_id) ?? 0);
      } catch (err) {
        this.log.error({ err, workspace: wallet.workspace_id }, 'wallet check failed; the next pass tries again');
      }
    }
  }

  async checkWallet(workspaceId: string): Promise<void> {
    const wallet = await this.store.repos.wallets.get(workspaceId);
    if (wallet !== undefined) await this.check(wallet, await this.store.repos.billing.unbilled(workspaceId));
  }

  private async check(wallet: Wallet, unbilledMicros: number): Promise<void> {
    const now = this.clock.now();
    const available = wallet.balance_micros - unbilledMicros;
    const threshold = wallet.alert_threshold * microsPerMinor(wallet.currency);
    const alerts = new Set(wallet.alerts_sent);
    let emptySince = wallet.empty_since;
    const notices: Notice[] = [];
    if (available > 0) {
      emptySince = null;
      alerts.delete('empty');
      alerts.delete('suspended');
      if (available >= threshold) alerts.delete('below');
      else if (!alerts.has('below')) {
        alerts.add('below');
        notices.push('below');
      }
    } else {
      // at 0 the threshold notice is implied by the empty one
      if (threshold > 0) alerts.add('below');
      if (emptySince === null) {
        emptySince = iso(now);
        alerts.add('empty');
        notices.push('empty');
      }
      if (now.getTime() >= Date.parse(emptySince) + this.graceMs && !alerts.has('suspended')) {
        alerts.add('suspended');
        notices.push('suspended');
      }
    }
    const changed = emptySince !== wallet.empty_since || [...alerts].sort().join() !== [...wallet.alerts_sent].sort().join();
    // Resumed before the state says so: a resume that fails is tried again at the next pass.
    if (!alerts.has('suspended') && wallet.alerts_sent.has('suspended')) {
      const resumed = await this.work.resumeWorkspace(wallet.workspace_id);
      this.log.info({ workspace: wallet.workspace_id, resumed }, 'wallet credited: suspended work resumed');
    }
    // The state moves conditionally: a second process looking at the same moment sends nothing.
    if (changed && !(await this.store.repos.wallets.setState(wallet.workspace_id, wallet, { empty_since: emptySince, alerts }, iso(now)))) return;
    for (const notice of notices) await this.notify(wallet, notice, available, emptySince);
    // Suspension is looked at every pass while it lasts: work started meanwhile is stopped too.
    if (alerts.has('suspended')) {
      const stopped = await this.work.suspendWorkspace(wallet.workspace_id);
      if (stopped > 0) this.log.warn({ workspace: wallet.workspace_id, stopped }, 'wallet empty past the grace period: work suspended');
    }
  }

  /** E-mails the workspace's owners (without a mailer: a log line). Never fails the pass. */
  private async notify(wallet: Wallet, notice: Notice, availableMicros: number, emptySince: string | null): Promise<void> {
    const workspace = await this.store.repos.workspaces.byId(wallet.workspace_id);
    if (workspace === undefined) return;
    const c = wallet.currency;
    const balance = `${(floorMinor(availableMicros, c) / minorPerMajor(c)).toFixed(minorDigits(c))} ${c}`;
    const suspendAt = emptySince === null ? '' : iso(new Date(Date.parse(emptySince) + this.graceMs));
    const texts: Record<Notice, { subject: string; text: string }> = {
      below: {
        subject: `Slipway: the wallet of ${workspace.name} is below its alert threshold`,
        text: `The wallet of workspace ${workspace.slug} holds ${balance}, below the alert threshold you set. Top it up to keep your apps and databases running.`,
      },
      empty: {
        subject: `Slipway: the wallet of ${workspace.name} is empty`,
        text: `The wallet of workspace ${workspace.slug} is empty (${balance}). Your apps keep running until ${suspendAt}; then they are stopped until the wallet is topped up. New deployments need credit now.`,
      },
      suspended: {
        subject: `Slipway: the apps of ${workspace.name} are suspended`,
        text: `The wallet of workspace ${workspace.slug} stayed empty past the grace period, so its apps were stopped (their data and volumes are kept). A top-up that brings the balance above 0 starts them again.`,
      },
    };
    const owners = (await this.store.repos.members.list(wallet.workspace_id)).filter((m) => m.role === 'owner' && m.status === 'active');
    const { mailer } = this;
    this.log.info({ workspace: wallet.workspace_id, notice, owners: owners.length, mailed: mailer !== undefined }, 'wallet notice');
    if (mailer === undefined) return;
    for (const owner of owners) {
      try {
        await mailer.send({ to: owner.email, ...texts[notice] });
      } catch (err) {
        this.log.warn({ err: err instanceof Error ? err.message : String(err), workspace: wallet.workspace_id, notice }, 'wallet notice not delivered');
      }
    }
  }
}
