import { describe, expect, it } from 'vitest';
import { AppError } from '../../domain/errors.js';
import type { PushOutcome } from '../deployments/deploy.service.js';
import type { WebhookReceiver } from '../projects/git.service.js';
import { sign } from './github-protocol.js';
import { NOT_CONFIGURED, UNKNOWN_WEBHOOK, WebhookService, type Delivery, type DeliveryContext } from './webhooks.service.js';

const SECRET = 'app-secret';
const WEBHOOK = 'f'.repeat(32);
const SHA = 'a'.repeat(40);

/** The rate limits and the log as the auth plugin gives them, recorded. */
function context(): DeliveryContext & { spent: string[] } {
  const spent: string[] = [];
  return { spent, limitAddress: () => spent.push('address'), limitReceiver: (r) => spent.push(`receiver:${r}`), log: { info: () => undefined } };
}

function delivery(event: string, payload: object, secret = SECRET, id = 'd-1'): Delivery {
  const body = Buffer.from(JSON.stringify(payload));
  return { body, signature: sign(secret, body), event, id, contentType: 'application/json' };
}

const push = (over: object = {}) => ({ ref: 'refs/heads/main', after: SHA, repository: { full_name: 'acme/shop' }, head_commit: { message: 'fix' }, ...over });

function service(o: { claimed?: boolean; receiver?: WebhookReceiver | null; outcomes?: PushOutcome[]; appSecret?: string } = {}) {
  const calls: string[] = [];
  const deploys = {
    claimDelivery: (receiver: string, id: string) => { calls.push(`claim ${receiver} ${id}`); return Promise.resolve(o.claimed ?? true); },
    releaseDelivery: (receiver: string, id: string) => { calls.push(`release ${receiver} ${id}`); return Promise.resolve(); },
    deployFromAppPush: () => Promise.resolve(o.outcomes ?? []),
    deployConnectionPush: () => Promise.resolve(o.outcomes?.[0] ?? null),
  };
  const git = { webhookReceiver: () => Promise.resolve(o.receiver ?? null) };
  return { calls, webhooks: new WebhookService(deploys, git, o.appSecret ?? SECRET) };
}

const receiver: WebhookReceiver = { projectId: 'p1', webhookId: WEBHOOK, repoFullName: 'acme/shop', branch: 'main', autoDeploy: true, secret: 'conn-secret', unreadable: false };
const queued: PushOutcome = { project_id: 'p1', outcome: 'queued', deployment_id: 'dep1', reason: 'queued' };

describe('WebhookService', () => {
  it('refuses App deliveries without --github-webhook-secret, spending the address tokens', async () => {
    const ctx = context();
    await expect(service({ appSecret: '' }).webhooks.fromApp(delivery('ping', {}), ctx)).rejects.toThrow(new AppError('UNAVAILABLE', NOT_CONFIGURED));
    expect(ctx.spent).toEqual(['address']);
  });

  it('spends the address tokens on a wrong signature, the receiver tokens on a good one', async () => {
    const { webhooks } = service();
    const wrong = context();
    await expect(webhooks.fromApp(delivery('ping', {}, 'another secret'), wrong)).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
    expect(wrong.spent).toEqual(['address']);
    const good = context();
    expect(await webhooks.fromApp(delivery('ping', {}), good)).toEqual({ status: 200, data: { event: 'ping' } });
    expect(good.spent).toEqual(['receiver:app']);
  });

  it('answers 202 ignored to other events and to an App push without an installation', async () => {
    const { webhooks } = service();
    expect(await webhooks.fromApp(delivery('issues', {}), context())).toMatchObject({ status: 202, data: { event: 'issues', ignored: true } });
    expect(await webhooks.fromApp(delivery('push', push()), context())).toMatchObject({ status: 202, data: { event: 'push', ignored: true } });
  });

  it('refuses an unknown webhook URL as a wrong signature', async () => {
    const ctx = context();
    await expect(service({ receiver: null }).webhooks.toConnection(WEBHOOK, delivery('ping', {}), ctx)).rejects.toThrow(UNKNOWN_WEBHOOK);
    expect(ctx.spent).toEqual(['address']);
  });

  it('claims a connection push once: deploys and keeps the claim when done, answers a repeat 200 duplicate', async () => {
    const first = service({ receiver, outcomes: [queued] });
    const answer = await first.webhooks.toConnection(WEBHOOK, delivery('push', push(), 'conn-secret'), context());
    expect(answer).toMatchObject({ status: 202, data: { outcome: 'deployed', done: true, deployments: ['dep1'], commit_sha: SHA } });
    expect(first.calls).toEqual([`claim ${WEBHOOK} d-1`]);
    const again = service({ receiver, claimed: false });
    expect(await again.webhooks.toConnection(WEBHOOK, delivery('push', push(), 'conn-secret'), context())).toMatchObject({ status: 200, data: { duplicate: true } });
  });

  it('releases the claim when a project was not deployed, so that a redelivery acts again', async () => {
    const { calls, webhooks } = service({ receiver, outcomes: [{ ...queued, outcome: 'payment_required' }] });
    expect(await webhooks.toConnection(WEBHOOK, delivery('push', push(), 'conn-secret'), context())).toMatchObject({ status: 202, data: { outcome: 'not_deployed', done: false } });
    expect(calls).toEqual([`claim ${WEBHOOK} d-1`, `release ${WEBHOOK} d-1`]);
  });

  it('ignores a push for another branch of the connection without claiming it', async () => {
    const { calls, webhooks } = service({ receiver });
    expect(await webhooks.toConnection(WEBHOOK, delivery('push', push({ ref: 'refs/heads/dev' }), 'conn-secret'), context())).toMatchObject({ status: 202, data: { ignored: true } });
    expect(calls).toEqual([]);
  });
});
