// Runtime logs end to end, through a real `bin/slipway serve` (Docker Engine, the collector, the
// log store, the API), on SQLite and on PostgreSQL. One part per command:
//
//   npx tsx bench/logs.bench.ts ingest [--containers 4] [--lines 50000]   (make bench-log-ingest)
//   npx tsx bench/logs.bench.ts query  [--lines 1000000] [--projects 20] (make bench-log-query)
//   npx tsx bench/logs.bench.ts live   [--lines 1000]                     (make bench-log-live)
//   common: [--stores sqlite,postgres] [--pg-url postgres://…]
//
// ingest: busybox containers print numbered lines as fast as they can; lines/s from the first
//   line stored to the last (GET …/logs/usage), with the serve process's CPU (% of one core) and
//   peak RSS meanwhile; reference: `docker logs` of the same containers to /dev/null.
// query: 1,000,000 lines across 20 projects written through the store's driver, then the newest
//   100 of one project and `q` searches through GET …/logs (wrk, 4 connections); reference: the
//   same query on the driver in this process.
// live: a container prints a line every 10 ms; from the engine's time stamp of each line to its
//   frame on a WebSocket client of …/live-logs.
// Writes bench/results/logs-<part>-<date>.json. Not part of the test suite.
import { execFile } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { promisify } from 'node:util';
import Docker from 'dockerode';
import WebSocket from 'ws';
import type { LogLine, LogStore } from '../src/domain/logs.js';
import { PostgresLogStore } from '../src/store/logs/postgres.log-store.js';
import { SqliteLogStore } from '../src/store/logs/sqlite.log-store.js';
import { DockerRuntime } from '../src/adapters/runtime/docker/docker.runtime.js';
import { createStore, instanceId } from '../src/store/db.js';
import { ensureBaseImage } from '../test/factories/images.js';
import { arg, assertWrk, cpuTimes, freshPostgres, machine, num, procStatusKiB, quantile, round, sleep, startServe, wrk, writeResult, type Serve } from './support.js';

const execFileP = promisify(execFile);
type StoreKind = 'sqlite' | 'postgres';


const GOALS = {
  ingest: { sqlite: 50_000, postgres: 20_000 },
  queryP99Ms: 20,
  liveP99Ms: 100,
} as const;

// ---------------------------------------------------------------------------------------------


interface Installation {
  serve: Serve;
  slug: string;
  workspaceId: string;
  instance: string;
  databaseUrl: string;
  close(): Promise<void>;
}

/** `slipway serve` on a fresh store of `kind`, with the collector's and the API's rate limits out of the way (wrk measures the path, not the 429). */
async function install(kind: StoreKind, pgUrl: string): Promise<Installation> {
  const pgDb = kind === 'postgres' ? await freshPostgres(pgUrl) : undefined;
  const serve = await startServe('file:///nonexistent', ['--log-rate-limit', '1000000', '--rate-limit', '1000000', '--rate-limit-burst', '1000000', '--log-level', 'warn', ...(pgDb === undefined ? [] : ['--database-url', pgDb.url])]);
  const databaseUrl = pgDb?.url ?? join(serve.dataDir, 'slipway.db');
  const store = await createStore(databaseUrl);
  const instance = await instanceId(store);
  await store.close();
  const ws = await serve.request<{ id: string; slug: string }[]>('GET', '/api/workspaces');
  const first = ws.data?.[0];
  if (first === undefined) throw new Error(`no workspace: ${ws.text}`);
  return {
    serve,
    slug: first.slug,
    workspaceId: first.id,
    instance,
    databaseUrl,
    close: async () => {
      await new DockerRuntime({ docker: new Docker() }).purge({ labels: { 'slipway.instance': instance } });
      await serve.stop();
      await pgDb?.drop();
    },
  };
}

async function project(i: Installation, name: string): Promise<{ id: string; slug: string }> {
  const r = await i.serve.request<{ id: string; slug: string }>('POST', `/api/workspaces/${i.slug}/projects`, { name });
  if (r.data === undefined) throw new Error(`project not created: ${r.text}`);
  return r.data;
}

