/** A project's (or database's) resource use in one minute: averages of its samples, bytes moved. */
export interface ResourceMetricsTable {
  resource_id: string;
  /** RFC 3339 start of the minute */
  minute: string;
  cpu_millicores: number;
  memory_bytes: string | number;
  memory_limit_bytes: string | number | null;
  rx_bytes: string | number;
  tx_bytes: string | number;
  samples: number;
}

export interface MetricsTables {
  resource_metrics: ResourceMetricsTable;
}
