import { randomBytes } from 'node:crypto';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LogDirection, LogEntry, LogFilter, LogLine } from '../../src/domain/logs.js';
import { makeProject, makeWorkspace, startTestServer, type TestProject, type TestServer, type TestWorkspace } from '../factories/harness.js';
import { STORE_KINDS } from '../factories/stores.js';

interface Entry {
  id: number;
  timestamp: string;
  deployment_id: string;
  pod: string;
  stream: string;
  message: string;
  level: string | null;
}
interface Page {
  entries: Entry[];
  next_cursor: string | null;
}
interface Usage {
  bytes: number;
  lines: number;
  oldest: string | null;
  newest: string | null;
  retention_days: number;
  dropped_lines: number;
}

const T0 = Date.parse('2026-11-26T10:00:00.000Z');
const DAY = 86_400_000;
const RFC3339_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/**
 * The log routes over the real API on both stores. Lines go in straight through the LogStore
 * (the collector that writes them in production is not part of these routes).
 */
describe.each(STORE_KINDS)('project logs on %s', (kind) => {
  let s: TestServer;
  let w: TestWorkspace;
  beforeAll(async () => {
    s = await startTestServer(kind);
    w = await makeWorkspace(s);
  });
  afterAll(async () => s.close());

  const base = (p: { slug: string }, ws: { slug: string } = w) => `/api/workspaces/${ws.slug}/projects/${p.slug}/logs`;
  const query = (p: { slug: string }, params = '', key = w.member.key, ws: { slug: string } = w) => s.request<Page>('GET', `${base(p, ws)}${params === '' ? '' : `?${params}`}`, { key });
  const usage = (p: { slug: string }, key = w.member.key, ws: { slug: string } = w) => s.request<Usage>('GET', `${base(p, ws)}/usage`, { key });
  const messages = (r: { body: { data?: Page } }) => (r.body.data?.entries ?? []).map((e) => e.message);

  function line(p: TestProject, i: number, over: Partial<LogLine> = {}, ws: { id: string } = w): LogLine {
    return { projectId: p.id, workspaceId: ws.id, deploymentId: 'dep-a', pod: 'web-1', stream: 'stdout', timestamp: T0 + i * 1000, message: `line ${i.toString()}`, ...over };
  }
  const range = (a: number, b: number) => (a <= b ? Array.from({ length: b - a + 1 }, (_, i) => a + i) : Array.from({ length: a - b + 1 }, (_, i) => a - i));
  const append = (p: TestProject, from: number, to: number, over: Partial<LogLine> = {}) => s.logStore.append({ lines: range(from, to).map((i) => line(p, i, over)) });
  const lines = (...ns: number[]) => ns.map((n) => `line ${n.toString()}`);

  /** A GET of the download, body gunzipped and parsed. */
  async function download(p: { slug: string }, params = '', key = w.member.key) {
    const res = await fetch(`${s.url}${base(p)}/download${params === '' ? '' : `?${params}`}`, { headers: { 'x-api-key': key } });
    const raw = Buffer.from(await res.arrayBuffer());
    const text = res.headers.get('content-type') === 'application/gzip' ? gunzipSync(raw).toString('utf8') : raw.toString('utf8');
    return { res, text, entries: text === '' || !res.ok ? [] : text.trimEnd().split('\n').map((l) => JSON.parse(l) as Entry) };
  }

  it('answers entries newest first by default, oldest first with direction=asc, timestamps in RFC 3339 with milliseconds', async () => {
    const p = await makeProject(s, w);
    await append(p, 1, 4);
    await s.logStore.append({ lines: [line(p, 5, { stream: 'stderr', level: 'error', pod: 'web-2', deploymentId: 'dep-b', message: 'boom' })] });
    const desc = await query(p);
    expect(desc.status, desc.text).toBe(200);
    expect(desc.body.data?.entries.map((e) => e.id)).toEqual([5, 4, 3, 2, 1]);
    expect(desc.body.data?.next_cursor).toBeNull();
    expect(desc.body.data?.entries[0]).toEqual({ id: 5, timestamp: '2026-11-26T10:00:05.000Z', deployment_id: 'dep-b', pod: 'web-2', stream: 'stderr', message: 'boom', level: 'error' });
    expect(desc.body.data?.entries[1]).toEqual({ id: 4, timestamp: '2026-11-26T10:00:04.000Z', deployment_id: 'dep-a', pod: 'web-1', stream: 'stdout', message: 'line 4', level: null });
    for (const e of desc.body.data?.entries ?? []) expect(e.timestamp).toMatch(RFC3339_MS);
    const asc = await query(p, 'direction=asc');
    expect(asc.body.data?.entries.map((e) => e.id)).toEqual([1, 2, 3, 4, 5]);
    expect(messages(await query(p, 'direction=desc&limit=2'))).toEqual(['boom', 'line 4']);
  });

  it('answers an empty page for a project without logs', async () => {
    const p = await makeProject(s, w);
    expect((await query(p)).body).toEqual({ success: true, data: { entries: [], next_cursor: null } });
  });

  it('filters by start (inclusive) and end (exclusive), in RFC 3339 or Unix milliseconds', async () => {
    const p = await makeProject(s, w);
    await append(p, 1, 10);
    expect(messages(await query(p, 'direction=asc&start=2026-11-26T10:00:08Z'))).toEqual(lines(8, 9, 10));
    expect(messages(await query(p, `direction=asc&start=${(T0 + 8000).toString()}`))).toEqual(lines(8, 9, 10));
    expect(messages(await query(p, 'direction=asc&end=2026-11-26T10:00:03.000Z'))).toEqual(lines(1, 2));
    expect(messages(await query(p, `direction=asc&end=${(T0 + 3000).toString()}`))).toEqual(lines(1, 2));
    // an offset is honoured; fractions past milliseconds are cut
    expect(messages(await query(p, `direction=asc&start=${encodeURIComponent('2026-11-26T11:00:04.0009+01:00')}&end=2026-11-26T09:00:06.5-01:00`))).toEqual(lines(4, 5, 6));
    expect(messages(await query(p, 'start=2026-11-26T10:00:04Z&end=2026-11-26T10:00:06Z'))).toEqual(lines(5, 4));
  });

  it('filters by deployment_id, stream and q (a case-insensitive substring); an unknown deployment matches nothing', async () => {
    const p = await makeProject(s, w);
    await s.logStore.append({
      lines: [
        line(p, 1, { message: 'GET /health 200' }),
        line(p, 2, { message: 'Connection REFUSED to db', stream: 'stderr', deploymentId: 'dep-b' }),
        line(p, 3, { message: 'connection refused again', deploymentId: 'dep-b' }),
        line(p, 4, { message: '100% done_ok' }),
        line(p, 5, { message: 'GET /health 500', stream: 'stderr' }),
      ],
    });
    expect(messages(await query(p, 'direction=asc&deployment_id=dep-b'))).toEqual(['Connection REFUSED to db', 'connection refused again']);
    expect(messages(await query(p, 'direction=asc&stream=stderr'))).toEqual(['Connection REFUSED to db', 'GET /health 500']);
    expect(messages(await query(p, 'direction=asc&stream=stdout'))).toEqual(['GET /health 200', 'connection refused again', '100% done_ok']);
    expect(messages(await query(p, 'direction=asc&q=connection%20refused'))).toEqual(['Connection REFUSED to db', 'connection refused again']);
    expect(messages(await query(p, 'direction=asc&q=CONNECTION+Refused'))).toEqual(['Connection REFUSED to db', 'connection refused again']);
    // % and _ are plain characters
    expect(messages(await query(p, `q=${encodeURIComponent('0% done_')}`))).toEqual(['100% done_ok']);
    expect(messages(await query(p, 'q=_'))).toEqual(['100% done_ok']);
    // an empty q filters nothing
    expect(messages(await query(p, 'q='))).toHaveLength(5);
    expect(messages(await query(p, 'direction=asc&deployment_id=dep-b&stream=stdout&q=again'))).toEqual(['connection refused again']);
    expect(messages(await query(p, 'stream=build'))).toEqual([]);
    const unknown = await query(p, 'deployment_id=no-such-deployment');
    expect(unknown.status).toBe(200);
    expect(unknown.body.data).toEqual({ entries: [], next_cursor: null });
  });

  it('pages with next_cursor in both directions while lines are appended, never repeating or skipping one', async () => {
    const p = await makeProject(s, w);
    await append(p, 1, 10);
    // newest first: the pages go on below the first one, whatever is appended above it
    const first = await query(p, 'limit=4');
    expect(first.body.data?.entries.map((e) => e.id)).toEqual([10, 9, 8, 7]);
    const cursor1 = first.body.data?.next_cursor ?? '';
    expect(cursor1).not.toBe('');
    await append(p, 11, 15);
    const second = await query(p, `limit=4&cursor=${encodeURIComponent(cursor1)}`);
    expect(second.body.data?.entries.map((e) => e.id)).toEqual([6, 5, 4, 3]);
    const third = await query(p, `limit=4&cursor=${encodeURIComponent(second.body.data?.next_cursor ?? '')}`);
    expect(third.body.data?.entries.map((e) => e.id)).toEqual([2, 1]);
    expect(third.body.data?.next_cursor).toBeNull();

    // oldest first: lines appended meanwhile come at the end
    const seen: number[] = [];
    let cursor: string | null = null;
    let appended = 15;
    do {
      const r: Awaited<ReturnType<typeof query>> = await query(p, `direction=asc&limit=6${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`);
      expect(r.status, r.text).toBe(200);
      seen.push(...(r.body.data?.entries ?? []).map((e) => e.id));
      cursor = r.body.data?.next_cursor ?? null;
      if (appended < 21) {
        await append(p, appended + 1, appended + 3);
        appended += 3;
      }
    } while (cursor !== null);
    expect(seen).toEqual(range(1, appended));
    // a last page that is exactly full has no cursor: the store looks one entry ahead
    const q = await s.logStore.query(p.id, {});
    expect(q.entries).toHaveLength(21);
    const full = await query(p, 'direction=asc&limit=21');
    expect(full.body.data?.next_cursor).toBeNull();
    const lessOne = await query(p, 'direction=asc&limit=20');
    const rest = await query(p, `direction=asc&limit=20&cursor=${encodeURIComponent(lessOne.body.data?.next_cursor ?? '')}`);
    expect(rest.body.data?.entries.map((e) => e.id)).toEqual([21]);
  });

  it('refuses a cursor that was altered, or that belongs to another direction, filter or project', async () => {
    const p = await makeProject(s, w);
    const other = await makeProject(s, w);
    await append(p, 1, 6);
    await append(other, 1, 6);
    const cursor = (await query(p, 'limit=2&stream=stdout')).body.data?.next_cursor ?? '';
    expect(cursor).not.toBe('');
    const ok = await query(p, `limit=2&stream=stdout&cursor=${encodeURIComponent(cursor)}`);
    expect(ok.status, ok.text).toBe(200);
    // the limit may change from page to page
    expect((await query(p, `limit=3&stream=stdout&cursor=${encodeURIComponent(cursor)}`)).body.data?.entries.map((e) => e.id)).toEqual([4, 3, 2]);
    const flip = (c: string, at: number) => `${c.slice(0, at)}${c.charAt(at) === 'A' ? 'B' : 'A'}${c.slice(at + 1)}`;
    const refused = [
      `limit=2&stream=stdout&cursor=${encodeURIComponent(flip(cursor, 0))}`,
      `limit=2&stream=stdout&cursor=${encodeURIComponent(flip(cursor, 1))}`,
      `limit=2&stream=stdout&cursor=${encodeURIComponent(flip(cursor, cursor.length - 1))}`,
      `limit=2&stream=stdout&cursor=${encodeURIComponent(`${cursor}A`)}`,
      `limit=2&stream=stdout&cursor=${encodeURIComponent(cursor.slice(0, cursor.indexOf('.')))}`,
      `limit=2&stream=stdout&cursor=garbage`,
      `limit=2&direction=asc&stream=stdout&cursor=${encodeURIComponent(cursor)}`,
      `limit=2&cursor=${encodeURIComponent(cursor)}`,
      `limit=2&stream=stdout&q=line&cursor=${encodeURIComponent(cursor)}`,
    ];
    for (const params of refused) {
      const r = await query(p, params);
      expect(r.status, params).toBe(400);
      expect(r.body.error).toBe('"cursor" must be the next_cursor of a previous page of this query, with the same direction and filters.');
    }
    const elsewhere = await query(other, `limit=2&stream=stdout&cursor=${encodeURIComponent(cursor)}`);
    expect(elsewhere.status).toBe(400);
  });

  it('answers 400 naming the parameter for every bad value, before looking up the project', async () => {
    const p = await makeProject(s, w);
    await append(p, 1, 3);
    const cases: [string, string][] = [
      ['limit=0', '"limit" must be a whole number from 1 to 1000, written in decimal digits.'],
      ['limit=1001', '"limit" must be a whole number from 1 to 1000, written in decimal digits.'],
      ['limit=abc', '"limit" must be a whole number from 1 to 1000, written in decimal digits.'],
      ['limit=1.5', '"limit" must be a whole number from 1 to 1000, written in decimal digits.'],
      ['limit=1e2', '"limit" must be a whole number from 1 to 1000, written in decimal digits.'],
      ['limit=', '"limit" must be a whole number from 1 to 1000, written in decimal digits.'],
      ['limit=5&limit=6', '"limit" must be a whole number from 1 to 1000, written in decimal digits.'],
      ['direction=up', '"direction" must be one of asc, desc.'],
      ['direction=ASC', '"direction" must be one of asc, desc.'],
      ['stream=stdin', '"stream" must be one of stdout, stderr, build.'],
      ['start=yesterday', '"start" must be an RFC 3339 timestamp, such as 2026-11-26T10:00:00Z, or Unix milliseconds.'],
      ['start=2026-11-26', '"start" must be an RFC 3339 timestamp, such as 2026-11-26T10:00:00Z, or Unix milliseconds.'],
      ['start=2026-11-26T10:00:00', '"start" must be an RFC 3339 timestamp, such as 2026-11-26T10:00:00Z, or Unix milliseconds.'],
      ['start=2026-13-01T00:00:00Z', '"start" must be an RFC 3339 timestamp, such as 2026-11-26T10:00:00Z, or Unix milliseconds.'],
      ['start=2026-02-30T00:00:00Z', '"start" must be an RFC 3339 timestamp, such as 2026-11-26T10:00:00Z, or Unix milliseconds.'],
      ['start=2026-11-26T24:00:00Z', '"start" must be an RFC 3339 timestamp, such as 2026-11-26T10:00:00Z, or Unix milliseconds.'],
      ['start=-5', '"start" must be an RFC 3339 timestamp, such as 2026-11-26T10:00:00Z, or Unix milliseconds.'],
      ['start=1.5', '"start" must be an RFC 3339 timestamp, such as 2026-11-26T10:00:00Z, or Unix milliseconds.'],
      ['start=999999999999999', '"start" must be an RFC 3339 timestamp, such as 2026-11-26T10:00:00Z, or Unix milliseconds.'],
      ['start=', '"start" must not be empty.'],
      ['end=2026-11-26T10:00:00+25:00', '"end" must be an RFC 3339 timestamp, such as 2026-11-26T10:00:00Z, or Unix milliseconds.'],
      ['end=soon', '"end" must be an RFC 3339 timestamp, such as 2026-11-26T10:00:00Z, or Unix milliseconds.'],
      ['start=2026-11-26T10:00:05Z&end=2026-11-26T10:00:05Z', '"end" must be later than "start".'],
      [`start=${(T0 + 5000).toString()}&end=2026-11-26T10:00:01Z`, '"end" must be later than "start".'],
      ['deployment_id=', '"deployment_id" must not be empty.'],
      [`deployment_id=${'d'.repeat(101)}`, '"deployment_id" must be at most 100 characters long.'],
      [`q=${'x'.repeat(257)}`, '"q" must be at most 256 characters long.'],
      ['q=a&q=b', '"q" must be a string.'],
      ['cursor=', '"cursor" must not be empty.'],
      [`cursor=${'c'.repeat(101)}`, '"cursor" must be at most 100 characters long.'],
      ['page=2', 'Unknown field "page" in the query string.'],
    ];
    for (const [params, error] of cases) {
      const r = await query(p, params);
      expect({ params, status: r.status, error: r.body.error }).toEqual({ params, status: 400, error });
      // the same on a project that does not exist: the request is checked first
      const missing = await query({ slug: 'no-such-project' }, params);
      expect({ params, status: missing.status }).toEqual({ params, status: 400 });
    }
    // the download takes the filters, not the paging
    for (const [params, error] of [
      ['start=nope', '"start" must be an RFC 3339 timestamp, such as 2026-11-26T10:00:00Z, or Unix milliseconds.'],
      ['stream=stdin', '"stream" must be one of stdout, stderr, build.'],
      ['direction=sideways', '"direction" must be one of asc, desc.'],
      ['start=2026-11-26T10:00:05Z&end=2026-11-26T10:00:04Z', '"end" must be later than "start".'],
      ['limit=10', 'Unknown field "limit" in the query string.'],
      ['cursor=abc', 'Unknown field "cursor" in the query string.'],
    ] as const) {
      const r = await s.request('GET', `${base(p)}/download?${params}`, { key: w.member.key });
      expect({ params, status: r.status, error: r.body.error }).toEqual({ params, status: 400, error });
    }
    const u = await s.request('GET', `${base(p)}/usage?x=1`, { key: w.member.key });
    expect(u.status).toBe(200);
  });

  it('downloads every matching line as gzip-compressed NDJSON, oldest first, with the filters of the query', async () => {
    const p = await makeProject(s, w);
    await append(p, 1, 2500);
    await s.logStore.append({ lines: [line(p, 2501, { stream: 'stderr', level: 'warn', message: 'héllo "quoted"\ttab' })] });
    const before = s.clock.now();
    const all = await download(p);
    expect(all.res.status).toBe(200);
    expect(all.res.headers.get('content-type')).toBe('application/gzip');
    const disposition = all.res.headers.get('content-disposition') ?? '';
    const m = /^attachment; filename="(.+)"$/.exec(disposition);
    expect(m?.[1]).toMatch(new RegExp(`^${p.slug}-logs-\\d{8}T\\d{6}Z\\.ndjson\\.gz$`));
    const stamp = before.toISOString().slice(0, 10).replace(/-/g, '');
    expect(m?.[1]).toContain(`-logs-${stamp}T`);
    expect(all.entries).toHaveLength(2501);
    expect(all.entries.map((e) => e.id)).toEqual(range(1, 2501));
    expect(all.entries[2500]).toEqual({ id: 2501, timestamp: new Date(T0 + 2_501_000).toISOString(), deployment_id: 'dep-a', pod: 'web-1', stream: 'stderr', message: 'héllo "quoted"\ttab', level: 'warn' });
    // the same entries, field for field, as the query pages show
    const page = await query(p, 'direction=asc&limit=1000');
    expect(all.entries.slice(0, 1000)).toEqual(page.body.data?.entries);

    const filtered = await download(p, `direction=desc&start=${(T0 + 10_000).toString()}&end=${(T0 + 20_000).toString()}&q=LINE+1`);
    expect(filtered.entries.map((e) => e.message)).toEqual(lines(19, 18, 17, 16, 15, 14, 13, 12, 11, 10));
    expect((await download(p, 'stream=stderr')).entries.map((e) => e.id)).toEqual([2501]);
    const none = await download(p, 'deployment_id=nope');
    expect(none.res.status).toBe(200);
    expect(none.text).toBe('');
  });

  it('answers HEAD on the download with the headers and no body', async () => {
    const p = await makeProject(s, w);
    await append(p, 1, 10);
    const r = await fetch(`${s.url}${base(p)}/download`, { method: 'HEAD', headers: { 'x-api-key': w.member.key } });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('application/gzip');
    expect(r.headers.get('content-disposition')).toMatch(/^attachment; filename="/);
    expect((await r.arrayBuffer()).byteLength).toBe(0);
  });

  it('streams a large download in chunks, reading the store only as fast as the client takes it', async () => {
    const p = await makeProject(s, w);
    const TOTAL = 200_000;
    // random text, so that gzip cannot shrink the file into the socket buffers
    for (let from = 1; from <= TOTAL; from += 5000) {
      await s.logStore.append({ lines: range(from, from + 4999).map((i) => line(p, i, { message: `${i.toString()} ${randomBytes(72).toString('base64')}` })) });
    }
    // count the store pages the download has read
    const store = s.logStore;
    const stream = store.stream.bind(store);
    let pagesRead = 0;
    store.stream = (projectId: string, filter: LogFilter & { direction?: LogDirection | undefined }, pageSize?: number) =>
      (async function* counted(): AsyncGenerator<LogEntry[]> {
        for await (const page of stream(projectId, filter, pageSize)) {
          pagesRead += 1;
          yield page;
        }
      })();
    try {
      const res = await new Promise<IncomingMessage>((resolve, reject) => {
        httpRequest(`${s.url}${base(p)}/download`, { headers: { 'x-api-key': w.member.key } }, resolve).on('error', reject).end();
      });
      expect(res.statusCode).toBe(200);
      expect(res.headers['transfer-encoding']).toBe('chunked');
      expect(res.headers['content-length']).toBeUndefined();
      // the client stops reading: the server must stop reading the store soon after
      res.pause();
      await new Promise((r) => setTimeout(r, 1500));
      const whilePaused = pagesRead;
      expect(whilePaused).toBeLessThan(TOTAL / 1000 / 2);
      const chunks: Buffer[] = [];
      for await (const chunk of res) chunks.push(chunk as Buffer);
      expect(chunks.length).toBeGreaterThan(10);
      expect(pagesRead).toBe(TOTAL / 1000);
      const text = gunzipSync(Buffer.concat(chunks)).toString('utf8');
      const parsed = text.trimEnd().split('\n');
      expect(parsed).toHaveLength(TOTAL);
      expect(JSON.parse(parsed[0] ?? '')).toMatchObject({ id: 1 });
      expect(JSON.parse(parsed[TOTAL - 1] ?? '')).toMatchObject({ id: TOTAL, message: expect.stringMatching(/^200000 /) as unknown });
    } finally {
      store.stream = stream;
    }
  }, 120_000);

  it('reports exact usage and the workspace retention setting', async () => {
    const ws = await makeWorkspace(s);
    const p = await makeProject(s, ws);
    const empty = await usage(p, ws.member.key, ws);
    expect(empty.body).toEqual({ success: true, data: { bytes: 0, lines: 0, oldest: null, newest: null, retention_days: 7, dropped_lines: 0 } });
    await s.logStore.append({
      lines: [line(p, 3, { message: 'héllo' }, ws), line(p, 1, { message: 'abc' }, ws), line(p, 7, { message: '€' }, ws)],
      dropped: [{ projectId: p.id, workspaceId: ws.id, lines: 4 }],
    });
    const put = await s.request('PUT', `/api/workspaces/${ws.slug}`, { key: ws.owner.key, body: { settings: { log_retention_days: 30 } } });
    expect(put.status).toBe(200);
    const u = await usage(p, ws.member.key, ws);
    expect(u.body).toEqual({
      success: true,
      data: { bytes: 6 + 3 + 3, lines: 3, oldest: '2026-11-26T10:00:01.000Z', newest: '2026-11-26T10:00:07.000Z', retention_days: 30, dropped_lines: 4 },
    });
  });

  it('enforces each workspace retention and the per-project size cap in the retention pass', async () => {
    const ws = await makeWorkspace(s);
    await s.request('PUT', `/api/workspaces/${ws.slug}`, { key: ws.owner.key, body: { settings: { log_retention_days: 2 } } });
    const keepsWeek = await makeProject(s, w);
    const keepsTwo = await makeProject(s, ws);
    const now = s.clock.now().getTime();
    const aged = (p: TestProject, on: { id: string }) =>
      s.logStore.append({ lines: [5, 3, 1, 0].map((days, i) => line(p, i, { timestamp: now - days * DAY - 60_000, message: `${days.toString()} days old` }, on)) });
    await aged(keepsWeek, w);
    await aged(keepsTwo, ws);
    // the logs of a workspace that is gone (its deletion missed them) go too
    const gone = { id: s.deps.ids.id() };
    await s.logStore.append({ lines: [line(keepsTwo, 9, { projectId: 'project-of-a-gone-workspace', timestamp: now }, gone)] });
    await s.services.logs.enforceRetention();
    expect(messages(await query(keepsWeek, 'direction=asc'))).toEqual(['5 days old', '3 days old', '1 days old', '0 days old']);
    expect(messages(await query(keepsTwo, 'direction=asc', ws.member.key, ws))).toEqual(['1 days old', '0 days old']);
    expect((await usage(keepsTwo, ws.member.key, ws)).body.data).toMatchObject({ lines: 2, bytes: 20, retention_days: 2 });
    expect((await s.logStore.usage('project-of-a-gone-workspace')).lines).toBe(0);
    // three days later the two left are past two days, and the week-long workspace loses the oldest
    s.clock.advance(3 * DAY);
    await s.services.logs.enforceRetention();
    expect(messages(await query(keepsTwo, '', ws.member.key, ws))).toEqual([]);
    expect(messages(await query(keepsWeek, 'direction=asc'))).toEqual(['3 days old', '1 days old', '0 days old']);
  });

  it('deletes the logs of a deleted project, and of every project of a deleted workspace', async () => {
    const p = await makeProject(s, w);
    const keep = await makeProject(s, w);
    await append(p, 1, 20);
    await append(keep, 1, 5);
    const del = await s.request('DELETE', `/api/workspaces/${w.slug}/projects/${p.slug}`, { key: w.member.key });
    expect(del.status, del.text).toBe(200);
    expect(await s.logStore.usage(p.id)).toMatchObject({ lines: 0, bytes: 0 });
    expect((await s.logStore.query(p.id, {})).entries).toEqual([]);
    expect((await s.logStore.query(keep.id, {})).entries).toHaveLength(5);
    // a new project with the same slug starts without logs
    const again = await s.request<{ slug: string }>('POST', `/api/workspaces/${w.slug}/projects`, { key: w.member.key, body: { name: p.name } });
    expect(again.status).toBe(201);
    expect((await query({ slug: p.slug })).body.data).toEqual({ entries: [], next_cursor: null });

    const ws = await makeWorkspace(s);
    const a = await makeProject(s, ws);
    const b = await makeProject(s, ws);
    await s.logStore.append({ lines: [line(a, 1, {}, ws), line(b, 1, {}, ws), line(b, 2, {}, ws)] });
    const gone = await s.request('DELETE', `/api/workspaces/${ws.slug}`, { key: ws.owner.key });
    expect(gone.status, gone.text).toBe(200);
    expect((await s.logStore.usage(a.id)).lines).toBe(0);
    expect((await s.logStore.usage(b.id)).lines).toBe(0);
    expect((await s.logStore.query(keep.id, {})).entries).toHaveLength(5);
  });

  it("answers 404 for another workspace's project and for a project that does not exist, on every log route", async () => {
    const other = await makeWorkspace(s);
    const theirs = await makeProject(s, other);
    await s.logStore.append({ lines: [line(theirs, 1, { message: 'their secret line' }, other)] });
    for (const suffix of ['', '/download', '/usage']) {
      for (const target of [{ ws: other, p: theirs }, { ws: w, p: theirs }, { ws: w, p: { slug: 'no-such-project' } }]) {
        const r = await s.request('GET', `${base(target.p, target.ws)}${suffix}`, { key: w.owner.key });
        expect(r.status, `${suffix} ${r.text}`).toBe(404);
        expect(r.text).not.toContain('their secret line');
      }
    }
    // their own member reads it
    expect(messages(await query(theirs, '', other.member.key, other))).toEqual(['their secret line']);
  });
});

describe.each(STORE_KINDS)('the per-project log size cap on %s', (kind) => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer(kind, { platform: { logMaxBytesPerProject: 100 } });
  });
  afterAll(async () => s.close());

  it('drops the oldest lines of a project past --log-max-bytes-per-project, and leaves the others', async () => {
    const w = await makeWorkspace(s);
    const big = await makeProject(s, w);
    const small = await makeProject(s, w);
    const now = s.clock.now().getTime();
    const ten = (p: TestProject, n: number) => Array.from({ length: n }, (_, i) => ({ projectId: p.id, workspaceId: w.id, deploymentId: 'd', pod: 'p', stream: 'stdout' as const, timestamp: now - 1000 + i, message: `msg-${i.toString().padStart(6, '0')}` }));
    await s.logStore.append({ lines: [...ten(big, 25), ...ten(small, 10)] });
    const result = await s.services.logs.enforceRetention();
    expect(result).toEqual({ deletedLines: 15, deletedBytes: 150 });
    const u = await s.request<Usage>('GET', `/api/workspaces/${w.slug}/projects/${big.slug}/logs/usage`, { key: w.member.key });
    expect(u.body.data).toMatchObject({ lines: 10, bytes: 100 });
    const r = await s.request<Page>('GET', `/api/workspaces/${w.slug}/projects/${big.slug}/logs?direction=asc`, { key: w.member.key });
    expect(r.body.data?.entries.map((e) => e.message)).toEqual(Array.from({ length: 10 }, (_, i) => `msg-${(i + 15).toString().padStart(6, '0')}`));
    expect((await s.logStore.usage(small.id)).lines).toBe(10);
  });
});
