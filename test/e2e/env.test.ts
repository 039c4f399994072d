import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { systemRandom } from '../../src/domain/clock.js';
import { SecretBox } from '../../src/adapters/secrets/secret-box.js';
import { makeProject, makeWorkspace, startTestServer, type TestProject, type TestServer, type TestWorkspace } from '../factories/harness.js';
import { STORE_KINDS } from '../factories/stores.js';

interface EnvVar {
  id: string;
  key: string;
  value: string;
  is_secret: boolean;
  created_at: string;
  updated_at: string;
}

interface Counts {
  created: number;
  updated: number;
  deleted: number;
}

const KEY_RULE = 'a letter or underscore, then letters, digits and underscores, at most 256 characters';
/** A value no ciphertext, id or timestamp could contain by chance. */
const marker = (label: string) => `${label}-${randomBytes(12).toString('hex')}`;

describe.each(STORE_KINDS)('project environment variables on %s', (kind) => {
  let s: TestServer;
  let w: TestWorkspace;
  beforeAll(async () => {
    s = await startTestServer(kind);
    w = await makeWorkspace(s);
  });
  afterAll(async () => s.close());

  const envPath = (p: TestProject, ws: { slug: string } = w) => `/api/workspaces/${ws.slug}/projects/${p.slug}/env`;
  const list = (p: TestProject, key = w.member.key) => s.request<EnvVar[]>('GET', envPath(p), { key });
  const create = (p: TestProject, body: unknown, key = w.member.key) => s.request<EnvVar>('POST', envPath(p), { key, body });
  const update = (p: TestProject, id: string, body: unknown, key = w.member.key) =>
    s.request<EnvVar>('PUT', `${envPath(p)}/${id}`, { key, body });
  const remove = (p: TestProject, id: string, key = w.member.key) => s.request<EnvVar>('DELETE', `${envPath(p)}/${id}`, { key });
  const bulk = (p: TestProject, body: unknown, key = w.member.key) => s.request<Counts>('PUT', `${envPath(p)}/bulk`, { key, body });
  const created = async (p: TestProject, body: { key: string; value: string; is_secret?: boolean }) => {
    const r = await create(p, body);
    expect(r.status, r.text).toBe(201);
    return r.body.data as EnvVar;
  };
  const rowsOf = (projectId: string) =>
    s.store.db.selectFrom('env_vars').selectAll().where('project_id', '=', projectId).orderBy('key').execute();

  it('creates, lists, updates and deletes a variable', async () => {
    const p = await makeProject(s, w);
    const r = await create(p, { key: 'PORT', value: '8080' });
    expect(r.status).toBe(201);
    const v = r.body.data as EnvVar;
    expect(v).toEqual({ id: expect.any(String), key: 'PORT', value: '8080', is_secret: false, created_at: expect.any(String), updated_at: v.created_at });
    expect((await list(p)).body).toEqual({ success: true, data: [v] });

    s.clock.advance(1000);
    const u = await update(p, v.id, { value: '9090' });
    expect(u.status).toBe(200);
    expect(u.body.data).toMatchObject({ id: v.id, key: 'PORT', value: '9090', is_secret: false, created_at: v.created_at });
    expect(Date.parse(u.body.data?.updated_at ?? '') - Date.parse(v.created_at)).toBeGreaterThanOrEqual(1000);

    const d = await remove(p, v.id);
    expect(d).toMatchObject({ status: 200, body: { success: true, data: { id: v.id, key: 'PORT', value: '9090' } } });
    expect((await list(p)).body.data).toEqual([]);
    expect(await remove(p, v.id)).toMatchObject({ status: 404, body: { success: false, error: 'Environment variable was not found.' } });
    expect(await update(p, v.id, { value: 'x' })).toMatchObject({ status: 404, body: { error: 'Environment variable was not found.' } });
  });

  it('lists by key in code-unit order, and keys are case-sensitive', async () => {
    const p = await makeProject(s, w);
    for (const key of ['path', 'PATH', '_X', 'B2', 'a']) await created(p, { key, value: key.toLowerCase() });
    expect((await list(p)).body.data?.map((v) => v.key)).toEqual(['B2', 'PATH', '_X', 'a', 'path']);
  });

  it('answers a sentence for a duplicate key (409), in the same project only', async () => {
    const p = await makeProject(s, w);
    const other = await makeProject(s, w);
    const first = await created(p, { key: 'TOKEN', value: 'a' });
    expect(await create(p, { key: 'TOKEN', value: 'b', is_secret: true })).toMatchObject({
      status: 409,
      body: { success: false, error: 'A variable named "TOKEN" already exists in this project.' },
    });
    expect((await list(p)).body.data).toEqual([first]);
    expect((await create(other, { key: 'TOKEN', value: 'b' })).status).toBe(201);
  });

  it('accepts the boundaries: empty value, 256-character key, 32 KiB of UTF-8', async () => {
    const p = await makeProject(s, w);
    expect((await create(p, { key: 'EMPTY', value: '' })).body.data).toMatchObject({ value: '', is_secret: false });
    expect((await create(p, { key: '_', value: 'x' })).status).toBe(201);
    expect((await create(p, { key: 'K'.repeat(256), value: 'x' })).status).toBe(201);
    const full = await create(p, { key: 'FULL', value: 'é'.repeat(16384) });
    expect(full.status).toBe(201);
    expect(full.body.data?.value).toBe('é'.repeat(16384));
    expect((await create(p, { key: 'ASCII', value: 'x'.repeat(32768) })).status).toBe(201);
  });

  it.each([
    [`"key" must be a variable name: ${KEY_RULE}.`, { key: '1ABC', value: 'x' }],
    [`"key" must be a variable name: ${KEY_RULE}.`, { key: 'BAD-KEY', value: 'x' }],
    [`"key" must be a variable name: ${KEY_RULE}.`, { key: '', value: 'x' }],
    [`"key" must be a variable name: ${KEY_RULE}.`, { key: 'K'.repeat(257), value: 'x' }],
    ['"value" must be at most 32768 characters long.', { key: 'A', value: 'x'.repeat(32769) }],
    ['"value" must be at most 32768 bytes (32 KiB) of UTF-8.', { key: 'A', value: 'é'.repeat(16385) }],
    ['"value" must be at most 32768 bytes (32 KiB) of UTF-8.', { key: 'A', value: '😀'.repeat(8193) }],
    ['Unknown field "extra".', { key: 'A', value: 'x', extra: 1 }],
    ['"value" must be a string.', { key: 'A', value: 5 }],
    ['"key" must be a string.', { key: 7, value: 'x' }],
    ['"is_secret" must be a boolean.', { key: 'A', value: 'x', is_secret: 'yes' }],
    ['"key" is required.', { value: 'x' }],
    ['"value" is required.', { key: 'A' }],
  ])('rejects a POST body with 400 (#%#): %s', async (message, body) => {
    const p = await makeProject(s, w);
    expect(await create(p, body)).toMatchObject({ status: 400, body: { success: false, error: message } });
    expect((await list(p)).body.data).toEqual([]);
  });

  it.each([
    ['The request body must name at least 1 field.', {}],
    ['"value" must be a string.', { value: 1 }],
    ['"is_secret" must be a boolean.', { is_secret: 'no' }],
    ['Unknown field "key".', { key: 'OTHER' }],
    ['"value" must be at most 32768 bytes (32 KiB) of UTF-8.', { value: 'é'.repeat(16385) }],
  ])('rejects a PUT body with 400 (#%#): %s', async (message, body) => {
    const p = await makeProject(s, w);
    const v = await created(p, { key: 'A', value: 'kept' });
    expect(await update(p, v.id, body)).toMatchObject({ status: 400, body: { success: false, error: message } });
    expect((await list(p)).body.data).toEqual([v]);
  });

  it.each([
    [`"variables" must be keyed by variable names: ${KEY_RULE} ("bad-key" is not).`, { variables: { 'bad-key': 'x' } }],
    [`"variables" must be keyed by variable names: ${KEY_RULE} ("9LIVES" is not).`, { variables: { '9LIVES': 'x' } }],
    [`"variables" must be keyed by variable names: ${KEY_RULE} ("${'K'.repeat(257)}" is not).`, { variables: { ['K'.repeat(257)]: 'x' } }],
    ['"variables.A" must be a string.', { variables: { A: 1 } }],
    ['"variables.A" must be at most 32768 bytes (32 KiB) of UTF-8.', { variables: { A: 'é'.repeat(16385) } }],
    ['"variables" must hold at most 1000 variables.', { variables: Object.fromEntries(Array.from({ length: 1001 }, (_, i) => [`K${i.toString()}`, ''])) }],
    ['"variables" is required.', { merge: true }],
    ['"merge" must be a boolean.', { variables: {}, merge: 'no' }],
    ['Unknown field "extra".', { variables: {}, extra: true }],
  ])('rejects a bulk body with 400, changing nothing (#%#): %s', async (message, body) => {
    const p = await makeProject(s, w);
    const v = await created(p, { key: 'A', value: 'kept' });
    expect(await bulk(p, body)).toMatchObject({ status: 400, body: { success: false, error: message } });
    expect((await list(p)).body.data).toEqual([v]);
  });

  it('accepts a bulk of exactly 1000 variables', async () => {
    const p = await makeProject(s, w);
    const variables = Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`K${i.toString()}`, `v${i.toString()}`]));
    expect((await bulk(p, { variables, merge: false })).body).toEqual({ success: true, data: { created: 1000, updated: 0, deleted: 0 } });
    expect(await s.services.envVars.resolvedFor(p.id)).toEqual(variables);
  });

  it('never returns a secret value: POST, GET and PUT answer "" with is_secret true', async () => {
    const p = await makeProject(s, w);
    const secret = marker('secret');
    const r = await create(p, { key: 'API_TOKEN', value: secret, is_secret: true });
    expect(r.status).toBe(201);
    expect(r.body.data).toMatchObject({ key: 'API_TOKEN', value: '', is_secret: true });
    expect(r.text).not.toContain(secret);

    const listed = await list(p);
    expect(listed.body.data).toEqual([r.body.data]);
    expect(listed.text).not.toContain(secret);

    const next = marker('secret');
    const u = await update(p, r.body.data?.id ?? '', { value: next });
    expect(u.body.data).toMatchObject({ value: '', is_secret: true });
    expect(u.text).not.toContain(next);
    expect((await list(p)).text).not.toContain(next);
    expect(await s.services.envVars.resolvedFor(p.id)).toEqual({ API_TOKEN: next });

    const d = await remove(p, r.body.data?.id ?? '');
    expect(d.body.data).toMatchObject({ key: 'API_TOKEN', value: '', is_secret: true });
    expect(d.text).not.toContain(next);
  });

  it('makes a plain value secret by sealing it, and a secret plain only with a new value', async () => {
    const p = await makeProject(s, w);
    const plain = marker('plain');
    const v = await created(p, { key: 'DB_PASSWORD', value: plain });

    const sealed = await update(p, v.id, { is_secret: true });
    expect(sealed.body.data).toMatchObject({ id: v.id, value: '', is_secret: true });
    expect(sealed.text).not.toContain(plain);
    const [row] = await rowsOf(p.id);
    expect(row?.is_secret).toBe(1);
    expect(row?.value).toMatch(/^v1:/);
    expect(row?.value).not.toContain(plain);
    expect(await s.services.envVars.resolvedFor(p.id)).toEqual({ DB_PASSWORD: plain });

    expect(await update(p, v.id, { is_secret: false })).toMatchObject({
      status: 400,
      body: { success: false, error: 'Give a new "value" to make the secret "DB_PASSWORD" non-secret; its current value is never revealed.' },
    });
    expect((await list(p)).body.data).toEqual([sealed.body.data]);

    const shown = await update(p, v.id, { is_secret: false, value: 'now-public' });
    expect(shown.body.data).toMatchObject({ value: 'now-public', is_secret: false });
    expect(await s.services.envVars.resolvedFor(p.id)).toEqual({ DB_PASSWORD: 'now-public' });
  });

  it('leaves a variable untouched when a PUT changes nothing', async () => {
    const p = await makeProject(s, w);
    const plain = await created(p, { key: 'PLAIN', value: 'same' });
    const secret = await created(p, { key: 'SECRET', value: 'same', is_secret: true });
    const before = await rowsOf(p.id);
    s.clock.advance(1000);
    expect((await update(p, plain.id, { value: 'same', is_secret: false })).body.data).toEqual(plain);
    expect((await update(p, secret.id, { value: 'same' })).body.data).toEqual(secret);
    expect((await update(p, secret.id, { is_secret: true })).body.data).toEqual(secret);
    expect(await rowsOf(p.id)).toEqual(before);
  });

  it('stores no secret plaintext: the raw store holds plain values only', async () => {
    const p = await makeProject(s, w);
    const plain = marker('plain');
    const secret = marker('secret');
    const changed = marker('changed');
    const bulkSecret = marker('bulk');
    await created(p, { key: 'PLAIN', value: plain });
    const v = await created(p, { key: 'SECRET', value: secret, is_secret: true });
    await created(p, { key: 'OTHER_SECRET', value: 'first', is_secret: true });
    await update(p, v.id, { value: changed });
    expect((await bulk(p, { variables: { OTHER_SECRET: bulkSecret } })).body.data).toEqual({ created: 0, updated: 1, deleted: 0 });

    let raw: string;
    if (kind === 'sqlite') {
      // The committed pages may still sit in the write-ahead log: read both files.
      const file = s.database.url;
      const parts = [readFileSync(file)];
      if (existsSync(`${file}-wal`)) parts.push(readFileSync(`${file}-wal`));
      raw = Buffer.concat(parts).toString('latin1');
    } else {
      const client = new pg.Client({ connectionString: s.database.url });
      await client.connect();
      try {
        raw = JSON.stringify((await client.query('SELECT * FROM env_vars')).rows);
      } finally {
        await client.end();
      }
    }
    expect(raw).toContain(plain);
    for (const hidden of [secret, changed, bulkSecret]) expect(raw).not.toContain(hidden);
    expect(await s.services.envVars.resolvedFor(p.id)).toEqual({ OTHER_SECRET: bulkSecret, PLAIN: plain, SECRET: changed });
  });

  it('bulk with merge: true upserts and counts exactly; a changed secret stays secret', async () => {
    const p = await makeProject(s, w);
    const same = await created(p, { key: 'SAME', value: '1' });
    await created(p, { key: 'CHANGED', value: 'old' });
    const secret = await created(p, { key: 'SECRET', value: 's1', is_secret: true });
    const sameSecret = await created(p, { key: 'SAME_SECRET', value: 'hidden', is_secret: true });
    const kept = await created(p, { key: 'KEPT', value: 'k' });
    s.clock.advance(1000);

    const r = await bulk(p, { variables: { SAME: '1', CHANGED: 'new', SECRET: 's2', SAME_SECRET: 'hidden', NEW: 'n' }, merge: true });
    expect(r).toMatchObject({ status: 200, body: { success: true, data: { created: 1, updated: 2, deleted: 0 } } });
    const after = new Map((await list(p)).body.data?.map((v) => [v.key, v]));
    expect([...after.keys()]).toEqual(['CHANGED', 'KEPT', 'NEW', 'SAME', 'SAME_SECRET', 'SECRET']);
    expect(after.get('SAME')).toEqual(same);
    expect(after.get('SAME_SECRET')).toEqual(sameSecret);
    expect(after.get('KEPT')).toEqual(kept);
    expect(after.get('SECRET')).toMatchObject({ id: secret.id, value: '', is_secret: true });
    expect(after.get('SECRET')?.updated_at).not.toBe(secret.updated_at);
    expect(after.get('NEW')).toMatchObject({ value: 'n', is_secret: false });
    expect(r.text).not.toContain('s2');
    expect(await s.services.envVars.resolvedFor(p.id)).toEqual({ CHANGED: 'new', KEPT: 'k', NEW: 'n', SAME: '1', SAME_SECRET: 'hidden', SECRET: 's2' });

    // The same request again changes nothing; merge defaults to true.
    expect((await bulk(p, { variables: { SAME: '1', CHANGED: 'new', SECRET: 's2', NEW: 'n' } })).body.data).toEqual({ created: 0, updated: 0, deleted: 0 });
    expect((await bulk(p, { variables: {} })).body.data).toEqual({ created: 0, updated: 0, deleted: 0 });
    expect((await list(p)).body.data).toHaveLength(6);
  });

  it('bulk with merge: false replaces the whole set and counts the deletions', async () => {
    const p = await makeProject(s, w);
    await created(p, { key: 'A', value: '1' });
    await created(p, { key: 'B', value: '2' });
    await created(p, { key: 'S', value: 'secret', is_secret: true });
    await created(p, { key: 'GONE', value: 'x', is_secret: true });

    const r = await bulk(p, { variables: { A: '1', B: 'two', S: 'secret2', C: '3' }, merge: false });
    expect(r.body).toEqual({ success: true, data: { created: 1, updated: 2, deleted: 1 } });
    expect((await list(p)).body.data?.map((v) => [v.key, v.value, v.is_secret])).toEqual([
      ['A', '1', false],
      ['B', 'two', false],
      ['C', '3', false],
      ['S', '', true],
    ]);
    expect(await s.services.envVars.resolvedFor(p.id)).toEqual({ A: '1', B: 'two', C: '3', S: 'secret2' });

    expect((await bulk(p, { variables: { C: '3' }, merge: false })).body.data).toEqual({ created: 0, updated: 0, deleted: 3 });
    expect((await bulk(p, { variables: {}, merge: false })).body.data).toEqual({ created: 0, updated: 0, deleted: 1 });
    expect((await list(p)).body.data).toEqual([]);
  });

  it('takes concurrent writes one at a time: exact counts, and a 409 rather than a failure', async () => {
    const p = await makeProject(s, w);
    // Each request reads the shared names, then writes many rows: a wide window for a race.
    const shared = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`SHARED_${i.toString()}`, 'same']));
    const bulks = await Promise.all(
      Array.from({ length: 8 }, (_, i) => bulk(p, { variables: { ...shared, [`OWN_${i.toString()}`]: 'x' } })),
    );
    expect(bulks.map((r) => r.status)).toEqual(Array.from({ length: 8 }, () => 200));
    const sum = (k: keyof Counts) => bulks.reduce((n, r) => n + (r.body.data?.[k] ?? 0), 0);
    expect([sum('created'), sum('updated'), sum('deleted')]).toEqual([108, 0, 0]);

    const posts = await Promise.all(Array.from({ length: 6 }, (_, i) => create(p, { key: 'RACE', value: i.toString() })));
    expect(posts.map((r) => r.status).sort()).toEqual([201, 409, 409, 409, 409, 409]);
    expect((await list(p)).body.data).toHaveLength(109);
  });

  it('routes PUT env/bulk to bulk, never to PUT env/:env_id', async () => {
    const p = await makeProject(s, w);
    const v = await created(p, { key: 'A', value: 'kept' });
    const spy = vi.spyOn(s.services.envVars, 'update');
    try {
      // The body of PUT :env_id is not a bulk body.
      expect(await bulk(p, { value: 'x' })).toMatchObject({ status: 400, body: { error: '"variables" is required.' } });
      expect((await bulk(p, { variables: { A: 'changed' } })).body.data).toEqual({ created: 0, updated: 1, deleted: 0 });
      expect(spy).not.toHaveBeenCalled();
    } finally {
      spy.mockRestore();
    }
    expect((await list(p)).body.data).toMatchObject([{ id: v.id, value: 'changed' }]);
    // Only PUT has the fixed segment: for DELETE, "bulk" is an id like any other.
    expect(await remove(p, 'bulk')).toMatchObject({ status: 404, body: { error: 'Environment variable was not found.' } });
  });

  it('answers 404 for an unknown project', async () => {
    const p = { id: 'none', slug: 'no-such-project', name: 'none' };
    expect(await list(p)).toMatchObject({ status: 404, body: { success: false, error: 'Project was not found.' } });
    expect(await create(p, { key: 'A', value: 'x' })).toMatchObject({ status: 404, body: { error: 'Project was not found.' } });
    expect(await bulk(p, { variables: { A: 'x' } })).toMatchObject({ status: 404, body: { error: 'Project was not found.' } });
  });

  it("isolates workspaces: another workspace's project slug or variable ids are not found, and nothing changes", async () => {
    const b = await makeWorkspace(s);
    const name = `shared-${randomBytes(4).toString('hex')}`;
    const pa = await makeProject(s, w, name);
    const pb = await makeProject(s, b, name);
    const onlyB = await makeProject(s, b);
    const theirs = (await s.request<EnvVar>('POST', envPath(pb, b), { key: b.owner.key, body: { key: 'B_SECRET', value: marker('b'), is_secret: true } })).body.data as EnvVar;
    const theirPlain = (await s.request<EnvVar>('POST', envPath(onlyB, b), { key: b.owner.key, body: { key: 'B_PLAIN', value: 'b' } })).body.data as EnvVar;
    const before = JSON.stringify([await rowsOf(pb.id), await rowsOf(onlyB.id)]);

    // A's member, A's slug, a project slug that exists only in B.
    const notFound = { status: 404, body: { success: false, error: 'Project was not found.' } };
    expect(await list(onlyB)).toMatchObject(notFound);
    expect(await create(onlyB, { key: 'X', value: 'x' })).toMatchObject(notFound);
    expect(await bulk(onlyB, { variables: { X: 'x' }, merge: false })).toMatchObject(notFound);
    expect(await update(onlyB, theirPlain.id, { value: 'x' })).toMatchObject(notFound);
    expect(await remove(onlyB, theirPlain.id)).toMatchObject(notFound);

    // B's variable ids under A's own project of the same name.
    const noVar = { status: 404, body: { success: false, error: 'Environment variable was not found.' } };
    expect(await update(pa, theirs.id, { is_secret: false, value: 'stolen' })).toMatchObject(noVar);
    expect(await remove(pa, theirs.id)).toMatchObject(noVar);
    expect(await update(pa, theirPlain.id, { value: 'x' })).toMatchObject(noVar);

    // A's own project of the same name is A's: a bulk replace there leaves B alone.
    expect((await bulk(pa, { variables: { B_SECRET: 'mine' }, merge: false })).body.data).toEqual({ created: 1, updated: 0, deleted: 0 });
    expect((await list(pa)).body.data?.map((v) => v.key)).toEqual(['B_SECRET']);

    // B's slug with A's member: the workspace itself is not found.
    expect(await s.request('GET', envPath(pb, b), { key: w.member.key })).toMatchObject({ status: 404, body: { error: 'Workspace was not found.' } });
    expect(await s.request('DELETE', `${envPath(pb, b)}/${theirs.id}`, { key: w.member.key })).toMatchObject({ status: 404 });

    expect(JSON.stringify([await rowsOf(pb.id), await rowsOf(onlyB.id)])).toBe(before);
  });

  it('resolvedFor gives every variable with secrets opened, and nothing for a project without any', async () => {
    const p = await makeProject(s, w);
    const secret = marker('secret');
    await created(p, { key: 'PLAIN', value: 'p' });
    await created(p, { key: 'SECRET', value: secret, is_secret: true });
    await created(p, { key: 'EMPTY_SECRET', value: '', is_secret: true });
    await created(p, { key: '__proto__', value: 'not a prototype' });
    const env = await s.services.envVars.resolvedFor(p.id);
    expect(env).toEqual({ EMPTY_SECRET: '', PLAIN: 'p', SECRET: secret, ['__proto__']: 'not a prototype' });
    expect(Object.getPrototypeOf(env)).toBe(Object.prototype);
    expect(await s.services.envVars.resolvedFor((await makeProject(s, w)).id)).toEqual({});
  });

  it('copes with a secret sealed under another key file: 409 until a new value, bulk overwrites it, resolving for a deploy names it', async () => {
    const p = await makeProject(s, w);
    const a = await created(p, { key: 'FOREIGN_A', value: marker('a'), is_secret: true });
    const b = await created(p, { key: 'FOREIGN_B', value: marker('b'), is_secret: true });
    // as if the secret key file had been replaced: the stored values are sealed under another key
    const other = new SecretBox(randomBytes(32), systemRandom);
    for (const v of [a, b]) {
      await s.store.db.updateTable('env_vars').set({ value: other.seal('old', `env:${p.id}:${v.key}`) }).where('id', '=', v.id).execute();
    }
    await expect(s.services.envVars.resolvedFor(p.id)).rejects.toThrow(/FOREIGN_A cannot be decrypted with this installation's secret key file/);

    const plainOnly = await update(p, a.id, { is_secret: false });
    expect(plainOnly.status, plainOnly.text).toBe(400);
    const sameSecrecy = await update(p, a.id, { is_secret: true });
    expect(sameSecrecy.status, sameSecrecy.text).toBe(409);
    expect(sameSecrecy.body.error).toMatch(/"FOREIGN_A" cannot be decrypted .* give it a new "value"/);
    const fresh = marker('fresh');
    const replaced = await update(p, a.id, { value: fresh });
    expect(replaced.status, replaced.text).toBe(200);
    expect(replaced.body.data).toMatchObject({ key: 'FOREIGN_A', value: '', is_secret: true });

    const counted = await bulk(p, { variables: { FOREIGN_B: 'new b' } });
    expect(counted.body.data).toEqual({ created: 0, updated: 1, deleted: 0 });
    expect(await s.services.envVars.resolvedFor(p.id)).toEqual({ FOREIGN_A: fresh, FOREIGN_B: 'new b' });
  });

  describe('values a container cannot carry', () => {
    const NUL = (field: string) => `${field} must not contain a NUL byte (U+0000): a container's environment cannot carry it.`;
    const LONE = (field: string) => `${field} must be valid Unicode: it holds an unpaired surrogate, which a container would receive as U+FFFD.`;

    it.each([
      ['a NUL byte', (v: string) => `${v}\0tail`, NUL('"value" of the variable "TOKEN"')],
      ['an unpaired surrogate', (v: string) => `${v}\ud800`, LONE('"value" of the variable "TOKEN"')],
    ])('POST refuses %s with 400 naming the variable, plain or secret, and stores nothing', async (_what, make, message) => {
      const p = await makeProject(s, w);
      for (const is_secret of [false, true]) {
        const value = make(marker('refused'));
        const r = await create(p, { key: 'TOKEN', value, is_secret });
        expect(r).toMatchObject({ status: 400, body: { success: false, error: message } });
        expect(r.text).not.toContain(value.slice(0, 20));
      }
      expect(await rowsOf(p.id)).toEqual([]);
    });

    it('PUT refuses a NUL byte or an unpaired surrogate with 400 naming the variable, and keeps the old value', async () => {
      const p = await makeProject(s, w);
      const secret = marker('kept');
      const v = await created(p, { key: 'API_TOKEN', value: secret, is_secret: true });
      const before = await rowsOf(p.id);
      expect(await update(p, v.id, { value: 'x\0y' })).toMatchObject({ status: 400, body: { error: NUL('"value" of the variable "API_TOKEN"') } });
      expect(await update(p, v.id, { value: '\udc00x', is_secret: false })).toMatchObject({ status: 400, body: { error: LONE('"value" of the variable "API_TOKEN"') } });
      expect(await rowsOf(p.id)).toEqual(before);
      expect(await s.services.envVars.resolvedFor(p.id)).toEqual({ API_TOKEN: secret });
    });

    it('bulk refuses a NUL byte with 400 naming the variable and changes nothing, whatever merge says', async () => {
      const p = await makeProject(s, w);
      await created(p, { key: 'KEEP', value: 'kept' });
      const before = await rowsOf(p.id);
      for (const merge of [true, false]) {
        const r = await bulk(p, { variables: { FINE: 'ok', DB_PASSWORD: 'p\0w' }, merge });
        expect(r).toMatchObject({ status: 400, body: { success: false, error: NUL('"variables.DB_PASSWORD"') } });
        expect(await bulk(p, { variables: { ODD: 'a\ud83d' }, merge })).toMatchObject({ status: 400, body: { error: LONE('"variables.ODD"') } });
      }
      expect(await rowsOf(p.id)).toEqual(before);
    });

    it('accepts what a container does carry: newlines, control characters, "=", quotes, emoji', async () => {
      const p = await makeProject(s, w);
      const variables = { MULTI: 'a\nb\r\nc', CTRL: '\u0001\u001b[0m', EQ: 'a=b=c', Q: `"'\\`, EMOJI: '😀 é' };
      expect((await bulk(p, { variables })).status).toBe(200);
      expect(await s.services.envVars.resolvedFor(p.id)).toEqual(variables);
    });

    it("holds a project's whole environment to 768 KiB, as the engine receives it, on every write", async () => {
      const p = await makeProject(s, w);
      const big = 'x'.repeat(32 * 1024);
      // 23 × 32 KiB fits; a 24th does not (each "KEY=value" costs its JSON encoding plus one byte)
      const fits = Object.fromEntries(Array.from({ length: 23 }, (_, i) => [`V${i.toString()}`, big]));
      expect((await bulk(p, { variables: fits })).status).toBe(200);
      const over = /^The project's variables would take \d+ bytes in a container's environment \(each "KEY=value" JSON-encoded, as sent to the engine\); at most 786432 bytes \(768 KiB\) fit, since Docker Engine refuses larger container requests\.$/;
      const before = await rowsOf(p.id);
      const posted = await create(p, { key: 'V23', value: big, is_secret: true });
      expect(posted.status, posted.text).toBe(400);
      expect(posted.body.error).toMatch(over);
      expect((await bulk(p, { variables: { V23: big } })).body.error).toMatch(over);
      // control characters cost their JSON escapes: 6 bytes each
      const small = await created(p, { key: 'SMALL', value: '' });
      expect((await update(p, small.id, { value: '\u0001'.repeat(8000) })).body.error).toMatch(over);
      expect((await rowsOf(p.id)).length).toBe(before.length + 1);
      // replacing the whole set is measured without the variables it drops
      const replaced = await bulk(p, { variables: { ...fits, V0: 'small', V23: big }, merge: false });
      expect(replaced.body).toEqual({ success: true, data: { created: 1, updated: 1, deleted: 1 } });
    });
  });

  it('goes with its project', async () => {
    const p = await makeProject(s, w);
    await created(p, { key: 'A', value: 'x', is_secret: true });
    await s.store.db.deleteFrom('projects').where('id', '=', p.id).execute();
    expect(await rowsOf(p.id)).toEqual([]);
  });
});
