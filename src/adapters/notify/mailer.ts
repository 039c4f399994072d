/**
 * Outgoing e-mail: the `Mailer` port the services use (invitations; later uptime alerts), and
 * its SMTP adapter on nodemailer. nodemailer is imported only when SMTP is configured.
 */

export interface MailMessage {
  to: string;
  subject: string;
  text: string;
}

export interface Mailer {
  /** where mail goes, for logs and error messages: `smtp://host:port`, never credentials */
  readonly target: string;
  /** Resolves once the server accepted the message; rejects with a MailSendError. */
  send(message: MailMessage): Promise<void>;
}

/** A message the server did not take; `message` names the problem and never carries credentials. */
export class MailSendError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MailSendError';
  }
}

export interface SmtpSettings {
  host: string;
  port: number;
  /** smtps://: TLS from the first byte; smtp://: STARTTLS when the server offers it */
  secure: boolean;
  user: string | null;
  password: string | null;
  /** the From header, like `Slipway <slipway@localhost>` */
  from: string;
}

/**
 * `smtp://[user[:password]@]host[:port]` (port 587 by default) or `smtps://…` (465). Returns the
 * settings or one sentence saying what is wrong, without repeating the URL (it may hold a password).
 */
export function parseSmtpUrl(url: string, from: string): SmtpSettings | string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return 'must be an smtp:// or smtps:// URL, like smtps://user:password@mail.example.com';
  }
  if (u.protocol !== 'smtp:' && u.protocol !== 'smtps:') return `must be an smtp:// or smtps:// URL (got a ${u.protocol.replace(/:$/, '')} URL)`;
  if (u.hostname === '') return 'must name the SMTP server, like smtps://mail.example.com';
  if ((u.pathname !== '' && u.pathname !== '/') || u.search !== '' || u.hash !== '') return 'must be just smtp(s)://[user[:password]@]host[:port], without a path or query';
  const secure = u.protocol === 'smtps:';
  const decode = (s: string) => {
    try {
      return decodeURIComponent(s);
    } catch {
      return s;
    }
  };
  return {
    host: u.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: u.port === '' ? (secure ? 465 : 587) : Number(u.port),
    secure,
    user: u.username === '' ? null : decode(u.username),
    password: u.password === '' ? null : decode(u.password),
    from,
  };
}

const LOOPBACK = /^(localhost|127(\.\d{1,3}){3}|::1)$/i;

/** How long one message may take: a request waits for it, so it must not hang. */
const CONNECT_TIMEOUT_MS = 10_000;
const SOCKET_TIMEOUT_MS = 30_000;

/** The SMTP adapter: one connection per message (invitations are rare), no pool to close. */
export async function createSmtpMailer(settings: SmtpSettings): Promise<Mailer> {
  const { default: nodemailer } = await import('nodemailer');
  const auth = settings.user === null ? undefined : { user: settings.user, pass: settings.password ?? '' };
  const transport = nodemailer.createTransport({
    host: settings.host,
    port: settings.port,
    secure: settings.secure,
    // A password never crosses the network in clear text, except to this machine itself.
    requireTLS: auth !== undefined && !settings.secure && !LOOPBACK.test(settings.host),
    ...(auth === undefined ? {} : { auth }),
    connectionTimeout: CONNECT_TIMEOUT_MS,
    greetingTimeout: CONNECT_TIMEOUT_MS,
    socketTimeout: SOCKET_TIMEOUT_MS,
    logger: false,
    debug: false,
  });
  const target = `${settings.secure ? 'smtps' : 'smtp'}://${settings.host.includes(':') ? `[${settings.host}]` : settings.host}:${settings.port.toString()}`;
  const secrets = [settings.password, settings.user].filter((s): s is string => s !== null && s.length >= 3);
  return {
    target,
    async send(message) {
      try {
        await transport.sendMail({ from: settings.from, to: message.to, subject: oneLine(message.subject), text: message.text });
      } catch (err) {
        throw new MailSendError(describeSmtpError(err, secrets));
      }
    },
  };
}

/** Control characters (a newline in a workspace name) have no place in a header. */
const oneLine = (s: string): string => s.replace(/\p{Cc}+/gu, ' ');

/** One clause about what went wrong, from nodemailer's error, with anything secret cut out. */
export function describeSmtpError(err: unknown, secrets: string[] = []): string {
  const e = (err ?? {}) as { code?: unknown; responseCode?: unknown; response?: unknown; message?: unknown };
  const code = typeof e.code === 'string' ? e.code : '';
  const message = typeof e.message === 'string' ? e.message : String(err);
  const response = typeof e.response === 'string' ? e.response : '';
  let text: string;
  if (code === 'EAUTH') text = `the SMTP server refused the login${response === '' ? '' : ` (${response})`}`;
  else if (/ECONNREFUSED/.test(message)) text = 'the SMTP server refused the connection';
  else if (code === 'ETIMEDOUT' || /timeout/i.test(message)) text = 'the SMTP server did not answer in time';
  else if (/ENOTFOUND|EAI_AGAIN/.test(message)) text = "the SMTP server's host name does not resolve";
  else if (code === 'EENVELOPE') text = `the SMTP server refused the sender or recipient address${response === '' ? '' : ` (${response})`}`;
  else if (code === 'ETLS' || /certificate|TLS|SSL/i.test(message)) text = `the TLS connection to the SMTP server failed (${message})`;
  else text = `the SMTP server failed (${response !== '' ? response : message})`;
  for (const secret of secrets) text = text.split(secret).join('[redacted]');
  // The server's words are quoted in an API answer: one line, bounded.
  text = oneLine(text);
  return text.length > 300 ? `${text.slice(0, 297)}...` : text;
}
