// Two `slipway serve --engine docker` processes on one store (the same SQLite data directory, or
// one PostgreSQL database): only one runs the deploy engine, the other serves the API as a
// standby, and takes the engine (and the nginx router it leaves running) over when the first one
// stops. The apps answer through the router all along, and the standby streams the lines the
// leader's collector stored (issue 11).
import { chmodSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { RepoRoot, type TestRepo } from '../factories/git-server.js';
import { freshDatabase, STORE_KINDS, type TestDatabase } from '../factories/stores.js';
import { apiClient, probeDuring, probeRouter, purgeInstallation, startServed } from '../factories/served.js';
import { ensureBaseImage } from '../factories/images.js';
import { assertBuilt, freePort, killAll, waitFor, type SlipwayProcess } from '../factories/process.js';
import { settled } from '../factories/deployments.js';
import type { Deployment } from '../../src/modules/deployments/deployments.schema.js';

const HOST = 'hello-default.localhost';
const PROJECT = '/api/workspaces/default/projects/hello';

const viaRouter = (port: number) => probeRouter(port, HOST);

/** The page, and (from v2 on) a few numbered lines on stdout as the app starts. */
const app = (base: string, text: string) => ({
  Dockerfile: `FROM ${base}\nCOPY index.html /www/index.html\nCMD ["sh", "-c", "for i in 1 2 3 4 5; do echo ${text} line $i; done; exec httpd -f -p $PORT -h /www"]\n`,
  'index.html': `${text}\n`,
});

describe.each(STORE_KINDS)('two Slipway processes on one store (%s): one engine, one standby that takes over', (kind) => {
  let base: string;
  let root: RepoRoot;
  let repo: TestRepo;
  let dataDir: string;
  let routerPort: number;
  let database: TestDatabase | undefined;
  let key = '';
  const procs: { proc: SlipwayProcess; api: string }[] = [];

  async function serve(extra: string[] = []): Promise<{ proc: SlipwayProcess; api: string }> {
    const { proc, api } = await startServed({
      // one data directory (the secret key) for both processes; the PostgreSQL store when there is one
      dataDir,
      ...(database === undefined ? {} : { database }),
      engine: 'docker',
      args: ['--router-listen', `127.0.0.1:${routerPort.toString()}`, '--router', 'nginx', '--git-base-url', root.fileUrl, '--log-level', 'info', ...extra],
    });
    const started = { proc, api };
    procs.push(started);
    return started;
  }

  const call = <T>(api: string, method: string, path: string, body?: unknown) => apiClient(() => api, () => key)<T>(method, path, body);

  async function deployVia(api: string, proc: SlipwayProcess): Promise<Deployment> {
    const queued = await call<Deployment>(api, 'POST', `${PROJECT}/deploy`);
    expect(queued.status).toBe(202);
    return settled(async () => (await call<Deployment>(api, 'GET', `${PROJECT}/deployments/${queued.body.data?.id ?? ''}`)).body.data, 'the deployment to settle', 120_000, proc);
  }

  beforeAll(async () => {
    assertBuilt();
    base = await ensureBaseImage();
    root = await RepoRoot.create();
    repo = await root.repo('acme/hello');
    await repo.commit('v1', app(base, 'hello v1'));
    dataDir = mkdtempSync(join(tmpdir(), 'slipway-standby-'));
    chmodSync(dataDir, 0o755);
    routerPort = await freePort();
    if (kind === 'postgres') database = await freshDatabase('postgres');
  }, 120_000);

  afterAll(async () => {
    for (const { proc } of procs) await proc.stop('SIGTERM');
    await killAll();
    // The last process stopped its nginx: none is left serving from this data directory.
    const left = readdirSync('/proc').filter((pid) => /^\d+$/.test(pid) && (() => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').includes(`nginx: master process`) && readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(dataDir);
      } catch {
        return false;
      }
    })());
    for (const pid of left) process.kill(Number(pid), 'SIGQUIT');
    expect(left).toEqual([]);
    await purgeInstallation(dataDir, database?.url);
    await root.dispose();
    rmSync(dataDir, { recursive: true, force: true });
    await database?.drop();
  }, 120_000);

  it('the standby queues work for the leader, streams the lines the leader collected, then takes the engine and the router over without a failed request', async () => {
    const a = await serve();
    key = await waitFor('the bootstrap key', () => /svc_sk_[0-9a-f]{40}/.exec(a.proc.stdout())?.[0], a.proc);
    expect((await call(a.api, 'POST', '/api/workspaces/default/projects', { name: 'hello', port: 8080, cpu: '0.25', ram: '0.125' })).status).toBe(201);
    expect((await call(a.api, 'POST', `${PROJECT}/git`, { repo_full_name: 'acme/hello' })).status).toBe(201);
    expect(await deployVia(a.api, a.proc)).toMatchObject({ status: 'running', error: null });

    // A second process on the same store starts as a standby: no engine, no router of its own.
    // (It hands over to no one: its nginx stops with it at the end.)
    const b = await serve(['--router-on-exit', 'stop']);
    await waitFor('the standby to say so', () => (b.proc.stdout().includes('standby: another Slipway process runs the deploy engine') ? true : undefined), b.proc);
    // The standby's live tail, open before the deploy.
    const frames: string[] = [];
    const live = new WebSocket(`${b.api.replace('http', 'ws')}${PROJECT}/live-logs?tail=0&format=json`, { headers: { 'x-api-key': key } });
    live.on('message', (m: Buffer) => frames.push(m.toString('utf8')));
    await new Promise<void>((resolve, reject) => { live.once('open', () => { resolve(); }); live.once('error', reject); });
    // A deployment asked of the standby is built and rolled out by the leader.
    await repo.commit('v2', app(base, 'hello v2'));
    const v2 = await deployVia(b.api, b.proc);
    expect(v2).toMatchObject({ status: 'running', error: null });
    // What the leader's collector stored reaches the standby's live tail and its log routes.
    const printed = [1, 2, 3, 4, 5].map((i) => `hello v2 line ${i.toString()}`);
    const stdoutOf = (entries: { stream: string; message: string; deployment_id: string }[]) => entries.filter((e) => e.stream === 'stdout' && e.deployment_id === v2.id).map((e) => e.message);
    await waitFor('the standby to stream the new lines', () => (stdoutOf(frames.map((f) => JSON.parse(f) as { stream: string; message: string; deployment_id: string })).length >= 5 ? true : undefined), b.proc, 30_000);
    live.close();
    expect(stdoutOf(frames.map((f) => JSON.parse(f) as { stream: string; message: string; deployment_id: string }))).toEqual(printed);
    const stored = await call<{ entries: { stream: string; message: string; deployment_id: string }[] }>(b.api, 'GET', `${PROJECT}/logs?stream=stdout&direction=asc`);
    expect(stdoutOf(stored.body.data?.entries ?? [])).toEqual(printed);
    expect(await viaRouter(routerPort)).toEqual({ status: 200, body: 'hello v2\n' });
    // The standby's status view reads the pods from the engine, as the leader's does.
    const status = await call<{ pods: { ready: number; total: number; items: { name: string; status: string }[] } }>(b.api, 'GET', `${PROJECT}/status`);
    expect(status.status).toBe(200);
    expect(status.body.data?.pods).toMatchObject({ ready: 1, total: 1, items: [{ status: 'Running' }] });
    // A restart asked of the standby is run by the leader's reconciler: a fresh container takes over.
    const before = status.body.data?.pods.items.map((p) => p.name) ?? [];
    expect((await call(b.api, 'POST', `${PROJECT}/restart`)).status).toBe(202);
    const pods = (api: string) => call<{ pods: { ready: number; items: { name: string; status: string }[] } }>(api, 'GET', `${PROJECT}/status`);
    await waitFor('the leader to restart the replica', async () => {
      const p = (await pods(b.api)).body.data?.pods;
      return p?.ready === 1 && p.items.length === 1 && !before.includes(p.items[0]?.name ?? '') ? true : undefined;
    }, a.proc, 60_000);
    expect(a.proc.stdout()).toContain('restarting the replicas a standby was asked to restart');
    expect(await viaRouter(routerPort)).toEqual({ status: 200, body: 'hello v2\n' });

    // The leader stops: the standby takes over, adopting the nginx the leader left serving.
    const { answers } = await probeDuring(() => viaRouter(routerPort), 50, async () => {
      expect(await a.proc.stop('SIGTERM')).toEqual({ code: 0, signal: null });
      await waitFor('the standby to take the engine over', () => (b.proc.stdout().includes('taking over the deploy engine') ? true : undefined), b.proc, 30_000);
      await repo.commit('v3', app(base, 'hello v3'));
      expect(await deployVia(b.api, b.proc)).toMatchObject({ status: 'running', error: null });
    });
    expect(answers.length).toBeGreaterThan(10);
    expect(answers.filter((r) => r.status !== 200)).toEqual([]);
    expect(await viaRouter(routerPort)).toEqual({ status: 200, body: 'hello v3\n' });
  }, 300_000);
});
