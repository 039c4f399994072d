import { request } from 'node:http';
import { iso, type Clock, type IdSource, type Random } from '../../domain/clock.js';
import type { StoreOf } from '../../store/db.js';
import { DEFAULT_UPTIME_RULES, type UptimeRules } from './policy.js';
import { defaultDomain } from '../projects/resolve.js';
import type { MonitorState, MonitorTarget, Repositories, Rollup, UptimeNotificationRow } from '../../store/repositories/index.js';
import type { AlertEvent } from '../../adapters/notify/channels.js';

/** What one check found. */
export interface CheckResult {
  ok: boolean;
  /** the HTTP status, when an answer came */
  status: number | null;
  response_ms: number | null;
  /** why it failed, readable */
  error: string | null;
}

/** How a check reaches a project: by its host name, through the router. */
export type Probe = (host: string, path: string, timeoutMs: number) => Promise<CheckResult>;

/** Upper bounds (ms) of the response-time histogram of the hourly sums; the last bucket is everything slower. */
export const UPTIME_BUCKETS_MS = [10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000] as const;

/** What a check does to a monitor's state: its next state, and the transition to notify, if any. */
export interface Evaluation {
  state: Pick<MonitorState, 'status' | 'failures' | 'successes'>;
  transition: 'down' | 'up' | null;
  /** the status would change on the next result: check again soon */
  recheck: boolean;
}

/**
 * The state machine of a monitor (docs/uptime.md#no-false-alarms). `down` only after
 * `rules.failures` consecutive failures, `up` again only after `rules.successes` consecutive
 * successes; the first answer of an unknown or paused monitor decides at once without a notice.
 * `counted: false` (a failure during the project's own rollout or stop) changes nothing.
 */
export function evaluate(state: Pick<MonitorState, 'status' | 'failures' | 'successes'>, ok: boolean, counted: boolean, rules: UptimeRules): Evaluation {
  if (!ok && !counted) return { state, transition: null, recheck: false };
  if (ok) {
    const successes = state.successes + 1;
    if (state.status === 'down') {
      return successes >= rules.successes ? { state: { status: 'up', failures: 0, successes }, transition: 'up', recheck: false } : { state: { status: 'down', failures: 0, successes }, transition: null, recheck: true };
    }
    return { state: { status: 'up', failures: 0, successes }, transition: null, recheck: false };
  }
  const failures = state.failures + 1;
  if (state.status === 'down') return { state: { status: 'down', failures, successes: 0 }, transition: null, recheck: false };
  if (failures >= rules.failures) return { state: { status: 'down', failures, successes: 0 }, transition: 'down', recheck: false };
  return { state: { status: state.status, failures, successes: 0 }, transition: null, recheck: true };
}

/** Adds one check to an hour's sums. */
export function addToRollup(r: Rollup, ok: boolean, ms: number | null): Rollup {
  const histogram = r.histogram.length === UPTIME_BUCKETS_MS.length + 1 ? [...r.histogram] : Array<number>(UPTIME_BUCKETS_MS.length + 1).fill(0);
  if (ok && ms !== null) {
    const i = UPTIME_BUCKETS_MS.findIndex((b) => ms <= b);
    const at = i === -1 ? UPTIME_BUCKETS_MS.length : i;
    histogram[at] = (histogram[at] ?? 0) + 1;
  }
  return { hour: r.hour, checks: r.checks + 1, failures: r.failures + (ok ? 0 : 1), sum_ms: r.sum_ms + (ok && ms !== null ? ms : 0), histogram };
}

/**
 * GET through the router on this machine, with the project's host name: the path a visitor's
 * request takes. Below 400 is up; anything else, a timeout or a refused connection is down.
 */
export function routerProbe(routerHost: string, routerPort: number): Probe {
  return (host, path, timeoutMs) =>
    new Promise((resolve) => {
      const started = performance.now();
      const ms = () => Math.round(performance.now() - started);
      const req = request({ host: routerHost, port: routerPort, path, method: 'GET', headers: { host, 'user-agent': 'Slipway-Uptime/1' }, agent: false, timeout: timeoutMs }, (res) => {
        res.resume();
        res.on('end', () => {
          const status = res.statusCode ?? 0;
          resolve({ ok: status < 400, status, response_ms: ms(), error: status < 400 ? null : `HTTP ${status.toString()}` });
        });
        res.on('error', (err) => {
          resolve({ ok: false, status: res.statusCode ?? null, response_ms: ms(), error: `the answer broke off: ${err.message}` });
        });
      });
      req.on('timeout', () => {
        req.destroy(new Error(`no answer within ${(timeoutMs / 1000).toString()} s`));
      });
      req.on('error', (err) => {
        resolve({ ok: false, status: null, response_ms: null, error: err.message.startsWith('no answer') ? err.message : `the router could not be reached: ${(err as NodeJS.ErrnoException).code ?? err.message}` });
      });
      req.end();
    });
}

