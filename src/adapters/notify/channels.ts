/**
 * The channels an uptime alert goes out on: the monitor's chat webhook (Slack, Discord or any
 * JSON receiver, told apart by the URL's host) and its e-mail address. Each delivery retries
 * with backoff and ends in one DeliveryResult that is safe to store and show: the webhook URL is
 * a credential, so no error sentence repeats it.
 */
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { LookupFunction } from 'node:net';
import { systemClock, systemRandom, type Clock, type Random } from '../../domain/clock.js';
import { MailSendError, type Mailer } from './mailer.js';
import { checkUrlShape, ResolveError, resolveTarget, type TargetPolicy } from './ssrf.js';

export interface AlertEvent {
  kind: 'down' | 'up' | 'test' | 'crash';
  project: { id: string; name: string; slug: string; workspace: string };
  /** the checked URL */
  url: string;
  /** RFC 3339 */
  at: string;
  cause: string | null;
  response_ms: number | null;
  /** when the incident began: an `up` event tells how long it lasted */
  incident_started_at?: string | null;
}

export interface DeliveryResult {
  channel: 'webhook' | 'email';
  ok: boolean;
  /** tries made, a refused one included; 0 when there was nothing to try with */
  attempts: number;
  /** the last HTTP status the webhook answered, null for e-mail or when none came */
  status: number | null;
  /** why the last try failed, one sentence without the webhook URL or SMTP credentials; null when ok */
  error: string | null;
}

export interface SendOptions {
  policy: TargetPolicy;
  /** tries in all; default 4 */
  attempts?: number;
  /** the first wait between tries, doubling after each, plus up to 20% jitter; default 1000 */
  backoffMs?: number;
  /** for each try, from connecting to the end of the answer; default 10000 */
  timeoutMs?: number;
  sleep?: (ms: number) => Promise<void>;
  /** for Retry-After given as a date */
  clock?: Clock;
  /** the jitter's source; default the system's */
  random?: Random;
}

const DEFAULT_ATTEMPTS = 4;
const DEFAULT_BACKOFF_MS = 1000;
const DEFAULT_TIMEOUT_MS = 10_000;
/** A receiver that asks for a longer pause than this gets the alert late rather than never. */
const MAX_RETRY_AFTER_MS = 60_000;
const JITTER = 0.2;
const DISCORD_MAX = 2000;
/** Only the start of an answer is read: enough for an error message. */
const MAX_ANSWER_BYTES = 8192;

const realSleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** The wait after try `n` (1-based): base·2^(n−1), plus up to 20%. */
/** A fraction in [0, 1) from 32 random bits. */
const fraction = (random: Random): number => random.bytes(4).readUInt32BE(0) / 2 ** 32;

const backoff = (baseMs: number, n: number, random: Random): number => Math.round(baseMs * 2 ** (n - 1) * (1 + JITTER * fraction(random)));

/** Control characters (a newline in a project name) have no place in a subject line. */
const oneLine = (s: string): string => s.replace(/\p{Cc}+/gu, ' ').trim();

/** `4 min 10 s`, `2 h 5 min`, `3 d 1 h`: how long an incident lasted, to the second. */
function duration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  const part = (n: number, unit: string) => (n === 0 ? '' : ` ${n.toString()} ${unit}`);
  if (s < 60) return `${s.toString()} s`;
  if (s < 3600) return `${Math.floor(s / 60).toString()} min${part(s % 60, 's')}`;
  if (s < 86_400) return `${Math.floor(s / 3600).toString()} h${part(Math.floor(s / 60) % 60, 'min')}`;
  return `${Math.floor(s / 86_400).toString()} d${part(Math.floor(s / 3600) % 24, 'h')}`;
}

/** How long the incident that an `up` event ends lasted, when both times are known. */
function downFor(e: AlertEvent): string | null {
  if (e.incident_started_at == null) return null;
  const ms = Date.parse(e.at) - Date.parse(e.incident_started_at);
  return Number.isFinite(ms) ? duration(ms) : null;
}

