// Runtime logs of an app deployed through the API: real Git, a real build, a real rollout through
// the router, the collector as `slipway serve` wires it, read back through GET …/logs and followed
// on …/live-logs across a second deploy. Uses Docker Engine: run under `flock /tmp/slipway-docker.lock`.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Deployment } from '../../src/modules/deployments/deployments.schema.js';
import { startDeployFixture, type DeployFixture } from '../factories/engine.js';
import { ensureBaseImage } from '../factories/images.js';
import { openStream, type StreamSession } from '../factories/stream-client.js';
import { deployAndSettle } from '../factories/deployments.js';

interface Entry { id: number; deployment_id: string; pod: string; stream: string; message: string }

const LINES = 200;
/** The app: a page for the health check, then LINES numbered lines on stdout and one on stderr. */
const app = (base: string, version: string) => ({
  Dockerfile: `FROM ${base}\nCMD ["sh", "-c", "mkdir -p /www && echo ${version} > /www/index.html && httpd -f -p $PORT -h /www & i=0; while [ $i -lt ${LINES.toString()} ]; do i=$((i+1)); echo ${version} $i; done; echo ${version} done >&2; wait"]\n`,
});
const numbered = (version: string) => Array.from({ length: LINES }, (_, i) => `${version} ${(i + 1).toString()}`);

describe('logs of an app deployed through the API (sqlite)', () => {
  let fx: DeployFixture;
  let base: string;
  let live: StreamSession;
  const project = () => `/api/workspaces/${fx.w.slug}/projects/ticker`;

  const deploy = () => deployAndSettle<Deployment>(fx.s, fx.w.member.key, project(), 120_000);

  async function entries(query: string): Promise<Entry[]> {
    const out: Entry[] = [];
    let cursor: string | null = null;
    do {
      const q: string = `${query}&limit=1000&direction=asc${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`;
      const r = await fx.s.request<{ entries: Entry[]; next_cursor: string | null }>('GET', `${project()}/logs?${q}`, { key: fx.w.member.key });
      expect(r.status).toBe(200);
      out.push(...(r.body.data?.entries ?? []));
      cursor = r.body.data?.next_cursor ?? null;
    } while (cursor !== null);
    return out;
  }

  async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 30_000): Promise<T> {
    const end = Date.now() + ms;
    for (;;) {
      const got = await probe();
      if (got !== undefined) return got;
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
      await new Promise((res) => setTimeout(res, 200));
    }
  }

  beforeAll(async () => {
    base = await ensureBaseImage();
    // the collector as `slipway serve` wires it on the leader (src/app/leader.ts startCollector)
    fx = await startDeployFixture('sqlite', 'acme/ticker', { engine: { logs: true } });
    await fx.repo.commit('v1', app(base, 'v1'));
    const { s } = fx;
    expect((await s.request('POST', `/api/workspaces/${fx.w.slug}/projects`, { key: fx.w.member.key, body: { name: 'ticker', port: 8080 } })).status).toBe(201);
    expect((await s.request('POST', `${project()}/git`, { key: fx.w.member.key, body: { repo_full_name: 'acme/ticker' } })).status).toBe(201);
    live = openStream(`${s.url.replace('http', 'ws')}${project()}/live-logs?tail=0&format=json`, { 'x-api-key': fx.w.member.key });
  }, 120_000);

  afterAll(async () => {
    live.close();
    await fx.close();
  }, 60_000);

  it('keeps what each deployment printed, in order, once, across a rollout; the live tail follows both', async () => {
    const first = await deploy();
    expect(first.status).toBe('running');
    const one = await until('the first deployment\'s lines', async () => {
      const e = await entries('stream=stdout');
      return e.length >= LINES ? e : undefined;
    });
    expect(one.map((e) => e.message)).toEqual(numbered('v1'));
    expect(new Set(one.map((e) => e.deployment_id))).toEqual(new Set([first.id]));
    expect(one.every((e) => e.pod.startsWith(`${fx.w.slug}-ticker-`))).toBe(true);

    await fx.repo.commit('v2', app(base, 'v2'));
    const second = await deploy();
    expect(second.status).toBe('running');
    const both = await until('the second deployment\'s lines', async () => {
      const e = await entries('stream=stdout');
      return e.length >= 2 * LINES ? e : undefined;
    });
    // a moment more: nothing arrives twice
    await new Promise((res) => setTimeout(res, 1500));
    const stdout = await entries('stream=stdout');
    expect(stdout.map((e) => e.message)).toEqual([...numbered('v1'), ...numbered('v2')]);
    expect(both.slice(LINES).every((e) => e.deployment_id === second.id)).toBe(true);
    expect((await entries('stream=stderr')).map((e) => [e.message, e.deployment_id])).toEqual([['v1 done', first.id], ['v2 done', second.id]]);
    // each deployment's build lines are there too
    const build = await entries('stream=build');
    expect(new Set(build.map((e) => e.deployment_id))).toEqual(new Set([first.id, second.id]));

    // the live tail saw the same lines, in the same order, across the rollout
    const frames = () => live.frames.map((f) => JSON.parse(f) as Entry);
    await until('the live tail', async () => (frames().filter((e) => e.stream === 'stdout').length >= 2 * LINES ? true : undefined));
    expect(frames().filter((e) => e.stream === 'stdout').map((e) => e.message)).toEqual([...numbered('v1'), ...numbered('v2')]);
    expect(frames().map((e) => e.id)).toEqual([...frames().map((e) => e.id)].sort((a, b) => a - b));
  });
});
