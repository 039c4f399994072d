import type { WebSocket } from '@fastify/websocket';
import { AppError } from '../domain/errors.js';

/** Frames the spec's clients understand (spec part 6). */
export const END = '[END]';
export const errorFrame = (message: string): string => `[ERROR] ${message}`;

/** Stop reading the source while this much is waiting to be sent to a slow client. */
const HIGH_WATER = 1024 * 1024;
/** How often a stream pings its client by default. */
export const PING_EVERY_MS = 30_000;
/** The bound: a revoked caller is cut off within this, whatever the setting says. */
export const MAX_RECHECK_MS = 10_000;

/** What a stream needs of its handshake request (a FastifyRequest, after the auth hook). */
export interface StreamRequest {
  log: { error(obj: object, msg: string): void };
  /** null when the caller was refused at the handshake (then `run` reports the refusal) */
  recheck: (() => Promise<void>) | null;
  streamRecheckMs: number;
  /** how often the client is pinged; one that has not answered the previous ping by then is dropped */
  streamPingMs: number;
}

/**
 * One log stream over a WebSocket: `run` pushes lines with `send` until it returns (then `[END]`)
 * or throws (then `[ERROR] <sentence>`); either way the server closes. A client that goes away
 * sets `closed`, which `run` checks between reads. Pings keep idle proxies from cutting the
 * stream, and a client that stops answering them is dropped.
 *
 * Every `request.streamRecheckMs` (10 s at most) the caller is checked again, as the handshake
 * checked them: once their key is revoked or has expired, or they are no longer a member, the
 * stream ends with `[ERROR] <why>` and nothing more is sent. Every stream gets this by being
 * served here.
 */
export function serveStream(
  socket: WebSocket,
  request: StreamRequest,
  run: (stream: { send(line: string): Promise<void>; readonly closed: boolean }) => Promise<void>,
): void {
  const { log } = request;
  let closed = false;
  /** finish() ran: the last frame is out, and `run` must stop */
  let ended = false;
  const isClosed = () => closed || ended;
  let alive = true;
  socket.on('close', () => {
    closed = true;
    stopTimers();
  });
  socket.on('pong', () => {
    alive = true;
  });
  // Messages from the client are not part of the protocol: read and ignore them.
  socket.on('message', () => undefined);
  const ping = setInterval(() => {
    if (!alive) {
      socket.terminate();
      return;
    }
    alive = false;
    socket.ping();
  }, request.streamPingMs);

  let checking = false;
  const { recheck } = request;
  const recheckTimer =
    recheck === null
      ? undefined
      : setInterval(() => {
          if (checking || isClosed()) return;
          checking = true;
          recheck().then(
            () => {
              checking = false;
            },
            (err: unknown) => {
              checking = false;
              fail(err);
            },
          );
        }, Math.min(request.streamRecheckMs, MAX_RECHECK_MS));

  function stopTimers(): void {
    clearInterval(ping);
    if (recheckTimer !== undefined) clearInterval(recheckTimer);
  }

  const stream = {
    get closed() {
      return isClosed();
    },
    async send(line: string): Promise<void> {
      if (isClosed()) return;
      socket.send(line);
      while (!isClosed() && socket.bufferedAmount > HIGH_WATER) await new Promise((r) => setTimeout(r, 20));
    },
  };

  function finish(frame: string): void {
    stopTimers();
    if (ended) return;
    ended = true;
    if (closed) return;
    socket.send(frame);
    socket.close(1000);
  }

  function fail(err: unknown): void {
    if (err instanceof AppError) {
      finish(errorFrame(err.message));
      return;
    }
    if (ended) return;
    log.error({ err }, 'log stream failed');
    finish(errorFrame('The stream failed because of an internal error; it has been logged.'));
  }

  run(stream).then(
    () => {
      finish(END);
    },
    (err: unknown) => {
      fail(err);
    },
  );
}
