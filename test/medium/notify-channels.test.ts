// The uptime alert channels against local receivers: a webhook server that answers the way Slack,
// Discord and a plain JSON receiver do, and a real SMTP server. The targets are checked against
// SSRF; tests reach 127.0.0.1 with allowPrivate, and the refusals are checked separately.
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { alertText, sendEmail, sendWebhook, webhookPayload, type AlertEvent, type SendOptions } from '../../src/adapters/notify/channels.js';
import { blockedAddress, checkUrlShape, ResolveError, resolveTarget, type TargetPolicy } from '../../src/adapters/notify/ssrf.js';
import { closedPort, closeServer } from '../factories/git-server.js';
import { mailerFor, parseMail, startSmtp } from '../factories/smtp.js';
import { makeCa, makeLeaf } from '../factories/tls.js';
import { startWebhookReceiver, type WebhookReceiver } from '../factories/webhook-receiver.js';

const down: AlertEvent = {
  kind: 'down',
  project: { id: '0193a7c2-0000-7000-8000-000000000001', name: 'Shop', slug: 'shop', workspace: 'acme' },
  url: 'http://shop.apps.example.com/health',
  at: '2026-11-30T10:04:10.000Z',
  cause: 'HTTP 503',
  response_ms: 120,
  incident_started_at: '2026-11-30T10:00:00.000Z',
};

const up: AlertEvent = { ...down, kind: 'up', cause: null, response_ms: 35 };

/** A target name (never resolved for real) that the injected lookup sends to the receiver. */
const toLoopback: TargetPolicy = { allowPrivate: true, lookup: async () => ['127.0.0.1'] };

/** Records the waits instead of waiting. */
function sleeper(): { sleep: (ms: number) => Promise<void>; waits: number[] } {
  const waits: number[] = [];
  return {
    waits,
    sleep: async (ms) => {
      waits.push(ms);
    },
  };
}

/** Randomness of all-zero bits (no jitter), or all-one bits (the most jitter). */
const zeros = { bytes: (n: number) => Buffer.alloc(n, 0) };
const ones = { bytes: (n: number) => Buffer.alloc(n, 0xff) };

/** Fast, exact options: no jitter, recorded waits. */
function options(over: Partial<SendOptions> = {}): SendOptions & { waits: number[] } {
  const { sleep, waits } = sleeper();
  return { policy: { allowPrivate: true }, sleep, random: zeros, timeoutMs: 2000, ...over, waits };
}

let receiver: WebhookReceiver;

beforeAll(async () => {
  receiver = await startWebhookReceiver();
});

afterAll(async () => {
  await receiver.close();
});

/** The deliveries made during `fn`. */
async function during<T>(fn: () => Promise<T>): Promise<{ result: T; deliveries: WebhookReceiver['deliveries'] }> {
  const before = receiver.deliveries.length;
  const result = await fn();
  return { result, deliveries: receiver.deliveries.slice(before) };
}

describe('blockedAddress', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.255.0.9', 'loopback'],
    ['::1', 'loopback'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['0.0.0.0', 'unspecified'],
    ['::', 'unspecified'],
    ['169.254.169.254', 'cloud metadata'],
    ['169.254.10.1', 'link-local'],
    ['fe80::1', 'link-local'],
    ['fe80::1%eth0', 'link-local'],
    ['10.0.0.5', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['fd12:3456::1', 'private'],
    ['fc00::1', 'private'],
    ['::ffff:10.1.2.3', 'private'],
    ['100.64.0.1', 'carrier-grade NAT'],
    ['100.127.255.254', 'carrier-grade NAT'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['ff02::1', 'multicast'],
    ['255.255.255.255', 'broadcast'],
    ['240.0.0.1', 'reserved'],
    ['192.0.2.10', 'reserved'],
    ['2001:db8::1', 'reserved'],
    ['::7f00:1', 'reserved'],
    ['64:ff9b::a00:5', 'private'],
    ['64:ff9b::127.0.0.1', 'loopback'],
    ['2002:c0a8:101::1', 'private'],
    ['2002:7f00:1::', 'loopback'],
    ['hooks.slack.com', 'not an IP address'],
  ])('refuses %s (%s)', (ip, reason) => {
    expect(blockedAddress(ip)).toContain(reason);
  });

  it.each(['93.184.216.34', '8.8.8.8', '1.1.1.1', '172.32.0.1', '100.128.0.1', '2606:4700::1111', '2a00:1450:4001:80b::200e', '::ffff:93.184.216.34', '64:ff9b::8.8.8.8', '2002:808:808::1'])(
    'allows the public address %s',
    (ip) => {
      expect(blockedAddress(ip)).toBeNull();
    },
  );
});

