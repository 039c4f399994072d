import { iso, type Clock } from '../../domain/clock.js';
import { resolveProject, type ProjectRef } from '../projects/resolve.js';
import type { MetricsMinute, Repositories } from '../../store/repositories/index.js';
import type { ProjectMetrics } from '../projects/projects.schema.js';
import type { Access } from '../../domain/access.js';

export type MetricsPeriod = ProjectMetrics['period'];

/** One step: averages of CPU and memory, bytes sent and received over it. */
export type MetricsPoint = ProjectMetrics['points'][number];

/** One point per minute over an hour, per quarter hour over a day, per hour over a week. */
const SHAPE: Record<MetricsPeriod, { spanMs: number; stepMs: number }> = {
  '1h': { spanMs: 3_600_000, stepMs: 60_000 },
  '24h': { spanMs: 86_400_000, stepMs: 900_000 },
  '7d': { spanMs: 7 * 86_400_000, stepMs: 3_600_000 },
};

/** A project's resource history for charts (docs/uptime.md#resource-metrics), from the sampler's minutes in the store. */
export class MetricsService {
  constructor(
    private readonly repos: Pick<Repositories, 'projects' | 'metrics'>,
    private readonly clock: Clock,
  ) {}

  async project(access: Access, projectSlug: ProjectRef, period: MetricsPeriod): Promise<ProjectMetrics> {
    const project = await resolveProject(this.repos, access, projectSlug);
    const { spanMs, stepMs } = SHAPE[period];
    const now = this.clock.now().getTime();
    const from = Math.floor((now - spanMs) / stepMs) * stepMs;
    const minutes = await this.repos.metrics.since(project.id, iso(new Date(from)));
    return { period, from: iso(new Date(from)), to: iso(new Date(now)), step_sec: stepMs / 1000, memory_limit_bytes: minutes.at(-1)?.memory_limit_bytes ?? null, points: bucket(minutes, stepMs) };
  }
}

/** Minutes into steps: CPU and memory averaged over the minutes that have samples, bytes summed. */
export function bucket(minutes: readonly MetricsMinute[], stepMs: number): MetricsPoint[] {
  const steps = new Map<number, { cpu: number; memory: number; rx: number; tx: number; n: number }>();
  for (const m of minutes) {
    const start = Math.floor(Date.parse(m.minute) / stepMs) * stepMs;
    const s = steps.get(start) ?? { cpu: 0, memory: 0, rx: 0, tx: 0, n: 0 };
    s.cpu += m.cpu_millicores;
    s.memory += m.memory_bytes;
    s.rx += m.rx_bytes;
    s.tx += m.tx_bytes;
    s.n++;
    steps.set(start, s);
  }
  return [...steps]
    .sort(([a], [b]) => a - b)
    .map(([start, s]) => ({ start: iso(new Date(start)), cpu_millicores: Math.round(s.cpu / s.n), memory_bytes: Math.round(s.memory / s.n), rx_bytes: s.rx, tx_bytes: s.tx }));
}
