import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { invalid } from '../../domain/errors.js';
import { isActive } from '../../domain/deployment.js';
import type { DeploymentService } from './deployments.service.js';
import type { BuildLog } from './build-log.js';
import { accessOf } from '../../http/auth.js';
import { serveStream } from '../../http/stream.js';
import { BUILD_LOG_START } from './build-log.js';
import { authErrors, WEBSOCKET_OPENS } from '../../http/schemas.js';
import { SCOPES } from '../projects/scopes.js';

/** How often a follower on this replica looks at the store for lines written elsewhere. */
const POLL_MS = 1000;

export const buildLogRoutes: FastifyPluginAsyncTypebox<{ deployments: DeploymentService; buildLog: BuildLog }> = async (app, { deployments, buildLog }) => {

  for (const scope of SCOPES) {
    app.route({
      method: 'GET',
      url: `${scope.prefix}/deployments/:id/logs`,
      config: { action: 'workspace.read', stream: true },
      schema: {
        operationId: scope.param === 'project_slug' ? 'streamProjectBuildLog' : 'streamTemplateBuildLog',
        tags: ['Deployments'],
        summary:
          'WebSocket: the build log of a deployment, replayed from the first line and followed while it is in progress, then `[END]`; refusals arrive as one `[ERROR] <sentence>` frame',
        params: Type.Object({ slug: Type.String(), [scope.param]: Type.String(), id: Type.String() }),
        response: { 101: WEBSOCKET_OPENS, ...authErrors },
      },
      // A plain HTTP GET: refuse like any route would (the deployment must exist), or point at the handshake.
      handler: async (req) => {
        if (req.refusal !== null) throw req.refusal;
        await deployments.get(accessOf(req), scope.ref(req.params), (req.params as { id: string }).id);
        throw invalid('This is a WebSocket stream: open it with a WebSocket handshake.');
      },
      wsHandler: (socket, req) => {
        serveStream(
          socket,
          req,
          async (stream) => {
            if (req.refusal !== null) throw req.refusal;
            const { id } = req.params as { id: string };
            const project_slug = scope.ref(req.params);
            const access = accessOf(req);
            const deployment = await deployments.get(access, project_slug, id);
            const project = deployment.project_id;
            let position = BUILD_LOG_START;
            for (;;) {
              const read = await buildLog.read(project, id, position);
              for (const line of read.lines) await stream.send(line);
              position = read.position;
              if (stream.closed) return;
              if (read.lines.length > 0) continue;
              const { status } = await deployments.get(access, project_slug, id);
              if (!isActive(status)) {
                // Lines written just before the status changed are read once more before [END].
                for (;;) {
                  const last = await buildLog.read(project, id, position);
                  for (const line of last.lines) await stream.send(line);
                  position = last.position;
                  if (last.lines.length === 0) return;
                }
              }
              await buildLog.changed(id, POLL_MS);
            }
          },
        );
      },
    });
  }
};
