// Template instances end to end on the real engine, through the API, with the test catalog
// (test/factories/templates.catalog.json) whose images are built here: instantiate, a missing
// required variable refused, deploy in `image` mode and in `build` mode (from the local Git
// server), reached through the router at the default and a custom domain, the build log and the
// live log over WebSocket, a redeploy that keeps the data volume, stop, and delete with
// everything it owns gone (containers, volume, routes, logs, its database). A template that
// declares PostgreSQL gets one provisioned and wired, and its page shows a value it stored there.
// Uses Docker Engine: run under `flock /tmp/slipway-docker.lock`.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DatabaseDetail } from '../../src/modules/databases/databases.schema.js';
import type { Deployment } from '../../src/modules/deployments/deployments.schema.js';
import type { TemplateInstance } from '../../src/modules/templates/templates.schema.js';
import { startDeployFixture, viaRouter, type DeployFixture } from '../factories/engine.js';
import { ensureBaseImage, ensureDatabaseImages, RUN_LABEL, testRunId } from '../factories/images.js';
import { openStream } from '../factories/stream-client.js';
import { settledDeployment } from '../factories/deployments.js';

/** The page: what it was given, and how many times it started on its data volume; ready (its health path) a second after it listens. */
const HELLO_CMD = (flavour: string) =>
  `CMD ["sh", "-c", "mkdir -p /www && echo started >> /data/boots && echo \\"${flavour} $GREETING at $SITE_URL boots=$(wc -l < /data/boots)\\" > /www/index.html && echo \\"serving $GREETING\\"; (sleep 1 && echo ready > /www/ready.html) & exec httpd -f -p $PORT -h /www"]`;

