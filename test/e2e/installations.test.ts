// Two installations of Slipway on one Docker Engine (docs/operations.md allows it), each with a
// workspace of the same slug, an app `web` and a Redis database `vault` (host `vault.db`) in it.
// From inside a container of each, the other installation's app and database are out of reach:
// their aliases resolve only to the installation's own containers, and their addresses answer
// nothing. Each still reaches its own by alias. Issue 26, item 3.
// Uses Docker Engine: run under `flock /tmp/slipway-docker.lock`.
import { randomBytes } from 'node:crypto';
import { PassThrough } from 'node:stream';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DatabaseDetail, Database } from '../../src/modules/databases/databases.schema.js';
import type { Deployment } from '../../src/modules/deployments/deployments.schema.js';
import { INSTANCE_LABEL, instanceLabels, workspaceNetworkName } from '../../src/modules/deployments/engine/containers.js';
import { instanceId } from '../../src/store/db.js';
import { deployAndSettle } from '../factories/deployments.js';
import { startDeployFixture, type DeployFixture } from '../factories/engine.js';
import { makeWorkspace, type TestWorkspace } from '../factories/harness.js';
import { ensureDatabaseImages } from '../factories/images.js';
import { waitFor } from '../factories/process.js';

const docker = new Docker();

/** Runs `cmd` in the container; its exit code and its output (stdout and stderr). */
async function execIn(containerId: string, cmd: string[]): Promise<{ code: number; out: string }> {
  const exec = await docker.getContainer(containerId).exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true });
  const stream = await exec.start({ hijack: true, stdin: false });
  const sink = new PassThrough();
  let out = '';
  sink.on('data', (c: Buffer) => (out += c.toString('utf8')));
  docker.modem.demuxStream(stream, sink, sink);
  await new Promise<void>((resolve, reject) => {
    stream.on('end', () => { resolve(); });
    stream.on('close', () => { resolve(); });
    stream.on('error', reject);
  });
  const { ExitCode } = await exec.inspect();
  return { code: ExitCode ?? -1, out };
}

/** The IPv4 addresses a name resolves to inside the container (none when it does not resolve). */
async function resolve(containerId: string, name: string): Promise<string[]> {
  const { out } = await execIn(containerId, ['nslookup', name]);
  const answer = out.split(/Name:\s/).slice(1).join('\n');
  return [...answer.matchAll(/\b(\d{1,3}(?:\.\d{1,3}){3})\b/g)].map((m) => m[1] ?? '').filter((a) => !a.startsWith('127.')).sort();
}

interface Installation {
  fx: DeployFixture;
  w: TestWorkspace;
  instance: string;
  /** the app container's id and its address on its workspace network */
  app: { id: string; address: string };
  /** the Redis server's address on the workspace network */
  vault: { id: string; address: string };
}

const addressOf = async (id: string): Promise<string> => {
  const i = await docker.getContainer(id).inspect();
  const [net] = Object.values(i.NetworkSettings.Networks);
  return net?.IPAddress ?? '';
};

