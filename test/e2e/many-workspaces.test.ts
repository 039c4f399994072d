// Issue 9, item 8: Docker's default address pools hold about 30 bridge networks, so a few dozen
// workspaces used to stop every new deploy on the machine. Here 100 workspaces, each with its own
// network and a running app, deployed through the API on one engine, all answer through the
// router. Uses Docker Engine and nginx: run under `flock /tmp/slipway-docker.lock`.
import { randomBytes } from 'node:crypto';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Deployment } from '../../src/modules/deployments/deployments.schema.js';
import type { Project } from '../../src/modules/projects/projects.schema.js';
import { startDeployFixture, viaRouter, workspaceNetwork, type DeployFixture } from '../factories/engine.js';
import { ensureBaseImage } from '../factories/images.js';
import { inProgress } from '../factories/deployments.js';

const WORKSPACES = 100;
/** API calls in flight at once while setting up (the engine's own concurrency is below) */
const PARALLEL = 10;

const app = (base: string) => ({
  Dockerfile: `FROM ${base}\nCMD ["sh", "-c", "mkdir -p /www && printf '%s' \\"$GREETING\\" > /www/index.html && exec httpd -f -p $PORT -h /www"]\n`,
});

/** Runs `fn` over `items`, `limit` at a time. */
async function inBatches<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array<R>(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i] as T);
      }
    }),
  );
  return out;
}

describe(`${WORKSPACES.toString()} workspaces on one engine`, () => {
  let fx: DeployFixture;
  const run = randomBytes(3).toString('hex');

  beforeAll(async () => {
    const base = await ensureBaseImage();
    fx = await startDeployFixture('sqlite', 'acme/many', {
      // the sandbox tops up the workspaces the starting credit does not reach
      server: { platform: { limits: { maxWorkspacesPerUser: WORKSPACES } }, payments: 'sandbox' },
      // builds are cached after the first; several deploys at once keep the engine busy
      engine: { tune: { concurrency: 6, reconcileEveryMs: 5000 } },
    });
    await fx.repo.commit('app', app(base));
  }, 120_000);

  afterAll(async () => {
    // about 0.4 s per workspace: its container, network and image go one by one in the engine
    await fx.close();
  }, 180_000);

  it('gives each its own network and serves each app through the router', async () => {
    const { s, w } = fx;
    const key = w.owner.key;
    const slugs = Array.from({ length: WORKSPACES }, (_, i) => `mw${run}-${i.toString()}`);
    const call = async <T>(method: string, path: string, body?: unknown): Promise<T> => {
      const r = await s.request<T>(method, path, { key, ...(body === undefined ? {} : { body }) });
      expect(r.status, `${method} ${path}: ${r.text}`).toBeLessThan(300);
      return r.body.data as T;
    };

    // through the API, as a tenant would: workspace, project, Git connection, a variable, deploy
    const started = await inBatches(slugs, PARALLEL, async (slug) => {
      await call('POST', '/api/workspaces', { name: slug, slug });
      // the owner's starting credit went to their first workspace: these are topped up (the sandbox gateway)
      await call('POST', `/api/workspaces/${slug}/wallet/topup/gatewayb`, { amount: 100 });
      const base = `/api/workspaces/${slug}/projects`;
      const project = await call<Project>('POST', base, { name: 'app', port: 8080, cpu: '0.1', ram: '0.125' });
      await call('POST', `${base}/app/git`, { repo_full_name: 'acme/many' });
      await call('POST', `${base}/app/env`, { key: 'GREETING', value: `hello from ${slug}` });
      const d = await call<Deployment>('POST', `${base}/app/deploy`);
      return { slug, host: project.default_domain, deployment: d.id };
    });

    // every deployment runs (or says why not)
    const deadline = Date.now() + 420_000; // 100 builds and rollouts on 2 cores, beside the other Docker suites of the run
    const pending = new Set(started.map((x) => x.slug));
    const failures: string[] = [];
    while (pending.size > 0 && Date.now() < deadline) {
      await inBatches([...pending], PARALLEL, async (slug) => {
        const x = started.find((y) => y.slug === slug);
        const d = await call<Deployment>('GET', `/api/workspaces/${slug}/projects/app/deployments/${x?.deployment ?? ''}`);
        if (d.status === 'running') pending.delete(slug);
        else if (!inProgress(d.status)) {
          pending.delete(slug);
          failures.push(`${slug}: ${d.status} ${d.error ?? ''}`);
        }
      });
      if (pending.size > 0) await new Promise((res) => setTimeout(res, 1000));
    }
    expect(failures).toEqual([]);
    expect([...pending]).toEqual([]);

    // each through the router, each its own app
    const answers = await inBatches(started, PARALLEL, async (x) => ({ slug: x.slug, ...(await viaRouter(fx.engine.routerPort, x.host)) }));
    expect(answers.filter((a) => a.status !== 200 || a.body !== `hello from ${a.slug}`)).toEqual([]);

    // one network per workspace, each with its own subnet of the pool (10.213.0.0/16 by default)
    const docker = new Docker();
    const prefix = await workspaceNetwork(fx.s, `mw${run}-`);
    const networks = (await docker.listNetworks()).filter((n) => n.Name.startsWith(prefix));
    expect(networks).toHaveLength(WORKSPACES);
    const subnets = networks.map((n) => n.IPAM?.Config?.[0]?.Subnet ?? '');
    expect(new Set(subnets).size).toBe(WORKSPACES);
    for (const subnet of subnets) expect(subnet).toMatch(/^10\.213\.\d+\.0\/24$/);
  }, 600_000);
});