describe('template instances on the engine', () => {
  let fx: DeployFixture;
  const docker = new Docker();
  const api = () => `/api/workspaces/${fx.w.slug}/templates`;

  async function build(tag: string, dockerfile: string): Promise<void> {
    const dir = await mkdtemp(join(tmpdir(), 'tpl-image-'));
    try {
      await writeFile(join(dir, 'Dockerfile'), dockerfile);
      const r = await fx.engine.runtime.build({ contextDir: dir, tag, labels: { [RUN_LABEL]: testRunId() } });
      expect(r.status, JSON.stringify(r)).toBe('succeeded');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  const settled = (slug: string, id: string) => settledDeployment<Deployment>(fx.s, fx.w.member.key, `${api()}/${slug}`, id);

  async function until<T>(what: string, check: () => Promise<T | undefined>, ms = 60_000): Promise<T> {
    const end = Date.now() + ms;
    for (;;) {
      const v = await check();
      if (v !== undefined) return v;
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
      await new Promise((res) => setTimeout(res, 250));
    }
  }

  beforeAll(async () => {
    await ensureDatabaseImages();
    const base = await ensureBaseImage();
    fx = await startDeployFixture('sqlite', 'acme/tpl-hello', {
      engine: { databases: { readyTimeoutMs: 120_000 }, logs: true },
      server: { platform: { appsDomain: 'apps.test', domains: { verification: 'off', dnsServers: [], publicAddresses: [], maxPerProject: 20 } } },
    });
    // the catalog's images, made here (no registry): the app, and an app with PostgreSQL's client
    await build('slipway-test/tpl-hello:1.0', `FROM ${base}\n${HELLO_CMD('image')}\n`);
    await build(
      'slipway-test/tpl-postgres:1.0',
      [
        `FROM ${base} AS tools`,
        'FROM slipway-local/postgresql:latest',
        'COPY --from=tools /bin/busybox /bin/busybox',
        'ENTRYPOINT []',
        // the image's own command fails: the catalog entry's `command` is what runs (it stores a
        // value through the wired connection string, then serves what it reads back)
        'CMD ["/bin/busybox", "false"]',
        '',
      ].join('\n'),
    );
    // the template's source, for `mode: build`
    await fx.repo.commit('v1', { Dockerfile: `FROM ${base}\n${HELLO_CMD('built')}\n` });
  }, 600_000);
  afterAll(async () => fx.close(), 120_000);

  it('instantiates, deploys the image and a build, serves at its domains, streams its logs, keeps its volume, stops, and goes with everything it owns', async () => {
    const { s, w, engine } = fx;
    const made = await s.request<TemplateInstance>('POST', api(), { key: w.member.key, body: { name: 'site', template_name: 'hello-template' } });
    expect(made.status, made.text).toBe(201);
    const inst = made.body.data;
    if (inst === undefined) throw new Error('no instance');
    const one = `${api()}/site`;
    // a required variable first
    const refused = await s.request('POST', `${one}/deploy`, { key: w.member.key, body: { mode: 'image' } });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toContain('"GREETING"');
    expect((await s.request('POST', `${one}/envs`, { key: w.member.key, body: [{ key: 'GREETING', value: 'Ahoy' }] })).status).toBe(200);

    // image mode
    const live = openStream(`${s.url.replace('http', 'ws')}${one}/live-logs?tail=0`, { 'x-api-key': w.member.key });
    const first = await s.request<Deployment>('POST', `${one}/deploy`, { key: w.member.key, body: { mode: 'image' } });
    expect(first.status, first.text).toBe(202);
    const d1 = await settled('site', first.body.data?.id ?? '');
    expect(d1.status, d1.error ?? '').toBe('running');
    expect(d1).toMatchObject({ source: 'template', image: 'slipway-test/tpl-hello:1.0' });
    const page = await viaRouter(engine.routerPort, inst.default_domain);
    expect(page).toEqual({ status: 200, body: `image Ahoy at ${inst.url} boots=1\n` });
    // its containers have a process limit (issue 26, item 7: --pids-limit, default 512)
    for (const c of await docker.listContainers({ filters: { label: [`slipway.deployment=${d1.id}`] } })) {
      expect((await docker.getContainer(c.Id).inspect()).HostConfig.PidsLimit).toBe(512);
    }
    // the build log over WebSocket, replayed to its end
    const log = await openStream(`${s.url.replace('http', 'ws')}${one}/deployments/${d1.id}/logs`, { 'x-api-key': w.member.key }).closed;
    expect(log.join('\n')).toContain('Using the image slipway-test/tpl-hello:1.0; no build.');
    // traffic only once the catalog's health path answers
    expect(log.join('\n')).toMatch(/answers \/ready\.html on port 8080\./);
    expect(log.at(-1)).toBe('[END]');
    // the live log follows what the app prints
    await until('the live line', async () => (live.frames.some((f) => f.endsWith('serving Ahoy')) ? true : undefined));
    live.close();

    // a custom domain routes to it too (verification is off on this install), and becomes its address
    expect((await s.request('POST', `${one}/domains`, { key: w.member.key, body: { domain: 'site.example.com' } })).status).toBe(201);
    await until('the custom domain to be routed', async () => ((await viaRouter(engine.routerPort, 'site.example.com')).status === 200 ? true : undefined));

    // redeploy: the same image again, on the same data volume; ${url} now names the custom domain
    const again = await s.request<Deployment>('POST', `${one}/redeploy`, { key: w.member.key });
    expect(again.status, again.text).toBe(202);
    expect((await settled('site', again.body.data?.id ?? '')).status).toBe('running');
    expect((await viaRouter(engine.routerPort, 'site.example.com')).body).toBe(`image Ahoy at http://site.example.com:8000 boots=2\n`);

    // build mode: the template's source from the Git server, through the same pipeline
    const built = await s.request<Deployment>('POST', `${one}/deploy`, { key: w.member.key, body: { mode: 'build' } });
    expect(built.status, built.text).toBe(202);
    const d3 = await settled('site', built.body.data?.id ?? '');
    expect(d3.status, d3.error ?? '').toBe('running');
    expect(d3.commit_sha).toMatch(/^[0-9a-f]{40}$/);
    expect((await viaRouter(engine.routerPort, inst.default_domain)).body).toBe(`built Ahoy at http://site.example.com:8000 boots=3\n`);
    // rollback to the image deployment
    const back = await s.request<Deployment>('POST', `${one}/deployments/${d1.id}/rollback`, { key: w.member.key });
    expect(back.status).toBe(202);
    expect((await settled('site', back.body.data?.id ?? '')).status).toBe('running');
    expect((await viaRouter(engine.routerPort, inst.default_domain)).body).toMatch(/^image Ahoy at .+ boots=4\n$/);

    // stop: nothing serves it any more
    const stopped = await s.request<Deployment>('POST', `${one}/stop`, { key: w.member.key });
    expect(stopped.status, stopped.text).toBe(200);
    expect(stopped.body.data?.status).toBe('stopped');
    expect((await s.request<TemplateInstance>('GET', one, { key: w.member.key })).body.data?.status).toBe('stopped');
    await until('the router to stop serving it', async () => ((await viaRouter(engine.routerPort, inst.default_domain)).status !== 200 ? true : undefined));

    // delete: containers, data volume, routes and logs go
    expect((await s.store.repos.projects.byId(inst.id)) === undefined).toBe(false);
    expect((await s.logStore.usage(inst.id)).lines).toBeGreaterThan(0);
    const del = await s.request('DELETE', one, { key: w.member.key });
    expect(del.status).toBe(200);
    expect((await s.request('GET', one, { key: w.member.key })).status).toBe(404);
    await until('its containers and its volume to go', async () => {
      const containers = await docker.listContainers({ all: true, filters: { label: [`slipway.project=${inst.id}`] } });
      const { Volumes: volumes } = await docker.listVolumes({ filters: { name: [`slipway-vol-${inst.id}`] } });
      return containers.length === 0 && volumes.length === 0 ? true : undefined;
    });
    expect((await viaRouter(engine.routerPort, 'site.example.com')).status).not.toBe(200);
    expect((await s.logStore.usage(inst.id)).lines).toBe(0);
  }, 600_000);

  it('provisions the PostgreSQL database a template declares, wires it, and deletes it with the instance', async () => {
    const { s, w, engine } = fx;
    const made = await s.request<TemplateInstance>('POST', api(), { key: w.member.key, body: { name: 'notes', template_name: 'hello-postgres' } });
    expect(made.status, made.text).toBe(201);
    expect(made.body.data?.databases).toEqual(['notes']);
    const db = await until('its database to run', async () => {
      const d = (await s.request<DatabaseDetail>('GET', `/api/workspaces/${w.slug}/databases/notes`, { key: w.member.key })).body.data;
      return d?.status === 'provisioning' ? undefined : d;
    }, 180_000);
    expect(db.status, db.error ?? '').toBe('running');
    const deployed = await s.request<Deployment>('POST', `${api()}/notes/deploy`, { key: w.member.key, body: { mode: 'image' } });
    expect(deployed.status, deployed.text).toBe(202);
    const d = await settled('notes', deployed.body.data?.id ?? '');
    expect(d.status, d.error ?? '').toBe('running');
    expect((await viaRouter(engine.routerPort, made.body.data?.default_domain ?? '')).body).toBe('stored by the template\n');

    expect((await s.request('DELETE', `${api()}/notes`, { key: w.member.key })).status).toBe(200);
    await until('its database and its server to go', async () => {
      const r = await s.request('GET', `/api/workspaces/${w.slug}/databases/notes`, { key: w.member.key });
      const servers = await docker.listContainers({ all: true, filters: { label: [`slipway.database=${db.id}`] } });
      return r.status === 404 && servers.length === 0 ? true : undefined;
    }, 60_000);
  }, 600_000);

  it('fails a deploy readably when the catalog image is neither here nor pullable (this host reaches no registry)', async () => {
    const { s, w } = fx;
    const made = await s.request<TemplateInstance>('POST', api(), { key: w.member.key, body: { name: 'kuma', template_name: 'uptime-kuma' } });
    expect(made.status, made.text).toBe(201);
    const queued = await s.request<Deployment>('POST', `${api()}/kuma/deploy`, { key: w.member.key, body: { mode: 'image' } });
    expect(queued.status, queued.text).toBe(202);
    const d = await settled('kuma', queued.body.data?.id ?? '');
    expect(d.status).toBe('failed');
    expect(d.error).toMatch(/^The image louislam\/uptime-kuma:\S+ is not on this host and cannot be pulled: .+/);
    expect((await s.request<TemplateInstance>('GET', `${api()}/kuma`, { key: w.member.key })).body.data?.status).toBe('failed');
  }, 300_000);
});
