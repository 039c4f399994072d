// The control plane's idle memory with every capability running (goal: RSS <= 120 MiB).
//
//   npx tsx bench/idle-memory.bench.ts [--projects 10] [--databases postgresql,mysql,redis] [--monitors 10]
//                                      [--idle 20] [--samples 10] [--projects-only]
//
// `bin/slipway serve` (temp data dir, free loopback ports, --router nginx, Docker Engine, SQLite)
// is sampled right after it answers (no projects), then after --idle seconds without projects;
// then --projects projects (the tiny busybox app from a file:// repository, one replica each) are
// deployed through the API; once all are running and answer through the router, it idles for
// --idle seconds and VmRSS of the slipway process is read from /proc/<pid>/status --samples times,
// one second apart. nginx (master + workers) is reported separately, as the sum of their RSS and
// of their PSS (shared pages counted once).
// Then (unless --projects-only) every capability is turned on: --databases databases (the local
// images, scripts/ensure-db-images.sh), an uptime monitor every 10 s on --monitors projects; log
// collection and metering run on the leader anyway. It idles and is sampled again ("in use"), then
// restarted on the same data dir and sampled after --idle seconds ("after a restart"): both must
// stay within the goal. After each, the V8 heap and external memory from the operator's /metrics,
// and a heap snapshot (SIGUSR2) summed by constructor: what holds the memory.
//
// Writes bench/results/idle-memory-<date>.json and prints a summary. Not part of the test suite.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadavg } from 'node:os';
import Docker from 'dockerode';
import { RepoRoot } from '../test/factories/git-server.js';
import { ensureBaseImage, ensureDatabaseImages, RUN_LABEL } from '../test/factories/images.js';
import { machine, mib, pollUntil, quantile, procStatusKiB, pssKiB, purgeByLabels, round, sleep, startServe, summary, tinyApp, viaRouter, writeResult, type Serve } from './support.js';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  const v = i === -1 ? undefined : Number(process.argv[i + 1]);
  return v === undefined || !Number.isFinite(v) ? fallback : v;
}

const PROJECTS = arg('projects', 10);
const IDLE_S = arg('idle', 20);
const SAMPLES = arg('samples', 10);
const RUN = `bench${Date.now().toString(36)}`;
const PROJECTS_ONLY = process.argv.includes('--projects-only');
const DATABASES = (() => {
  const i = process.argv.indexOf('--databases');
  return (i === -1 ? 'postgresql,mysql,redis' : (process.argv[i + 1] ?? '')).split(',').filter((t) => t !== '');
})();
const MONITORS = arg('monitors', 10);
/** rounds of status, health and metrics reads (each round: every project and every database once) */
const READ_ROUNDS = arg('read-rounds', 20);
const READ_P99_GOAL_MS = 20;
/** the reads go one at a time, faster than the API's per-key default rate limit allows */
const SERVE_ARGS = ['--rate-limit', '100000', '--rate-limit-burst', '100000'];
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

/** The process's memory as V8 sees it, from the operator's /metrics (prom-client's default metrics). */
async function v8Memory(s: Serve): Promise<Record<string, number> | null> {
  const url = s.metricsUrl();
  if (url === undefined) return null;
  const text = await fetch(`${url}/metrics`).then((r) => r.text(), () => '');
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const m = /^slipway_(process_resident_memory_bytes|nodejs_heap_size_used_bytes|nodejs_heap_size_total_bytes|nodejs_external_memory_bytes|nodejs_heap_space_size_(?:used|total)_bytes\{space="(new|old|code|large_object)"\}) (\S+)$/.exec(line);
    if (m === null) continue;
    const name = m[2] === undefined ? (m[1] ?? '').replace(/_bytes$/, '') : `heap_space_${(m[1] ?? '').includes('_used_') ? 'used' : 'committed'}_${m[2]}`;
    out[`${name}_mib`] = mib(Number(m[3]) / 1024);
  }
  return out;
}

/**
 * A heap snapshot of the server (node's --heapsnapshot-signal), its objects' own sizes summed by
 * constructor (objects, closures) or by kind (code, strings, arrays…): the largest \`top\`, in MiB.
 */
