import { sql } from 'kysely';
import { toNumber } from '../dialects.js';
import type { UsageColumns } from '../tables/billing.js';
import { Repository } from './repository.js';

/** A resource that runs now, with what its minutes cost (docs/billing.md#metering). */
export interface RunningResource {
  id: string;
  workspace_id: string;
  kind: 'project' | 'template' | 'database';
  name: string;
  replicas: number;
  /** vCPU and GiB as the project stores them ("0.5"); empty for databases */
  cpu: string;
  ram: string;
  memory_mb: number;
}

export interface Meter {
  resource_id: string;
  workspace_id: string;
  next_minute: number;
  carry: bigint;
  running: boolean;
}

/** Usage of one resource, summed: an accrual hour's or a month's. */
export interface Usage {
  resource_id: string;
  resource_kind: string;
  resource_name: string;
  minutes: number;
  vcpu_milli_minutes: number;
  ram_milli_minutes: number;
  db_mib_minutes: number;
  amount_micros: number;
}

const USAGE_SUMS = ['minutes', 'vcpu_milli_minutes', 'ram_milli_minutes', 'db_mib_minutes', 'amount_micros'] as const;

/** An upsert's update of the usage columns: the sums grow by the new row's, the name follows it. */
function addedTo(table: 'billing_accruals' | 'billing_usage') {
  const sum = (column: (typeof USAGE_SUMS)[number]) => sql<number>`${sql.ref(`${table}.${column}`)} + ${sql.ref(`excluded.${column}`)}`;
  return {
    minutes: sum('minutes'),
    vcpu_milli_minutes: sum('vcpu_milli_minutes'),
    ram_milli_minutes: sum('ram_milli_minutes'),
    db_mib_minutes: sum('db_mib_minutes'),
    amount_micros: sum('amount_micros'),
    resource_name: sql<string>`excluded.resource_name`,
  };
}

/** A statement that found its row changed by another process: the caller's transaction is rolled back and the work retried later. */
export class ConcurrentChange extends Error {
  constructor(what: string) {
    super(`${what} changed meanwhile`);
    this.name = 'ConcurrentChange';
  }
}

const usageOf = (r: UsageColumns): Usage => ({
  resource_id: r.resource_id,
  resource_kind: r.resource_kind,
  resource_name: r.resource_name,
  minutes: toNumber(r.minutes),
  vcpu_milli_minutes: toNumber(r.vcpu_milli_minutes),
  ram_milli_minutes: toNumber(r.ram_milli_minutes),
  db_mib_minutes: toNumber(r.db_mib_minutes),
  amount_micros: toNumber(r.amount_micros),
});

/**
 * Metering: the meters of running resources, the usage accrued per hour until it is posted to the
 * ledger, and the posted usage per month. Every write that moves a meter is conditional on the
 * value read, so two processes metering at once never charge a minute twice.
 */
export class BillingRepository extends Repository {
  /**
   * Every project and template instance that serves now, and every running database (of one workspace, or all), as the
   * store describes them: the wallet's projection of what the next minutes cost. Metering charges what the engine runs instead.
   */
  async running(workspaceId?: string): Promise<RunningResource[]> {
    let pq = this.db.selectFrom('projects');
    let dq = this.db.selectFrom('databases');
    if (workspaceId !== undefined) {
      pq = pq.where('workspace_id', '=', workspaceId);
      dq = dq.where('workspace_id', '=', workspaceId);
    }
    const projects = await pq
      .select(['id', 'workspace_id', 'kind', 'name', 'replicas', 'cpu', 'ram'])
      .where('replicas', '>', 0)
      .where('status', 'not in', ['suspended', 'crashed', 'stopped'])
      .where((eb) => eb.exists(eb.selectFrom('deployments').select('deployments.id').whereRef('deployments.project_id', '=', 'projects.id').where('deployments.status', '=', 'running')))
      .execute();
    const databases = await dq.select(['id', 'workspace_id', 'name', 'memory_mb']).where('status', '=', 'running').execute();
    return [
      ...projects.map((p) => ({ id: p.id, workspace_id: p.workspace_id, kind: p.kind, name: p.name, replicas: p.replicas, cpu: p.cpu, ram: p.ram, memory_mb: 0 })),
      ...databases.map((d) => ({ id: d.id, workspace_id: d.workspace_id, kind: 'database' as const, name: d.name, replicas: 1, cpu: '', ram: '', memory_mb: d.memory_mb })),
    ];
  }

