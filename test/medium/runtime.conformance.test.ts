import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ForeignObjectError, HostPortTakenError, NetworkPoolFullError, type ContainerInfo, type ContainerSpec, type LogLine, type Owner, type Runtime, type RuntimeEvent } from '../../src/domain/runtime.js';
import { DockerRuntime } from '../../src/adapters/runtime/docker/docker.runtime.js';
import type { NetworkPool } from '../../src/adapters/runtime/docker/network-pool.js';
import { ensureBaseImage, releaseTestRun } from '../factories/images.js';
import { freePort, waitFor } from '../factories/process.js';

/** What a driver under test provides: the runtime, and an image on its engine with busybox's `sh` and `httpd`. */
export interface RuntimeUnderTest {
  runtime: Runtime;
  baseImage: string;
  /** called after the suite's own cleanup */
  close?: () => Promise<void>;
}

const SUITE_LABEL = 'slipway.test.suite';
const CHANNEL_LABEL = 'slipway.test.channel';
const MiB = 1024 ** 2;

/**
 * What the orchestrator relies on from a container runtime, on a real engine. Every driver
 * (Docker now, Swarm and Kubernetes later) must pass these cases unchanged. Everything the suite
 * creates carries a per-suite label and a unique name, publishes only ephemeral ports (free ones, where the case chooses), and is
 * removed by label at the end.
 */
