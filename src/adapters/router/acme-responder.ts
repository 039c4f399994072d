import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AcmeChallenges } from './acme-challenges.js';
import type { ListenAddress } from './router.js';

/** Answers one HTTP-01 request: 200 with the key authorization, or 404 for a token nobody asked about. */
export function answerChallenge(challenges: AcmeChallenges, req: IncomingMessage, res: ServerResponse): void {
  const answer = challenges.answer(req.url);
  const body = Buffer.from(answer ?? 'Unknown ACME challenge token.\n', 'utf8');
  res.writeHead(answer === undefined ? 404 : 200, {
    'content-type': 'text/plain; charset=utf-8',
    'content-length': body.length,
    'cache-control': 'no-store',
  });
  res.end(req.method === 'HEAD' ? undefined : body);
}

/**
 * The HTTP-01 responder nginx proxies `/.well-known/acme-challenge/` to: a small server of
 * Slipway's own on a loopback port, answering from memory (the nginx workers never read files
 * of ours, and nothing is left on disk).
 */
export class AcmeResponder {
  private readonly server: Server;
  private bound: ListenAddress | undefined;

  constructor(challenges: AcmeChallenges) {
    this.server = createServer({ requestTimeout: 10_000 }, (req, res) => { answerChallenge(challenges, req, res); });
  }

  async start(): Promise<ListenAddress> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(0, '127.0.0.1', () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    const addr = this.server.address();
    if (addr === null || typeof addr !== 'object') throw new Error('The ACME challenge responder has no address.');
    this.bound = { host: '127.0.0.1', port: addr.port };
    return this.bound;
  }

  address(): ListenAddress | undefined {
    return this.bound;
  }

  async stop(): Promise<void> {
    if (this.bound === undefined) return;
    this.bound = undefined;
    const closed = new Promise<void>((resolve) => { this.server.close(() => { resolve(); }); });
    this.server.closeAllConnections();
    await closed;
  }
}
