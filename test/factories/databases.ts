// The leader's database worker of a test server, as `slipway serve` composes it (short poll and
// reconcile periods, quiet logs). The engine factory starts one with `databases`; tests that
// play a second leader, or provision only on shared servers, start their own.
import Docker from 'dockerode';
import type { DatabasePolicy } from '../../src/modules/databases/policy.js';
import { sharedPrefix } from '../../src/modules/databases/shared.js';
import { DatabaseWorker, type DatabaseWorkerOptions } from '../../src/modules/databases/databases.worker.js';
import { systemClock } from '../../src/domain/clock.js';
import { instanceLabels } from '../../src/modules/deployments/engine/containers.js';
import { DockerRuntime } from '../../src/adapters/runtime/docker/docker.runtime.js';
import { instanceId } from '../../src/store/db.js';
import type { TestServer } from './harness.js';

const quiet: DatabaseWorkerOptions['log'] = { info: () => undefined, warn: () => undefined, error: (obj, msg) => { console.error(msg, obj); } };

export interface TestDatabaseWorkerOptions {
  /** the policy over the server's platform settings */
  policy?: Partial<DatabasePolicy>;
  /** the engine's runtime; default a plain Docker runtime (shared servers never use it) */
  runtime?: DatabaseWorkerOptions['runtime'];
  /** the workspace network (the engine's); default: none, for databases on shared servers only */
  network?: DatabaseWorkerOptions['network'];
  upstreamMode?: DatabaseWorkerOptions['upstreamMode'];
  login?: DatabaseWorkerOptions['login'];
  log?: DatabaseWorkerOptions['log'];
  reconcileEveryMs?: number;
  /** attached to the server's API, so that creates and deletes wake it (default yes) */
  attach?: boolean;
  /** restores new databases from backups (the engine factory's backup worker) */
  restorer?: DatabaseWorkerOptions['restorer'];
}

/** Starts a database worker over `s`'s store; stop it with stop() (and clear `s.leader.databases` when it was set). */
export async function startDatabaseWorker(s: TestServer, opts: TestDatabaseWorkerOptions = {}): Promise<DatabaseWorker> {
  const instance = await instanceId(s.store);
  const worker = new DatabaseWorker({
    repos: s.store.repos,
    clock: systemClock,
    random: s.deps.random,
    ids: s.deps.ids,
    secrets: s.deps.secrets,
    runtime: opts.runtime ?? new DockerRuntime({ docker: new Docker() }),
    policy: { ...s.deps.policies.databases, ...opts.policy },
    labels: instanceLabels(instance),
    sharedPrefix: sharedPrefix(instance),
    network: opts.network ?? (() => Promise.reject(new Error('this test worker has no engine network'))),
    upstreamMode: opts.upstreamMode ?? 'published',
    logs: s.logStore,
    log: opts.log ?? quiet,
    ...(opts.login === undefined ? {} : { login: opts.login }),
    pollMs: 200,
    reconcileEveryMs: opts.reconcileEveryMs ?? 1000,
    ...(opts.restorer === undefined ? {} : { restorer: opts.restorer }),
  });
  worker.start();
  if (opts.attach !== false) s.leader.databases.set(worker);
  return worker;
}