export function runtimeConformance(name: string, makeRuntime: () => Promise<RuntimeUnderTest>): void {
  describe(`runtime conformance: ${name}`, () => {
    const suite = `rt${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
    const labels = { [SUITE_LABEL]: suite };
    const owner = (deployment = 'd1'): Owner => ({ workspace: `w-${suite}`, project: `p-${suite}`, deployment: `${deployment}-${suite}` });
    const network = `ws-${suite}`;
    let n = 0;
    const unique = (what: string): string => `${what}-${suite}-${String(++n)}`;
    let target: RuntimeUnderTest | undefined;
    let rt: Runtime;
    let base: string;
    /** the test app: busybox httpd serving /www, with $GREETING written to /www/env.txt */
    let appImage: string;
    const dirs: string[] = [];

    /** A build context directory with the given files. */
    async function context(files: Record<string, string>): Promise<string> {
      const dir = await mkdtemp(join(tmpdir(), 'slipway-ctx-'));
      dirs.push(dir);
      for (const [path, content] of Object.entries(files)) {
        await mkdir(dirname(join(dir, path)), { recursive: true });
        await writeFile(join(dir, path), content);
      }
      return dir;
    }

    const spec = (over: Partial<ContainerSpec> = {}): ContainerSpec => ({
      name: unique('c'),
      image: base,
      env: {},
      owner: owner(),
      labels,
      cpu: 0.25,
      memoryBytes: 32 * MiB,
      network,
      restart: { kind: 'never' },
      ...over,
    });

    const until = <T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> =>
      waitFor(what, check, undefined, timeoutMs);

    async function httpGet(url: string): Promise<string> {
      return until(`${url} to answer`, async () => {
        try {
          const res = await fetch(url);
          const body = await res.text();
          return res.status === 200 ? body : undefined;
        } catch {
          return undefined;
        }
      });
    }

    async function stateOf(id: string, want: (c: ContainerInfo) => boolean, what: string): Promise<ContainerInfo> {
      return until(what, async () => {
        const c = await rt.inspect(id);
        return c !== null && want(c) ? c : undefined;
      });
    }

    beforeAll(async () => {
      target = await makeRuntime();
      ({ runtime: rt, baseImage: base } = target);
      await rt.ensureNetwork({ name: network, workspace: owner().workspace, labels });
      appImage = `slipway-test/app-${suite}:1`;
      const dir = await context({
        Dockerfile: [
          `FROM ${base}`,
          'COPY index.html /www/index.html',
          `CMD ["sh", "-c", "printf '%s' \\"$GREETING\\" > /www/env.txt && exec httpd -f -p 8080 -h /www"]`,
        ].join('\n'),
        'index.html': 'hello from slipway\n',
      });
      const built = await rt.build({ contextDir: dir, tag: appImage, owner: owner(), labels });
      if (built.status !== 'succeeded') throw new Error(`the test app did not build: ${built.error}`);
    }, 120_000);

    afterAll(async () => {
      // no target when makeRuntime failed: nothing of ours to clean then
      if (target !== undefined) {
        await target.runtime.purge({ labels });
        await target.close?.();
      }
      await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
    }, 60_000);

    it('checks the engine and reports its version', async () => {
      const info = await rt.check();
      expect(info.version).not.toBe('');
      const [major = 0, minor = 0] = info.apiVersion.split('.').map(Number);
      expect(major * 1000 + minor).toBeGreaterThanOrEqual(1041);
    });

    it('ensures a network idempotently, also under concurrent calls', async () => {
      const name = unique('ws');
      const s = { name, workspace: owner().workspace, labels };
      const [a, b] = await Promise.all([rt.ensureNetwork(s), rt.ensureNetwork(s)]);
      const c = await rt.ensureNetwork(s);
      expect(a.name).toBe(name);
      expect(new Set([a.id, b.id, c.id]).size).toBe(1);
      expect([a, b].filter((x) => x.created)).toHaveLength(1);
      expect(c.created).toBe(false);
      // one network, one subnet, however it was asked for
      expect(new Set([a.subnet, b.subnet, c.subnet]).size).toBe(1);
    });

    it('joins or uses an existing network or volume only when its labels say it is the spec\'s', async () => {
      const name = unique('ws');
      await rt.ensureNetwork({ name, workspace: owner().workspace, labels: { ...labels, 'slipway.instance': 'installation-a' } });
      // another installation's network of the same name, or another workspace's: refused, not joined
      const foreign = await rt.ensureNetwork({ name, workspace: owner().workspace, labels: { ...labels, 'slipway.instance': 'installation-b' } }).then(() => null, (err: unknown) => err);
      expect(foreign).toBeInstanceOf(ForeignObjectError);
      expect((foreign as ForeignObjectError).message).toMatch(new RegExp(`Network ${name} exists on the engine but is not`));
      expect((foreign as ForeignObjectError).labels['slipway.instance']).toBe('installation-a');
      await expect(rt.ensureNetwork({ name, workspace: `other-${suite}`, labels: { ...labels, 'slipway.instance': 'installation-a' } })).rejects.toBeInstanceOf(ForeignObjectError);
      expect((await rt.ensureNetwork({ name, workspace: owner().workspace, labels: { ...labels, 'slipway.instance': 'installation-a' } })).created).toBe(false);
      expect(await rt.removeNetwork(name)).toBe(true);

      const volume = unique('vol');
      await rt.ensureVolume({ name: volume, workspace: owner().workspace, labels: { ...labels, 'slipway.instance': 'installation-a' } });
      await expect(rt.ensureVolume({ name: volume, workspace: owner().workspace, labels: { ...labels, 'slipway.instance': 'installation-b' } })).rejects.toBeInstanceOf(ForeignObjectError);
      await rt.ensureVolume({ name: volume, workspace: owner().workspace, labels: { ...labels, 'slipway.instance': 'installation-a' } });
      expect(await rt.removeVolume(volume)).toBe(true);
    });

    it('builds from a context directory and a Dockerfile path, streaming every line in order', async () => {
      // no line break at the end
      const dockerfile = [
        `FROM ${base}`,
        'COPY site/page.txt /www/page.txt',
        `RUN echo first-${suite} && echo second-${suite}`,
        `RUN echo third-${suite} >&2`,
        'RUN cat /www/page.txt',
      ].join('\n');
      const dir = await context({
        'deploy/app.Dockerfile': dockerfile,
        'site/page.txt': `copied-${suite}\n`,
      });
      const lines: string[] = [];
      const tag = `slipway-test/app-${suite}:lines`;
      const result = await rt.build({ contextDir: dir, dockerfile: 'deploy/app.Dockerfile', tag, owner: owner(), labels, onLine: (l) => lines.push(l) });
      expect(result).toMatchObject({ status: 'succeeded', tag });
      // the output lines themselves (the step lines that echo the command contain the words too)
      const at = (text: string) => lines.indexOf(text);
      expect(at(`first-${suite}`)).toBeGreaterThanOrEqual(0);
      expect(at(`first-${suite}`)).toBeLessThan(at(`second-${suite}`));
      // the COPY made it into the image: a later step reads the file
      expect(lines.filter((l) => l === `copied-${suite}`)).toHaveLength(1);
      // a step's stderr too, as plain text (the classic builder wraps it in colour codes)
      expect(at(`second-${suite}`)).toBeLessThan(at(`third-${suite}`));
      expect(at(`third-${suite}`)).toBeLessThan(at(`copied-${suite}`));
      expect(lines.filter((l) => l.includes('\n') || l.includes('\u001b['))).toEqual([]);
      const image = await rt.inspectImage(tag);
      expect(image?.tags).toContain(tag);
      expect(image?.labels[SUITE_LABEL]).toBe(suite);
      if (result.status === 'succeeded') expect(image?.id).toBe(result.imageId);
      // the owner's labels too, while the context is left as it was given
      expect(image?.labels).toMatchObject({ 'slipway.workspace': owner().workspace, 'slipway.project': owner().project, 'slipway.deployment': owner().deployment });
      expect(await readFile(join(dir, 'deploy', 'app.Dockerfile'), 'utf8')).toBe(dockerfile);
    });

    it('reports a failing build with the engine\'s message, after the lines that came before', async () => {
      const lines: string[] = [];
      const failing = await context({ Dockerfile: `FROM ${base}\nRUN echo before-failure-${suite} && exit 3\n` });
      const tag = `slipway-test/app-${suite}:broken`;
      const r1 = await rt.build({ contextDir: failing, tag, labels, onLine: (l) => lines.push(l) });
      expect(r1.status).toBe('failed');
      if (r1.status === 'failed') expect(r1.error).toMatch(/(non-zero code|exit code): 3/);
      expect(lines.some((l) => l.includes(`before-failure-${suite}`))).toBe(true);
      expect(await rt.inspectImage(tag)).toBeNull();

      const missing = await context({ Dockerfile: `FROM ${base}\nCOPY missing-${suite}.txt /x\n` });
      const r2 = await rt.build({ contextDir: missing, tag, labels });
      expect(r2.status).toBe('failed');
      if (r2.status === 'failed') expect(r2.error).toContain(`missing-${suite}.txt`);

      const r3 = await rt.build({ contextDir: missing, dockerfile: 'no-such.Dockerfile', tag, labels });
      expect(r3.status).toBe('failed');
      if (r3.status === 'failed') expect(r3.error).toContain('no-such.Dockerfile');
      expect(await rt.inspectImage(tag)).toBeNull();
    });

    it('stops a build at its timeout, and when cancelled', async () => {
      const slow = (mark: string) => context({ Dockerfile: `FROM ${base}\nRUN echo slow-${mark}-${suite} && sleep 120\n` });
      const tag = `slipway-test/app-${suite}:slow`;

      const timedOut = await rt.build({ contextDir: await slow('a'), tag, labels, timeoutMs: 2_000 });
      expect(timedOut.status).toBe('timed_out');

      const controller = new AbortController();
      const cancelled = await rt.build({
        contextDir: await slow('b'),
        tag,
        labels,
        signal: controller.signal,
        // cancel once the slow step is known to be running
        onLine: (l) => { if (l.includes(`slow-b-${suite}`)) controller.abort(); },
      });
      expect(cancelled.status).toBe('cancelled');

      const before = await rt.build({ contextDir: await slow('c'), tag, labels, signal: AbortSignal.abort() });
      expect(before.status).toBe('cancelled');
      expect(await rt.inspectImage(tag)).toBeNull();
    }, 60_000);

    let web: ContainerInfo;
    const greeting = 'hi "there" $HOME `id` it\'s; $(echo no)';

    it('runs a container with limits, env, labels and its port published on 127.0.0.1', async () => {
      web = await rt.run(spec({
        image: appImage,
        env: { GREETING: greeting, PORT: '8080' },
        cpu: 0.25,
        memoryBytes: 48 * MiB,
        port: 8080,
        aliases: ['web'],
        restart: { kind: 'unless-stopped' },
      }));
      expect(web.state).toBe('running');
      expect(web.cpu).toBe(0.25);
      expect(web.memoryBytes).toBe(48 * MiB);
      expect(web.port).toBe(8080);
      expect(web.hostPort).toBeGreaterThan(0);
      expect(web.hostPort).not.toBe(8080);
      expect(web.owner).toEqual(owner());
      expect(web.labels[SUITE_LABEL]).toBe(suite);
      expect(web.image).toBe(appImage);
      expect(web.startedAt).toBeInstanceOf(Date);
      expect(web.networkAddress).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
      // a process limit on every container: the driver's default unless the spec sets one
      expect(web.pidsLimit).toBe(512);

      const port = String(web.hostPort);
      expect(await httpGet(`http://127.0.0.1:${port}/index.html`)).toBe('hello from slipway\n');
      // the value arrives byte for byte: no shell ever saw it on the way in
      expect(await httpGet(`http://127.0.0.1:${port}/env.txt`)).toBe(greeting);
    });

    it('publishes on a host port the caller chose, and refuses to start a second container on it', async () => {
      const hostPort = await freePort();
      const chosen = await rt.run(spec({ image: appImage, env: { GREETING: greeting, PORT: '8080' }, port: 8080, hostPort }));
      expect(chosen).toMatchObject({ state: 'running', port: 8080, hostPort });
      expect(await httpGet(`http://127.0.0.1:${String(hostPort)}/index.html`)).toBe('hello from slipway\n');
      const name = unique('taken');
      const taken = rt.run(spec({ name, image: appImage, env: { PORT: '8080' }, port: 8080, hostPort }));
      await expect(taken).rejects.toThrow(/Cannot start container .*(port is already allocated|address already in use)/);
      await expect(taken).rejects.toBeInstanceOf(HostPortTakenError);
      // the container that could not start is gone
      expect(await rt.inspect(name)).toBeNull();
      await rt.remove(chosen.id);
    });

    it('runs a container without publishing its port, and attaches a container to another network idempotently', async () => {
      const hidden = await rt.run(spec({ image: appImage, env: { GREETING: greeting, PORT: '8080' }, port: 8080, publish: false }));
      expect(hidden).toMatchObject({ state: 'running', port: 8080, hostPort: null });
      expect(hidden.networkAddress).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
      // a second network, and a container on it that can reach `hidden` by name only once attached
      const other = unique('ws');
      await rt.ensureNetwork({ name: other, workspace: owner().workspace, labels });
      // (nc by address: the static busybox's wget crashes, and it cannot resolve names)
      const fetchFromOther = async (address: string): Promise<number | null> => {
        const get = `printf 'GET /index.html HTTP/1.0\\r\\n\\r\\n' | nc -w 3 ${address} 8080 | grep -q 'hello from slipway'`;
        const probe = await rt.run(spec({ network: other, command: ['sh', '-c', get] }));
        const done = await until('the probe to finish', async () => {
          const c = await rt.inspect(probe.id);
          return c?.state === 'exited' ? c : undefined;
        });
        await rt.remove(probe.id);
        return done.exitCode;
      };
      expect(hidden.networks).toEqual({ [network]: hidden.networkAddress });
      // networks are isolated from each other
      expect(await fetchFromOther(hidden.networkAddress ?? '')).not.toBe(0);
      await rt.connect(other, hidden.id);
      await rt.connect(other, hidden.name);
      const attached = await rt.inspect(hidden.id);
      expect(Object.keys(attached?.networks ?? {}).sort()).toEqual([network, other].sort());
      expect(attached?.networkAddress).toBe(hidden.networkAddress);
      expect(await fetchFromOther(attached?.networks[other] ?? '')).toBe(0);
      await expect(rt.connect(`ws-missing-${suite}`, hidden.id)).rejects.toThrow(/no such network/);
      await expect(rt.connect(other, `missing-${suite}`)).rejects.toThrow(/no such container/);
      await rt.stop(hidden.id, { graceSeconds: 0 });
      await rt.remove(hidden.id);
    });

    it('lists managed networks by workspace, and removes one only when no container uses it', async () => {
      const name = unique('ws');
      const workspace = `w2-${suite}`;
      await rt.ensureNetwork({ name, workspace, labels });
      const listed = await rt.listNetworks({ owner: { workspace }, labels });
      expect(listed.map((n) => [n.name, n.workspace])).toEqual([[name, workspace]]);
      expect((await rt.listNetworks({ labels })).map((n) => n.name)).toEqual(expect.arrayContaining([network, name]));
      const user = await rt.run(spec({ network: name, command: ['sleep', '600'] }));
      await expect(rt.removeNetwork(name)).rejects.toThrow(new RegExp(`Cannot remove network ${name}`));
      await rt.stop(user.id, { graceSeconds: 0 });
      await rt.remove(user.id);
      expect(await rt.removeNetwork(name)).toBe(true);
      expect(await rt.removeNetwork(name)).toBe(false);
      expect(await rt.listNetworks({ owner: { workspace }, labels })).toEqual([]);
    });

    it('stops a fork bomb at the container\'s process limit: forks past it fail', async () => {
      // 200 background sleeps, at most: without a limit they would all start (a bounded bomb)
      const bomb = await rt.run(spec({
        pidsLimit: 32,
        command: ['sh', '-c', '( i=0; while [ $i -lt 200 ]; do sleep 600 & i=$((i+1)); done ); echo "forks done"; exec sleep 600'],
      }));
      expect(bomb.pidsLimit).toBe(32);
      const lines: string[] = [];
      await until('the forks to end', async () => {
        const feed = await rt.logs(bomb.id, { follow: false });
        lines.length = 0;
        for await (const l of feed) lines.push(l.message);
        return lines.includes('forks done') ? true : undefined;
      });
      expect(lines.join('\n')).toMatch(/can't fork|Resource temporarily unavailable/);
      // what runs in it stays within the limit (the engine counts its processes)
      const stats = await new Docker().getContainer(bomb.id).stats({ stream: false }) as { pids_stats?: { current?: number } };
      expect(stats.pids_stats?.current).toBeLessThanOrEqual(32);
      expect(stats.pids_stats?.current).toBeGreaterThanOrEqual(28);
      await rt.remove(bomb.id);
    });

    it('refuses a container it cannot run and leaves nothing behind', async () => {
      const name = unique('bad');
      await expect(rt.run(spec({ name, image: `slipway-test/none-${suite}:1` }))).rejects.toThrow(/none-/);
      await expect(rt.run(spec({ name, network: `ws-missing-${suite}` }))).rejects.toThrow();
      expect(await rt.inspect(name)).toBeNull();
    });

    it('lists containers by owner and labels, with state, restarts, start time and host port', async () => {
      const other = await rt.run(spec({ owner: owner('d2'), command: ['sleep', '600'] }));
      const byProject = await rt.list({ owner: { project: owner().project } });
      expect(byProject.map((c) => c.id).sort()).toEqual([web.id, other.id].sort());
      const listedWeb = byProject.find((c) => c.id === web.id);
      expect(listedWeb).toMatchObject({ state: 'running', restartCount: 0, hostPort: web.hostPort, name: web.name });
      expect(listedWeb?.startedAt?.getTime()).toBe(web.startedAt?.getTime());

      const byDeployment = await rt.list({ owner: { deployment: owner('d2').deployment }, labels });
      expect(byDeployment.map((c) => c.id)).toEqual([other.id]);
      expect(byDeployment[0]?.hostPort).toBeNull();
      expect(await rt.list({ labels: { [SUITE_LABEL]: `${suite}-none` } })).toEqual([]);

      // the running ones' ids alone, in one call: a stopped container is not among them
      expect((await rt.runningIds({ owner: { project: owner().project } })).sort()).toEqual([web.id, other.id].sort());
      await rt.stop(other.id, { graceSeconds: 0 });
      expect(await rt.runningIds({ owner: { project: owner().project } })).toEqual([web.id]);
      expect(await rt.runningIds({ labels: { [SUITE_LABEL]: `${suite}-none` } })).toEqual([]);
      await rt.remove(other.id);
    });

    it('restarts a container whose process exits, per its policy, and counts the restarts', async () => {
      const bounded = await rt.run(spec({ command: ['sh', '-c', 'echo crash; exit 1'], restart: { kind: 'on-failure', maxRetries: 2 } }));
      const done = await stateOf(bounded.id, (c) => c.state === 'exited', 'the on-failure container to give up');
      expect(done.restartCount).toBe(2);
      expect(done.exitCode).toBe(1);
      expect(done.finishedAt).toBeInstanceOf(Date);

      const looping = await rt.run(spec({ command: ['sh', '-c', 'exit 2'], restart: { kind: 'always' } }));
      const looped = await stateOf(looping.id, (c) => c.restartCount >= 2, 'the always container to restart twice');
      expect(['running', 'restarting']).toContain(looped.state);
      await rt.stop(looping.id, { graceSeconds: 1 });
      const stopped = await stateOf(looping.id, (c) => c.state === 'exited', 'the looping container to stay stopped');
      expect(stopped.restartCount).toBeGreaterThanOrEqual(2);
    }, 60_000);

    it('reports plausible cpu and memory use of a running container', async () => {
      const busy = await rt.run(spec({ command: ['sh', '-c', 'while :; do :; done'], cpu: 0.5, memoryBytes: 32 * MiB }));
      // a busy loop under a 0.5 vCPU limit: well above idle, never far above the limit
      const usage = await until('the busy loop to show in the stats', async () => {
        const u = await rt.stats(busy.id);
        return u !== null && u.cpuMillicores > 50 ? u : undefined;
      });
      // one sample can overshoot on a loaded machine (the quota is enforced per 100 ms period): the median of three
      const samples = [usage.cpuMillicores];
      for (let i = 0; i < 2; i++) samples.push((await rt.stats(busy.id))?.cpuMillicores ?? 0);
      expect(samples.sort((a, b) => a - b)[1]).toBeLessThanOrEqual(650);
      expect(usage.memoryBytes).toBeGreaterThan(0);
      expect(usage.memoryBytes).toBeLessThan(32 * MiB);
      expect(usage.memoryLimitBytes).toBe(32 * MiB);
      await rt.stop(busy.id, { graceSeconds: 0 });
      expect(await rt.stats(busy.id)).toBeNull();
      await rt.remove(busy.id);
    }, 60_000);

    it('follows logs as lines of stdout and stderr with timestamps, until closed', async () => {
      const chatty = await rt.run(spec({
        command: ['sh', '-c', 'i=0; while :; do i=$((i+1)); echo "out $i"; echo "err $i" >&2; sleep 0.2; done'],
      }));
      const feed = await rt.logs(chatty.id, { follow: true });
      const lines: LogLine[] = [];
      const reading = (async () => {
        for await (const line of feed) lines.push(line);
      })();
      try {
        await until('three lines on each stream', () =>
          Promise.resolve(lines.some((l) => l.message === 'out 3') && lines.some((l) => l.message === 'err 3') ? true : undefined));
      } finally {
        feed.close();
      }
      await reading; // the loop ends once the feed is closed

      const of = (stream: string) => lines.filter((l) => l.stream === stream);
      expect(of('stdout').slice(0, 3).map((l) => l.message)).toEqual(['out 1', 'out 2', 'out 3']);
      expect(of('stderr').slice(0, 3).map((l) => l.message)).toEqual(['err 1', 'err 2', 'err 3']);
      for (const stream of ['stdout', 'stderr']) {
        const times = of(stream).map((l) => l.at.getTime());
        expect(times.every((t) => !Number.isNaN(t))).toBe(true);
        expect([...times].sort((a, b) => a - b)).toEqual(times);
      }
      const firstAt = lines[0]?.at.getTime() ?? 0;
      expect(Math.abs(firstAt - (chatty.startedAt?.getTime() ?? 0))).toBeLessThan(60_000);

      // without follow, the history comes back and the feed ends by itself
      await rt.stop(chatty.id, { graceSeconds: 0 });
      const history: LogLine[] = [];
      for await (const line of await rt.logs(chatty.id, { follow: false })) history.push(line);
      expect(history.filter((l) => l.stream === 'stdout').map((l) => l.message).slice(0, 3)).toEqual(['out 1', 'out 2', 'out 3']);
      expect(history.find((l) => l.message === 'err 1')?.stream).toBe('stderr');
      const tail = [];
      for await (const line of await rt.logs(chatty.id, { follow: false, tail: 2 })) tail.push(line);
      expect(tail).toHaveLength(2);
      await expect(rt.logs(`missing-${suite}`, { follow: false })).rejects.toThrow();
      await rt.remove(chatty.id);
    }, 60_000);

    it('reports start and die events of the selected managed containers', async () => {
      const feed = await rt.events({ labels: { ...labels, [CHANNEL_LABEL]: 'a' } });
      const other = await rt.run(spec({ command: ['sh', '-c', 'exit 5'], labels: { ...labels, [CHANNEL_LABEL]: 'b' } }));
      const dying = await rt.run(spec({ command: ['sh', '-c', 'sleep 0.3; exit 7'], labels: { ...labels, [CHANNEL_LABEL]: 'a' } }));
      const seen: RuntimeEvent[] = [];
      const watching = (async () => {
        for await (const event of feed) {
          seen.push(event);
          if (event.type === 'die' && event.containerId === dying.id) break;
        }
      })();
      try {
        await until('the die event', () => Promise.resolve(seen.some((e) => e.type === 'die') ? true : undefined));
      } finally {
        feed.close();
      }
      await watching;
      expect(seen.map((e) => [e.type, e.containerId])).toEqual([['start', dying.id], ['die', dying.id]]);
      const die = seen[1];
      expect(die).toMatchObject({ type: 'die', exitCode: 7, name: dying.name, owner: owner() });
      expect(die?.at).toBeInstanceOf(Date);
      expect(seen.some((e) => e.containerId === other.id)).toBe(false);
    });

    it('with init, delivers the stop signal to an app that set no handler (PID 1 would ignore it)', async () => {
      // `sleep` replaces the shell once it said so: stopping earlier would signal a process that
      // is still starting (on a loaded machine, init may not have its child yet).
      const app = ['sh', '-c', 'echo up; exec sleep 600'];
      const plain = await rt.run(spec({ command: app }));
      const withInit = await rt.run(spec({ command: app, init: true }));
      for (const c of [plain, withInit]) {
        await until(`${c.name} to be up`, async () => {
          const feed = await rt.logs(c.id, { follow: false });
          const lines: LogLine[] = [];
          for await (const line of feed) lines.push(line);
          return lines.some((l) => l.message === 'up') ? true : undefined;
        });
      }
      // A kill after the grace period ends with 137 (SIGKILL); a delivered SIGTERM with 143.
      await Promise.all([rt.stop(plain.id, { graceSeconds: 1 }), rt.stop(withInit.id, { graceSeconds: 30 })]);
      expect((await rt.inspect(plain.id))?.exitCode).toBe(137);
      expect((await rt.inspect(withInit.id))?.exitCode).toBe(143);
      await Promise.all([rt.remove(plain.id), rt.remove(withInit.id)]);
    });

    it('stops and removes idempotently', async () => {
      const c = await rt.run(spec({ command: ['sleep', '600'] }));
      await rt.stop(c.id, { graceSeconds: 0 });
      await rt.stop(c.id, { graceSeconds: 0 });
      expect((await rt.inspect(c.id))?.state).toBe('exited');
      expect(await rt.remove(c.id)).toBe(true);
      expect(await rt.remove(c.id)).toBe(false);
      await rt.stop(c.id);
      expect(await rt.inspect(c.id)).toBeNull();
      expect(await rt.stats(c.id)).toBeNull();
    });

    it('tags, inspects and removes images', async () => {
      const extra = `slipway-test/app-${suite}:retagged`;
      await rt.tagImage(appImage, extra);
      const a = await rt.inspectImage(appImage);
      const b = await rt.inspectImage(extra);
      expect(b?.id).toBe(a?.id);
      expect(b?.tags).toEqual(expect.arrayContaining([appImage, extra]));
      expect(await rt.removeImage(extra)).toBe(true);
      expect(await rt.removeImage(extra)).toBe(false);
      expect(await rt.inspectImage(extra)).toBeNull();
      expect(await rt.inspectImage(appImage)).not.toBeNull();
      await expect(rt.tagImage(`slipway-test/none-${suite}:1`, extra)).rejects.toThrow();
    });

    it('lists the managed images a selector matches, with their tags and labels', async () => {
      const listed = await rt.listImages({ labels });
      const app = listed.find((i) => i.tags.includes(appImage));
      expect(app).toMatchObject({ id: (await rt.inspectImage(appImage))?.id, labels: expect.objectContaining(labels) as unknown });
      expect(app?.createdAt.getTime()).toBeGreaterThan(Date.parse('2020-01-01'));
      // the owner part of a selector matches the owner labels a build put on its image
      const owned = await rt.listImages({ owner: { project: owner().project }, labels });
      expect(owned.map((i) => i.tags).flat()).toEqual(expect.arrayContaining([appImage, `slipway-test/app-${suite}:lines`]));
      expect(await rt.listImages({ owner: { project: `${owner().project}-other` }, labels })).toEqual([]);
      expect(await rt.listImages({ labels: { [SUITE_LABEL]: `${suite}-none` } })).toEqual([]);
    });

    it('purges everything that carries a label, and refuses an empty selector', async () => {
      await expect(rt.purge({})).rejects.toThrow();
      const purged = await rt.purge({ labels });
      expect(purged.containers).toBeGreaterThan(0);
      expect(purged.images).toBeGreaterThan(0);
      expect(purged.networks).toBeGreaterThanOrEqual(2);
      expect(await rt.list({ labels })).toEqual([]);
      expect(await rt.inspect(web.id)).toBeNull();
      expect(await rt.inspectImage(appImage)).toBeNull();
      // the network is gone: ensuring it creates it anew
      expect((await rt.ensureNetwork({ name: network, workspace: owner().workspace, labels })).created).toBe(true);
      expect(await rt.purge({ labels })).toEqual({ containers: 0, networks: 1, volumes: 0, images: 0 });
    });
  });
}

