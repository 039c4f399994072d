import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeployQueue } from '../../src/modules/deployments/queue.js';
import { makeProject, makeWorkspace, startTestServer, type TestProject, type TestServer, type TestWorkspace } from '../factories/harness.js';
import { STORE_KINDS } from '../factories/stores.js';
import { openStream } from '../factories/stream-client.js';

describe.each(STORE_KINDS)('build log stream on %s', (kind) => {
  let s: TestServer;
  let w: TestWorkspace;
  let p: TestProject;
  let q: DeployQueue;
  beforeAll(async () => {
    s = await startTestServer(kind);
    w = await makeWorkspace(s);
    p = await makeProject(s, w);
    q = new DeployQueue(s.store, s.deps.clock, s.deps.ids, 60_000);
  });
  afterAll(async () => s.close());

  const wsUrl = (id: string, slug = w.slug, project = p.slug) =>
    `${s.url.replace('http', 'ws')}/api/workspaces/${slug}/projects/${project}/deployments/${id}/logs`;

  async function finishedDeployment(lines: string[]): Promise<string> {
    const d = await q.enqueue({ projectId: p.id, source: 'git' });
    await q.claim('test');
    await s.services.buildLog.append(d.id, lines);
    await q.advance(d.id, 'test', { kind: 'fail' }, { error: 'done' });
    return d.id;
  }

  it('replays a finished build from the first line, then [END] and close', async () => {
    const id = await finishedDeployment(['Step 1/2 : FROM base', 'Step 2/2 : CMD run', 'Successfully built']);
    const frames = await openStream(wsUrl(id), { 'x-api-key': w.member.key }).closed;
    expect(frames).toEqual(['Step 1/2 : FROM base', 'Step 2/2 : CMD run', 'Successfully built', '[END]']);
  });

  it('accepts the key in the api_key query parameter (browsers)', async () => {
    const id = await finishedDeployment(['only line']);
    const frames = await openStream(`${wsUrl(id)}?api_key=${w.member.key}`).closed;
    expect(frames).toEqual(['only line', '[END]']);
    expect(s.logs.join('\n')).not.toContain(w.member.key);
  });

  it('follows a build in progress and ends when it is over', async () => {
    const d = await q.enqueue({ projectId: p.id, source: 'git' });
    await q.claim('live');
    await s.services.buildLog.append(d.id, ['first']);
    const session = openStream(wsUrl(d.id), { 'x-api-key': w.owner.key });
    await session.received(1);
    await s.services.buildLog.append(d.id, ['second', 'third']);
    await session.received(3);
    expect(session.frames).toEqual(['first', 'second', 'third']);
    await s.services.buildLog.append(d.id, ['last words']);
    await q.advance(d.id, 'live', { kind: 'built' });
    await q.advance(d.id, 'live', { kind: 'healthy' });
    s.services.buildLog.forget(d.id);
    expect(await session.closed).toEqual(['first', 'second', 'third', 'last words', '[END]']);
  });

  it('keeps lines in order across many appends', async () => {
    const d = await q.enqueue({ projectId: p.id, source: 'git' });
    await q.claim('many');
    await Promise.all(Array.from({ length: 20 }, (_, i) => s.services.buildLog.append(d.id, [`line ${i.toString().padStart(2, '0')}`])));
    await q.advance(d.id, 'many', { kind: 'fail' });
    const frames = await openStream(wsUrl(d.id), { 'x-api-key': w.member.key }).closed;
    expect(frames).toEqual([...Array.from({ length: 20 }, (_, i) => `line ${i.toString().padStart(2, '0')}`), '[END]']);
  });

  it.each([
    ['no key', {}, 'unknown', '[ERROR] An API key is required in the X-API-Key header.'],
    ['a bad key', { 'x-api-key': `svc_sk_${'f'.repeat(40)}` }, 'unknown', '[ERROR] The API key is not valid.'],
  ])('answers %s with one [ERROR] frame, then closes', async (_what, headers: Record<string, string>, id, frame) => {
    expect(await openStream(wsUrl(id), headers).closed).toEqual([frame]);
  });

  it('answers an outsider and an unknown deployment with [ERROR], leaking nothing', async () => {
    const id = await finishedDeployment(['secret build output']);
    const outsider = await makeWorkspace(s);
    expect(await openStream(wsUrl(id), { 'x-api-key': outsider.owner.key }).closed).toEqual(['[ERROR] Workspace was not found.']);
    expect(await openStream(wsUrl('nope'), { 'x-api-key': w.member.key }).closed).toEqual(['[ERROR] Deployment was not found.']);
    // Another workspace's deployment id under one's own project.
    const other = await makeProject(s, outsider);
    const foreign = await new DeployQueue(s.store, s.deps.clock, s.deps.ids, 60_000).enqueue({ projectId: other.id, source: 'git' });
    expect(await openStream(wsUrl(foreign.id), { 'x-api-key': w.member.key }).closed).toEqual(['[ERROR] Deployment was not found.']);
  });

  it('answers a plain HTTP GET with 400 (or the refusal) in the envelope', async () => {
    const id = await finishedDeployment(['x']);
    const path = `/api/workspaces/${w.slug}/projects/${p.slug}/deployments/${id}/logs`;
    expect(await s.request('GET', path, { key: w.member.key })).toMatchObject({
      status: 400,
      body: { success: false, error: 'This is a WebSocket stream: open it with a WebSocket handshake.' },
    });
    expect((await s.request('GET', path)).status).toBe(401);
  });

  /** A claimed deployment of the project; others left queued by earlier cases are failed on the way. */
  async function claimed(projectId: string, worker: string): Promise<{ id: string }> {
    const d = await q.enqueue({ projectId, source: 'git' });
    for (;;) {
      const c = await q.claim(worker);
      if (c === null || c.id === d.id) return d;
      await q.advance(c.id, worker, { kind: 'fail' }, { error: 'not this one' });
    }
  }

  it("keeps build lines in the project's log store: GET …/logs?stream=build, usage, the live tail, and gone with the project", async () => {
    const project = await makeProject(s, w);
    const live = openStream(`${s.url.replace('http', 'ws')}/api/workspaces/${w.slug}/projects/${project.slug}/live-logs?tail=10`, { 'x-api-key': w.member.key });
    const d = await claimed(project.id, 'store');
    await s.services.buildLog.append(d.id, ['Step 1/2 : FROM base', 'x'.repeat(9000)]);
    await q.advance(d.id, 'store', { kind: 'fail' }, { error: 'done' });

    const logs = `/api/workspaces/${w.slug}/projects/${project.slug}/logs`;
    const page = await s.request('GET', `${logs}?stream=build&direction=asc`, { key: w.member.key });
    expect(page.status).toBe(200);
    const entries = (page.body as { data: { entries: { deployment_id: string; pod: string; stream: string; message: string }[] } }).data.entries;
    expect(entries.map((e) => [e.deployment_id, e.pod, e.stream])).toEqual([[d.id, 'builder', 'build'], [d.id, 'builder', 'build']]);
    // a line over 8 KiB is cut and marked
    expect(entries.map((e) => e.message)).toEqual(['Step 1/2 : FROM base', `${'x'.repeat(8192)}…`]);
    // without a stream filter the build lines are among the project's lines; none is stdout
    expect((await s.request('GET', `${logs}?stream=stdout`, { key: w.member.key })).body).toMatchObject({ data: { entries: [] } });
    expect((await s.request('GET', logs, { key: w.member.key })).body).toMatchObject({ data: { entries: [{ stream: 'build' }, { stream: 'build' }] } });
    expect((await s.request('GET', `${logs}/usage`, { key: w.member.key })).body).toMatchObject({ data: { lines: 2 } });
    // the live tail shows the build lines
    await live.received(2);
    expect(live.frames[0]).toContain('builder build Step 1/2 : FROM base');
    live.close();

    expect((await s.request('DELETE', `/api/workspaces/${w.slug}/projects/${project.slug}`, { key: w.owner.key })).status).toBeLessThan(300);
    expect((await s.logStore.usage(project.id)).lines).toBe(0);
  });

  it('replays a build written before build lines moved to the log store (deployment_logs)', async () => {
    const d = await claimed(p.id, 'legacy');
    const at = new Date().toISOString();
    await s.store.repos.buildLogs.append([1, 2, 3].map((seq) => ({ deployment_id: d.id, seq, at, line: `old line ${seq.toString()}` })));
    await q.advance(d.id, 'legacy', { kind: 'fail' }, { error: 'done' });
    expect(await openStream(wsUrl(d.id), { 'x-api-key': w.member.key }).closed).toEqual(['old line 1', 'old line 2', 'old line 3', '[END]']);
  });
});
