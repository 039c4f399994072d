// kill -9 of `slipway serve` in the middle of a build (issue 4's test list), while an app prints
// (issue 11: its output is collected once, in order, across the crash) and while a database is
// provisioned (issue 12: nothing stays `provisioning`; a crashed server is restarted): the built launcher
// as a child process, with the Docker engine and the nginx router, on a temp data directory.
// While Slipway is down its nginx (detached, in its own process group) keeps serving the running
// deployment; the next start on the same data directory adopts that nginx, fails the interrupted
// deployment and leaves nothing in progress. Needs `make build`, a Docker
// Engine, nginx and git (make test provides them).
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { RepoRoot, type TestRepo } from '../factories/git-server.js';
import { apiClient, probeDuring, probeRouter, purgeInstallation, startServed } from '../factories/served.js';
import { ensureBaseImage, ensureDatabaseImages, releaseTestRun } from '../factories/images.js';
import { assertBuilt, freePort, killAll, sleep, waitFor, type SlipwayProcess } from '../factories/process.js';
import { inProgress } from '../factories/deployments.js';
import type { Deployment } from '../../src/modules/deployments/deployments.schema.js';
import type { DatabaseDetail, Database } from '../../src/modules/databases/databases.schema.js';

const HOST = 'hello-default.localhost';
const PROJECT = '/api/workspaces/default/projects/hello';
/** the slow build step, recognisable in the build log and in the engine's container list */
// (not ending with the sleep: a shell may exec its last command, and the step's process would
// lose the text the test looks for)
const SLOW_STEP = 'RUN echo slipway-crash-test && sleep 30 && echo slept';

const app = (base: string, text: string, slowStep = '') => ({
  Dockerfile: `FROM ${base}\n${slowStep}COPY index.html /www/index.html\nCMD ["sh", "-c", "exec httpd -f -p $PORT -h /www"]\n`,
  'index.html': `${text}\n`,
});

const viaRouter = (port: number) => probeRouter(port, HOST);

/** How many live processes have `text` in their command line. */
function processesRunning(text: string): number {
  return readdirSync('/proc').filter((pid) => {
    if (!/^\d+$/.test(pid) || !alive(Number(pid))) return false;
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(text);
    } catch {
      return false;
    }
  }).length;
}

/** Is `pid` a live (not zombie) process? */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid.toString()}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

