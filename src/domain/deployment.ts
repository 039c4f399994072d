import type { DeploymentStatus, ProjectStatus } from '../store/schema.js';

/**
 * The deployment state machine (docs/decisions.md#deployments):
 *   queued → building → deploying → running → superseded | stopped
 *   queued | building | deploying → failed
 *   queued → superseded (a newer deploy of the same project was queued first)
 */
export type DeploymentEvent =
  | { kind: 'claim' }
  | { kind: 'built' }
  | { kind: 'healthy' }
  | { kind: 'fail' }
  | { kind: 'supersede' }
  | { kind: 'stop' };

/** The state after `event`, or null when the event does not apply in `from`. */
export function next(from: DeploymentStatus, event: DeploymentEvent): DeploymentStatus | null {
  switch (event.kind) {
    case 'claim':
      return from === 'queued' ? 'building' : null;
    case 'built':
      return from === 'building' ? 'deploying' : null;
    case 'healthy':
      return from === 'deploying' ? 'running' : null;
    case 'fail':
      return isActive(from) ? 'failed' : null;
    case 'supersede':
      return from === 'queued' || from === 'running' ? 'superseded' : null;
    case 'stop':
      return from === 'running' ? 'stopped' : null;
  }
}

/** Work in progress: a deployment in one of these states must be driven to an end. */
export const ACTIVE: readonly DeploymentStatus[] = ['queued', 'building', 'deploying'];

export function isActive(status: DeploymentStatus): boolean {
  return ACTIVE.includes(status);
}

export function isFinal(status: DeploymentStatus): boolean {
  switch (status) {
    case 'failed':
    case 'superseded':
    case 'stopped':
      return true;
    case 'queued':
    case 'building':
    case 'deploying':
    case 'running':
      return false;
  }
}

/**
 * What the project shows, from its newest active deployment (if any) and whether a deployment
 * is serving: a failed redeploy of a running project leaves it `running`.
 */
export function projectStatusOf(active: DeploymentStatus | null, serving: boolean, lastFinal: DeploymentStatus | null): ProjectStatus {
  if (active === 'queued' || active === 'building') return 'building';
  if (active === 'deploying') return 'deploying';
  if (serving) return 'running';
  if (lastFinal === 'failed') return 'failed';
  if (lastFinal === 'stopped' || lastFinal === 'superseded') return 'stopped';
  return 'pending';
}
