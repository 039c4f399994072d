// Billing fixtures: resources that "run" as far as the store says (a running deployment), a worker
// on the test server's clock, and the clock moved to a fixed minute so that hours and months are
// known in advance. Metering charges what the engine runs; without an engine, storeEngine() stands
// in for it: it reports a container per replica of every running deployment, whatever the
// project's status, and one per running container database.
import type { EngineContainer, EngineContainers } from '../../src/modules/billing/meter.js';
import { allWork, BillingWorker, type BillingLog } from '../../src/modules/billing/billing.worker.js';
import { iso } from '../../src/domain/clock.js';
import { makeProject, type TestServer } from './harness.js';

/** Moves the server's clock to `at` (call before making keys: they expire by that clock). */
export function setClock(s: TestServer, at: string): void {
  s.clock.advance(Date.parse(at) - s.clock.now().getTime());
}

export interface Logged {
  level: 'info' | 'warn' | 'error';
  obj: object;
  msg: string;
}

/** A billing worker over the test server's deps, its deploy service and a log kept in memory. */
export function billingWorker(s: TestServer, containers: EngineContainers = storeEngine(s)): { worker: BillingWorker; logged: Logged[] } {
  const logged: Logged[] = [];
  const log: BillingLog = {
    info: (obj, msg) => logged.push({ level: 'info', obj, msg }),
    warn: (obj, msg) => logged.push({ level: 'warn', obj, msg }),
    error: (obj, msg) => logged.push({ level: 'error', obj, msg }),
  };
  const worker = new BillingWorker({
    store: s.store,
    clock: s.deps.clock,
    ids: s.deps.ids,
    policy: s.deps.policies.billing,
    mailer: s.deps.mailer,
    work: allWork(s.services.deploys, s.services.databases),
    log,
    containers,
  });
  s.leader.billing.set(worker);
  return { worker, logged };
}

/** The containers an engine would run for the store's rows: `<deployment>-r<i>` per replica of each running deployment, `db-<id>` per running container database. */
export function storeEngine(s: TestServer): EngineContainers {
  return async () => {
    const projects = await s.store.db
      .selectFrom('deployments')
      .innerJoin('projects', 'projects.id', 'deployments.project_id')
      .select(['deployments.id as deployment', 'projects.id', 'projects.replicas', 'projects.cpu', 'projects.ram'])
      .where('deployments.status', '=', 'running')
      .execute();
    const databases = await s.store.db.selectFrom('databases').select(['id', 'memory_mb']).where('status', '=', 'running').where('provisioner', '=', 'container').execute();
    const out: EngineContainer[] = [];
    for (const p of projects) {
      for (let i = 0; i < p.replicas; i++) out.push({ id: `${p.deployment}-r${i.toString()}`, resource: p.id, running: true, finishedAt: null, cpu: Number(p.cpu), memoryBytes: Math.round(Number(p.ram) * 1024 ** 3) });
    }
    for (const d of databases) out.push({ id: `db-${d.id}`, resource: d.id, running: true, finishedAt: null, cpu: null, memoryBytes: d.memory_mb * 1024 * 1024 });
    return out;
  };
}

/** A project of `workspaceId` serving a running deployment of the given size (no engine needed). */
export async function runningProject(s: TestServer, workspaceId: string, size: { replicas: number; cpu: string; ram: string }): Promise<{ id: string; slug: string; deploymentId: string }> {
  const p = await makeProject(s, { id: workspaceId });
  const now = iso(s.clock.now());
  await s.store.db.updateTable('projects').set({ ...size, status: 'running' }).where('id', '=', p.id).execute();
  const deploymentId = s.deps.ids.id();
  await s.store.db
    .insertInto('deployments')
    .values({ id: deploymentId, project_id: p.id, status: 'running', source: 'git', image: `slipway-test/${p.slug}:1`, branch: 'main', commit_sha: null, commit_message: null, error: null, created_at: now, started_at: now, finished_at: null, lease_owner: null, lease_until: null })
    .execute();
  return { id: p.id, slug: p.slug, deploymentId };
}

/** A running managed database row of `memoryMb` (no server behind it: metering reads the store). */
export async function runningDatabase(s: TestServer, workspaceId: string, memoryMb: number): Promise<string> {
  const id = s.deps.ids.id();
  const now = iso(s.clock.now());
  await s.store.db
    .insertInto('databases')
    .values({ id, workspace_id: workspaceId, name: `db ${id.slice(-6)}`, slug: `db-${id.slice(-6)}`, type: 'redis', provisioner: 'container', status: 'running', error: null, image: null, host: 'h', port: 6379, external_host: null, external_port: null, username: 'u', password: 'p', database_name: 'd', memory_mb: memoryMb, owner_project_id: null, created_at: now, updated_at: now })
    .execute();
  return id;
}

/** The workspace's balance, unbilled usage and ledger sum, micro-units, straight from the store. */
export async function money(s: TestServer, workspaceId: string): Promise<{ balance: number; unbilled: number; ledger: number }> {
  const wallet = await s.store.repos.wallets.get(workspaceId);
  return { balance: wallet?.balance_micros ?? NaN, unbilled: await s.store.repos.billing.unbilled(workspaceId), ledger: await s.store.repos.wallets.ledgerSum(workspaceId) };
}
