/**
 * What a container's environment can carry, found on Docker Engine (docs/security.md):
 * - a NUL byte: the container is created, then runc refuses to start it ("environment variable
 *   value can't contain null(\x00): "KEY=value"", quoting the value);
 * - an unpaired UTF-16 surrogate: carried, but replaced by U+FFFD (the app sees another value);
 * - a create request of more than 1 MiB: refused whole (431), so the whole environment has a budget.
 * The API refuses these on write (400); a deploy checks them again for values stored before.
 */

/** 32 KiB, counted in bytes of UTF-8: what the container's environment will hold. */
export const MAX_ENV_VALUE_BYTES = 32 * 1024;

/**
 * The environment of one project as the engine receives it (each `KEY=value` JSON-encoded, plus
 * a separator): 768 KiB, which leaves room in Docker Engine's 1 MiB request for the rest.
 */
export const MAX_ENV_TOTAL_BYTES = 768 * 1024;

/** An unpaired surrogate (String.prototype.isWellFormed is Node 20+, but not in the ES lib used). */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Why `value` cannot be a variable's value in a container's environment, as a sentence, or null
 * when it can. `field` is the request's field (`"value"`, `"variables.TOKEN"`) for the byte
 * limit the API always had; `what` names the variable (`"value" of the variable "TOKEN"`) for
 * the rest. Never quotes the value.
 */
export function envValueProblem(field: string, what: string, value: string): string | null {
  if (Buffer.byteLength(value, 'utf8') > MAX_ENV_VALUE_BYTES) return `${field} must be at most ${MAX_ENV_VALUE_BYTES.toString()} bytes (32 KiB) of UTF-8.`;
  if (value.includes('\0')) return `${what} must not contain a NUL byte (U+0000): a container's environment cannot carry it.`;
  if (LONE_SURROGATE.test(value)) return `${what} must be valid Unicode: it holds an unpaired surrogate, which a container would receive as U+FFFD.`;
  return null;
}

/** What one variable costs in the engine's request. */
export const envBytes = (key: string, value: string): number => Buffer.byteLength(JSON.stringify(`${key}=${value}`), 'utf8') + 1;

/** The sentence for an environment over budget, or null. */
export function envTotalProblem(vars: Iterable<readonly [string, string]>): string | null {
  let total = 0;
  for (const [key, value] of vars) total += envBytes(key, value);
  if (total <= MAX_ENV_TOTAL_BYTES) return null;
  return `The project's variables would take ${total.toString()} bytes in a container's environment (each "KEY=value" JSON-encoded, as sent to the engine); at most ${MAX_ENV_TOTAL_BYTES.toString()} bytes (768 KiB) fit, since Docker Engine refuses larger container requests.`;
}