/**
 * A driver's address pool (`--network-pool`): every network gets its own subnet of the pool,
 * never one another network of the engine uses, even when two processes create at once; a full
 * pool is a NetworkPoolFullError; a removed network's subnet is free again.
 */
function networkPoolConformance(name: string, makeRuntime: (pool: NetworkPool) => Runtime): void {
  describe(`network pool: ${name}`, () => {
    const suite = `np${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
    const labels = { [SUITE_LABEL]: suite };
    // a random /26 of 10.254/16 in /28s: four networks, apart from the default pool other tests use
    const third = randomBytes(1)[0] ?? 0;
    const fourth = ((randomBytes(1)[0] ?? 0) % 4) * 64;
    const prefix = `10.254.${third.toString()}`;
    const pool: NetworkPool = { cidr: `${prefix}.${fourth.toString()}/26`, size: 28 };
    const inPool = (subnet: string | null) => {
      const m = new RegExp(`^${prefix.replace(/\./g, '\\.')}\\.(\\d+)/28$`).exec(subnet ?? '');
      return m !== null && Number(m[1]) >= fourth && Number(m[1]) < fourth + 64 && Number(m[1]) % 16 === 0;
    };
    const docker = new Docker();
    let n = 0;
    const spec = () => ({ name: `ws-${suite}-${String(++n)}`, workspace: `w-${suite}`, labels });

    afterAll(async () => {
      await makeRuntime(pool).purge({ labels });
      for (const net of await docker.listNetworks({ filters: { label: [`${SUITE_LABEL}=${suite}`] } })) await docker.getNetwork(net.Id).remove().catch(() => undefined);
    }, 60_000);

    it('gives each network its own subnet of the pool, also to creations racing from two processes, skips foreign networks, and frees a removed one', async () => {
      // a network the runtime does not manage already holds the pool's first /28
      const first = `${prefix}.${fourth.toString()}/28`;
      await docker.createNetwork({ Name: `foreign-${suite}`, Driver: 'bridge', IPAM: { Driver: 'default', Config: [{ Subnet: first }] }, Labels: labels });
      // two runtimes stand for two processes on one engine: each picks alone, the engine arbitrates
      const [a, b] = [makeRuntime(pool), makeRuntime(pool)];
      const made = await Promise.all([a.ensureNetwork(spec()), b.ensureNetwork(spec()), a.ensureNetwork(spec())]);
      const subnets = made.map((m) => m.subnet);
      expect(subnets.every(inPool), subnets.join(', ')).toBe(true);
      expect(new Set([first, ...subnets]).size).toBe(4);
      const listed = await a.listNetworks({ labels });
      expect(listed.map((l) => l.subnet).sort()).toEqual([...subnets].sort());

      // full: the fifth /28 does not exist
      const full = await b.ensureNetwork(spec()).then(() => null, (err: unknown) => err);
      expect(full).toBeInstanceOf(NetworkPoolFullError);
      expect((full as Error).message).toMatch(new RegExp(`every /28 subnet of the network pool ${pool.cidr.replace(/[./]/g, '\\$&')} \\(4 networks; --network-pool, --network-size\\) is in use`));

      // a removed network's subnet is free again
      const gone = made[1];
      expect(await a.removeNetwork(gone.id)).toBe(true);
      const again = await b.ensureNetwork(spec());
      expect(again.subnet).toBe(gone.subnet);
    }, 60_000);

    it('lists a pooled network with the subnet it was given', async () => {
      const rt = makeRuntime(pool);
      const net = await rt.ensureNetwork(spec()).catch(() => null);
      // the previous case may have left the pool full: make room
      if (net === null) {
        for (const l of await rt.listNetworks({ labels })) await rt.removeNetwork(l.id);
      }
      const ensured = net ?? (await rt.ensureNetwork(spec()));
      const listed = (await rt.listNetworks({ labels })).find((l) => l.id === ensured.id);
      expect(listed?.subnet).toBe(ensured.subnet);
      expect(inPool(ensured.subnet)).toBe(true);
    }, 60_000);
  });
}

networkPoolConformance('Docker Engine', (pool) => new DockerRuntime({ docker: new Docker(), networkPool: pool }));

// The legacy builder first (--builder classic), then the default (BuildKit), which releases the base image.
runtimeConformance('Docker Engine, classic builder', async () => {
  const docker = new Docker();
  return { runtime: new DockerRuntime({ docker, builder: 'classic' }), baseImage: await ensureBaseImage(docker) };
});

runtimeConformance('Docker Engine', async () => {
  const docker = new Docker();
  return {
    runtime: new DockerRuntime({ docker }),
    baseImage: await ensureBaseImage(docker),
    close: () => releaseTestRun(docker),
  };
});
