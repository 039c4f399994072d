import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { AppError, invalid, unauthorized } from '../../../domain/errors.js';
import { decodePayload, EVENT_NAME, parsePush, PayloadError, verifySignature, type SignatureCheck } from '../../../webhooks/github.js';
import type { Services } from '../../services.js';
import { ok } from '../../schemas.js';
import * as s from './webhooks.schema.js';

export interface WebhookOptions {
  services: Services;
  /** `--github-webhook-secret`; empty: every delivery is refused with 503 */
  githubSecret: string;
}

export const NOT_CONFIGURED = 'GitHub webhooks are not configured on this Slipway (set --github-webhook-secret).';

const SIGNATURE_PROBLEMS: Record<Exclude<SignatureCheck, { ok: true }>['problem'], string> = {
  missing: 'The X-Hub-Signature-256 header is missing; give the GitHub webhook the same secret as --github-webhook-secret.',
  malformed: 'The X-Hub-Signature-256 header must be "sha256=" followed by 64 hexadecimal digits.',
  mismatch: 'The X-Hub-Signature-256 signature does not match the body; check that the GitHub webhook secret equals --github-webhook-secret.',
};

const DELIVERY_ID = /^[A-Za-z0-9-]{1,64}$/;

/**
 * `POST /api/webhooks/github` (DESIGN §4, auto-deploy). Public: no API key, limited per client
 * address by the auth hook. The body is kept raw until its signature is verified; then it is
 * parsed here. Neither the body nor the signature is ever logged.
 */
export const webhookRoutes: FastifyPluginAsyncTypebox<WebhookOptions> = async (app, { services, githubSecret }) => {
  // This plugin is encapsulated: the raw-body parsers apply to its route only, and replace the
  // server's (any other content type is 415). The server's bodyLimit (1 MiB) still bounds them.
  app.removeAllContentTypeParsers();
  const raw = (_req: unknown, body: Buffer, done: (err: Error | null, body?: Buffer) => void) => {
    done(null, body);
  };
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, raw);
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'buffer' }, raw);

  app.post('/api/webhooks/github', { schema: s.githubWebhook, config: { public: true } }, async (req, reply) => {
    if (githubSecret === '') throw new AppError('UNAVAILABLE', NOT_CONFIGURED);
    const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    const check = verifySignature(githubSecret, body, req.headers['x-hub-signature-256']);
    if (!check.ok) throw unauthorized(SIGNATURE_PROBLEMS[check.problem]);

    const event = req.headers['x-github-event'];
    if (event === undefined || event === '') throw invalid('The X-GitHub-Event header is missing.');
    if (!EVENT_NAME.test(event)) throw invalid('The X-GitHub-Event header is not a GitHub event name.');
    let payload: unknown;
    try {
      payload = decodePayload(body, req.headers['content-type']);
    } catch (err) {
      if (err instanceof PayloadError) throw invalid(err.message);
      throw err;
    }
    const delivery = req.headers['x-github-delivery'];
    const about = { event, delivery: delivery !== undefined && DELIVERY_ID.test(delivery) ? delivery : undefined };

    if (event === 'ping') {
      req.log.info(about, 'GitHub webhook ping');
      return reply.code(200).send(ok({ event: 'ping' as const }));
    }
    if (event !== 'push') {
      req.log.info(about, 'GitHub webhook event ignored');
      return reply.code(202).send(ok({ event, ignored: true as const, reason: `Slipway acts on push and ping events only, not on ${event}.` }));
    }

    let push: ReturnType<typeof parsePush>;
    try {
      push = parsePush(payload);
    } catch (err) {
      if (err instanceof PayloadError) throw invalid(err.message);
      throw err;
    }
    if (push.kind === 'ignored') {
      req.log.info({ ...about, repo_full_name: push.repoFullName }, push.reason);
      return reply.code(202).send(ok({ event, ignored: true as const, reason: push.reason }));
    }
    const queued = await services.deploys.deployFromPush({
      repoFullName: push.repoFullName,
      branch: push.branch,
      commitSha: push.commitSha,
      commitMessage: push.commitMessage,
    });
    const deployments = queued.map((d) => d.id);
    req.log.info({ ...about, repo_full_name: push.repoFullName, branch: push.branch, deployments }, `GitHub push: ${deployments.length} deployment(s) queued`);
    return reply.code(202).send(ok({ event: 'push' as const, repo_full_name: push.repoFullName, branch: push.branch, deployments }));
  });
};
