// A real ACME CA for tests: Debian's pebble, with pebble-challtestsrv as its DNS (every name
// resolves to 127.0.0.1 unless a test says otherwise). `make test` installs the package
// (scripts/ensure-system.sh). Every port is free-chosen; both processes are killed by stop().
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import { freePort, sleep } from './process.js';
import { makeCa, makeLeaf } from './tls.js';

export interface Pebble {
  /** the ACME directory */
  directoryUrl: string;
  /** PEM of the CA that signed pebble's own HTTPS certificate: what the client trusts for the directory */
  apiCa: string;
  /** PEM of the root that pebble's issued certificates chain to (its management `/roots/0`) */
  issuingRoot(): Promise<string>;
  /** Makes `host` resolve to `address` instead of 127.0.0.1 (undefined: back to the default). */
  resolve(host: string, address: string | undefined): Promise<void>;
  /** what both processes printed, for failure messages */
  output(): string;
  stop(): Promise<void>;
}

export interface PebbleOptions {
  /** where the CA fetches HTTP-01 tokens: the router's plain HTTP port */
  httpPort: number;
  /** scratch directory for pebble's config and certificate */
  dir: string;
  /** lifetime of the certificates it issues; default 90 days, like Let's Encrypt's */
  validitySec?: number;
}

function run(cmd: string, args: string[], env: NodeJS.ProcessEnv, sink: (s: string) => void): ChildProcess {
  const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout.setEncoding('utf8').on('data', sink);
  child.stderr.setEncoding('utf8').on('data', sink);
  child.on('error', (err) => { sink(`${cmd} failed to start: ${err.message}\n`); });
  return child;
}

function get(url: string, ca?: string, method = 'GET', body?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const send = u.protocol === 'https:' ? httpsRequest : httpRequest;
    const req = send(u, { method, agent: false, ...(ca === undefined ? {} : { ca }), timeout: 5_000 }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => { text += d; });
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, body: text }); });
    });
    req.on('timeout', () => req.destroy(new Error(`${url} did not answer`)));
    req.on('error', reject);
    req.end(body);
  });
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => { resolve(); }));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 3_000);
  await exited;
  clearTimeout(timer);
}

export async function startPebble(o: PebbleOptions): Promise<Pebble> {
  let out = '';
  const sink = (s: string) => { out += s; };
  const [dnsPort, challManagement, listen, management, tlsPort] = await Promise.all([freePort(), freePort(), freePort(), freePort(), freePort()]);
  const ca = await makeCa(o.dir, 'Pebble API Test CA');
  const leaf = await makeLeaf(ca, ['localhost'], ['127.0.0.1']);
  const configFile = join(o.dir, 'pebble-config.json');
  writeFileSync(
    configFile,
    JSON.stringify({
      pebble: {
        listenAddress: `127.0.0.1:${listen}`,
        managementListenAddress: `127.0.0.1:${management}`,
        certificate: leaf.certFile,
        privateKey: leaf.keyFile,
        httpPort: o.httpPort,
        // tls-alpn-01 is never chosen by Slipway: nothing listens there.
        tlsPort,
        ocspResponderURL: '',
        externalAccountBindingRequired: false,
        certificateValidityPeriod: o.validitySec ?? 90 * 86_400,
      },
    }),
  );
  // Only challtestsrv's DNS and its management API: the challenges are answered by Slipway's router.
  const chall = run(
    'pebble-challtestsrv',
    ['-defaultIPv4', '127.0.0.1', '-defaultIPv6', '', '-dns01', `127.0.0.1:${dnsPort}`, '-http01', '', '-https01', '', '-tlsalpn01', '', '-management', `127.0.0.1:${challManagement}`],
    {},
    sink,
  );
  const pebble = run('pebble', ['-config', configFile, '-dnsserver', `127.0.0.1:${dnsPort}`], { PEBBLE_VA_NOSLEEP: '1' }, sink);
  const stop = async () => {
    await Promise.all([stopChild(pebble), stopChild(chall)]);
  };
  const directoryUrl = `https://127.0.0.1:${listen}/dir`;
  const challApi = `http://127.0.0.1:${challManagement}`;
  try {
    const deadline = Date.now() + 20_000;
    for (;;) {
      for (const [name, child] of [['pebble', pebble], ['pebble-challtestsrv', chall]] as const) {
        if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${name} exited at start:\n${out}`);
      }
      const dir = await get(directoryUrl, ca.certificatePem).catch(() => undefined);
      const dns = await get(`${challApi}/clear-a`, undefined, 'POST', JSON.stringify({ host: 'probe.invalid.' })).catch(() => undefined);
      if (dir?.status === 200 && dns?.status === 200) break;
      if (Date.now() > deadline) throw new Error(`pebble did not answer at ${directoryUrl} within 20 s:\n${out}`);
      await sleep(100);
    }
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    directoryUrl,
    apiCa: ca.certificatePem,
    issuingRoot: async () => {
      const r = await get(`https://127.0.0.1:${management}/roots/0`, ca.certificatePem);
      if (r.status !== 200) throw new Error(`pebble's /roots/0 answered ${r.status}`);
      return r.body;
    },
    resolve: async (host, address) => {
      const fqdn = host.endsWith('.') ? host : `${host}.`;
      const r =
        address === undefined
          ? await get(`${challApi}/clear-a`, undefined, 'POST', JSON.stringify({ host: fqdn }))
          : await get(`${challApi}/add-a`, undefined, 'POST', JSON.stringify({ host: fqdn, addresses: [address] }));
      if (r.status !== 200) throw new Error(`pebble-challtestsrv refused the DNS change for ${host}: ${r.status} ${r.body}`);
    },
    output: () => out,
    stop,
  };
}
