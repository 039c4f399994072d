import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { AppError, forbidden, notFound } from '../../domain/errors.js';
import { ACTIONS, allows, type Action } from '../../domain/roles.js';
import type { Access, Caller } from '../../tenancy/context.js';
import type { ApiKeyService } from '../../tenancy/api-keys.service.js';
import type { Store } from '../../store/db.js';
import { TokenBuckets } from '../rate-limit.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The permission a workspace route needs (DESIGN §3); implies a member of `:slug`. */
    action?: Action;
    /** No API key needed (invitation accept, webhooks, health): limited per client address. */
    public?: boolean;
    /** Health and metrics probes: no key and no rate limit. */
    probe?: boolean;
    /**
     * A WebSocket stream: the handshake must complete even when the caller may not read it, so
     * that the refusal arrives the spec's way, as one `[ERROR] …` frame (DESIGN §5).
     */
    stream?: boolean;
  }
  interface FastifyRequest {
    caller: Caller | null;
    access: Access | null;
    /** why a stream route refused the caller; the handler reports it */
    refusal: AppError | null;
  }
}

export interface AuthOptions {
  store: Store;
  apiKeys: ApiKeyService;
  keyBuckets: TokenBuckets;
  addressBuckets: TokenBuckets;
}

/** The key from the `X-API-Key` header, or (for WebSocket handshakes from browsers) `?api_key=`. */
export function presentedKey(request: FastifyRequest): string | undefined {
  const header = request.headers['x-api-key'];
  if (typeof header === 'string') return header;
  const query = request.query as Record<string, unknown> | undefined;
  const fromQuery = query?.['api_key'];
  const upgrade = request.headers.upgrade?.toLowerCase() === 'websocket';
  return upgrade && typeof fromQuery === 'string' ? fromQuery : undefined;
}

const tooMany = (seconds: number) =>
  new AppError('RATE_LIMITED', `Too many requests; retry in ${seconds} second${seconds === 1 ? '' : 's'}.`, {
    'retry-after': String(seconds),
  });

/**
 * Authentication, the per-key rate limit and the permission check, in this one place, before
 * the body is even parsed: a non-member gets the same 404 as for a missing workspace, a member
 * without the role 403.
 */
export const authPlugin = fp(async (app: FastifyInstance, opts: AuthOptions) => {
  app.decorateRequest('caller', null);
  app.decorateRequest('access', null);
  app.decorateRequest('refusal', null);

  app.addHook('onRequest', async (request) => {
    if (request.is404) return;
    const config = request.routeOptions.config;
    if (config.probe === true) return;
    if (config.stream !== true) {
      await admit(request);
      return;
    }
    try {
      await admit(request);
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      request.refusal = err;
    }
  });

  async function admit(request: FastifyRequest): Promise<void> {
    const config = request.routeOptions.config;
    if (config.public === true) {
      const wait = opts.addressBuckets.take(request.ip);
      if (wait > 0) throw tooMany(wait);
      return;
    }
    let caller: Caller;
    try {
      caller = await opts.apiKeys.authenticate(presentedKey(request));
    } catch (err) {
      // Failed attempts spend the client address's tokens, so keys cannot be guessed at speed.
      const wait = opts.addressBuckets.take(request.ip);
      if (wait > 0) throw tooMany(wait);
      throw err;
    }
    const wait = opts.keyBuckets.take(caller.keyId);
    if (wait > 0) throw tooMany(wait);
    request.caller = caller;

    const action = config.action;
    if (action === undefined) return;
    const slug = (request.params as Record<string, string | undefined>)['slug'] ?? '';
    const row = await opts.store.db
      .selectFrom('workspaces')
      .innerJoin('members', 'members.workspace_id', 'workspaces.id')
      .selectAll('workspaces')
      .select('members.role')
      .where('workspaces.slug', '=', slug)
      .where('members.user_id', '=', caller.user.id)
      .executeTakeFirst();
    if (row === undefined) throw notFound('Workspace');
    const { role, ...workspace } = row;
    if (!allows(role, action)) {
      throw forbidden(`This action needs the ${ACTIONS[action]} role or higher; you are ${role === 'admin' ? 'an' : 'a'} ${role}.`);
    }
    request.access = { caller, workspace, role };
  }
});

/** The caller of a route that requires a key; set by the auth hook. */
export function callerOf(request: FastifyRequest): Caller {
  if (request.caller === null) throw new Error('route has no authenticated caller');
  return request.caller;
}

/** The caller's membership of `:slug`; set by the auth hook on routes with an `action`. */
export function accessOf(request: FastifyRequest): Access {
  if (request.access === null) throw new Error('route has no workspace access: declare config.action');
  return request.access;
}
