import type { DeploymentRecord } from '../../domain/deployment.js';
import type { DatabaseHealth, Engine, Pod } from '../../domain/ports.js';
import type { ProjectRecord } from '../../domain/project.js';
import { idleEngine } from './deploy.service.js';

/**
 * The engine the API talks to, whichever it is now: idle until `serve` starts one (deployments
 * only queue), then this process's orchestrator while it leads, or the standby engine while
 * another process does (src/modules/deployments/engine/engine-supervisor.ts). The services hold this handle from
 * their construction; only the supervisor (or a test) changes what it points at.
 */
export class EngineHandle implements Engine {
  private current: Engine = idleEngine;

  /** From now on, calls go to `engine`. */
  use(engine: Engine): void {
    this.current = engine;
  }

  /** Back to the idle engine: deployments only queue. */
  release(): void {
    this.current = idleEngine;
  }

  wake(): void {
    this.current.wake();
  }

  stop(project: ProjectRecord, deployment: DeploymentRecord): Promise<void> {
    return this.current.stop(project, deployment);
  }

  restart(project: ProjectRecord, deployment: DeploymentRecord): Promise<void> {
    return this.current.restart(project, deployment);
  }

  routesChanged(projectId: string): Promise<void> {
    return this.current.routesChanged(projectId);
  }

  pods(projectId: string, deploymentId: string): Promise<Pod[]> {
    return this.current.pods(projectId, deploymentId);
  }

  databaseHealth(databaseId: string): Promise<DatabaseHealth | null> {
    return this.current.databaseHealth(databaseId);
  }
}
