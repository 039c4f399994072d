import { iso } from '../domain/clock.js';
import { charge, rateQ, thousandths, type Meterable, type Prices } from '../domain/money.js';
import type { Deps } from '../deps.js';
import { ConcurrentChange, type Meter, type RunningResource, type Usage } from '../store/repositories/billing.js';
import { billingPolicy } from './policy.js';

const MINUTE_MS = 60_000;

/** What one metering pass did (the benchmark and the logs read it). */
export interface MeterPass {
  /** resources that ran */
  running: number;
  /** resource-minutes charged */
  minutes: number;
  /** workspaces whose usage of finished hours went to the ledger */
  posted: number;
  /** workspaces skipped because another process metered them at the same moment (they are done next pass) */
  raced: number;
}

/** The RFC 3339 start of the hour of epoch minute `m`. */
const hourOf = (m: number): string => iso(new Date(Math.floor(m / 60) * 60 * MINUTE_MS));

/** What a running resource is charged for per minute. */
export const meterable = (r: RunningResource): Meterable =>
  r.kind === 'database' ? { kind: 'database', memoryMb: r.memory_mb } : { kind: r.kind, replicas: r.replicas, vcpuMilli: thousandths(r.cpu), ramMilli: thousandths(r.ram) };

/**
 * Usage metering (docs/billing.md#metering). Each pass charges every running resource for the
 * minutes it ran since it was last metered, up to and including the current minute: a minute
 * is charged once it has been seen running in it. A meter remembers the next minute to charge;
 * minutes while a resource did not run are never charged, and a clock that steps back charges
 * nothing until it passes the meter again. Charges accrue per resource and hour; the first pass
 * of a new hour posts the hours before it to the ledger, one row per workspace.
 *
 * Every change of a workspace's meters and accruals is one store transaction whose meter
 * updates are conditional on the values read: a second process metering at the same time
 * (two replicas, a restart during a pass) makes one of the two transactions roll back, never
 * a minute charged twice. A pass that dies half-way leaves each workspace either metered or not.
 */
export async function meterPass(deps: Deps, now: Date = deps.clock.now()): Promise<MeterPass> {
  const { store } = deps;
  const prices = billingPolicy(deps.platform).prices;
  const minute = Math.floor(now.getTime() / MINUTE_MS);
  const running = await store.repos.billing.running();
  const meters = await store.repos.billing.meters();
  const result: MeterPass = { running: running.length, minutes: 0, posted: 0, raced: 0 };

  const byWorkspace = new Map<string, { running: RunningResource[]; idle: Meter[] }>();
  const entry = (ws: string) => {
    let e = byWorkspace.get(ws);
    if (e === undefined) byWorkspace.set(ws, (e = { running: [], idle: [] }));
    return e;
  };
  for (const r of running) entry(r.workspace_id).running.push(r);
  // Meters of resources that stopped are marked idle: the minutes until they run again are not charged.
  const runningIds = new Set(running.map((r) => r.id));
  for (const m of meters.values()) if (m.running && !runningIds.has(m.resource_id)) entry(m.workspace_id).idle.push(m);

  for (const work of byWorkspace.values()) {
    try {
      result.minutes += await store.transaction(async (tx) => {
        let minutes = 0;
        for (const r of work.running) minutes += await meterOne(tx.billing, r, meters.get(r.id) ?? null, minute, prices);
        for (const m of work.idle) await tx.billing.moveMeter(m, { ...m, running: false });
        return minutes;
      });
    } catch (err) {
      if (!(err instanceof ConcurrentChange)) throw err;
      result.raced++;
    }
  }
  await store.repos.billing.dropOrphanMeters();
  result.posted = await postFinishedHours(deps, minute);
  return result;
}

/** Charges `r` up to and including `minute`; returns the minutes charged. */
async function meterOne(billing: Deps['store']['repos']['billing'], r: RunningResource, meter: Meter | null, minute: number, prices: Prices): Promise<number> {
  // A resource seen for the first time, or again after not running, pays from the current minute.
  const from = meter === null ? minute : meter.running ? meter.next_minute : Math.max(meter.next_minute, minute);
  const next = Math.max(from, minute + 1);
  let carry = meter?.carry ?? 0n;
  const rate = rateQ(meterable(r), prices);
  let charged = 0;
  // one accrual per hour the span touches (one, except after a pause of the metering itself)
  for (let start = from; start <= minute; ) {
    const hourEnd = (Math.floor(start / 60) + 1) * 60;
    const end = Math.min(hourEnd, minute + 1);
    const n = end - start;
    const c = charge(n, rate, carry);
    carry = c.carry;
    await billing.accrue(r.workspace_id, hourOf(start), usageOf(r, n, c.micros));
    charged += n;
    start = end;
  }
  await billing.moveMeter(meter, { resource_id: r.id, workspace_id: r.workspace_id, next_minute: next, carry, running: true });
  return charged;
}

function usageOf(r: RunningResource, minutes: number, micros: number): Usage {
  const project = r.kind !== 'database';
  return {
    resource_id: r.id,
    resource_kind: r.kind,
    resource_name: r.name,
    minutes,
    vcpu_milli_minutes: project ? r.replicas * thousandths(r.cpu) * minutes : 0,
    ram_milli_minutes: project ? r.replicas * thousandths(r.ram) * minutes : 0,
    db_mib_minutes: project ? 0 : r.memory_mb * minutes,
    amount_micros: micros,
  };
}

/**
 * Posts the usage of the hours before the current one: per workspace one ledger row (type
 * `usage`) and the balance change, in one transaction that also takes the accruals out, so that
 * an hour is never posted twice. Returns the workspaces posted.
 */
async function postFinishedHours(deps: Deps, minute: number): Promise<number> {
  const { store } = deps;
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
        const at = iso(deps.clock.now());
        await tx.wallets.post({
          id: deps.ids.id(),
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