describe('checkUrlShape', () => {
  it.each([
    ['ftp://files.example.com/hook', 'must be an http or https URL (this one is ftp)'],
    ['not a url', 'must be an http or https URL'],
    ['http://', 'must be an http or https URL'],
    ['https://user:pass@hooks.example.com/x', 'must not contain a user name or password'],
    ['https://user@hooks.example.com/x', 'must not contain a user name or password'],
    ['http://10.0.0.5/hook', 'a private address (10.0.0.5)'],
    ['http://[::1]:8080/hook', 'a loopback address (::1)'],
    ['http://2130706433/hook', 'a loopback address (127.0.0.1)'],
    ['http://169.254.169.254/latest/meta-data', 'cloud metadata'],
    ['http://localhost:3000/hook', 'this machine (localhost)'],
  ])('refuses %s', (url, words) => {
    const problem = checkUrlShape(url);
    expect(problem).toContain('"chat_webhook_url"');
    expect(problem).toContain(words);
  });

  it('accepts public https and http URLs, and private ones when the operator allows them', () => {
    expect(checkUrlShape('https://hooks.slack.com/services/T000/B000/XXXX')).toBeNull();
    expect(checkUrlShape('http://93.184.216.34/hook')).toBeNull();
    expect(checkUrlShape('http://10.0.0.5/hook', { allowPrivate: true })).toBeNull();
    expect(checkUrlShape('http://localhost/hook', { allowPrivate: true })).toBeNull();
    expect(checkUrlShape('https://user:pass@hooks.example.com/x', { allowPrivate: true })).toContain('user name or password');
  });
});

describe('resolveTarget', () => {
  it('refuses a name that resolves to a private address, and allows it when the operator does', async () => {
    const lookup = async () => ['10.0.0.5'];
    const refused = await resolveTarget('https://chat.example.com/hook', { allowPrivate: false, lookup });
    expect(refused).toEqual({ refused: "the webhook's host resolves to a private address (10.0.0.5); the operator can allow such targets with --notify-allow-private" });
    expect(await resolveTarget('https://chat.example.com/hook', { allowPrivate: true, lookup })).toEqual({ address: '10.0.0.5', family: 4 });
  });

  it('refuses a name when any of its addresses is blocked, and gives the first address otherwise', async () => {
    expect(await resolveTarget('https://chat.example.com/hook', { allowPrivate: false, lookup: async () => ['93.184.216.34', '127.0.0.1'] })).toMatchObject({ refused: expect.stringContaining('loopback') });
    expect(await resolveTarget('https://chat.example.com/hook', { allowPrivate: false, lookup: async () => ['2606:4700::1111', '93.184.216.34'] })).toEqual({ address: '2606:4700::1111', family: 6 });
  });

  it('takes an IP literal as it is, without a lookup', async () => {
    const lookup = async (): Promise<string[]> => {
      throw new Error('no lookup expected');
    };
    expect(await resolveTarget('http://[2606:4700::1111]/hook', { allowPrivate: false, lookup })).toEqual({ address: '2606:4700::1111', family: 6 });
    expect(await resolveTarget('http://127.0.0.1:9/hook', { allowPrivate: false, lookup })).toMatchObject({ refused: expect.stringContaining('loopback') });
  });

  it('rejects with a ResolveError when the name does not resolve', async () => {
    const lookup = async (): Promise<string[]> => {
      throw Object.assign(new Error('getaddrinfo ENOTFOUND chat.example.com'), { code: 'ENOTFOUND' });
    };
    await expect(resolveTarget('https://chat.example.com/hook', { allowPrivate: false, lookup })).rejects.toThrow(ResolveError);
  });
});

