import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { instanceId } from '../../src/store/db.js';
import { startDeployFixture, viaRouter, type DeployFixture, type TestEngine } from '../factories/engine.js';
import type { TestRepo } from '../factories/git-server.js';
import type { TestServer, TestWorkspace } from '../factories/harness.js';
import { ensureBaseImage } from '../factories/images.js';
import type { StoreKind } from '../factories/stores.js';
import { settledDeployment } from '../factories/deployments.js';
import type { Deployment } from '../../src/modules/deployments/deployments.schema.js';

const app = (base: string, text: string) => ({
  Dockerfile: `FROM ${base}\nCOPY index.html /www/index.html\nCMD ["sh", "-c", "exec httpd -f -p $PORT -h /www"]\n`,
  'index.html': `${text}\n`,
});

/** The whole deploy story on one store; each store runs it from its own test file, in parallel. */
export function deploySuite(kind: StoreKind): void {
describe(`deploying from Git on Docker Engine through the router, store ${kind}`, () => {
  let s: TestServer;
  let w: TestWorkspace;
  let fx: DeployFixture;
  let repo: TestRepo;
  let engine: TestEngine;
  let routerPort: number;
  let base: string;
  const project = `/api/workspaces/WS/projects/hello`;
  const path = (p: string) => p.replace('WS', w.slug);
  const host = () => `hello-${w.slug}.apps.test`;

  const settled = (id: string) => settledDeployment<Deployment>(s, w.member.key, path(project), id, 120_000);

  async function deploy(): Promise<Deployment> {
    const r = await s.request<Deployment>('POST', path(`${project}/deploy`), { key: w.member.key });
    expect(r.status, r.text).toBe(202);
    expect(r.body.data?.status).toBe('queued');
    return settled(r.body.data?.id ?? '');
  }

  beforeAll(async () => {
    base = await ensureBaseImage();
    // Custom domains are trusted at once here (--domain-verification off); test/e2e/domain-routing.test.ts routes them after DNS proves them.
    fx = await startDeployFixture(kind, 'acme/hello', { server: { platform: { domains: { verification: 'off', dnsServers: [], publicAddresses: [], maxPerProject: 20 } } } });
    ({ s, w, repo, engine } = fx);
    await repo.commit('first version', app(base, 'hello v1'));
    routerPort = engine.routerPort;
    await s.request('POST', path('/api/workspaces/WS/projects'), { key: w.member.key, body: { name: 'hello', port: 8080, cpu: '0.25', ram: '0.125' } });
    await s.request('POST', path(`${project}/git`), { key: w.member.key, body: { repo_full_name: 'acme/hello' } });
  }, 120_000);

  afterAll(async () => {
    await fx.close();
  }, 60_000);

  it('answers 503 for a project that runs nothing', async () => {
    expect((await viaRouter(routerPort, host())).status).toBe(503);
  });

  it('builds the branch, runs it and serves it through the router', async () => {
    const d = await deploy();
    expect(d, d.error ?? '').toMatchObject({ status: 'running', source: 'git', error: null });
    expect(d.commit_sha).toMatch(/^[0-9a-f]{40}$/);
    expect(await viaRouter(routerPort, host())).toEqual({ status: 200, body: 'hello v1\n' });
    const p = await s.request<{ status: string }>('GET', path(project), { key: w.member.key });
    expect(p.body.data?.status).toBe('running');
  });

  it('replays the build log over the WebSocket, ending with [END]', async () => {
    const list = await s.request<{ deployments: Deployment[] }>('GET', path(`${project}/deployments`), { key: w.member.key });
    const id = list.body.data?.deployments[0]?.id ?? '';
    const frames = await new Promise<string[]>((resolve, reject) => {
      const got: string[] = [];
      const ws = new WebSocket(`${s.url.replace('http', 'ws')}${path(`${project}/deployments/${id}/logs`)}`, { headers: { 'x-api-key': w.member.key } });
      ws.on('message', (m: Buffer) => got.push(m.toString('utf8')));
      ws.on('close', () => {
        resolve(got);
      });
      ws.on('error', reject);
    });
    expect(frames[0]).toMatch(/^Fetching acme\/hello@main from http:\/\/127\.0\.0\.1:\d+\.$/);
    expect(frames.some((f) => /^Step 1\/\d : FROM /.test(f))).toBe(true);
    expect(frames.at(-2)).toBe(`Deployment is live at ${host()}.`);
    expect(frames.at(-1)).toBe('[END]');
  });

  it('shows real pods and resource use in the status view', async () => {
    const r = await s.request<{ pods: { ready: number; total: number; items: { name: string; status: string; restarts: number; age: string }[] }; resources: { cpu: { used: string; limit: string }; memory: { used: string; limit: string } }; latestDeployment: { status: string } }>('GET', path(`${project}/status`), { key: w.member.key });
    expect(r.body.data?.latestDeployment.status).toBe('running');
    expect(r.body.data?.pods).toMatchObject({ ready: 1, total: 1, items: [{ status: 'Running', restarts: 0, age: expect.stringMatching(/^\d+[smhd]$/) }] });
    expect(r.body.data?.resources.cpu).toEqual({ used: expect.stringMatching(/^\d+m$/), limit: '250m' });
    expect(r.body.data?.resources.memory).toEqual({ used: expect.stringMatching(/^\d+Mi$/), limit: '128Mi' });
    expect(Number(r.body.data?.resources.memory.used.replace('Mi', ''))).toBeLessThanOrEqual(128);
  });

  it('deploys a new commit with zero downtime: every request during the switch answers 200', async () => {
    await repo.commit('second version', app(base, 'hello v2'));
    const r = await s.request<Deployment>('POST', path(`${project}/deploy`), { key: w.member.key });
    const statuses: number[] = [];
    const bodies = new Set<string>();
    const state = { done: false };
    const waiting = settled(r.body.data?.id ?? '').then((d) => {
      state.done = true;
      return d;
    });
    while (!state.done) {
      const res = await viaRouter(routerPort, host());
      statuses.push(res.status);
      bodies.add(res.body);
    }
    const d = await waiting;
    for (let i = 0; i < 20; i++) {
      const res = await viaRouter(routerPort, host());
      statuses.push(res.status);
      bodies.add(res.body);
    }
    expect(d.status).toBe('running');
    expect(statuses.length).toBeGreaterThan(20);
    expect(statuses.filter((x) => x !== 200)).toEqual([]);
    expect(bodies).toEqual(new Set(['hello v1\n', 'hello v2\n']));
    expect((await viaRouter(routerPort, host())).body).toBe('hello v2\n');
    const list = await s.request<{ deployments: Deployment[] }>('GET', path(`${project}/deployments`), { key: w.member.key });
    expect(list.body.data?.deployments.map((x) => x.status)).toEqual(['running', 'superseded']);
  });

  it('rolls back to the first deployment\u2019s image without a build', async () => {
    const list = await s.request<{ deployments: Deployment[] }>('GET', path(`${project}/deployments`), { key: w.member.key });
    const first = list.body.data?.deployments.at(-1);
    const r = await s.request<Deployment>('POST', path(`${project}/deployments/${first?.id ?? ''}/rollback`), { key: w.member.key });
    expect(r.status).toBe(202);
    const d = await settled(r.body.data?.id ?? '');
    expect(d).toMatchObject({ status: 'running', source: 'rollback', image: first?.image });
    expect((await viaRouter(routerPort, host())).body).toBe('hello v1\n');
  });

  it('fails a broken Dockerfile with the build error and keeps the old deployment serving', async () => {
    await repo.commit('broken', { Dockerfile: `FROM ${base}\nRUN exit 3\n` });
    const d = await deploy();
    expect(d.status).toBe('failed');
    // the classic builder: "returned a non-zero code: 3"; BuildKit: "exit code: 3"
    expect(d.error).toMatch(/^The build failed: .*(returned a non-zero code|exit code): 3/);
    expect((await viaRouter(routerPort, host())).body).toBe('hello v1\n');
    const p = await s.request<{ status: string }>('GET', path(project), { key: w.member.key });
    expect(p.body.data?.status).toBe('running');
  });

  it('scales to two replicas at once with a rolling redeploy, and serves custom domains', async () => {
    const r = await s.request('PUT', path(project), { key: w.member.key, body: { replicas: 2 } });
    expect(r.status).toBe(200);
    const list = await s.request<{ deployments: Deployment[] }>('GET', path(`${project}/deployments`), { key: w.member.key });
    const redeploy = list.body.data?.deployments[0];
    expect(redeploy?.source).toBe('redeploy');
    expect((await settled(redeploy?.id ?? '')).status).toBe('running');
    const status = await s.request<{ pods: { ready: number; total: number } }>('GET', path(`${project}/status`), { key: w.member.key });
    expect(status.body.data?.pods).toMatchObject({ ready: 2, total: 2 });
    expect((await viaRouter(routerPort, host())).body).toBe('hello v1\n');
    const added = await s.request('POST', path(`${project}/domains`), { key: w.member.key, body: { domain: 'www.hello.example' } });
    expect(added.status).toBe(201);
    expect(await viaRouter(routerPort, 'www.hello.example')).toEqual({ status: 200, body: 'hello v1\n' });
  });

  it('restarts the containers one at a time while serving, and redeploys the image without a build', async () => {
    type Status = { pods: { ready: number; total: number; items: { name: string }[] } };
    const before = await s.request<Status>('GET', path(`${project}/status`), { key: w.member.key });
    const restart = await s.request<{ slug: string }>('POST', path(`${project}/restart`), { key: w.member.key });
    expect(restart.status).toBe(202);
    expect(restart.body.data?.slug).toBe('hello');
    // The replacement runs in the background; every replica gets a fresh container.
    const names = (x: typeof before) => new Set(x.body.data?.pods.items.map((p) => p.name));
    let after = before;
    for (let i = 0; i < 300; i++) {
      after = await s.request<Status>('GET', path(`${project}/status`), { key: w.member.key });
      if ([...names(after)].every((n) => !names(before).has(n)) && after.body.data?.pods.ready === 2) break;
      expect((await viaRouter(routerPort, host())).status).toBe(200);
      await new Promise((res) => setTimeout(res, 100));
    }
    expect(after.body.data?.pods).toMatchObject({ ready: 2, total: 2 });
    expect([...names(after)].filter((n) => names(before).has(n))).toEqual([]);
    expect((await viaRouter(routerPort, host())).status).toBe(200);

    const r = await s.request<Deployment>('POST', path(`${project}/redeploy`), { key: w.member.key });
    expect(r.status).toBe(202);
    const d = await settled(r.body.data?.id ?? '');
    expect(d).toMatchObject({ status: 'running', source: 'redeploy' });
    expect((await viaRouter(routerPort, host())).body).toBe('hello v1\n');
  });

  it('replaces a container removed behind its back', async () => {
    const docker = new Docker();
    const mine = await docker.listContainers({ filters: { label: [`slipway.instance=${await instanceId(s.store)}`] } });
    const victim = mine[0];
    expect(victim).toBeDefined();
    await docker.getContainer(victim?.Id ?? '').remove({ force: true });
    for (let i = 0; i < 100; i++) {
      const st = await s.request<{ pods: { ready: number; total: number } }>('GET', path(`${project}/status`), { key: w.member.key });
      if (st.body.data?.pods.ready === 2) break;
      await new Promise((res) => setTimeout(res, 300));
    }
    const st = await s.request<{ pods: { ready: number; total: number } }>('GET', path(`${project}/status`), { key: w.member.key });
    expect(st.body.data?.pods).toMatchObject({ ready: 2, total: 2 });
    expect((await viaRouter(routerPort, host())).status).toBe(200);
  });

  it('counts restarts of a crashing app and shows the project crashed when it loops', async () => {
    await s.request('POST', path('/api/workspaces/WS/projects'), { key: w.member.key, body: { name: 'crashy', port: 8080, cpu: '0.25', ram: '0.125' } });
    const crashRoot = await fx.root.repo('acme/crashy');
    await crashRoot.commit('serves, then dies', {
      Dockerfile: `FROM ${base}\nCOPY index.html /www/index.html\nCMD ["sh", "-c", "httpd -p $PORT -h /www; sleep 2; exit 1"]\n`,
      'index.html': 'short-lived\n',
    });
    const crashy = '/api/workspaces/WS/projects/crashy';
    await s.request('POST', path(`${crashy}/git`), { key: w.member.key, body: { repo_full_name: 'acme/crashy' } });
    const queued = await s.request<Deployment>('POST', path(`${crashy}/deploy`), { key: w.member.key });
    let status = '';
    for (let i = 0; i < 200 && status !== 'crashed'; i++) {
      await new Promise((res) => setTimeout(res, 300));
      status = (await s.request<{ status: string }>('GET', path(crashy), { key: w.member.key })).body.data?.status ?? '';
    }
    expect(status).toBe('crashed');
    const d = await s.request<Deployment>('GET', path(`${crashy}/deployments/${queued.body.data?.id ?? ''}`), { key: w.member.key });
    expect(d.body.data?.status).toBe('running');
    const view = await s.request<{ pods: { items: { restarts: number }[] } }>('GET', path(`${crashy}/status`), { key: w.member.key });
    expect(view.body.data?.pods.items[0]?.restarts).toBeGreaterThanOrEqual(3);
    const running = (await s.request<{ deployments: Deployment[] }>('GET', path(`${crashy}/deployments`), { key: w.member.key })).body.data?.deployments[0];
    await s.request('POST', path(`${crashy}/deployments/${running?.id ?? ''}/stop`), { key: w.member.key });
  });

  it('stops the running deployment: the router answers 503 and the project is stopped', async () => {
    const list = await s.request<{ deployments: Deployment[] }>('GET', path(`${project}/deployments`), { key: w.member.key });
    const running = list.body.data?.deployments.find((x) => x.status === 'running');
    const r = await s.request<Deployment>('POST', path(`${project}/deployments/${running?.id ?? ''}/stop`), { key: w.member.key });
    expect(r.status, r.text).toBe(200);
    expect(r.body.data?.status).toBe('stopped');
    expect((await viaRouter(routerPort, host())).status).toBe(503);
    const p = await s.request<{ status: string }>('GET', path(project), { key: w.member.key });
    expect(p.body.data?.status).toBe('stopped');
  });

  it('refuses paid work with 402 when the wallet is empty', async () => {
    await s.store.db.updateTable('wallets').set({ balance_micros: 0 }).where('workspace_id', '=', w.id).execute();
    try {
      const r = await s.request('POST', path(`${project}/deploy`), { key: w.member.key });
      expect(r).toMatchObject({ status: 402, body: { success: false } });
    } finally {
      await s.store.db.updateTable('wallets').set({ balance_micros: 5_000_000 }).where('workspace_id', '=', w.id).execute();
    }
  });
});
}
