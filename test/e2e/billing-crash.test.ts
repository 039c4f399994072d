// Issue 26 item 2 on the real engine: compute that was never billed. Metering charged projects by
// their status and skipped `crashed`: a project of 2 replicas (2 vCPU, 4 GiB each) whose one
// replica crash-loops while the other keeps answering was marked `crashed`, stopped being charged
// and kept serving. Metering now charges what the engine runs: the replica that keeps running is
// charged every minute, whatever the project's status.
// Uses Docker Engine: run under `flock /tmp/slipway-docker.lock`.
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { engineContainers } from '../../src/modules/billing/meter.js';
import { instanceLabels } from '../../src/modules/deployments/engine/containers.js';
import { instanceId } from '../../src/store/db.js';
import type { Deployment } from '../../src/modules/deployments/deployments.schema.js';
import { billingWorker, money } from '../factories/billing.js';
import { settledDeployment } from '../factories/deployments.js';
import { startDeployFixture, viaRouter, type DeployFixture } from '../factories/engine.js';
import { ensureBaseImage } from '../factories/images.js';
import { waitFor } from '../factories/process.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
/** one replica: 2 vCPU × 0.000463 + 4 GiB × 0.000231 = 0.00185 a minute, 1,850 micro-units */
const REPLICA_PER_MINUTE = 1_850;

describe('metering what the engine runs', () => {
  let fx: DeployFixture;
  const docker = new Docker();
  const api = () => `/api/workspaces/${fx.w.slug}`;
  const host = () => `halfcrash-${fx.w.slug}.apps.test`;

  beforeAll(async () => {
    const base = await ensureBaseImage();
    fx = await startDeployFixture('sqlite', 'acme/halfcrash', { engine: { driver: 'node' } });
    // serves until /tmp/crash exists in its container; from then on every start exits at once
    await fx.repo.commit('v1', {
      Dockerfile: `FROM ${base}\nCOPY index.html /www/index.html\nCMD ["sh", "-c", "[ -e /tmp/crash ] && exit 1; httpd -p $PORT -h /www; while [ ! -e /tmp/crash ]; do sleep 0.2; done; exit 1"]\n`,
      'index.html': 'half v1\n',
    });
  }, 600_000);
  afterAll(async () => {
    await fx.close();
  }, 120_000);

  it('charges the replica that keeps running every minute while the project shows crashed', async () => {
    const { s, w, engine } = fx;
    // the minutes asserted stay in one hour
    s.clock.advance(HOUR - (s.clock.now().getTime() % HOUR) + 2 * MINUTE);
    const { worker } = billingWorker(s, engineContainers(engine.runtime, instanceLabels(await instanceId(s.store))));
    const start = await money(s, w.id);
    const charged = async () => {
      const m = await money(s, w.id);
      return start.balance - m.balance + m.unbilled - start.unbilled;
    };

    const made = await s.request<{ id: string }>('POST', `${api()}/projects`, { key: w.member.key, body: { name: 'halfcrash', port: 8080, replicas: 2, cpu: '2', ram: '4' } });
    expect(made.status, made.text).toBe(201);
    const projectId = made.body.data?.id ?? '';
    await s.request('POST', `${api()}/projects/halfcrash/git`, { key: w.member.key, body: { repo_full_name: 'acme/halfcrash' } });
    const queued = await s.request<Deployment>('POST', `${api()}/projects/halfcrash/deploy`, { key: w.member.key });
    const d = await settledDeployment<Deployment>(s, w.member.key, `${api()}/projects/halfcrash`, queued.body.data?.id ?? '');
    expect(d.status, d.error ?? '').toBe('running');
    expect(await viaRouter(engine.routerPort, host())).toEqual({ status: 200, body: 'half v1\n' });

    // both replicas run: both are charged
    await worker.pass();
    expect(await charged()).toBe(2 * REPLICA_PER_MINUTE);

    // one replica starts crash-looping; the project shows crashed and keeps serving from the other
    const replicas = await docker.listContainers({ filters: { label: [`slipway.project=${projectId}`] } });
    expect(replicas).toHaveLength(2);
    const loser = docker.getContainer(replicas[1]?.Id ?? '');
    const exec = await loser.exec({ Cmd: ['touch', '/tmp/crash'] });
    await exec.start({});
    await waitFor(
      'the project to show crashed',
      async () => ((await s.request<{ status: string }>('GET', `${api()}/projects/halfcrash`, { key: w.member.key })).body.data?.status === 'crashed' ? true : undefined),
      undefined,
      120_000,
    );
    expect((await loser.inspect()).RestartCount).toBeGreaterThanOrEqual(3);
    expect(await viaRouter(engine.routerPort, host())).toEqual({ status: 200, body: 'half v1\n' });

    // every metered minute charges the replica that runs (and not the one that never stays up)
    for (let i = 1; i <= 5; i++) {
      s.clock.advance(MINUTE);
      const before = await charged();
      await worker.pass();
      expect((await charged()) - before, `minute ${i.toString()}`).toBe(REPLICA_PER_MINUTE);
    }
    expect((await s.request<{ status: string }>('GET', `${api()}/projects/halfcrash`, { key: w.member.key })).body.data?.status).toBe('crashed');
    expect(await viaRouter(engine.routerPort, host())).toEqual({ status: 200, body: 'half v1\n' });
    const usage = await s.request<{ resources: { resource_id: string; minutes: number; quantities: { vcpu_minutes: number } }[] }>('GET', `${api()}/wallet/usage`, { key: w.member.key });
    // 2 container-minutes first, then 5 of the replica that kept running
    expect(usage.body.data?.resources.find((r) => r.resource_id === projectId)).toMatchObject({ minutes: 7, quantities: { vcpu_minutes: 14 } });
    const m = await money(s, w.id);
    expect(m.ledger).toBe(m.balance);
  }, 300_000);
});
