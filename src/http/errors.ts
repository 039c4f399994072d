import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { AppError, ERROR_STATUS, type ErrorCode } from '../domain/errors.js';

/** Fastify's own 4xx errors, in our words. */
const FASTIFY_MESSAGES: Record<string, string> = {
  FST_ERR_CTP_INVALID_JSON_BODY: 'The request body is not valid JSON.',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'The request body is empty; send a JSON object.',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'The request body must be sent as application/json.',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'The Content-Length header does not match the body.',
  FST_ERR_BAD_URL: 'The request path is not valid.',
  FST_ERR_ASYNC_CONSTRAINT: 'The request path is not valid.',
};

/** The 413's sentence, naming the limit of the route that refused the body (the analysis takes 3 MiB, the rest 1 MiB). */
export function bodyTooLarge(limitBytes: number): string {
  const mib = limitBytes / (1024 * 1024);
  const size = Number.isInteger(mib) ? `${mib.toString()} MiB` : `${Math.ceil(limitBytes / 1024).toString()} KiB`;
  return `The request body is larger than the ${size} limit.`;
}

/**
 * How much of a refused body is still read, and for how long, before the 413 is sent and the
 * connection closed. A client that writes its whole body before it reads the answer (Node's own
 * fetch, undici) would otherwise meet a closed socket mid-write (EPIPE) and never see the 413;
 * past these bounds it may, and the server stops spending on it.
 */
export const DRAIN_MAX_BYTES = 16 * 1024 * 1024;
export const DRAIN_MAX_MS = 10_000;

/** Reads and discards the rest of a request's body, up to the bounds; resolves when done or past them. */
export function drainBody(req: IncomingMessage, maxBytes = DRAIN_MAX_BYTES, maxMs = DRAIN_MAX_MS): Promise<void> {
  if (req.complete || req.readableEnded || req.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    let read = 0;
    const finish = () => {
      clearTimeout(timer);
      req.off('data', onData);
      req.off('end', finish);
      req.off('close', finish);
      req.off('error', finish);
      resolve();
    };
    const onData = (chunk: Buffer) => {
      read += chunk.length;
      if (read > maxBytes) finish();
    };
    const timer = setTimeout(finish, maxMs);
    timer.unref();
    req.on('data', onData);
    req.once('end', finish);
    req.once('close', finish);
    req.once('error', finish);
    req.resume();
  });
}

const STATUS_CODE = Object.fromEntries(Object.entries(ERROR_STATUS).map(([k, v]) => [v, k])) as Record<number, ErrorCode>;

export interface RouteEntry {
  method: string;
  url: string;
  pattern: RegExp;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Every registered route: for 405 answers, and for the tests that no route goes unlisted. */
    routeTable: RouteEntry[];
  }
}

/** Compile a route url (`/api/x/:id`) into a matcher for concrete paths. */
function matcher(url: string): RegExp {
  const body = url
    .split('/')
    .map((seg) => (seg.startsWith(':') ? '[^/]+' : seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('/');
  return new RegExp(`^${body}/?$`);
}

export function send(reply: FastifyReply, status: number, message: string, headers: Record<string, string> = {}): FastifyReply {
  return reply.code(status).headers(headers).type('application/json; charset=utf-8').send({ success: false, error: message });
}

/**
 * Errors Fastify's router raises before any route or hook runs (a malformed or over-long path
 * segment): given to the server as its `frameworkErrors` option so they get the envelope too.
 */
export function frameworkErrors(err: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  // refused before routing, so before the onRequest hook that names every response
  reply.header('x-request-id', request.id);
  if (err.code === 'FST_ERR_MAX_PARAM_LENGTH') void send(reply, 414, 'A segment of the request path is too long.');
  else void send(reply, 400, FASTIFY_MESSAGES[err.code] ?? 'The request path is not valid.');
}

/** What Node's HTTP parser refuses before Fastify sees a request, in our words. */
function clientErrorAnswer(code: string | undefined): { status: number; reason: string; message: string } {
  if (code === 'HPE_HEADER_OVERFLOW') return { status: 431, reason: 'Request Header Fields Too Large', message: 'The request headers are too large.' };
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return { status: 408, reason: 'Request Timeout', message: 'The request did not arrive in time.' };
  return { status: 400, reason: 'Bad Request', message: 'The request is not valid HTTP.' };
}

/**
 * Node's 'clientError' (a request its parser refuses: malformed, headers too large, too slow),
 * answered in the envelope like every other error, as Node itself would answer: only when no
 * response is being written on the connection, with `Connection: close`, and the socket is then
 * destroyed (the parser cannot go on after a bad request).
 */
export function clientErrorHandler(this: FastifyInstance, err: Error & { code?: string }, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const { status, reason, message } = clientErrorAnswer(err.code);
  this.log.debug({ code: err.code, status }, `client error: ${message}`);
  // Node's own rule: never write into a response that has started on this connection.
  const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } | null })._httpMessage;
  if (socket.writable && (inFlight === undefined || inFlight === null || inFlight.headersSent !== true)) {
    const body = JSON.stringify({ success: false, error: message });
    socket.write(
      `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}

/**
 * The one map from error to HTTP status and envelope. Domain errors carry their code; Fastify's
 * validation and parsing errors become 400/413/415; anything else is a 500 whose detail stays
 * in the server log.
 */
export const errorsPlugin = fp(async (app: FastifyInstance) => {
  // Fastify parses text/plain bodies by default; the API takes JSON only, so any other type is
  // 415 (routes that take another type, the webhooks, add their own parser).
  app.removeContentTypeParser('text/plain');
  const routes: RouteEntry[] = [];
  app.decorate('routeTable', routes);
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    for (const method of methods) routes.push({ method: method.toUpperCase(), url: route.url, pattern: matcher(route.url) });
  });

  app.setErrorHandler((err: FastifyError | AppError | Error, request: FastifyRequest, reply: FastifyReply) => {
    if (err instanceof AppError) {
      if (err.status >= 500) request.log.error({ err }, err.message);
      // refusals of the rate limiter are counted by the RefusalLog, not logged one by one
      else if (err.code !== 'RATE_LIMITED') request.log.info({ code: err.code, status: err.status }, err.message);
      return send(reply, err.status, err.message, { ...err.headers });
    }
    const fe = err as FastifyError;
    if (fe.code === 'FST_ERR_VALIDATION') {
      request.log.info({ status: 400 }, fe.message);
      return send(reply, 400, fe.message);
    }
    const status = fe.statusCode ?? 500;
    if (fe.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
      const message = bodyTooLarge(request.routeOptions.bodyLimit);
      request.log.info({ status: 413, code: fe.code }, message);
      // the rest of the body first, so that the client is reading when the answer comes
      return drainBody(request.raw).then(() => send(reply, 413, message));
    }
    if (status >= 400 && status < 500) {
      const message = FASTIFY_MESSAGES[fe.code] ?? `The request is invalid: ${STATUS_CODE[status] ?? status}.`;
      request.log.info({ status, code: fe.code }, message);
      return send(reply, status, message);
    }
    request.log.error({ err }, 'unhandled error');
    return send(reply, 500, 'An internal error occurred; it has been logged.');
  });

  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0] ?? '/';
    const allowed = [...new Set(routes.filter((r) => r.pattern.test(path)).map((r) => r.method))];
    if (allowed.length > 0) {
      return send(reply, 405, `Method ${request.method} is not allowed here; use ${allowed.join(', ')}.`, {
        allow: allowed.join(', '),
      });
    }
    return send(reply, 404, `No route matches ${request.method} ${path.slice(0, 200)}.`);
  });
});
