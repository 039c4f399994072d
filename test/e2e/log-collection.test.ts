import { randomBytes } from 'node:crypto';
import Docker from 'dockerode';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { LogBatch } from '../../src/domain/logs.js';
import { LogCollector } from '../../src/modules/logs/collector.js';
import { LogWriter } from '../../src/modules/logs/log-writer.js';
import { DockerRuntime } from '../../src/adapters/runtime/docker/docker.runtime.js';
import { makeProject, makeWorkspace, startTestServer, type TestProject, type TestServer, type TestWorkspace } from '../factories/harness.js';
import { STORE_KINDS } from '../factories/stores.js';
import { ensureBaseImage } from '../factories/images.js';

interface Entry {
  id: number;
  timestamp: string;
  deployment_id: string;
  pod: string;
  stream: string;
  message: string;
  level: string | null;
}

const RFC3339_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/**
 * The collector over real containers (labelled as deploys label them) and the real log store;
 * what it stored is read back through GET …/logs.
 */
describe.each(STORE_KINDS)('log collection from the engine (%s)', (kind) => {
  const docker = new Docker();
  const runtime = new DockerRuntime({ docker });
  const instance = `lc-${randomBytes(4).toString('hex')}`;
  const labels = { 'slipway.instance': instance };
  const network = `ws-${instance}`;
  let s: TestServer;
  let w: TestWorkspace;
  let image: string;
  const collectors: LogCollector[] = [];
  const complaints: string[] = [];
  const log = { info: () => undefined, warn: (_o: object, m: string) => void complaints.push(m), error: (_o: object, m: string) => void complaints.push(m) };

  beforeAll(async () => {
    s = await startTestServer(kind);
    w = await makeWorkspace(s);
    image = await ensureBaseImage();
    await runtime.ensureNetwork({ name: network, workspace: w.id, labels });
  });
  afterEach(async () => {
    for (const c of collectors.splice(0)) await c.stop();
  });
  afterAll(async () => {
    await runtime.purge({ labels });
    await s.close();
  });

  interface CollectorOptions {
    ratePerSecond?: number;
    append?: (batch: LogBatch) => Promise<void>;
    writer?: LogWriter;
    pauseAtBufferedLines?: number;
  }

  function collector(opts: CollectorOptions = {}): LogCollector {
    const store = opts.append === undefined ? s.logStore : { append: opts.append };
    const c = new LogCollector({
      runtime,
      logs: s.logStore,
      writer: opts.writer ?? new LogWriter({ logs: store, flushEveryMs: 50, onStored: (ps) => { for (const p of ps) s.liveLogs.notify(p); } }),
      ...(opts.pauseAtBufferedLines === undefined ? {} : { pauseAtBufferedLines: opts.pauseAtBufferedLines }),
      labels,
      projectExists: async (id) => (await s.store.repos.projects.status(id)) !== undefined,
      log,
      rescanEveryMs: 500,
      ...(opts.ratePerSecond === undefined ? {} : { ratePerSecond: opts.ratePerSecond }),
    });
    collectors.push(c);
    return c;
  }

  async function stop(c: LogCollector): Promise<void> {
    await c.stop();
    collectors.splice(collectors.indexOf(c), 1);
  }

  async function container(p: { id: string }, script: string, deployment = `d-${randomBytes(3).toString('hex')}`) {
    return runtime.run({
      name: `${instance}-${randomBytes(3).toString('hex')}`,
      image,
      command: ['sh', '-c', script],
      env: {},
      owner: { workspace: w.id, project: p.id, deployment },
      labels,
      cpu: 0.5,
      memoryBytes: 64 * 1024 * 1024,
      network,
      restart: { kind: 'never' },
      init: true,
    });
  }

  async function entries(p: TestProject): Promise<Entry[]> {
    const out: Entry[] = [];
    let cursor: string | null = null;
    do {
      const q: string = `limit=1000&direction=asc${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`;
      const r = await s.request<{ entries: Entry[]; next_cursor: string | null }>('GET', `/api/workspaces/${w.slug}/projects/${p.slug}/logs?${q}`, { key: w.member.key });
      expect(r.status).toBe(200);
      out.push(...(r.body.data?.entries ?? []));
      cursor = r.body.data?.next_cursor ?? null;
    } while (cursor !== null);
    return out;
  }

  async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 20_000): Promise<T> {
    const end = Date.now() + ms;
    for (;;) {
      const got = await probe();
      if (got !== undefined) return got;
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
      await new Promise((res) => setTimeout(res, 100));
    }
  }

  const messagesOf = async (p: TestProject, n: number) =>
    until(`${n.toString()} lines`, async () => {
      const e = await entries(p);
      return e.length >= n ? e : undefined;
    });

  const lines = (prefix: string, from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => `${prefix} ${(from + i).toString()}`);

  it('stores stdout and stderr in order with the engine time stamps, and goes on after a container restart with no loss and no duplicate', async () => {
    const p = await makeProject(s, w);
    const c = collector();
    await c.start();
    const box = await container(p, 'for i in $(seq 1 500); do echo line $i; done; sleep 0.5; echo oops >&2; sleep 3600', 'd-first');
    const first = await messagesOf(p, 501);
    expect(first.map((e) => e.message)).toEqual([...lines('line', 1, 500), 'oops']);
    expect(first.every((e) => RFC3339_MS.test(e.timestamp) && e.deployment_id === 'd-first' && e.pod === box.name)).toBe(true);
    expect(first.at(-1)?.stream).toBe('stderr');
    expect(first[0]?.stream).toBe('stdout');
    const stamps = first.map((e) => Date.parse(e.timestamp));
    expect(stamps).toEqual([...stamps].sort((a, b) => a - b));
    expect(Math.abs((stamps[0] ?? 0) - (box.startedAt?.getTime() ?? 0))).toBeLessThan(5000);

    await docker.getContainer(box.id).restart({ t: 0 });
    const after = await messagesOf(p, 1002);
    await new Promise((res) => setTimeout(res, 1000));
    expect((await entries(p)).map((e) => e.message)).toEqual([...lines('line', 1, 500), 'oops', ...lines('line', 1, 500), 'oops']);
    expect(after.length).toBe(1002);
    await stop(c);
  });

  it('resumes exactly in a new collector, also when the old one died with lines it had not stored', async () => {
    const p = await makeProject(s, w);
    await container(p, 'i=0; while [ $i -lt 400 ]; do i=$((i+1)); echo tick $i; sleep 0.01; done; sleep 3600');
    const a = collector();
    await a.start();
    await until('the first ticks', async () => ((await entries(p)).length >= 50 ? true : undefined));
    await stop(a);
    // a kill -9: this one's store stops answering after its first batch, so what it read last is never stored
    let batches = 0;
    const b = collector({ append: (batch) => (++batches <= 1 ? s.logStore.append(batch) : Promise.reject(new Error('killed'))) });
    await b.start();
    await until('a failed batch', async () => (batches >= 3 ? true : undefined));
    await stop(b);
    const c = collector();
    await c.start();
    const all = await until('every tick', async () => {
      const e = await entries(p);
      return e.length >= 400 ? e : undefined;
    });
    await new Promise((res) => setTimeout(res, 1000));
    expect((await entries(p)).map((e) => e.message)).toEqual(lines('tick', 1, 400));
    expect(all.length).toBe(400);
    await stop(c);
  });

  it('forgets the stored cursor of a removed container, and keeps the one of a stopped container', async () => {
    const p = await makeProject(s, w);
    const c = collector();
    await c.start();
    const removed = await container(p, 'echo removed; sleep 3600');
    const stopped = await container(p, 'echo stopped; sleep 3600');
    await messagesOf(p, 2);
    const both = [removed.id, stopped.id];
    await until('both cursors stored', async () => ((await s.logStore.cursors(both)).size === 2 ? true : undefined));
    await docker.getContainer(stopped.id).stop({ t: 0 });
    await docker.getContainer(removed.id).remove({ force: true });
    await until('the removed container\'s cursor gone', async () => ((await s.logStore.cursors([removed.id])).size === 0 ? true : undefined));
    expect([...(await s.logStore.cursors(both)).keys()]).toEqual([stopped.id]);
    await stop(c);
  });

  it('cuts a line over 16 KiB and marks it, reads JSON and logfmt levels', async () => {
    const p = await makeProject(s, w);
    const c = collector();
    await c.start();
    await container(p, `head -c 20480 /dev/zero | tr '\\0' a; echo; echo '{"level":"error","msg":"boom"}'; echo 'level=warn msg=hm'; echo plain; sleep 3600`);
    const got = await messagesOf(p, 4);
    expect(got.map((e) => [e.message, e.level])).toEqual([
      [`${'a'.repeat(16_384 - Buffer.byteLength(' … [cut: 20480 bytes]'))} … [cut: 20480 bytes]`, null],
      ['{"level":"error","msg":"boom"}', 'error'],
      ['level=warn msg=hm', 'warn'],
      ['plain', null],
    ]);
    await stop(c);
  });

  it('drops what a container prints over the rate, counts it and says so in one line', async () => {
    const p = await makeProject(s, w);
    const c = collector({ ratePerSecond: 50 });
    await c.start();
    await container(p, 'seq 1 2000; sleep 3600');
    const got = await until('the marker', async () => {
      const e = await entries(p);
      return e.some((x) => x.message.startsWith('[slipway] dropped')) ? e : undefined;
    });
    await new Promise((res) => setTimeout(res, 1500));
    const all = await entries(p);
    expect(all.length).toBe(got.length);
    const markers = all.filter((e) => e.message.startsWith('[slipway] dropped'));
    expect(markers.length).toBe(1);
    const dropped = Number(/dropped (\d+) lines: over 50 lines\/s/.exec(markers[0]?.message ?? '')?.[1]);
    expect(all.length - 1 + dropped).toBe(2000);
    expect(all.slice(0, 50).map((e) => e.message)).toEqual(lines('', 1, 50).map((l) => l.trim()));
    const usage = await s.request<{ dropped_lines: number }>('GET', `/api/workspaces/${w.slug}/projects/${p.slug}/logs/usage`, { key: w.member.key });
    expect(usage.body.data?.dropped_lines).toBe(dropped);
    await stop(c);
  });

  it('stops reading while the store is behind instead of dropping: a burst larger than the writer\'s buffer is stored whole', async () => {
    const p = await makeProject(s, w);
    // a slow store: each batch takes 150 ms, and the writer holds at most 3,000 lines
    const slow = { append: async (batch: LogBatch) => { await new Promise((res) => setTimeout(res, 150)); await s.logStore.append(batch); } };
    const writer = new LogWriter({ logs: slow, flushEveryMs: 50, maxBatchLines: 500, maxBufferedLines: 3000 });
    const c = collector({ writer, pauseAtBufferedLines: 1000, ratePerSecond: 1_000_000 });
    await c.start();
    await container(p, 'seq 1 12000; sleep 3600');
    const all = await until('every line', async () => ((await s.logStore.usage(p.id)).lines >= 12_000 ? true : undefined), 60_000);
    expect(all).toBe(true);
    await new Promise((res) => setTimeout(res, 500));
    const got = await entries(p);
    expect(got.map((e) => e.message)).toEqual(lines('', 1, 12_000).map((l) => l.trim()));
    expect(writer.droppedLines).toBe(0);
    expect((await s.logStore.usage(p.id)).droppedLines).toBe(0);
    await stop(c);
  });

  it('leaves the containers of a deleted project alone', async () => {
    const p = await makeProject(s, w);
    const kept = await makeProject(s, w);
    const c = collector();
    await c.start();
    const doomed = await container(p, 'i=0; while true; do i=$((i+1)); echo beat $i; sleep 0.05; done');
    await container(kept, 'i=0; while true; do i=$((i+1)); echo beat $i; sleep 0.05; done');
    await until('lines of the doomed project', async () => ((await entries(p)).length > 0 ? true : undefined));
    const del = await s.request('DELETE', `/api/workspaces/${w.slug}/projects/${p.slug}`, { key: w.owner.key });
    expect(del.status).toBe(200);
    // the rescan finds the project gone; a line stored before that is removed again here
    await new Promise((res) => setTimeout(res, 1500));
    await s.logStore.deleteProject(p.id);
    const usageBefore = (await s.logStore.usage(kept.id)).lines;
    await new Promise((res) => setTimeout(res, 1500));
    expect((await s.logStore.usage(p.id)).lines).toBe(0);
    expect((await s.logStore.usage(kept.id)).lines).toBeGreaterThan(usageBefore);
    // a new collector (a restart) does not take it up either
    await stop(c);
    const again = collector();
    await again.start();
    await new Promise((res) => setTimeout(res, 1500));
    expect((await s.logStore.usage(p.id)).lines).toBe(0);
    expect((await runtime.inspect(doomed.id))?.state).toBe('running');
    await stop(again);
  });
});
