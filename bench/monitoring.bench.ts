// Monitoring (issue 15), three measurements, each beside its reference in the same run:
//
//   npx tsx bench/monitoring.bench.ts [scale] [detection] [status]   (make bench-monitoring; default: all three)
//
// - scale: 1,000 monitors at a 10 s interval for --seconds (default 60), the production checker
//   (store, schedule, probe, state machine) against a local HTTP server standing in for the router
//   in another process. Lateness of each check on its schedule (goal: p99 ≤ 1 s) and the
//   checker's CPU (percent of one core) and RSS. Reference: a bare loop of one timer per monitor
//   doing the same GETs, storing nothing.
// - detection: `bin/slipway serve` with a deployed app checked every 10 s; the app's health file
//   is removed at a random moment (behind Slipway's back) and the time until the chat webhook
//   receives `down` is measured, --trials times (default 3). Goal: ≤ interval + one confirmation
//   (12 s). Reference, watching the same app in the same trials: a poller every 10 s that calls
//   it down after two consecutive failures (no quick re-check), as most checkers do.
// - status: the status view of one of 10 running projects under wrk (goal p99 ≤ 20 ms), answered
//   from the sampler; reference: the same pods read from the engine's stats API (the path a
//   standby, or this view before the sampler, takes).
//
// Writes bench/results/monitoring-<date>.json. Not part of the test suite.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'node:http';
import Docker from 'dockerode';
import { instanceLabels, podsOf } from '../src/modules/deployments/engine/containers.js';
import { idSource, iso, systemClock, systemRandom } from '../src/domain/clock.js';
import { DockerRuntime } from '../src/adapters/runtime/docker/docker.runtime.js';
import { SecretBox } from '../src/adapters/secrets/secret-box.js';
import { createStore } from '../src/store/db.js';
import type { Sources } from '../src/domain/clock.js';
import { createWorkspace } from '../src/modules/tenancy/workspaces.service.js';
import { findOrCreateUser } from '../src/modules/tenancy/users.js';
import { routerProbe, UptimeChecker } from '../src/modules/uptime/uptime.worker.js';
import { DEFAULT_UPTIME_RULES } from '../src/modules/uptime/policy.js';
import { RepoRoot } from '../test/factories/git-server.js';
import { ensureBaseImage } from '../test/factories/images.js';
import { startWebhookReceiver } from '../test/factories/webhook-receiver.js';
import { assertWrk, freePort, machine, num, pollUntil, purgeByLabels, quantile, round, sleep, startServe, summary, tinyApp, wrk, writeResult, type Serve } from './support.js';

const parts = process.argv.slice(2).filter((a) => ['scale', 'detection', 'status'].includes(a));
const run = (part: string) => parts.length === 0 || parts.includes(part);

/** A router stand-in in its own process: 200 for every host. */
async function fakeRouter(): Promise<{ port: number; child: ChildProcess }> {
  const port = await freePort();
  const child = spawn(process.execPath, ['-e', `require('http').createServer((q, r) => r.end('ok')).listen(${String(port)}, '127.0.0.1')`], { stdio: 'ignore' });
  await pollUntil('the fake router', () => new Promise<boolean>((res) => request({ host: '127.0.0.1', port, path: '/' }, (r) => { r.resume(); res(true); }).on('error', () => { res(false); }).end()), 50, 10_000);
  return { port, child };
}

