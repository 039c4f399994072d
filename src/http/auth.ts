import type { FastifyContextConfig, FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { iso, type Clock } from '../domain/clock.js';
import { AppError, forbidden, notFound, unauthorized } from '../domain/errors.js';
import { ACTIONS, allows, type Action, type Role } from '../domain/roles.js';
import type { Access, Caller, WorkspaceRecord } from '../domain/access.js';
import { TokenBuckets } from './rate-limit.js';
import type { RefusalKind, RefusalLog } from './request-log.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The permission a workspace route needs (docs/decisions.md#roles); implies a member of `:slug`. */
    action?: Action;
    /** No API key needed (invitation accept, webhooks, health): limited per client address. */
    public?: boolean;
    /** Health and metrics probes: no key and no rate limit. */
    probe?: boolean;
    /**
     * A signed webhook (GitHub deliveries): no key, and no limit before the handler has checked
     * the signature; then a bad one spends the client address's tokens (`request.limitAddress`),
     * a good one its receiver's (`request.limitReceiver`): GitHub sends bursts from few addresses
     * and does not retry (docs/security.md#webhook-rate-limit).
     */
    webhook?: boolean;
    /**
     * A WebSocket stream: the handshake must complete even when the caller may not read it, so
     * that the refusal arrives the spec's way, as one `[ERROR] …` frame (docs/decisions.md#streams).
     */
    stream?: boolean;
  }
  interface FastifyRequest {
    caller: Caller | null;
    access: Access | null;
    /** why a stream route refused the caller; the handler reports it */
    refusal: AppError | null;
    /** the rate limiter refused it: counted by the RefusalLog, not logged one by one */
    rateLimited: boolean;
    /**
     * For an admitted caller: checks again that the key is live and the caller still holds the
     * route's role in `:slug`, throwing the AppError that says why not. Long-lived streams call it
     * every `streamRecheckMs` (serveStream), so a revoked key or a removed member is cut off.
     */
    recheck: (() => Promise<void>) | null;
    /** how often open streams call `recheck` */
    streamRecheckMs: number;
    /** how often open streams ping their client */
    streamPingMs: number;
    /** a `webhook` route's refusal that spends the client address's tokens: throws 429 once they are spent */
    limitAddress: () => void;
    /** a `webhook` route's verified delivery to `receiver`: throws 429 once that receiver's tokens are spent */
    limitReceiver: (receiver: string) => void;
  }
}

/** What the auth plugin asks of the keys and the members (the composition root fills it from the tenancy capability and the store). */
export interface AuthPorts {
  /** The caller of the presented key; throws UNAUTHORIZED saying why when there is none or it is not live. */
  authenticate(key: string | undefined): Promise<Caller>;
  /** The user's workspace of this slug and their role there; undefined when there is no such workspace or they are no member of it. */
  membership(slug: string, userId: string): Promise<{ workspace: WorkspaceRecord; role: Role } | undefined>;
  /** The key's revocation and expiry as they are now; undefined when it is gone. */
  keyValidity(keyId: string): Promise<{ revoked_at: string | null; expires_at: string } | undefined>;
}

export interface AuthOptions {
  ports: AuthPorts;
  keyBuckets: TokenBuckets;
  addressBuckets: TokenBuckets;
  /** signed webhook deliveries, per receiver (`app`, or a Git connection's webhook id) */
  receiverBuckets: TokenBuckets;
  clock: Clock;
  /** rate-limit refusals, logged in aggregate */
  refusals: RefusalLog;
  /** how often an open stream re-checks its caller (at most 10 s) */
  streamRecheckMs: number;
  /** how often an open stream pings its client */
  streamPingMs: number;
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
  app.decorateRequest('rateLimited', false);
  app.decorateRequest('recheck', null);
  app.decorateRequest('streamRecheckMs', opts.streamRecheckMs);
  app.decorateRequest('streamPingMs', opts.streamPingMs);
  app.decorateRequest('limitAddress', function (this: FastifyRequest) {
    limit(this, opts.addressBuckets, 'address', this.ip);
  });
  app.decorateRequest('limitReceiver', function (this: FastifyRequest, receiver: string) {
    limit(this, opts.receiverBuckets, 'receiver', receiver);
  });
  app.addHook('onClose', () => {
    opts.refusals.close();
  });

