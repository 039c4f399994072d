import type { WebSocket } from '@fastify/websocket';
import { AppError } from '../domain/errors.js';

/** Frames the spec's clients understand (spec part 6). */
export const END = '[END]';
export const errorFrame = (message: string): string => `[ERROR] ${message}`;

/** Stop reading the source while this much is waiting to be sent to a slow client. */
const HIGH_WATER = 1024 * 1024;
const PING_EVERY_MS = 30_000;

/**
 * One log stream over a WebSocket: `run` pushes lines with `send` until it returns (then `[END]`)
 * or throws (then `[ERROR] <sentence>`); either way the server closes. A client that goes away
 * sets `closed`, which `run` checks between reads. Pings keep idle proxies from cutting the
 * stream, and a client that stops answering them is dropped.
 */
export function serveStream(
  socket: WebSocket,
  run: (stream: { send(line: string): Promise<void>; readonly closed: boolean }) => Promise<void>,
  log: { error(obj: object, msg: string): void },
): void {
  let closed = false;
  const isClosed = () => closed;
  let alive = true;
  socket.on('close', () => {
    closed = true;
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
  }, PING_EVERY_MS);

  const stream = {
    get closed() {
      return closed;
    },
    async send(line: string): Promise<void> {
      if (closed) return;
      socket.send(line);
      while (!isClosed() && socket.bufferedAmount > HIGH_WATER) await new Promise((r) => setTimeout(r, 20));
    },
  };

  const finish = (frame: string) => {
    clearInterval(ping);
    if (closed) return;
    socket.send(frame);
    socket.close(1000);
  };

  run(stream).then(
    () => {
      finish(END);
    },
    (err: unknown) => {
      if (err instanceof AppError) {
        finish(errorFrame(err.message));
        return;
      }
      log.error({ err }, 'log stream failed');
      finish(errorFrame('The stream failed because of an internal error; it has been logged.'));
    },
  );
}
