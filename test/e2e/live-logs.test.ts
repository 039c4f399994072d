import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LogLine } from '../../src/domain/logs.js';
import { LogWriter } from '../../src/modules/logs/log-writer.js';
import { makeProject, makeUser, makeWorkspace, startTestServer, type TestProject, type TestServer, type TestWorkspace } from '../factories/harness.js';
import { STORE_KINDS } from '../factories/stores.js';
import { openStream, type StreamSession } from '../factories/stream-client.js';

interface JsonFrame {
  id: number;
  timestamp: string;
  deployment_id: string;
  pod: string;
  stream: string;
  message: string;
  level?: string;
}

const T0 = Date.parse('2026-11-26T10:00:00.000Z');
const range = (a: number, b: number) => Array.from({ length: b - a + 1 }, (_, i) => a + i);
const ids = (frames: readonly string[]) => frames.map((f) => (JSON.parse(f) as JsonFrame).id);

async function until(what: string, check: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe.each(STORE_KINDS)('live log stream on %s', (kind) => {
  let s: TestServer;
  let w: TestWorkspace;
  let writer: LogWriter;
  beforeAll(async () => {
    s = await startTestServer(kind, { streamRecheckMs: 200 });
    w = await makeWorkspace(s);
    // as the collector will: this process's batches wake its live tail at once
    writer = new LogWriter({
      logs: s.logStore,
      flushEveryMs: 20,
      onStored: (projects) => {
        for (const p of projects) s.liveLogs.notify(p);
      },
    });
  });
  afterAll(async () => {
    await writer.close();
    await s.close();
  });

  const wsUrl = (project: TestProject, query = '', slug = w.slug) => `${s.url.replace('http', 'ws')}/api/workspaces/${slug}/projects/${project.slug}/live-logs${query}`;
  const line = (project: TestProject, i: number, over: Partial<LogLine> = {}): LogLine => ({
    projectId: project.id,
    workspaceId: w.id,
    deploymentId: 'dep-1',
    pod: 'web-1',
    stream: 'stdout',
    timestamp: T0 + i,
    message: `line ${i.toString()}`,
    ...over,
  });
  const lines = (project: TestProject, from: number, to: number, over: Partial<LogLine> = {}) => range(from, to).map((i) => line(project, i, over));
  const text = (i: number) => `${new Date(T0 + i).toISOString()} web-1 stdout line ${i.toString()}`;
  const open = (project: TestProject, query = '') => openStream(wsUrl(project, query), { 'x-api-key': w.member.key });
  const close = async (session: StreamSession) => {
    session.close();
    await session.closed;
  };

  it('sends the last 100 lines, then every new line in storage order', async () => {
    const p = await makeProject(s, w);
    await s.logStore.append({ lines: lines(p, 1, 150) });
    const session = open(p);
    await session.received(100);
    expect(session.frames).toEqual(range(51, 150).map(text));
    // from the writer, in several batches, some while earlier ones are in flight
    for (let i = 151; i <= 400; i += 25) {
      writer.write(lines(p, i, i + 24));
      if (i % 50 === 1) await new Promise((r) => setTimeout(r, 5));
    }
    await session.received(350);
    expect(session.frames).toEqual(range(51, 400).map(text));
    await close(session);
  });

  it('takes tail=0 and JSON frames carrying the id', async () => {
    const p = await makeProject(s, w);
    await s.logStore.append({ lines: lines(p, 1, 10) });
    const session = open(p, '?tail=0&format=json');
    // nothing yet: no start
    await new Promise((r) => setTimeout(r, 200));
    expect(session.frames).toEqual([]);
    writer.write([line(p, 11, { stream: 'stderr', level: 'error', deploymentId: 'dep-2', pod: 'web-2' }), line(p, 12)]);
    await session.received(2);
    expect(session.frames.map((f) => JSON.parse(f) as JsonFrame)).toEqual([
      { id: 11, timestamp: new Date(T0 + 11).toISOString(), deployment_id: 'dep-2', pod: 'web-2', stream: 'stderr', message: 'line 11', level: 'error' },
      { id: 12, timestamp: new Date(T0 + 12).toISOString(), deployment_id: 'dep-1', pod: 'web-1', stream: 'stdout', message: 'line 12' },
    ]);
    const tail3 = open(p, '?tail=3&format=json');
    await tail3.received(3);
    expect(ids(tail3.frames)).toEqual([10, 11, 12]);
    await Promise.all([close(session), close(tail3)]);
  });

  it('resumes with ?since=<id> exactly: no gap, no repeat, while lines keep coming', async () => {
    const p = await makeProject(s, w);
    await s.logStore.append({ lines: lines(p, 1, 20) });
    const ws1 = new WebSocket(wsUrl(p, '?tail=1000&format=json'), { headers: { 'x-api-key': w.member.key } });
    const first: string[] = [];
    ws1.on('message', (d: Buffer) => first.push(d.toString('utf8')));
    let next = 21;
    const writing = (async () => {
      for (; next <= 2000; next += 20) {
        writer.write(lines(p, next, next + 19));
        await new Promise((r) => setTimeout(r, 2));
      }
    })();
    await until('some live lines', () => first.length > 200);
    ws1.terminate();
    const seen = ids(first);
    const last = seen.at(-1) ?? 0;
    const rest = openStream(wsUrl(p, `?since=${last.toString()}&format=json`), { 'x-api-key': w.member.key });
    await writing;
    await until('every line', () => ids(rest.frames).at(-1) === 2000);
    expect([...seen, ...ids(rest.frames)]).toEqual(range(1, 2000));
    // a time: every line stamped at or after it
    const byTime = openStream(wsUrl(p, `?since=${new Date(T0 + 1990).toISOString()}&format=json`), { 'x-api-key': w.member.key });
    await byTime.received(11);
    const ms = openStream(wsUrl(p, `?since=${(T0 + 1995).toString()}&format=json`), { 'x-api-key': w.member.key });
    await ms.received(6);
    await new Promise((r) => setTimeout(r, 100));
    expect(ids(byTime.frames)).toEqual(range(1990, 2000));
    expect(ids(ms.frames)).toEqual(range(1995, 2000));
    await Promise.all([rest, byTime, ms].map((x) => close(x)));
  });

  it('drops a client that does not read with [ERROR] client too slow, and keeps serving the others', async () => {
    const p = await makeProject(s, w);
    // since=0: from the first line, whenever the subscription starts
    const slow = new WebSocket(wsUrl(p, '?since=0&format=json'), { headers: { 'x-api-key': w.member.key } });
    const slowFrames: string[] = [];
    slow.on('message', (d: Buffer) => slowFrames.push(d.toString('utf8')));
    const slowClosed = new Promise<void>((resolve) => {
      slow.on('close', () => {
        resolve();
      });
    });
    const good = open(p, '?since=0&format=json');
    // once a first line has reached both, both are served by the project's feed
    await s.logStore.append({ lines: [line(p, 0)] });
    s.liveLogs.notify(p.id);
    await good.received(1);
    await until('the first line on the slow client', () => slowFrames.length === 1);
    slow.pause();
    // 24 MB: more than the kernel's socket buffers and the client's 8 MiB bound together
    const padding = 'x'.repeat(1000);
    const total = 24_000;
    for (let i = 1; i <= total; i += 2000) {
      await s.logStore.append({ lines: lines(p, i, i + 1999, { message: padding }) });
      s.liveLogs.notify(p.id);
    }
    await good.received(total + 1);
    expect(ids(good.frames)).toEqual(range(1, total + 1));
    slow.resume();
    await slowClosed;
    expect(slowFrames.at(-1)).toBe('[ERROR] client too slow');
    const got = ids(slowFrames.slice(0, -1));
    expect(got.length).toBeLessThan(total);
    expect(got).toEqual(range(1, got.length));
    await close(good);
  }, 60_000);

  it('streams lines another process stores (a replica over the same store)', async () => {
    const p = await makeProject(s, w);
    const replica = await startTestServer(kind, { replicaOf: s });
    try {
      const session = openStream(`${replica.url.replace('http', 'ws')}/api/workspaces/${w.slug}/projects/${p.slug}/live-logs?format=json`, { 'x-api-key': w.member.key });
      await s.logStore.append({ lines: lines(p, 1, 5) });
      await session.received(5);
      // stored by the first instance, no notify here: PostgreSQL's NOTIFY or SQLite's poll wakes the replica
      for (let i = 6; i <= 300; i += 50) await s.logStore.append({ lines: lines(p, i, Math.min(i + 49, 300)) });
      await session.received(300);
      expect(ids(session.frames)).toEqual(range(1, 300));
      await close(session);
    } finally {
      await replica.close();
    }
  });

  it('ends the stream when the key is revoked', async () => {
    const p = await makeProject(s, w);
    const u = await makeUser(s, w.id);
    await s.store.repos.members.add({ workspace_id: w.id, user_id: u.id, role: 'member', joined_at: new Date().toISOString() });
    const session = openStream(wsUrl(p), { 'x-api-key': u.key });
    writer.write([line(p, 1)]);
    await session.received(1);
    await s.request('DELETE', `/api/workspaces/${w.slug}/api-keys/${u.keyId}`, { key: w.owner.key });
    expect(await session.closed).toEqual([text(1), '[ERROR] The API key has been revoked.']);
  });

  it.each([
    ['no key', {}, '', '[ERROR] An API key is required in the X-API-Key header.'],
    ['a bad key', { 'x-api-key': `svc_sk_${'f'.repeat(40)}` }, '', '[ERROR] The API key is not valid.'],
    ['tail over 1000', null, '?tail=1001', '[ERROR] "tail" must be a whole number from 0 to 1000, written in decimal digits.'],
    ['tail not a number', null, '?tail=1e3', '[ERROR] "tail" must be a whole number from 0 to 1000, written in decimal digits.'],
    ['tail given twice', null, '?tail=1&tail=2', '[ERROR] "tail" must be a whole number from 0 to 1000, written in decimal digits.'],
    ['a bad since', null, '?since=yesterday', '[ERROR] "since" must be a line id, an RFC 3339 time or Unix milliseconds.'],
    ['a since without a zone', null, '?since=2026-11-26T10:00:00', '[ERROR] "since" must be a line id, an RFC 3339 time or Unix milliseconds.'],
    ['a bad format', null, '?format=xml', '[ERROR] "format" must be one of text, json.'],
  ])('answers %s with one [ERROR] frame, then closes', async (_what, headers: Record<string, string> | null, query, frame) => {
    const p = await makeProject(s, w);
    expect(await openStream(wsUrl(p, query), headers ?? { 'x-api-key': w.member.key }).closed).toEqual([frame]);
  });

  it('accepts the key in the api_key query parameter, and leaves it out of the log', async () => {
    const p = await makeProject(s, w);
    await s.logStore.append({ lines: [line(p, 1)] });
    const session = openStream(wsUrl(p, `?api_key=${w.member.key}`));
    await session.received(1);
    expect(session.frames).toEqual([text(1)]);
    await close(session);
    expect(s.logs.join('\n')).not.toContain(w.member.key);
  });

  it("answers an outsider, an unknown project and another workspace's project with [ERROR], leaking nothing", async () => {
    const p = await makeProject(s, w);
    await s.logStore.append({ lines: [line(p, 1, { message: 'secret output' })] });
    const outsider = await makeWorkspace(s);
    const theirs = await makeProject(s, outsider);
    expect(await openStream(wsUrl(p), { 'x-api-key': outsider.owner.key }).closed).toEqual(['[ERROR] Workspace was not found.']);
    expect(await openStream(wsUrl({ ...p, slug: 'nope' }), { 'x-api-key': w.member.key }).closed).toEqual(['[ERROR] Project was not found.']);
    expect(await openStream(wsUrl(theirs), { 'x-api-key': w.member.key }).closed).toEqual(['[ERROR] Project was not found.']);
    expect(await openStream(wsUrl(p, '', outsider.slug), { 'x-api-key': outsider.owner.key }).closed).toEqual(['[ERROR] Project was not found.']);
  });

  it('answers a plain HTTP GET with 400 (or the refusal) in the envelope', async () => {
    const p = await makeProject(s, w);
    const path = `/api/workspaces/${w.slug}/projects/${p.slug}/live-logs`;
    expect(await s.request('GET', path, { key: w.member.key })).toMatchObject({
      status: 400,
      body: { success: false, error: 'This is a WebSocket stream: open it with a WebSocket handshake.' },
    });
    expect((await s.request('GET', path)).status).toBe(401);
  });
});

describe('live log stream pings', () => {
  let s: TestServer;
  let w: TestWorkspace;
  beforeAll(async () => {
    s = await startTestServer('sqlite', { streamPingMs: 100 });
    w = await makeWorkspace(s);
  });
  afterAll(async () => {
    await s.close();
  });

  it('pings an idle client, which stays connected while it answers, and drops one that stops answering', async () => {
    const p = await makeProject(s, w);
    const url = `${s.url.replace('http', 'ws')}/api/workspaces/${w.slug}/projects/${p.slug}/live-logs?tail=0`;

    const answering = new WebSocket(url, { headers: { 'x-api-key': w.member.key } });
    let pings = 0;
    answering.on('ping', () => { pings += 1; });
    await new Promise<void>((resolve, reject) => { answering.once('open', () => { resolve(); }); answering.once('error', reject); });
    // the ws client answers every ping with a pong by itself
    await until('three pings', () => pings >= 3, 5000);
    expect(answering.readyState).toBe(WebSocket.OPEN);

    // a client that never answers: the server drops it once a ping has gone unanswered for an interval
    const silent = new WebSocket(url, { headers: { 'x-api-key': w.member.key }, autoPong: false });
    let silentPings = 0;
    let silentClosed = false;
    silent.on('ping', () => { silentPings += 1; });
    silent.on('close', () => { silentClosed = true; });
    await new Promise<void>((resolve, reject) => { silent.once('open', () => { resolve(); }); silent.once('error', reject); });
    await until('the silent client dropped', () => silentClosed, 5000);
    expect(silentPings).toBeGreaterThanOrEqual(1);
    expect(answering.readyState).toBe(WebSocket.OPEN);
    answering.close();
  });
});
