// Issue 15 item 5 on the real engine: the resource sampler reads a deployed app's CPU, memory and
// network from the kernel's cgroup and proc files (Slipway shares the host with the engine
// here), the status view answers from its memory instead of asking the engine, the history is
// served by GET …/metrics, and /metrics carries the per-project gauges. Uses Docker Engine: run
// under `flock /tmp/slipway-docker.lock`.
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readCgroups } from '../../src/modules/metrics/cgroups.js';
import { formatBytes } from '../../src/modules/projects/resources.js';
import { ResourceSampler } from '../../src/modules/metrics/metrics.worker.js';
import { instanceLabels } from '../../src/modules/deployments/engine/containers.js';
import type { Deployment } from '../../src/modules/deployments/deployments.schema.js';
import { instanceId } from '../../src/store/db.js';
import { startTestEngine, viaRouter, type TestEngine } from '../factories/engine.js';
import { RepoRoot, startGitServer, type GitServer } from '../factories/git-server.js';
import { makeWorkspace, startTestServer, type TestServer, type TestWorkspace } from '../factories/harness.js';
import { ensureBaseImage } from '../factories/images.js';
import { deployAndSettle } from '../factories/deployments.js';

const quiet = { info: () => undefined, warn: (obj: object, msg: string) => { console.error(msg, obj); } };

describe('resource metrics on the engine', () => {
  let s: TestServer;
  let w: TestWorkspace;
  let root: RepoRoot;
  let gitServer: GitServer;
  let engine: TestEngine;
  let sampler: ResourceSampler;
  const docker = new Docker();
  const api = () => `/api/workspaces/${w.slug}/projects/gauged`;

  beforeAll(async () => {
    const base = await ensureBaseImage();
    s = await startTestServer('sqlite');
    w = await makeWorkspace(s);
    root = await RepoRoot.create();
    gitServer = await startGitServer({ root: root.dir });
    let sampled: ResourceSampler | null = null;
    engine = await startTestEngine(s, { gitBaseUrl: gitServer.url, tune: { usageOf: (id) => sampled?.usageOf(id) ?? null } });
    sampler = new ResourceSampler({ runtime: engine.runtime, metrics: s.store.repos.metrics, clock: s.clock, labels: instanceLabels(await instanceId(s.store)), log: quiet, everyMs: 1_000 });
    sampled = sampler;
    const repo = await root.repo('acme/gauged');
    await repo.commit('v1', { Dockerfile: `FROM ${base}\nCOPY index.html /www/index.html\nCMD ["sh", "-c", "exec httpd -f -p $PORT -h /www"]\n`, 'index.html': `${'gauged '.repeat(2000)}\n` });
  }, 120_000);
  afterAll(async () => {
    await sampler.stop();
    await engine.close();
    await s.close();
    await gitServer.close();
    await root.dispose();
  }, 120_000);

  it('samples the app from its cgroup, answers the status view from memory, and serves the history and the gauges', async () => {
    const made = await s.request<{ id: string; default_domain: string }>('POST', `/api/workspaces/${w.slug}/projects`, { key: w.member.key, body: { name: 'gauged', port: 8080, cpu: '0.25', ram: '0.125', replicas: 2 } });
    const project = made.body.data;
    if (project === undefined) throw new Error(made.text);
    await s.request('POST', `${api()}/git`, { key: w.member.key, body: { repo_full_name: 'acme/gauged' } });
    const d = await deployAndSettle<Deployment>(s, w.member.key, api());
    expect(d.status, d.error ?? '').toBe('running');

    // this machine shares the host with the engine: the kernel's counters are readable
    const containers = await docker.listContainers({ filters: { label: [`slipway.project=${project.id}`] } });
    expect(containers).toHaveLength(2);
    const first = containers[0];
    if (first === undefined) throw new Error('no container');
    const info = await docker.getContainer(first.Id).inspect();
    const counters = await readCgroups(first.Id, info.State.Pid);
    expect(counters).not.toBeNull();
    expect(counters?.memoryLimitBytes).toBe(128 * 1024 ** 2);
    expect(counters?.cpuNs).toBeGreaterThan(0);

    // two samples around some traffic through the router
    await sampler.pass();
    for (let i = 0; i < 20; i++) expect((await viaRouter(engine.routerPort, project.default_domain)).status).toBe(200);
    await new Promise((res) => setTimeout(res, 1_100));
    await sampler.pass();
    const usage = sampler.usageOf(first.Id);
    expect(usage?.memoryBytes).toBeGreaterThan(0);
    expect(usage?.memoryLimitBytes).toBe(128 * 1024 ** 2);

    // the status view answers what the sampler saw, not a fresh engine sample
    const status = await s.request<{ pods: { items: unknown[] }; resources: { memory: { used: string } } }>('GET', `${api()}/status`, { key: w.member.key });
    expect(status.status).toBe(200);
    expect(status.body.data?.pods.items).toHaveLength(2);
    const sampled = containers.reduce((sum, c) => sum + (sampler.usageOf(c.Id)?.memoryBytes ?? NaN), 0);
    expect(status.body.data?.resources.memory.used).toBe(formatBytes(sampled));

    // the minute's row: both replicas together, the bytes the traffic moved
    const m = await s.request<{ step_sec: number; memory_limit_bytes: number | null; points: { cpu_millicores: number; memory_bytes: number; rx_bytes: number; tx_bytes: number }[] }>('GET', `${api()}/metrics?period=1h`, { key: w.member.key });
    expect(m.status, m.text).toBe(200);
    expect(m.body.data?.step_sec).toBe(60);
    expect(m.body.data?.memory_limit_bytes).toBe(2 * 128 * 1024 ** 2);
    const point = m.body.data?.points.at(-1);
    expect(point?.memory_bytes).toBeGreaterThan(0);
    // 20 pages of about 14 KB went out of the containers
    expect(point?.tx_bytes).toBeGreaterThan(20 * 14_000);
    expect(point?.rx_bytes).toBeGreaterThan(0);
    for (const period of ['24h', '7d']) expect((await s.request('GET', `${api()}/metrics?period=${period}`, { key: w.member.key })).status).toBe(200);
    expect((await s.request('GET', `${api()}/metrics?period=1y`, { key: w.member.key })).status).toBe(400);

    // Prometheus: the project's gauges
    const text = await (await fetch(s.metricsUrl)).text();
    const labels = `{workspace="${w.slug}",project="gauged"}`;
    expect(text).toMatch(new RegExp(`slipway_project_memory_bytes${labels.replace(/[{}]/g, '\\$&')} [1-9]`));
    expect(text).toContain(`slipway_project_cpu_millicores${labels}`);
  }, 300_000);
});
