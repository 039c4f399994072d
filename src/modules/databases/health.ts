import type { Clock } from '../../domain/clock.js';
import type { DatabaseHealth } from '../../domain/ports.js';
import type { Runtime, UsageOf } from '../../domain/runtime.js';

/** The names of a database's container and volume on the engine. */
export const serverName = (databaseId: string): string => `slipway-db-${databaseId}`;

/**
 * A database's server as the engine sees it: its container's state, restarts, cpu and memory, and
 * its volume's size; null without a container. `clock`: how old a kept volume size is; `usageOf`:
 * the resource sampler's recent use of the container (the leader's), asked before the engine.
 */
export async function databaseHealthOf(
  runtime: Pick<Runtime, 'inspect' | 'stats' | 'volumeSize'>,
  databaseId: string,
  clock: Clock,
  usageOf: UsageOf = () => null,
): Promise<DatabaseHealth | null> {
  const name = serverName(databaseId);
  const info = await runtime.inspect(name);
  if (info === null) return null;
  const [usage, volumeBytes] = await Promise.all([
    // the resource sampler's recent use (answered at once); the engine's stats (about a second) only without one
    info.state === 'running' ? (usageOf(info.id) ?? runtime.stats(name).catch(() => null)) : Promise.resolve(null),
    volumeSize(runtime, name, clock),
  ]);
  return {
    status: info.state,
    restarts: info.restartCount,
    startedAt: info.startedAt,
    cpuMillicores: usage?.cpuMillicores ?? 0,
    memoryBytes: usage?.memoryBytes ?? 0,
    memoryLimitBytes: info.memoryBytes,
    volumeBytes,
  };
}

/**
 * The engine measures volumes only in its whole disk-usage report (`docker system df`), which
 * takes seconds on a busy engine: sizes are kept per runtime and refreshed in the background,
 * once at a time, when older than a minute. GET …/databases/:db_slug never waits for the
 * report: a volume not measured yet is null (its first report is asked for then), afterwards the
 * size kept (at most a minute and one report old) while the next is measured. (It once waited the
 * first time: seconds for each first read of a new database, which is when people watch it.)
 */
const VOLUME_SIZES_FOR_MS = 60_000;
const sizes = new WeakMap<object, { pending: Promise<void> | null; byName: Map<string, { size: number | null; at: number }> }>();

async function volumeSize(runtime: Pick<Runtime, 'volumeSize'>, name: string, clock: Clock): Promise<number | null> {
  let entry = sizes.get(runtime);
  if (entry === undefined) sizes.set(runtime, (entry = { pending: null, byName: new Map() }));
  const e = entry;
  const known = e.byName.get(name);
  if (known !== undefined && clock.now().getTime() - known.at < VOLUME_SIZES_FOR_MS) return known.size;
  const refresh = () =>
    (e.pending ??= runtime
      .volumeSize(name)
      .then((size) => { e.byName.set(name, { size, at: clock.now().getTime() }); })
      .catch(() => undefined)
      .finally(() => { e.pending = null; }));
  // the report under way may be another volume's: this one's is asked for once it has ended
  void refresh().then(() => (e.byName.has(name) ? undefined : refresh()));
  return known?.size ?? null;
}