async function scale(): Promise<Record<string, unknown>> {
  const monitors = num('monitors', 1000);
  const seconds = num('seconds', 60);
  const dir = mkdtempSync(join(tmpdir(), 'slipway-uptime-'));
  const router = await fakeRouter();
  try {
    const store = await createStore(join(dir, 'slipway.db'));
    const deps: Sources & { store: typeof store; secrets: SecretBox } = {
      store,
      clock: systemClock,
      random: systemRandom,
      ids: idSource(systemClock, systemRandom),
      secrets: new SecretBox(randomBytes(32), systemRandom),
    };
    const user = await findOrCreateUser(deps, store.repos, 'owner@bench.example');
    const ws = await store.transaction((tx) => createWorkspace(deps, { currency: 'USD', credit: 0 }, tx, { name: 'ws', slug: 'ws', ownerId: user.id, countedFor: null }));
    const now = iso(new Date());
    for (let i = 0; i < monitors; i++) {
      const id = deps.ids.id();
      const slug = `app-${i.toString()}`;
      await store.db.insertInto('projects').values({ id, workspace_id: ws.id, name: slug, slug, port: 8080, replicas: 1, cpu: '0.1', ram: '0.125', status: 'running', created_at: now, updated_at: now, host_label: `${slug}-ws` }).execute();
      await store.db.insertInto('deployments').values({ id: deps.ids.id(), project_id: id, status: 'running', source: 'git', image: 'x', branch: null, commit_sha: null, commit_message: null, error: null, created_at: now, started_at: now, finished_at: null, lease_owner: null, lease_until: null }).execute();
      await store.db.insertInto('uptime_monitors').values({ project_id: id, enabled: 1, check_interval_sec: 10, check_path: '/', chat_webhook_url: null, notify_email: null, status: 'unknown', last_checked_at: null, last_response_ms: null, updated_at: now, failures: 0, successes: 0, incident_id: null, last_error: null }).execute();
    }
    // Slipway's checker
    const late: number[] = [];
    const quiet = { info: () => undefined, warn: () => undefined, error: (o: object, m: string) => { console.error(m, o); } };
    const checker = new UptimeChecker({ store: deps.store, clock: deps.clock, random: deps.random, ids: deps.ids, appsDomain: 'apps.bench', probe: routerProbe('127.0.0.1', router.port), onQueued: () => undefined, log: quiet, rules: DEFAULT_UPTIME_RULES, tickMs: 100, concurrency: 50, observe: (_p, ms) => late.push(ms) });
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    checker.start();
    await sleep(seconds * 1000);
    await checker.stop();
    const wall = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    const rss = process.memoryUsage().rss;
    const checks = late.length;
    // the first check of each monitor is spread over its first interval on purpose: only later ones count
    const steady = late.slice(monitors);
    await store.close();

    // reference: one timer per monitor, the same GET, nothing stored
    const refLate: number[] = [];
    const timers: NodeJS.Timeout[] = [];
    const rcpu0 = process.cpuUsage();
    const r0 = performance.now();
    for (let i = 0; i < monitors; i++) {
      const offset = (i / monitors) * 10_000;
      let due = r0 + offset;
      const fire = () => {
        refLate.push(performance.now() - due);
        due += 10_000;
        request({ host: '127.0.0.1', port: router.port, path: '/', headers: { host: `app-${i.toString()}-ws.apps.bench` }, agent: false }, (r) => r.resume()).on('error', () => undefined).end();
      };
      timers.push(setTimeout(function tick() { fire(); timers[i] = setTimeout(tick, due - performance.now()); }, offset));
    }
    await sleep(seconds * 1000);
    for (const t of timers) clearTimeout(t);
    const rwall = performance.now() - r0;
    const rcpu = process.cpuUsage(rcpu0);
    return {
      monitors,
      seconds,
      slipway: {
        checks,
        checks_per_second: round(checks / (wall / 1000), 1),
        lateness_ms: summary(steady.length === 0 ? [0] : steady, 0),
        lateness_p99_ms: round(quantile(steady.length === 0 ? [0] : steady, 0.99), 0),
        cpu_percent_of_one_core: round(((cpu.user + cpu.system) / 1000 / wall) * 100, 1),
        rss_mib: round(rss / 1024 ** 2, 1),
      },
      reference_timers: {
        checks: refLate.length,
        lateness_p99_ms: round(quantile(refLate, 0.99), 0),
        cpu_percent_of_one_core: round(((rcpu.user + rcpu.system) / 1000 / rwall) * 100, 1),
      },
      goal: { lateness_p99_ms: 1000 },
      met: quantile(steady.length === 0 ? [0] : steady, 0.99) <= 1000,
    };
  } finally {
    router.child.kill();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function deploy(s: Serve, name: string): Promise<{ id: string; host: string }> {
  const made = await s.request<{ id: string; default_domain: string }>('POST', '/api/workspaces/default/projects', { name, port: 8080, cpu: '0.1', ram: '0.125' });
  if (made.data === undefined) throw new Error(made.text);
  await s.request('POST', `/api/workspaces/default/projects/${name}/git`, { repo_full_name: 'bench/watched' });
  const d = await s.request<{ id: string }>('POST', `/api/workspaces/default/projects/${name}/deploy`);
  await pollUntil(`${name} running`, async () => (await s.request<{ status: string }>('GET', `/api/workspaces/default/projects/${name}/deployments/${d.data?.id ?? ''}`)).data?.status === 'running', 250, 180_000);
  return { id: made.data.id, host: made.data.default_domain };
}

async function withServe<T>(fn: (s: Serve, root: RepoRoot, docker: Docker) => Promise<T>, extra: string[] = []): Promise<T> {
  const base = await ensureBaseImage();
  const root = await RepoRoot.create();
  const repo = await root.repo('bench/watched');
  await repo.commit('v1', { ...tinyApp(base, 'watched'), 'health.html': 'ok\n', Dockerfile: `FROM ${base}\nCOPY index.html /www/index.html\nCOPY health.html /www/health.html\nCMD ["sh", "-c", "exec httpd -f -p $PORT -h /www"]\n` });
  const s = await startServe(`file://${root.dir}`, extra);
  try {
    return await fn(s, root, new Docker());
  } finally {
    await s.stop();
    await purgeByLabels([`slipway.instance=${s.instanceId()}`]);
    await root.dispose();
  }
}

async function detection(): Promise<Record<string, unknown>> {
  const trials = num('trials', 3);
  const receiver = await startWebhookReceiver();
  try {
    return await withServe(async (s, _root, docker) => {
      const app = await deploy(s, 'watched');
      await s.request('PUT', '/api/workspaces/default/projects/watched/uptime', { enabled: true, check_interval_sec: 10, check_path: '/health.html', chat_webhook_url: `${receiver.url}/ops` });
      const exec = async (cmd: string[]) => {
        const [c] = await docker.listContainers({ filters: { label: [`slipway.project=${app.id}`] } });
        if (c === undefined) throw new Error('no container');
        const e = await docker.getContainer(c.Id).exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true });
        const stream = await e.start({});
        stream.resume();
        await new Promise((res) => stream.on('end', res));
      };
      const get = () => new Promise<number>((res) => request({ host: '127.0.0.1', port: s.routerPort, path: '/health.html', headers: { host: app.host }, agent: false, timeout: 10_000 }, (r) => { r.resume(); res(r.statusCode ?? 0); }).on('error', () => { res(0); }).end());
      await pollUntil('up', async () => (await s.request<{ status: string }>('GET', '/api/workspaces/default/projects/watched/uptime')).data?.status === 'up', 500, 60_000);
      const slipway: number[] = [];
      const reference: number[] = [];
      for (let t = 0; t < trials; t++) {
        // the reference poller: every 10 s, down after two consecutive failures
        const ref: { failures: number; failedAt: number; down: number | null } = { failures: 0, failedAt: 0, down: null };
        const poll = setInterval(() => {
          void get().then((status) => {
            ref.failures = status >= 400 || status === 0 ? ref.failures + 1 : 0;
            if (ref.failures >= 2 && ref.down === null && ref.failedAt > 0) ref.down = performance.now() - ref.failedAt;
          });
        }, 10_000);
        await sleep(2_000 + Math.random() * 10_000);
        const before = receiver.delivered().length;
        const failedAt = performance.now();
        ref.failedAt = failedAt;
        await exec(['rm', '/www/health.html']);
        await pollUntil('the down webhook', () => Promise.resolve(receiver.delivered().length > before), 50, 120_000);
        slipway.push((performance.now() - failedAt) / 1000);
        await pollUntil('the reference poller', () => Promise.resolve(ref.down !== null), 200, 120_000);
        reference.push((ref.down ?? 0) / 1000);
        clearInterval(poll);
        await exec(['sh', '-c', 'echo ok > /www/health.html']);
        await pollUntil('up again', async () => (await s.request<{ status: string }>('GET', '/api/workspaces/default/projects/watched/uptime')).data?.status === 'up', 500, 60_000);
      }
      return { interval_s: 10, trials, slipway_s: summary(slipway, 1), reference_two_failures_s: summary(reference, 1), goal_s: 12, met: Math.max(...slipway) <= 12.5 };
    }, ['--notify-allow-private', 'yes']);
  } finally {
    await receiver.close();
  }
}

