// Issue 15 on the real engine: an app built from Git and deployed through Slipway is checked
// through the real router; told to fail (the file its health path serves removed inside its
// container, behind Slipway's back) it goes down after the confirming re-check and notifies a
// webhook receiver once; restored, it comes back up with one recovery notice; a redeploy while
// it is checked raises no alarm. Uses Docker Engine: run under `flock /tmp/slipway-docker.lock`.
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Deployment } from '../../src/modules/deployments/deployments.schema.js';
import { routerProbe, UptimeChecker } from '../../src/modules/uptime/uptime.worker.js';
import { DEFAULT_UPTIME_RULES } from '../../src/modules/uptime/policy.js';
import { UptimeNotifier } from '../../src/modules/uptime/notifier.js';
import { quietLog } from '../factories/harness.js';
import { startDeployFixture, type DeployFixture } from '../factories/engine.js';
import { ensureBaseImage } from '../factories/images.js';
import { startWebhookReceiver, type WebhookReceiver } from '../factories/webhook-receiver.js';
import { deployAndSettle } from '../factories/deployments.js';

describe('uptime checks on the engine', () => {
  let fx: DeployFixture;
  let receiver: WebhookReceiver;
  const docker = new Docker();
  const api = () => `/api/workspaces/${fx.w.slug}/projects/watched`;

  beforeAll(async () => {
    const base = await ensureBaseImage();
    receiver = await startWebhookReceiver();
    fx = await startDeployFixture('sqlite', 'acme/watched', { server: { platform: { notifyAllowPrivate: true } } });
    await fx.repo.commit('v1', {
      Dockerfile: `FROM ${base}\nCOPY www /www\nCMD ["sh", "-c", "exec httpd -f -p $PORT -h /www"]\n`,
      'www/index.html': 'watched\n',
      'www/health.html': 'ok\n',
    });
  }, 120_000);
  afterAll(async () => {
    await fx.close();
    await receiver.close();
  }, 120_000);

  const deployed = () => deployAndSettle<Deployment>(fx.s, fx.w.member.key, api());

  it('goes down when the app stops answering its health path, notifies once, comes back, and raises no alarm during a redeploy', async () => {
    const { s, w, engine } = fx;
    const made = await s.request<{ id: string }>('POST', `/api/workspaces/${w.slug}/projects`, { key: w.member.key, body: { name: 'watched', port: 8080, cpu: '0.25', ram: '0.125' } });
    const projectId = made.body.data?.id ?? '';
    await s.request('POST', `${api()}/git`, { key: w.member.key, body: { repo_full_name: 'acme/watched' } });
    const d1 = await deployed();
    expect(d1.status, d1.error ?? '').toBe('running');
    const put = await s.request('PUT', `${api()}/uptime`, { key: w.member.key, body: { enabled: true, check_interval_sec: 10, check_path: '/health.html', chat_webhook_url: `${receiver.url}/ops` } });
    expect(put.status, put.text).toBe(200);

    const notifier = new UptimeNotifier({ repos: s.deps.store.repos, clock: s.deps.clock, random: s.deps.random, secrets: s.deps.secrets, mailer: s.deps.mailer, appsDomain: s.deps.policies.projects.appsDomain, routerPort: s.deps.policies.projects.routerPort, policy: { allowPrivate: true }, log: quietLog, backoffMs: 5 });
    const checker = new UptimeChecker({ store: s.deps.store, clock: s.deps.clock, random: s.deps.random, ids: s.deps.ids, appsDomain: s.deps.policies.projects.appsDomain, probe: routerProbe('127.0.0.1', engine.routerPort), onQueued: () => { void notifier.wake(); }, log: quietLog, rules: DEFAULT_UPTIME_RULES });
    const after = async (ms: number) => {
      s.clock.advance(ms);
      await checker.tick();
      await checker.idle();
      await notifier.wake();
    };
    const status = async () => (await s.request<{ status: string; last_error?: string }>('GET', `${api()}/uptime`, { key: w.member.key })).body.data?.status;
    try {
      await after(0);
      await after(10_000);
      expect(await status()).toBe('up');

      // behind Slipway's back: the health file goes
      const [container] = await docker.listContainers({ filters: { label: [`slipway.project=${projectId}`] } });
      if (container === undefined) throw new Error('no container');
      const exec = async (cmd: string[]) => {
        const e = await docker.getContainer(container.Id).exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true });
        const stream = await e.start({});
        stream.resume();
        await new Promise((res) => stream.on('end', res));
      };
      await exec(['rm', '/www/health.html']);
      await after(10_000);
      expect(await status()).toBe('up');
      await after(2_000);
      expect(await status()).toBe('down');
      expect(receiver.delivered().map((d) => (d.body as { event: string; cause: string }).event)).toEqual(['down']);
      expect((receiver.delivered()[0]?.body as { cause: string }).cause).toBe('HTTP 404');
      await after(10_000);
      expect(receiver.delivered()).toHaveLength(1);

      await exec(['sh', '-c', 'echo ok > /www/health.html']);
      await after(10_000);
      await after(2_000);
      expect(await status()).toBe('up');
      expect(receiver.delivered().map((d) => (d.body as { event: string }).event)).toEqual(['down', 'up']);

      // a redeploy while checks go on: the router keeps serving, and nothing is notified
      const queued = await s.request<Deployment>('POST', `${api()}/redeploy`, { key: w.member.key });
      expect(queued.status).toBe(202);
      for (let i = 0; i < 40; i++) {
        await after(2_000);
        const d = (await s.request<Deployment>('GET', `${api()}/deployments/${queued.body.data?.id ?? ''}`, { key: w.member.key })).body.data;
        if (d?.status === 'running') break;
        await new Promise((res) => setTimeout(res, 250));
      }
      await after(10_000);
      expect(await status()).toBe('up');
      expect(receiver.delivered()).toHaveLength(2);
      const history = await s.request<{ checks: number; failures: number; incidents: { cause: string; ended_at: string | null }[] }>('GET', `${api()}/uptime/history`, { key: w.member.key });
      expect(history.body.data?.incidents).toEqual([expect.objectContaining({ cause: 'HTTP 404', ended_at: expect.any(String) as unknown })]);
    } finally {
      await checker.stop();
    }
  }, 300_000);
});
