/** An uptime monitor's view of its project: not checked yet, answering, not answering, or paused. */
export const UPTIME_STATUSES = ['unknown', 'up', 'down', 'paused'] as const;
export type UptimeStatus = (typeof UPTIME_STATUSES)[number];
