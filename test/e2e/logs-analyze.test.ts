// POST …/logs/analyze through the real API: the built-in analyzer over the text given or over the
// project's stored lines, its 400s, and the model at --llm-base-url (a local server speaking the
// chat-completions protocol) asked with redacted templates only, its failures answering the
// built-in result.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LogLine } from '../../src/domain/logs.js';
import { makeProject, makeWorkspace, startTestServer, type TestProject, type TestServer, type TestWorkspace } from '../factories/harness.js';
import { STORE_KINDS } from '../factories/stores.js';

interface Analysis {
  summary: string;
  issues: { pattern: string; count: number; severity: string; example: string; hint: string }[];
  analyzer: string;
}

const NODE_CRASH = [
  'Server starting on port 8080',
  "TypeError: Cannot read properties of undefined (reading 'id')",
  '    at handler (/app/src/routes/users.js:42:17)',
  '    at Layer.handle [as handle_request] (/app/node_modules/express/lib/router/layer.js:95:5)',
  '    at process.processTicksAndRejections (node:internal/process/task_queues:95:5)',
].join('\n');

describe.each(STORE_KINDS)('log analysis (%s)', (kind) => {
  let s: TestServer;
  let w: TestWorkspace;
  let p: TestProject;
  beforeAll(async () => {
    s = await startTestServer(kind);
    w = await makeWorkspace(s);
    p = await makeProject(s, w);
  });
  afterAll(async () => s.close());

  const analyzeAs = (body: unknown, key = w.member.key, project: { slug: string } = p, ws: { slug: string } = w) =>
    s.request<Analysis>('POST', `/api/workspaces/${ws.slug}/projects/${project.slug}/logs/analyze`, { key, ...(body === undefined ? {} : { body }) });

  it('names the failure in the text given, with the first frame of the application', async () => {
    const r = await analyzeAs({ logs: NODE_CRASH });
    expect(r.status).toBe(200);
    expect(r.body.data?.analyzer).toBe('builtin');
    const crash = r.body.data?.issues.find((i) => i.pattern.includes('TypeError'));
    expect(crash?.count).toBe(1);
    expect(`${crash?.hint ?? ''} ${crash?.example ?? ''} ${crash?.pattern ?? ''}`).toContain('/app/src/routes/users.js:42');
  });

  it("analyses the project's stored lines when no text is given", async () => {
    const own = await makeProject(s, w);
    const now = Date.now();
    const line = (i: number, message: string): LogLine => ({ projectId: own.id, workspaceId: w.id, deploymentId: 'dep-1', pod: 'web-1', stream: 'stderr', timestamp: now + i, message });
    await s.logStore.append({ lines: [line(1, 'booting'), line(2, 'Error: listen EADDRINUSE: address already in use :::3000'), line(3, 'Error: listen EADDRINUSE: address already in use :::3000')] });
    for (const body of [undefined, {}, { logs: '' }]) {
      const r = await analyzeAs(body, w.member.key, own);
      expect(r.status).toBe(200);
      const port = r.body.data?.issues.find((i) => /in use/i.test(i.pattern) || /3000/.test(i.hint));
      expect(port?.count).toBe(2);
      expect(port?.hint).toContain('3000');
    }
    // a project without lines: nothing found, said in a sentence
    const empty = await analyzeAs({}, w.member.key, await makeProject(s, w));
    expect(empty.status).toBe(200);
    expect(empty.body.data?.issues).toEqual([]);
    expect(empty.body.data?.summary).not.toBe('');
  });

  it('refuses a non-string and more than 1 MiB of text with 400, and another workspace\'s project with 404', async () => {
    for (const logs of [42, ['a'], { a: 1 }, true]) {
      const r = await analyzeAs({ logs });
      expect(r.status).toBe(400);
      expect(r.body.error).toContain('logs');
    }
    const big = await analyzeAs({ logs: 'x'.repeat(1024 * 1024 + 1) });
    expect(big.status).toBe(400);
    expect(big.body.error).toBe('"logs" must be at most 1048576 bytes (1 MiB) of text.');
    const exactly = await analyzeAs({ logs: `${'ERROR something broke\n'.repeat(47662)}${'x'.repeat(1024 * 1024 - 22 * 47662)}` });
    expect(exactly.status).toBe(200);
    const other = await makeWorkspace(s);
    const theirs = await makeProject(s, other);
    expect((await analyzeAs({ logs: 'x' }, w.member.key, theirs, other)).status).toBe(404);
    expect((await analyzeAs({ logs: 'x' }, w.member.key, theirs)).status).toBe(404);
  });
});

