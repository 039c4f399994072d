/**
 * Project sizes: vCPU and GiB as decimal strings (the spec's types), their bounds, and the
 * units the status view shows (millicores, binary units).
 */
export const DECIMAL_PATTERN = '^(0|[1-9][0-9]{0,2})(\\.[0-9]{1,3})?$';

export const CPU_BOUNDS = { min: 0.1, max: 8, def: '0.5' } as const;
export const RAM_BOUNDS = { min: 0.125, max: 32, def: '0.5' } as const;

/** The canonical text of a decimal string: "0.50" → "0.5", "1.0" → "1". */
export const canonical = (value: string): string => String(Number(value));

export const inBounds = (value: string, b: { min: number; max: number }): boolean => {
  const n = Number(value);
  return n >= b.min && n <= b.max;
};

/** "0.5" vCPU → 500 millicores */
export const millicores = (cpu: string): number => Math.round(Number(cpu) * 1000);

/** "0.5" GiB → 536870912 bytes */
export const ramBytes = (ram: string): number => Math.round(Number(ram) * 1024 ** 3);

export const formatMillicores = (m: number): string => `${Math.round(m).toString()}m`;

/** Binary units, always suffixed: whole GiB as `Gi`, everything else in whole `Mi` (rounded). */
export function formatBytes(bytes: number): string {
  if (bytes >= 1024 ** 3 && bytes % 1024 ** 3 === 0) return `${(bytes / 1024 ** 3).toString()}Gi`;
  return `${Math.round(bytes / 1024 ** 2).toString()}Mi`;
}

/** A duration in the short form of `kubectl get pods`: 45s, 12m, 3h, 2d. */
export function formatAge(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s.toString()}s`;
  if (s < 3600) return `${Math.floor(s / 60).toString()}m`;
  if (s < 86400) return `${Math.floor(s / 3600).toString()}h`;
  return `${Math.floor(s / 86400).toString()}d`;
}
