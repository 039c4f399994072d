import type { ProjectStatus } from './project.js';

/** Every state a deployment can be in, in the order of its life. */
export const DEPLOYMENT_STATUSES = ['queued', 'building', 'deploying', 'running', 'failed', 'superseded', 'stopped'] as const;
export type DeploymentStatus = (typeof DEPLOYMENT_STATUSES)[number];

/** What queued a deployment: a push or a connection (`git`), a redeploy, a rollback, a template. */
export const DEPLOYMENT_SOURCES = ['git', 'redeploy', 'rollback', 'template'] as const;
export type DeploymentSource = (typeof DEPLOYMENT_SOURCES)[number];

/** A deployment as the store keeps it. */
export interface DeploymentRecord {
  id: string;
  project_id: string;
  status: DeploymentStatus;
  source: DeploymentSource;
  image: string | null;
  branch: string | null;
  commit_sha: string | null;
  commit_message: string | null;
  error: string | null;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  /** the worker that holds this deployment while it is building or deploying */
  lease_owner: string | null;
  lease_until: string | null;
  attempts: number;
  /** a rolling restart asked of a standby, for the deploy engine's reconciler to run */
  restart_requested_at: string | null;
  /** 1: queued by a push webhook; the build fails unless commit_sha is still the branch's head */
  require_head: number;
}

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
export const ACTIVE = ['queued', 'building', 'deploying'] as const satisfies readonly DeploymentStatus[];

/** Claimed by a worker, which holds the deployment's lease while it is in one of these states. */
export const LEASED = ['building', 'deploying'] as const satisfies readonly DeploymentStatus[];

/** Not ended: in progress or serving. Its image is still needed. */
export const LIVE = [...ACTIVE, 'running'] as const satisfies readonly DeploymentStatus[];

/** Ended: a deployment never leaves these states. */
export const FINAL = ['failed', 'superseded', 'stopped'] as const satisfies readonly DeploymentStatus[];

const among = (set: readonly DeploymentStatus[], status: DeploymentStatus): boolean => set.includes(status);

export function isActive(status: DeploymentStatus): boolean {
  return among(ACTIVE, status);
}

export function isFinal(status: DeploymentStatus): boolean {
  return among(FINAL, status);
}

export function isLive(status: DeploymentStatus): boolean {
  return among(LIVE, status);
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