describe('log analysis with a model (sqlite)', () => {
  let s: TestServer;
  let w: TestWorkspace;
  let p: TestProject;
  let model: Server;
  let answer: (body: string) => { status: number; body: string };
  const bodies: { auth: string | undefined; body: string }[] = [];
  const SECRET = 'hunter2-very-secret-value';

  beforeAll(async () => {
    model = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        bodies.push({ auth: req.headers.authorization, body });
        const a = answer(body);
        res.writeHead(a.status, { 'content-type': 'application/json' });
        res.end(a.body);
      });
    });
    await new Promise<void>((resolve) => model.listen(0, '127.0.0.1', resolve));
    const baseUrl = `http://127.0.0.1:${String((model.address() as AddressInfo).port)}/v1`;
    s = await startTestServer('sqlite', { llm: { baseUrl, model: 'test-model', apiKey: 'sk-test-key', timeoutMs: 2000 } });
    w = await makeWorkspace(s);
    p = await makeProject(s, w);
    const env = await s.request('POST', `/api/workspaces/${w.slug}/projects/${p.slug}/env`, { key: w.member.key, body: { key: 'DB_PASSWORD', value: SECRET, is_secret: true } });
    expect(env.status).toBe(201);
  });
  afterAll(async () => {
    await s.close();
    model.closeAllConnections();
    await new Promise<void>((resolve) => { model.close(() => { resolve(); }); });
  });

  const analyze = (logs: string) => s.request<Analysis>('POST', `/api/workspaces/${w.slug}/projects/${p.slug}/logs/analyze`, { key: w.member.key, body: { logs } });
  const LOGS = `connecting with password ${SECRET}\nError: connect ECONNREFUSED 10.0.0.5:5432\nError: connect ECONNREFUSED 10.0.0.5:5432`;

  it("answers the model's analysis, having sent it templates with the project's secrets removed", async () => {
    bodies.length = 0;
    const issue = { pattern: 'Error: connect ECONNREFUSED <*>', count: 2, severity: 'error', example: 'Error: connect ECONNREFUSED 10.0.0.5:5432', hint: 'Start the database before the app.' };
    answer = () => ({
      status: 200,
      body: JSON.stringify({ id: 'c1', object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: JSON.stringify({ summary: 'The database refuses connections.', issues: [issue] }) }, finish_reason: 'stop' }] }),
    });
    const r = await analyze(LOGS);
    expect(r.status).toBe(200);
    expect(r.body.data?.analyzer).toBe('llm:test-model');
    expect(r.body.data?.summary).toBe('The database refuses connections.');
    expect(bodies).toHaveLength(1);
    expect(bodies[0]?.auth).toBe('Bearer sk-test-key');
    expect(bodies[0]?.body).toContain('test-model');
    expect(bodies[0]?.body).not.toContain(SECRET);
  });

  it('answers the built-in analysis when the model fails, and says so in the server log without the key', async () => {
    answer = () => ({ status: 500, body: '{"error":"overloaded"}' });
    const r = await analyze(LOGS);
    expect(r.status).toBe(200);
    expect(r.body.data?.analyzer).toBe('builtin');
    expect(r.body.data?.issues.some((i) => i.hint.includes('10.0.0.5:5432') || i.pattern.includes('10.0.0.5:5432'))).toBe(true);
    expect(s.logs.some((l) => l.includes('log analysis: the model gave no usable answer'))).toBe(true);
    expect(s.logs.join('\n')).not.toContain('sk-test-key');
    expect(s.logs.join('\n')).not.toContain(SECRET);
  });
});
