// issue 10 item 4: one orphan container that the engine cannot stop or remove aborted the whole
// reconcile pass, so nothing was healed, routed or swept, at every pass. Each step, and each
// orphan, now fails on its own; a failure that recurs is logged once per interval.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Docker from 'dockerode';
import type { StopOptions } from '../../src/domain/runtime.js';
import type { Deployment } from '../../src/modules/deployments/deployments.schema.js';
import { DockerRuntime } from '../../src/adapters/runtime/docker/docker.runtime.js';
import { NETWORK_GRACE_MS } from '../../src/modules/deployments/engine/retention.js';
import { instanceId } from '../../src/store/db.js';
import { startDeployFixture, viaRouter, workspaceNetwork, type DeployFixture } from '../factories/engine.js';
import { ensureBaseImage } from '../factories/images.js';
import { STORE_KINDS } from '../factories/stores.js';
import { deployAndSettle } from '../factories/deployments.js';

/** The real Docker runtime, except that the engine refuses to stop or remove the containers in `stuck`. */
class StuckRuntime extends DockerRuntime {
  readonly stuck = new Set<string>();

  override async stop(idOrName: string, opts?: StopOptions): Promise<void> {
    if (this.stuck.has(idOrName)) throw new Error(`Cannot stop container ${idOrName}: device or resource busy`);
    return super.stop(idOrName, opts);
  }

  override async remove(idOrName: string): Promise<boolean> {
    if (this.stuck.has(idOrName)) throw new Error(`Cannot remove container ${idOrName}: device or resource busy`);
    return super.remove(idOrName);
  }
}

interface Line {
  level: 'info' | 'warn' | 'error';
  obj: Record<string, unknown>;
  msg: string;
}

