// Issue 15 items 1-3 and 6 through the API on both stores, with real HTTP everywhere: the checker's
// production probe asks a local HTTP server that answers for the project's host name as the
// router would (200, or 503 when told to fail), notifications go to a local webhook receiver
// and a real SMTP server, and time moves on an injected clock. The same checker against a
// project deployed on the real engine and router: test/e2e/uptime-engine.test.ts.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { routerProbe, UptimeChecker } from '../../src/modules/uptime/uptime.worker.js';
import { DEFAULT_UPTIME_RULES } from '../../src/modules/uptime/policy.js';
import { UptimeNotifier } from '../../src/modules/uptime/notifier.js';
import { runningProject, setClock } from '../factories/billing.js';
import { closeServer } from '../factories/git-server.js';
import { makeWorkspace, quietLog, startTestServer, type TestServer, type TestWorkspace } from '../factories/harness.js';
import { mailerFor, parseMail, startSmtp } from '../factories/smtp.js';
import { STORE_KINDS } from '../factories/stores.js';
import { startWebhookReceiver, type WebhookReceiver } from '../factories/webhook-receiver.js';

/** Answers for every host like the router would: 200 with a page, or `failing` hosts with 503. */
async function startFakeRouter(): Promise<{ port: number; failing: Set<string>; hits: string[]; close(): Promise<void> }> {
  const failing = new Set<string>();
  const hits: string[] = [];
  const server: Server = createServer((req, res) => {
    const host = (req.headers.host ?? '').replace(/:\d+$/, '');
    hits.push(`${host}${req.url ?? ''}`);
    if (failing.has(host)) res.writeHead(503, { 'content-type': 'text/plain' }).end('no healthy upstream');
    else res.writeHead(200, { 'content-type': 'text/html' }).end('<h1>shop</h1>');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as AddressInfo).port, failing, hits, close: () => closeServer(server) };
}

interface Monitor {
  enabled: boolean;
  status: string;
  check_url: string;
  last_checked_at: string | null;
  last_response_ms: number | null;
}

interface History {
  checks: number;
  failures: number;
  availability: number | null;
  response_ms: { avg: number | null; p50: number | null; p95: number | null; p99: number | null };
  series: { start: string; checks: number; failures: number }[];
  incidents: { id: string; started_at: string; ended_at: string | null; duration_sec: number; cause: string }[];
}

interface Notification {
  event: string;
  channel: string;
  status: string;
  attempts: number;
  response_status: number | null;
  error: string | null;
}

