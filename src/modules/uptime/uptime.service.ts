import { iso, type Clock, type IdSource } from '../../domain/clock.js';
import { invalid } from '../../domain/errors.js';
import { defaultDomain, defaultUrl, resolveProject, type ProjectRow, type ProjectRef } from '../projects/resolve.js';
import type { Repositories, Rollup, UptimeMonitorRow } from '../../store/repositories/index.js';
import type { SecretBox } from '../../adapters/secrets/secret-box.js';
import type { ProjectPolicy } from '../projects/policy.js';
import type { NotifyPolicy } from './policy.js';
import { checkUrlShape } from '../../adapters/notify/ssrf.js';
import { queueNotifications, UPTIME_BUCKETS_MS } from './uptime.worker.js';
import { webhookContext, type UptimeNotifier } from './notifier.js';
import type { Access } from '../../domain/access.js';
import type { UptimeHistory, UptimeMonitor, UptimeNotificationPage, UptimeTestResult } from './uptime.schema.js';

export interface UptimeInput {
  enabled?: boolean | undefined;
  check_interval_sec?: number | undefined;
  check_path?: string | undefined;
  chat_webhook_url?: string | null | undefined;
  notify_email?: string | null | undefined;
}

/** A project without a monitor row reads as this; the first PUT writes it with the changes. */
export const UPTIME_DEFAULTS = {
  enabled: 0,
  check_interval_sec: 60,
  check_path: '/',
  chat_webhook_url: null,
  notify_email: null,
  status: 'unknown',
  last_checked_at: null,
  last_response_ms: null,
  failures: 0,
  successes: 0,
  incident_id: null,
  last_error: null,
} as const satisfies Omit<UptimeMonitorRow, 'project_id' | 'updated_at'>;

export type HistoryPeriod = UptimeHistory['period'];

const PERIOD_MS: Record<HistoryPeriod, number> = { '24h': 86_400_000, '7d': 7 * 86_400_000, '30d': 30 * 86_400_000 };

/** Uptime monitors of projects: their settings, history and notifications (the checker is the leader's: checker.ts). */
export class UptimeService {
  constructor(
    private readonly repos: Pick<Repositories, 'projects' | 'uptime'>,
    private readonly clock: Clock,
    private readonly ids: IdSource,
    /** seals the chat webhook URLs (a credential) */
    private readonly secrets: Pick<SecretBox, 'seal' | 'tryOpen'>,
    /** where a project is checked: its default host through the router */
    private readonly hosts: Pick<ProjectPolicy, 'appsDomain' | 'routerPort'>,
    private readonly targets: NotifyPolicy,
    private readonly notifier: UptimeNotifier,
  ) {}

  async get(access: Access, projectSlug: ProjectRef): Promise<UptimeMonitor> {
    const project = await resolveProject(this.repos, access, projectSlug);
    const row = await this.repos.uptime.find(project.id);
    return this.view(access, project, row ?? { ...UPTIME_DEFAULTS, project_id: project.id, updated_at: project.created_at });
  }

  /**
   * Changes only the fields given. One upsert statement: the first PUT creates the row from the
   * defaults, and two concurrent PUTs of different fields both take effect.
   */
  async update(access: Access, projectSlug: ProjectRef, input: UptimeInput): Promise<UptimeMonitor> {
    if (typeof input.chat_webhook_url === 'string') {
      const problem = checkUrlShape(input.chat_webhook_url, this.targets);
      if (problem !== null) throw invalid(problem);
    }
    const project = await resolveProject(this.repos, access, projectSlug);
    const now = iso(this.clock.now());
    const patch: Partial<Omit<UptimeMonitorRow, 'project_id'>> = { updated_at: now };
    if (input.enabled !== undefined) patch.enabled = input.enabled ? 1 : 0;
    if (input.check_interval_sec !== undefined) patch.check_interval_sec = input.check_interval_sec;
    if (input.check_path !== undefined) patch.check_path = input.check_path;
    if (input.chat_webhook_url !== undefined) {
      patch.chat_webhook_url =
        input.chat_webhook_url === null ? null : this.secrets.seal(input.chat_webhook_url, webhookContext(project.id));
    }
    if (input.notify_email !== undefined) patch.notify_email = input.notify_email;
    const row = await this.repos.uptime.upsert({ ...UPTIME_DEFAULTS, project_id: project.id, ...patch, updated_at: now }, patch);
    return this.view(access, project, row);
  }

