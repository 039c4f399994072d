import { iso, type Clock, type IdSource } from '../../domain/clock.js';
import { charge, rateQ, thousandths, type Meterable, type Prices } from '../../domain/money.js';
import { DATABASE_LABEL } from '../../domain/database.js';
import type { Runtime } from '../../domain/runtime.js';
import type { StoreOf } from '../../store/db.js';
import { ConcurrentChange, type Meter, type RunningResource, type Usage } from '../../store/repositories/billing.js';

const MINUTE_MS = 60_000;

/** What one metering pass did (the benchmark and the logs read it). */
export interface MeterPass {
  /** containers that ran */
  running: number;
  /** container-minutes charged */
  minutes: number;
  /** workspaces whose usage of finished hours went to the ledger */
  posted: number;
  /** workspaces skipped because another process metered them at the same moment (they are done next pass) */
  raced: number;
}

/** What a metering pass uses: the meters and accruals, and the ledger its finished hours are posted to. */
export interface Metering {
  store: StoreOf<'billing' | 'wallets'>;
  clock: Clock;
  /** the ids of the ledger rows */
  ids: IdSource;
  prices: Prices;
}

/** A container of a project, template instance or database as the engine reports it (docs/billing.md#metering). */
export interface EngineContainer {
  /** the engine's id: the key of the container's meter */
  id: string;
  /** the project (or template instance) or database it belongs to */
  resource: string;
  running: boolean;
  /** its last exit; null while it never exited */
  finishedAt: Date | null;
  /** its limits as the engine applies them, vCPU and bytes; null where unlimited (the resource's size is charged then) */
  cpu: number | null;
  memoryBytes: number | null;
}

/** Where a pass learns what runs: every container of this installation's projects, instances and databases. */
export type EngineContainers = () => Promise<EngineContainer[]>;

/** The engine's containers of this installation (selected by `labels`), as metering reads them. */
export function engineContainers(runtime: Pick<Runtime, 'list'>, labels: Record<string, string>): EngineContainers {
  return async () =>
    (await runtime.list({ labels })).flatMap((c) => {
      const resource = c.owner?.project ?? c.labels[DATABASE_LABEL];
      return resource === undefined ? [] : [{ id: c.id, resource, running: c.state === 'running', finishedAt: c.finishedAt, cpu: c.cpu, memoryBytes: c.memoryBytes }];
    });
}

/** A container charged by this pass, with what its minutes cost. */
interface Metered {
  /** the container's id */
  id: string;
  resource_id: string;
  workspace_id: string;
  kind: 'project' | 'template' | 'database' | 'backups';
  name: string;
  vcpuMilli: number;
  ramMilli: number;
  memoryMb: number;
  /** the backups' stored MiB (kind `backups`) */
  storedMib: number;
}

/** The storage meter of a database's backups: its key among the meters and its resource in the usage. */
export const backupsResource = (databaseId: string): string => `backups:${databaseId}`;

/** The RFC 3339 start of the hour of epoch minute `m`. */
const hourOf = (m: number): string => iso(new Date(Math.floor(m / 60) * 60 * MINUTE_MS));

/** Idle meters are kept this many minutes after the last minute they charged (a container seen again meanwhile is not charged a minute twice), then dropped. */
const IDLE_METER_KEEP_MINUTES = 60;

/** What a resource as the store describes it is charged for per minute (the wallet's projection). */
export const meterable = (r: RunningResource): Meterable =>
  r.kind === 'database' ? { kind: 'database', memoryMb: r.memory_mb } : { kind: r.kind, replicas: r.replicas, vcpuMilli: thousandths(r.cpu), ramMilli: thousandths(r.ram) };

const meterableOf = (c: Metered): Meterable =>
  c.kind === 'database' ? { kind: 'database', memoryMb: c.memoryMb } : c.kind === 'backups' ? { kind: 'backups', storedMib: c.storedMib } : { kind: c.kind, replicas: 1, vcpuMilli: c.vcpuMilli, ramMilli: c.ramMilli };

/**
 * Usage metering (docs/billing.md#metering). What is charged is what the engine runs: every
 * container of a project, template instance or database, whatever the status of what it belongs
 * to (`crashed`, `stopped`, `suspended` included), at its own limits (vCPU and memory as the
 * engine applies them). Each container has a meter, the next minute to charge: a pass charges a
 * running container the minutes it ran since, up to and including the current minute (a minute
 * is charged once it has been seen running in it), and a container that stopped since it was
 * last seen the minutes up to its exit. Minutes while a container did not run are never charged,
 * and a clock that steps back charges nothing until it passes the meter again. Charges accrue per
 * resource and hour; the first pass of a new hour posts the hours before it to the ledger, one
 * row per workspace.
 *
 * Every change of a workspace's meters and accruals is one store transaction whose meter
 * updates are conditional on the values read: a second process metering at the same time
 * (two replicas, a leader change, a restart during a pass) makes one of the two transactions
 * roll back, never a minute charged twice. A pass that dies half-way leaves each workspace
 * either metered or not.
 */
