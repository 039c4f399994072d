// `--upstream-mode network` (docs/decisions.md#upstream-addressing): app containers publish nothing,
// and the router and the health check reach them on their workspace-network address. On Linux
// the host reaches bridge networks, so the test process (and its router) stands in for a Slipway
// running in a container; joining Slipway's own container to the networks is covered by the
// runtime conformance suite (connect). Traffic goes only to the project's own containers.
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDeployFixture, viaRouter, workspaceNetwork, type DeployFixture, type TestEngine } from '../factories/engine.js';
import type { TestRepo } from '../factories/git-server.js';
import type { TestServer, TestWorkspace } from '../factories/harness.js';
import { deployAndSettle } from '../factories/deployments.js';
import type { Deployment } from '../../src/modules/deployments/deployments.schema.js';

describe('routing to containers on their workspace-network address (--upstream-mode network)', () => {
  let s: TestServer;
  let w: TestWorkspace;
  let fx: DeployFixture;
  let repo: TestRepo;
  let engine: TestEngine;
  const project = () => `/api/workspaces/${w.slug}/projects/net`;
  const host = () => `net-${w.slug}.apps.test`;

  const deploy = () => deployAndSettle<Deployment>(s, w.member.key, project(), 120_000);

  beforeAll(async () => {
    fx = await startDeployFixture('sqlite', 'acme/net', { engine: { tune: { upstreamMode: 'network' } } });
    ({ s, w, repo, engine } = fx);
    const page = (text: string) => ({
      Dockerfile: `FROM ${engine.base}\nCOPY index.html /www/index.html\nCMD ["sh", "-c", "exec httpd -f -p $PORT -h /www"]\n`,
      'index.html': `${text}\n`,
    });
    await repo.commit('v1', page('on the network v1'));
    expect((await s.request('POST', `/api/workspaces/${w.slug}/projects`, { key: w.member.key, body: { name: 'net', port: 8080, cpu: '0.25', ram: '0.125', replicas: 2 } })).status).toBe(201);
    expect((await s.request('POST', `${project()}/git`, { key: w.member.key, body: { repo_full_name: 'acme/net' } })).status).toBe(201);
  }, 120_000);

  afterAll(async () => {
    await fx.close();
  }, 60_000);

  it('deploys with nothing published, and the router serves the app on the container addresses', async () => {
    const d = await deploy();
    expect(d, d.error ?? '').toMatchObject({ status: 'running', error: null });
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push(await viaRouter(engine.routerPort, host()));
    expect(answers).toEqual(answers.map(() => ({ status: 200, body: 'on the network v1\n' })));

    // Two replicas on the workspace network, neither with a port published on the host.
    const docker = new Docker();
    const containers = await docker.listContainers({ filters: { label: [`slipway.deployment=${d.id}`] } });
    expect(containers).toHaveLength(2);
    for (const c of containers) {
      const inspected = await docker.getContainer(c.Id).inspect();
      expect(Object.keys(inspected.NetworkSettings.Networks)).toEqual([await workspaceNetwork(s, w.slug)]);
      expect(Object.values(inspected.NetworkSettings.Ports as Record<string, unknown[] | null>).flatMap((bindings) => bindings ?? [])).toEqual([]);
    }
  });

  it('keeps routing by address across a redeploy and after a replica is replaced', async () => {
    await repo.commit('v2', { 'index.html': 'on the network v2\n' });
    const d = await deploy();
    expect(d, d.error ?? '').toMatchObject({ status: 'running', error: null });
    expect(await viaRouter(engine.routerPort, host())).toEqual({ status: 200, body: 'on the network v2\n' });

    // A replica removed behind Slipway's back: the reconciler starts another, the routes follow.
    const docker = new Docker();
    const [victim] = await docker.listContainers({ filters: { label: [`slipway.deployment=${d.id}`] } });
    await docker.getContainer(victim?.Id ?? '').remove({ force: true });
    let ids: string[] = [];
    for (let i = 0; i < 100 && (ids.length < 2 || ids.includes(victim?.Id ?? '')); i++) {
      await new Promise((res) => setTimeout(res, 200));
      ids = (await docker.listContainers({ filters: { label: [`slipway.deployment=${d.id}`] } })).map((c) => c.Id);
    }
    expect(ids).toHaveLength(2);
    expect(ids).not.toContain(victim?.Id);
    // every request answers, whichever replica the router picks
    for (let i = 0; i < 6; i++) expect(await viaRouter(engine.routerPort, host())).toEqual({ status: 200, body: 'on the network v2\n' });
  });
});
