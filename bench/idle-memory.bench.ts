// The control plane's idle memory with ten running projects (goal: RSS <= 120 MiB).
//
//   npx tsx bench/idle-memory.bench.ts [--projects 10] [--idle 20] [--samples 10]
//
// `bin/slipway serve` (temp data dir, free loopback ports, --router nginx, Docker Engine, SQLite)
// is sampled right after it answers (no projects), then after --idle seconds without projects;
// then --projects projects (the tiny busybox app from a file:// repository, one replica each) are
// deployed through the API; once all are running and answer through the router, it idles for
// --idle seconds and VmRSS of the slipway process is read from /proc/<pid>/status --samples times,
// one second apart. nginx (master + workers) is reported separately, as the sum of their RSS and
// of their PSS (shared pages counted once).
//
// Writes bench/results/idle-memory-<date>.json and prints a summary. Not part of the test suite.
import { rmSync } from 'node:fs';
import { loadavg } from 'node:os';
import Docker from 'dockerode';
import { RepoRoot } from '../test/factories/git-server.js';
import { ensureBaseImage, RUN_LABEL } from '../test/factories/images.js';
import { machine, mib, pollUntil, procStatusKiB, pssKiB, purgeByLabels, round, sleep, startServe, summary, tinyApp, viaRouter, writeResult, type Serve } from './support.js';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  const v = i === -1 ? undefined : Number(process.argv[i + 1]);
  return v === undefined || !Number.isFinite(v) ? fallback : v;
}

const PROJECTS = arg('projects', 10);
const IDLE_S = arg('idle', 20);
const SAMPLES = arg('samples', 10);
const RUN = `bench${Date.now().toString(36)}`;
const GOAL_MIB = 120;

interface Sample {
  slipway_rss_mib: number;
  slipway_pss_mib: number;
  nginx_rss_mib: number;
  nginx_pss_mib: number;
  nginx_processes: number;
}

function sample(s: Serve): Sample {
  const nginx = s.nginxPids();
  const sum = (f: (pid: number) => number) => nginx.reduce((a, pid) => a + (Number.isNaN(f(pid)) ? 0 : f(pid)), 0);
  return {
    slipway_rss_mib: mib(procStatusKiB(s.pid, 'VmRSS')),
    slipway_pss_mib: mib(pssKiB(s.pid)),
    nginx_rss_mib: mib(sum((pid) => procStatusKiB(pid, 'VmRSS'))),
    nginx_pss_mib: mib(sum(pssKiB)),
    nginx_processes: nginx.length,
  };
}

async function samples(s: Serve, n: number): Promise<Sample[]> {
  const out: Sample[] = [];
  for (let i = 0; i < n; i++) {
    if (i > 0) await sleep(1000);
    out.push(sample(s));
  }
  return out;
}

function describe(xs: Sample[]) {
  return {
    slipway_rss_mib: summary(xs.map((x) => x.slipway_rss_mib)),
    slipway_pss_mib: summary(xs.map((x) => x.slipway_pss_mib)),
    nginx_rss_mib: summary(xs.map((x) => x.nginx_rss_mib)),
    nginx_pss_mib: summary(xs.map((x) => x.nginx_pss_mib)),
    nginx_processes: xs[0]?.nginx_processes ?? 0,
  };
}