/**
 * Containers labelled as deploys label them, so that the collector of `serve` takes them, each
 * owned by a deployment row that is `building` under a long lease (the reconciler removes
 * containers that no serving or in-progress deployment owns).
 */
async function containers(i: Installation, p: { id: string }, count: number, script: string): Promise<string[]> {
  const runtime = new DockerRuntime({ docker: new Docker() });
  const labels = { 'slipway.instance': i.instance };
  const network = `lb-${randomBytes(3).toString('hex')}`;
  await runtime.ensureNetwork({ name: network, workspace: i.workspaceId, labels });
  const image = await ensureBaseImage();
  const store = await createStore(i.databaseUrl);
  const now = new Date();
  const deployments = Array.from({ length: count }, () => randomUUID());
  try {
    for (const id of deployments) {
      await store.repos.deployQueue.insert({
        id, project_id: p.id, status: 'building', source: 'git', image: null, branch: null, commit_sha: null, commit_message: null, error: null,
        created_at: now.toISOString(), started_at: now.toISOString(), finished_at: null, lease_owner: 'bench', lease_until: new Date(now.getTime() + 3_600_000).toISOString(),
        attempts: 1, restart_requested_at: null, require_head: 0,
      });
    }
  } finally {
    await store.close();
  }
  const ids: string[] = [];
  for (let n = 0; n < count; n++) {
    const c = await runtime.run({
      name: `${network}-${n.toString()}`,
      image,
      command: ['sh', '-c', script],
      env: {},
      owner: { workspace: i.workspaceId, project: p.id, deployment: deployments[n] ?? '' },
      labels,
      cpu: 1,
      memoryBytes: 128 * 1024 * 1024,
      network,
      restart: { kind: 'never' },
      init: true,
    });
    ids.push(c.id);
  }
  return ids;
}

/** utime + stime of a process, in seconds. */
function cpuSeconds(pid: number): number {
  const t = cpuTimes(pid);
  return t.user + t.system;
}

// ---------------------------------------------------------------------------------------------

async function ingest(kind: StoreKind, pgUrl: string): Promise<Record<string, unknown>> {
  const count = num('containers', 4);
  const lines = num('lines', 50_000);
  const total = count * lines;
  const i = await install(kind, pgUrl);
  try {
    const p = await project(i, 'ingest');
    const usagePath = `/api/workspaces/${i.slug}/projects/${p.slug}/logs/usage`;
    const usage = async () => (await i.serve.request<{ lines: number; dropped_lines: number }>('GET', usagePath)).data ?? { lines: 0, dropped_lines: 0 };
    let cpu0 = 0;
    let peakRss = 0;
    const sampler = setInterval(() => { peakRss = Math.max(peakRss, procStatusKiB(i.serve.pid, 'VmRSS')); }, 100);
    // ~110-byte lines, numbered
    const ids = await containers(i, p, count, `seq 1 ${lines.toString()} | awk '{print "2026-11-26T10:00:00Z INFO [req-" $1 "] GET /api/v1/orders/" $1 " 200 12ms ua=\\"Mozilla/5.0 (X11; Linux x86_64)\\""}'; sleep 3600`);
    let first = 0;
    let last = { lines: 0, dropped_lines: 0 };
    const deadline = Date.now() + num('wait', 300) * 1000;
    // every line is either stored or dropped (the writer's buffer was full) and counted
    while (Date.now() < deadline) {
      last = await usage();
      if (first === 0 && last.lines > 0) {
        // CPU over the same window as the rate: from the first stored line to the last
        first = performance.now();
        cpu0 = cpuSeconds(i.serve.pid);
      }
      if (last.lines + last.dropped_lines >= total) break;
      await sleep(20);
    }
    const seconds = (performance.now() - first) / 1000;
    clearInterval(sampler);
    const cpu = cpuSeconds(i.serve.pid) - cpu0;
    // the reference: the engine's own reader of the same output
    const t0 = performance.now();
    await Promise.all(ids.map((id) => execFileP('sh', ['-c', `docker logs ${id} > /dev/null 2>&1`], { maxBuffer: 1024 })));
    const refSeconds = (performance.now() - t0) / 1000;
    const rate = Math.round(last.lines / seconds);
    const result = {
      store: kind,
      containers: count,
      lines: total,
      stored_lines: last.lines,
      dropped_lines: last.dropped_lines,
      slipway_lines_per_sec: rate,
      control_plane_cpu_pct_of_one_core: round((cpu / seconds) * 100, 0),
      control_plane_peak_rss_mib: round(peakRss / 1024, 1),
      reference_docker_logs_lines_per_sec: Math.round(total / refSeconds),
      goal_lines_per_sec: GOALS.ingest[kind],
      met: rate >= GOALS.ingest[kind] && last.lines === total,
    };
    console.log(JSON.stringify(result));
    return result;
  } finally {
    await i.close();
  }
}

