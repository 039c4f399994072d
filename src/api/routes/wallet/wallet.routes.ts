import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Services } from '../../services.js';
import { accessOf } from '../../plugins/auth.js';
import { ok } from '../../schemas.js';
import * as s from './wallet.schema.js';

export const walletRoutes: FastifyPluginAsyncTypebox<{ services: Services }> = async (app, { services }) => {
  const { wallets } = services;

  app.get('/api/workspaces/:slug/wallet', { schema: s.getWallet, config: { action: 'workspace.read' } }, async (req) =>
    ok(await wallets.get(accessOf(req))),
  );

  app.put('/api/workspaces/:slug/wallet/alert-threshold', { schema: s.setAlertThreshold, config: { action: 'billing.manage' } }, async (req) =>
    ok(await wallets.setAlertThreshold(accessOf(req), req.body.threshold)),
  );
};