export async function meterPass(metering: Metering, containers: readonly EngineContainer[], now: Date = metering.clock.now()): Promise<MeterPass> {
  const { store, prices } = metering;
  const minute = Math.floor(now.getTime() / MINUTE_MS);
  const resources = await store.repos.billing.resources([...new Set(containers.map((c) => c.resource))]);
  const meters = await store.repos.billing.meters();
  const result: MeterPass = { running: 0, minutes: 0, posted: 0, raced: 0 };

  const byWorkspace = new Map<string, { workspace: string; charge: { c: Metered; until: number; running: boolean }[]; idle: Meter[] }>();
  const entry = (ws: string) => {
    let e = byWorkspace.get(ws);
    if (e === undefined) byWorkspace.set(ws, (e = { workspace: ws, charge: [], idle: [] }));
    return e;
  };
  const charged = new Set<string>();
  for (const c of containers) {
    const r = resources.get(c.resource);
    // a container of a resource deleted meanwhile: the reconciler removes it, nobody is left to charge
    if (r === undefined) continue;
    const meter = meters.get(c.id);
    if (c.running) {
      result.running++;
      entry(r.workspace_id).charge.push({ c: metered(c, r), until: minute, running: true });
      charged.add(c.id);
    } else if (meter?.running === true && c.finishedAt !== null) {
      // it stopped since it was last seen: the minutes it ran into until its exit are charged too
      const until = Math.min(minute, Math.floor(c.finishedAt.getTime() / MINUTE_MS));
      entry(r.workspace_id).charge.push({ c: metered(c, r), until, running: false });
      charged.add(c.id);
    }
  }
  // Stored backups are charged like a container that runs while they are kept: by the minute, at their size now
  for (const b of await store.repos.billing.storedBackups()) {
    const id = backupsResource(b.database_id);
    entry(b.workspace_id).charge.push({ c: { id, resource_id: id, workspace_id: b.workspace_id, kind: 'backups', name: `${b.name} (backups)`, vcpuMilli: 0, ramMilli: 0, memoryMb: 0, storedMib: Math.ceil(b.bytes / MIB) }, until: minute, running: true });
    charged.add(id);
  }
  // Meters of containers that stopped (or are gone) are marked idle: the minutes until they run again are not charged.
  for (const m of meters.values()) if (m.running && !charged.has(m.resource_id)) entry(m.workspace_id).idle.push(m);

  for (const work of byWorkspace.values()) {
    try {
      result.minutes += await store.transaction(async (tx) => {
        let minutes = 0;
        // the containers of one resource add to one accrual per hour, written in one statement for the workspace
        const accruals = new Map<string, { hour: string; usage: Usage }>();
        for (const { c, until, running } of work.charge) {
          minutes += await meterOne(tx.billing, c, meters.get(c.id) ?? null, meters.get(c.resource_id) ?? null, minute, until, running, prices, accruals);
        }
        for (const m of work.idle) await tx.billing.moveMeter(m, { ...m, running: false });
        if (accruals.size > 0) await tx.billing.accrue(work.workspace, [...accruals.values()]);
        return minutes;
      });
    } catch (err) {
      if (!(err instanceof ConcurrentChange)) throw err;
      result.raced++;
    }
  }
  await store.repos.billing.dropIdleMeters(minute - IDLE_METER_KEEP_MINUTES);
  result.posted = await postFinishedHours(metering, minute);
  return result;
}

const GIB = 1024 ** 3;
const MIB = 1024 ** 2;

function metered(c: EngineContainer, r: RunningResource): Metered {
  return {
    id: c.id,
    resource_id: r.id,
    workspace_id: r.workspace_id,
    kind: r.kind,
    name: r.name,
    vcpuMilli: c.cpu === null ? thousandths(r.cpu === '' ? '0' : r.cpu) : Math.round(c.cpu * 1000),
    ramMilli: c.memoryBytes === null ? thousandths(r.ram === '' ? '0' : r.ram) : Math.round((c.memoryBytes / GIB) * 1000),
    memoryMb: c.memoryBytes === null ? r.memory_mb : Math.round(c.memoryBytes / MIB),
    storedMib: 0,
  };
}