/** The nginx master started for `routerDir`, from its pid file, when it still runs. */
function nginxMaster(routerDir: string): number | undefined {
  const pidFile = join(routerDir, 'nginx.pid');
  if (!existsSync(pidFile)) return undefined;
  const pid = Number.parseInt(readFileSync(pidFile, 'utf8').trim(), 10);
  if (!Number.isInteger(pid) || pid <= 1 || !alive(pid)) return undefined;
  let cmdline = '';
  try {
    cmdline = readFileSync(`/proc/${pid.toString()}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch {
    return undefined;
  }
  return cmdline.includes('nginx: master process') && cmdline.includes(routerDir) ? pid : undefined;
}

describe('kill -9 of slipway serve in the middle of a build', () => {
  let base: string;
  let root: RepoRoot;
  let repo: TestRepo;
  let dataDir: string;
  let routerDir: string;
  let apiPort: number;
  let routerPort: number;
  let args: string[];
  let api: string;
  let key = '';
  let proc: SlipwayProcess | undefined;

  const call = apiClient(() => api, () => key);

  async function deployment(id: string): Promise<Deployment> {
    const r = await call<Deployment>('GET', `${PROJECT}/deployments/${id}`);
    if (r.body.data === undefined) throw new Error(`GET deployment ${id}: ${r.status.toString()} ${r.body.error ?? ''}`);
    return r.body.data;
  }

  async function deploymentStatuses(): Promise<string[]> {
    const r = await call<{ deployments: Deployment[] }>('GET', `${PROJECT}/deployments`);
    return (r.body.data?.deployments ?? []).map((d) => d.status);
  }

  async function serve(extra: string[] = []): Promise<SlipwayProcess> {
    return (await startServed({ dataDir, port: apiPort, engine: 'docker', args: [...args, ...extra] })).proc;
  }

  /** The build log's lines, replayed over the WebSocket until `[END]`. */
  function buildLog(id: string): Promise<string[]> {
    return new Promise((resolve, reject) => {
      const frames: string[] = [];
      const ws = new WebSocket(`${api.replace('http', 'ws')}${PROJECT}/deployments/${id}/logs`, { headers: { 'x-api-key': key } });
      ws.on('message', (m: Buffer) => frames.push(m.toString('utf8')));
      ws.on('close', () => {
        resolve(frames);
      });
      ws.on('error', reject);
    });
  }

  /** Resolves once the build log shows the slow step running inside the engine. */
  function untilSlowStepRuns(id: string): Promise<string[]> {
    return new Promise((resolve, reject) => {
      const frames: string[] = [];
      let atSlowStep = false;
      const url = `${api.replace('http', 'ws')}${PROJECT}/deployments/${id}/logs`;
      const ws = new WebSocket(url, { headers: { 'x-api-key': key } });
      const timer = setTimeout(() => {
        ws.terminate();
        reject(new Error(`the slow build step did not start; build log so far:\n${frames.join('\n')}`));
      }, 60_000);
      ws.on('message', (m: Buffer) => {
        const line = m.toString('utf8');
        frames.push(line);
        if (/^Step \d+\/\d+ : /.test(line)) atSlowStep = line.endsWith(` : ${SLOW_STEP}`);
        // the step's own output: it runs now (whichever builder the engine uses)
        else if (atSlowStep && line === 'slipway-crash-test') {
          clearTimeout(timer);
          ws.terminate();
          resolve(frames);
        }
      });
      ws.on('close', () => {
        clearTimeout(timer);
        reject(new Error(`the build log ended before the slow step ran:\n${frames.join('\n')}`));
      });
      ws.on('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
    });
  }

  beforeAll(async () => {
    assertBuilt();
    base = await ensureBaseImage();
    root = await RepoRoot.create();
    repo = await root.repo('acme/hello');
    await repo.commit('first version', app(base, 'hello v1'));
    dataDir = mkdtempSync(join(tmpdir(), 'slipway-crash-'));
    // like a ./data made under the usual umask: nginx's workers (nobody) must reach router/
    chmodSync(dataDir, 0o755);
    routerDir = join(dataDir, 'router');
    apiPort = await freePort();
    routerPort = await freePort();
    api = `http://127.0.0.1:${apiPort.toString()}`;
    args = [
      '--router-listen', `127.0.0.1:${routerPort.toString()}`,
      '--router', 'nginx',
      '--git-base-url', root.fileUrl,
      '--health-timeout', '30',
      '--shutdown-grace', '1',
      '--log-level', 'warn',
    ];
  }, 120_000);

  afterAll(async () => {
    // SIGTERM stops the nginx of a server that still runs; one left by a kill is stopped here.
    await proc?.stop('SIGTERM');
    await killAll();
    const pid = nginxMaster(routerDir);
    if (pid !== undefined) {
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {
        // gone already
      }
      await waitFor('the nginx left behind to exit', () => (alive(pid) ? undefined : true));
    }
    await purgeInstallation(dataDir);
    // the base image and the killed build's leftovers (they inherit the test run's label)
    await releaseTestRun();
    await root.dispose();
    rmSync(dataDir, { recursive: true, force: true });
    expect(nginxMaster(routerDir)).toBeUndefined();
  }, 120_000);

  it('fails the interrupted deployment on restart, and the running app keeps serving meanwhile', async () => {
    // First start: bootstrap, a project deployed from the first commit.
    proc = await serve();
    key = await waitFor('the bootstrap key', () => /svc_sk_[0-9a-f]{40}/.exec(proc?.stdout() ?? '')?.[0], proc);
    expect((await call('POST', '/api/workspaces/default/projects', { name: 'hello', port: 8080, cpu: '0.25', ram: '0.125' })).status).toBe(201);
    expect((await call('POST', `${PROJECT}/git`, { repo_full_name: 'acme/hello' })).status).toBe(201);
    const first = await call<Deployment>('POST', `${PROJECT}/deploy`);
    expect(first.status).toBe(202);
    const firstId = first.body.data?.id ?? '';
    const live = await waitFor('the first deployment to settle', async () => {
      const d = await deployment(firstId);
      return inProgress(d.status) ? undefined : d;
    }, proc, 120_000);
    expect(live, live.error ?? '').toMatchObject({ status: 'running', error: null });
    expect(await viaRouter(routerPort)).toEqual({ status: 200, body: 'hello v1\n' });
    const master = nginxMaster(routerDir);
    expect(master).toBeDefined();

    // A second commit whose build takes a while; kill -9 while it runs.
    await repo.commit('slow version', app(base, 'hello v2', `${SLOW_STEP}\n`));
    const second = await call<Deployment>('POST', `${PROJECT}/deploy`);
    expect(second.status).toBe(202);
    const secondId = second.body.data?.id ?? '';
    await waitFor('the second deployment to be building', async () => ((await deployment(secondId)).status === 'building' ? true : undefined), proc, 60_000);
    await untilSlowStepRuns(secondId);
    expect((await deployment(secondId)).status).toBe('building');
    expect(processesRunning('slipway-crash-test')).toBeGreaterThan(0);
    expect(await proc.stop('SIGKILL')).toMatchObject({ signal: 'SIGKILL' });

    // Slipway is down: its nginx is not, and keeps serving the first version.
    expect(nginxMaster(routerDir)).toBe(master);
    const answers: { status: number; body: string }[] = [];
    for (let i = 0; i < 20; i++) {
      answers.push(await viaRouter(routerPort));
      await sleep(50);
    }

    // Restart on the same data directory, while a client keeps asking through the router.
    const { answers: during, result: restarted } = await probeDuring(() => viaRouter(routerPort), 20, () => serve());
    proc = restarted;
    expect(answers.filter((a) => a.status !== 200 || a.body !== 'hello v1\n')).toEqual([]);
    expect(during.length).toBeGreaterThan(0);
    expect(during.filter((a) => a.status !== 200 || a.body !== 'hello v1\n')).toEqual([]);
    // the same nginx, adopted rather than replaced
    expect(nginxMaster(routerDir)).toBe(master);

    const interrupted = await deployment(secondId);
    expect(interrupted.status).toBe('failed');
    expect(interrupted.error).toMatch(/^Interrupted/);
    expect(await deployment(firstId)).toMatchObject({ status: 'running', error: null });
    expect(await deploymentStatuses()).toEqual(['failed', 'running']);
    // The engine dropped the build whose client went away: no process runs the slow step any more
    // (a build container of the classic builder, or a BuildKit step, both show on the host).
    await waitFor('the engine to drop the killed build', () => (processesRunning('slipway-crash-test') === 0 ? true : undefined), proc);
    // and it stays so: nothing is picked up again or left in progress
    await sleep(1_500);
    expect((await deploymentStatuses()).filter((s) => inProgress(s))).toEqual([]);
    expect(await viaRouter(routerPort)).toEqual({ status: 200, body: 'hello v1\n' });
    const project = await call<{ status: string }>('GET', PROJECT);
    expect(project.body.data?.status).toBe('running');
  }, 240_000);

  it('SIGTERM interrupts a build after the grace period, exits, and leaves nginx serving for the next start', async () => {
    // Slipway still runs from the test above, serving v1; the repository's head is the slow build.
    const master = nginxMaster(routerDir);
    expect(master).toBeDefined();
    const third = await call<Deployment>('POST', `${PROJECT}/deploy`);
    expect(third.status).toBe(202);
    const thirdId = third.body.data?.id ?? '';
    await untilSlowStepRuns(thirdId);

    // --shutdown-grace 1: the 30 s build step is cancelled and Slipway exits cleanly long before it ends.
    const stopping = proc?.stop('SIGTERM');
    expect(await stopping).toEqual({ code: 0, signal: null });
    // --router-on-exit keep (the default): nginx was released, not stopped, and serves v1.
    expect(nginxMaster(routerDir)).toBe(master);
    for (let i = 0; i < 10; i++) expect(await viaRouter(routerPort)).toEqual({ status: 200, body: 'hello v1\n' });

    // The stopping process failed the deployment itself: its build log ends with the reason.
    proc = await serve(['--router-on-exit', 'stop']);
    expect(nginxMaster(routerDir)).toBe(master);
    const d = await deployment(thirdId);
    expect(d).toMatchObject({ status: 'failed', error: 'Interrupted: Slipway stopped while this deployment was in progress.' });
    const log = await buildLog(thirdId);
    expect(log.slice(-2)).toEqual(['[failed] Interrupted: Slipway stopped while this deployment was in progress.', '[END]']);
    expect((await deploymentStatuses()).filter((st) => inProgress(st))).toEqual([]);
    expect(await viaRouter(routerPort)).toEqual({ status: 200, body: 'hello v1\n' });

    // --router-on-exit stop: nginx goes with Slipway, and the router port stops answering.
    expect(await proc.stop('SIGTERM')).toEqual({ code: 0, signal: null });
    expect(nginxMaster(routerDir)).toBeUndefined();
    expect((await viaRouter(routerPort)).status).toBe(0);
  }, 240_000);

  it("collects an app's output across a kill -9 of Slipway: every line once, in order", async () => {
    // The app prints a numbered line every 10 ms for a few seconds, then serves on.
    const n = 500;
    await repo.commit('chatty version', {
      Dockerfile: `FROM ${base}\nCMD ["sh", "-c", "mkdir -p /www && echo chatty > /www/index.html && httpd -f -p $PORT -h /www & i=0; while [ $i -lt ${n.toString()} ]; do i=$((i+1)); echo tick $i; sleep 0.01; done; wait"]\n`,
    });
    proc = await serve();
    const deployed = await call<Deployment>('POST', `${PROJECT}/deploy`);
    expect(deployed.status).toBe(202);
    const id = deployed.body.data?.id ?? '';
    const ticks = async (): Promise<string[]> => {
      const out: string[] = [];
      let cursor: string | null = null;
      do {
        const q: string = `stream=stdout&deployment_id=${id}&direction=asc&limit=1000${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`;
        const r = await call<{ entries: { message: string }[]; next_cursor: string | null }>('GET', `${PROJECT}/logs?${q}`);
        out.push(...(r.body.data?.entries ?? []).map((e) => e.message));
        cursor = r.body.data?.next_cursor ?? null;
      } while (cursor !== null);
      return out;
    };
    await waitFor('the first ticks stored', async () => ((await ticks()).length >= 50 ? true : undefined), proc, 120_000);
    expect(await proc.stop('SIGKILL')).toMatchObject({ signal: 'SIGKILL' });
    // the app goes on printing while Slipway is down
    await sleep(1000);
    proc = await serve(['--router-on-exit', 'stop']);
    const all = await waitFor('every tick stored', async () => {
      const t = await ticks();
      return t.length >= n ? t : undefined;
    }, proc, 120_000);
    await sleep(1500);
    expect(await ticks()).toEqual(Array.from({ length: n }, (_, i) => `tick ${(i + 1).toString()}`));
    expect(all.length).toBe(n);
  }, 240_000);

  it('leaves no database stuck in provisioning after a kill -9 mid-provisioning, and a server that crashes is restarted with its data', async () => {
    // MariaDB initialises its data directory for a few seconds: a window to kill Slipway in
    await ensureDatabaseImages();
    if (proc === undefined || proc.exit() !== null) proc = await serve();
    const made = await call<Database>('POST', '/api/workspaces/default/databases', { name: 'orders', type: 'mysql' });
    expect(made.status, JSON.stringify(made.body)).toBe(202);
    const created = made.body.data;
    if (created === undefined) throw new Error('no record');
    const docker = new Docker();
    const container = docker.getContainer(`slipway-db-${created.id}`);
    await waitFor('its container to exist', async () => ((await container.inspect().catch(() => null)) === null ? undefined : true), proc, 120_000);
    const before = await call<DatabaseDetail>('GET', '/api/workspaces/default/databases/orders');
    expect(before.body.data?.status).toBe('provisioning');
    expect(await proc.stop('SIGKILL')).toMatchObject({ signal: 'SIGKILL' });

    proc = await serve(['--router-on-exit', 'stop']);
    const d = await waitFor('the database to settle', async () => {
      const r = await call<DatabaseDetail>('GET', '/api/workspaces/default/databases/orders');
      return r.body.data?.status === 'provisioning' ? undefined : r.body.data;
    }, proc, 180_000);
    expect(d.status, d.error ?? '').toBe('running');
    // the same container, taken up again, not a second server
    const servers = await docker.listContainers({ all: true, filters: { label: [`slipway.database=${created.id}`] } });
    expect(servers.map((c) => c.Names[0])).toEqual([`/slipway-db-${created.id}`]);
    const url = (d.external_connection_string ?? '').replace('********', created.password);
    const conn = await mysql.createConnection({ uri: url, connectTimeout: 10_000 });
    try {
      await conn.query('create table kept (v varchar(50))');
      await conn.query("insert into kept values ('before the crash')");
    } finally {
      await conn.end();
    }

    // the server itself crashes: the engine starts it again, on its volume, and the record says so
    const exec = await container.exec({ Cmd: ['bash', '-c', 'kill -9 -1'], AttachStdout: true, AttachStderr: true });
    await exec.start({ hijack: true, stdin: false }).catch(() => undefined);
    const after = await waitFor('the engine to restart the server', async () => {
      const r = await call<DatabaseDetail>('GET', '/api/workspaces/default/databases/orders');
      const h = r.body.data?.health;
      return h !== null && h !== undefined && h.restarts >= 1 && h.status === 'running' ? r.body.data : undefined;
    }, proc, 60_000);
    expect(after.status).toBe('running');
    // (the engine may publish another host port after a restart: the record follows, so read it again)
    const again = await waitFor('a login after the restart', async () => {
      const now = (await call<DatabaseDetail>('GET', '/api/workspaces/default/databases/orders')).body.data;
      const c = await mysql.createConnection({ uri: (now?.external_connection_string ?? '').replace('********', created.password), connectTimeout: 5_000 }).catch(() => undefined);
      if (c === undefined) return undefined;
      try {
        const [rows] = await c.query('select v from kept');
        return (rows as { v: string }[]).map((r) => r.v);
      } finally {
        await c.end();
      }
    }, proc, 60_000);
    expect(again).toEqual(['before the crash']);
  }, 300_000);
});