async function heapHolders(s: Serve, dir: string, top = 15): Promise<{ total_mib: number; largest: { what: string; mib: number; count: number }[] } | null> {
  const before = new Set(readdirSync(dir));
  process.kill(s.pid, 'SIGUSR2');
  let file: string | undefined;
  // written synchronously by the server, then renamed into place: wait for a complete file
  await pollUntil('the heap snapshot', () => {
    file = readdirSync(dir).find((f) => !before.has(f) && f.endsWith('.heapsnapshot'));
    if (file === undefined) return Promise.resolve(false);
    try {
      JSON.parse(readFileSync(join(dir, file), 'utf8'));
      return Promise.resolve(true);
    } catch {
      return Promise.resolve(false);
    }
  }, 500, 120_000).catch(() => undefined);
  if (file === undefined) return null;
  const snap = JSON.parse(readFileSync(join(dir, file), 'utf8')) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
    nodes: number[];
    strings: string[];
  };
  rmSync(join(dir, file), { force: true });
  const fields = snap.snapshot.meta.node_fields;
  const types = snap.snapshot.meta.node_types[0];
  const [ti, ni, si] = [fields.indexOf('type'), fields.indexOf('name'), fields.indexOf('self_size')];
  const by = new Map<string, { bytes: number; count: number }>();
  let total = 0;
  for (let i = 0; i < snap.nodes.length; i += fields.length) {
    const type = types[snap.nodes[i + ti] ?? 0] ?? '?';
    const size = snap.nodes[i + si] ?? 0;
    total += size;
    const what = type === 'object' || type === 'closure' ? `${type} ${snap.strings[snap.nodes[i + ni] ?? 0] ?? '?'}` : type;
    const e = by.get(what) ?? { bytes: 0, count: 0 };
    e.bytes += size;
    e.count += 1;
    by.set(what, e);
  }
  const largest = [...by.entries()].sort((a, b) => b[1].bytes - a[1].bytes).slice(0, top).map(([what, e]) => ({ what, mib: mib(e.bytes / 1024), count: e.count }));
  return { total_mib: mib(total / 1024), largest };
}

/**
 * The latency of the reads a dashboard polls, one request at a time through the API: each
 * project's status view, its metrics and its uptime monitor, and each database (with its health).
 */