/** The alert in words: a subject line, and a short body that starts with it. */
export function alertText(e: AlertEvent): { subject: string; text: string } {
  const who = `${oneLine(e.project.name)} (${oneLine(e.project.workspace)})`;
  const cause = e.cause === null ? null : oneLine(e.cause);
  let subject: string;
  const details: string[] = [];
  switch (e.kind) {
    case 'down':
      subject = `DOWN: ${who} is not answering at ${e.url}${cause === null ? '' : `: ${cause}`}`;
      if (e.incident_started_at != null) details.push(`Down since: ${e.incident_started_at}`);
      break;
    case 'up': {
      const lasted = downFor(e);
      subject = `UP again: ${who} answers at ${e.url}${lasted === null ? '' : ` after ${lasted} down`}`;
      if (e.incident_started_at != null) details.push(`Down from ${e.incident_started_at} to ${e.at}`);
      break;
    }
    case 'test':
      subject = `Test notification from Slipway for ${who}`;
      details.push(`Uptime alerts of this project arrive here. It is checked at ${e.url}.`);
      break;
    case 'crash':
      subject = `CRASH: ${who} stopped unexpectedly${cause === null ? '' : `: ${cause}`}`;
      break;
  }
  details.push(`Project: ${oneLine(e.project.name)} (${oneLine(e.project.workspace)}/${e.project.slug})`);
  if (e.kind !== 'test') details.push(`Checked URL: ${e.url}`);
  details.push(`Time: ${e.at}`);
  if (cause !== null && e.kind !== 'test') details.push(`Cause: ${cause}`);
  if (e.response_ms !== null) details.push(`Response time: ${e.response_ms.toString()} ms`);
  return { subject, text: [subject, '', ...details].join('\n') };
}

const hostOf = (target: URL): string => target.hostname.toLowerCase().replace(/\.$/, '');

const isSlack = (target: URL): boolean => {
  const host = hostOf(target);
  return host === 'slack.com' || host.endsWith('.slack.com');
};

const DISCORD_HOSTS = new Set(['discord.com', 'discordapp.com', 'ptb.discord.com', 'canary.discord.com']);
const isDiscord = (target: URL): boolean => DISCORD_HOSTS.has(hostOf(target)) && target.pathname.startsWith('/api/webhooks/');

/** Slack reads `&`, `<` and `>` as markup (links, mentions); a project name must not be. */
const slackEscape = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/**
 * The JSON body for the webhook at `target`: Slack's `{text}`, Discord's `{content}` (with
 * mentions off, so a project called "@everyone" pings no one), or, for any other receiver, the
 * event's fields with the text alongside.
 */
export function webhookPayload(target: URL, e: AlertEvent): unknown {
  const { text } = alertText(e);
  if (isSlack(target)) return { text: slackEscape(text) };
  if (isDiscord(target)) {
    const chars = Array.from(text);
    const content = chars.length > DISCORD_MAX ? `${chars.slice(0, DISCORD_MAX - 1).join('')}…` : text;
    return { content, allowed_mentions: { parse: [] } };
  }
  return {
    event: e.kind,
    project: { id: e.project.id, name: e.project.name, slug: e.project.slug, workspace: e.project.workspace },
    url: e.url,
    at: e.at,
    cause: e.cause,
    response_ms: e.response_ms,
    incident_started_at: e.incident_started_at ?? null,
    text,
  };
}

/** A cut-out for every piece of the URL that may be its secret: whole, its path and query, long path segments. */
function redactor(target: URL): (s: string) => string {
  const segments = target.pathname.split('/').filter((p) => p.length >= 6);
  const decoded = segments.map((p) => {
    try {
      return decodeURIComponent(p);
    } catch {
      return p;
    }
  });
  const secrets = [target.href, `${target.origin}${target.pathname}`, target.pathname, target.search, ...segments, ...decoded]
    .filter((p) => p.length > 1)
    .sort((a, b) => b.length - a.length);
  return (s) => secrets.reduce((text, secret) => text.split(secret).join('[redacted]'), s);
}

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

class AttemptTimeout extends Error {}

/** A resolver that gives every connection of the request the one address that was checked. */
const pinnedLookup =
  (address: string, family: 4 | 6): LookupFunction =>
  (_host, options, callback) => {
    if (options.all === true) callback(null, [{ address, family }]);
    else callback(null, address, family);
  };