  /**
   * The projects, template instances and databases of the given ids, whatever their status, with
   * their sizes (what a container of theirs is charged at where the engine reports no limit).
   */
  async resources(ids: readonly string[]): Promise<Map<string, RunningResource>> {
    const found = new Map<string, RunningResource>();
    for (let i = 0; i < ids.length; i += 500) {
      const chunk = ids.slice(i, i + 500);
      const projects = await this.db.selectFrom('projects').select(['id', 'workspace_id', 'kind', 'name', 'replicas', 'cpu', 'ram']).where('id', 'in', chunk).execute();
      for (const p of projects) found.set(p.id, { id: p.id, workspace_id: p.workspace_id, kind: p.kind, name: p.name, replicas: p.replicas, cpu: p.cpu, ram: p.ram, memory_mb: 0 });
      const databases = await this.db.selectFrom('databases').select(['id', 'workspace_id', 'name', 'memory_mb']).where('id', 'in', chunk).execute();
      for (const d of databases) found.set(d.id, { id: d.id, workspace_id: d.workspace_id, kind: 'database', name: d.name, replicas: 1, cpu: '', ram: '', memory_mb: d.memory_mb });
    }
    return found;
  }

  async meters(): Promise<Map<string, Meter>> {
    const rows = await this.db.selectFrom('billing_meters').selectAll().execute();
    return new Map(rows.map((r) => [r.resource_id, { resource_id: r.resource_id, workspace_id: r.workspace_id, next_minute: toNumber(r.next_minute), carry: BigInt(r.carry), running: r.running === 1 }]));
  }

  /** Moves a meter from `from` (null: it has none yet) to `to`; ConcurrentChange when another process moved it first. */
  async moveMeter(from: Meter | null, to: Meter): Promise<void> {
    const values = { next_minute: to.next_minute, carry: Number(to.carry), running: to.running ? 1 : 0 };
    if (from === null) {
      const r = await this.db
        .insertInto('billing_meters')
        .values({ resource_id: to.resource_id, workspace_id: to.workspace_id, ...values })
        .onConflict((oc) => oc.column('resource_id').doNothing())
        .executeTakeFirst();
      if (Number(r.numInsertedOrUpdatedRows ?? 0n) !== 1) throw new ConcurrentChange(`the meter of ${to.resource_id}`);
      return;
    }
    const r = await this.db
      .updateTable('billing_meters')
      .set(values)
      .where('resource_id', '=', from.resource_id)
      .where('next_minute', '=', from.next_minute)
      .where('carry', '=', Number(from.carry))
      .where('running', '=', from.running ? 1 : 0)
      .executeTakeFirst();
    if (Number(r.numUpdatedRows) !== 1) throw new ConcurrentChange(`the meter of ${to.resource_id}`);
  }

  /** Drops the idle meters whose last charged minute is before `minute` (their containers stopped, or are gone, long enough ago). */
  async dropIdleMeters(minute: number): Promise<void> {
    await this.db.deleteFrom('billing_meters').where('running', '=', 0).where('next_minute', '<=', minute).execute();
  }

  /**
   * The bytes of succeeded backups each database keeps (at every destination), for the storage
   * meter (docs/backups.md#metering): its workspace and name beside them.
   */
  async storedBackups(): Promise<{ database_id: string; workspace_id: string; name: string; bytes: number }[]> {
    const rows = await this.db
      .selectFrom('backups')
      .innerJoin('databases', 'databases.id', 'backups.database_id')
      .select((eb) => ['backups.database_id as database_id', 'databases.workspace_id as workspace_id', 'databases.name as name', eb.fn.sum<string | number | null>('backups.size').as('bytes')])
      .where('backups.status', '=', 'succeeded')
      .groupBy(['backups.database_id', 'databases.workspace_id', 'databases.name'])
      .execute();
    return rows.map((r) => ({ database_id: r.database_id, workspace_id: r.workspace_id, name: r.name, bytes: toNumber(r.bytes ?? 0) })).filter((r) => r.bytes > 0);
  }