// ---------------------------------------------------------------------------------------------

const NEEDLE = 'needle-7f3a';

async function query(kind: StoreKind, pgUrl: string): Promise<Record<string, unknown>> {
  const total = num('lines', 1_000_000);
  const projects = num('projects', 20);
  const i = await install(kind, pgUrl);
  let logs: LogStore | undefined;
  let store: Awaited<ReturnType<typeof createStore>> | undefined;
  try {
    const ps: { id: string; slug: string }[] = [];
    for (let n = 0; n < projects; n++) ps.push(await project(i, `q${n.toString()}`));
    if (kind === 'sqlite') {
      logs = new SqliteLogStore(join(i.serve.dataDir, 'logs.db'));
    } else {
      store = await createStore(i.databaseUrl);
      logs = new PostgresLogStore(store.db);
    }
    const T0 = Date.parse('2026-11-26T00:00:00.000Z');
    const seedStart = performance.now();
    for (let at = 0; at < total; at += 5000) {
      const batch: LogLine[] = [];
      for (let k = at; k < Math.min(total, at + 5000); k++) {
        const p = ps[k % projects];
        if (p === undefined) continue;
        const needle = k >= projects * 2 && k < projects * 3 ? ` ${NEEDLE}` : '';
        batch.push({
          projectId: p.id, workspaceId: i.workspaceId, deploymentId: 'seeded', pod: `web-${(k % 2).toString()}`, stream: k % 10 === 0 ? 'stderr' : 'stdout',
          timestamp: T0 + Math.floor(k / 10),
          message: `${new Date(T0 + Math.floor(k / 10)).toISOString()} INFO [req-${k.toString(16)}] GET /api/v1/orders/${k.toString()} 200 12ms ua="Mozilla/5.0 (X11; Linux x86_64)"${needle}`,
        });
      }
      await logs.append({ lines: batch });
    }
    const seedSeconds = (performance.now() - seedStart) / 1000;
    const target = ps[0];
    if (target === undefined) throw new Error('no project');
    const path = `/api/workspaces/${i.slug}/projects/${target.slug}/logs`;
    const w = { duration: num('duration', 10), connections: 4, threads: 1, headers: { 'X-API-Key': i.serve.key } };
    const newest = await wrk('newest 100', `${i.serve.api}${path}`, w);
    const found = await wrk('q (present)', `${i.serve.api}${path}?q=${NEEDLE}`, w);
    const absent = await wrk('q (absent)', `${i.serve.api}${path}?q=absent-zz9`, w);
    // the reference: the same newest-100 query on the driver, one at a time
    const times: number[] = [];
    for (let n = 0; n < 300; n++) {
      const t = performance.now();
      await logs.query(target.id, { limit: 100 });
      times.push(performance.now() - t);
    }
    const result = {
      store: kind,
      lines: total,
      projects,
      seed_lines_per_sec: Math.round(total / seedSeconds),
      newest_100: { requests_per_sec: newest.requestsPerSec, p50_ms: newest.latencyP50Ms, p99_ms: newest.latencyP99Ms, non2xx: newest.non2xx },
      q_present: { requests_per_sec: found.requestsPerSec, p50_ms: found.latencyP50Ms, p99_ms: found.latencyP99Ms },
      q_absent: { requests_per_sec: absent.requestsPerSec, p50_ms: absent.latencyP50Ms, p99_ms: absent.latencyP99Ms },
      reference_driver_newest_100: { p50_ms: round(quantile(times, 0.5), 2), p99_ms: round(quantile(times, 0.99), 2) },
      goal_p99_ms: GOALS.queryP99Ms,
      met: newest.latencyP99Ms <= GOALS.queryP99Ms && newest.non2xx === 0,
    };
    console.log(JSON.stringify(result));
    return result;
  } finally {
    await logs?.close();
    await store?.close();
    await i.close();
  }
}