/** One POST to `target`, connecting to `address` only; never follows a redirect. */
function post(target: URL, to: { address: string; family: 4 | 6 }, body: string, timeoutMs: number): Promise<Answer> {
  return new Promise<Answer>((resolve, reject) => {
    let settled = false;
    const settle = (fn: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      fn();
    };
    const secure = target.protocol === 'https:';
    const req = (secure ? httpsRequest : httpRequest)({
      hostname: target.hostname.replace(/^\[(.*)\]$/, '$1'),
      port: target.port === '' ? (secure ? 443 : 80) : Number(target.port),
      path: `${target.pathname}${target.search}`,
      method: 'POST',
      headers: {
        'content-type': 'application/json; charset=utf-8',
        'content-length': Buffer.byteLength(body).toString(),
        'user-agent': 'Slipway-Uptime',
      },
      // A connection of its own: a pooled one could have been opened to another address.
      agent: false,
      lookup: pinnedLookup(to.address, to.family),
    });
    const timer = setTimeout(() => {
      req.destroy(new AttemptTimeout());
      settle(() => {
        reject(new AttemptTimeout());
      });
    }, timeoutMs);
    req.on('error', (err) => {
      settle(() => {
        reject(err);
      });
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        if (size < MAX_ANSWER_BYTES) chunks.push(chunk);
        size += chunk.length;
      });
      res.on('error', (err) => {
        settle(() => {
          reject(err);
        });
      });
      res.on('end', () => {
        settle(() => {
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8').slice(0, MAX_ANSWER_BYTES) });
        });
      });
    });
    req.end(body);
  });
}

/** How one try ended. */
type Outcome =
  | { kind: 'delivered'; status: number }
  | { kind: 'final'; status: number | null; error: string }
  | { kind: 'retry'; status: number | null; error: string; waitMs: number | null };

/** The receiver's words, for an error message: one line, short. */
function answerSnippet(body: string): string {
  const line = oneLine(body.replace(/\s+/g, ' '));
  if (line === '') return '';
  return `: ${line.length > 200 ? `${line.slice(0, 197)}...` : line}`;
}

/** Retry-After (seconds or an HTTP date), or Discord's `retry_after` (seconds) in the body; capped. */
function retryAfterMs(answer: Answer, clock: Clock): number | null {
  const header = answer.headers['retry-after'];
  let ms: number | null = null;
  if (typeof header === 'string' && /^\s*\d+(\.\d+)?\s*$/.test(header)) ms = Number(header) * 1000;
  else if (typeof header === 'string' && Number.isFinite(Date.parse(header))) ms = Date.parse(header) - clock.now().getTime();
  else {
    try {
      const parsed = JSON.parse(answer.body) as { retry_after?: unknown } | null;
      if (typeof parsed?.retry_after === 'number') ms = parsed.retry_after * 1000;
    } catch {
      // not JSON: no hint, the backoff applies
    }
  }
  return ms === null ? null : Math.min(MAX_RETRY_AFTER_MS, Math.max(0, Math.ceil(ms)));
}

const TLS_CODE = /^(CERT_|ERR_TLS_|ERR_SSL_|DEPTH_ZERO_|SELF_SIGNED_|UNABLE_TO_(GET|VERIFY)_)/;

/** What an HTTP answer means for the delivery. */
function judgeAnswer(answer: Answer, clock: Clock): Outcome {
  const { status } = answer;
  if (status >= 200 && status < 300) return { kind: 'delivered', status };
  if (status === 429) return { kind: 'retry', status, error: "the webhook's server is limiting the rate of messages (HTTP 429)", waitMs: retryAfterMs(answer, clock) };
  if (status >= 500) return { kind: 'retry', status, error: `the webhook's server failed (HTTP ${status.toString()}${answerSnippet(answer.body)})`, waitMs: null };
  if (status >= 300 && status < 400) return { kind: 'final', status, error: `the webhook answered with a redirect (HTTP ${status.toString()}), which is not followed; use the URL it redirects to` };
  const gone = status === 401 || status === 403 || status === 404 || status === 410 ? '; the webhook may have been deleted, or its URL is wrong' : '';
  return { kind: 'final', status, error: `the webhook refused the message (HTTP ${status.toString()}${answerSnippet(answer.body)})${gone}` };
}