  /** Adds metered minutes to the workspace's accruals, one per resource and hour (at most one row of each in `rows`), in one statement. */
  async accrue(workspaceId: string, rows: readonly { hour: string; usage: Usage }[]): Promise<void> {
    // 500 rows of 10 values stay well inside both stores' limits on bound parameters
    for (let i = 0; i < rows.length; i += 500) {
      await this.db
        .insertInto('billing_accruals')
        .values(rows.slice(i, i + 500).map((r) => ({ workspace_id: workspaceId, hour: r.hour, ...r.usage })))
        .onConflict((oc) => oc.columns(['workspace_id', 'hour', 'resource_id']).doUpdateSet(addedTo('billing_accruals')))
        .execute();
    }
  }

  /** The workspaces with accruals of hours before `hour`: theirs are due to be posted. */
  async dueWorkspaces(hour: string): Promise<string[]> {
    const rows = await this.db.selectFrom('billing_accruals').select('workspace_id').distinct().where('hour', '<', hour).execute();
    return rows.map((r) => r.workspace_id);
  }

  /**
   * Takes the workspace's accruals of hours before `hour` out (inside the posting transaction):
   * the rows and the hours they span. ConcurrentChange when another process took some first.
   */
  async takeDue(workspaceId: string, hour: string): Promise<{ usage: (Usage & { hour: string })[] }> {
    let q = this.db.selectFrom('billing_accruals').selectAll().where('workspace_id', '=', workspaceId).where('hour', '<', hour);
    if (this.dialect === 'postgres') q = q.forUpdate();
    const rows = await q.orderBy('hour').execute();
    const r = await this.db.deleteFrom('billing_accruals').where('workspace_id', '=', workspaceId).where('hour', '<', hour).executeTakeFirst();
    if (Number(r.numDeletedRows) !== rows.length) throw new ConcurrentChange(`the usage of workspace ${workspaceId}`);
    return { usage: rows.map((row) => ({ ...usageOf(row), hour: row.hour })) };
  }

  /** Adds posted usage to the month's record of the resource. */
  async addToPeriod(workspaceId: string, period: string, u: Usage): Promise<void> {
    await this.db
      .insertInto('billing_usage')
      .values({ workspace_id: workspaceId, period, ...u })
      .onConflict((oc) => oc.columns(['workspace_id', 'period', 'resource_id']).doUpdateSet(addedTo('billing_usage')))
      .execute();
  }

  /** Metered and not yet posted, in micro-units: what the available balance subtracts. */
  async unbilled(workspaceId: string): Promise<number> {
    const row = await this.db.selectFrom('billing_accruals').select((eb) => eb.fn.sum<string | number | null>('amount_micros').as('total')).where('workspace_id', '=', workspaceId).executeTakeFirst();
    return toNumber(row?.total ?? 0);
  }

  /** unbilled() of every workspace that has some. */
  async unbilledByWorkspace(): Promise<Map<string, number>> {
    const rows = await this.db
      .selectFrom('billing_accruals')
      .select((eb) => ['workspace_id', eb.fn.sum<string | number>('amount_micros').as('total')])
      .groupBy('workspace_id')
      .execute();
    return new Map(rows.map((r) => [r.workspace_id, toNumber(r.total)]));
  }

  /** The workspace's usage of `period` (posted) and of its open hours from `since` (accrued), per resource. */
  async usage(workspaceId: string, period: string, since: string): Promise<Usage[]> {
    const posted = await this.db.selectFrom('billing_usage').selectAll().where('workspace_id', '=', workspaceId).where('period', '=', period).execute();
    const open = await this.db.selectFrom('billing_accruals').selectAll().where('workspace_id', '=', workspaceId).where('hour', '>=', since).execute();
    const byResource = new Map<string, Usage>();
    for (const row of [...posted, ...open]) {
      const u = usageOf(row);
      const seen = byResource.get(u.resource_id);
      if (seen === undefined) byResource.set(u.resource_id, u);
      else for (const k of USAGE_SUMS) seen[k] += u[k];
    }
    return [...byResource.values()];
  }
}
