import { hostname } from 'node:os';
import { LogController, type FastifyBaseLogger, type FastifyReply, type FastifyRequest, type FastifyServerOptions } from 'fastify';
import { redactUrl } from './redact.js';

/** What a request line says of the request: never its headers, and its URL without secrets. */
export const requestFields = (req: FastifyRequest): { method: string; url: string; remoteAddress: string } => ({
  method: req.method,
  url: redactUrl(req.url),
  remoteAddress: req.ip,
});

/** Where log lines go: pino's destination, or a test's stream. */
export interface LogStream {
  write(line: string): unknown;
}

/**
 * The lines of completed requests, written straight to the log's stream: the same JSON as pino
 * writes for `reply.log.info({ req, res, responseTime }, 'request completed')` (a test holds them
 * equal), without pino's generic walk over the object, which was a sixth of the API's time on its
 * hot path (docs/decisions.md#request-log). The lines of one event-loop turn are handed to the
 * stream together, at its end: pino's destination measures its whole pending buffer at every
 * write, which cost 2.6 µs a line when each line came alone. Every other line goes through
 * `ordered`, which hands over the waiting request lines first, so the log keeps its order.
 */
export class AccessLog {
  private readonly prefix: string;
  private pending: string[] = [];
  private scheduled = false;
  /** The stream to give pino. */
  readonly ordered: LogStream;

  constructor(private readonly stream: LogStream) {
    this.prefix = `,"pid":${String(process.pid)},"hostname":${JSON.stringify(hostname())},"reqId":`;
    this.ordered = {
      write: (line: string) => {
        this.flush();
        return stream.write(line);
      },
    };
  }

  write(request: FastifyRequest, reply: FastifyReply): void {
    this.pending.push(
      `{"level":30,"time":${String(Date.now())}${this.prefix}${JSON.stringify(request.id)},"req":${JSON.stringify(requestFields(request))},"res":{"statusCode":${String(reply.statusCode)}},"responseTime":${String(reply.elapsedTime)},"msg":"request completed"}\n`,
    );
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(this.flush);
    }
  }

  /** Hands the waiting lines to the stream. */
  readonly flush = (): void => {
    this.scheduled = false;
    if (this.pending.length === 0) return;
    const text = this.pending.join('');
    this.pending = [];
    this.stream.write(text);
  };
}

/**
 * A request's logger, made when the request first logs a line of its own. Most requests write
 * only their access line, which AccessLog builds without one, and pino's child (an object with
 * its bindings serialized and every level method rebuilt) was 2 % of the API's time on its hot
 * path (docs/decisions.md#hot-path). Its lines are the child's, bindings and all.
 */
export class RequestLogger implements FastifyBaseLogger {
  private made: FastifyBaseLogger | undefined;

  constructor(
    private readonly parent: FastifyBaseLogger,
    private readonly bindings: Record<string, unknown>,
  ) {}

  private get real(): FastifyBaseLogger {
    this.made ??= this.parent.child(this.bindings);
    return this.made;
  }

  /** the parent's level until the child exists: a child starts at its parent's */
  get level(): string {
    return this.made === undefined ? this.parent.level : this.made.level;
  }

  set level(level: string) {
    this.real.level = level;
  }

  fatal(obj: unknown, ...rest: [msg?: string, ...args: unknown[]]): void { this.real.fatal(obj, ...rest); }
  error(obj: unknown, ...rest: [msg?: string, ...args: unknown[]]): void { this.real.error(obj, ...rest); }
  warn(obj: unknown, ...rest: [msg?: string, ...args: unknown[]]): void { this.real.warn(obj, ...rest); }
  info(obj: unknown, ...rest: [msg?: string, ...args: unknown[]]): void { this.real.info(obj, ...rest); }
  debug(obj: unknown, ...rest: [msg?: string, ...args: unknown[]]): void { this.real.debug(obj, ...rest); }
  trace(obj: unknown, ...rest: [msg?: string, ...args: unknown[]]): void { this.real.trace(obj, ...rest); }
  silent(): void {
    // a level that writes nothing
  }

  child(bindings: Record<string, unknown>, options?: Parameters<FastifyBaseLogger['child']>[1]): FastifyBaseLogger {
    return this.real.child(bindings, options);
  }
}

