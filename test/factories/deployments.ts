// Following a deployment through the API as a client does: the deploy answers 202 at once, and
// the client polls the deployment until the engine has finished with it.
import { ACTIVE } from '../../src/domain/deployment.js';
import type { TestServer } from './harness.js';
import { waitFor, type SlipwayProcess } from './process.js';

const IN_PROGRESS: readonly string[] = ACTIVE;

/** Queued, building or deploying: the engine is still working on it. */
export const inProgress = (status: string): boolean => IN_PROGRESS.includes(status);

/**
 * Polls `get` until the deployment it returns is no longer in progress (running, failed, …) and
 * returns it. `get` may use any client of the API; `proc`, when given, is the server whose exit
 * ends the wait early.
 */
export function settled<T extends { status: string }>(
  get: () => Promise<T | undefined>,
  what = 'the deployment to settle',
  timeoutMs = 180_000,
  proc?: SlipwayProcess,
): Promise<T> {
  return waitFor(what, async () => {
    const d = await get();
    return d !== undefined && !inProgress(d.status) ? d : undefined;
  }, proc, timeoutMs);
}

/** The deployment `id` of the project at `project` (its API path), once it has settled. */
export function settledDeployment<T extends { status: string }>(
  s: Pick<TestServer, 'request'>,
  key: string,
  project: string,
  id: string,
  timeoutMs = 180_000,
): Promise<T> {
  const path = `${project}/deployments/${id}`;
  return settled(async () => (await s.request<T>('GET', path, { key })).body.data, `the deployment ${path} to settle`, timeoutMs);
}

/** `POST <project>/deploy`, which must answer 202, then the deployment once it has settled. */
export async function deployAndSettle<T extends { id: string; status: string }>(
  s: Pick<TestServer, 'request'>,
  key: string,
  project: string,
  timeoutMs = 180_000,
): Promise<T> {
  const r = await s.request<T>('POST', `${project}/deploy`, { key });
  if (r.status !== 202 || r.body.data === undefined) throw new Error(`POST ${project}/deploy answered ${String(r.status)}: ${r.text}`);
  return settledDeployment<T>(s, key, project, r.body.data.id, timeoutMs);
}
