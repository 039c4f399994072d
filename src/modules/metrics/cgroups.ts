/**
 * A container's resource counters read straight from the kernel, where Slipway shares the host
 * with the engine: its cgroup's CPU time and memory (v1 or v2, cgroupfs or systemd layout) and its
 * network namespace's byte counters (/proc/<pid>/net/dev). Reading files costs microseconds where
 * the engine's stats API takes a sampling window per container. Null when the container's cgroup
 * is not visible here (Slipway in a container of its own): the sampler asks the engine then.
 */
import { readFile } from 'node:fs/promises';

export interface Counters {
  /** CPU time used since the container started, nanoseconds */
  cpuNs: number;
  /** memory in use, reclaimable page cache excluded (as `docker stats` shows it) */
  memoryBytes: number;
  /** the limit enforced; null when unlimited */
  memoryLimitBytes: number | null;
  /** bytes received and sent on its interfaces (loopback excluded); null when not readable */
  rxBytes: number | null;
  txBytes: number | null;
}

const ROOT = '/sys/fs/cgroup';

const read = async (path: string): Promise<string | null> => {
  try {
    return await readFile(path, 'utf8');
  } catch {
    return null;
  }
};

/** `key value` lines (memory.stat, cpu.stat) → the value of `key`. */
export function statValue(text: string, key: string): number | null {
  for (const line of text.split('\n')) {
    const [k, v] = line.trim().split(/\s+/);
    if (k === key && v !== undefined) return Number(v);
  }
  return null;
}

/** /proc/<pid>/net/dev → received and sent bytes of every interface but the loopback. */
export function netDev(text: string): { rx: number; tx: number } {
  let rx = 0;
  let tx = 0;
  for (const line of text.split('\n').slice(2)) {
    const colon = line.indexOf(':');
    if (colon === -1) continue;
    if (line.slice(0, colon).trim() === 'lo') continue;
    const fields = line.slice(colon + 1).trim().split(/\s+/).map(Number);
    rx += fields[0] ?? 0;
    tx += fields[8] ?? 0;
  }
  return { rx, tx };
}

async function firstExisting(paths: readonly string[], file: string): Promise<string | null> {
  for (const dir of paths) {
    const text = await read(`${dir}/${file}`);
    if (text !== null) return dir;
  }
  return null;
}

async function v2(id: string): Promise<Omit<Counters, 'rxBytes' | 'txBytes'> | null> {
  const dir = await firstExisting([`${ROOT}/system.slice/docker-${id}.scope`, `${ROOT}/docker/${id}`], 'cpu.stat');
  if (dir === null) return null;
  const [cpu, current, stat, max] = await Promise.all([read(`${dir}/cpu.stat`), read(`${dir}/memory.current`), read(`${dir}/memory.stat`), read(`${dir}/memory.max`)]);
  const usec = cpu === null ? null : statValue(cpu, 'usage_usec');
  if (usec === null || current === null) return null;
  const inactive = stat === null ? 0 : (statValue(stat, 'inactive_file') ?? 0);
  const limit = max === null || max.trim() === 'max' ? null : Number(max.trim());
  return { cpuNs: usec * 1000, memoryBytes: Math.max(0, Number(current.trim()) - inactive), memoryLimitBytes: limit };
}

async function v1(id: string): Promise<Omit<Counters, 'rxBytes' | 'txBytes'> | null> {
  const scopes = (controller: string) => [`${ROOT}/${controller}/docker/${id}`, `${ROOT}/${controller}/system.slice/docker-${id}.scope`];
  const cpuDir = (await firstExisting(scopes('cpuacct'), 'cpuacct.usage')) ?? (await firstExisting(scopes('cpu,cpuacct'), 'cpuacct.usage'));
  const memDir = await firstExisting(scopes('memory'), 'memory.usage_in_bytes');
  if (cpuDir === null || memDir === null) return null;
  const [usage, mem, stat, limit] = await Promise.all([read(`${cpuDir}/cpuacct.usage`), read(`${memDir}/memory.usage_in_bytes`), read(`${memDir}/memory.stat`), read(`${memDir}/memory.limit_in_bytes`)]);
  if (usage === null || mem === null) return null;
  const inactive = stat === null ? 0 : (statValue(stat, 'total_inactive_file') ?? 0);
  const max = limit === null ? null : Number(limit.trim());
  // v1 writes a huge number (about 2^63, page-rounded) for "no limit"
  return { cpuNs: Number(usage.trim()), memoryBytes: Math.max(0, Number(mem.trim()) - inactive), memoryLimitBytes: max === null || max > 2 ** 60 ? null : max };
}

/** Whether `pid` is still container `id`'s process on this host (its cgroup names the container); false without a pid or a /proc of the host. */
export async function ownProcess(id: string, pid: number | null): Promise<boolean> {
  if (pid === null) return false;
  return (await read(`/proc/${pid.toString()}/cgroup`))?.includes(id) === true;
}

/** The counters of container `id` (full id) whose main process is `pid` on this host; null when its cgroup is not visible here. */
export async function readCgroups(id: string, pid: number | null): Promise<Counters | null> {
  if (!/^[0-9a-f]{64}$/.test(id)) return null;
  const base = (await read(`${ROOT}/cgroup.controllers`)) !== null ? await v2(id) : await v1(id);
  if (base === null) return null;
  let rx: number | null = null;
  let tx: number | null = null;
  if (pid !== null) {
    // the pid is the container's only if this /proc is the host's: its cgroup names the container
    const cgroup = await read(`/proc/${pid.toString()}/cgroup`);
    const dev = cgroup?.includes(id) === true ? await read(`/proc/${pid.toString()}/net/dev`) : null;
    if (dev !== null) ({ rx, tx } = netDev(dev));
  }
  return { ...base, rxBytes: rx, txBytes: tx };
}