/** What a failed connection means for the delivery. */
function judgeFailure(err: unknown, timeoutMs: number): Outcome {
  if (err instanceof AttemptTimeout) return { kind: 'retry', status: null, error: `the webhook's server did not answer within ${timeoutMs < 1000 ? `${timeoutMs.toString()} ms` : duration(timeoutMs)}`, waitMs: null };
  if (err instanceof ResolveError) return { kind: 'retry', status: null, error: err.message, waitMs: null };
  const code = (err as { code?: unknown } | null)?.code;
  const c = typeof code === 'string' ? code : '';
  if (TLS_CODE.test(c)) return { kind: 'final', status: null, error: `the webhook's server has no valid TLS certificate for its name (${c})` };
  if (c === 'ECONNREFUSED') return { kind: 'retry', status: null, error: "the webhook's server refused the connection", waitMs: null };
  if (c === 'ECONNRESET' || c === 'EPIPE') return { kind: 'retry', status: null, error: "the webhook's server closed the connection before answering", waitMs: null };
  if (c === 'EHOSTUNREACH' || c === 'ENETUNREACH') return { kind: 'retry', status: null, error: "the webhook's server cannot be reached from here", waitMs: null };
  return { kind: 'retry', status: null, error: `the connection to the webhook's server failed (${c === '' ? (err instanceof Error ? err.message : String(err)) : c})`, waitMs: null };
}

/**
 * Posts the alert to a chat webhook. Each try resolves and checks the target again (a refusal
 * ends the delivery at once), then connects to the checked address. 2xx is success; 429 waits as
 * long as Retry-After asks (at most a minute); 5xx, timeouts and connection failures retry after
 * the backoff; redirects and other answers are final.
 */
export async function sendWebhook(url: string, e: AlertEvent, o: SendOptions): Promise<DeliveryResult> {
  const attempts = Math.max(1, o.attempts ?? DEFAULT_ATTEMPTS);
  const sleep = o.sleep ?? realSleep;
  const random = o.random ?? systemRandom;
  const clock = o.clock ?? systemClock;
  const timeoutMs = o.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const shape = checkUrlShape(url, o.policy);
  if (shape !== null) return { channel: 'webhook', ok: false, attempts: 1, status: null, error: shape };
  const target = new URL(url);
  const redact = redactor(target);
  const result = (n: number, outcome: Outcome): DeliveryResult => ({
    channel: 'webhook',
    ok: outcome.kind === 'delivered',
    attempts: n,
    status: outcome.status,
    error: outcome.kind === 'delivered' ? null : redact(outcome.error),
  });
  const body = JSON.stringify(webhookPayload(target, e));
  let last: Outcome = { kind: 'final', status: null, error: 'no try was made' };
  for (let n = 1; n <= attempts; n++) {
    try {
      const to = await resolveTarget(url, o.policy);
      if ('refused' in to) return result(n, { kind: 'final', status: null, error: to.refused });
      last = judgeAnswer(await post(target, to, body, timeoutMs), clock);
    } catch (err) {
      last = judgeFailure(err, timeoutMs);
    }
    switch (last.kind) {
      case 'delivered':
      case 'final':
        return result(n, last);
      case 'retry':
        if (n < attempts) await sleep(last.waitMs ?? backoff(o.backoffMs ?? DEFAULT_BACKOFF_MS, n, random));
        break;
    }
  }
  return result(attempts, last);
}

export interface EmailOptions {
  /** tries in all; default 4 */
  attempts?: number;
  /** as for webhooks; default 1000 */
  backoffMs?: number;
  sleep?: (ms: number) => Promise<void>;
  /** the jitter's source; default the system's */
  random?: Random;
}

/** E-mails the alert to `to` through the configured SMTP server, retrying with backoff. */
export async function sendEmail(mailer: Mailer | undefined, to: string, e: AlertEvent, o: EmailOptions = {}): Promise<DeliveryResult> {
  if (mailer === undefined) return { channel: 'email', ok: false, attempts: 0, status: null, error: 'no SMTP server is configured (--smtp-url)' };
  const attempts = Math.max(1, o.attempts ?? DEFAULT_ATTEMPTS);
  const sleep = o.sleep ?? realSleep;
  const random = o.random ?? systemRandom;
  const { subject, text } = alertText(e);
  const message = { to, subject, text: `${text}\n\n-- \nSlipway uptime monitoring\n` };
  let error = '';
  for (let n = 1; n <= attempts; n++) {
    try {
      await mailer.send(message);
      return { channel: 'email', ok: true, attempts: n, status: null, error: null };
    } catch (err) {
      // MailSendError's message carries no credentials; anything else is not quoted, for the same reason.
      error = `${err instanceof MailSendError ? err.message : 'the mailer failed unexpectedly'} (${mailer.target})`;
    }
    if (n < attempts) await sleep(backoff(o.backoffMs ?? DEFAULT_BACKOFF_MS, n, random));
  }
  return { channel: 'email', ok: false, attempts, status: null, error };
}
