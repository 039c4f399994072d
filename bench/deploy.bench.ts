// Deploy latency of a tiny app through Slipway's API vs plain `docker build` + `docker run` of
// the same repository on the same machine (goal: ratio of medians <= 1.2). Two plain sides: the
// `docker build` this machine runs by default (the goal's comparison, docs/deploys.md "Speed"),
// and the same builder as Slipway's (reported beside it).
//
//   npx tsx bench/deploy.bench.ts [--iterations 5] [--poll-ms 10] [--builder buildkit|classic]
//
// The app: a Dockerfile FROM the local busybox base image (test/factories/images.ts; no registry),
// COPY index.html, CMD httpd on $PORT, in a bare repository served from a file:// root.
//
// Slipway: one `bin/slipway serve` (temp data dir, free loopback ports, --router nginx), one
// project with a Git connection; per iteration a new commit is pushed, POST …/deploy, and the
// clock stops when the new page answers through the router (by Host header).
// Plain: the same commit exported from the repository, `docker build` with the same builder as
// Slipway's (--builder, default BuildKit: DOCKER_BUILDKIT=1 with a docker CLI that builds with
// BuildKit itself, Debian's 20.10 at /usr/bin/docker; classic: DOCKER_BUILDKIT=0), `docker run -d
// -p 127.0.0.1::8080`, clock stops when the new page answers on the published port; then the
// container is removed.
// Every iteration's page is new on both sides, so both rebuild the COPY layer and both reuse the
// cached FROM layer. One unmeasured warm-up per side; the measured iterations alternate which
// side goes first. Both sides poll for the page every --poll-ms (10: the plain side's app is up
// by the time `docker port` returns, so a coarse poll would only add its granularity to Slipway's side).
//
// Writes bench/results/deploy-<date>.json and prints a table. Not part of the test suite.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { RepoRoot } from '../test/factories/git-server.js';
import { ensureBaseImage, RUN_LABEL } from '../test/factories/images.js';
import {
  execFileP,
  httpGet,
  machine,
  pollUntil,
  purgeByLabels,
  round,
  sleep,
  startServe,
  summary,
  tinyApp,
  viaRouter,
  writeResult,
  type Serve,
} from './support.js';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  const v = i === -1 ? undefined : Number(process.argv[i + 1]);
  return v === undefined || !Number.isFinite(v) ? fallback : v;
}

const ITERATIONS = arg('iterations', 5);
const POLL_MS = arg('poll-ms', 10);
const RUN = `bench${Date.now().toString(36)}`;
const PROJECT = 'tiny';
/** the plain side's containers carry this too (besides the base image's run label) */
const PLAIN_LABEL = 'slipway.bench.run';
/** the plain side's user-defined network (its `network` variant) */
const PLAIN_NETWORK = `slipway-bench-${RUN}`;
/** one builder on both sides: Slipway's --builder and the plain side's DOCKER_BUILDKIT */
const BUILDER = process.argv.includes('--builder') && process.argv[process.argv.indexOf('--builder') + 1] === 'classic' ? 'classic' : 'buildkit';
const DOCKER_ENV = { ...process.env, DOCKER_BUILDKIT: BUILDER === 'buildkit' ? '1' : '0' };
/** CLIs from Docker 23 on need the buildx plugin for BuildKit; Debian's docker.io 20.10 CLI does not */
const DOCKER_CLI = BUILDER === 'buildkit' && existsSync('/usr/bin/docker') ? '/usr/bin/docker' : 'docker';

interface EngineEvent {
  at: number;
  type: string;
  action: string;
  name: string;
}

interface SlipwayRun {
  total_ms: number;
  /** ms after POST …/deploy */
  phases: {
    claimed_ms: number | null;
    image_tagged_ms: number | null;
    container_created_ms: number | null;
    container_started_ms: number | null;
    routes_applied_ms: number | null;
    answered_ms: number;
  };
  /** the rollout's own account (its `deployment phases` log line): ms per phase */
  rollout: Record<string, number> | null;
  deployment: string;
}

interface PlainRun {
  total_ms: number;
  phases: { build_ms: number; run_ms: number; answered_after_run_ms: number };
}

