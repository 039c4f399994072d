import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ok } from '../../http/schemas.js';
import * as s from './webhooks.schema.js';
import type { Delivery, WebhookAnswer, WebhookService } from './webhooks.service.js';

/**
 * GitHub deliveries (auto-deploy, docs/decisions.md#git; the protocol is in webhooks.service.ts).
 * Public: no API key; the auth plugin limits them once the service has checked the signature.
 * The body is kept raw until its signature is verified.
 */
export const webhookRoutes: FastifyPluginAsyncTypebox<{ webhooks: WebhookService }> = async (app, { webhooks }) => {
  // This plugin is encapsulated: the raw-body parsers apply to its routes only, and replace the
  // server's (any other content type is 415). The server's bodyLimit (1 MiB) still bounds them.
  app.removeAllContentTypeParsers();
  const raw = (_req: unknown, body: Buffer, done: (err: Error | null, body?: Buffer) => void) => {
    done(null, body);
  };
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, raw);
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'buffer' }, raw);

  const delivery = (req: FastifyRequest): Delivery => ({
    body: Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0),
    signature: req.headers['x-hub-signature-256'],
    event: req.headers['x-github-event'],
    id: req.headers['x-github-delivery'],
    contentType: req.headers['content-type'],
  });
  const send = (reply: FastifyReply, a: WebhookAnswer) => (a.status === 200 ? reply.code(200).send(ok(a.data)) : reply.code(202).send(ok(a.data)));

  app.post('/api/webhooks/github', { schema: s.githubAppWebhook, config: { webhook: true } }, async (req, reply) => send(reply, await webhooks.fromApp(delivery(req), req)));

  app.post('/api/webhooks/github/:webhook_id', { schema: s.connectionWebhook, config: { webhook: true } }, async (req, reply) =>
    send(reply, await webhooks.toConnection(req.params.webhook_id, delivery(req), req)),
  );
};
