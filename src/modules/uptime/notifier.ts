import { iso, type Clock, type Random } from '../../domain/clock.js';
import type { Mailer } from '../../adapters/notify/mailer.js';
import type { SecretBox } from '../../adapters/secrets/secret-box.js';
import { sendEmail, sendWebhook, type AlertEvent, type DeliveryResult } from '../../adapters/notify/channels.js';
import type { TargetPolicy } from '../../adapters/notify/ssrf.js';
import { defaultDomain, defaultUrl } from '../projects/resolve.js';
import type { Repositories, UptimeNotificationRow } from '../../store/repositories/index.js';
import type { CheckerLog } from './uptime.worker.js';

/** The webhook URL is a credential (whoever holds it can post to the channel): sealed per project. */
export const webhookContext = (projectId: string): string => `uptime:${projectId}`;

export interface NotifierOptions {
  /** the queued notifications and their monitors; the project and workspace a notification names */
  repos: Pick<Repositories, 'uptime' | 'projects' | 'workspaces'>;
  clock: Clock;
  /** the retries' jitter */
  random: Random;
  /** opens the monitors' sealed webhook URLs */
  secrets: SecretBox;
  /** the e-mail channel (`--smtp-url`); absent: e-mail notifications fail as undeliverable */
  mailer?: Mailer | undefined;
  /** apps get `<host label>.<appsDomain>`, served on `routerPort`: the URL a notification shows */
  appsDomain: string;
  routerPort: number;
  /** `--notify-allow-private`: whether webhooks may target loopback, link-local and private addresses */
  policy: TargetPolicy;
  log: CheckerLog;
  /** per delivery; tests make them quick */
  attempts?: number;
  backoffMs?: number;
}

/**
 * Delivers queued uptime notifications (docs/uptime.md#notifications): each row once, to its
 * channel, with retries and back-off; the outcome (sent or failed, attempts, the answer's status,
 * the error) is the delivery log of `GET …/uptime/notifications`. Rows still pending after a
 * restart are delivered by the next leader.
 */
export class UptimeNotifier {
  private running: Promise<void> | null = null;
  private again = false;

  private readonly repos: NotifierOptions['repos'];
  private readonly clock: Clock;
  private readonly random: Random;
  private readonly secrets: SecretBox;
  private readonly mailer: Mailer | undefined;
  private readonly appsDomain: string;
  private readonly routerPort: number;
  private readonly policy: TargetPolicy;
  private readonly log: CheckerLog;
  private readonly attempts: number | undefined;
  private readonly backoffMs: number | undefined;

  constructor(o: NotifierOptions) {
    this.repos = o.repos;
    this.clock = o.clock;
    this.random = o.random;
    this.secrets = o.secrets;
    this.mailer = o.mailer;
    this.appsDomain = o.appsDomain;
    this.routerPort = o.routerPort;
    this.policy = o.policy;
    this.log = o.log;
    this.attempts = o.attempts;
    this.backoffMs = o.backoffMs;
  }

  /** Delivers what is pending now (a call during a run makes it look again at its end). */
  wake(): Promise<void> {
    if (this.running !== null) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      do {
        this.again = false;
        try {
          for (const row of await this.repos.uptime.pendingNotifications()) {
            const result = await this.deliver(row);
            if (!result.ok) this.log.warn({ project: row.project_id, channel: row.channel, event: row.event, error: result.error }, 'uptime: a notification was not delivered');
          }
        } catch (err) {
          this.log.error({ err }, 'uptime: delivering notifications failed; the next wake-up tries again');
        }
      } while (this.wokenMeanwhile());
    })().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  private wokenMeanwhile(): boolean {
    return this.again;
  }

  /**
   * Sends one queued notification and records the outcome. Not logged here: a test notification
   * (UptimeService) answers its caller with the outcome; the queue's deliveries are logged by wake().
   */
  async deliver(row: UptimeNotificationRow): Promise<DeliveryResult> {
    const { repos } = this;
    const event = await this.eventOf(row);
    const monitor = await repos.uptime.find(row.project_id);
    let result: DeliveryResult;
    if (event === null || monitor === undefined) {
      result = { channel: row.channel === 'email' ? 'email' : 'webhook', ok: false, attempts: 0, status: null, error: 'the project or its monitor is gone' };
    } else if (row.channel === 'webhook') {
      const url = monitor.chat_webhook_url === null ? null : this.secrets.tryOpen(monitor.chat_webhook_url, webhookContext(row.project_id));
      result =
        url === null
          ? { channel: 'webhook', ok: false, attempts: 0, status: null, error: 'the monitor has no readable chat_webhook_url any more' }
          : await sendWebhook(url, event, { policy: this.policy, ...this.retries() });
    } else {
      result =
        monitor.notify_email === null
          ? { channel: 'email', ok: false, attempts: 0, status: null, error: 'the monitor has no notify_email any more' }
          : await sendEmail(this.mailer, monitor.notify_email, event, this.retries());
    }
    await repos.uptime.settleNotification(row.id, {
      status: result.ok ? 'sent' : 'failed',
      attempts: result.attempts,
      response_status: result.status,
      error: result.error,
      sent_at: result.ok ? iso(this.clock.now()) : null,
    });
    return result;
  }

  private retries(): { attempts?: number; backoffMs?: number; clock: Clock; random: Random } {
    return { clock: this.clock, random: this.random, ...(this.attempts === undefined ? {} : { attempts: this.attempts }), ...(this.backoffMs === undefined ? {} : { backoffMs: this.backoffMs }) };
  }

  /** What the notification says: its project, its address and the incident it is about. */
  private async eventOf(row: UptimeNotificationRow): Promise<AlertEvent | null> {
    const { repos } = this;
    const project = await repos.projects.byId(row.project_id);
    const monitor = await repos.uptime.find(row.project_id);
    if (project === undefined || monitor === undefined) return null;
    const workspace = await repos.workspaces.byId(project.workspace_id);
    const incidentId = row.transition.startsWith('down:') || row.transition.startsWith('up:') ? row.transition.slice(row.transition.indexOf(':') + 1) : null;
    const incident = incidentId === null ? undefined : await repos.uptime.incident(incidentId);
    const { appsDomain, routerPort } = this;
    return {
      kind: row.event === 'down' || row.event === 'up' || row.event === 'crash' ? row.event : 'test',
      project: { id: project.id, name: project.name, slug: project.slug, workspace: workspace?.slug ?? '' },
      url: defaultUrl(defaultDomain(project, appsDomain), routerPort) + monitor.check_path,
      at: row.event === 'up' ? (incident?.ended_at ?? row.created_at) : row.created_at,
      cause: row.event === 'test' ? null : (row.cause ?? incident?.cause ?? null),
      response_ms: row.event === 'up' ? monitor.last_response_ms : null,
      incident_started_at: incident?.started_at ?? null,
    };
  }
}
