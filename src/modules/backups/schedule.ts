import { Cron } from 'croner';

/** The shortest interval a backup schedule may have (a tenant cannot keep the engine busy with backups). */
export const MIN_INTERVAL_MS = 60 * 60_000;

/** Why a schedule is refused, as a sentence for the 400; null when it is fine. */
export function scheduleProblem(schedule: string, timezone: string): string | null {
  const fields = schedule.trim().split(/\s+/);
  if (fields.length !== 5) return '"schedule" must be a cron expression of five fields (minute hour day-of-month month day-of-week), e.g. "0 3 * * *".';
  try {
    Intl.DateTimeFormat('en-US', { timeZone: timezone });
  } catch {
    return `"timezone" must be an IANA time zone such as "UTC" or "Europe/Paris"; "${timezone}" is not one.`;
  }
  let runs: Date[];
  try {
    runs = new Cron(schedule, { timezone, paused: true }).nextRuns(4, new Date(Date.UTC(2026, 0, 1)));
  } catch (err) {
    return `"schedule" is not a valid cron expression: ${err instanceof Error ? err.message : String(err)}.`;
  }
  if (runs.length < 2) return '"schedule" must run more than once.';
  for (let i = 1; i < runs.length; i++) {
    if ((runs[i]?.getTime() ?? 0) - (runs[i - 1]?.getTime() ?? 0) < MIN_INTERVAL_MS) return '"schedule" may run at most once an hour.';
  }
  return null;
}

/** The first run after `after`; null when the schedule never runs again. */
export function nextRun(schedule: string, timezone: string, after: Date): Date | null {
  return new Cron(schedule, { timezone, paused: true }).nextRun(after);
}

/** The schedule's interval around `at` (the time between its next two runs), for the "no success within 1.5× its interval" alert. */
export function intervalMs(schedule: string, timezone: string, at: Date): number {
  const [a, b] = new Cron(schedule, { timezone, paused: true }).nextRuns(2, at);
  return a === undefined || b === undefined ? 24 * 3600_000 : b.getTime() - a.getTime();
}