async function status(): Promise<Record<string, unknown>> {
  await assertWrk();
  // the key's rate limit (20/s by default) would answer most of wrk's requests with 429
  return withServe(async (s) => {
    const apps = [];
    for (let i = 0; i < 10; i++) apps.push(await deploy(s, `p${i.toString()}`));
    // the sampler's first two passes (10 s apart) give every container a recent sample
    await sleep(22_000);
    const one = await s.request<{ pods: { total: number } }>('GET', '/api/workspaces/default/projects/p0/status');
    if (one.status !== 200 || one.data?.pods.total !== 1) throw new Error(`the status view: ${one.text}`);
    const measured = await wrk('status', `${s.api}/api/workspaces/default/projects/p0/status`, { threads: 2, connections: 8, duration: 10, headers: { 'x-api-key': s.key } });
    // reference: the same pods from the engine's stats API
    const runtime = new DockerRuntime({ docker: new Docker() });
    const project = (await s.request<{ id: string }>('GET', '/api/workspaces/default/projects/p0')).data?.id ?? '';
    const deployment = (await s.request<{ deployments: { id: string }[] }>('GET', '/api/workspaces/default/projects/p0/deployments')).data?.deployments[0]?.id ?? '';
    const times: number[] = [];
    for (let i = 0; i < 20; i++) {
      const t0 = performance.now();
      const pods = await podsOf(runtime, instanceLabels(s.instanceId()), project, deployment);
      times.push(performance.now() - t0);
      if (pods.length !== 1) throw new Error(`the reference found ${pods.length.toString()} pods`);
    }
    if (measured.non2xx > 0) throw new Error(`${measured.non2xx.toString()} answers were not 2xx`);
    return { projects: 10, slipway: measured, reference_engine_stats_ms: summary(times, 0), reference_p99_ms: round(quantile(times, 0.99), 0), goal_p99_ms: 20, met: measured.latencyP99Ms <= 20 };
  }, ['--rate-limit', '1000000', '--rate-limit-burst', '1000000']);
}

const report: Record<string, unknown> = { date: new Date().toISOString(), machine: await machine() };
if (run('scale')) report['scale'] = await scale();
if (run('detection')) report['detection'] = await detection();
if (run('status')) report['status'] = await status();
console.log(JSON.stringify(report, null, 2));
console.log(`wrote ${writeResult('monitoring', report as { date: string })}`);