describe('alert text and payloads', () => {
  it('says what happened in the subject, and the details below', () => {
    expect(alertText(down).subject).toBe('DOWN: Shop (acme) is not answering at http://shop.apps.example.com/health: HTTP 503');
    expect(alertText(down).text).toContain('Response time: 120 ms');
    expect(alertText(up).subject).toBe('UP again: Shop (acme) answers at http://shop.apps.example.com/health after 4 min 10 s down');
    expect(alertText({ ...down, kind: 'test' }).subject).toBe('Test notification from Slipway for Shop (acme)');
    expect(alertText({ ...down, kind: 'crash', cause: 'the container exited with code 137' }).subject).toBe('CRASH: Shop (acme) stopped unexpectedly: the container exited with code 137');
    expect(alertText({ ...down, project: { ...down.project, name: 'Shop\r\nBcc: x@example.com' } }).subject).not.toMatch(/[\r\n]/);
  });

  it('chooses the body by the host: Slack text (escaped), Discord content (bounded, no mentions), else the event', () => {
    const odd = { ...down, project: { ...down.project, name: '<!channel> & co' } };
    expect(webhookPayload(new URL('https://hooks.slack.com/services/T/B/X'), odd)).toEqual({ text: expect.stringContaining('&lt;!channel&gt; &amp; co') });
    const long = { ...down, cause: 'x'.repeat(5000) };
    const discord = webhookPayload(new URL('https://discord.com/api/webhooks/1/t'), long) as { content: string; allowed_mentions: unknown };
    expect(Array.from(discord.content)).toHaveLength(2000);
    expect(discord.allowed_mentions).toEqual({ parse: [] });
    expect(webhookPayload(new URL('https://canary.discord.com/api/webhooks/1/t'), down)).toHaveProperty('content');
    // discord.com outside /api/webhooks/ is not a Discord webhook
    expect(webhookPayload(new URL('https://discord.com/other'), down)).toMatchObject({ event: 'down' });
    expect(webhookPayload(new URL('https://example.com/hook'), down)).toEqual({
      event: 'down',
      project: down.project,
      url: down.url,
      at: down.at,
      cause: 'HTTP 503',
      response_ms: 120,
      incident_started_at: down.incident_started_at,
      text: alertText(down).text,
    });
  });
});

