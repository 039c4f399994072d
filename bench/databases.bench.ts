// Time from `POST …/databases` to `running` (as GET …/databases lists it) through a real `bin/slipway serve`, for each local
// image (PostgreSQL, MariaDB as mysql, Redis), beside the reference: `docker run` of the same
// image with the same environment, a fresh volume and a published port, until the server accepts
// a login with the same official client. Ratio = Slipway's median / the reference's (goal ≤ 1.3).
//
//   npx tsx bench/databases.bench.ts [--rounds 3] [--types postgresql,mysql,redis]   (make bench-databases)
//
// Writes bench/results/databases-<date>.json. Not part of the test suite.
import { randomBytes } from 'node:crypto';
import Docker from 'dockerode';
import { generatePassword, DEFAULT_PORTS, type DatabaseAddress, type DatabaseType } from '../src/domain/database.js';
import { localImage, login, SERVERS } from '../src/modules/databases/servers.js';
import { DockerRuntime } from '../src/adapters/runtime/docker/docker.runtime.js';
import { arg, machine, num, round, sleep, startServe, summary, writeResult } from './support.js';

const GOAL_RATIO = 1.3;
const POLL_MS = 100;

/** Slipway: POST, then GET every POLL_MS until running; the database is deleted afterwards. */
async function throughSlipway(serve: Awaited<ReturnType<typeof startServe>>, slug: string, type: DatabaseType): Promise<number> {
  const name = `bench ${type} ${randomBytes(3).toString('hex')}`;
  const t0 = performance.now();
  const made = await serve.request<{ slug: string }>('POST', `/api/workspaces/${slug}/databases`, { name, type });
  if (made.data === undefined) throw new Error(`not created: ${made.text}`);
  const path = `/api/workspaces/${slug}/databases/${made.data.slug}`;
  for (;;) {
    // the list: GET of one database also measures its server (stats, volume size), which takes a second
    const list = await serve.request<{ slug: string; status: string; error: string | null }[]>('GET', `/api/workspaces/${slug}/databases`);
    const d = list.data?.find((x) => x.slug === made.data?.slug);
    if (d?.status === 'running') break;
    if (d?.status !== 'provisioning') throw new Error(`${type}: ${list.text}`);
    if (performance.now() - t0 > 180_000) throw new Error(`${type}: still provisioning after 180 s`);
    await sleep(POLL_MS);
  }
  const seconds = (performance.now() - t0) / 1000;
  await serve.request('DELETE', path);
  return seconds;
}

/** The reference: `docker run` of the same image as Slipway runs it, then the same login until it works. */
async function dockerRun(docker: Docker, type: DatabaseType): Promise<number> {
  const server = SERVERS[type];
  const password = generatePassword((n) => randomBytes(n));
  const name = `bench-ref-${type}-${randomBytes(3).toString('hex')}`;
  const address: DatabaseAddress = { type, host: '127.0.0.1', port: DEFAULT_PORTS[type], username: type === 'redis' ? 'default' : 'slipway', password, databaseName: 'bench' };
  const port = `${DEFAULT_PORTS[type].toString()}/tcp`;
  const t0 = performance.now();
  const c = await docker.createContainer({
    name,
    Image: localImage(type),
    Env: Object.entries(server.env(address, () => generatePassword((n) => randomBytes(n)))).map(([k, v]) => `${k}=${v}`),
    ...(server.command === undefined ? {} : { Cmd: server.command(address) }),
    ExposedPorts: { [port]: {} },
    HostConfig: { PortBindings: { [port]: [{ HostIp: '127.0.0.1', HostPort: '' }] }, Mounts: [{ Type: 'volume', Source: name, Target: server.dataPath }], Memory: 512 * 1024 * 1024, Init: true },
  });
  try {
    await c.start();
    const info = await c.inspect();
    const hostPort = Number(info.NetworkSettings.Ports[port]?.[0]?.HostPort);
    for (;;) {
      try {
        await login({ ...address, port: hostPort });
        break;
      } catch {
        if (performance.now() - t0 > 180_000) throw new Error(`${type}: no login after 180 s`);
        await sleep(POLL_MS);
      }
    }
    return (performance.now() - t0) / 1000;
  } finally {
    await c.remove({ force: true, v: true }).catch(() => undefined);
    await docker.getVolume(name).remove().catch(() => undefined);
  }
}

async function main(): Promise<void> {
  const rounds = num('rounds', 3);
  const types = arg('types', 'postgresql,mysql,redis').split(',') as DatabaseType[];
  const docker = new Docker();
  for (const t of types) {
    if ((await docker.getImage(localImage(t)).inspect().catch(() => null)) === null) throw new Error(`${localImage(t)} is missing: run make db-images`);
  }
  const serve = await startServe('file:///nonexistent', ['--log-level', 'warn']);
  const results: Record<string, unknown>[] = [];
  try {
    const ws = await serve.request<{ slug: string }[]>('GET', '/api/workspaces');
    const slug = ws.data?.[0]?.slug ?? 'default';
    for (const type of types) {
      const slipway: number[] = [];
      const reference: number[] = [];
      // alternate, so that a machine that slows down mid-run weighs on both
      for (let r = 0; r < rounds; r++) {
        reference.push(await dockerRun(docker, type));
        slipway.push(await throughSlipway(serve, slug, type));
      }
      const s = summary(slipway, 2);
      const ref = summary(reference, 2);
      const ratio = round(s.median / ref.median, 2);
      const row = { type, image: localImage(type), rounds, slipway_seconds: s, docker_run_seconds: ref, ratio, goal_ratio: GOAL_RATIO, met: ratio <= GOAL_RATIO };
      console.log(JSON.stringify(row));
      results.push(row);
    }
  } finally {
    await new DockerRuntime({ docker }).purge({ labels: { 'slipway.instance': serve.instanceId() } }).catch(() => undefined);
    await serve.stop();
  }
  const report = { date: new Date().toISOString().slice(0, 10), machine: await machine(), results };
  const file = writeResult('databases', report);
  console.log(`results: ${file}`);
}

await main();
