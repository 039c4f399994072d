import { Writable } from 'node:stream';
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify';
import { describe, expect, it } from 'vitest';
import { loggerOptions } from '../app/http.js';
import { AccessLog, RequestLogController, requestLogger } from './request-log.js';

/** The lines a logger wrote, as text. */
function capture(): { stream: Writable; lines: string[] } {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer | string, _encoding, done) {
      lines.push(...String(chunk).split('\n').filter((l) => l !== ''));
      done();
    },
  });
  return { stream, lines };
}

/** A request line, served by an app whose completed requests are logged by `controller`. */
async function lineOf(fast: boolean, url: string): Promise<string> {
  const { stream, lines } = capture();
  const access = new AccessLog(stream);
  const app = Fastify({
    logger: loggerOptions({ level: 'info' }, fast ? access.ordered : stream),
    genReqId: () => 'req-7',
    logController: new RequestLogController(fast ? access : undefined),
  });
  app.get('/api/workspaces/:slug', async () => ({ ok: true }));
  await app.ready();
  await app.inject({ method: 'GET', url });
  await app.close();
  access.flush();
  const line = lines.find((l) => l.includes('"request completed"'));
  if (line === undefined) throw new Error(`no request line among ${lines.join('\n')}`);
  // the two requests were served at different moments and took different times
  return line.replace(/"time":\d+/, '"time":0').replace(/"responseTime":[0-9.e-]+/, '"responseTime":0');
}

describe('the access log of completed requests', () => {
  it('writes exactly the line pino writes for the request, key for key', async () => {
    for (const url of ['/api/workspaces/alpha', '/api/workspaces/alpha?api_key=svc_sk_' + '1'.repeat(40) + '&x=%22quoted%22']) {
      const fast = await lineOf(true, url);
      expect(fast).toBe(await lineOf(false, url));
      const parsed = JSON.parse(fast) as { req: { url: string }; reqId: string; res: { statusCode: number } };
      expect(parsed.reqId).toBe('req-7');
      expect(parsed.res.statusCode).toBe(200);
      expect(parsed.req.url).not.toContain('svc_sk_');
    }
  });

  it('hands the lines of one event-loop turn to the stream at once, at its end or before any other line', async () => {
    const writes: string[] = [];
    const access = new AccessLog({ write: (text: string) => writes.push(text) });
    const request = (id: string) => ({ id, method: 'GET', url: `/api/workspaces/${id}`, ip: '127.0.0.1' }) as unknown as FastifyRequest;
    const reply = { statusCode: 200, elapsedTime: 1.5 } as unknown as FastifyReply;
    access.write(request('a'), reply);
    access.write(request('b'), reply);
    expect(writes).toEqual([]);
    access.ordered.write('{"msg":"after"}\n');
    expect(writes).toHaveLength(2);
    expect(writes[0]?.split('\n').filter((l) => l !== '').map((l) => (JSON.parse(l) as { reqId: string }).reqId)).toEqual(['a', 'b']);
    expect(writes[1]).toBe('{"msg":"after"}\n');

    access.write(request('c'), reply);
    await new Promise((resolve) => setImmediate(resolve));
    expect(writes).toHaveLength(3);
    expect(writes[2]).toContain('"reqId":"c"');
  });

  it("writes a route's own lines as pino's request child does, made only when a line is written", async () => {
    const linesOf = async (lazy: boolean): Promise<string[]> => {
      const { stream, lines } = capture();
      const app = Fastify({
        logger: loggerOptions({ level: 'info' }, stream),
        genReqId: () => 'req-9',
        logController: new RequestLogController(),
        ...(lazy ? { childLoggerFactory: requestLogger } : {}),
      });
      app.get('/quiet', async (request) => ({ level: request.log.level }));
      app.get('/talks', async (request) => {
        request.log.info({ step: 1 }, 'an object and a message');
        request.log.warn('a message with %s', 'an argument');
        request.log.debug('below the level: not written');
        request.log.error({ err: new Error('boom') }, 'an error');
        request.log.child({ part: 'inner' }).info('from a child');
        return { ok: true };
      });
      await app.ready();
      expect((await app.inject({ method: 'GET', url: '/quiet' })).json()).toEqual({ level: 'info' });
      await app.inject({ method: 'GET', url: '/talks' });
      await app.close();
      return lines.map((l) => l.replace(/"time":\d+/, '"time":0').replace(/"responseTime":[0-9.e-]+/, '"responseTime":0').replace(/"stack":"[^"]*"/, '"stack":""'));
    };
    const lazy = await linesOf(true);
    expect(lazy).toEqual(await linesOf(false));
    const own = lazy.map((l) => JSON.parse(l) as { reqId?: string; msg: string; part?: string }).filter((l) => l.reqId === 'req-9' && l.msg !== 'request completed');
    expect(own.map((l) => l.msg)).toEqual(['an object and a message', 'a message with an argument', 'an error', 'from a child']);
    expect(own[3]?.part).toBe('inner');
  });
});
