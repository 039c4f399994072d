import type { Static } from 'typebox';
import { AppError, invalid, unauthorized } from '../../domain/errors.js';
import type { DeployService, PushOutcome } from '../deployments/deploy.service.js';
import type { GitService } from '../projects/git.service.js';
import { decodePayload, EVENT_NAME, parsePush, payloadDigest, PayloadError, verifySignature, type BranchPush, type SignatureCheck } from './github-protocol.js';
import type { Duplicate, Ignored, Ping, Queued } from './webhooks.schema.js';

export const NOT_CONFIGURED = 'GitHub App webhooks are not configured on this Slipway (set --github-webhook-secret); a repository webhook delivers to its Git connection\'s own webhook_url.';

type Problem = Exclude<SignatureCheck, { ok: true }>['problem'];

const APP_SIGNATURE_PROBLEMS: Record<Problem, string> = {
  missing: 'The X-Hub-Signature-256 header is missing; give the GitHub App\'s webhook the same secret as --github-webhook-secret.',
  malformed: 'The X-Hub-Signature-256 header must be "sha256=" followed by 64 hexadecimal digits.',
  mismatch: 'The X-Hub-Signature-256 signature does not match the body; check that the GitHub App\'s webhook secret equals --github-webhook-secret.',
};

const CONNECTION_SIGNATURE_PROBLEMS: Record<Problem, string> = {
  missing: 'The X-Hub-Signature-256 header is missing; give the GitHub webhook the secret of its Git connection (webhook_secret).',
  malformed: 'The X-Hub-Signature-256 header must be "sha256=" followed by 64 hexadecimal digits.',
  mismatch: 'The X-Hub-Signature-256 signature does not match the body; give the GitHub webhook the current secret of its Git connection (POST …/git/webhook-secret makes a new one).',
};

export const UNKNOWN_WEBHOOK = 'No Git connection has this webhook URL; copy webhook_url from the project\'s Git connection again.';
export const NO_SECRET_YET =
  'This Git connection has no webhook secret yet; make one with POST /api/workspaces/:slug/projects/:project_slug/git/webhook-secret and give it to the GitHub webhook.';
export const UNREADABLE_SECRET =
  'This Git connection\'s webhook secret cannot be decrypted with this installation\'s secret key file (was it replaced?); make a new one with POST …/git/webhook-secret.';

const DELIVERY_ID = /^[A-Za-z0-9-]{1,64}$/;
const WEBHOOK_ID = /^[0-9a-f]{32}$/;

/** One delivery as it arrived: the raw body (its signature is checked before it is parsed) and GitHub's headers, unchecked. */
export interface Delivery {
  body: Buffer;
  /** X-Hub-Signature-256 */
  signature: string | string[] | undefined;
  /** X-GitHub-Event */
  event: string | string[] | undefined;
  /** X-GitHub-Delivery */
  id: string | string[] | undefined;
  contentType: string | undefined;
}

/** What the HTTP side does for a delivery: the signed-webhook rate limits (src/http/auth.ts) and the request's log. */
export interface DeliveryContext {
  /** a refused delivery (wrong signature, unknown webhook URL): spends the client address's tokens; throws 429 once they are spent */
  limitAddress(): void;
  /** a verified delivery to `receiver`: spends that receiver's tokens; throws 429 once they are spent */
  limitReceiver(receiver: string): void;
  log: { info(obj: object, msg: string): void };
}

/** The answer to a delivery, by status (webhooks.schema.ts). */
export type WebhookAnswer =
  | { status: 200; data: Static<typeof Ping> | Static<typeof Duplicate> }
  | { status: 202; data: Static<ReturnType<typeof Queued>> | Static<typeof Ignored> };

/** A verified push to a branch, and its delivery id. */
interface Verified {
  kind: 'push';
  push: BranchPush;
  delivery: string;
  digest: string;
}

/** A delivery answered without deploying anything: ping, other events, tags, deleted branches. */
interface Answered {
  kind: 'answer';
  answer: WebhookAnswer;
}

/**
 * GitHub deliveries (auto-deploy, docs/decisions.md#git): the signature, the event, the payload
 * and the once-only claim of each push. Once the signature is checked, a wrong one (or an unknown
 * webhook URL) spends the client address's tokens and a good one its receiver's
 * (docs/security.md#webhook-rate-limit). Neither the body nor the signature nor any secret is
 * ever logged.
 *
 * - A repository webhook (`POST /api/webhooks/github/:webhook_id`) is verified with that Git
 *   connection's own secret; it can deploy that connection's project only.
 * - The GitHub App's deliveries (`POST /api/webhooks/github`) are verified with
 *   `--github-webhook-secret`; they deploy only connections that use the delivering
 *   installation, linked to their own workspace.
 *
 * A push is acted on once: its delivery id (and its body) are claimed in the store first, and a
 * repeat of a delivery that did what it was for answers 200 without deploying; every answer says
 * per project what was done and why not (docs/api.md#webhooks). The deployments it queues build
 * the pushed commit only if it is still the branch's head when fetched.
 */