describe.each(STORE_KINDS)('uptime checks on %s', (kind) => {
  let s: TestServer;
  let w: TestWorkspace;
  let router: Awaited<ReturnType<typeof startFakeRouter>>;
  let receiver: WebhookReceiver;
  let smtp: Awaited<ReturnType<typeof startSmtp>>;
  let checker: UptimeChecker;
  let notifier: UptimeNotifier;
  let project: { id: string; slug: string; deploymentId: string };
  let host: string;
  const api = () => `/api/workspaces/${w.slug}/projects/${project.slug}/uptime`;

  beforeAll(async () => {
    router = await startFakeRouter();
    receiver = await startWebhookReceiver();
    smtp = await startSmtp();
    s = await startTestServer(kind, { mailer: await mailerFor(smtp.url()), platform: { notifyAllowPrivate: true } });
    setClock(s, '2027-06-01T12:00:00.000Z');
    w = await makeWorkspace(s);
    project = await runningProject(s, w.id, { replicas: 1, cpu: '0.5', ram: '0.5' });
    host = `${(await s.store.db.selectFrom('projects').select('host_label').where('id', '=', project.id).executeTakeFirstOrThrow()).host_label}.apps.test`;
    notifier = new UptimeNotifier({ repos: s.deps.store.repos, clock: s.deps.clock, random: s.deps.random, secrets: s.deps.secrets, mailer: s.deps.mailer, appsDomain: s.deps.policies.projects.appsDomain, routerPort: s.deps.policies.projects.routerPort, policy: { allowPrivate: true }, log: quietLog, backoffMs: 5 });
    checker = new UptimeChecker({ store: s.deps.store, clock: s.deps.clock, random: s.deps.random, ids: s.deps.ids, appsDomain: s.deps.policies.projects.appsDomain, probe: routerProbe('127.0.0.1', router.port), onQueued: () => { void notifier.wake(); }, log: quietLog, rules: DEFAULT_UPTIME_RULES });
  });
  afterAll(async () => {
    await checker.stop();
    await s.close();
    await router.close();
    await receiver.close();
    await smtp.close();
  });

  /** Moves the clock and lets the checker look at its schedule, then waits for its checks and deliveries. */
  async function after(ms: number): Promise<void> {
    s.clock.advance(ms);
    await checker.tick();
    await checker.idle();
    await notifier.wake();
  }
  const monitor = async () => (await s.request<Monitor>('GET', api(), { key: w.member.key })).body.data;
  const mails = () => smtp.received.filter((m) => m.to.includes('oncall@example.com')).map((m) => parseMail(m.data).subject);
  const notifications = async () => (await s.request<{ notifications: Notification[]; total: number }>('GET', `${api()}/notifications?limit=50`, { key: w.member.key })).body.data;

  it('checks through the router at the interval, confirms a failure before going down, notifies each channel once per transition, and records the incident', async () => {
    const put = await s.request<Monitor>('PUT', api(), { key: w.member.key, body: { enabled: true, check_interval_sec: 10, check_path: '/health', chat_webhook_url: `${receiver.url}/hooks/ops`, notify_email: 'oncall@example.com' } });
    expect(put.status, put.text).toBe(200);
    expect(put.body.data).toMatchObject({ enabled: true, status: 'unknown', check_url: `http://${host}:8000/health` });
    // the first check comes within the first interval (spread), then one each interval
    await after(0);
    await after(10_000);
    expect(await monitor()).toMatchObject({ status: 'up' });
    expect(router.hits.at(-1)).toBe(`${host}/health`);
    const m = await monitor();
    expect(m?.last_checked_at).not.toBeNull();
    expect(m?.last_response_ms).toBeGreaterThanOrEqual(0);

    // it fails: one failure is not enough, the re-check two seconds later confirms it
    router.failing.add(host);
    await after(10_000);
    expect((await monitor())?.status).toBe('up');
    expect(receiver.delivered()).toHaveLength(0);
    await after(2_000);
    expect((await monitor())?.status).toBe('down');
    expect(receiver.delivered()).toHaveLength(1);
    expect(receiver.delivered()[0]?.body).toMatchObject({ event: 'down', url: `http://${host}:8000/health`, cause: 'HTTP 503', project: { id: project.id, slug: project.slug, workspace: w.slug } });
    expect(mails()).toEqual([`DOWN: ${project.slug} (${w.slug}) is not answering at http://${host}:8000/health: HTTP 503`]);
    // still down: nothing more
    await after(10_000);
    await after(10_000);
    expect(receiver.delivered()).toHaveLength(1);
    expect(mails()).toHaveLength(1);

    // back: two successes, then one recovery notice per channel
    router.failing.delete(host);
    await after(10_000);
    expect((await monitor())?.status).toBe('down');
    await after(2_000);
    expect((await monitor())?.status).toBe('up');
    expect(receiver.delivered().map((d) => (d.body as { event: string }).event)).toEqual(['down', 'up']);
    expect(mails()).toHaveLength(2);
    expect(mails()[1]).toMatch(new RegExp(`^UP again: ${project.slug} \\(${w.slug}\\) answers at http://${host}:8000/health after `));

    const log = await notifications();
    expect(log?.notifications.map((n) => [n.event, n.channel, n.status, n.attempts])).toEqual(
      expect.arrayContaining([['down', 'webhook', 'sent', 1], ['down', 'email', 'sent', 1], ['up', 'webhook', 'sent', 1], ['up', 'email', 'sent', 1]]),
    );
    expect(log?.total).toBe(4);

    const h = (await s.request<History>('GET', `${api()}/history?period=24h`, { key: w.member.key })).body.data;
    // up, (fail, fail: down, fail, fail), (ok, ok: up)
    expect(h).toMatchObject({ checks: 7, failures: 4, availability: 42.857 });
    expect(h?.response_ms.p50).not.toBeNull();
    expect(h?.incidents).toHaveLength(1);
    // down at the confirming re-check (t = 22 s), up at the second success (t = 54 s)
    expect(h?.incidents[0]).toMatchObject({ cause: 'HTTP 503' });
    expect(h?.incidents[0]?.duration_sec).toBeGreaterThanOrEqual(32);
    expect(h?.incidents[0]?.duration_sec).toBeLessThanOrEqual(33);
    for (const period of ['7d', '30d']) {
      const long = (await s.request<History>('GET', `${api()}/history?period=${period}`, { key: w.member.key })).body.data;
      expect(long, period).toMatchObject({ checks: 7, failures: 4, availability: 42.857 });
      expect(long?.series.reduce((n, x) => n + x.checks, 0)).toBe(7);
    }
    expect((await s.request('GET', `${api()}/history?period=1y`, { key: w.member.key })).status).toBe(400);
    // Prometheus: 1 while up
    expect(await (await fetch(s.metricsUrl)).text()).toContain(`slipway_project_up{workspace="${w.slug}",project="${project.slug}"} 1`);
  });

  it('does not count failures while Slipway rolls the project out, and pauses for a stopped project', async () => {
    const before = receiver.deliveries.length;
    await s.store.db
      .insertInto('deployments')
      .values({ id: s.deps.ids.id(), project_id: project.id, status: 'deploying', source: 'redeploy', image: 'x', branch: null, commit_sha: null, commit_message: null, error: null, created_at: new Date(s.clock.now()).toISOString(), started_at: null, finished_at: null, lease_owner: null, lease_until: null })
      .execute();
    router.failing.add(host);
    for (let i = 0; i < 4; i++) await after(10_000);
    expect((await monitor())?.status).toBe('up');
    expect(receiver.deliveries.length).toBe(before);
    await s.store.db.deleteFrom('deployments').where('status', '=', 'deploying').execute();
    router.failing.delete(host);

    await s.store.db.updateTable('projects').set({ status: 'stopped' }).where('id', '=', project.id).execute();
    await after(10_000);
    expect((await monitor())?.status).toBe('paused');
    expect(receiver.deliveries.length).toBe(before);
    await s.store.db.updateTable('projects').set({ status: 'running' }).where('id', '=', project.id).execute();
    await after(10_000);
    expect((await monitor())?.status).toBe('up');
  });

  it('retries a webhook that fails twice and delivers it exactly once', async () => {
    const delivered = receiver.delivered().length;
    receiver.failNext(2, 500);
    router.failing.add(host);
    await after(10_000);
    await after(2_000);
    expect((await monitor())?.status).toBe('down');
    expect(receiver.delivered().length).toBe(delivered + 1);
    const down = (await notifications())?.notifications.find((n) => n.event === 'down' && n.channel === 'webhook' && n.attempts === 3);
    expect(down).toMatchObject({ status: 'sent', response_status: 200 });
    router.failing.delete(host);
    await after(10_000);
    await after(2_000);
    expect((await monitor())?.status).toBe('up');
  });

  it('sends a test notification to both channels and answers what each returned', async () => {
    const r = await s.request<{ webhook: { ok: boolean; status: number | null; attempts: number } | null; email: { ok: boolean } | null }>('POST', `${api()}/test`, { key: w.member.key });
    expect(r.status, r.text).toBe(200);
    expect(r.body.data).toMatchObject({ webhook: { ok: true, status: 200, attempts: 1 }, email: { ok: true } });
    expect(mails().at(-1)).toBe(`Test notification from Slipway for ${project.slug} (${w.slug})`);
    expect((receiver.delivered().at(-1)?.body as { event: string }).event).toBe('test');
    // the leader's notifier, woken while a test is being delivered, does not send it again
    const tests = () => receiver.deliveries.filter((d) => (d.body as { event?: string } | undefined)?.event === 'test').length;
    const before = tests();
    receiver.delayNext(500);
    const slow = s.request('POST', `${api()}/test`, { key: w.member.key });
    await new Promise((res) => setTimeout(res, 150));
    await notifier.wake();
    expect((await slow).status).toBe(200);
    await notifier.wake();
    expect(tests()).toBe(before + 1);
    // a monitor without channels has nothing to test
    const other = await runningProject(s, w.id, { replicas: 1, cpu: '0.5', ram: '0.5' });
    const none = await s.request('POST', `/api/workspaces/${w.slug}/projects/${other.slug}/uptime/test`, { key: w.member.key });
    expect(none.status).toBe(400);
  });

  it.each([
    [{ check_interval_sec: 5 }, 'check_interval_sec'],
    [{ check_interval_sec: 86_401 }, 'check_interval_sec'],
    [{ notify_email: 'not-an-address' }, 'notify_email'],
    [{ chat_webhook_url: 'ftp://example.com/hook' }, 'chat_webhook_url'],
  ])('refuses %j with 400 naming the field', async (body, field) => {
    const r = await s.request('PUT', api(), { key: w.member.key, body });
    expect(r.status).toBe(400);
    expect(r.body.error).toContain(field);
  });

  it('refuses webhook targets on private, loopback and link-local addresses unless the operator allows them', async () => {
    const strict = await startTestServer(kind, { replicaOf: s, platform: { notifyAllowPrivate: false } });
    try {
      for (const url of ['http://127.0.0.1:9/hook', 'http://169.254.169.254/latest/meta-data', 'http://10.1.2.3/hook', 'http://[::1]/hook', 'http://[::ffff:127.0.0.1]/hook', 'http://localhost:9/hook']) {
        const r = await strict.request('PUT', api(), { key: w.member.key, body: { chat_webhook_url: url } });
        expect(r.status, url).toBe(400);
        expect(r.body.error, url).toContain('chat_webhook_url');
      }
      // (a host name is judged again at each send, after resolution: test/medium/notify-channels.test.ts)
    } finally {
      await strict.close();
    }
  });
});
