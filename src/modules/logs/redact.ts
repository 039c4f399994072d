// What leaves Slipway for a language model is redacted first: the project's secret values, and
// anything shaped like a credential whoever it belongs to. Redacting too much costs a little
// analysis; redacting too little leaks a secret to a third party.

export const REDACTED = '[REDACTED]';

// `password=…`, `"api_key": "…"`, `DB_PASSWORD: …`, `X-Api-Key: …`: the name stays, the value goes.
// The name's parts around the word are bounded, and it starts where a name starts: unbounded, the
// pattern retried at every character of a long word is quadratic (docs/logs-analyzer.md#cost).
const NAMED_VALUE =
  /((?<![\w.-])(?:[\w.-]{0,64}(?:passw(?:or)?d|passwd|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key|credentials?|session[_-]?id|cookie|signature)[\w.-]{0,64})["']?\s*[:=]\s*)("(?:[^"\\]|\\.)*"|'[^']*'|[^\s,;&"'}\]]+)/gi;
// `Authorization: Bearer …` and the like: everything after the name up to the line's end or a quote.
const AUTH_HEADER = /(\b(?:proxy-)?authorization["']?\s*[:=]\s*)("(?:[^"\\]|\\.)*"|'[^']*'|[^\n"']+)/gi;
const SCHEME_VALUE = /\b(Bearer|Basic|Token|Digest)\s+[A-Za-z0-9._~+/=-]{6,}/g;
// `scheme://user:password@host`: the user stays.
const URL_PASSWORD = /\b([a-z][a-z0-9+.-]{0,31}:\/\/[^\s:/@]*):([^\s@/]+)@/gi;

// Credentials by their shape: Slipway's own keys, OpenAI, Stripe, GitHub, Slack, AWS, Google, JWTs, PEM.
const SHAPES: readonly RegExp[] = [
  /\bsvc_(?:sk|inv)_[0-9a-z]+/gi,
  /\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{16,}/g,
  /\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}/g,
  /\bgh[pousr]_[A-Za-z0-9]{20,}/g,
  /\bgithub_pat_[A-Za-z0-9_]{20,}/g,
  /\bxox[abposr]-[A-Za-z0-9-]{10,}/g,
  /\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16}\b/g,
  /\bAIza[0-9A-Za-z_-]{35}/g,
  /(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*/g,
  /-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)/g,
  // long hex runs (keys, HMACs, session ids)
  /\b[0-9a-fA-F]{32,}\b/g,
];
// long base64 or base64url runs mixing cases and digits: random, so likely a credential
const LONG_RUN = /[A-Za-z0-9+_=-]{32,}/g;
const looksRandom = (run: string): boolean => /[a-z]/.test(run) && /[A-Z]/.test(run) && /\d/.test(run) && !/^[A-Za-z]+(?:[_-][A-Za-z0-9]+)+$/.test(run);

const escapeRegExp = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The spellings a secret value may have in logs: as is, percent-encoded, JSON-escaped. */
function spellings(secret: string): string[] {
  const out = new Set([secret, encodeURIComponent(secret), JSON.stringify(secret).slice(1, -1)]);
  return [...out].filter((s) => s !== '');
}

/**
 * `text` with every value in `secrets` and everything shaped like a key, token or password
 * replaced by `[REDACTED]`. Secrets are replaced longest first, so one that contains another
 * goes whole.
 */
export function redact(text: string, secrets: readonly string[] = []): string {
  let out = text;
  const values = [...new Set(secrets.flatMap((s) => spellings(s)))].sort((a, b) => b.length - a.length);
  if (values.length > 0) out = out.replace(new RegExp(values.map(escapeRegExp).join('|'), 'g'), REDACTED);
  out = out.replace(URL_PASSWORD, `$1:${REDACTED}@`);
  out = out.replace(AUTH_HEADER, `$1${REDACTED}`);
  out = out.replace(SCHEME_VALUE, `$1 ${REDACTED}`);
  out = out.replace(NAMED_VALUE, (whole, name: string, value: string) => (value.replace(/^["']/, '').startsWith(REDACTED.slice(0, -1)) ? whole : `${name}${REDACTED}`));
  for (const shape of SHAPES) out = out.replace(shape, REDACTED);
  out = out.replace(LONG_RUN, (run) => (looksRandom(run) ? REDACTED : run));
  return out;
}
