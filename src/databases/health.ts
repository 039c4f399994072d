import type { DatabaseHealth } from '../domain/ports.js';
import type { Runtime } from '../domain/runtime.js';

/** The names of a database's container and volume on the engine. */
export const serverName = (databaseId: string): string => `slipway-db-${databaseId}`;

/** A database's server as the engine sees it: its container's state, restarts, cpu and memory, and its volume's size; null without a container. */
export async function databaseHealthOf(runtime: Pick<Runtime, 'inspect' | 'stats' | 'volumeSize'>, databaseId: string): Promise<DatabaseHealth | null> {
  const name = serverName(databaseId);
  const info = await runtime.inspect(name);
  if (info === null) return null;
  const [usage, volumeBytes] = await Promise.all([
    info.state === 'running' ? runtime.stats(name).catch(() => null) : Promise.resolve(null),
    runtime.volumeSize(name).catch(() => null),
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
