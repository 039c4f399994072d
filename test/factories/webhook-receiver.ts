// A local receiver of chat webhooks that keeps every delivery and answers the way the real ones do,
// told apart by the Host header (tests reach it under hooks.slack.com or discord.com through an
// injected lookup):
// - Slack (`*.slack.com`): 200 `ok` as text/plain; 400 `invalid_payload` without a `text` string.
// - Discord (`discord.com`, `discordapp.com`, `ptb.`/`canary.discord.com`, path `/api/webhooks/…`):
//   204 with no body; 400 JSON `{message, code: 50006}` without `content`.
// - anything else: 200 JSON `{"received": true}`.
// It can be told to fail the next requests with a status (and headers, and a body) or to answer late.
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { closeServer } from './git-server.js';

export interface Delivery {
  method: string;
  /** path and query, as requested */
  path: string;
  headers: IncomingHttpHeaders;
  /** the parsed JSON body; undefined when it was not JSON */
  body: unknown;
  /** the status it was answered with (0: the answer was cut short by the client) */
  status: number;
}

export interface FailureAnswer {
  headers?: Record<string, string>;
  body?: string;
}

export interface WebhookReceiver {
  port: number;
  /** `http://127.0.0.1:<port>` */
  url: string;
  /** every request, in the order they arrived */
  deliveries: Delivery[];
  /** the deliveries answered with 2xx */
  delivered(): Delivery[];
  /** the next `n` requests are answered with `status` (default 500) */
  failNext(n: number, status?: number, answer?: FailureAnswer): void;
  /** the next request is answered after `ms` */
  delayNext(ms: number): void;
  close(): Promise<void>;
}

const DISCORD_HOSTS = new Set(['discord.com', 'discordapp.com', 'ptb.discord.com', 'canary.discord.com']);

type Convention = 'slack' | 'discord' | 'generic';

function conventionOf(host: string | undefined, path: string): Convention {
  const name = (host ?? '').replace(/:\d+$/, '').toLowerCase();
  if (name === 'slack.com' || name.endsWith('.slack.com')) return 'slack';
  if (DISCORD_HOSTS.has(name) && path.startsWith('/api/webhooks/')) return 'discord';
  return 'generic';
}

function parseJson(raw: string): unknown {
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    return undefined;
  }
}

const field = (body: unknown, name: string): unknown => (typeof body === 'object' && body !== null ? (body as Record<string, unknown>)[name] : undefined);

/** Answers as the receiver's service would; returns the status. */
function answer(res: ServerResponse, convention: Convention, body: unknown): number {
  switch (convention) {
    case 'slack': {
      const text = field(body, 'text');
      const ok = typeof text === 'string' && text !== '';
      res.writeHead(ok ? 200 : 400, { 'content-type': 'text/plain; charset=utf-8' }).end(ok ? 'ok' : 'invalid_payload');
      return ok ? 200 : 400;
    }
    case 'discord': {
      const content = field(body, 'content');
      if (typeof content === 'string' && content !== '') {
        res.writeHead(204).end();
        return 204;
      }
      res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ message: 'Cannot send an empty message', code: 50006 }));
      return 400;
    }
    case 'generic':
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ received: true }));
      return 200;
  }
}

export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  const deliveries: Delivery[] = [];
  const failures: { status: number; answer: FailureAnswer }[] = [];
  const delays: number[] = [];
  const timers = new Set<NodeJS.Timeout>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = req.url ?? '/';
      const delivery: Delivery = { method: req.method ?? '', path, headers: req.headers, body: parseJson(Buffer.concat(chunks).toString('utf8')), status: 0 };
      deliveries.push(delivery);
      const failure = failures.shift();
      // a client that gave up (timeout) gets no answer, and the delivery stays unanswered (0)
      let cut = false;
      res.on('close', () => {
        if (!res.writableFinished) cut = true;
      });
      const respond = () => {
        if (cut) return;
        if (failure !== undefined) {
          res.writeHead(failure.status, { 'content-type': 'text/plain; charset=utf-8', ...failure.answer.headers }).end(failure.answer.body ?? 'failed on purpose');
          delivery.status = failure.status;
        } else {
          delivery.status = answer(res, conventionOf(req.headers.host, path), delivery.body);
        }
      };
      const wait = delays.shift();
      if (wait === undefined) {
        respond();
        return;
      }
      const timer = setTimeout(() => {
        timers.delete(timer);
        respond();
      }, wait);
      timers.add(timer);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    port,
    url: `http://127.0.0.1:${port.toString()}`,
    deliveries,
    delivered: () => deliveries.filter((d) => d.status >= 200 && d.status < 300),
    failNext(n, status = 500, failureAnswer = {}) {
      for (let i = 0; i < n; i++) failures.push({ status, answer: failureAnswer });
    },
    delayNext(ms) {
      delays.push(ms);
    },
    async close() {
      for (const t of timers) clearTimeout(t);
      await closeServer(server);
    },
  };
}