/**
 * Charges container `c` up to and including minute `until` (at most the current `minute`) and
 * leaves its meter running or idle; returns the minutes charged. `legacy` is the meter its
 * resource had when meters were kept per resource (before 2026-12): a container's first meter
 * does not charge again a minute that one charged.
 */
async function meterOne(
  billing: Metering['store']['repos']['billing'],
  c: Metered,
  meter: Meter | null,
  legacy: Meter | null,
  minute: number,
  until: number,
  running: boolean,
  prices: Prices,
  accruals: Map<string, { hour: string; usage: Usage }>,
): Promise<number> {
  // A container seen for the first time, or again after not running, pays from the current minute.
  const from = meter === null ? Math.max(minute, legacy?.next_minute ?? 0) : meter.running ? meter.next_minute : Math.max(meter.next_minute, minute);
  const next = Math.max(from, until + 1);
  let carry = meter?.carry ?? 0n;
  const rate = rateQ(meterableOf(c), prices);
  let charged = 0;
  // one accrual per hour the span touches (one, except after a pause of the metering itself)
  for (let start = from; start <= until; ) {
    const hourEnd = (Math.floor(start / 60) + 1) * 60;
    const end = Math.min(hourEnd, until + 1);
    const n = end - start;
    const ch = charge(n, rate, carry);
    carry = ch.carry;
    addUsage(accruals, hourOf(start), usageOf(c, n, ch.micros));
    charged += n;
    start = end;
  }
  await billing.moveMeter(meter, { resource_id: c.id, workspace_id: c.workspace_id, next_minute: next, carry, running });
  return charged;
}

const USAGE_SUMS = ['minutes', 'vcpu_milli_minutes', 'ram_milli_minutes', 'db_mib_minutes', 'amount_micros'] as const;

/** Adds `u` to the accrual of its resource and `hour`. */
function addUsage(accruals: Map<string, { hour: string; usage: Usage }>, hour: string, u: Usage): void {
  const key = `${hour} ${u.resource_id}`;
  const seen = accruals.get(key);
  if (seen === undefined) accruals.set(key, { hour, usage: u });
  else for (const k of USAGE_SUMS) seen.usage[k] += u[k];
}

function usageOf(c: Metered, minutes: number, micros: number): Usage {
  const project = c.kind === 'project' || c.kind === 'template';
  return {
    resource_id: c.resource_id,
    resource_kind: c.kind,
    resource_name: c.name,
    minutes,
    vcpu_milli_minutes: project ? c.vcpuMilli * minutes : 0,
    ram_milli_minutes: project ? c.ramMilli * minutes : 0,
    db_mib_minutes: c.kind === 'database' ? c.memoryMb * minutes : 0,
    amount_micros: micros,
  };
}

/**
 * Posts the usage of the hours before the current one: per workspace one ledger row (type
 * `usage`) and the balance change, in one transaction that also takes the accruals out, so that
 * an hour is never posted twice. Returns the workspaces posted.
 */
async function postFinishedHours({ store, clock, ids }: Metering, minute: number): Promise<number> {
  const hour = hourOf(minute);
  let posted = 0;
  for (const workspaceId of await store.repos.billing.dueWorkspaces(hour)) {
    try {
      await store.transaction(async (tx) => {
        const { usage } = await tx.billing.takeDue(workspaceId, hour);
        if (usage.length === 0) return;
        let total = 0;
        for (const { hour: h, ...u } of usage) {
          total += u.amount_micros;
          await tx.billing.addToPeriod(workspaceId, h.slice(0, 7), u);
        }
        const first = usage[0]?.hour ?? hour;
        const last = usage[usage.length - 1]?.hour ?? hour;
        const at = iso(clock.now());
        await tx.wallets.post({
          id: ids.id(),
          workspaceId,
          type: 'usage',
          amountMicros: -total,
          description: usageDescription(first, last, new Set(usage.map((u) => u.resource_id)).size),
          reference: null,
          at,
        });
      });
      posted++;
    } catch (err) {
      if (!(err instanceof ConcurrentChange)) throw err;
    }
  }
  return posted;
}

/** "Usage 2026-11-26 13:00 to 14:00 UTC, 3 resources" (the end's date too when it is another day) */
function usageDescription(firstHour: string, lastHour: string, resources: number): string {
  const end = iso(new Date(Date.parse(lastHour) + 3_600_000));
  const to = end.slice(0, 10) === firstHour.slice(0, 10) ? end.slice(11, 16) : `${end.slice(0, 10)} ${end.slice(11, 16)}`;
  return `Usage ${firstHour.slice(0, 10)} ${firstHour.slice(11, 16)} to ${to} UTC, ${resources.toString()} resource${resources === 1 ? '' : 's'}`;
}
