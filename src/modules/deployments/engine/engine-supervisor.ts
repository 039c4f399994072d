import { hostname } from 'node:os';
import type { Clock, IdSource } from '../../../domain/clock.js';
import type { Engine } from '../../../domain/ports.js';
import type { Late } from '../../../domain/late.js';
import type { Repositories } from '../../../store/repositories/index.js';
import { Leadership, type LeadershipLog } from './leadership.js';

/** The deploy engine of the process that leads: it runs until shut down. */
export interface LeaderEngine extends Engine {
  shutdown(): Promise<void>;
}

export interface EngineSupervisorOptions {
  /** where the `deploy-engine` lease is held */
  leases: Repositories['leases'];
  clock: Clock;
  ids: IdSource;
  log: LeadershipLog;
  /** what the API talks to: the leader's engine or the standby's, set here */
  handle: Late<Engine>;
  /** starts this process's deploy engine; a failure is a failed start (or, later, a failed election) */
  startLeader(): Promise<LeaderEngine>;
  /** the engine of a standby process (standby.ts) */
  standby(): Promise<Engine>;
}

export interface EngineSupervisor {
  /** ends the campaign: the engine (if this process leads) shuts down and the lease is released */
  stop(): Promise<void>;
}

/** How long the deploy engine's lease lasts without renewal (renewed every third of it). */
const ENGINE_LEASE_MS = 30_000;
/** How often a standby process asks for the lease. */
const STANDBY_RETRY_MS = 5_000;

/**
 * At most one process per store runs the deploy engine: it holds the store's `deploy-engine`
 * lease (leadership.ts). The start that gets the lease starts the engine before the API
 * listens, so a broken engine stops the start (superviseEngine rejects). A process that finds
 * the lease held serves the API as a standby (deployments queue for the leader) and takes the
 * engine over when the lease is released or runs out; a leader that loses its lease shuts its
 * engine down. The handle follows: the leader's engine while leading, the standby's otherwise.
 */
export async function superviseEngine(o: EngineSupervisorOptions): Promise<EngineSupervisor> {
  const { log, handle } = o;
  const leadership = new Leadership({ leases: o.leases, clock: o.clock, log, name: 'deploy-engine', holder: `${hostname()}/${process.pid.toString()}/${o.ids.id()}`, ttlMs: ENGINE_LEASE_MS });
  let engine: LeaderEngine | null = null;
  const elect = async () => {
    if (engine !== null) return;
    engine = await o.startLeader();
    handle.set(engine);
  };
  if ((await leadership.tryAcquire()) || (await takeOverFromDeadProcess(leadership))) {
    try {
      await elect();
    } catch (err) {
      await leadership.release();
      throw err;
    }
  } else {
    const current = await leadership.holder();
    log.warn({ holder: current?.holder, until: current?.expiresAt }, 'standby: another Slipway process runs the deploy engine on this store; this one serves the API and takes the engine over when that one stops');
    handle.set(await o.standby());
  }
  const campaign = leadership.lead({
    onElected: async () => {
      if (engine === null) log.info({}, 'taking over the deploy engine');
      await elect();
    },
    onDeposed: async () => {
      const stopping = engine;
      engine = null;
      handle.set(await o.standby());
      await stopping?.shutdown();
    },
    renewEveryMs: ENGINE_LEASE_MS / 3,
    retryEveryMs: STANDBY_RETRY_MS,
  });
  return { stop: () => campaign.stop() };
}

/**
 * After a kill -9 on this machine the lease would block a restart for up to its ttl: a holder
 * named after this host whose process no longer exists is taken over at once.
 */
async function takeOverFromDeadProcess(leadership: Leadership): Promise<boolean> {
  const current = await leadership.holder();
  const [host, pid] = current?.holder.split('/') ?? [];
  if (current === null || host !== hostname() || pid === undefined || processExists(Number(pid))) return false;
  return leadership.takeOver(current.holder);
}

function processExists(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