async function readLatencies(s: Serve, projects: readonly string[], databases: readonly string[], rounds: number): Promise<Record<string, ReturnType<typeof summary> & { p99: number; n: number }>> {
  const paths: [string, string][] = [
    ...projects.flatMap((p): [string, string][] => [
      ['project_status', `/api/workspaces/default/projects/${p}/status`],
      ['project_metrics', `/api/workspaces/default/projects/${p}/metrics`],
      ['project_uptime', `/api/workspaces/default/projects/${p}/uptime`],
    ]),
    ...databases.map((d): [string, string] => ['database_health', `/api/workspaces/default/databases/${d}`]),
  ];
  const times = new Map<string, number[]>();
  for (let r = 0; r < rounds; r++) {
    for (const [kind, path] of paths) {
      const t0 = performance.now();
      const res = await s.request('GET', path);
      const ms = performance.now() - t0;
      if (res.status !== 200) throw new Error(`GET ${path} answered ${String(res.status)}: ${res.text}`);
      // the first round warms each route's code up
      if (r > 0) times.set(kind, [...(times.get(kind) ?? []), ms]);
    }
  }
  return Object.fromEntries([...times.entries()].map(([kind, xs]) => [kind, { ...summary(xs), p99: round(quantile(xs, 0.99), 1), n: xs.length }]));
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
      console.log(`cleaned up: ${String(purged.containers)} containers, ${String(purged.networks)} networks, ${String(purged.images)} images, ${String(purged.volumes)} volumes`);
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

    await ensureDatabaseImages(docker);
    const snapshots = mkdtempSync(join(tmpdir(), 'slipway-heap-'));
    const nodeArgs = ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${snapshots}`];
    serve = await startServe(root.fileUrl, SERVE_ARGS, { nodeArgs });
    let s = serve;
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
    let peakKiB = procStatusKiB(s.pid, 'VmHWM');

    await sleep(IDLE_S * 1000);
    const loaded = await samples(s, SAMPLES);
    const rss = describe(loaded);

    // every capability on: databases, uptime monitors (log collection and metering run anyway)
    const everything: { in_use: Sample[]; after_restart: Sample[]; v8_in_use: Record<string, number> | null; v8_after_restart: Record<string, number> | null; heap_in_use: Awaited<ReturnType<typeof heapHolders>>; heap_after_restart: Awaited<ReturnType<typeof heapHolders>>; databases_running_after_s: number; reads: Awaited<ReturnType<typeof readLatencies>> } | null = PROJECTS_ONLY ? null : await (async () => {
      const t1 = performance.now();
      const dbs: string[] = [];
      for (const type of DATABASES) {
        const made = await s.request<{ slug: string }>('POST', '/api/workspaces/default/databases', { name: `bench-${type}`, type });
        if ((made.status !== 201 && made.status !== 202) || made.data === undefined) throw new Error(`creating a ${type} database failed: ${made.text}`);
        dbs.push(made.data.slug);
      }
      await pollUntil(`${String(dbs.length)} databases to run`, async () => {
        const list = await s.request<{ slug: string; status: string; error: string | null }[]>('GET', '/api/workspaces/default/databases');
        const mine = (list.data ?? []).filter((d) => dbs.includes(d.slug));
        const failed = mine.find((d) => d.status === 'failed');
        if (failed !== undefined) throw new Error(`database ${failed.slug} failed: ${failed.error ?? ''}`);
        return mine.length === dbs.length && mine.every((d) => d.status === 'running');
      }, 1000, 300_000);
      const databasesRunning = performance.now() - t1;
      for (const name of names.slice(0, MONITORS)) {
        const u = await s.request('PUT', `/api/workspaces/default/projects/${name}/uptime`, { enabled: true, check_interval_sec: 10 });
        if (u.status !== 200) throw new Error(`the uptime monitor of ${name} answered ${String(u.status)}: ${u.text}`);
      }
      console.log(`${String(dbs.length)} databases running after ${(databasesRunning / 1000).toFixed(1)} s; ${String(Math.min(MONITORS, names.length))} uptime monitors every 10 s; idling ${String(IDLE_S)} s`);
      await sleep(IDLE_S * 1000);
      const inUse = await samples(s, SAMPLES);
      const v8InUse = await v8Memory(s);
      const reads = await readLatencies(s, names, dbs, READ_ROUNDS);
      console.log(`reads (p99 ms, goal <= ${String(READ_P99_GOAL_MS)}): ${Object.entries(reads).map(([k, v]) => `${k} ${String(v.p99)}`).join(', ')}`);
      // before the heap snapshot, whose writing takes memory of its own
      peakKiB = Math.max(peakKiB, procStatusKiB(s.pid, 'VmHWM'));
      const heapInUse = await heapHolders(s, snapshots);
      console.log(`everything on: slipway RSS median ${String(summary(inUse.map((x) => x.slipway_rss_mib)).median)} MiB; V8 ${JSON.stringify(v8InUse)}`);

      // a restart with all of it: what a long-running installation holds after an upgrade or a reboot
      const again = { dataDir: s.dataDir, api: s.api, routerPort: s.routerPort };
      await s.stop();
      serve = await startServe(root.fileUrl, SERVE_ARGS, { nodeArgs, again });
      s = serve;
      await sleep(IDLE_S * 1000);
      const afterRestart = await samples(s, SAMPLES);
      const v8AfterRestart = await v8Memory(s);
      const heapAfterRestart = await heapHolders(s, snapshots);
      console.log(`after a restart and ${String(IDLE_S)} s: slipway RSS median ${String(summary(afterRestart.map((x) => x.slipway_rss_mib)).median)} MiB; V8 ${JSON.stringify(v8AfterRestart)}`);
      return { in_use: inUse, after_restart: afterRestart, v8_in_use: v8InUse, v8_after_restart: v8AfterRestart, heap_in_use: heapInUse, heap_after_restart: heapAfterRestart, databases_running_after_s: round(databasesRunning / 1000, 1), reads };
    })();
    rmSync(snapshots, { recursive: true, force: true });
    const containers = (await docker.listContainers({ filters: { label: [`slipway.instance=${instance}`] } })).length;
    const judged = everything === null ? [rss] : [describe(everything.in_use), describe(everything.after_restart)];
    const met = judged.every((d) => d.slipway_rss_mib.median <= GOAL_MIB && d.slipway_rss_mib.max <= GOAL_MIB);

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
        everything_on:
          everything === null
            ? null
            : {
                databases: DATABASES,
                uptime_monitors: Math.min(MONITORS, names.length),
                monitor_interval_s: 10,
                databases_running_after_s: everything.databases_running_after_s,
                in_use: describe(everything.in_use),
                after_restart: describe(everything.after_restart),
                v8_in_use: everything.v8_in_use,
                v8_after_restart: everything.v8_after_restart,
                heap_holders_in_use: everything.heap_in_use,
                reads_ms: everything.reads,
                reads_goal: { p99_ms: `<= ${String(READ_P99_GOAL_MS)}`, met: Object.values(everything.reads).every((r) => r.p99 <= READ_P99_GOAL_MS) },
                heap_holders_after_restart: everything.heap_after_restart,
              },
      },
      samples: { idle_no_projects: empty, idle_with_projects: loaded, ...(everything === null ? {} : { everything_in_use: everything.in_use, everything_after_restart: everything.after_restart }) },
      goal: { slipway_rss_mib: `<= ${String(GOAL_MIB)}`, judged_on: everything === null ? 'idle with projects' : 'everything on, in use and after a restart (median and max of each)', met },
    };
    const file = writeResult('idle-memory', report);
    console.log(`idle with ${String(PROJECTS)} projects: slipway RSS median ${String(rss.slipway_rss_mib.median)} MiB, max ${String(rss.slipway_rss_mib.max)} MiB (peak while deploying ${String(mib(peakKiB))} MiB); nginx ${String(rss.nginx_rss_mib.median)} MiB RSS / ${String(rss.nginx_pss_mib.median)} MiB PSS in ${String(rss.nginx_processes)} processes`);
    if (everything !== null) {
      for (const [when, d] of [['in use', describe(everything.in_use)], ['after a restart', describe(everything.after_restart)]] as const) {
        console.log(`everything on, ${when}: slipway RSS median ${String(d.slipway_rss_mib.median)} MiB, max ${String(d.slipway_rss_mib.max)} MiB`);
      }
      console.log(`largest heap holders after the restart: ${(everything.heap_after_restart?.largest ?? []).slice(0, 8).map((h) => `${h.what} ${String(h.mib)} MiB`).join(', ')}`);
    }
    console.log(`goal <= ${String(GOAL_MIB)} MiB: ${met ? 'met' : 'not met'}`);
    console.log(`written to ${file}`);
  } finally {
    await cleanup();
  }
}

await main();
