import type { ContainerUsage } from '../../../domain/runtime.js';

/** The parts of an Engine stats sample that usage is computed from. */
export interface StatsSample {
  read: string;
  cpu_stats: { cpu_usage: { total_usage: number; percpu_usage?: number[] }; system_cpu_usage?: number; online_cpus?: number };
  precpu_stats: { cpu_usage: { total_usage: number }; system_cpu_usage?: number; online_cpus?: number };
  preread: string;
  memory_stats: { usage?: number; limit?: number; stats?: Record<string, number | undefined> };
}

/**
 * Whether a sample carries its own previous reading. Engine 20.10 fills precpu_stats for
 * `stream: false`; other engines (and `one-shot`) leave it zeroed, and then a second sample
 * is needed.
 */
export function hasPrevious(s: StatsSample): boolean {
  return s.precpu_stats.cpu_usage.total_usage > 0 && (s.precpu_stats.system_cpu_usage ?? 0) > 0 && !s.preread.startsWith('0001-');
}

/**
 * CPU used between two readings, in millicores: the container's CPU time over the host's CPU
 * time times the number of CPUs, as `docker stats` computes it; by wall time when the engine
 * does not report system time (as on Windows).
 */
export function cpuMillicores(
  prev: { total: number; system: number | undefined; read: string },
  cur: { total: number; system: number | undefined; read: string; cpus: number },
): number {
  const used = cur.total - prev.total;
  if (used <= 0) return 0;
  if (cur.system !== undefined && prev.system !== undefined && cur.system > prev.system) {
    return Math.round((used / (cur.system - prev.system)) * cur.cpus * 1000);
  }
  const wallNs = (new Date(cur.read).getTime() - new Date(prev.read).getTime()) * 1e6;
  return wallNs > 0 ? Math.round((used / wallNs) * 1000) : 0;
}

/** Memory in use without reclaimable page cache (cgroup v1 `total_inactive_file`, v2 `inactive_file`). */
export function memoryUsed(m: StatsSample['memory_stats']): number {
  const usage = m.usage ?? 0;
  const inactive = m.stats?.['total_inactive_file'] ?? m.stats?.['inactive_file'] ?? 0;
  return inactive < usage ? usage - inactive : usage;
}

export function usageFrom(prev: StatsSample | null, cur: StatsSample): ContainerUsage {
  const before = prev === null
    ? { total: cur.precpu_stats.cpu_usage.total_usage, system: cur.precpu_stats.system_cpu_usage, read: cur.preread }
    : { total: prev.cpu_stats.cpu_usage.total_usage, system: prev.cpu_stats.system_cpu_usage, read: prev.read };
  const cpus = cur.cpu_stats.online_cpus ?? cur.cpu_stats.cpu_usage.percpu_usage?.length ?? 1;
  return {
    cpuMillicores: cpuMillicores(before, { total: cur.cpu_stats.cpu_usage.total_usage, system: cur.cpu_stats.system_cpu_usage, read: cur.read, cpus }),
    memoryBytes: memoryUsed(cur.memory_stats),
    memoryLimitBytes: cur.memory_stats.limit ?? 0,
  };
}