export class WebhookService {
  constructor(
    private readonly deploys: Pick<DeployService, 'claimDelivery' | 'releaseDelivery' | 'deployFromAppPush' | 'deployConnectionPush'>,
    private readonly git: Pick<GitService, 'webhookReceiver'>,
    /** `--github-webhook-secret`: the GitHub App's webhook secret; empty: App deliveries are refused with 503 */
    private readonly appSecret: string,
  ) {}

  /** A delivery of the GitHub App: deploys the connections of the delivering installation. */
  async fromApp(d: Delivery, ctx: DeliveryContext): Promise<WebhookAnswer> {
    if (this.appSecret === '') refuse(ctx, new AppError('UNAVAILABLE', NOT_CONFIGURED));
    const v = verify(d, ctx, this.appSecret, APP_SIGNATURE_PROBLEMS, 'app');
    if (v.kind === 'answer') return v.answer;
    const installationId = v.push.installationId;
    if (installationId === undefined) {
      return ignore('The delivery names no GitHub App installation; a repository webhook delivers to its Git connection\'s own webhook_url, signed with its own secret.');
    }
    return this.once(ctx, 'app', v, () => this.deploys.deployFromAppPush({ ...pushOf(v.push), installationId }));
  }

  /** A delivery of a repository webhook (the `webhook_url` of one Git connection): deploys that connection's project. */
  async toConnection(webhookId: string, d: Delivery, ctx: DeliveryContext): Promise<WebhookAnswer> {
    const receiver = WEBHOOK_ID.test(webhookId) ? await this.git.webhookReceiver(webhookId) : null;
    if (receiver === null) refuse(ctx, new AppError('NOT_FOUND', UNKNOWN_WEBHOOK));
    if (receiver.secret === null) refuse(ctx, unauthorized(receiver.unreadable ? UNREADABLE_SECRET : NO_SECRET_YET));
    const v = verify(d, ctx, receiver.secret, CONNECTION_SIGNATURE_PROBLEMS, receiver.webhookId);
    if (v.kind === 'answer') return v.answer;
    const { push } = v;
    if (push.repoFullName.toLowerCase() !== receiver.repoFullName.toLowerCase()) {
      return ignore(`This webhook's Git connection is for ${receiver.repoFullName}, not ${push.repoFullName}; nothing was deployed.`);
    }
    if (push.branch !== receiver.branch) {
      return ignore(`This webhook's Git connection deploys the branch ${receiver.branch}, not ${push.branch}; nothing was deployed.`);
    }
    if (!receiver.autoDeploy) return ignore('auto_deploy is off on this webhook\'s Git connection; nothing was deployed.');
    return this.once(ctx, receiver.webhookId, v, async () => {
      const o = await this.deploys.deployConnectionPush(receiver.projectId, pushOf(push));
      return o === null ? [] : [o];
    });
  }

  /**
   * Claims the delivery for `receiver`, then deploys. A repeat of a delivery already done answers
   * 200 and deploys nothing. A delivery is recorded as done only when it did what it was for:
   * when some project was not deployed for a cause that can be fixed (an empty wallet, the commit
   * already under way, an installation not linked), the claim is released, so that GitHub's
   * Redeliver deploys once the cause is fixed (a project already deployed is then
   * `duplicate_commit`, never deployed twice).
   */
  private async once(ctx: DeliveryContext, receiver: string, v: Verified, deploy: () => Promise<PushOutcome[]>): Promise<WebhookAnswer> {
    const { push, delivery } = v;
    const about = { event: 'push', delivery, repo_full_name: push.repoFullName, branch: push.branch };
    if (!(await this.deploys.claimDelivery(receiver, delivery, v.digest))) {
      ctx.log.info(about, 'GitHub push: a repeated delivery, nothing deployed');
      return {
        status: 200,
        data: { event: 'push', duplicate: true, reason: `Delivery ${delivery} was already processed and did what it was for (the same delivery id or the same body); nothing was deployed again.` },
      };
    }
    let outcomes: PushOutcome[];
    try {
      outcomes = await deploy();
    } catch (err) {
      // Released so that GitHub's redelivery can try again; a deployment this attempt did queue
      // is superseded by the retry's while it still waits.
      await this.deploys.releaseDelivery(receiver, delivery).catch(() => undefined);
      throw err;
    }
    const summary = pushSummary(push, outcomes);
    if (!summary.done) await this.deploys.releaseDelivery(receiver, delivery);
    const deployments = outcomes.flatMap((o) => (o.outcome === 'queued' && o.deployment_id !== null ? [o.deployment_id] : []));
    ctx.log.info({ ...about, deployments, outcome: summary.outcome, done: summary.done }, `GitHub push: ${summary.reason}`);
    return {
      status: 202,
      data: { event: 'push', repo_full_name: push.repoFullName, branch: push.branch, commit_sha: push.commitSha, deployments, ...summary, projects: outcomes },
    };
  }
}