// ---------------------------------------------------------------------------------------------

async function live(kind: StoreKind, pgUrl: string): Promise<Record<string, unknown>> {
  const lines = num('lines', 1000);
  const i = await install(kind, pgUrl);
  try {
    const p = await project(i, 'live');
    const latencies: number[] = [];
    const ws = new WebSocket(`${i.serve.api.replace('http', 'ws')}/api/workspaces/${i.slug}/projects/${p.slug}/live-logs?tail=0&format=json`, { headers: { 'x-api-key': i.serve.key } });
    ws.on('message', (m: Buffer) => {
      const at = Date.now();
      const text = m.toString('utf8');
      if (text.startsWith('[')) {
        console.error(`live-logs said: ${text}`);
        return;
      }
      const frame = JSON.parse(text) as { timestamp: string; message: string };
      if (frame.message.startsWith('live ')) latencies.push(at - Date.parse(frame.timestamp));
    });
    await new Promise<void>((resolve, reject) => { ws.once('open', () => { resolve(); }); ws.once('error', reject); });
    const [box] = await containers(i, p, 1, `i=0; while [ $i -lt ${lines.toString()} ]; do i=$((i+1)); echo live $i; sleep 0.01; done; sleep 3600`);
    const deadline = Date.now() + num('wait', 120) * 1000;
    while (latencies.length < lines && Date.now() < deadline) await sleep(50);
    const usage = await i.serve.request<{ lines: number }>('GET', `/api/workspaces/${i.slug}/projects/${p.slug}/logs/usage`);
    const printed = (await execFileP('sh', ['-c', `docker logs ${box ?? ''} 2>&1 | wc -l`])).stdout.trim();
    console.error(`printed ${printed}, stored ${String(usage.data?.lines)} lines; the client got ${latencies.length.toString()}; socket state ${ws.readyState.toString()}`);
    ws.close();
    const p99 = quantile(latencies, 0.99);
    const result = {
      store: kind,
      lines: latencies.length,
      p50_ms: quantile(latencies, 0.5),
      p99_ms: p99,
      max_ms: Math.max(...latencies),
      goal_p99_ms: GOALS.liveP99Ms,
      met: latencies.length === lines && p99 <= GOALS.liveP99Ms,
    };
    console.log(JSON.stringify(result));
    return result;
  } finally {
    await i.close();
  }
}

// ---------------------------------------------------------------------------------------------

const PARTS = { ingest, query, live } as const;

async function main(): Promise<void> {
  const part = process.argv[2] as keyof typeof PARTS | undefined;
  if (part === undefined || !(part in PARTS)) throw new Error(`usage: logs.bench.ts ${Object.keys(PARTS).join('|')} [options]`);
  if (part === 'query') await assertWrk();
  const pgUrl = arg('pg-url', process.env['SLIPWAY_TEST_PG_URL'] ?? 'postgres://postgres@127.0.0.1:5432/postgres');
  const stores = arg('stores', 'sqlite,postgres').split(',') as StoreKind[];
  const results: Record<string, unknown>[] = [];
  for (const kind of stores) results.push(await PARTS[part](kind, pgUrl));
  const report = { date: new Date().toISOString(), machine: await machine(), part, results };
  console.log(`results: ${writeResult(`logs-${part}`, report)}`);
}

await main();
