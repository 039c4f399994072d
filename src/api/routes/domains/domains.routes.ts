import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Services } from '../../services.js';

export const domainsRoutes: FastifyPluginAsyncTypebox<{ services: Services }> = async (_app, _opts) => {
  // routes come with the domains work
};