/**
 * The checks every delivery goes through once its secret is known: a branch push is returned,
 * or the answer to a delivery that deploys nothing (ping, other events, tags, deletions).
 */
function verify(d: Delivery, ctx: DeliveryContext, secret: string, problems: Record<Problem, string>, receiver: string): Verified | Answered {
  const check = verifySignature(secret, d.body, d.signature);
  if (!check.ok) refuse(ctx, unauthorized(problems[check.problem]));
  // signed by the receiver's secret: GitHub's own, limited per receiver, never per address
  ctx.limitReceiver(receiver);

  const { event } = d;
  if (event === undefined || event === '') throw invalid('The X-GitHub-Event header is missing.');
  if (typeof event !== 'string' || !EVENT_NAME.test(event)) throw invalid('The X-GitHub-Event header is not a GitHub event name.');
  let payload: unknown;
  try {
    payload = decodePayload(d.body, d.contentType);
  } catch (err) {
    if (err instanceof PayloadError) throw invalid(err.message);
    throw err;
  }
  const delivery = d.id;
  const about = { event, delivery: typeof delivery === 'string' && DELIVERY_ID.test(delivery) ? delivery : undefined };

  if (event === 'ping') {
    ctx.log.info(about, 'GitHub webhook ping');
    return { kind: 'answer', answer: { status: 200, data: { event: 'ping' } } };
  }
  if (event !== 'push') {
    ctx.log.info(about, 'GitHub webhook event ignored');
    return { kind: 'answer', answer: { status: 202, data: { event, ignored: true, reason: `Slipway acts on push and ping events only, not on ${event}.` } } };
  }
  let push: ReturnType<typeof parsePush>;
  try {
    push = parsePush(payload);
  } catch (err) {
    if (err instanceof PayloadError) throw invalid(err.message);
    throw err;
  }
  if (push.kind === 'ignored') {
    ctx.log.info({ ...about, repo_full_name: push.repoFullName }, push.reason);
    return { kind: 'answer', answer: { status: 202, data: { event, ignored: true, reason: push.reason } } };
  }
  if (about.delivery === undefined) {
    throw invalid(delivery === undefined || delivery === '' ? 'The X-GitHub-Delivery header is missing; it tells one delivery from a repeat.' : 'The X-GitHub-Delivery header must be 1 to 64 letters, digits and "-".');
  }
  return { kind: 'push', push, delivery: about.delivery, digest: payloadDigest(d.body) };
}

/**
 * The signature (or the webhook URL) is wrong: the client address's tokens are spent, as for a
 * wrong API key, so that secrets and webhook ids cannot be guessed at speed.
 */
function refuse(ctx: DeliveryContext, err: AppError): never {
  ctx.limitAddress();
  throw err;
}

const ignore = (reason: string): WebhookAnswer => ({ status: 202, data: { event: 'push', ignored: true, reason } });

/** The answer's verdict on a push: what it did, in one sentence, and whether the delivery is done. */
export function pushSummary(push: BranchPush, outcomes: PushOutcome[]): { outcome: PushVerdict; done: boolean; reason: string } {
  const queued = outcomes.filter((o) => o.outcome === 'queued').length;
  const target = `${push.repoFullName}@${push.branch}`;
  if (outcomes.length === 0) {
    return { outcome: 'no_project', done: true, reason: `No project deploys ${target} from this delivery (none is connected with auto_deploy on); nothing was deployed.` };
  }
  if (queued === outcomes.length) {
    return { outcome: 'deployed', done: true, reason: `${queued.toString()} deployment${queued === 1 ? '' : 's'} of ${push.commitSha.slice(0, 12)} queued.` };
  }
  const n = outcomes.length;
  return {
    outcome: queued === 0 ? 'not_deployed' : 'partly_deployed',
    done: false,
    reason:
      `${queued.toString()} of ${n.toString()} project${n === 1 ? '' : 's'} deployed; projects[].reason says why ${n - queued === 1 ? 'one was' : 'the others were'} not. ` +
      'The delivery is not recorded as done: GitHub\'s Redeliver acts on it again once the cause is fixed.',
  };
}

export type PushVerdict = 'deployed' | 'partly_deployed' | 'not_deployed' | 'no_project';

const pushOf = (p: BranchPush) => ({ repoFullName: p.repoFullName, branch: p.branch, commitSha: p.commitSha, commitMessage: p.commitMessage });
