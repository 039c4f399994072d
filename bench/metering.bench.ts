// Usage metering at scale (issue 14): one metering pass over 1,000 running resources (100
// workspaces × 8 projects + 2 databases; 1,500 containers: the projects have 1–3 replicas, and
// metering charges each container the engine reports running, issue 26), a pass a simulated
// minute for two hours, on SQLite and
// PostgreSQL. Beside it, the reference: the least a pass can write, hand-written with
// better-sqlite3 prepared statements in one transaction (one meter update and one accrual upsert
// per resource), over the same rows on SQLite. Goals: a pass ≤ 1 s on SQLite, and at most one
// ledger write per workspace per hour.
//
//   npx tsx bench/metering.bench.ts [--workspaces 100] [--minutes 120] [--pg-url postgres://…]   (make bench-metering)
//
// Writes bench/results/metering-<date>.json. Not part of the test suite.
import { mkdtempSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { sql } from 'kysely';
import { meterPass, type EngineContainer } from '../src/modules/billing/meter.js';
import { DEFAULT_BILLING_POLICY } from '../src/modules/billing/policy.js';
import { idSource, iso, systemRandom, type Clock, type Sources } from '../src/domain/clock.js';
import { charge, rateQ } from '../src/domain/money.js';
import { SecretBox } from '../src/adapters/secrets/secret-box.js';
import { createStore, type Store } from '../src/store/db.js';
import { createWorkspace } from '../src/modules/tenancy/workspaces.service.js';
import { findOrCreateUser } from '../src/modules/tenancy/users.js';
import { arg, freshPostgres, machine, num, round, summary, writeResult } from './support.js';

const GOAL_PASS_MS = 1000;
const START = Date.parse('2027-01-04T09:00:20.000Z');

class FixedClock implements Clock {
  constructor(public at: number) {}
  now(): Date {
    return new Date(this.at);
  }
}

/** What the bench builds its rows and workers from. */
type Deps = Sources & { store: Store; secrets: SecretBox };

function depsOf(store: Store, clock: FixedClock): Deps {
  return {
    store,
    clock,
    random: systemRandom,
    ids: idSource(clock, systemRandom),
    secrets: new SecretBox(randomBytes(32), systemRandom),
  };
}

/** 100 workspaces, each 8 projects with a running deployment and 2 running databases. */
async function populate(deps: Deps, workspaces: number): Promise<void> {
  const now = iso(deps.clock.now());
  for (let w = 0; w < workspaces; w++) {
    const user = await findOrCreateUser(deps, deps.store.repos, `owner${w.toString()}@bench.example`);
    const ws = await deps.store.transaction((tx) => createWorkspace(deps, { currency: 'USD', credit: 1_000_000 }, tx, { name: `ws ${w.toString()}`, slug: `ws-${w.toString()}`, ownerId: user.id, countedFor: null }));
    for (let p = 0; p < 8; p++) {
      const id = deps.ids.id();
      const slug = `app-${p.toString()}`;
      await deps.store.db
        .insertInto('projects')
        .values({ id, workspace_id: ws.id, name: slug, slug, port: 8080, replicas: 1 + (p % 3), cpu: ['0.25', '0.5', '1'][p % 3] ?? '0.5', ram: ['0.125', '0.5', '2'][p % 3] ?? '0.5', status: 'running', created_at: now, updated_at: now, host_label: `${slug}-${ws.slug}` })
        .execute();
      await deps.store.db
        .insertInto('deployments')
        .values({ id: deps.ids.id(), project_id: id, status: 'running', source: 'git', image: 'bench:1', branch: 'main', commit_sha: null, commit_message: null, error: null, created_at: now, started_at: now, finished_at: null, lease_owner: null, lease_until: null })
        .execute();
    }
    for (let d = 0; d < 2; d++) {
      const id = deps.ids.id();
      await deps.store.db
        .insertInto('databases')
        .values({ id, workspace_id: ws.id, name: `db ${d.toString()}`, slug: `db-${d.toString()}`, type: 'redis', provisioner: 'container', status: 'running', error: null, image: null, host: 'h', port: 6379, external_host: null, external_port: null, username: 'u', password: 'p', database_name: 'd', memory_mb: 512, owner_project_id: null, created_at: now, updated_at: now })
        .execute();
    }
  }
}

interface Run {
  store: string;
  resources: number;
  passes: number;
  pass_ms: ReturnType<typeof summary>;
  /** containers charged by a pass */
  containers: number;
  /** rows written by one steady pass (SQLite's total_changes); null on PostgreSQL */
  rows_written_per_pass: number | null;
  ledger_rows_per_workspace_per_hour: number;
  hours_posted: number;
}

async function slipway(label: string, url: string, workspaces: number, minutes: number): Promise<Run> {
  const store = await createStore(url);
  try {
    const clock = new FixedClock(START);
    const deps = depsOf(store, clock);
    await populate(deps, workspaces);
    // what the engine reports: a container per replica, one per database (listing the engine is not part of the pass timed)
    const projects = await store.db.selectFrom('projects').select(['id', 'replicas', 'cpu', 'ram']).execute();
    const dbs = await store.db.selectFrom('databases').select(['id', 'memory_mb']).execute();
    const containers: EngineContainer[] = [
      ...projects.flatMap((p) => Array.from({ length: p.replicas }, (_, i) => ({ id: `${p.id}-r${i.toString()}`, resource: p.id, running: true, finishedAt: null, cpu: Number(p.cpu), memoryBytes: Math.round(Number(p.ram) * 1024 ** 3) }))),
      ...dbs.map((d) => ({ id: `db-${d.id}`, resource: d.id, running: true, finishedAt: null, cpu: null, memoryBytes: d.memory_mb * 1024 * 1024 })),
    ];
    const times: number[] = [];
    let writes: number | null = null;
    const changes = async () => (await sql<{ n: number }>`select total_changes() as n`.execute(store.db)).rows[0]?.n ?? 0;
    let running = 0;
    for (let i = 0; i < minutes; i++) {
      const before = store.dialect === 'sqlite' ? await changes() : 0;
      const t0 = performance.now();
      const r = await meterPass({ store, clock, ids: deps.ids, prices: DEFAULT_BILLING_POLICY.prices }, containers, clock.now());
      times.push(performance.now() - t0);
      if (store.dialect === 'sqlite' && i === 5) writes = (await changes()) - before;
      running = r.running;
      clock.at += 60_000;
    }
    const usageRows = await store.db.selectFrom('wallet_transactions').select((eb) => eb.fn.countAll<string | number>().as('n')).where('type', '=', 'usage').executeTakeFirstOrThrow();
    const hours = Math.floor((START + (minutes - 1) * 60_000) / 3_600_000) - Math.floor(START / 3_600_000);
    return {
      store: label,
      resources: projects.length + dbs.length,
      containers: running,
      passes: minutes,
      pass_ms: summary(times, 1),
      rows_written_per_pass: writes,
      ledger_rows_per_workspace_per_hour: round(Number(usageRows.n) / workspaces / Math.max(1, hours), 3),
      hours_posted: hours,
    };
  } finally {
    await store.close();
  }
}

/** The reference: the same meters and accruals written with prepared statements, one transaction a pass. */
async function reference(file: string, workspaces: number, minutes: number): Promise<{ pass_ms: ReturnType<typeof summary> }> {
  // the rows: populated through Slipway's own store, then read and written by hand
  const store = await createStore(file);
  const clock = new FixedClock(START);
  await populate(depsOf(store, clock), workspaces);
  await store.close();
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  const prices = DEFAULT_BILLING_POLICY.prices;
  const projects = db
    .prepare("select p.id, p.workspace_id, p.replicas, p.cpu, p.ram from projects p where p.replicas > 0 and p.status not in ('suspended','crashed','stopped') and exists (select 1 from deployments d where d.project_id = p.id and d.status = 'running')")
    .all() as { id: string; workspace_id: string; replicas: number; cpu: string; ram: string }[];
  const dbs = db.prepare("select id, workspace_id, memory_mb from databases where status = 'running'").all() as { id: string; workspace_id: string; memory_mb: number }[];
  const getMeter = db.prepare('select next_minute, carry from billing_meters where resource_id = ?');
  const putMeter = db.prepare('insert into billing_meters (resource_id, workspace_id, next_minute, carry, running) values (?, ?, ?, ?, 1) on conflict (resource_id) do update set next_minute = excluded.next_minute, carry = excluded.carry');
  const accrue = db.prepare(
    `insert into billing_accruals (workspace_id, hour, resource_id, resource_kind, resource_name, minutes, vcpu_milli_minutes, ram_milli_minutes, db_mib_minutes, amount_micros)
     values (?, ?, ?, 'x', 'x', 1, 0, 0, 0, ?) on conflict (workspace_id, hour, resource_id) do update set minutes = minutes + 1, amount_micros = amount_micros + excluded.amount_micros`,
  );
  const resources = [
    ...projects.map((p) => ({ id: p.id, ws: p.workspace_id, rate: rateQ({ kind: 'project', replicas: p.replicas, vcpuMilli: Math.round(Number(p.cpu) * 1000), ramMilli: Math.round(Number(p.ram) * 1000) }, prices) })),
    ...dbs.map((d) => ({ id: d.id, ws: d.workspace_id, rate: rateQ({ kind: 'database', memoryMb: d.memory_mb }, prices) })),
  ];
  const times: number[] = [];
  for (let i = 0; i < minutes; i++) {
    const minute = Math.floor((START + i * 60_000) / 60_000);
    const hour = iso(new Date(Math.floor(minute / 60) * 3_600_000));
    const t0 = performance.now();
    db.transaction(() => {
      for (const r of resources) {
        const m = getMeter.get(r.id) as { next_minute: number; carry: number } | undefined;
        const c = charge(1, r.rate, BigInt(m?.carry ?? 0));
        accrue.run(r.ws, hour, r.id, c.micros);
        putMeter.run(r.id, r.ws, minute + 1, Number(c.carry));
      }
    })();
    times.push(performance.now() - t0);
  }
  db.close();
  return { pass_ms: summary(times, 1) };
}

async function main(): Promise<void> {
  const workspaces = num('workspaces', 100);
  const minutes = num('minutes', 120);
  const pgUrl = arg('pg-url', '');
  const dir = mkdtempSync(join(tmpdir(), 'slipway-metering-'));
  try {
    const runs: Run[] = [await slipway('sqlite', join(dir, 'slipway.db'), workspaces, minutes)];
    if (pgUrl !== '') {
      const pgdb = await freshPostgres(pgUrl);
      try {
        runs.push(await slipway('postgres', pgdb.url, workspaces, minutes));
      } finally {
        await pgdb.drop();
      }
    }
    const ref = await reference(join(dir, 'reference.db'), workspaces, minutes);
    const sqliteRun = runs[0];
    const report = {
      date: new Date().toISOString(),
      machine: await machine(),
      workload: { workspaces, resources_per_workspace: 10, simulated_minutes: minutes },
      goal: { pass_ms_sqlite: GOAL_PASS_MS, ledger_rows_per_workspace_per_hour: 1 },
      slipway: runs,
      reference_sqlite_prepared: ref,
      ratio_median_vs_reference: sqliteRun === undefined ? null : round(sqliteRun.pass_ms.median / Math.max(0.1, ref.pass_ms.median), 2),
      met: sqliteRun !== undefined && sqliteRun.pass_ms.max <= GOAL_PASS_MS && runs.every((r) => r.ledger_rows_per_workspace_per_hour <= 1),
    };
    console.log(JSON.stringify(report, null, 2));
    console.log(`wrote ${writeResult('metering', report)}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