describe.each(STORE_KINDS)('a reconcile pass with an orphan the engine cannot remove, store %s', (kind) => {
  let fx: DeployFixture;
  let runtime: StuckRuntime;
  let instance: string;
  const lines: Line[] = [];
  const log = {
    info: (obj: object, msg: string) => void lines.push({ level: 'info', obj: obj as Record<string, unknown>, msg }),
    warn: (obj: object, msg: string) => void lines.push({ level: 'warn', obj: obj as Record<string, unknown>, msg }),
    error: (obj: object, msg: string) => void lines.push({ level: 'error', obj: obj as Record<string, unknown>, msg }),
  };
  const path = (p: string) => `/api/workspaces/${fx.w.slug}/projects/steady${p}`;
  const host = () => `steady-${fx.w.slug}.apps.test`;
  const complaintsAbout = (container: string) => lines.filter((l) => l.level === 'error' && l.obj.container === container);

  /** An idle container of this installation that no deployment in the store owns. */
  async function orphan(name: string, network: string) {
    return runtime.run({
      name,
      image: await ensureBaseImage(),
      command: ['sleep', '3600'],
      env: {},
      owner: { workspace: 'ws-gone', project: 'p-gone', deployment: `d-gone-${name}` },
      labels: { 'slipway.instance': instance },
      cpu: 0.1,
      memoryBytes: 32 * 1024 * 1024,
      network,
      restart: { kind: 'never' },
      init: true,
    });
  }

  async function routed(): Promise<number> {
    let status = 0;
    // the replacement is not health-checked: give its server a moment to listen
    for (let i = 0; i < 100 && status !== 200; i++) {
      status = (await viaRouter(fx.engine.routerPort, host())).status;
      if (status !== 200) await new Promise((res) => setTimeout(res, 100));
    }
    return status;
  }

  beforeAll(async () => {
    runtime = new StuckRuntime({ docker: new Docker() });
    // Passes run only when the test asks (reconcileEveryMs), and each one sweeps (everyMs 0).
    fx = await startDeployFixture(kind, 'acme/steady', { engine: { runtime, log, tune: { reconcileEveryMs: 3_600_000, imageRetention: { keep: 5, everyMs: 0 } } } });
    instance = await instanceId(fx.s.store);
    const base = await ensureBaseImage();
    await fx.repo.commit('v1', {
      Dockerfile: `FROM ${base}\nCOPY index.html /www/index.html\nCMD ["sh", "-c", "exec httpd -f -p $PORT -h /www"]\n`,
      'index.html': 'steady\n',
    });
    const key = fx.w.member.key;
    await fx.s.request('POST', `/api/workspaces/${fx.w.slug}/projects`, { key, body: { name: 'steady', port: 8080, cpu: '0.25', ram: '0.125' } });
    await fx.s.request('POST', path('/git'), { key, body: { repo_full_name: 'acme/steady' } });
    const d = await deployAndSettle<Deployment>(fx.s, key, path(''), 120_000);
    expect(d.status, d.error ?? '').toBe('running');
  }, 180_000);

  afterAll(async () => {
    runtime.stuck.clear();
    await fx.close();
  }, 60_000);

  it('still heals, routes and sweeps everything else, and removes the other orphans', async () => {
    const network = await workspaceNetwork(fx.s, fx.w.slug);
    const stuck = await orphan(`${instance.slice(0, 12)}-stuck-orphan`, network);
    runtime.stuck.add(stuck.id);
    const free = await orphan(`${instance.slice(0, 12)}-free-orphan`, network);
    // the network of a workspace deleted since: the sweep removes it
    const gone = await runtime.ensureNetwork({ name: `ws-gone-${instance.slice(0, 12)}`, workspace: 'ws-deleted', labels: { 'slipway.instance': instance } });
    // the project's container, removed behind Slipway's back: the pass replaces and routes it
    const [serving] = await runtime.list({ labels: { 'slipway.instance': instance }, owner: { project: (await fx.s.request<{ id: string }>('GET', path(''), { key: fx.w.member.key })).body.data?.id ?? '' } });
    expect(serving).toBeDefined();
    await new Docker().getContainer(serving?.id ?? '').remove({ force: true });

    // the deleted workspace's network was made a moment ago, and a sweep leaves networks younger
    // than NETWORK_GRACE_MS alone (a new workspace's first container may be about to start on it)
    fx.s.clock.advance(NETWORK_GRACE_MS + 1_000);
    await fx.engine.orchestrator.reconcile();

    expect(await routed()).toBe(200);
    const view = await fx.s.request<{ pods: { ready: number; total: number } }>('GET', path('/status'), { key: fx.w.member.key });
    expect(view.body.data?.pods).toMatchObject({ ready: 1, total: 1 });
    expect(await runtime.inspect(free.id)).toBeNull();
    expect(await runtime.inspect(stuck.id)).not.toBeNull();
    expect((await runtime.listNetworks({ labels: { 'slipway.instance': instance } })).map((n) => n.id)).not.toContain(gone.id);
    expect(complaintsAbout(stuck.name)).toHaveLength(1);
    expect(complaintsAbout(stuck.name)[0]?.msg).toContain('could not be removed');
  }, 120_000);

  it('logs the orphan it cannot remove once per interval, not at every pass', async () => {
    const name = `${instance.slice(0, 12)}-stuck-orphan`;
    await fx.engine.orchestrator.reconcile();
    await fx.engine.orchestrator.reconcile();
    expect(complaintsAbout(name)).toHaveLength(1);
    fx.s.clock.advance(11 * 60_000);
    await fx.engine.orchestrator.reconcile();
    expect(complaintsAbout(name)).toHaveLength(2);
    // once the engine lets it go, the next pass removes it
    runtime.stuck.clear();
    await fx.engine.orchestrator.reconcile();
    expect(await runtime.inspect(name)).toBeNull();
    expect(lines.some((l) => l.level === 'info' && l.obj.container === name && l.msg === 'removed an orphaned container')).toBe(true);
  }, 120_000);
});
