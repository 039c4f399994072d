/**
 * Engine messages about a container can quote its environment: runc refuses a NUL byte with
 * `environment variable value can't contain null(\x00): "KEY=value"`. Whatever the driver says
 * about a container it was given (errors, which reach logs and deployment records) passes
 * through scrubEnv first, so that no value of the container's environment, secret or not, leaves
 * in it.
 */

export const REDACTED = '[redacted]';

/** Values this short are scrubbed only after their `KEY=`: replacing "1" or "true" everywhere would garble the message. */
const MIN_SCRUBBED_VALUE = 4;

const escapeRegExp = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** How Go's %q writes the inside of a string: the form the engine's messages quote values in. */
function goQuoted(value: string): string {
  // only ASCII characters change, and none of them is part of a surrogate pair
  // eslint-disable-next-line no-control-regex
  return value.replace(/["\\\u0000-\u001f\u007f]/g, (ch) => {
    if (ch === '\n') return '\\n';
    if (ch === '\t') return '\\t';
    if (ch === '\r') return '\\r';
    if (ch === '"' || ch === '\\') return `\\${ch}`;
    return `\\x${ch.charCodeAt(0).toString(16).padStart(2, '0')}`;
  });
}

/** Every form in which `value` may appear in an engine message, the longest first. */
function formsOf(value: string): string[] {
  const forms = new Set<string>([value, JSON.stringify(value).slice(1, -1), goQuoted(value)]);
  // the readable runs between control characters, should the engine escape them some other way
  // eslint-disable-next-line no-control-regex
  for (const part of value.split(/[\u0000-\u001f\u007f]/)) forms.add(part);
  return [...forms].filter((f) => f.length >= MIN_SCRUBBED_VALUE);
}

/** `text` with every value of `env` (and whatever follows `KEY=` for its keys) replaced by [redacted]. */
export function scrubEnv(text: string, env: Readonly<Record<string, string>>): string {
  let out = text;
  const keys = Object.keys(env).filter((k) => k !== '').sort((a, b) => b.length - a.length);
  for (const key of keys) {
    // KEY= and the rest of its quoted string (escapes included), or of the line when unquoted
    out = out.replace(new RegExp(`(?<![A-Za-z0-9_])${escapeRegExp(key)}=(?:\\\\.|[^"\\\\\\r\\n])*`, 'g'), `${key}=${REDACTED}`);
  }
  const forms = [...new Set(Object.values(env).flatMap(formsOf))].sort((a, b) => b.length - a.length);
  for (const form of forms) out = out.split(form).join(REDACTED);
  return out;
}