export interface CheckerLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface UptimeCheckerOptions {
  /** the monitors, their checks, sums, incidents and notifications; whether a project has a deployment running or in progress */
  store: StoreOf<'uptime' | 'deployments'>;
  clock: Clock;
  /** where in its first interval a monitor is first checked */
  random: Random;
  /** the incidents' and notifications' ids */
  ids: IdSource;
  /** apps get `<host label>.<appsDomain>`: the host name a check asks the router for */
  appsDomain: string;
  probe: Probe;
  /** a transition (or test) was queued for delivery: deliver the project's pending notifications */
  onQueued: () => void;
  log: CheckerLog;
  rules?: UptimeRules;
  /** checks in flight at most */
  concurrency?: number;
  /** how often the schedule is looked at */
  tickMs?: number;
  /** told when each check starts, how late it is on its schedule (the benchmark) */
  observe?: (projectId: string, lateMs: number) => void;
}

/** Statuses of a project whose failures say nothing about its app: a stopped or suspended project is `paused`. */
const PAUSED: ReadonlySet<string> = new Set(['stopped', 'suspended', 'pending']);
/** A project building or rolling out: its checks may fail without counting (Slipway's own rollout). */
const ROLLING: ReadonlySet<string> = new Set(['building', 'deploying']);

/**
 * The uptime checker (docs/uptime.md), run by the deploy engine's leader only. Every enabled
 * monitor is checked at its interval, the first time after a random part of it (so that a
 * thousand monitors do not fire at once), with at most `concurrency` checks in flight. A check
 * that would change the status is confirmed by a re-check after `rules.recheckMs`. Each check
 * is stored (kept a day) and summed into its hour; a transition moves the monitor
 * conditionally, opens or closes the incident, and queues one notification per channel, all
 * in one transaction, so that a transition is never notified twice.
 */
export class UptimeChecker {
  private readonly rules: UptimeRules;
  private readonly next = new Map<string, number>();
  private readonly inFlight = new Set<string>();
  private timer: NodeJS.Timeout | null = null;
  private ticking: Promise<void> | null = null;
  private stopped = false;
  private lastPrune = 0;
  private readonly running = new Set<Promise<void>>();

  private readonly store: UptimeCheckerOptions['store'];
  private readonly clock: Clock;
  private readonly random: Random;
  private readonly ids: IdSource;
  private readonly appsDomain: string;
  private readonly probe: Probe;
  private readonly onQueued: () => void;
  private readonly log: CheckerLog;
  private readonly concurrency: number;
  private readonly tickMs: number;
  private readonly observe: ((projectId: string, lateMs: number) => void) | undefined;

  constructor(o: UptimeCheckerOptions) {
    this.store = o.store;
    this.clock = o.clock;
    this.random = o.random;
    this.ids = o.ids;
    this.appsDomain = o.appsDomain;
    this.probe = o.probe;
    this.onQueued = o.onQueued;
    this.log = o.log;
    this.rules = o.rules ?? DEFAULT_UPTIME_RULES;
    this.concurrency = o.concurrency ?? 20;
    this.tickMs = o.tickMs ?? 500;
    this.observe = o.observe;
  }

