// Issue 15 item 4 on the real engine: a deployment that fails its health check, one that
// crash-loops and one whose container is OOM-killed each notify the project monitor's chat
// webhook once, although the monitor's checks are not enabled. Uses Docker Engine: run under
// `flock /tmp/slipway-docker.lock`.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Deployment } from '../../src/modules/deployments/deployments.schema.js';
import { CrashAlerts } from '../../src/modules/uptime/crash-alerts.js';
import { UptimeNotifier } from '../../src/modules/uptime/notifier.js';
import { instanceLabels } from '../../src/modules/deployments/engine/containers.js';
import { instanceId } from '../../src/store/db.js';
import { startTestEngine, type TestEngine } from '../factories/engine.js';
import { RepoRoot, startGitServer, type GitServer } from '../factories/git-server.js';
import { makeWorkspace, quietLog, startTestServer, type TestServer, type TestWorkspace } from '../factories/harness.js';
import { ensureBaseImage } from '../factories/images.js';
import { waitFor } from '../factories/process.js';
import { startWebhookReceiver, type WebhookReceiver } from '../factories/webhook-receiver.js';
import { deployAndSettle } from '../factories/deployments.js';

interface CrashBody {
  event: string;
  cause: string;
  project: { slug: string };
}

describe('crash alerts on the engine', () => {
  let s: TestServer;
  let w: TestWorkspace;
  let root: RepoRoot;
  let gitServer: GitServer;
  let engine: TestEngine;
  let receiver: WebhookReceiver;
  let alerts: CrashAlerts;
  let notifier: UptimeNotifier;
  let base: string;

  beforeAll(async () => {
    base = await ensureBaseImage();
    receiver = await startWebhookReceiver();
    s = await startTestServer('sqlite', { platform: { notifyAllowPrivate: true } });
    w = await makeWorkspace(s);
    root = await RepoRoot.create();
    gitServer = await startGitServer({ root: root.dir });
    notifier = new UptimeNotifier({ repos: s.deps.store.repos, clock: s.deps.clock, random: s.deps.random, secrets: s.deps.secrets, mailer: s.deps.mailer, appsDomain: s.deps.policies.projects.appsDomain, routerPort: s.deps.policies.projects.routerPort, policy: { allowPrivate: true }, log: quietLog, backoffMs: 5 });
    alerts = new CrashAlerts({ uptime: s.deps.store.repos.uptime, clock: s.deps.clock, ids: s.deps.ids, onQueued: () => { void notifier.wake(); }, log: quietLog });
    engine = await startTestEngine(s, { gitBaseUrl: gitServer.url, tune: { crashes: alerts, healthTimeoutMs: 8_000, reconcileEveryMs: 1_000 } });
    await alerts.watch(engine.runtime, instanceLabels(await instanceId(s.store)));
  }, 120_000);
  afterAll(async () => {
    await alerts.stop();
    await engine.close();
    await s.close();
    await gitServer.close();
    await root.dispose();
    await receiver.close();
  }, 120_000);

  /** A project built from a repository holding `cmd`, whose monitor only has a chat webhook (checks off). */
  async function project(name: string, cmd: string, ram = '0.125'): Promise<Deployment> {
    const repo = await root.repo(`acme/${name}`);
    await repo.commit('v1', { Dockerfile: `FROM ${base}\nCOPY index.html /www/index.html\nCMD ["sh", "-c", ${JSON.stringify(cmd)}]\n`, 'index.html': `${name}\n` });
    const api = `/api/workspaces/${w.slug}/projects`;
    expect((await s.request('POST', api, { key: w.member.key, body: { name, port: 8080, cpu: '0.25', ram } })).status).toBe(201);
    await s.request('POST', `${api}/${name}/git`, { key: w.member.key, body: { repo_full_name: `acme/${name}` } });
    const put = await s.request('PUT', `${api}/${name}/uptime`, { key: w.member.key, body: { chat_webhook_url: `${receiver.url}/${name}` } });
    expect(put.status, put.text).toBe(200);
    return deployAndSettle<Deployment>(s, w.member.key, `${api}/${name}`);
  }

  const crashesOf = (name: string) => receiver.delivered().filter((d) => d.path === `/${name}`).map((d) => d.body as CrashBody);

  it('alerts once when a deployment fails its health check', async () => {
    const d = await project('dies', 'exit 3');
    expect(d.status).toBe('failed');
    await waitFor('the alert', async () => (crashesOf('dies').length > 0 ? true : undefined), undefined, 30_000);
    expect(crashesOf('dies')).toEqual([expect.objectContaining({ event: 'crash', project: expect.objectContaining({ slug: 'dies' }) as unknown })]);
    // it exits at once; the engine's restart policy may catch it restarting rather than exited
    expect(crashesOf('dies')[0]?.cause).toMatch(/^Container .*-dies-.* (exited with code 3 before it answered|did not answer on port 8080 within 8 s)/);
  }, 240_000);

  it('alerts once when a serving deployment crash-loops', async () => {
    const d = await project('loops', 'httpd -p $PORT -h /www; sleep 2; exit 1');
    expect(d.status).toBe('running');
    await waitFor('the crash loop alert', async () => (crashesOf('loops').length > 0 ? true : undefined), undefined, 120_000);
    // more passes of the reconciler see it still looping: no second alert
    await new Promise((res) => setTimeout(res, 3_000));
    await notifier.wake();
    expect(crashesOf('loops')).toHaveLength(1);
    expect(crashesOf('loops')[0]?.cause).toMatch(/^crash loop: .* restarted \d+ times and exited with code 1$/);
  }, 240_000);

  it('alerts once when a container is OOM-killed, however often it happens', async () => {
    // serves, then a process eats memory past the 128 MiB limit (again after each restart)
    const d = await project('hog', 'httpd -p $PORT -h /www; sleep 1; tail /dev/zero');
    expect(d.status).toBe('running');
    await waitFor('the OOM alert', async () => (crashesOf('hog').some((b) => /memory limit/.test(b.cause)) ? true : undefined), undefined, 120_000);
    await new Promise((res) => setTimeout(res, 3_000));
    await alerts.idle();
    await notifier.wake();
    expect(crashesOf('hog').filter((b) => /killed for exceeding its memory limit$/.test(b.cause))).toHaveLength(1);
    const log = await s.request<{ notifications: { event: string; status: string }[] }>('GET', `/api/workspaces/${w.slug}/projects/hog/uptime/notifications`, { key: w.member.key });
    expect(log.body.data?.notifications.every((n) => n.event === 'crash' && n.status === 'sent')).toBe(true);
  }, 240_000);
});