describe('sendWebhook', () => {
  it("posts Slack's {text} to a Slack host, connecting only to the address that was checked", async () => {
    let lookups = 0;
    const policy: TargetPolicy = {
      allowPrivate: true,
      lookup: async () => {
        lookups++;
        return ['127.0.0.1'];
      },
    };
    const url = `http://hooks.slack.com:${receiver.port.toString()}/services/T000/B000/slacksecret123`;
    const { result, deliveries } = await during(() => sendWebhook(url, down, options({ policy })));
    expect(result).toEqual({ channel: 'webhook', ok: true, attempts: 1, status: 200, error: null });
    expect(lookups).toBe(1);
    expect(deliveries).toHaveLength(1);
    expect(deliveries[0]).toMatchObject({ method: 'POST', path: '/services/T000/B000/slacksecret123', status: 200, body: { text: expect.stringContaining('DOWN: Shop (acme)') } });
    expect(deliveries[0]?.headers.host).toBe(`hooks.slack.com:${receiver.port.toString()}`);
    expect(deliveries[0]?.headers['content-type']).toMatch(/^application\/json/);
  });

  it("posts Discord's {content} to a Discord webhook and takes its 204 as success", async () => {
    const url = `http://discord.com:${receiver.port.toString()}/api/webhooks/123/discordsecret456`;
    const { result, deliveries } = await during(() => sendWebhook(url, up, options({ policy: toLoopback })));
    expect(result).toMatchObject({ ok: true, attempts: 1, status: 204 });
    expect(deliveries).toEqual([expect.objectContaining({ status: 204, body: { content: alertText(up).text, allowed_mentions: { parse: [] } } })]);
  });

  it('posts the event as JSON to any other receiver', async () => {
    const { result, deliveries } = await during(() => sendWebhook(`${receiver.url}/hooks/generic`, down, options()));
    expect(result).toMatchObject({ ok: true, status: 200 });
    expect(deliveries[0]?.body).toEqual(webhookPayload(new URL('http://x.example/'), down));
  });

  it('retries 5xx with doubling backoff and delivers once', async () => {
    receiver.failNext(2, 500);
    const o = options();
    const { result, deliveries } = await during(() => sendWebhook(`${receiver.url}/hooks/flaky`, down, o));
    expect(result).toEqual({ channel: 'webhook', ok: true, attempts: 3, status: 200, error: null });
    expect(deliveries.map((d) => d.status)).toEqual([500, 500, 200]);
    expect(o.waits).toEqual([1000, 2000]);
  });

  it('keeps the jitter within 20% of the backoff', async () => {
    receiver.failNext(1, 502);
    const o = options({ backoffMs: 500, random: ones });
    expect(await sendWebhook(`${receiver.url}/hooks/jitter`, down, o)).toMatchObject({ ok: true, attempts: 2 });
    expect(o.waits).toHaveLength(1);
    expect(o.waits[0]).toBeGreaterThan(500);
    expect(o.waits[0]).toBeLessThanOrEqual(600);
  });

  it('waits as long as Retry-After asks on 429, up to a minute', async () => {
    const now = new Date('2026-11-30T10:00:00.000Z');
    receiver.failNext(1, 429, { headers: { 'retry-after': '7' } });
    receiver.failNext(1, 429, { headers: { 'retry-after': '3600' } });
    receiver.failNext(1, 429, { headers: { 'retry-after': new Date(now.getTime() + 5000).toUTCString() } });
    const o = options({ clock: { now: () => now } });
    expect(await sendWebhook(`${receiver.url}/hooks/limited`, down, o)).toMatchObject({ ok: true, attempts: 4, status: 200 });
    expect(o.waits).toEqual([7000, 60_000, 5000]);
  });

  it('gives up on a 429 that lasts, saying so', async () => {
    receiver.failNext(2, 429);
    const o = options({ attempts: 2 });
    expect(await sendWebhook(`${receiver.url}/hooks/limited`, down, o)).toEqual({
      channel: 'webhook',
      ok: false,
      attempts: 2,
      status: 429,
      error: "the webhook's server is limiting the rate of messages (HTTP 429)",
    });
    expect(o.waits).toEqual([1000]);
  });

  it('takes a 400 as final after one try', async () => {
    const url = `http://hooks.slack.com:${receiver.port.toString()}/services/T/B/X`;
    receiver.failNext(1, 400, { body: 'invalid_payload' });
    const o = options({ policy: toLoopback });
    const { result, deliveries } = await during(() => sendWebhook(url, down, o));
    expect(result).toEqual({ channel: 'webhook', ok: false, attempts: 1, status: 400, error: 'the webhook refused the message (HTTP 400: invalid_payload)' });
    expect(deliveries).toHaveLength(1);
    expect(o.waits).toEqual([]);
  });

  it('does not follow a redirect', async () => {
    receiver.failNext(1, 302, { headers: { location: `${receiver.url}/elsewhere` } });
    const { result, deliveries } = await during(() => sendWebhook(`${receiver.url}/hooks/moved`, down, options()));
    expect(result).toMatchObject({ ok: false, attempts: 1, status: 302, error: expect.stringContaining('redirect') });
    expect(deliveries.map((d) => d.path)).toEqual(['/hooks/moved']);
  });

  it('retries a try that does not answer in time', async () => {
    receiver.delayNext(1500);
    const o = options({ timeoutMs: 200 });
    const { result, deliveries } = await during(() => sendWebhook(`${receiver.url}/hooks/slow`, down, o));
    expect(result).toMatchObject({ ok: true, attempts: 2, status: 200, error: null });
    expect(deliveries).toHaveLength(2);
    expect(o.waits).toEqual([1000]);

    receiver.delayNext(1500);
    receiver.delayNext(1500);
    expect(await sendWebhook(`${receiver.url}/hooks/slow`, down, options({ timeoutMs: 200, attempts: 2 }))).toEqual({
      channel: 'webhook',
      ok: false,
      attempts: 2,
      status: null,
      error: "the webhook's server did not answer within 200 ms",
    });
  });

  it('refuses a private target at send time without sending anything', async () => {
    const { result, deliveries } = await during(() => sendWebhook(`${receiver.url}/hooks/private`, down, options({ policy: { allowPrivate: false } })));
    expect(result).toMatchObject({ ok: false, attempts: 1, status: null, error: expect.stringContaining('a loopback address (127.0.0.1)') });
    expect(deliveries).toEqual([]);

    const rebound = await during(() =>
      sendWebhook(`http://hooks.slack.com:${receiver.port.toString()}/services/T/B/X`, down, options({ policy: { allowPrivate: false, lookup: async () => ['127.0.0.1'] } })),
    );
    expect(rebound.result).toMatchObject({ ok: false, attempts: 1, error: "the webhook's host resolves to a loopback address (127.0.0.1); the operator can allow such targets with --notify-allow-private" });
    expect(rebound.deliveries).toEqual([]);
  });

  it("over https, names the webhook's host to TLS (not the pinned address) and takes an untrusted certificate as final", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'slipway-notify-'));
    const leaf = await makeLeaf(await makeCa(dir), ['hooks.slack.com']);
    const names: string[] = [];
    const sni = (name: string, cb: (err: Error | null) => void) => {
      names.push(name);
      cb(null);
    };
    const server = createHttpsServer({ cert: leaf.certificatePem, key: leaf.privateKeyPem, SNICallback: sni }, (_req, res) => res.end('ok'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const o = options({ policy: toLoopback });
      const r = await sendWebhook(`https://hooks.slack.com:${port.toString()}/services/T/B/X`, down, o);
      expect(r).toMatchObject({ ok: false, attempts: 1, status: null, error: expect.stringContaining('no valid TLS certificate') });
      expect(names).toEqual(['hooks.slack.com']);
      expect(o.waits).toEqual([]);
    } finally {
      await closeServer(server);
      await rm(dir, { recursive: true, force: true });
    }
  });

  describe('never repeats the URL or its token in an error', () => {
    const token = 'tok3n-Secret-9f8e7d';
    const path = `/hooks/T123/${token}`;

    it.each([
      ['a server error that echoes the path', 500],
      ['a refusal that echoes the path', 404],
    ])('%s', async (_name, status) => {
      receiver.failNext(4, status, { body: `no webhook at ${receiver.url}${path} (${path})` });
      const r = await sendWebhook(`${receiver.url}${path}`, down, options());
      expect(r.ok).toBe(false);
      expect(r.error).toContain(`HTTP ${status.toString()}`);
      expect(r.error).not.toContain(token);
      expect(r.error).not.toContain('/hooks/T123');
    });

    it('a closed port', async () => {
      const r = await sendWebhook(`http://127.0.0.1:${(await closedPort()).toString()}${path}`, down, options({ attempts: 2 }));
      expect(r).toMatchObject({ ok: false, attempts: 2, error: "the webhook's server refused the connection" });
    });

    it('a name that does not resolve', async () => {
      const lookup = async (): Promise<string[]> => {
        throw Object.assign(new Error(`getaddrinfo ENOTFOUND chat.example.com ${path}`), { code: 'ENOTFOUND' });
      };
      const r = await sendWebhook(`https://chat.example.com${path}`, down, options({ attempts: 2, policy: { allowPrivate: false, lookup } }));
      expect(r).toMatchObject({ ok: false, attempts: 2, error: "the webhook's host name does not resolve" });
    });

    it('a refused target', async () => {
      const r = await sendWebhook(`http://10.0.0.5${path}`, down, options({ policy: { allowPrivate: false } }));
      expect(r.error).toContain('private address');
      expect(r.error).not.toContain(token);
    });
  });
});