  start(): void {
    this.timer = setInterval(() => {
      void this.tick();
    }, this.tickMs);
    this.timer.unref();
    void this.tick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== null) clearInterval(this.timer);
    await this.ticking;
    await Promise.allSettled([...this.running]);
  }

  /** One look at the schedule: every due monitor is checked (concurrent calls share it). */
  tick(): Promise<void> {
    this.ticking ??= this.schedule().finally(() => {
      this.ticking = null;
    });
    return this.ticking;
  }

  /** Waits for the checks in flight (tests). */
  async idle(): Promise<void> {
    await this.ticking;
    while (this.running.size > 0) await Promise.allSettled([...this.running]);
  }

  private async schedule(): Promise<void> {
    if (this.stopped) return;
    const { store, clock, random } = this;
    let monitors: MonitorTarget[];
    try {
      monitors = await store.repos.uptime.enabled();
    } catch (err) {
      this.log.error({ err }, 'uptime: cannot read the monitors');
      return;
    }
    const now = clock.now().getTime();
    const seen = new Set<string>();
    for (const m of monitors) {
      seen.add(m.project_id);
      const intervalMs = m.check_interval_sec * 1000;
      let due = this.next.get(m.project_id);
      if (due === undefined || due > now + intervalMs) {
        // new (or its interval shortened): somewhere in its first interval
        due = now + Math.floor(random.bytes(2).readUInt16BE(0) / 65536 * intervalMs);
        this.next.set(m.project_id, due);
      }
      if (due > now || this.inFlight.has(m.project_id)) continue;
      if (this.inFlight.size >= this.concurrency) break;
      // the next check a whole interval after this one was due (no drift), never in the past
      this.next.set(m.project_id, Math.max(due + intervalMs, now + 1000));
      this.inFlight.add(m.project_id);
      this.observe?.(m.project_id, now - due);
      const job = this.check(m)
        .catch((err: unknown) => {
          this.log.error({ err, project: m.project_id }, 'uptime: a check failed to complete');
        })
        .finally(() => {
          this.inFlight.delete(m.project_id);
          this.running.delete(job);
        });
      this.running.add(job);
    }
    for (const id of this.next.keys()) if (!seen.has(id)) this.next.delete(id);
    if (now - this.lastPrune > 3_600_000) {
      this.lastPrune = now;
      await store.repos.uptime.prune(iso(new Date(now - 25 * 3_600_000)), iso(new Date(now - 90 * 86_400_000))).catch((err: unknown) => {
        this.log.warn({ err }, 'uptime: pruning old checks failed');
      });
    }
  }

  /** Checks one monitor now and records what it found. */
  async check(m: MonitorTarget): Promise<void> {
    const { store, clock, ids } = this;
    const host = defaultDomain(m, this.appsDomain);
    const at = iso(clock.now());
    if (PAUSED.has(m.project_status) || !(await store.repos.deployments.anyRunning(m.project_id))) {
      await this.pause(m, at);
      return;
    }
    const result = await this.probe(host, m.check_path, Math.min(10_000, m.check_interval_sec * 1000));
    // failures while Slipway itself rolls the project out or stops it do not count
    const counted = result.ok || !(ROLLING.has(m.project_status) || (await store.repos.deployments.anyActive(m.project_id)));
    const from: MonitorState = { status: m.status, failures: m.failures, successes: m.successes, incident_id: m.incident_id };
    const e = evaluate(from, result.ok, counted, this.rules);
    const moved = await store.transaction(async (tx) => {
      const hour = `${at.slice(0, 13)}:00:00.000Z`;
      await tx.uptime.addCheck({ project_id: m.project_id, at, ok: result.ok ? 1 : 0, status_code: result.status, response_ms: result.response_ms, error: result.error });
      const rollup = (await tx.uptime.rollup(m.project_id, hour)) ?? { hour, checks: 0, failures: 0, sum_ms: 0, histogram: [] };
      await tx.uptime.putRollup(m.project_id, addToRollup(rollup, result.ok, result.response_ms));
      let incident = from.incident_id;
      if (e.transition === 'down') {
        incident = ids.id();
        await tx.uptime.openIncident({ id: incident, project_id: m.project_id, started_at: at, ended_at: null, cause: result.error ?? 'no answer' });
      } else if (e.transition === 'up' && incident !== null) {
        await tx.uptime.closeIncident(incident, at);
      }
      const ok = await tx.uptime.move(m.project_id, from, {
        ...e.state,
        incident_id: e.transition === 'up' ? null : incident,
        last_checked_at: at,
        last_response_ms: result.response_ms,
        last_error: result.error,
      });
      if (!ok) throw new Moved();
      if (e.transition !== null && incident !== null) await queueNotifications(ids, tx.uptime, m, `${e.transition}:${incident}`, e.transition, at);
      return true;
    }).catch((err: unknown) => {
      if (err instanceof Moved) return false;
      throw err;
    });
    if (!moved) return;
    if (e.transition !== null) {
      this.log.info({ project: m.project_id, transition: e.transition, error: result.error }, `uptime: ${m.slug} is ${e.transition}`);
      this.onQueued();
    }
    if (e.recheck) this.next.set(m.project_id, clock.now().getTime() + this.rules.recheckMs);
  }

  private async pause(m: MonitorTarget, at: string): Promise<void> {
    if (m.status === 'paused') return;
    const { repos } = this.store;
    if (m.incident_id !== null) await repos.uptime.closeIncident(m.incident_id, at);
    await repos.uptime.move(m.project_id, { status: m.status, failures: m.failures, successes: m.successes, incident_id: m.incident_id }, { status: 'paused', failures: 0, successes: 0, incident_id: null, last_checked_at: at, last_response_ms: null, last_error: null });
  }
}

class Moved extends Error {}

/**
 * One notification per configured channel, unique per transition (so never twice): the rows
 * queued now. `sending`: the caller delivers them itself (a test), so the notifier's queue
 * (`pending`) never picks them up as well.
 */
export async function queueNotifications(ids: IdSource, uptime: Repositories['uptime'], m: Pick<MonitorTarget, 'project_id' | 'chat_webhook_url' | 'notify_email'>, transition: string, event: AlertEvent['kind'], at: string, cause: string | null = null, status: 'pending' | 'sending' = 'pending'): Promise<UptimeNotificationRow[]> {
  const queued: UptimeNotificationRow[] = [];
  const channels = [...(m.chat_webhook_url === null ? [] : ['webhook']), ...(m.notify_email === null ? [] : ['email'])];
  for (const channel of channels) {
    const row: UptimeNotificationRow = { id: ids.id(), project_id: m.project_id, event, transition, channel, cause, status, attempts: 0, response_status: null, error: null, created_at: at, sent_at: null };
    if (await uptime.addNotification(row)) queued.push(row);
  }
  return queued;
}
