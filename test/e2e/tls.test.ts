// TLS with ACME through `slipway serve` (the built launcher, --engine docker, nginx router):
// a deployed app and its custom domain get certificates from a real ACME CA (Debian's pebble,
// every name resolving to 127.0.0.1 through pebble-challtestsrv, HTTP-01 validated on the
// router's plain port), and the app answers over HTTPS with SNI on --router-tls-listen. The custom
// domain is proven first by its DNS TXT record (a local DNS server, --dns-servers): only a
// verified domain is routed and gets a certificate.
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RepoRoot } from '../factories/git-server.js';
import { apiClient, purgeInstallation, startServed } from '../factories/served.js';
import { ensureBaseImage } from '../factories/images.js';
import { startPebble, type Pebble } from '../factories/pebble.js';
import { startDnsServer, type TestDns } from '../factories/dns-server.js';
import { httpsGet } from '../factories/tls.js';
import { assertBuilt, freePort, killAll, waitFor, type SlipwayProcess } from '../factories/process.js';

interface Domain {
  id: string;
  domain: string;
  verified: boolean;
  verification: { type: 'TXT'; name: string; value: string } | null;
}

const PROJECT = '/api/workspaces/default/projects/shop';
const CUSTOM = 'shop.example.com';
const DEFAULT_HOST = 'shop-default.apps.example.net';

describe('TLS with ACME through slipway serve', () => {
  let scratch: string;
  let dataDir: string;
  let pebble: Pebble;
  let root: RepoRoot;
  let proc: SlipwayProcess;
  let api: string;
  let tlsPort: number;
  let dns: TestDns;
  let key = '';

  const call = apiClient(() => api, () => key);

  beforeAll(async () => {
    assertBuilt();
    const base = await ensureBaseImage();
    scratch = mkdtempSync(join(tmpdir(), 'slipway-tls-'));
    chmodSync(scratch, 0o755);
    dataDir = join(scratch, 'data');
    mkdirSync(join(scratch, 'pebble'));
    const [apiPort, routerPort] = [await freePort(), await freePort()];
    tlsPort = await freePort();
    pebble = await startPebble({ httpPort: routerPort, dir: join(scratch, 'pebble') });
    const caFile = join(scratch, 'pebble-api-ca.pem');
    writeFileSync(caFile, pebble.apiCa);
    root = await RepoRoot.create();
    const repo = await root.repo('acme/shop');
    await repo.commit('shop', {
      Dockerfile: `FROM ${base}\nCOPY index.html /www/index.html\nCMD ["sh", "-c", "exec httpd -f -p $PORT -h /www"]\n`,
      'index.html': 'the shop, over TLS\n',
    });
    dns = await startDnsServer();
    const served = await startServed({ dataDir, port: apiPort, engine: 'docker', args: [
      '--router-listen', `127.0.0.1:${routerPort.toString()}`,
      '--router-tls-listen', `127.0.0.1:${tlsPort.toString()}`,
      '--router', 'nginx',
      '--router-on-exit', 'stop',
      '--apps-domain', 'apps.example.net',
      '--acme-directory-url', pebble.directoryUrl,
      '--acme-ca-file', caFile,
      '--acme-email', 'ops@example.com',
      '--git-base-url', root.fileUrl,
      '--log-level', 'info',
      '--dns-servers', dns.server,
    ] });
    ({ proc, api } = served);
    key = await served.bootstrapKey();
  }, 120_000);

  afterAll(async () => {
    await proc.stop('SIGTERM');
    await killAll();
    await pebble.stop();
    await dns.close();
    await purgeInstallation(dataDir);
    await root.dispose();
    rmSync(scratch, { recursive: true, force: true });
  }, 120_000);

  it('issues certificates for the default and the custom domain once it is verified, and serves the app over HTTPS', async () => {
    expect((await call('POST', '/api/workspaces/default/projects', { name: 'shop', port: 8080, cpu: '0.25', ram: '0.125' })).status).toBe(201);
    expect((await call('POST', `${PROJECT}/git`, { repo_full_name: 'acme/shop' })).status).toBe(201);
    const domain = await call<Domain>('POST', `${PROJECT}/domains`, { domain: CUSTOM });
    expect(domain.status).toBe(201);
    expect(domain.body.data?.verified).toBe(false);
    // Its owner publishes the TXT record the API shows, and asks for the check.
    const record = domain.body.data?.verification;
    expect(record?.name).toBe(`_slipway-challenge.${CUSTOM}`);
    dns.setTxt(record?.name ?? '', [record?.value ?? '']);
    const verified = await call<Domain>('POST', `${PROJECT}/domains/${domain.body.data?.id ?? ''}/verify`);
    expect(verified.body.data).toMatchObject({ verified: true, verification: null });
    const deployed = await call<{ id: string }>('POST', `${PROJECT}/deploy`);
    expect(deployed.status).toBe(202);
    await waitFor('the deployment to run', async () => {
      const d = (await call<{ status: string }>('GET', `${PROJECT}/deployments/${deployed.body.data?.id ?? ''}`)).body.data;
      if (d?.status === 'failed') throw new Error('the deployment failed');
      return d?.status === 'running' ? true : undefined;
    }, proc, 120_000);

    const listed = (await call<Domain[]>('GET', `${PROJECT}/domains`)).body.data ?? [];
    expect(listed.map((d) => [d.domain, d.verified])).toEqual([[CUSTOM, true]]);

    const ca = await pebble.issuingRoot();
    for (const host of [CUSTOM, DEFAULT_HOST]) {
      const { status, body, issuer } = await waitFor(`HTTPS for ${host}`, async () => httpsGet(tlsPort, host, ca).catch(() => undefined), proc, 60_000);
      expect({ status, body, issuer }).toEqual({ status: 200, body: 'the shop, over TLS\n', issuer: expect.stringMatching(/^Pebble Intermediate CA/) as unknown });
    }
    // No private key in the logs.
    expect(proc.stdout() + proc.stderr()).not.toMatch(/PRIVATE KEY/);
  }, 300_000);
});