async function main(): Promise<void> {
  // the engine and the CPUs are shared: say how busy the machine was
  const loadAtStart = loadavg().map((x) => round(x, 2));
  const docker = new Docker();
  const base = await ensureBaseImage(docker, RUN);
  const root = await RepoRoot.create();
  const scratch = mkdtempSync(join(tmpdir(), 'slipway-bench-plain-'));
  let serve: Serve | undefined;
  let instance: string | undefined;
  let workspaceId: string | undefined;
  const events: EngineEvent[] = [];
  const eventsAbort = new AbortController();

  let cleaned: Promise<void> | undefined;
  const cleanup = (): Promise<void> => {
    cleaned ??= (async () => {
      eventsAbort.abort();
      if (serve !== undefined) {
        try {
          instance ??= serve.instanceId();
        } catch {
          // the store never got that far
        }
        await serve.stop();
      }
      const labels = [`${RUN_LABEL}=${RUN}`, `${PLAIN_LABEL}=${RUN}`];
      if (instance !== undefined) labels.unshift(`slipway.instance=${instance}`);
      // The workspace network carries the workspace's id, not the instance's. (Its name, ws-default,
      // is shared by every Slipway on the engine: one made by another instance is reused, and is
      // not removed here since it has another workspace id.)
      if (workspaceId !== undefined) labels.push(`slipway.workspace=${workspaceId}`);
      const purged = await purgeByLabels(labels);
      console.log(`cleaned up: ${String(purged.containers)} containers, ${String(purged.networks)} networks, ${String(purged.images)} images`);
      if (serve !== undefined) rmSync(serve.dataDir, { recursive: true, force: true });
      rmSync(scratch, { recursive: true, force: true });
      await root.dispose();
    })();
    return cleaned;
  };
  process.once('SIGINT', () => {
    void cleanup().finally(() => process.exit(130));
  });

  try {
    // Engine events, for the phases of Slipway's side (image tagged, container started).
    const stream = await docker.getEvents({ filters: { type: ['container', 'image'] }, abortSignal: eventsAbort.signal });
    let buf = '';
    stream.on('data', (chunk: Buffer) => {
      const at = performance.now();
      buf += chunk.toString('utf8');
      const lines = buf.split('\n');
      buf = lines.pop() ?? '';
      for (const l of lines) {
        try {
          const e = JSON.parse(l) as { Type?: string; Action?: string; Actor?: { Attributes?: Record<string, string> } };
          events.push({ at, type: e.Type ?? '', action: e.Action ?? '', name: e.Actor?.Attributes?.['name'] ?? '' });
        } catch {
          // partial line
        }
      }
    });
    stream.on('error', () => undefined);

    await execFileP('docker', ['network', 'create', '--label', `${PLAIN_LABEL}=${RUN}`, PLAIN_NETWORK]);
    const repo = await root.repo(`bench/${PROJECT}`);
    await repo.commit('first', tinyApp(base, 'first'));
    serve = await startServe(root.fileUrl, ['--builder', BUILDER]);
    const s = serve;
    instance = s.instanceId();
    const host = `${PROJECT}-default.${s.appsDomain}`;
    workspaceId = (await s.request<{ id: string }>('GET', '/api/workspaces/default')).data?.id;
    const created = await s.request<{ id: string }>('POST', '/api/workspaces/default/projects', { name: PROJECT, port: 8080 });
    if (created.status !== 201 || created.data === undefined) throw new Error(`creating the project failed: ${created.text}`);
    const projectId = created.data.id;
    const git = await s.request('POST', `/api/workspaces/default/projects/${PROJECT}/git`, { repo_full_name: `bench/${PROJECT}` });
    if (git.status !== 201) throw new Error(`connecting Git failed: ${git.text}`);
    console.log(`slipway serve pid ${String(s.pid)}, API ${s.api}, router 127.0.0.1:${String(s.routerPort)}, ${String(ITERATIONS)} iterations per side, polling every ${String(POLL_MS)} ms`);

    const slipwayOnce = async (text: string): Promise<SlipwayRun> => {
      await repo.commit(text, { 'index.html': `${text}\n` });
      const wall0 = Date.now();
      const t0 = performance.now();
      const r = await s.request<{ id: string; status: string }>('POST', `/api/workspaces/default/projects/${PROJECT}/deploy`);
      if (r.status !== 202 || r.data === undefined) throw new Error(`deploy answered ${String(r.status)}: ${r.text}`);
      const id = r.data.id;
      // Like the plain side, which asks for the page once \`docker run\` has returned, the router is
      // asked only once the engine has started the new container: a poll every 10 ms through nginx
      // to the old deployment during the whole build would load the machine the plain side does not.
      await pollUntil('the new container to start', () => Promise.resolve(events.some((e) => e.at >= t0 && e.type === 'container' && e.action === 'start' && e.name.includes(id.slice(-8)))), 5, 120_000).catch(() => undefined);
      const t1 = await pollUntil(`"${text}" through the router`, async () => (await viaRouter(s.routerPort, host)).body === `${text}\n`, POLL_MS, 120_000).catch(async (err: unknown) => {
        const d = await s.request<{ status: string; error: string | null }>('GET', `/api/workspaces/default/projects/${PROJECT}/deployments/${id}`);
        throw new Error(`${String(err)}; deployment ${d.data?.status ?? '?'}: ${d.data?.error ?? ''}`);
      });
      // The router serves the new page a moment before the deployment is marked running (the switch comes first).
      const settledDeployment = async () => {
        const d = await s.request<{ status: string; started_at: string | null; error: string | null }>('GET', `/api/workspaces/default/projects/${PROJECT}/deployments/${id}`);
        return d.data?.status === 'deploying' ? undefined : d;
      };
      let d = await settledDeployment();
      for (let i = 0; d === undefined && i < 100; i++) {
        await new Promise((res) => setTimeout(res, 20));
        d = await settledDeployment();
      }
      if (d?.data?.status !== 'running') throw new Error(`deployment ${id} is ${d?.data?.status ?? 'deploying'}: ${d?.data?.error ?? ''}`);
      // The old deployment's containers are stopped after the switch: wait until only the new one
      // is left, so that the next measurement (either side) starts on a quiet engine.
      await pollUntil('the previous deployment to retire', async () => {
        const { stdout } = await execFileP('docker', ['ps', '-aq', '--filter', `label=slipway.project=${projectId}`]);
        return stdout.trim().split('\n').filter((x) => x !== '').length === 1;
      }, 200, 60_000);
      const after = (pred: (e: EngineEvent) => boolean): number | null => {
        const e = events.find((x) => x.at >= t0 && pred(x));
        return e === undefined ? null : round(e.at - t0);
      };
      const applied = s.logs.find((l) => l.at >= t0 && l.line['msg'] === 'router: routes applied');
      const rollout = s.logs.find((l) => l.line['msg'] === 'deployment phases' && l.line['deployment'] === id)?.line['phases'] as Record<string, number> | undefined;
      return {
        total_ms: round(t1 - t0),
        phases: {
          claimed_ms: d.data.started_at === null ? null : Date.parse(d.data.started_at) - wall0,
          image_tagged_ms: after((e) => e.type === 'image' && e.action === 'tag' && e.name.endsWith(`:${id}`)),
          container_created_ms: after((e) => e.type === 'container' && e.action === 'create' && e.name.includes(id.slice(-8))),
          container_started_ms: after((e) => e.type === 'container' && e.action === 'start' && e.name.includes(id.slice(-8))),
          routes_applied_ms: applied === undefined ? null : round(applied.at - t0),
          answered_ms: round(t1 - t0),
        },
        rollout: rollout ?? null,
        deployment: id,
      };
    };

    let plainN = 0;
    /** `same`: the builder Slipway uses (--builder); `default`: plain `docker build` as this machine's CLI runs it without settings */
    /**
     * `same`: the builder Slipway uses (--builder); `default`: plain \`docker build\` as this machine's CLI
     * runs it without settings; `network`: the same builder, the container on a user-defined network
     * (as Slipway's are, on their workspace's), which the engine starts slower than on its default bridge
     */
    const plainOnce = async (text: string, variant: 'same' | 'default' | 'network' = 'same'): Promise<PlainRun> => {
      await repo.commit(text, { 'index.html': `${text}\n` });
      // the commit's tree, as a developer's checkout has it (no .git: Slipway sends none either)
      const dir = join(scratch, `c${String(plainN)}`);
      const tar = join(scratch, `c${String(plainN)}.tar`);
      await execFileP('git', ['--git-dir', repo.bareDir, 'archive', '--format=tar', '-o', tar, 'main']);
      await execFileP('mkdir', ['-p', dir]);
      await execFileP('tar', ['-xf', tar, '-C', dir]);
      const tag = `slipway-bench/plain:${RUN}-${String(plainN)}`;
      plainN += 1;
      const t0 = performance.now();
      if (variant !== 'default') await execFileP(DOCKER_CLI, ['build', '-t', tag, dir], { env: DOCKER_ENV, maxBuffer: 16 << 20 });
      else await execFileP('docker', ['build', '-t', tag, dir], { env: withoutBuildKitSetting, maxBuffer: 16 << 20 });
      const tBuilt = performance.now();
      const { stdout } = await execFileP('docker', ['run', '-d', ...(variant === 'network' ? ['--network', PLAIN_NETWORK] : []), '-p', '127.0.0.1::8080', '-e', 'PORT=8080', '--label', `${PLAIN_LABEL}=${RUN}`, tag]);
      const container = stdout.trim();
      try {
        const port = Number(/:(\d+)\s*$/m.exec((await execFileP('docker', ['port', container, '8080/tcp'])).stdout)?.[1]);
        const tRun = performance.now();
        const t1 = await pollUntil(`"${text}" on 127.0.0.1:${String(port)}`, async () => (await httpGet(port)).body === `${text}\n`, POLL_MS, 60_000);
        return { total_ms: round(t1 - t0), phases: { build_ms: round(tBuilt - t0), run_ms: round(tRun - tBuilt), answered_after_run_ms: round(t1 - tRun) } };
      } finally {
        await execFileP('docker', ['rm', '-f', container]);
        rmSync(dir, { recursive: true, force: true });
        rmSync(tar, { force: true });
      }
    };

    // What the clone alone costs (Slipway's first step; the plain side starts from a checkout).
    const clones: number[] = [];
    for (let i = 0; i < 5; i++) {
      const dir = join(scratch, `clone${String(i)}`);
      const t0 = performance.now();
      await execFileP('git', ['clone', '--quiet', '--depth', '1', '--single-branch', '--no-tags', '--branch', 'main', '--', `file://${repo.bareDir}`, dir]);
      clones.push(performance.now() - t0);
      rmSync(dir, { recursive: true, force: true });
    }

    const withoutBuildKitSetting = Object.fromEntries(Object.entries(process.env).filter(([k]) => k !== 'DOCKER_BUILDKIT'));
    const defaultClient = (await execFileP('docker', ['version', '--format', '{{.Client.Version}}']).catch(() => ({ stdout: '?' }))).stdout.trim();
    const warm = { slipway: await slipwayOnce(`warm-up slipway ${RUN}`), plain: await plainOnce(`warm-up plain ${RUN}`), plainDefault: await plainOnce(`warm-up plain default ${RUN}`, 'default'), plainNetwork: await plainOnce(`warm-up plain network ${RUN}`, 'network') };
    console.log(`warm-up: slipway ${warm.slipway.total_ms.toFixed(0)} ms, plain ${warm.plain.total_ms.toFixed(0)} ms`);

    const slipway: SlipwayRun[] = [];
    const plain: PlainRun[] = [];
    const plainDefault: PlainRun[] = [];
    const plainNetwork: PlainRun[] = [];
    for (let i = 0; i < ITERATIONS; i++) {
      const order = i % 2 === 0 ? (['slipway', 'plain'] as const) : (['plain', 'slipway'] as const);
      for (const side of order) {
        await sleep(1000);
        if (side === 'slipway') slipway.push(await slipwayOnce(`iteration ${String(i)} slipway ${RUN}`));
        else {
          plain.push(await plainOnce(`iteration ${String(i)} plain ${RUN}`));
          await sleep(1000);
          plainDefault.push(await plainOnce(`iteration ${String(i)} plain default ${RUN}`, 'default'));
          await sleep(1000);
          plainNetwork.push(await plainOnce(`iteration ${String(i)} plain network ${RUN}`, 'network'));
        }
      }
      const sw = slipway.at(-1);
      const pl = plain.at(-1);
      console.log(`#${String(i)} (${order.join(' first, ')} second): slipway ${sw?.total_ms.toFixed(0) ?? '?'} ms, plain ${pl?.total_ms.toFixed(0) ?? '?'} ms`);
    }

    const sw = summary(slipway.map((r) => r.total_ms));
    const pl = summary(plain.map((r) => r.total_ms));
    const med = (xs: (number | null)[]) => summary(xs.filter((x): x is number => x !== null)).median;
    const phase = (k: keyof SlipwayRun['phases']) => med(slipway.map((r) => r.phases[k]));
    const ratio = round(sw.median / pl.median, 3);
    const pd = summary(plainDefault.map((r) => r.total_ms));
    const ratioDefault = round(sw.median / pd.median, 3);
    const pn = summary(plainNetwork.map((r) => r.total_ms));
    const ratioNetwork = round(sw.median / pn.median, 3);
    const report = {
      date: new Date().toISOString(),
      machine: await machine(),
      load_average: { at_start: loadAtStart, at_end: loadavg().map((x) => round(x, 2)) },
      settings: {
        iterations: ITERATIONS,
        poll_ms: POLL_MS,
        order: 'alternating; iteration 0 Slipway first',
        warm_up: 'one unmeasured deploy per side',
        app: 'FROM local busybox (docker import of busybox-static); COPY index.html; CMD busybox httpd -p $PORT',
        slipway: 'bin/slipway serve --engine docker --router nginx --git-base-url file://… (SQLite, defaults otherwise); project port 8080, replicas 1, cpu 0.5, ram 0.5 (defaults)',
        builder: BUILDER,
        plain: `${DOCKER_CLI} build (DOCKER_BUILDKIT=${DOCKER_ENV.DOCKER_BUILDKIT}) of the commit's tree + docker run -d -p 127.0.0.1::8080 -e PORT=8080, no limits`,
        measured: 'from POST …/deploy (Slipway) or `docker build` (plain) until GET / answers with the new page (through the router by Host, or on the published port)',
      },
      results: {
        slipway_ms: sw,
        plain_ms: pl,
        ratio_of_medians: ratio,
        plain_default_docker_build_ms: pd,
        ratio_vs_default_docker_build: ratioDefault,
        plain_on_a_network_ms: pn,
        plain_on_a_network_phase_medians_ms: {
          build: summary(plainNetwork.map((r) => r.phases.build_ms)).median,
          run: summary(plainNetwork.map((r) => r.phases.run_ms)).median,
        },
        ratio_vs_plain_on_a_network: ratioNetwork,
        default_docker_build: `docker build (the docker on PATH, client ${defaultClient}) without DOCKER_BUILDKIT: the legacy builder where the CLI has no buildx`,
        slipway_phase_medians_ms_after_post: {
          claimed: phase('claimed_ms'),
          image_tagged: phase('image_tagged_ms'),
          container_created: phase('container_created_ms'),
          container_started: phase('container_started_ms'),
          routes_applied: phase('routes_applied_ms'),
          answered_through_router: phase('answered_ms'),
        },
        slipway_rollout_phase_medians_ms: rolloutPhases(slipway),
        plain_phase_medians_ms: {
          build: summary(plain.map((r) => r.phases.build_ms)).median,
          run: summary(plain.map((r) => r.phases.run_ms)).median,
          answered_after_run: summary(plain.map((r) => r.phases.answered_after_run_ms)).median,
        },
        shallow_file_clone_ms: summary(clones),
        warm_up: { slipway_ms: warm.slipway.total_ms, plain_ms: warm.plain.total_ms },
      },
      runs: { slipway, plain },
      goal: {
        ratio: '<= 1.2',
        vs_docker_build_as_run_here: { ratio: ratioDefault, met: ratioDefault <= 1.2 },
        vs_same_builder: { ratio, met: ratio <= 1.2 },
        vs_same_builder_on_a_user_defined_network: { ratio: ratioNetwork, met: ratioNetwork <= 1.2 },
      },
    };
    const file = writeResult('deploy', report);
    console.log(`slipway  median ${sw.median.toFixed(0)} ms  p90 ${sw.p90.toFixed(0)} ms`);
    console.log(`plain    median ${pl.median.toFixed(0)} ms  p90 ${pl.p90.toFixed(0)} ms`);
    console.log(`phases (Slipway, ms after POST): ${JSON.stringify(report.results.slipway_phase_medians_ms_after_post)}`);
    console.log(`rollout phases (Slipway's own log, ms each): ${JSON.stringify(report.results.slipway_rollout_phase_medians_ms)}`);
    console.log(`phases (plain, ms): ${JSON.stringify(report.results.plain_phase_medians_ms)}`);
    console.log(`plain \`docker build\` as this machine runs it by default: median ${pd.median.toFixed(0)} ms; ratio ${ratioDefault.toFixed(3)} (goal <= 1.2: ${ratioDefault <= 1.2 ? 'met' : 'not met'})`);
    console.log(`same builder as Slipway's (${BUILDER}) on the plain side: ratio of medians ${ratio.toFixed(3)} (${ratio <= 1.2 ? 'within' : 'above'} 1.2)`);
    console.log(`same builder, the plain container on a user-defined network as Slipway's are: median ${pn.median.toFixed(0)} ms; ratio ${ratioNetwork.toFixed(3)} (${ratioNetwork <= 1.2 ? 'within' : 'above'} 1.2)`);
    console.log(`written to ${file}`);
  } finally {
    await cleanup();
  }
}

/** The median of each phase the rollout reported, in the order it reported them. */
function rolloutPhases(runs: SlipwayRun[]): Record<string, number> {
  const names = [...new Set(runs.flatMap((r) => Object.keys(r.rollout ?? {})))];
  return Object.fromEntries(names.map((n) => [n, summary(runs.flatMap((r) => (r.rollout?.[n] === undefined ? [] : [r.rollout[n]]))).median]));
}

await main();
