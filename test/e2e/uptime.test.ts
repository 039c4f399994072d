import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemRandom } from '../../src/domain/clock.js';
import { SecretBox } from '../../src/adapters/secrets/secret-box.js';
import { makeProject, makeWorkspace, startTestServer, type TestProject, type TestServer, type TestWorkspace } from '../factories/harness.js';
import { STORE_KINDS } from '../factories/stores.js';

interface Monitor {
  enabled: boolean;
  check_interval_sec: number;
  check_path: string;
  check_url: string;
  chat_webhook_url: string | null;
  notify_email: string | null;
  status: string;
  last_checked_at: string | null;
  last_response_ms: number | null;
}

const WEBHOOK = 'https://hooks.slack.com/services/T000/B000/XXXXsecretXXXX';

describe.each(STORE_KINDS)('uptime monitor settings on %s', (kind) => {
  let s: TestServer;
  let w: TestWorkspace;
  beforeAll(async () => {
    s = await startTestServer(kind, { platform: { appsDomain: 'apps.test', routerPort: 8000 } });
    w = await makeWorkspace(s);
  });
  afterAll(async () => s.close());

  const path = (ws: { slug: string }, p: { slug: string }) => `/api/workspaces/${ws.slug}/projects/${p.slug}/uptime`;
  const get = (p: { slug: string }, key = w.member.key, ws: { slug: string } = w) => s.request<Monitor>('GET', path(ws, p), { key });
  const put = (p: { slug: string }, body: unknown, key = w.member.key, ws: { slug: string } = w) =>
    s.request<Monitor>('PUT', path(ws, p), { key, body });
  const stored = (p: TestProject) => s.store.db.selectFrom('uptime_monitors').selectAll().where('project_id', '=', p.id).executeTakeFirst();

  it('answers the defaults before anything is set, without writing a row', async () => {
    const p = await makeProject(s, w);
    const r = await get(p);
    expect(r).toMatchObject({ status: 200 });
    expect(r.body).toEqual({
      success: true,
      data: {
        enabled: false,
        check_interval_sec: 60,
        check_path: '/',
        check_url: `http://${p.slug}-${w.slug}.apps.test:8000/`,
        chat_webhook_url: null,
        notify_email: null,
        status: 'unknown',
        last_checked_at: null,
        last_response_ms: null,
      },
    });
    expect(await stored(p)).toBeUndefined();
  });

  it('derives check_url from the default domain, the router port and check_path', async () => {
    const p = await makeProject(s, w);
    const r = await put(p, { check_path: '/healthz?deep=1' });
    expect(r.body.data?.check_url).toBe(`http://${p.slug}-${w.slug}.apps.test:8000/healthz?deep=1`);
    expect((await get(p)).body.data?.check_url).toBe(`http://${p.slug}-${w.slug}.apps.test:8000/healthz?deep=1`);
  });

  it('leaves the port out of check_url when the router serves port 80', async () => {
    const other = await startTestServer(kind, { platform: { appsDomain: 'apps.example.org', routerPort: 80 } });
    try {
      const ws = await makeWorkspace(other);
      const p = await makeProject(other, ws);
      const r = await other.request<Monitor>('GET', path(ws, p), { key: ws.member.key });
      expect(r.body.data?.check_url).toBe(`http://${p.slug}-${ws.slug}.apps.example.org/`);
    } finally {
      await other.close();
    }
  });

  it('changes only the fields given, creating the row on the first PUT', async () => {
    const p = await makeProject(s, w);
    const first = await put(p, { enabled: true });
    expect(first).toMatchObject({ status: 200, body: { success: true, data: { enabled: true, check_interval_sec: 60, check_path: '/', status: 'unknown' } } });
    const second = await put(p, { check_interval_sec: 300, notify_email: 'ops@example.com' });
    expect(second.body.data).toMatchObject({ enabled: true, check_interval_sec: 300, notify_email: 'ops@example.com', chat_webhook_url: null });
    const third = await put(p, { enabled: false, check_path: '/up' });
    expect(third.body.data).toMatchObject({ enabled: false, check_interval_sec: 300, check_path: '/up', notify_email: 'ops@example.com' });
    expect((await get(p)).body.data).toEqual(third.body.data);
    expect((await stored(p))?.status).toBe('unknown');
  });

  it('keeps both of two concurrent PUTs of different fields', async () => {
    const p = await makeProject(s, w);
    await Promise.all([put(p, { check_interval_sec: 120 }), put(p, { notify_email: 'race@example.com' }), put(p, { enabled: true })]);
    expect((await get(p)).body.data).toMatchObject({ check_interval_sec: 120, notify_email: 'race@example.com', enabled: true });
  });

  it('stores the webhook URL sealed and answers it opened', async () => {
    const p = await makeProject(s, w);
    const r = await put(p, { chat_webhook_url: WEBHOOK });
    expect(r.body.data?.chat_webhook_url).toBe(WEBHOOK);
    expect((await get(p)).body.data?.chat_webhook_url).toBe(WEBHOOK);
    const row = await stored(p);
    const sealed = row?.chat_webhook_url ?? '';
    expect(sealed).toMatch(/^v1:/);
    for (const part of [WEBHOOK, 'hooks.slack.com', 'XXXXsecretXXXX', 'T000/B000']) expect(JSON.stringify(row)).not.toContain(part);
    expect(s.deps.secrets.open(sealed, `uptime:${p.id}`)).toBe(WEBHOOK);
    // Bound to its project: the sealed value does not open for another one.
    expect(() => s.deps.secrets.open(sealed, 'uptime:another-project')).toThrow();
  });

  it('shows a webhook sealed under another key file as unset, until a new one is PUT', async () => {
    const p = await makeProject(s, w);
    await put(p, { chat_webhook_url: WEBHOOK, notify_email: 'ops@example.com' });
    const other = new SecretBox(randomBytes(32), systemRandom);
    await s.store.db.updateTable('uptime_monitors').set({ chat_webhook_url: other.seal(WEBHOOK, `uptime:${p.id}`) }).where('project_id', '=', p.id).execute();
    const shown = await get(p);
    expect(shown.status, shown.text).toBe(200);
    expect(shown.body.data).toMatchObject({ chat_webhook_url: null, notify_email: 'ops@example.com' });
    const replaced = await put(p, { chat_webhook_url: `${WEBHOOK}/new` });
    expect(replaced.status, replaced.text).toBe(200);
    expect((await get(p)).body.data?.chat_webhook_url).toBe(`${WEBHOOK}/new`);
  });

  it('clears the webhook and the e-mail address with null', async () => {
    const p = await makeProject(s, w);
    await put(p, { chat_webhook_url: WEBHOOK, notify_email: 'ops@example.com' });
    const r = await put(p, { chat_webhook_url: null });
    expect(r.body.data).toMatchObject({ chat_webhook_url: null, notify_email: 'ops@example.com' });
    expect((await put(p, { notify_email: null })).body.data).toMatchObject({ chat_webhook_url: null, notify_email: null });
    expect((await stored(p))?.chat_webhook_url).toBeNull();
  });

  it.each([
    [{}, 'The request body must name at least 1 field.'],
    [{ check_url: 'http://elsewhere.example.com/' }, 'Unknown field "check_url".'],
    [{ status: 'up' }, 'Unknown field "status".'],
    [{ enabled: true, extra: 1 }, 'Unknown field "extra".'],
    [{ enabled: 'yes' }, '"enabled" must be a boolean.'],
    [{ check_interval_sec: 9 }, '"check_interval_sec" must be at least 10.'],
    [{ check_interval_sec: 86401 }, '"check_interval_sec" must be at most 86400.'],
    [{ check_interval_sec: 30.5 }, '"check_interval_sec" must be an integer.'],
    [{ check_interval_sec: '60' }, '"check_interval_sec" must be an integer.'],
    [{ check_path: 'health' }, '"check_path" must start with "/" and be at most 1024 printable ASCII characters without spaces.'],
    [{ check_path: '/a b' }, '"check_path" must start with "/" and be at most 1024 printable ASCII characters without spaces.'],
    [{ check_path: '/a\tb' }, '"check_path" must start with "/" and be at most 1024 printable ASCII characters without spaces.'],
    [{ check_path: `/${'a'.repeat(1024)}` }, '"check_path" must start with "/" and be at most 1024 printable ASCII characters without spaces.'],
    [{ chat_webhook_url: 'ftp://hooks.example.com/x' }, '"chat_webhook_url" must be an http or https URL of at most 2048 characters, or null.'],
    [{ chat_webhook_url: 'javascript:alert(1)' }, '"chat_webhook_url" must be an http or https URL of at most 2048 characters, or null.'],
    [{ chat_webhook_url: 'hooks.example.com/x' }, '"chat_webhook_url" must be an http or https URL of at most 2048 characters, or null.'],
    [{ chat_webhook_url: 'https://hooks.example.com/a b' }, '"chat_webhook_url" must be an http or https URL of at most 2048 characters, or null.'],
    [{ chat_webhook_url: `https://hooks.example.com/${'a'.repeat(2030)}` }, '"chat_webhook_url" must be an http or https URL of at most 2048 characters, or null.'],
    [{ chat_webhook_url: 'http://' }, '"chat_webhook_url" must be an http or https URL.'],
    [{ chat_webhook_url: 42 }, '"chat_webhook_url" must be a string.'],
    [{ notify_email: 'not-an-address' }, '"notify_email" must be a valid e-mail address.'],
  ])('refuses %j with 400', async (body, message) => {
    const p = await makeProject(s, w);
    expect(await put(p, body)).toMatchObject({ status: 400, body: { success: false, error: message } });
    expect(await stored(p)).toBeUndefined();
  });

  it('accepts the bounds', async () => {
    const p = await makeProject(s, w);
    expect((await put(p, { check_interval_sec: 10 })).status).toBe(200);
    expect((await put(p, { check_interval_sec: 86400 })).status).toBe(200);
    expect((await put(p, { check_path: `/${'a'.repeat(1023)}` })).status).toBe(200);
    expect((await put(p, { chat_webhook_url: 'HTTP://hooks.example.com:8080/x' })).status).toBe(200);
  });

  it('never lets a member of one workspace read or change the monitor of another', async () => {
    const b = await makeWorkspace(s);
    const bProject = await makeProject(s, b);
    await put(bProject, { chat_webhook_url: WEBHOOK }, b.owner.key, b);
    const notFound = (what: string) => ({ status: 404, body: { success: false, error: `${what} was not found.` } });

    expect(await get(bProject, w.owner.key, b)).toMatchObject(notFound('Workspace'));
    expect(await put(bProject, { enabled: true }, w.owner.key, b)).toMatchObject(notFound('Workspace'));
    expect(await get(bProject, w.owner.key, w)).toMatchObject(notFound('Project'));
    expect(await put(bProject, { enabled: true }, w.owner.key, w)).toMatchObject(notFound('Project'));
    expect((await get(bProject, b.member.key, b)).body.data).toMatchObject({ enabled: false, chat_webhook_url: WEBHOOK });
  });
});
