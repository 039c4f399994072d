import { iso, type Clock, type IdSource } from '../../domain/clock.js';
import type { CrashKind, CrashSink } from '../../domain/ports.js';
import type { Feed, Labels, Runtime, RuntimeEvent } from '../../domain/runtime.js';
import type { Repositories } from '../../store/repositories/index.js';
import type { CheckerLog } from './uptime.worker.js';
import { queueNotifications } from './uptime.worker.js';

/** How long the OOM watch waits before subscribing again to an event feed that ended. */
const RESUBSCRIBE_MS = 5_000;

export interface CrashAlertsOptions {
  /** the project's monitor (its channels) and the notifications queued for it */
  uptime: Repositories['uptime'];
  clock: Clock;
  /** the notifications' ids */
  ids: IdSource;
  /** alerts were queued: deliver them */
  onQueued: () => void;
  log: CheckerLog;
}

/**
 * Crash alerts (docs/uptime.md#crash-alerts): a deployment that crash-loops (the reconciler), is
 * OOM-killed (the engine's `oom` event) or fails its deploy health check (the rollout) notifies
 * the project monitor's chat webhook and e-mail address, whether or not checks are enabled. One
 * alert per deployment and kind: the notification key `crash:<kind>:<deployment>` is unique, so a
 * container OOM-killed again and again, or a loop seen by two passes, alerts once; a new
 * deployment is a new incident.
 */
export class CrashAlerts implements CrashSink {
  private feed: Feed<RuntimeEvent> | null = null;
  private stopped = false;
  private retry: NodeJS.Timeout | null = null;
  private readonly pending = new Set<Promise<unknown>>();

  private readonly uptime: Repositories['uptime'];
  private readonly clock: Clock;
  private readonly ids: IdSource;
  private readonly onQueued: () => void;
  private readonly log: CheckerLog;

  constructor(o: CrashAlertsOptions) {
    this.uptime = o.uptime;
    this.clock = o.clock;
    this.ids = o.ids;
    this.onQueued = o.onQueued;
    this.log = o.log;
  }

  crashed(projectId: string, deploymentId: string, kind: CrashKind, cause: string): void {
    const job = this.record(projectId, deploymentId, kind, cause)
      .catch((err: unknown) => {
        this.log.error({ err, project: projectId, kind }, 'crash alert: could not be queued');
      })
      .finally(() => this.pending.delete(job));
    this.pending.add(job);
  }

  /** Queues the alert for the monitor's channels; false when there is none, or it was sent before. */
  async record(projectId: string, deploymentId: string, kind: CrashKind, cause: string): Promise<boolean> {
    const { uptime } = this;
    const monitor = await uptime.find(projectId);
    this.log.warn({ project: projectId, deployment: deploymentId, kind, cause, notified: monitor !== undefined }, 'crash');
    if (monitor === undefined) return false;
    const queued = await queueNotifications(this.ids, uptime, monitor, `crash:${kind}:${deploymentId}`, 'crash', iso(this.clock.now()), cause);
    if (queued.length > 0) this.onQueued();
    return queued.length > 0;
  }

  /** Follows the engine's `oom` events of this installation's containers. */
  async watch(runtime: Pick<Runtime, 'events'>, labels: Labels): Promise<void> {
    if (this.stopped) return;
    try {
      const feed = await runtime.events({ labels });
      this.feed = feed;
      void (async () => {
        try {
          for await (const e of feed) {
            if (e.type !== 'oom' || e.owner === null) continue;
            this.crashed(e.owner.project, e.owner.deployment, 'oom', `${e.name} was killed for exceeding its memory limit`);
          }
        } catch (err) {
          if (!this.stopped) this.log.warn({ err }, 'crash alerts: the engine event feed failed; subscribing again');
        } finally {
          if (this.feed === feed) this.feed = null;
          if (!this.stopped) this.retry = setTimeout(() => { void this.watch(runtime, labels); }, RESUBSCRIBE_MS);
        }
      })();
    } catch (err) {
      this.log.warn({ err }, 'crash alerts: cannot subscribe to engine events; trying again');
      this.retry = setTimeout(() => { void this.watch(runtime, labels); }, RESUBSCRIBE_MS);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retry !== null) clearTimeout(this.retry);
    this.feed?.close();
    await Promise.allSettled([...this.pending]);
  }

  /** Waits for the alerts being queued (tests). */
  async idle(): Promise<void> {
    await Promise.allSettled([...this.pending]);
  }
}
