/**
 * Query parameters whose values are secrets (WebSocket handshakes from browsers carry the key so;
 * GitHub's redirect to the setup URL carries an OAuth `code` and Slipway's single-use `state`).
 */
const SECRET_NAMES = new Set(['api_key', 'token', 'code', 'state']);

/** Anything shaped like one of our secrets (`svc_sk_…` keys, `svc_inv_…` invitation tokens), wherever it is. */
const SECRET_SHAPED = /svc_(?:sk|inv)_[0-9a-z]+/gi;
const looksSecret = (text: string): boolean => /svc_(?:sk|inv)_[0-9a-z]+/i.test(text);
/** A URL without any of these is logged as it is. */
const MAY_HOLD_SECRET = /[?#%]|svc_/i;

/** A query name or value as the query parser (fast-querystring) reads it: `+` is a space, then percent-decoding. */
function decoded(text: string): string {
  const spaced = text.replace(/\+/g, ' ');
  try {
    return decodeURIComponent(spaced);
  } catch {
    return spaced;
  }
}

/**
 * Never leak a key given in a query string into the logs. The query is cut off where the router
 * cuts it (the first `?` or `#`), and each parameter's name is decoded as the query parser decodes
 * it, so every spelling that reaches the auth hook as `api_key` (`api%5Fkey`, `%61pi_key`, …) is
 * redacted too; a value that decodes to something key-shaped is redacted whatever its name.
 */
export function redactUrl(url: string): string {
  // most URLs: no query, nothing encoded, nothing key-shaped
  if (!MAY_HOLD_SECRET.test(url)) return url;
  let cut = -1;
  for (let i = 1; i < url.length; i++) {
    const c = url.charCodeAt(i);
    if (c === 63 /* ? */ || c === 35 /* # */) {
      cut = i;
      break;
    }
  }
  let path = (cut === -1 ? url : url.slice(0, cut)).replace(SECRET_SHAPED, '[redacted]');
  // a key percent-encoded into the path: log that path decoded, with the key taken out (without
  // a `%`, decoding changes nothing)
  if (path.includes('%') && looksSecret(decoded(path.replace(/\+/g, '%2B')))) path = decoded(path.replace(/\+/g, '%2B')).replace(SECRET_SHAPED, '[redacted]');
  if (cut === -1) return path;
  const query = url
    .slice(cut + 1)
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=');
      const name = eq === -1 ? pair : pair.slice(0, eq);
      const value = eq === -1 ? '' : pair.slice(eq + 1);
      if (eq !== -1 && SECRET_NAMES.has(decoded(name).toLowerCase())) return `${name}=[redacted]`;
      if (looksSecret(decoded(value))) return `${name}=[redacted]`;
      return looksSecret(decoded(name)) ? '[redacted]' : pair;
    })
    .join('&');
  return `${path}${url[cut] ?? '?'}${query}`;
}
