import { iso, type Clock } from '../../../domain/clock.js';
import type { Engine } from '../../../domain/ports.js';
import type { Runtime } from '../../../domain/runtime.js';
import type { Repositories } from '../../../store/repositories/index.js';
import { databaseHealthOf } from '../../databases/health.js';
import { instanceLabels, podsOf } from './containers.js';
import { idleEngine } from '../deploy.service.js';

/**
 * The engine of a standby process (another one holds the deploy-engine lease): its status view
 * reads the pods from the engine it reaches, and a restart is recorded on the deployment for the
 * engine's next reconciler pass. Stops and route changes need nothing more: the reconciler
 * follows the store.
 */
export function standbyEngine(runtime: Runtime, instanceId: string, { deployments, clock }: { deployments: Repositories['deployments']; clock: Clock }): Engine {
  return {
    ...idleEngine,
    pods: (projectId, deploymentId) => podsOf(runtime, instanceLabels(instanceId), projectId, deploymentId).catch(() => []),
    databaseHealth: (databaseId) => databaseHealthOf(runtime, databaseId, clock).catch(() => null),
    // The engine's reconciler runs it (Reconciler.pass).
    restart: async (_project, deployment) => {
      await deployments.requestRestart(deployment.id, iso(clock.now()));
    },
  };
}
