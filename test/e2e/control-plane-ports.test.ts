import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFile } from 'node:fs/promises';
import { DEFAULT_NETWORK_POOL, freeSubnet, routedSubnets } from '../../src/adapters/runtime/docker/network-pool.js';
import { makeProject, makeWorkspace, startTestServer, type TestServer } from '../factories/harness.js';
import { ensureBaseImage, releaseTestRun, RUN_LABEL, testRunId } from '../factories/images.js';

/**
 * Issue 26 item 8, as the tenant did it: a container on a workspace network (a subnet of the
 * network pool) asks the host's API port for /metrics, which named every tenant.
 */
describe('tenant containers and the control plane\'s ports', () => {
  const docker = new Docker();
  const suffix = Date.now().toString(36);
  let network: Docker.Network;
  let gateway = '';
  let image = '';
  let guarded: TestServer;
  let open: TestServer;

  beforeAll(async () => {
    image = await ensureBaseImage(docker);
    // the engine's networks and the host's own interfaces (a bridge the engine lost on the pool's subnet broke this once)
    const used = [...(await docker.listNetworks()).flatMap((n) => (n.IPAM?.Config ?? []).map((c) => c.Subnet ?? '')).filter((x) => x !== ''), ...routedSubnets(await readFile('/proc/net/route', 'utf8').catch(() => ''))];
    const subnet = freeSubnet(DEFAULT_NETWORK_POOL, used);
    if (subnet === null) throw new Error('the test network pool is full');
    // the host's address on the network: the subnet's first
    const base = subnet.split('/')[0] ?? '';
    gateway = base.replace(/\.0$/, '.1');
    network = await docker.createNetwork({
      Name: `slipway-tenant-probe-${suffix}`,
      Driver: 'bridge',
      IPAM: { Driver: 'default', Config: [{ Subnet: subnet, Gateway: gateway }] },
      Labels: { [RUN_LABEL]: testRunId() },
    });
    // Both listen on every interface, as `slipway serve` does by default (--listen :3000).
    guarded = await startTestServer('sqlite', { host: '0.0.0.0', tenantNetworks: [DEFAULT_NETWORK_POOL.cidr] });
    open = await startTestServer('sqlite', { host: '0.0.0.0', tenantNetworks: [] });
    for (const s of [guarded, open]) {
      const w = await makeWorkspace(s);
      await makeProject(s, w);
    }
  }, 120_000);

  afterAll(async () => {
    // undefined when the setup failed before starting them
    await (guarded as TestServer | undefined)?.close();
    await (open as TestServer | undefined)?.close();
    await network.remove().catch(() => undefined);
    await releaseTestRun(docker);
  });

  /** What a container on the workspace network gets from the host at `port`: the body, or `FAILED`. */
  async function fromTenant(port: string, path: string): Promise<string> {
    const container = await docker.createContainer({
      Image: image,
      // busybox's wget crashes in this static build; nc speaks HTTP/1.0 well enough
      Cmd: ['sh', '-c', `printf 'GET ${path} HTTP/1.0\\r\\nHost: slipway\\r\\n\\r\\n' | nc -w 5 ${gateway} ${port} | grep . || echo FAILED`],
      Labels: { [RUN_LABEL]: testRunId() },
      HostConfig: { NetworkMode: network.id },
      // a terminal: its logs come as written, not in multiplexed frames
      Tty: true,
    });
    try {
      await container.start();
      await container.wait();
      const logs = await container.logs({ stdout: true, stderr: true });
      return logs.toString('utf8');
    } finally {
      await container.remove({ force: true });
    }
  }

  it('a container on a workspace network cannot reach the API on the host; the loopback can', async () => {
    const port = new URL(guarded.url).port;
    // control: the same container reaches a listener that does not refuse tenant networks
    const control = await fromTenant(new URL(open.url).port, '/healthz');
    expect(control, control).toContain('"status":"ok"');
    const got = await fromTenant(port, '/healthz');
    expect(got).toContain('FAILED');
    expect(got).not.toContain('"status"');
    expect(await fromTenant(port, '/metrics')).not.toContain('slipway_');
    // the operator, on the host, still reaches both
    expect((await guarded.request('GET', '/healthz')).status).toBe(200);
    expect(guarded.logs.some((l) => l.includes('a connection from a tenant network was refused'))).toBe(true);
  }, 60_000);

  it('the metrics listener is on the loopback only: the container does not reach it', async () => {
    const port = new URL(open.metricsUrl).port;
    expect(await fromTenant(port, '/metrics')).toContain('FAILED');
    expect((await fetch(open.metricsUrl)).status).toBe(200);
  }, 60_000);
});
