// issue 10 item 4: a project's status does not depend on how many deployments it has. It was
// derived from its 50 newest deployments: after 50 newer failed ones, a project that was still
// serving read `failed` (or `stopped`) at its next transition.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeWorkspace, startTestServer, type TestServer, type TestWorkspace } from '../factories/harness.js';
import { STORE_KINDS } from '../factories/stores.js';

describe.each(STORE_KINDS)('project status with many deployments on %s', (kind) => {
  let s: TestServer;
  let w: TestWorkspace;
  beforeAll(async () => {
    s = await startTestServer(kind);
    w = await makeWorkspace(s);
  });
  afterAll(async () => s.close());

  const at = (minute: number) => new Date(Date.UTC(2026, 0, 1, 0, minute)).toISOString();

  /** A project serving `current`, with an older running `previous` (a switch) and 60 newer failed deployments. */
  async function servingWithManyFailures(name: string, projectStatus: 'running' | 'crashed') {
    const created = await s.request<{ id: string }>('POST', `/api/workspaces/${w.slug}/projects`, { key: w.member.key, body: { name } });
    const projectId = created.body.data?.id ?? '';
    const row = (id: string, status: 'running' | 'failed', minute: number) => ({
      id: `${name}-${id}`,
      project_id: projectId,
      status,
      source: 'git' as const,
      image: status === 'running' ? `slipway-test/${name}:1` : null,
      branch: 'main',
      commit_sha: null,
      commit_message: null,
      error: status === 'failed' ? 'The build failed.' : null,
      created_at: at(minute),
      started_at: at(minute),
      finished_at: status === 'failed' ? at(minute + 1) : null,
    });
    await s.store.db.insertInto('deployments').values([row('previous', 'running', 0), row('current', 'running', 1)]).execute();
    for (let i = 0; i < 60; i++) await s.store.db.insertInto('deployments').values(row(`failed-${i.toString()}`, 'failed', 2 + i)).execute();
    await s.store.db.updateTable('projects').set({ status: projectStatus }).where('id', '=', projectId).execute();
    return { previous: `${name}-previous` };
  }

  it.each(['running', 'crashed'] as const)('a %s project with 60 newer failed deployments keeps its status when its older replica set stops', async (before) => {
    const name = `serving-${before}`;
    const { previous } = await servingWithManyFailures(name, before);
    const base = `/api/workspaces/${w.slug}/projects/${name}`;
    const stopped = await s.request<{ status: string }>('POST', `${base}/deployments/${previous}/stop`, { key: w.member.key });
    expect(stopped).toMatchObject({ status: 200, body: { success: true, data: { status: 'stopped' } } });
    const project = await s.request<{ status: string }>('GET', base, { key: w.member.key });
    expect(project.body.data?.status).toBe(before);
    const list = await s.request<{ total: number }>('GET', `${base}/deployments`, { key: w.member.key });
    expect(list.body.data?.total).toBe(62);
  });

  it('a new deploy of that project shows it building, and the failed ones do not count', async () => {
    await servingWithManyFailures('redeployed', 'running');
    const base = `/api/workspaces/${w.slug}/projects/redeployed`;
    const queued = await s.request<{ status: string }>('POST', `${base}/redeploy`, { key: w.member.key });
    expect(queued.status).toBe(202);
    expect((await s.request<{ status: string }>('GET', base, { key: w.member.key })).body.data?.status).toBe('building');
  });
});
