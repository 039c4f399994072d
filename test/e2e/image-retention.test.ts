// Image retention (`--keep-images`): the reconciler removes the images no deployment needs any
// more, so builds do not fill the engine's disk; rollbacks within the kept ones still work. The
// same sweep removes the networks of deleted workspaces.
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDeployFixture, viaRouter, workspaceNetwork, type DeployFixture, type TestEngine } from '../factories/engine.js';
import type { TestRepo } from '../factories/git-server.js';
import type { TestServer, TestWorkspace } from '../factories/harness.js';
import { waitFor } from '../factories/process.js';
import { settledDeployment } from '../factories/deployments.js';
import type { Deployment } from '../../src/modules/deployments/deployments.schema.js';

describe('keeping the images of the newest deployments only', () => {
  let s: TestServer;
  let w: TestWorkspace;
  let fx: DeployFixture;
  let repo: TestRepo;
  let engine: TestEngine;
  const docker = new Docker();
  const project = () => `/api/workspaces/${w.slug}/projects/kept`;
  const host = () => `kept-${w.slug}.apps.test`;
  const page = (text: string) => ({ 'index.html': `${text}\n` });

  const settle = (id: string) => settledDeployment<Deployment>(s, w.member.key, project(), id, 120_000);

  async function deploy(): Promise<Deployment> {
    const r = await s.request<Deployment>('POST', `${project()}/deploy`, { key: w.member.key });
    expect(r.status, r.text).toBe(202);
    return settle(r.body.data?.id ?? '');
  }

  const imageExists = async (ref: string) => (await docker.getImage(ref).inspect().then(() => true, () => false));
  const deployment = async (id: string) => (await s.request<Deployment>('GET', `${project()}/deployments/${id}`, { key: w.member.key })).body.data;

  beforeAll(async () => {
    fx = await startDeployFixture('sqlite', 'acme/kept', { engine: { tune: { imageRetention: { keep: 2, everyMs: 0 } } } });
    ({ s, w, repo, engine } = fx);
    await repo.commit('v1', {
      Dockerfile: `FROM ${engine.base}\nCOPY index.html /www/index.html\nCMD ["sh", "-c", "exec httpd -f -p $PORT -h /www"]\n`,
      ...page('kept v1'),
    });
    expect((await s.request('POST', `/api/workspaces/${w.slug}/projects`, { key: w.member.key, body: { name: 'kept', port: 8080, cpu: '0.25', ram: '0.125' } })).status).toBe(201);
    expect((await s.request('POST', `${project()}/git`, { key: w.member.key, body: { repo_full_name: 'acme/kept' } })).status).toBe(201);
  }, 120_000);

  afterAll(async () => {
    await fx.close();
  }, 60_000);

  it('removes the images beyond the two newest deployments, and a rollback to one of them answers 409', async () => {
    const deployed: Deployment[] = [];
    deployed.push(await deploy());
    for (const v of ['v2', 'v3', 'v4']) {
      await repo.commit(v, page(`kept ${v}`));
      deployed.push(await deploy());
    }
    expect(deployed.map((d) => d.status)).toEqual(['running', 'running', 'running', 'running']);
    const images = deployed.map((d) => d.image ?? '');
    expect(new Set(images).size).toBe(4);

    // The reconciler (every second here) removes v1's and v2's images and says so on the deployments.
    // (the sweep removes an image, then clears its deployment's `image`: wait for both, or a loaded machine reads between them)
    const gone = async (i: 0 | 1) => !(await imageExists(images[i] ?? '')) && (await deployment(deployed[i]?.id ?? ''))?.image === null;
    await waitFor('the old images to go', async () => ((await gone(0)) && (await gone(1)) ? true : undefined), undefined, 30_000);
    expect(await imageExists(images[2] ?? '')).toBe(true);
    expect(await imageExists(images[3] ?? '')).toBe(true);
    expect((await deployment(deployed[0]?.id ?? ''))?.image).toBeNull();
    expect((await deployment(deployed[1]?.id ?? ''))?.image).toBeNull();
    expect((await deployment(deployed[2]?.id ?? ''))?.image).toBe(images[2]);

    const refused = await s.request('POST', `${project()}/deployments/${deployed[0]?.id ?? ''}/rollback`, { key: w.member.key });
    expect(refused.status, refused.text).toBe(409);
    expect(refused.text).toMatch(/its image was removed/);

    // A kept image rolls back; the rollback reuses it, so it stays needed.
    const rolled = await s.request<Deployment>('POST', `${project()}/deployments/${deployed[2]?.id ?? ''}/rollback`, { key: w.member.key });
    expect(rolled.status, rolled.text).toBe(202);
    expect(await settle(rolled.body.data?.id ?? '')).toMatchObject({ status: 'running', image: images[2] });
    expect(await viaRouter(engine.routerPort, host())).toEqual({ status: 200, body: 'kept v3\n' });
    await new Promise((res) => setTimeout(res, 2_500));
    expect(await imageExists(images[2] ?? '')).toBe(true);
    expect(await imageExists(images[3] ?? '')).toBe(true);
  });

  it('removes the images of a deleted project', async () => {
    const list = await s.request<{ deployments: Deployment[] }>('GET', `${project()}/deployments`, { key: w.member.key });
    const kept = [...new Set((list.body.data?.deployments ?? []).map((d) => d.image).filter((i): i is string => i !== null))];
    expect(kept.length).toBeGreaterThan(0);
    expect((await s.request('DELETE', project(), { key: w.member.key })).status).toBe(200);
    await waitFor('the deleted project\'s images to go', async () => ((await Promise.all(kept.map(imageExists))).some(Boolean) ? undefined : true), undefined, 30_000);
  });

  it('removes the network of a deleted workspace', async () => {
    const name = await workspaceNetwork(s, w.slug);
    const networkOf = async () => (await docker.listNetworks({ filters: { name: [name] } })).filter((n) => n.Name === name);
    expect(await networkOf()).toHaveLength(1);
    const deleted = await s.request('DELETE', `/api/workspaces/${w.slug}`, { key: w.owner.key });
    expect(deleted.status, deleted.text).toBe(200);
    await waitFor('the workspace network to go', async () => ((await networkOf()).length === 0 ? true : undefined), undefined, 30_000);
  });
});
