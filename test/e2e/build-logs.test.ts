import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeployQueue } from '../../src/deploy/queue.js';
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
    q = new DeployQueue(s.deps, 60_000);
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
    const foreign = await new DeployQueue(s.deps, 60_000).enqueue({ projectId: other.id, source: 'git' });
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
});
