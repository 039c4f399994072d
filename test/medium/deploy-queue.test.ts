import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeployQueue } from '../../src/modules/deployments/queue.js';
import { makeProject, makeWorkspace, startTestServer, type TestServer, type TestWorkspace } from '../factories/harness.js';
import { STORE_KINDS } from '../factories/stores.js';

const LEASE = 30_000;

describe.each(STORE_KINDS)('deploy queue on %s', (kind) => {
  let s: TestServer;
  let w: TestWorkspace;
  let q: DeployQueue;
  beforeAll(async () => {
    s = await startTestServer(kind);
    w = await makeWorkspace(s);
    q = new DeployQueue(s.store, s.deps.clock, s.deps.ids, LEASE);
  });
  afterAll(async () => s.close());

  const status = async (id: string) =>
    (await s.store.db.selectFrom('deployments').select(['status', 'error', 'lease_owner', 'attempts']).where('id', '=', id).executeTakeFirstOrThrow());

  it('supersedes a queued deployment when a newer one of the project is queued', async () => {
    const p = await makeProject(s, w);
    const first = await q.enqueue({ projectId: p.id, source: 'git', branch: 'main' });
    const second = await q.enqueue({ projectId: p.id, source: 'git', branch: 'main' });
    expect(await status(first.id)).toMatchObject({ status: 'superseded', error: `Superseded by deployment ${second.id} before it started.` });
    expect((await status(second.id)).status).toBe('queued');
    // Drain it so later cases start from an empty queue.
    const claimed = await q.claim('w0');
    expect(claimed?.id).toBe(second.id);
    await q.advance(second.id, 'w0', { kind: 'fail' }, { error: 'test' });
  });

  it('claims the oldest, one build per project at a time, and leases it', async () => {
    const a = await makeProject(s, w);
    const b = await makeProject(s, w);
    const a1 = await q.enqueue({ projectId: a.id, source: 'git' });
    const b1 = await q.enqueue({ projectId: b.id, source: 'git' });
    const first = await q.claim('w1');
    expect(first).toMatchObject({ id: a1.id, status: 'building', lease_owner: 'w1', attempts: 1 });
    expect(Date.parse(first?.lease_until ?? '') - Date.parse(first?.started_at ?? '')).toBe(LEASE);
    // A newer deploy of `a` waits while a1 builds; b1 goes first.
    const a2 = await q.enqueue({ projectId: a.id, source: 'git' });
    expect((await q.claim('w2'))?.id).toBe(b1.id);
    expect(await q.claim('w3')).toBeNull();
    await q.advance(a1.id, 'w1', { kind: 'built' });
    expect(await q.claim('w3')).toBeNull();
    await q.advance(a1.id, 'w1', { kind: 'healthy' });
    expect((await q.claim('w3'))?.id).toBe(a2.id);
    for (const [id, worker] of [[b1.id, 'w2'], [a2.id, 'w3']] as const) await q.advance(id, worker, { kind: 'fail' });
  });

  it('hands each deployment to exactly one of many concurrent workers', async () => {
    const projects = await Promise.all([1, 2, 3].map(() => makeProject(s, w)));
    const queued = await Promise.all(projects.map((p) => q.enqueue({ projectId: p.id, source: 'git' })));
    const claims = await Promise.all(Array.from({ length: 8 }, (_, i) => q.claim(`c${i.toString()}`)));
    const got = claims.filter((c) => c !== null).map((c) => c.id).sort();
    expect(got).toEqual(queued.map((d) => d.id).sort());
    for (const c of claims) if (c !== null) await q.advance(c.id, c.lease_owner, { kind: 'fail' });
  });

  it('moves only with the lease holder and only along the state machine', async () => {
    const p = await makeProject(s, w);
    const d = await q.enqueue({ projectId: p.id, source: 'git' });
    await q.claim('owner');
    expect(await q.advance(d.id, 'intruder', { kind: 'built' })).toBeNull();
    expect(await q.advance(d.id, 'owner', { kind: 'healthy' })).toBeNull();
    const built = await q.advance(d.id, 'owner', { kind: 'built' }, { image: 'img:1', commit_sha: 'abc' });
    expect(built).toMatchObject({ status: 'deploying', image: 'img:1', commit_sha: 'abc', lease_owner: 'owner' });
    const running = await q.advance(d.id, 'owner', { kind: 'healthy' });
    expect(running).toMatchObject({ status: 'running', lease_owner: null, finished_at: null });
    // A running deployment is nobody's: it is superseded or stopped without a lease.
    expect(await q.advance(d.id, 'owner', { kind: 'stop' })).toBeNull();
    expect(await q.advance(d.id, null, { kind: 'stop' })).toMatchObject({ status: 'stopped' });
    expect((await q.advance(d.id, null, { kind: 'supersede' }))).toBeNull();
  });

  it('reaps a deployment whose worker stopped renewing its lease', async () => {
    const p = await makeProject(s, w);
    const d = await q.enqueue({ projectId: p.id, source: 'git' });
    await q.claim('doomed');
    expect(await q.heartbeat(d.id, 'doomed')).toBe(true);
    expect(await q.reap()).toEqual([]);
    s.clock.advance(LEASE + 1000);
    try {
      const reaped = await q.reap();
      expect(reaped.map((r) => r.id)).toEqual([d.id]);
      expect(await status(d.id)).toMatchObject({ status: 'failed', error: expect.stringMatching(/^Interrupted: /), lease_owner: null });
      // The old worker can no longer write.
      expect(await q.heartbeat(d.id, 'doomed')).toBe(false);
      expect(await q.advance(d.id, 'doomed', { kind: 'built' })).toBeNull();
    } finally {
      s.clock.advance(-(LEASE + 1000));
    }
  });
});