/**
 * Fastify's per-request logger: lazy, unless the route sets its own level or serializers (none
 * does today), when pino's child is made as Fastify would.
 */
export const requestLogger: NonNullable<FastifyServerOptions['childLoggerFactory']> = (logger, bindings, options) =>
  options.level === undefined && options.serializers === undefined ? new RequestLogger(logger, bindings) : logger.child(bindings, options);

/** The levels at which a logger writes info lines. */
const WRITES_INFO = new Set(['trace', 'debug', 'info']);

/**
 * One line per request, written when it completes, with the request, the status and the time
 * (an access log): Fastify's two lines per request cost a seventh of the API's throughput
 * (docs/decisions.md#request-log). WebSocket streams also get their `incoming request` line when
 * they open, from the auth hook. Requests the rate limiter refused write none: a client hammering
 * the API would otherwise fill the disk (95,000 refusals grew a log to 57 MB); RefusalLog counts
 * them instead.
 */
export class RequestLogController extends LogController {
  /** `access`: completed requests' lines go there when the request's logger writes info */
  constructor(private readonly access?: AccessLog) {
    super();
  }

  override incomingRequest(): void {
    // streams only, written by the auth hook (plugins/auth.ts) after the rate limit
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (request.rateLimited) return;
    if (error) reply.log.error({ req: request, res: reply, err: error, responseTime: reply.elapsedTime }, 'request errored');
    else if (this.access !== undefined && WRITES_INFO.has(reply.log.level)) this.access.write(request, reply);
    else reply.log.info({ req: request, res: reply, responseTime: reply.elapsedTime }, 'request completed');
  }

  override defaultErrorLog(error: Error, request: FastifyRequest, reply: FastifyReply, metadata?: Record<string, unknown>): void {
    if (request.rateLimited) return;
    super.defaultErrorLog(error, request, reply, metadata);
  }

  override routeNotFound(): void {
    // our not-found handler answers; the request line (with its URL redacted) is logged anyway
  }
}

/** Who a rate-limit refusal was counted against. */
export type RefusalKind = 'key' | 'address' | 'receiver';
const REFUSAL_FIELD: Record<RefusalKind, string> = { key: 'keyId', address: 'address', receiver: 'receiver' };
const REFUSAL_WORDS: Record<RefusalKind, string> = { key: 'of API key', address: 'of client address', receiver: 'of signed deliveries to webhook receiver' };

/** Beyond this many distinct clients in one interval, the rest are counted together. */
const MAX_TRACKED = 10_000;

/**
 * Rate-limit refusals in aggregate: at most one line per key or client address per interval,
 * saying how many requests were refused, plus one line for the clients beyond MAX_TRACKED.
 */
export class RefusalLog {
  private counts = new Map<string, { kind: RefusalKind; id: string; refused: number }>();
  private others = 0;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly log: Pick<FastifyBaseLogger, 'warn'>,
    private readonly intervalMs: number,
  ) {
    this.timer = setInterval(() => {
      this.flush();
    }, intervalMs);
    this.timer.unref();
  }

  /** One refused request of a key (its id, never the key), of a client address, or to a webhook receiver. */
  note(kind: RefusalKind, id: string): void {
    const name = `${kind}:${id}`;
    const entry = this.counts.get(name);
    if (entry !== undefined) entry.refused += 1;
    else if (this.counts.size < MAX_TRACKED) this.counts.set(name, { kind, id, refused: 1 });
    else this.others += 1;
  }

  flush(): void {
    const seconds = this.intervalMs / 1000;
    for (const { kind, id, refused } of this.counts.values()) {
      this.log.warn(
        { rateLimit: kind, [REFUSAL_FIELD[kind]]: id, refused, intervalSec: seconds },
        `rate limit: refused ${refused} request${refused === 1 ? '' : 's'} ${REFUSAL_WORDS[kind]} ${id} in the last ${seconds} s`,
      );
    }
    if (this.others > 0) {
      this.log.warn(
        { rateLimit: 'others', refused: this.others, intervalSec: seconds },
        `rate limit: refused ${this.others} requests of other clients in the last ${seconds} s`,
      );
    }
    this.counts = new Map();
    this.others = 0;
  }

  close(): void {
    clearInterval(this.timer);
    this.flush();
  }
}
