/** How much of the apps' logs a project keeps (docs/logs.md#retention). */
export interface LogPolicy {
  /** `--log-max-bytes-per-project`: the bytes of log messages a project keeps; null: no cap */
  maxBytesPerProject: number | null;
}

/** 1 GiB of messages per project (`--log-max-bytes-per-project`). */
export const DEFAULT_LOG_MAX_BYTES = 1024 ** 3;

export const DEFAULT_LOG_POLICY: LogPolicy = { maxBytesPerProject: DEFAULT_LOG_MAX_BYTES };