describe('sendEmail', () => {
  let smtp: Awaited<ReturnType<typeof startSmtp>>;
  beforeAll(async () => {
    smtp = await startSmtp();
  });
  afterAll(async () => {
    await smtp.close();
  });

  it('sends the alert through the SMTP server', async () => {
    const r = await sendEmail(await mailerFor(smtp.url()), 'ops@example.com', down, { sleep: sleeper().sleep });
    expect(r).toEqual({ channel: 'email', ok: true, attempts: 1, status: null, error: null });
    const mail = smtp.received.at(-1);
    expect(mail?.to).toEqual(['ops@example.com']);
    const { subject, body } = parseMail(mail?.data ?? '');
    expect(subject).toBe(alertText(down).subject);
    for (const line of alertText(down).text.split('\n')) expect(body).toContain(line);
  });

  it('says that no SMTP server is configured', async () => {
    expect(await sendEmail(undefined, 'ops@example.com', down)).toEqual({ channel: 'email', ok: false, attempts: 0, status: null, error: 'no SMTP server is configured (--smtp-url)' });
  });

  it('retries a server that refuses the connection, then gives up', async () => {
    const port = (await closedPort()).toString();
    const { sleep, waits } = sleeper();
    const r = await sendEmail(await mailerFor(`smtp://alerts:hunter2pass@127.0.0.1:${port}`), 'ops@example.com', down, { attempts: 3, sleep, random: zeros });
    expect(r).toEqual({ channel: 'email', ok: false, attempts: 3, status: null, error: `the SMTP server refused the connection (smtp://127.0.0.1:${port})` });
    expect(waits).toEqual([1000, 2000]);
  });
});
