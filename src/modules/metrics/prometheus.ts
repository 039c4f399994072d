import { Gauge, type Registry } from 'prom-client';
import { iso, type Clock } from '../../domain/clock.js';
import type { MetricsMinute, Repositories } from '../../store/repositories/index.js';

/** uptime status as a number: 1 up, 0 down; unknown and paused monitors are left out */
const UP: Readonly<Record<string, number | undefined>> = { up: 1, down: 0 };

const labelNames = ['workspace', 'project'] as const;
type Labels = Record<(typeof labelNames)[number], string>;

/**
 * Per-project gauges on `/metrics` (docs/uptime.md#resource-metrics): CPU and memory from the
 * resource sampler's newest minute (the last three minutes; older is stale), and the uptime
 * status of enabled monitors. Read from the store at each scrape (each gauge on its own: the
 * registry collects them concurrently), so every replica answers the same.
 */
export function registerProjectGauges(metrics: Registry, repos: Pick<Repositories, 'projects' | 'metrics' | 'uptime'>, clock: Clock): void {
  /** every project's newest minute, by its labels */
  const read = async (): Promise<[Labels, MetricsMinute][]> => {
    const projects = await repos.projects.labels();
    const minutes = await repos.metrics.latest(iso(new Date(clock.now().getTime() - 3 * 60_000)));
    return projects.flatMap((p) => {
      const m = minutes.get(p.id);
      return m === undefined ? [] : [[{ workspace: p.workspace, project: p.project }, m] as [Labels, MetricsMinute]];
    });
  };
  // the CPU and memory gauges are collected together at a scrape: one read of the store serves both
  let reading: Promise<[Labels, MetricsMinute][]> | null = null;
  const newest = (): Promise<[Labels, MetricsMinute][]> => {
    if (reading === null) {
      reading = read();
      void reading.finally(() => {
        reading = null;
      }).catch(() => undefined);
    }
    return reading;
  };
  new Gauge({
    name: 'slipway_project_cpu_millicores',
    help: "CPU used by the project's containers, millicores (1000 = one core), newest minute",
    labelNames,
    registers: [metrics],
    async collect() {
      this.reset();
      for (const [labels, m] of await newest()) this.set(labels, m.cpu_millicores);
    },
  });
  new Gauge({
    name: 'slipway_project_memory_bytes',
    help: "Memory used by the project's containers, bytes, newest minute",
    labelNames,
    registers: [metrics],
    async collect() {
      this.reset();
      for (const [labels, m] of await newest()) this.set(labels, m.memory_bytes);
    },
  });
  new Gauge({
    name: 'slipway_project_up',
    help: 'Uptime monitor status of the project: 1 up, 0 down (enabled monitors that are up or down)',
    labelNames,
    registers: [metrics],
    async collect() {
      this.reset();
      for (const m of await repos.uptime.enabled()) {
        const value = UP[m.status];
        if (value !== undefined) this.set({ workspace: m.workspace_slug, project: m.slug }, value);
      }
    },
  });
}
