import { toNumber } from '../dialects.js';
import type { ResourceMetricsTable } from '../tables/metrics.js';
import { Repository } from './repository.js';

/** One minute of a resource's use. */
export interface MetricsMinute {
  resource_id: string;
  minute: string;
  cpu_millicores: number;
  memory_bytes: number;
  memory_limit_bytes: number | null;
  rx_bytes: number;
  tx_bytes: number;
  samples: number;
}

const minuteOf = (r: ResourceMetricsTable): MetricsMinute => ({
  resource_id: r.resource_id,
  minute: r.minute,
  cpu_millicores: r.cpu_millicores,
  memory_bytes: toNumber(r.memory_bytes),
  memory_limit_bytes: r.memory_limit_bytes === null ? null : toNumber(r.memory_limit_bytes),
  rx_bytes: toNumber(r.rx_bytes),
  tx_bytes: toNumber(r.tx_bytes),
  samples: r.samples,
});

/** Rows per upsert statement: 8 values each, far below SQLite's and PostgreSQL's limits on bound values. */
const PUT_BATCH = 500;

/** The resource sampler's history (docs/uptime.md#resource-metrics). */
export class MetricsRepository extends Repository {
  /**
   * The sampler's minutes, upserted PUT_BATCH rows per statement (a pass over 2,000 resources:
   * 4 statements instead of 2,000 round trips, bench/writes.bench.ts).
   */
  async put(rows: readonly MetricsMinute[]): Promise<void> {
    // one row per resource and minute (the last given): PostgreSQL refuses a statement that would update a row twice
    const unique = [...new Map(rows.map((r) => [`${r.resource_id} ${r.minute}`, r])).values()];
    for (let i = 0; i < unique.length; i += PUT_BATCH) {
      await this.db
        .insertInto('resource_metrics')
        .values(unique.slice(i, i + PUT_BATCH))
        .onConflict((oc) =>
          oc.columns(['resource_id', 'minute']).doUpdateSet((eb) => ({
            cpu_millicores: eb.ref('excluded.cpu_millicores'),
            memory_bytes: eb.ref('excluded.memory_bytes'),
            memory_limit_bytes: eb.ref('excluded.memory_limit_bytes'),
            rx_bytes: eb.ref('excluded.rx_bytes'),
            tx_bytes: eb.ref('excluded.tx_bytes'),
            samples: eb.ref('excluded.samples'),
          })),
        )
        .execute();
    }
  }

  async since(resourceId: string, since: string): Promise<MetricsMinute[]> {
    const rows = await this.db.selectFrom('resource_metrics').selectAll().where('resource_id', '=', resourceId).where('minute', '>=', since).orderBy('minute').execute();
    return rows.map(minuteOf);
  }

  /** Every resource's newest minute since `since` (the Prometheus gauges). */
  async latest(since: string): Promise<Map<string, MetricsMinute>> {
    const rows = await this.db.selectFrom('resource_metrics').selectAll().where('minute', '>=', since).orderBy('minute').execute();
    const out = new Map<string, MetricsMinute>();
    for (const r of rows) out.set(r.resource_id, minuteOf(r));
    return out;
  }

  async prune(before: string): Promise<void> {
    await this.db.deleteFrom('resource_metrics').where('minute', '<', before).execute();
  }
}