  app.addHook('onRequest', async (request) => {
    // read once: Fastify builds `routeOptions` anew at every access
    const config = request.routeOptions.config;
    try {
      await guard(request, config);
    } finally {
      // A request is logged once, when it completes (RequestLogController); a stream, which may
      // stay open for hours, also when it opens. A refused request is only counted.
      if (!request.rateLimited && config.stream === true) request.log.info({ req: request }, 'incoming request');
    }
  });

  async function guard(request: FastifyRequest, config: FastifyContextConfig): Promise<void> {
    if (request.is404) return;
    if (config.probe === true) return;
    if (config.stream !== true) {
      await admit(request, config);
      return;
    }
    try {
      await admit(request, config);
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      request.refusal = err;
    }
  }

  function limit(request: FastifyRequest, buckets: TokenBuckets, kind: RefusalKind, id: string): void {
    const wait = buckets.take(id);
    if (wait === 0) return;
    request.rateLimited = true;
    opts.refusals.note(kind, id);
    throw tooMany(wait);
  }

  async function admit(request: FastifyRequest, config: FastifyContextConfig): Promise<void> {
    // limited by the handler, once the signature is checked
    if (config.webhook === true) return;
    if (config.public === true) {
      limit(request, opts.addressBuckets, 'address', request.ip);
      return;
    }
    let caller: Caller;
    try {
      caller = await opts.ports.authenticate(presentedKey(request));
    } catch (err) {
      // Failed attempts spend the client address's tokens, so keys cannot be guessed at speed.
      limit(request, opts.addressBuckets, 'address', request.ip);
      throw err;
    }
    limit(request, opts.keyBuckets, 'key', caller.keyId);
    request.caller = caller;

    const action = config.action;
    const slug = (request.params as Record<string, string | undefined>)['slug'] ?? '';
    request.recheck = () => recheck(caller, action, slug);
    if (action === undefined) return;
    request.access = await membership(caller, action, slug);
  }

  /** The caller's membership of `:slug` with a role that allows `action`: 404 for a non-member, 403 for a lower role. */
  async function membership(caller: Caller, action: Action, slug: string): Promise<Access> {
    const found = await opts.ports.membership(slug, caller.user.id);
    if (found === undefined) throw notFound('Workspace');
    const { workspace, role } = found;
    if (!allows(role, action)) {
      throw forbidden(`This action needs the ${ACTIONS[action]} role or higher; you are ${role === 'admin' ? 'an' : 'a'} ${role}.`);
    }
    return { caller, workspace, role };
  }

  /** The admission again, for a caller already admitted (an open stream): the sentence says what changed. */
  async function recheck(caller: Caller, action: Action | undefined, slug: string): Promise<void> {
    const key = await opts.ports.keyValidity(caller.keyId);
    const revoked = key === undefined || key.revoked_at !== null;
    const expired = !revoked && key.expires_at <= iso(opts.clock.now());
    // Membership first: removing a member also revokes their keys listed under the workspace,
    // and the removal is what they need to be told.
    if (action !== undefined) {
      try {
        await membership(caller, action, slug);
      } catch (err) {
        if (err instanceof AppError && err.code === 'NOT_FOUND') throw forbidden('You are no longer a member of this workspace.');
        if (err instanceof AppError && err.code === 'FORBIDDEN') throw forbidden(`Your role in this workspace no longer allows this. ${err.message}`);
        throw err;
      }
    }
    if (revoked) throw unauthorized('The API key has been revoked.');
    if (expired) throw unauthorized('The API key has expired.');
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
