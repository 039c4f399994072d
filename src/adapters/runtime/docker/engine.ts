/** Small facts about talking to Docker Engine, kept apart so that they can be tested alone. */

/** The oldest Engine API Slipway speaks: Docker Engine 20.10 (Debian 12's docker.io). */
export const MIN_API_VERSION = '1.41';

/** Compares "1.41"-style versions numerically: negative when a < b. */
export function compareApiVersions(a: string, b: string): number {
  const pa = a.split('.').map((p) => Number.parseInt(p, 10));
  const pb = b.split('.').map((p) => Number.parseInt(p, 10));
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const x = pa[i] ?? 0;
    const y = pb[i] ?? 0;
    if (Number.isNaN(x) || Number.isNaN(y)) throw new Error(`Cannot compare API versions "${a}" and "${b}".`);
    if (x !== y) return x - y;
  }
  return 0;
}

interface EngineErrorShape {
  statusCode?: unknown;
  json?: unknown;
  message?: unknown;
}

/** The HTTP status of an Engine API error from docker-modem, if it is one. */
export function statusOf(err: unknown): number | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const code = (err as EngineErrorShape).statusCode;
  return typeof code === 'number' ? code : undefined;
}

/**
 * The Engine's own sentence from a docker-modem error, without the "(HTTP code 500) server
 * error - " wrapper that docker-modem adds (and, for streamed answers, the only place it is).
 */
export function engineMessage(err: unknown): string {
  if (typeof err !== 'object' || err === null) return String(err);
  const { json, message } = err as EngineErrorShape;
  if (typeof json === 'object' && json !== null && 'message' in json && typeof json.message === 'string') return json.message;
  const text = typeof message === 'string' ? message : JSON.stringify(err);
  const wrapped = /^\(HTTP code \d+\) .*? - ([\s\S]*?)\s*$/.exec(text);
  return wrapped?.[1] ?? text;
}

/** Classic-builder output wraps a RUN step's stderr in ANSI colour codes: logs keep the text only. */
// eslint-disable-next-line no-control-regex
const ANSI = /\u001b\[[0-9;]*[A-Za-z]/g;
export const stripAnsi = (text: string): string => text.replace(ANSI, '');

/** Docker's zero time ("0001-01-01T00:00:00Z") means "never". */
export function engineDate(value: string | undefined): Date | null {
  if (value === undefined || value === '' || value.startsWith('0001-01-01')) return null;
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? null : d;
}