describe('two installations on one engine, with the same workspace slug', () => {
  const slug = `shared-${randomBytes(3).toString('hex')}`;
  const installations: Installation[] = [];

  async function install(page: string): Promise<Installation> {
    // the network sweep every second (with the image sweep), for the upgrade case
    const fx = await startDeployFixture('sqlite', 'acme/web', { engine: { driver: 'node', databases: { readyTimeoutMs: 120_000 }, tune: { imageRetention: { keep: 5, everyMs: 1000 } } } });
    const { s } = fx;
    const w = await makeWorkspace(s, slug);
    await fx.repo.commit('v1', {
      Dockerfile: `FROM ${fx.engine.base}\nCOPY index.html /www/index.html\nCMD ["sh", "-c", "exec httpd -f -p $PORT -h /www"]\n`,
      'index.html': `${page}\n`,
    });
    const project = `/api/workspaces/${w.slug}/projects/web`;
    expect((await s.request('POST', `/api/workspaces/${w.slug}/projects`, { key: w.member.key, body: { name: 'web', port: 8080, cpu: '0.25', ram: '0.125', replicas: 1 } })).status).toBe(201);
    expect((await s.request('POST', `${project}/git`, { key: w.member.key, body: { repo_full_name: 'acme/web' } })).status).toBe(201);
    const made = await s.request<Database>('POST', `/api/workspaces/${w.slug}/databases`, { key: w.member.key, body: { name: 'vault', type: 'redis' } });
    expect(made.status, made.text).toBe(202);
    expect(made.body.data?.host).toBe('vault.db');
    const d = await deployAndSettle<Deployment>(s, w.member.key, project, 120_000);
    expect(d.status, d.error ?? '').toBe('running');
    const end = Date.now() + 150_000;
    let db: DatabaseDetail | undefined;
    while ((db = (await s.request<DatabaseDetail>('GET', `/api/workspaces/${w.slug}/databases/vault`, { key: w.member.key })).body.data)?.status === 'provisioning' && Date.now() < end) {
      await new Promise((res) => setTimeout(res, 250));
    }
    expect(db?.status, db?.error ?? '').toBe('running');
    const [app] = await docker.listContainers({ filters: { label: [`slipway.deployment=${d.id}`] } });
    if (app === undefined || db === undefined) throw new Error('no app container');
    const vaultId = `slipway-db-${db.id}`;
    return {
      fx,
      w,
      instance: await instanceId(s.store),
      app: { id: app.Id, address: await addressOf(app.Id) },
      vault: { id: vaultId, address: await addressOf(vaultId) },
    };
  }

  beforeAll(async () => {
    await ensureDatabaseImages();
    installations.push(await install('installation A'));
    installations.push(await install('installation B'));
  }, 600_000);

  afterAll(async () => {
    for (const i of installations) await i.fx.close();
  }, 120_000);

  it('gives each installation its own network for the workspace, named and labelled with the installation', async () => {
    const [a, b] = installations;
    if (a === undefined || b === undefined) throw new Error('setup failed');
    expect(a.instance).not.toBe(b.instance);
    expect(a.w.slug).toBe(b.w.slug);
    // the API's namespace stays ws-<slug>: the engine's objects are the installation's
    expect((await a.fx.s.request<{ namespace: string }>('GET', `/api/workspaces/${a.w.slug}`, { key: a.w.member.key })).body.data?.namespace).toBe(`ws-${slug}`);
    const networksOf = async (id: string) => Object.keys((await docker.getContainer(id).inspect()).NetworkSettings.Networks);
    const [netA] = await networksOf(a.app.id);
    const [netB] = await networksOf(b.app.id);
    expect(netA).not.toBe(netB);
    expect(await networksOf(a.vault.id)).toEqual([netA]);
    expect(await networksOf(b.vault.id)).toEqual([netB]);
    for (const [i, net] of [[a, netA], [b, netB]] as const) {
      const labels = (await docker.getNetwork(net ?? '').inspect() as { Labels: Record<string, string> }).Labels;
      expect(labels).toMatchObject({ [INSTANCE_LABEL]: i.instance, 'slipway.workspace': i.w.id });
      expect(net).toContain(i.instance.replace(/-/g, '').slice(0, 8));
    }
  });

  it('limits the processes of every app and database container (--pids-limit, default 512)', async () => {
    for (const i of installations) {
      for (const id of [i.app.id, i.vault.id]) expect((await docker.getContainer(id).inspect()).HostConfig.PidsLimit).toBe(512);
    }
  });

  it('lets neither reach the other\'s app or database, by alias or by address; each reaches its own', async () => {
    const [a, b] = installations;
    if (a === undefined || b === undefined) throw new Error('setup failed');
    // (busybox's nslookup asks the engine's DNS; its nc and a static wget resolve no names, so they go by address)
    const http = (from: string, address: string) => execIn(from, ['sh', '-c', `printf 'GET / HTTP/1.0\\r\\n\\r\\n' | timeout 5 nc -w 3 ${address} 8080`]);
    const redisPing = (from: string, address: string) => execIn(from, ['sh', '-c', `printf 'PING\\r\\n' | timeout 5 nc -w 3 ${address} 6379`]);
    for (const [self, other, page] of [[a, b, 'installation A'], [b, a, 'installation B']] as const) {
      // its own, by alias: the aliases name its containers alone, and they answer
      expect(await resolve(self.app.id, 'web')).toEqual([self.app.address]);
      expect(await resolve(self.app.id, 'vault.db')).toEqual([self.vault.address]);
      expect((await http(self.app.id, self.app.address)).out).toContain(page);
      expect((await redisPing(self.app.id, self.vault.address)).out).toContain('NOAUTH');
      // the other's aliases do not lead to the other's containers
      expect(await resolve(self.app.id, 'web')).not.toContain(other.app.address);
      expect(await resolve(self.app.id, 'vault.db')).not.toContain(other.vault.address);
      // the other's, by address: nothing answers
      const web = await http(self.app.id, other.app.address);
      expect(web.out).not.toContain('installation');
      expect((await redisPing(self.app.id, other.vault.address)).out).not.toContain('NOAUTH');
      // and from its database's container either
      const fromDb = await execIn(self.vault.id, ['timeout', '5', 'redis-cli', '-h', other.vault.address, '-p', '6379', '--no-auth-warning', 'ping']);
      expect(fromDb.out).not.toContain('NOAUTH');
      expect((await execIn(self.vault.id, ['timeout', '5', 'redis-cli', '-h', 'vault.db', '-p', '6379', '--no-auth-warning', 'ping'])).out).toContain('NOAUTH');
    }
  }, 120_000);

  it('stays apart while networks are being created on the engine (Docker lifts its own isolation for an instant at each)', async () => {
    const [a, b] = installations;
    if (a === undefined || b === undefined) throw new Error('setup failed');
    // each installation's bridges are named for the guard, whose rules are in the mangle table
    for (const i of [a, b]) {
      const [net] = Object.keys((await docker.getContainer(i.app.id).inspect()).NetworkSettings.Networks);
      const options = (await docker.getNetwork(net ?? '').inspect() as { Options: Record<string, string> }).Options;
      expect(options['com.docker.network.bridge.name']).toMatch(/^slw-[0-9a-f]{10}$/);
    }
    // A's app pings B's app 100 times a second while another tenant's networks come and go: without
    // the guard, each creation let replies through (docs/security.md#network-isolation)
    const pinging = execIn(a.app.id, ['ping', '-c', '600', '-i', '0.01', '-W', '1', b.app.address]);
    for (let n = 0; n < 12; n++) {
      const net = await docker.createNetwork({ Name: `churn-${randomBytes(4).toString('hex')}`, Driver: 'bridge' });
      await net.remove();
    }
    const { out } = await pinging;
    expect(out).toMatch(/600 packets transmitted, 0 packets received/);
  }, 120_000);

  it('after an upgrade, attaches the containers on an older `ws-<slug>` network to the renamed one with their DNS names, and removes the old network once unused', async () => {
    const [a] = installations;
    if (a === undefined) throw new Error('setup failed');
    const { s, engine } = a.fx;
    const w2 = await makeWorkspace(s, `legacy-${randomBytes(3).toString('hex')}`);
    const legacy = `ws-${w2.slug}`;
    const labels = instanceLabels(a.instance);
    // what an older version left: its network by slug alone, and a server on it with an alias
    await engine.runtime.ensureNetwork({ name: legacy, workspace: w2.id, labels });
    const spec = { image: engine.base, env: {}, owner: { workspace: w2.id }, labels, cpu: 0.1, memoryBytes: 32 * 1024 * 1024, restart: { kind: 'never' as const } };
    const old = await engine.runtime.run({ ...spec, name: `${w2.slug}-old`, network: legacy, aliases: ['old.db'], command: ['sh', '-c', 'mkdir -p /www && echo older > /www/index.html && exec httpd -f -p 8080 -h /www'] });
    const current = await engine.orchestrator.workspaceNetwork({ id: w2.id, slug: w2.slug });
    expect(current).toBe(workspaceNetworkName(a.instance, w2.slug));
    const moved = await engine.runtime.inspect(old.id);
    expect(Object.keys(moved?.networks ?? {}).sort()).toEqual([current, legacy].sort());
    expect(moved?.aliases?.[current]).toContain('old.db');
    // a container made now, on the current network alone, reaches it by its old name
    const probe = await engine.runtime.run({ ...spec, name: `${w2.slug}-new`, network: current, command: ['sleep', '120'] });
    expect(await resolve(probe.id, 'old.db')).toEqual([moved?.networks[current]]);
    expect((await execIn(probe.id, ['sh', '-c', `printf 'GET / HTTP/1.0\\r\\n\\r\\n' | timeout 5 nc -w 3 ${moved?.networks[current] ?? ''} 8080`])).out).toContain('older');
    // once nothing uses the old network, the reconciler's sweep removes it; the current one stays
    await engine.runtime.remove(old.id);
    await waitFor('the old network to go', async () => ((await docker.listNetworks({ filters: { name: [legacy] } })).some((n) => n.Name === legacy) ? undefined : true), undefined, 30_000);
    expect((await docker.listNetworks({ filters: { name: [current] } })).map((n) => n.Name)).toContain(current);
    await engine.runtime.remove(probe.id);
  }, 120_000);
});