  /** Availability, response times, a series and the incidents of the last 24 hours, 7 or 30 days. */
  async history(access: Access, projectSlug: ProjectRef, period: HistoryPeriod): Promise<UptimeHistory> {
    const project = await resolveProject(this.repos, access, projectSlug);
    const now = this.clock.now();
    const from = new Date(now.getTime() - PERIOD_MS[period]);
    const { uptime } = this.repos;
    const incidents = (await uptime.incidentsSince(project.id, iso(from))).map((i) => ({
      id: i.id,
      started_at: i.started_at,
      ended_at: i.ended_at,
      duration_sec: Math.round(((i.ended_at === null ? now.getTime() : Date.parse(i.ended_at)) - Date.parse(i.started_at)) / 1000),
      cause: i.cause,
    }));
    const base = { period, from: iso(from), to: iso(now), incidents };
    if (period === '24h') {
      const checks = await uptime.checksSince(project.id, iso(from));
      const times = checks.flatMap((c) => (c.ok === 1 && c.response_ms !== null ? [c.response_ms] : [])).sort((a, b) => a - b);
      const failures = checks.filter((c) => c.ok !== 1).length;
      const hours = new Map<string, { checks: number; failures: number; sum: number; timed: number }>();
      for (const c of checks) {
        const h = `${c.at.slice(0, 13)}:00:00.000Z`;
        const b = hours.get(h) ?? { checks: 0, failures: 0, sum: 0, timed: 0 };
        b.checks++;
        if (c.ok !== 1) b.failures++;
        else if (c.response_ms !== null) {
          b.sum += c.response_ms;
          b.timed++;
        }
        hours.set(h, b);
      }
      return {
        ...base,
        checks: checks.length,
        failures,
        availability: percent(checks.length, failures),
        response_ms: { avg: times.length === 0 ? null : Math.round(times.reduce((a, b) => a + b, 0) / times.length), p50: quantile(times, 0.5), p95: quantile(times, 0.95), p99: quantile(times, 0.99) },
        series: [...hours].map(([start, b]) => ({ start, checks: b.checks, failures: b.failures, availability: percent(b.checks, b.failures), avg_ms: b.timed === 0 ? null : Math.round(b.sum / b.timed) })),
      };
    }
    const rollups = await uptime.rollupsSince(project.id, `${iso(from).slice(0, 13)}:00:00.000Z`);
    const buckets = new Map<string, Rollup>();
    for (const r of rollups) {
      const start = period === '30d' ? `${r.hour.slice(0, 10)}T00:00:00.000Z` : r.hour;
      const b = buckets.get(start);
      buckets.set(start, b === undefined ? { ...r, hour: start } : { hour: start, checks: b.checks + r.checks, failures: b.failures + r.failures, sum_ms: b.sum_ms + r.sum_ms, histogram: sumHistograms(b.histogram, r.histogram) });
    }
    const all = rollups.reduce<Rollup>((a, r) => ({ hour: a.hour, checks: a.checks + r.checks, failures: a.failures + r.failures, sum_ms: a.sum_ms + r.sum_ms, histogram: sumHistograms(a.histogram, r.histogram) }), { hour: '', checks: 0, failures: 0, sum_ms: 0, histogram: [] });
    const ok = all.checks - all.failures;
    return {
      ...base,
      checks: all.checks,
      failures: all.failures,
      availability: percent(all.checks, all.failures),
      response_ms: { avg: ok === 0 ? null : Math.round(all.sum_ms / ok), p50: bucketQuantile(all.histogram, 0.5), p95: bucketQuantile(all.histogram, 0.95), p99: bucketQuantile(all.histogram, 0.99) },
      series: [...buckets.values()].map((b) => ({ start: b.hour, checks: b.checks, failures: b.failures, availability: percent(b.checks, b.failures), avg_ms: b.checks - b.failures === 0 ? null : Math.round(b.sum_ms / (b.checks - b.failures)) })),
    };
  }

