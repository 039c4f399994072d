import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { GatewayError, GatewaySignatureError } from './gateways/gateway.js';
import { invalid, unauthorized } from '../../domain/errors.js';
import type { WalletService } from './wallet.service.js';
import { accessOf } from '../../http/auth.js';
import { ok } from '../../http/schemas.js';
import * as s from './wallet.schema.js';

/** The wallet (docs/billing.md): members read the balance and usage; owners and admins the rest. */
export const walletRoutes: FastifyPluginAsyncTypebox<{ wallets: WalletService }> = async (app, { wallets }) => {

  app.get('/api/workspaces/:slug/wallet', { schema: s.getWallet, config: { action: 'workspace.read' } }, async (req) => ok(await wallets.get(accessOf(req))));

  app.get('/api/workspaces/:slug/wallet/usage', { schema: s.getUsage, config: { action: 'workspace.read' } }, async (req) => ok(await wallets.usage(accessOf(req))));

  app.get('/api/workspaces/:slug/wallet/transactions', { schema: s.listTransactions, config: { action: 'billing.manage' } }, async (req) =>
    ok(await wallets.transactions(accessOf(req), req.query.page, req.query.limit)),
  );

  app.get('/api/workspaces/:slug/wallet/payments', { schema: s.listPayments, config: { action: 'billing.manage' } }, async (req) =>
    ok(await wallets.payments(accessOf(req), req.query.page, req.query.limit)),
  );

  app.post('/api/workspaces/:slug/wallet/topup/gatewaya', { schema: s.topupA, config: { action: 'billing.manage' } }, async (req) =>
    ok(await wallets.topup(accessOf(req), 'gatewaya', req.body)),
  );

  app.post('/api/workspaces/:slug/wallet/topup/gatewayb', { schema: s.topupB, config: { action: 'billing.manage' } }, async (req) =>
    ok(await wallets.topup(accessOf(req), 'gatewayb', req.body)),
  );

  app.put('/api/workspaces/:slug/wallet/alert-threshold', { schema: s.setAlertThreshold, config: { action: 'billing.manage' } }, async (req) =>
    ok(await wallets.setAlertThreshold(accessOf(req), req.body.threshold)),
  );
};

/**
 * The gateways' webhooks, without an API key (rate-limited per address). Encapsulated: the body
 * stays raw for the signature check, which the gateways verify against the exact bytes.
 */
export const paymentWebhookRoutes: FastifyPluginAsyncTypebox<{ wallets: WalletService }> = async (app, { wallets }) => {
  app.removeAllContentTypeParsers();
  const raw = (_req: unknown, body: Buffer, done: (err: Error | null, body?: Buffer) => void) => {
    done(null, body);
  };
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, raw);

  app.post('/api/webhooks/payments/:gateway', { schema: s.paymentWebhook, config: { public: true } }, async (req) => {
    const body = req.body;
    if (!Buffer.isBuffer(body)) throw invalid('The body must be the gateway\'s JSON event, sent as application/json.');
    try {
      return ok({ outcome: await wallets.receiveWebhook(req.params.gateway, body, req.headers) });
    } catch (err) {
      if (err instanceof GatewaySignatureError) throw unauthorized(`The webhook signature does not hold: ${err.message}`);
      if (err instanceof GatewayError) throw invalid(`The webhook body cannot be read: ${err.message}`);
      throw err;
    }
  });
};
