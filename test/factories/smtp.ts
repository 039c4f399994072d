// A real SMTP server on a free port that keeps what it receives, and the production mailer pointed at it.
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { createSmtpMailer, parseSmtpUrl, type Mailer } from '../../src/adapters/notify/mailer.js';

export interface Received {
  from: string;
  to: string[];
  data: string;
}

/** A real SMTP server on a free port that keeps what it receives. */
export async function startSmtp(opts: { password?: string } = {}): Promise<{ url: (userinfo?: string) => string; received: Received[]; close(): Promise<void> }> {
  const received: Received[] = [];
  const server = new SMTPServer({
    authOptional: true,
    allowInsecureAuth: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onAuth(auth, _session, cb) {
      if (auth.password === opts.password) cb(null, { user: auth.username });
      else cb(new Error('Invalid username or password'));
    },
    onData(stream, session, cb) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        received.push({
          from: session.envelope.mailFrom === false ? '' : session.envelope.mailFrom.address,
          to: session.envelope.rcptTo.map((r) => r.address),
          data: Buffer.concat(chunks).toString('utf8'),
        });
        cb();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.server.address() as AddressInfo;
  return {
    url: (userinfo) => `smtp://${userinfo === undefined ? '' : `${userinfo}@`}127.0.0.1:${port.toString()}`,
    received,
    close: () => new Promise<void>((resolve) => {
      server.close(() => {
        resolve();
      });
    }),
  };
}

export const mailerFor = async (url: string): Promise<Mailer> => {
  const settings = parseSmtpUrl(url, 'Slipway <slipway@test.example>');
  if (typeof settings === 'string') throw new Error(settings);
  return createSmtpMailer(settings);
};

const hexes = (s: string) => Buffer.from(s.replace(/=([0-9A-F]{2})/g, (_m, h: string) => String.fromCharCode(parseInt(h, 16))), 'latin1').toString('utf8');

/** The subject and body of a received message, decoded (nodemailer may use quoted-printable). */
export function parseMail(data: string): { subject: string; body: string } {
  const at = data.indexOf('\r\n\r\n');
  const head = data.slice(0, at).replace(/\r\n[ \t]+/g, ' ');
  const raw = /^Subject: (.*)$/m.exec(head)?.[1] ?? '';
  const subject = raw.replace(/=\?UTF-8\?Q\?(.*?)\?=\s*/gi, (_m, q: string) => hexes(q.replace(/_/g, ' ')));
  return { subject, body: hexes(data.slice(at + 4).replace(/=\r?\n/g, '')) };
}

