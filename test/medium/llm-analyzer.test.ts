// The LLM analyzer against a real HTTP server speaking the chat-completions protocol: what it
// sends (templates, redacted; never the lines or a secret) and that any failure answers the
// built-in analysis.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { analyze } from '../../src/modules/logs/analyzer.js';
import { LlmAnalyzer, type LlmPayload } from '../../src/modules/logs/llm.js';

interface Received {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}

type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void;

let server: Server;
let baseUrl: string;
let handler: Handler;
const received: Received[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      received.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      handler(req, res, body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${String((server.address() as AddressInfo).port)}/v1`;
});

afterEach(() => {
  received.length = 0;
  server.closeAllConnections();
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => {
    server.close(() => {
      resolve();
    });
  });
});

const json = (res: ServerResponse, status: number, body: unknown): void => {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
};

/** A chat-completions answer whose message content is `content`. */
const completion = (content: string) => ({
  id: 'chatcmpl-1',
  object: 'chat.completion',
  created: 1714557600,
  model: 'test-model',
  choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 10, completion_tokens: 10, total_tokens: 20 },
});

const SECRET = 'Zq8-live-secret-value';
const LOGS = [
  '> api@1.0.0 start',
  'Server listening on port 3000',
  `connecting with DATABASE_URL=postgres://app:${SECRET}@db:5432/app`,
  'Error: connect ECONNREFUSED 10.0.0.9:5432',
  '    at TCPConnectWrap.afterConnect [as oncomplete] (node:net:1555:16)',
  `2024-05-01T10:00:01Z ERROR login failed for ada@example.com token=${SECRET}`,
  '2024-05-01T10:00:02Z ERROR login failed for bob@example.com token=abc123',
  'Authorization: Bearer sk-proj-AbCdEfGhIjKlMnOpQrStUv123456',
  '2024-05-01T10:00:03Z INFO GET /api/orders/981 200 12ms',
  '2024-05-01T10:00:04Z INFO GET /api/orders/982 200 9ms',
].join('\n');

const MODEL_ANSWER = {
  summary: 'The app cannot reach its database and logins fail.',
  issues: [
    { pattern: 'Login failures', count: 2, severity: 'error', example: 'ERROR login failed for <*> <*>', hint: 'Check the login tokens.' },
    { pattern: 'Database unreachable', count: 1, severity: 'critical', example: 'made up', hint: 'Start the database the app connects to.' },
  ],
};

const analyzer = (timeoutMs?: number, reasons?: string[]) =>
  new LlmAnalyzer({ baseUrl, model: 'test-model', apiKey: 'test-key-123', timeoutMs, onFallback: (r) => reasons?.push(r) });

describe('LlmAnalyzer against a chat-completions server', () => {
  it('sends the templates and built-in issues, redacted, with the model and the key, and answers the model', async () => {
    handler = (_req, res) => {
      json(res, 200, completion(JSON.stringify(MODEL_ANSWER)));
    };
    const result = await analyzer().analyze(LOGS, { secrets: [SECRET] });

    expect(received).toHaveLength(1);
    const req = received[0];
    expect(req?.method).toBe('POST');
    expect(req?.url).toBe('/v1/chat/completions');
    expect(req?.headers['authorization']).toBe('Bearer test-key-123');
    expect(req?.headers['content-type']).toBe('application/json');
    const body = JSON.parse(req?.body ?? '{}') as { model: string; response_format: unknown; messages: { role: string; content: string }[] };
    expect(body.model).toBe('test-model');
    expect(body.response_format).toEqual({ type: 'json_object' });
    expect(body.messages.map((m) => m.role)).toEqual(['system', 'user']);

    // nothing secret, and no line as it was logged
    expect(req?.body).not.toContain(SECRET);
    expect(req?.body).not.toContain('sk-proj-');
    expect(req?.body).not.toContain('abc123');
    expect(req?.body).not.toContain('ada@example.com');
    expect(req?.body).not.toContain('/api/orders/981');
    expect(req?.body).not.toContain('2024-05-01T10:00:01Z');

    const payload = JSON.parse(body.messages[1]?.content ?? '{}') as LlmPayload;
    expect(payload.lines).toBe(10);
    expect(payload.templates).toEqual([
      { pattern: 'ERROR login failed for <*> <*>', count: 2, level: 'error' },
      { pattern: 'Error: connect ECONNREFUSED <*>', count: 1, level: 'error' },
      { pattern: 'INFO GET <*> <*> <*>', count: 2, level: 'info' },
      { pattern: '> api@<*> start', count: 1, level: null },
      { pattern: 'Server listening on port <*>', count: 1, level: null },
      { pattern: 'connecting with DATABASE_URL=postgres://app:[REDACTED]@db:<*>/app', count: 1, level: null },
      { pattern: 'at TCPConnectWrap.afterConnect [as oncomplete] (node:net:<*>:<*>)', count: 1, level: null },
      { pattern: 'Authorization: [REDACTED]', count: 1, level: null },
    ]);
    expect(payload.builtin_issues).toEqual([
      {
        pattern: 'ERROR login failed for <*> <*>',
        count: 2,
        severity: 'error',
        example: 'ERROR login failed for <*> <*>',
        hint: 'Slipway has no rule for this error, logged 2 times: find where the app logs "ERROR login failed for" and fix its cause.',
      },
      {
        pattern: 'Connection refused to 10.0.0.9:5432',
        count: 1,
        severity: 'error',
        example: 'Error: connect ECONNREFUSED <*>',
        hint: "Nothing accepted connections at 10.0.0.9:5432: check that the service there is running and that the host and port in the app's environment variables are right.",
      },
    ]);

    // the model's answer, most severe first; an example that quotes a template shows its real line
    expect(result).toEqual({
      summary: 'The app cannot reach its database and logins fail.',
      issues: [
        { pattern: 'Database unreachable', count: 1, severity: 'critical', example: 'made up', hint: 'Start the database the app connects to.' },
        { pattern: 'Login failures', count: 2, severity: 'error', example: `2024-05-01T10:00:01Z ERROR login failed for ada@example.com token=${SECRET}`, hint: 'Check the login tokens.' },
      ],
      analyzer: 'llm:test-model',
    });
  });

  it('sends no Authorization header without a key', async () => {
    handler = (_req, res) => {
      json(res, 200, completion(JSON.stringify(MODEL_ANSWER)));
    };
    const result = await new LlmAnalyzer({ baseUrl: `${baseUrl}/`, model: 'local' }).analyze(LOGS);
    expect(received[0]?.headers['authorization']).toBeUndefined();
    expect(received[0]?.url).toBe('/v1/chat/completions');
    expect(result.analyzer).toBe('llm:local');
  });

  it('answers the built-in analysis when the server answers 500', async () => {
    handler = (_req, res) => {
      json(res, 500, { error: { message: 'overloaded' } });
    };
    const reasons: string[] = [];
    expect(await analyzer(undefined, reasons).analyze(LOGS, { secrets: [SECRET] })).toEqual(analyze(LOGS));
    expect(reasons).toEqual(['the endpoint answered HTTP 500']);
  });

  it('answers the built-in analysis when the server never answers', async () => {
    handler = () => undefined;
    const reasons: string[] = [];
    const started = Date.now();
    expect(await analyzer(300, reasons).analyze(LOGS)).toEqual(analyze(LOGS));
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(reasons).toEqual(['no answer within 0.3 s']);
  });

  it('answers the built-in analysis when the body is not JSON, or the content is not', async () => {
    const reasons: string[] = [];
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"choices": [');
    };
    expect(await analyzer(undefined, reasons).analyze(LOGS)).toEqual(analyze(LOGS));
    handler = (_req, res) => {
      json(res, 200, completion('Here is my analysis: the database is down.'));
    };
    expect(await analyzer(undefined, reasons).analyze(LOGS)).toEqual(analyze(LOGS));
    expect(reasons).toEqual(['the answer was not JSON', "the model's content was not JSON"]);
  });

  it('answers the built-in analysis when the content has the wrong shape', async () => {
    const wrong: unknown[] = [
      { summary: 'x' },
      { summary: '', issues: [] },
      { summary: 'x', issues: [{ pattern: 'p', count: 1, severity: 'fatal', example: 'e', hint: 'h' }] },
      { summary: 'x', issues: [{ pattern: 'p', count: 1.5, severity: 'error', example: 'e', hint: 'h' }] },
      { summary: 'x', issues: [{ pattern: 'p', count: 1, severity: 'error', hint: 'h' }] },
      { summary: 'x', issues: ['p'] },
      ['not', 'an', 'object'],
    ];
    const reasons: string[] = [];
    for (const content of wrong) {
      handler = (_req, res) => {
        json(res, 200, completion(JSON.stringify(content)));
      };
      expect(await analyzer(undefined, reasons).analyze(LOGS)).toEqual(analyze(LOGS));
    }
    handler = (_req, res) => {
      json(res, 200, { choices: [] });
    };
    expect(await analyzer(undefined, reasons).analyze(LOGS)).toEqual(analyze(LOGS));
    expect(reasons).toHaveLength(wrong.length + 1);
    for (const r of reasons) expect(r).not.toContain('test-key-123');
  });

  it('answers the built-in analysis when nothing listens at the address', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => {
      closed.close(() => {
        resolve();
      });
    });
    const reasons: string[] = [];
    const llm = new LlmAnalyzer({ baseUrl: `http://127.0.0.1:${String(port)}/v1`, model: 'm', onFallback: (r) => reasons.push(r) });
    expect(await llm.analyze(LOGS)).toEqual(analyze(LOGS));
    expect(reasons).toEqual(['the endpoint could not be reached']);
  });

  it('asks nothing about an empty log', async () => {
    handler = (_req, res) => {
      json(res, 200, completion(JSON.stringify(MODEL_ANSWER)));
    };
    expect(await analyzer().analyze('')).toEqual(analyze(''));
    expect(received).toEqual([]);
  });
});