  /** The delivery log: every notification of the project, newest first. */
  async notifications(access: Access, projectSlug: ProjectRef, page: number, limit: number): Promise<UptimeNotificationPage> {
    const project = await resolveProject(this.repos, access, projectSlug);
    const { rows, total } = await this.repos.uptime.notifications(project.id, limit, (page - 1) * limit);
    return {
      notifications: rows.map((r) => ({ id: r.id, event: r.event, channel: r.channel, status: r.status, attempts: r.attempts, response_status: r.response_status, error: r.error, created_at: r.created_at, sent_at: r.sent_at })),
      total,
      page,
      limit,
    };
  }

  /** A test notification to each configured channel, now: what each answered. */
  async test(access: Access, projectSlug: ProjectRef): Promise<UptimeTestResult> {
    const project = await resolveProject(this.repos, access, projectSlug);
    const monitor = await this.repos.uptime.find(project.id);
    if (monitor === undefined || (monitor.chat_webhook_url === null && monitor.notify_email === null)) {
      throw invalid('The monitor has neither chat_webhook_url nor notify_email: set one with PUT …/uptime first.');
    }
    const now = iso(this.clock.now());
    const queued = await queueNotifications(this.ids, this.repos.uptime, monitor, `test:${this.ids.id()}`, 'test', now, null, 'sending');
    const view: UptimeTestResult = { webhook: null, email: null };
    for (const row of queued) {
      const { channel, ...result } = await this.notifier.deliver(row);
      view[channel] = result;
    }
    return view;
  }

  private view(_access: Access, project: ProjectRow, row: UptimeMonitorRow): UptimeMonitor {
    const { appsDomain, routerPort } = this.hosts;
    return {
      enabled: row.enabled === 1,
      check_interval_sec: row.check_interval_sec,
      check_path: row.check_path,
      check_url: defaultUrl(defaultDomain(project, appsDomain), routerPort) + row.check_path,
      // sealed under another key file (replaced?): shown as unset, until a new URL is PUT
      chat_webhook_url: row.chat_webhook_url === null ? null : this.secrets.tryOpen(row.chat_webhook_url, webhookContext(project.id)),
      notify_email: row.notify_email,
      status: row.status,
      last_checked_at: row.last_checked_at,
      last_response_ms: row.last_response_ms,
    };
  }
}

const percent = (checks: number, failures: number): number | null => (checks === 0 ? null : Math.round(((checks - failures) / checks) * 100_000) / 1000);

/** The nearest-rank quantile of sorted values. */
function quantile(sorted: readonly number[], q: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? null;
}

function sumHistograms(a: readonly number[], b: readonly number[]): number[] {
  return Array.from({ length: Math.max(a.length, b.length) }, (_, i) => (a[i] ?? 0) + (b[i] ?? 0));
}

/** The upper bound of the histogram bucket the quantile falls in; null when it is the open last one or empty. */
function bucketQuantile(histogram: readonly number[], q: number): number | null {
  const total = histogram.reduce((a, b) => a + b, 0);
  if (total === 0) return null;
  let seen = 0;
  for (const [i, n] of histogram.entries()) {
    seen += n;
    if (seen >= q * total) return UPTIME_BUCKETS_MS[i] ?? null;
  }
  return null;
}