async function main(): Promise<void> {
  const loadAtStart = loadavg().map((x) => round(x, 2));
  const docker = new Docker();
  const base = await ensureBaseImage(docker, RUN);
  const root = await RepoRoot.create();
  let serve: Serve | undefined;
  let instance: string | undefined;
  let workspaceId: string | undefined;

  let cleaned: Promise<void> | undefined;
  const cleanup = (): Promise<void> => {
    cleaned ??= (async () => {
      if (serve !== undefined) {
        try {
          instance ??= serve.instanceId();
        } catch {
          // the store never got that far
        }
        await serve.stop();
      }
      const labels = [`${RUN_LABEL}=${RUN}`];
      if (instance !== undefined) labels.unshift(`slipway.instance=${instance}`);
      // the workspace network carries the workspace's id, not the instance's
      if (workspaceId !== undefined) labels.push(`slipway.workspace=${workspaceId}`);
      const purged = await purgeByLabels(labels);
      console.log(`cleaned up: ${String(purged.containers)} containers, ${String(purged.networks)} networks, ${String(purged.images)} images`);
      if (serve !== undefined) rmSync(serve.dataDir, { recursive: true, force: true });
      await root.dispose();
    })();
    return cleaned;
  };
  process.once('SIGINT', () => {
    void cleanup().finally(() => process.exit(130));
  });

  try {
    const repo = await root.repo('bench/tiny');
    const page = `tiny app ${RUN}`;
    await repo.commit('tiny app', tinyApp(base, page));

    serve = await startServe(root.fileUrl);
    const s = serve;
    instance = s.instanceId();
    const atStart = sample(s);
    console.log(`slipway serve pid ${String(s.pid)}: right after start ${String(atStart.slipway_rss_mib)} MiB RSS; nginx ${String(atStart.nginx_rss_mib)} MiB in ${String(atStart.nginx_processes)} processes`);
    await sleep(IDLE_S * 1000);
    const empty = await samples(s, SAMPLES);
    console.log(`idle, no projects: slipway median ${String(summary(empty.map((x) => x.slipway_rss_mib)).median)} MiB RSS`);

    workspaceId = (await s.request<{ id: string }>('GET', '/api/workspaces/default')).data?.id;
    const names = Array.from({ length: PROJECTS }, (_, i) => `tiny-${String(i)}`);
    for (const name of names) {
      const p = await s.request('POST', '/api/workspaces/default/projects', { name, port: 8080, replicas: 1, cpu: '0.25', ram: '0.125' });
      if (p.status !== 201) throw new Error(`creating ${name} failed: ${p.text}`);
      const g = await s.request('POST', `/api/workspaces/default/projects/${name}/git`, { repo_full_name: 'bench/tiny' });
      if (g.status !== 201) throw new Error(`connecting ${name} failed: ${g.text}`);
    }
    const t0 = performance.now();
    const ids = new Map<string, string>();
    for (const name of names) {
      const d = await s.request<{ id: string }>('POST', `/api/workspaces/default/projects/${name}/deploy`);
      if (d.status !== 202 || d.data === undefined) throw new Error(`deploying ${name} answered ${String(d.status)}: ${d.text}`);
      ids.set(name, d.data.id);
    }
    const pending = new Set(names);
    await pollUntil(`${String(PROJECTS)} deployments to run`, async () => {
      for (const name of [...pending]) {
        const d = await s.request<{ status: string; error: string | null }>('GET', `/api/workspaces/default/projects/${name}/deployments/${ids.get(name) ?? ''}`);
        const status = d.data?.status ?? '?';
        if (status === 'running') pending.delete(name);
        else if (!['queued', 'building', 'deploying'].includes(status)) throw new Error(`${name}: deployment ${status}: ${d.data?.error ?? d.text}`);
      }
      return pending.size === 0;
    }, 1000, 600_000);
    const allRunning = performance.now() - t0;
    await pollUntil('every project to answer through the router', async () => {
      for (const name of names) {
        const r = await viaRouter(s.routerPort, `${name}-default.${s.appsDomain}`);
        if (r.status !== 200 || r.body !== `${page}\n`) return false;
      }
      return true;
    }, 500, 60_000);
    const allAnswering = performance.now() - t0;
    console.log(`${String(PROJECTS)} projects running after ${(allRunning / 1000).toFixed(1)} s, all answering through the router after ${(allAnswering / 1000).toFixed(1)} s; idling ${String(IDLE_S)} s`);
    const peakKiB = procStatusKiB(s.pid, 'VmHWM');

    await sleep(IDLE_S * 1000);
    const loaded = await samples(s, SAMPLES);
    const containers = (await docker.listContainers({ filters: { label: [`slipway.instance=${instance}`] } })).length;
    const rss = describe(loaded);
    const met = rss.slipway_rss_mib.median <= GOAL_MIB && rss.slipway_rss_mib.max <= GOAL_MIB;

    const report = {
      date: new Date().toISOString(),
      machine: await machine(),
      load_average: { at_start: loadAtStart, at_end: loadavg().map((x) => round(x, 2)) },
      settings: {
        projects: PROJECTS,
        replicas_each: 1,
        idle_s: IDLE_S,
        samples: SAMPLES,
        sample_every_ms: 1000,
        slipway: 'bin/slipway serve --engine docker --router nginx --git-base-url file://… (SQLite, log level info, defaults otherwise)',
        app: 'FROM local busybox (docker import of busybox-static); COPY index.html; CMD busybox httpd -p $PORT; cpu 0.25, ram 0.125',
        source: '/proc/<pid>/status VmRSS (VmHWM for the peak), /proc/<pid>/smaps_rollup Pss',
      },
      results: {
        right_after_start: atStart,
        idle_no_projects: describe(empty),
        idle_with_projects: rss,
        slipway_peak_rss_mib_while_deploying: mib(peakKiB),
        running_containers: containers,
        all_running_after_s: round(allRunning / 1000, 1),
        all_answering_after_s: round(allAnswering / 1000, 1),
      },
      samples: { idle_no_projects: empty, idle_with_projects: loaded },
      goal: { slipway_rss_mib: `<= ${String(GOAL_MIB)}`, met },
    };
    const file = writeResult('idle-memory', report);
    console.log(`idle with ${String(PROJECTS)} projects: slipway RSS median ${String(rss.slipway_rss_mib.median)} MiB, max ${String(rss.slipway_rss_mib.max)} MiB (peak while deploying ${String(mib(peakKiB))} MiB); nginx ${String(rss.nginx_rss_mib.median)} MiB RSS / ${String(rss.nginx_pss_mib.median)} MiB PSS in ${String(rss.nginx_processes)} processes`);
    console.log(`goal <= ${String(GOAL_MIB)} MiB: ${met ? 'met' : 'not met'}`);
    console.log(`written to ${file}`);
  } finally {
    await cleanup();
  }
}

await main();
