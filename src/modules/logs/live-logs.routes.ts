import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { invalid } from '../../domain/errors.js';
import type { LogEntry } from '../../domain/logs.js';
import { MAX_TAIL, type LiveLogs, type LiveStart } from './live.js';
import { parseTime } from './logs.service.js';
import type { ProjectService } from '../projects/projects.service.js';
import { accessOf } from '../../http/auth.js';
import { serveStream } from '../../http/stream.js';
import { authErrors, WEBSOCKET_OPENS } from '../../http/schemas.js';
import { SCOPES } from '../projects/scopes.js';

type Format = 'text' | 'json';

/**
 * The query of a handshake, checked here rather than by a schema: a refusal must arrive as an
 * `[ERROR]` frame after the handshake, not as a failed handshake.
 */
export function liveQuery(query: Record<string, unknown>): { start: LiveStart; format: Format } {
  const { tail, since, format = 'text' } = query;
  const start: LiveStart = {};
  if (tail !== undefined) {
    const n = typeof tail === 'string' && /^[0-9]{1,4}$/.test(tail) ? Number(tail) : Number.NaN;
    if (!(n <= MAX_TAIL)) throw invalid(`"tail" must be a whole number from 0 to ${MAX_TAIL.toString()}, written in decimal digits.`);
    start.tail = n;
  }
  if (since !== undefined) {
    // a whole number is a line id below 10^12 and Unix milliseconds from there (2001-09-09 on)
    const refuse = () => invalid('"since" must be a line id, an RFC 3339 time or Unix milliseconds.');
    if (typeof since !== 'string') throw refuse();
    let ms: number;
    try {
      ms = parseTime('since', since);
    } catch {
      throw refuse();
    }
    start.since = /^[0-9]+$/.test(since) && ms < 1e12 ? { afterId: ms } : { since: ms };
  }
  if (format !== 'text' && format !== 'json') throw invalid('"format" must be one of text, json.');
  return { start, format };
}

/** `text`: one line for people, never starting with `[`; `json`: the entry, with its id to resume from. */
export function liveFrame(e: LogEntry, format: Format): string {
  const timestamp = new Date(e.timestamp).toISOString();
  if (format === 'text') return `${timestamp} ${e.pod} ${e.stream} ${e.message}`;
  return JSON.stringify({
    id: e.id,
    timestamp,
    deployment_id: e.deploymentId,
    pod: e.pod,
    stream: e.stream,
    message: e.message,
    ...(e.level === null ? {} : { level: e.level }),
  });
}

export const liveLogRoutes: FastifyPluginAsyncTypebox<{ projects: ProjectService; live: LiveLogs }> = async (app, { projects, live }) => {

  for (const scope of SCOPES) {
    app.route({
      method: 'GET',
      url: `${scope.prefix}/live-logs`,
      config: { action: 'workspace.read', stream: true },
      schema: {
        operationId: scope.param === 'project_slug' ? 'streamProjectLiveLogs' : 'streamTemplateLiveLogs',
        tags: ['Logs'],
        summary:
          `WebSocket: the ${scope.what}'s runtime log, the last \`tail\` lines (0..1000, default 100) or every line after \`since\` (a line id, RFC 3339 or Unix ms), then every new line; \`format\` \`text\` (default) or \`json\`; refusals arrive as one \`[ERROR] <sentence>\` frame`,
        params: Type.Object({ slug: Type.String(), [scope.param]: Type.String() }),
        response: { 101: WEBSOCKET_OPENS, ...authErrors },
      },
      // A plain HTTP GET: refuse like any route would (the project must exist), or point at the handshake.
      handler: async (req) => {
        if (req.refusal !== null) throw req.refusal;
        await projects.get(accessOf(req), scope.ref(req.params));
        throw invalid('This is a WebSocket stream: open it with a WebSocket handshake.');
      },
      wsHandler: (socket, req) => {
        serveStream(socket, req, async () => {
          if (req.refusal !== null) throw req.refusal;
          const { start, format } = liveQuery(req.query as Record<string, unknown>);
          const project = await projects.get(accessOf(req), scope.ref(req.params));
          // written without waiting: the feed serves every client of the project at once
          const sub = live.subscribe(project.id, start, {
            write: (entry, written) => {
              if (socket.readyState === socket.OPEN) socket.send(liveFrame(entry, format), written);
              else written();
            },
            get bufferedAmount() {
              return socket.bufferedAmount;
            },
          });
          socket.on('close', () => {
            sub.close();
          });
          // the client may have gone while the project was read
          if (socket.readyState !== socket.OPEN) sub.close();
          await sub.done;
        });
      },
    });
  }
};
