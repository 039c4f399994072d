import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { createStore, type Store } from '../../src/store/db.js';
import { isUniqueViolation, toNumber } from '../../src/store/dialects.js';
import type { ApiKeyRow, Repositories, WorkspaceRow } from '../../src/store/repositories/index.js';
import type { DeploymentRow } from '../../src/store/schema.js';
import { freshDatabase, STORE_KINDS, type TestDatabase } from '../factories/stores.js';

/**
 * What the repositories rely on from a store, and what they promise, checked on every backend
 * through `store.repos` and `store.transaction`: a new backend (or a driver upgrade) must pass
 * this file unchanged.
 */
describe.each(STORE_KINDS)('store conformance on %s', (kind) => {
  let database: TestDatabase;
  let store: Store;
  const now = '2026-11-21T10:00:00.000Z';
  let n = 0;
  const id = (p: string) => `${p}-${(n++).toString().padStart(4, '0')}`;

  beforeAll(async () => {
    database = await freshDatabase(kind);
    store = await createStore(database.url);
  });
  afterAll(async () => {
    await store.close();
    await database.drop();
  });

  const workspaceRow = (wid: string, slug = wid): WorkspaceRow => ({ id: wid, name: 'W', slug, settings: '{}', created_at: now, updated_at: now });
  /** A workspace owned by `owner` (a new user when not given), with an empty wallet. */
  async function workspace(repos: Repositories = store.repos, owner?: string, credit = 0): Promise<string> {
    const wid = id('w');
    await repos.workspaces.create({ workspace: workspaceRow(wid), ownerId: owner ?? (await user(repos)), creatorId: null, wallet: { currency: 'USD', credit, ledgerId: id('l') } });
    return wid;
  }
  async function user(repos: Repositories = store.repos): Promise<string> {
    const uid = id('u');
    await repos.users.insert({ id: uid, email: `${uid}@example.com`, name: uid, created_at: now, verified_at: now });
    return uid;
  }
  const keyRow = (uid: string, wid: string, over: Partial<ApiKeyRow> = {}): ApiKeyRow => ({
    id: id('k'), user_id: uid, workspace_id: wid, name: 'k', key_hash: id('h'), key_prefix: 'p', expires_at: now, created_at: now, last_used_at: null, revoked_at: null, ...over,
  });
  const project = (wid: string, slug: string, hostLabel = `${slug}-${wid}`) => ({
    id: id('p'), workspace_id: wid, name: slug, slug, port: 8080, replicas: 1, cpu: '0.5', ram: '0.5', status: 'pending' as const, created_at: now, updated_at: now, host_label: hostLabel,
  });
  const failure = (p: Promise<unknown>): Promise<unknown> => p.then(() => null, (e: unknown) => e);

  it('upserts a sampler pass of resource minutes in batches: every row kept, the last of a repeated one wins, a later pass updates', async () => {
    const minute = '2026-11-21T10:00:00.000Z';
    const row = (i: number, cpu: number) => ({ resource_id: `r-${kind}-${i.toString()}`, minute, cpu_millicores: cpu, memory_bytes: 1_000_000 + i, memory_limit_bytes: null, rx_bytes: i, tx_bytes: 2 * i, samples: 1 });
    const pass = Array.from({ length: 1234 }, (_, i) => row(i, 10));
    await store.repos.metrics.put([...pass, row(7, 99)]);
    const latest = await store.repos.metrics.latest(minute);
    const mine = [...latest.values()].filter((m) => m.resource_id.startsWith(`r-${kind}-`));
    expect(mine).toHaveLength(1234);
    expect(latest.get(`r-${kind}-7`)?.cpu_millicores).toBe(99);
    expect(latest.get(`r-${kind}-1233`)).toMatchObject({ memory_bytes: 1_001_233, rx_bytes: 1233, tx_bytes: 2466, memory_limit_bytes: null });
    await store.repos.metrics.put([{ ...row(1233, 55), samples: 2, memory_limit_bytes: 512 }]);
    expect((await store.repos.metrics.since(`r-${kind}-1233`, minute))[0]).toMatchObject({ cpu_millicores: 55, samples: 2, memory_limit_bytes: 512 });
  });

  it('reports its dialect', () => {
    expect(store.dialect).toBe(kind);
  });

  it('migrates idempotently: opening the same store again applies nothing twice', async () => {
    const again = await createStore(database.url);
    try {
      const names = await sql<{ name: string }>`select name from kysely_migration order by name`.execute(again.db);
      expect(names.rows.map((r) => r.name)).toEqual([
        '2026-11-21T000000-tenancy',
        '2026-11-21T010000-projects',
        '2026-11-22T000000-deploy-queue',
        '2026-11-23T000000-leases',
        '2026-11-24T000000-restart-requests',
        '2026-11-25T010000-github-installations',
        '2026-11-25T020000-webhook-secrets',
        '2026-11-25T030000-hosts',
        '2026-11-25T090000-workspace-creators',
        '2026-11-26T000000-runtime-logs',
        '2026-11-27T000000-databases',
        '2026-11-28T000000-templates',
        '2026-11-29T000000-billing',
        '2026-11-30T000000-uptime',
        '2026-12-01T000000-consent',
        '2026-12-07T000000-backups',
        '2026-12-07T120000-restores',
      ]);
    } finally {
      await again.close();
    }
  });

  it('reports unique violations the same way', async () => {
    const wid = await workspace();
    const err = await failure(
      store.transaction(async (tx) => tx.workspaces.create({ workspace: { ...workspaceRow(id('w'), wid), name: 'dup' }, ownerId: await user(tx), creatorId: null, wallet: { currency: 'USD', credit: 0, ledgerId: id('l') } })),
    );
    expect(isUniqueViolation(err)).toBe(true);
    expect(isUniqueViolation(new Error('other'))).toBe(false);
  });

  it('enforces foreign keys', async () => {
    const err = await failure(store.repos.members.add({ workspace_id: 'missing', user_id: 'missing', role: 'member', joined_at: now }));
    expect(err).not.toBeNull();
  });

  it('cascades a workspace delete to everything it owns', async () => {
    const uid = await user();
    const wid = await workspace(store.repos, uid);
    await store.repos.invitations.insert({ id: id('i'), workspace_id: wid, email: 'x@example.com', role: 'member', token_hash: id('t'), status: 'pending', invited_by: uid, expires_at: now, created_at: now, accepted_at: null, emailed: 0 });
    await store.repos.apiKeys.insert(keyRow(uid, wid));
    await store.transaction((tx) => tx.workspaces.delete(wid));
    expect(await store.repos.members.list(wid)).toEqual([]);
    expect(await store.repos.invitations.list(wid)).toEqual([]);
    expect(await store.repos.apiKeys.listLive(wid)).toEqual([]);
    expect(await store.repos.wallets.get(wid)).toBeUndefined();
    for (const table of ['members', 'invitations', 'api_keys', 'wallets', 'wallet_transactions'] as const) {
      const left = await store.db.selectFrom(table).select(store.db.fn.countAll<string | number>().as('n')).where('workspace_id', '=', wid).executeTakeFirstOrThrow();
      expect(toNumber(left.n), table).toBe(0);
    }
    // The user outlives the workspace.
    expect((await store.repos.users.byId(uid))?.id).toBe(uid);
  });

  it('rolls a failed transaction back completely', async () => {
    let wid = '';
    await expect(
      store.transaction(async (tx) => {
        wid = await workspace(tx);
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(wid).not.toBe('');
    expect(await store.repos.workspaces.byId(wid)).toBeUndefined();
    expect(await store.repos.wallets.get(wid)).toBeUndefined();
  });

  it('skips an insert on conflict when asked', async () => {
    const uid = await user();
    await store.repos.users.insertUnlessEmailTaken({ id: id('u'), email: `${uid}@example.com`, name: 'again', created_at: now, verified_at: now });
    expect(await store.repos.users.byEmail(`${uid}@example.com`)).toEqual({ id: uid, email: `${uid}@example.com`, name: uid, created_at: now, verified_at: now });
    const err = await failure(store.repos.users.insert({ id: id('u'), email: `${uid}@example.com`, name: 'again', created_at: now, verified_at: now }));
    expect(isUniqueViolation(err)).toBe(true);
  });

  it('round-trips text timestamps and null exactly, and orders them as time', async () => {
    const uid = await user();
    const wid = await workspace(store.repos, uid);
    const times = ['2026-11-21T10:00:00.010Z', '2026-11-21T09:59:59.999Z', '2026-11-21T10:00:00.002Z'];
    for (const t of times) await store.repos.apiKeys.insert(keyRow(uid, wid, { name: t, expires_at: t, created_at: t }));
    const rows = await store.repos.apiKeys.listLive(wid);
    expect(rows.map((r) => r.created_at)).toEqual([...times].sort());
    expect(rows.every((r) => r.last_used_at === null)).toBe(true);
  });

  it('creates a workspace with its owner, its wallet and the starting credit as one ledger row', async () => {
    const uid = await user();
    const wid = id('w');
    await store.transaction((tx) => tx.workspaces.create({ workspace: workspaceRow(wid), ownerId: uid, creatorId: uid, wallet: { currency: 'EUR', credit: 500, ledgerId: id('l') } }));
    expect(await store.repos.members.accessBySlug(wid, uid)).toEqual({ workspace: workspaceRow(wid), role: 'owner' });
    expect(await store.repos.wallets.get(wid)).toEqual({ workspace_id: wid, balance_micros: 5_000_000, currency: 'EUR', alert_threshold: 0, empty_since: null, alerts_sent: new Set() });
    const ledger = await store.db.selectFrom('wallet_transactions').select(['type', 'amount_micros', 'balance_after_micros']).where('workspace_id', '=', wid).execute();
    expect(ledger.map((r) => [r.type, toNumber(r.amount_micros), toNumber(r.balance_after_micros)])).toEqual([['adjustment', 5_000_000, 5_000_000]]);
    expect(await store.transaction((tx) => tx.workspaces.lockAndCountCreatedBy(uid))).toBe(1);
    // No credit, no ledger row; not counted for anyone.
    const other = await workspace(store.repos, uid);
    expect(await store.db.selectFrom('wallet_transactions').select('id').where('workspace_id', '=', other).execute()).toEqual([]);
    expect(await store.transaction((tx) => tx.workspaces.lockAndCountCreatedBy(uid))).toBe(1);
    expect((await store.repos.workspaces.ofMember(uid)).map((a) => [a.workspace.id, a.role])).toEqual([[wid, 'owner'], [other, 'owner']]);
  });

  it('serializes transactions that take a workspace\'s membership lock', async () => {
    const wid = await workspace();
    const order: string[] = [];
    let release = (): void => undefined;
    const held = new Promise<void>((r) => {
      release = r;
    });
    let locked = (): void => undefined;
    const isLocked = new Promise<void>((r) => {
      locked = r;
    });
    const first = store.transaction(async (tx) => {
      await tx.members.lockWorkspace(wid);
      order.push('first locked');
      locked();
      await held;
      order.push('first done');
    });
    await isLocked;
    const second = store.transaction(async (tx) => {
      await tx.members.lockWorkspace(wid);
      order.push('second locked');
    });
    await new Promise((r) => setTimeout(r, 100));
    release();
    await Promise.all([first, second]);
    expect(order).toEqual(['first locked', 'first done', 'second locked']);
  });

  it('finds memberships by workspace slug, the same for a missing workspace and a non-member', async () => {
    const owner = await user();
    const stranger = await user();
    const wid = await workspace(store.repos, owner);
    expect(await store.repos.members.accessBySlug(wid, owner)).toMatchObject({ workspace: { id: wid, slug: wid }, role: 'owner' });
    expect(await store.repos.members.access(wid, owner)).toMatchObject({ workspace: { id: wid }, role: 'owner' });
    expect(await store.repos.members.accessBySlug(wid, stranger)).toBeUndefined();
    expect(await store.repos.members.accessBySlug('no-such-workspace', owner)).toBeUndefined();
    await store.repos.members.add({ workspace_id: wid, user_id: stranger, role: 'member', joined_at: now });
    expect(await store.repos.members.countOwners(wid)).toBe(1);
    // joined at the same moment: by user id
    expect((await store.repos.members.list(wid)).map((m) => [m.user_id, m.role])).toEqual([[owner, 'owner'], [stranger, 'member']]);
  });

  it('gives a pending membership no access and no owner count until it is activated, once', async () => {
    const owner = await user();
    const invitee = await user();
    const wid = await workspace(store.repos, owner);
    await store.repos.members.add({ workspace_id: wid, user_id: invitee, role: 'owner', status: 'pending', joined_at: now });
    expect(await store.repos.members.accessBySlug(wid, invitee)).toBeUndefined();
    expect(await store.repos.members.access(wid, invitee)).toBeUndefined();
    expect((await store.repos.workspaces.ofMember(invitee)).map((a) => a.workspace.id)).toEqual([]);
    expect(await store.repos.members.countOwners(wid)).toBe(1);
    expect(await store.repos.members.pendingBySlug(wid, invitee)).toMatchObject({ workspaceId: wid, member: { user_id: invitee, role: 'owner', status: 'pending' } });
    expect(await store.repos.members.pendingBySlug(wid, owner)).toBeUndefined();
    const later = new Date(Date.parse(now) + 1000).toISOString();
    expect(await store.transaction((tx) => tx.members.activate(wid, invitee, later))).toBe(true);
    expect(await store.transaction((tx) => tx.members.activate(wid, invitee, later))).toBe(false);
    expect(await store.repos.members.accessBySlug(wid, invitee)).toMatchObject({ role: 'owner' });
    expect(await store.repos.members.find(wid, invitee)).toMatchObject({ status: 'active', joined_at: later });
    expect(await store.repos.members.countOwners(wid)).toBe(2);
  });

  it('sees a role change or a removal made in a transaction at once, though memberships are cached', async () => {
    const owner = await user();
    const other = await user();
    const wid = await workspace(store.repos, owner);
    await store.repos.members.add({ workspace_id: wid, user_id: other, role: 'admin', joined_at: now });
    expect((await store.repos.members.accessBySlug(wid, other))?.role).toBe('admin');
    await store.transaction((tx) => tx.members.setRole(wid, other, 'member'));
    expect((await store.repos.members.accessBySlug(wid, other))?.role).toBe('member');
    await store.transaction((tx) => tx.members.remove(wid, other));
    expect(await store.repos.members.accessBySlug(wid, other)).toBeUndefined();
  });

  it('reads a project with its Git connection in one statement, and without one', async () => {
    const wid = await workspace();
    const bare = project(wid, 'bare');
    const linked = project(wid, 'linked');
    await store.repos.projects.insert(bare);
    await store.repos.projects.insert(linked);
    const git = {
      project_id: linked.id, repo_full_name: 'octo/app', branch: 'main', installation_id: 42, auto_deploy: 1, dockerfile_path: 'Dockerfile',
      root_dir: '.', created_at: now, updated_at: now, webhook_id: 'ab12', webhook_secret: null,
    };
    await store.repos.gitConnections.insert(git);
    const expectedGit = await store.repos.gitConnections.of(linked.id);
    expect(await store.repos.projects.inWorkspaceWithGit(wid, 'linked')).toEqual({ project: await store.repos.projects.inWorkspace(wid, 'linked'), git: expectedGit });
    expect(await store.repos.projects.inWorkspaceWithGit(wid, 'bare')).toEqual({ project: await store.repos.projects.inWorkspace(wid, 'bare'), git: undefined });
    expect(await store.repos.projects.inWorkspaceWithGit(wid, 'missing')).toBeUndefined();
    expect(await store.repos.projects.inWorkspaceWithGit(await workspace(), 'linked')).toBeUndefined();
    const slug = (await store.repos.workspaces.byId(wid))?.slug;
    const labels = (await store.repos.projects.labels()).filter((l) => l.workspace === slug);
    expect(labels.sort((x, y) => x.project.localeCompare(y.project))).toEqual([{ id: bare.id, project: 'bare', workspace: slug }, { id: linked.id, project: 'linked', workspace: slug }]);
  });

  it('finds a key by its digest with its user, and revokes a member\'s keys in one workspace only', async () => {
    const uid = await user();
    const wid = await workspace(store.repos, uid);
    const elsewhere = await workspace(store.repos, uid);
    const key = keyRow(uid, wid);
    await store.repos.apiKeys.insert(key);
    const other = keyRow(uid, elsewhere);
    await store.repos.apiKeys.insert(other);
    const found = await store.repos.apiKeys.findByDigest(key.key_hash);
    expect(found).toEqual({
      key: { id: key.id, key_hash: key.key_hash, expires_at: now, revoked_at: null, last_used_at: null },
      user: await store.repos.users.byId(uid),
    });
    expect(await store.repos.apiKeys.findByDigest('no-such-digest')).toBeUndefined();
    await store.repos.apiKeys.touch(key.id, '2026-11-21T10:00:01.000Z');
    // outside a transaction the key may come from the access cache (up to a second old); inside, never
    expect((await store.transaction((tx) => tx.apiKeys.findByDigest(key.key_hash)))?.key.last_used_at).toBe('2026-11-21T10:00:01.000Z');
    await store.repos.apiKeys.revokeForMember(wid, uid, '2026-11-21T10:00:02.000Z');
    // a revocation through the repositories is seen at once, cache or not
    expect((await store.repos.apiKeys.findByDigest(key.key_hash))?.key.revoked_at).toBe('2026-11-21T10:00:02.000Z');
    expect(await store.repos.apiKeys.validity(key.id)).toEqual({ revoked_at: '2026-11-21T10:00:02.000Z', expires_at: now });
    expect(await store.repos.apiKeys.validity(other.id)).toEqual({ revoked_at: null, expires_at: now });
    expect(await store.repos.apiKeys.validity('no-such-key')).toBeUndefined();
  });

  it('refuses a default host label another project holds, in any workspace', async () => {
    const a = await workspace();
    const b = await workspace();
    await store.transaction((tx) => tx.projects.insert(project(a, 'shop', 'shop-api-alpha')));
    expect(await store.transaction((tx) => tx.projects.lockAndCountIn(a))).toBe(1);
    const err = await failure(store.transaction((tx) => tx.projects.insert(project(b, 'shop-api', 'shop-api-alpha'))));
    expect(isUniqueViolation(err)).toBe(true);
    expect(await store.repos.projects.list(b)).toEqual([]);
  });

  it('accepts an invitation once, and lets one project only hold a verified domain', async () => {
    const uid = await user();
    const wid = await workspace(store.repos, uid);
    const digest = id('t');
    await store.repos.invitations.insert({ id: id('i'), workspace_id: wid, email: 'y@example.com', role: 'member', token_hash: digest, status: 'pending', invited_by: uid, expires_at: '2999-01-01T00:00:00.000Z', created_at: now, accepted_at: null, emailed: 0 });
    const inv = await store.transaction((tx) => tx.invitations.lockByDigest(digest));
    expect(inv?.status).toBe('pending');
    expect(await store.repos.invitations.hasPending(wid, 'y@example.com', now)).toBe(true);
    expect(await store.repos.invitations.markAccepted(inv?.id ?? '', now)).toBe(true);
    expect(await store.repos.invitations.markAccepted(inv?.id ?? '', now)).toBe(false);

    const p1 = project(wid, 'one');
    const p2 = project(wid, 'two');
    await store.repos.projects.insert(p1);
    await store.repos.projects.insert(p2);
    const claim = (projectId: string) => ({ id: id('d'), project_id: projectId, domain: `${wid}.example.com`, verified: 0, verification_token: 't', verified_at: null, created_at: now });
    const d1 = claim(p1.id);
    const d2 = claim(p2.id);
    await store.repos.domains.insert(d1);
    await store.repos.domains.insert(d2);
    expect(await store.repos.domains.claimedByOther(d1.domain, p1.id)).toBe(true);
    expect(await store.repos.domains.markVerified(d1.id, now)).toBe(true);
    expect(await store.repos.domains.markVerified(d1.id, now)).toBe(false);
    expect(await store.repos.domains.isVerified(d1.domain)).toBe(true);
    expect(await store.repos.domains.isVerified(d1.domain, d1.id)).toBe(false);
    expect(isUniqueViolation(await failure(store.repos.domains.markVerified(d2.id, now)))).toBe(true);
    expect((await store.repos.domains.remove(p1.id, d1.id))?.id).toBe(d1.id);
    expect(await store.repos.domains.remove(p1.id, d1.id)).toBeUndefined();
  });

  it('deletes all of a project\'s variables but the named ones, or all of them', async () => {
    const wid = await workspace();
    const p = project(wid, 'env');
    await store.repos.projects.insert(p);
    const v = (key: string) => ({ id: id('e'), project_id: p.id, key, value: key, is_secret: 0, created_at: now, updated_at: now });
    await store.transaction(async (tx) => {
      await tx.projects.lock(p.id, { noKey: true });
      await tx.env.insert([v('A'), v('B'), v('C')]);
    });
    await store.repos.env.deleteAllBut(p.id, ['B']);
    expect((await store.repos.env.list(p.id)).map((r) => r.key)).toEqual(['B']);
    await store.repos.env.deleteAllBut(p.id, []);
    expect(await store.repos.env.list(p.id)).toEqual([]);
  });

  /** A queued deployment of project `projectId`, created at `at`. */
  const deploymentRow = (projectId: string, at = now, over: Partial<DeploymentRow> = {}): DeploymentRow => ({
    id: id('d'), project_id: projectId, status: 'queued', source: 'git', image: null, branch: 'main', commit_sha: null, commit_message: null, error: null,
    created_at: at, started_at: null, finished_at: null, lease_owner: null, lease_until: null, attempts: 0, restart_requested_at: null, require_head: 0, ...over,
  });
  async function projectIn(wid?: string): Promise<string> {
    const p = project(wid ?? (await workspace()), id('s'));
    await store.repos.projects.insert(p);
    return p.id;
  }
  const later = (ms: number) => new Date(Date.parse(now) + ms).toISOString();

  it('hands a queued deployment to exactly one of two concurrent claimers, one build per project at a time', async () => {
    // Two connections to one store, as two Slipway processes have.
    const other = await createStore(database.url);
    try {
      const pid = await projectIn();
      const d = deploymentRow(pid, '2000-01-01T00:00:00.000Z');
      await store.transaction(async (tx) => {
        await tx.projects.lock(pid, { noKey: false });
        await tx.deployQueue.insert(d);
      });
      expect(await store.repos.deployQueue.nextClaimable()).toBe(d.id);
      expect(await other.repos.deployQueue.nextClaimable()).toBe(d.id);
      const [a, b] = await Promise.all([store.repos.deployQueue.claim(d.id, 'a', now, later(30_000)), other.repos.deployQueue.claim(d.id, 'b', now, later(30_000))]);
      const won = [a, b].filter((c) => c !== undefined);
      expect(won).toHaveLength(1);
      expect(won[0]).toMatchObject({ id: d.id, status: 'building', started_at: now, lease_until: later(30_000), attempts: 1 });
      // A newer deployment of the project waits while this one builds.
      const newer = deploymentRow(pid, '2000-01-01T00:00:01.000Z');
      await store.repos.deployQueue.insert(newer);
      expect(await store.repos.deployQueue.nextClaimable()).not.toBe(newer.id);
      expect(await store.repos.deployQueue.claim(d.id, 'c', now, later(30_000))).toBeUndefined();
      await store.repos.deployQueue.supersedeQueued(pid, now, 'test');
      expect((await store.repos.deployQueue.byId(newer.id))).toMatchObject({ status: 'superseded', finished_at: now, error: 'test' });
      await store.repos.deployQueue.move(d.id, { from: 'building', worker: won[0]?.lease_owner ?? '' }, 'failed', { finished_at: now, lease_owner: null, lease_until: null });
    } finally {
      await other.close();
    }
  });

  it('renews a lease for its holder only, moves only with the holder, and fails what outlived its lease', async () => {
    const pid = await projectIn();
    const d = deploymentRow(pid);
    await store.repos.deployQueue.insert(d);
    await store.repos.deployQueue.claim(d.id, 'w', now, later(1000));
    expect(await store.repos.deployQueue.renew(d.id, 'w', later(2000))).toBe(true);
    expect(await store.repos.deployQueue.renew(d.id, 'intruder', later(9000))).toBe(false);
    expect(await store.repos.deployQueue.move(d.id, { from: 'building', worker: 'intruder' }, 'deploying', { image: 'img:1' })).toBeUndefined();
    expect(await store.repos.deployQueue.move(d.id, { from: 'queued', worker: 'w' }, 'deploying', { image: 'img:1' })).toBeUndefined();
    expect(await store.repos.deployQueue.move(d.id, { from: 'building', worker: 'w' }, 'deploying', { image: 'img:1' })).toMatchObject({ status: 'deploying', image: 'img:1', lease_owner: 'w' });
    expect(await store.repos.deployQueue.failExpired(later(2000), 'gone')).toEqual([]);
    const reaped = await store.repos.deployQueue.failExpired(later(2001), 'gone');
    expect(reaped.filter((r) => r.project_id === pid)).toMatchObject([{ id: d.id, status: 'failed', error: 'gone', finished_at: later(2001), lease_owner: null, lease_until: null }]);
    expect(await store.repos.deployQueue.renew(d.id, 'w', later(3000))).toBe(false);
    // Nobody's deployment: a null worker matches an empty lease only.
    const e = deploymentRow(pid, now, { status: 'running' });
    await store.repos.deployQueue.insert(e);
    expect(await store.repos.deployQueue.move(e.id, { from: 'running', worker: null }, 'stopped', { finished_at: now })).toMatchObject({ status: 'stopped' });
  });

  it('serves a project\'s newest running deployment, and hands a standby\'s restart request out once', async () => {
    const pid = await projectIn();
    const old = deploymentRow(pid, '2001-01-01T00:00:00.000Z', { status: 'running' });
    const young = deploymentRow(pid, '2001-01-01T00:00:01.000Z', { status: 'running' });
    const failed = deploymentRow(pid, '2001-01-01T00:00:02.000Z', { status: 'failed', finished_at: now });
    for (const d of [young, old, failed]) await store.repos.deployQueue.insert(d);
    expect((await store.repos.deployments.serving(pid))?.id).toBe(young.id);
    expect((await store.repos.deployments.running(pid)).map((d) => d.id).sort()).toEqual([old.id, young.id].sort());
    expect(await store.repos.deployments.anyRunning(pid)).toBe(true);
    expect(await store.repos.deployments.anyActive(pid)).toBe(false);
    expect((await store.repos.deployments.latest(pid))?.id).toBe(failed.id);
    expect(await store.repos.deployments.count(pid)).toBe(3);
    expect((await store.repos.deployments.page(pid, 2, 1)).map((d) => d.id)).toEqual([young.id, old.id]);
    await store.repos.deployments.requestRestart(young.id, now);
    await store.repos.deployments.requestRestart(failed.id, now);
    const asked = (await store.repos.deployments.restartRequested()).filter((d) => d.project_id === pid);
    expect(asked.map((d) => d.id)).toEqual([young.id]);
    expect(await store.repos.deployments.takeRestartRequest(young.id, now)).toBe(true);
    expect(await store.repos.deployments.takeRestartRequest(young.id, now)).toBe(false);
    expect(await store.repos.deployments.serving(await projectIn())).toBeUndefined();
  });

  it('gives a lease to one holder at a time: renewed by it, taken by another only once it has expired', async () => {
    const name = id('lease');
    const acquiredAt = async () => (await store.db.selectFrom('leases').select('acquired_at').where('name', '=', name).executeTakeFirstOrThrow()).acquired_at;
    const [a, b] = await Promise.all([store.repos.leases.acquire(name, 'a', now, later(1000)), store.repos.leases.acquire(name, 'b', now, later(1000))]);
    expect([a, b].filter(Boolean)).toHaveLength(1);
    const first = a ? 'a' : 'b';
    const second = a ? 'b' : 'a';
    // A renewal keeps the time it was first taken.
    expect(await store.repos.leases.acquire(name, first, later(500), later(1500))).toBe(true);
    expect(await acquiredAt()).toBe(now);
    expect(await store.repos.leases.holderAt(name, later(1500))).toEqual({ holder: first, expires_at: later(1500) });
    expect(await store.repos.leases.acquire(name, second, later(1500), later(2500))).toBe(false);
    expect(await store.repos.leases.acquire(name, second, later(1501), later(2501))).toBe(true);
    expect(await acquiredAt()).toBe(later(1501));
    expect(await store.repos.leases.holderAt(name, later(2502))).toBeUndefined();
    expect(await store.repos.leases.takeOver(name, first, 'c', later(1600), later(2600))).toBe(false);
    expect(await store.repos.leases.takeOver(name, second, 'c', later(1600), later(2600))).toBe(true);
    await store.repos.leases.release(name, second);
    expect((await store.repos.leases.holderAt(name, later(1600)))?.holder).toBe('c');
    await store.repos.leases.release(name, 'c');
    expect(await store.repos.leases.holderAt(name, later(1600))).toBeUndefined();
  });

  it('replays build lines in sequence order, from any point', async () => {
    const pid = await projectIn();
    const d = deploymentRow(pid);
    await store.repos.deployQueue.insert(d);
    const line = (seq: number) => ({ deployment_id: d.id, seq, at: now, line: `line ${seq.toString()}` });
    expect(await store.repos.buildLogs.lastSeq(d.id)).toBe(0);
    await store.repos.buildLogs.append([line(3), line(1), line(2)]);
    await store.repos.buildLogs.append([line(4), line(5)]);
    expect(await store.repos.buildLogs.lastSeq(d.id)).toBe(5);
    expect((await store.repos.buildLogs.after(d.id, 0, 10)).map((l) => l.seq)).toEqual([1, 2, 3, 4, 5]);
    expect(await store.repos.buildLogs.after(d.id, 2, 2)).toEqual([{ seq: 3, line: 'line 3' }, { seq: 4, line: 'line 4' }]);
    expect(isUniqueViolation(await failure(store.repos.buildLogs.append([line(5)])))).toBe(true);
  });

  it('claims a webhook delivery once, by its id or by its body', async () => {
    const receiver = id('r');
    const delivery = (deliveryId: string, digest: string, at = now) => ({ receiver, delivery_id: deliveryId, payload_digest: digest, received_at: at });
    const claims = await Promise.all([store.repos.webhookDeliveries.claim(delivery('1', 'x')), store.repos.webhookDeliveries.claim(delivery('1', 'x'))]);
    expect(claims.filter(Boolean)).toHaveLength(1);
    expect(await store.repos.webhookDeliveries.claim(delivery('2', 'x'))).toBe(false);
    await store.repos.webhookDeliveries.release(receiver, '1');
    expect(await store.repos.webhookDeliveries.claim(delivery('2', 'x', '2000-01-01T00:00:00.000Z'))).toBe(true);
    await store.repos.webhookDeliveries.prune(now);
    expect(await store.repos.webhookDeliveries.claim(delivery('2', 'y'))).toBe(true);
  });

  it('gives workspaces that predate wallets an empty wallet when migrating', async () => {
    const old = await freshDatabase(kind);
    try {
      const partial = await createStore(old.url, { upTo: '2026-11-21T000000-tenancy' });
      await partial.db.insertInto('workspaces').values({ id: 'w-old', name: 'Old', slug: 'old', settings: '{}', created_at: now, updated_at: now }).execute();
      await partial.close();
      const full = await createStore(old.url);
      try {
        const wallet = await full.repos.wallets.get('w-old');
        expect([wallet?.balance_micros, wallet?.currency, wallet?.alert_threshold]).toEqual([0, 'USD', 0]);
      } finally {
        await full.close();
      }
    } finally {
      await old.drop();
    }
  });

  it('gives Git connections that predate per-connection webhook secrets a unique webhook id and no secret when migrating', async () => {
    const old = await freshDatabase(kind);
    try {
      const partial = await createStore(old.url, { upTo: '2026-11-24T000000-restart-requests' });
      await sql`insert into workspaces (id, name, slug, settings, created_at, updated_at) values ('w-old', 'Old', 'old', '{}', ${now}, ${now})`.execute(partial.db);
      for (const p of ['p-a', 'p-b']) {
        await sql`insert into projects (id, workspace_id, name, slug, port, replicas, cpu, ram, status, created_at, updated_at) values (${p}, 'w-old', ${p}, ${p}, 8080, 1, '0.5', '0.5', 'pending', ${now}, ${now})`.execute(partial.db);
        await sql`insert into git_connections (project_id, repo_full_name, branch, installation_id, auto_deploy, dockerfile_path, root_dir, created_at, updated_at) values (${p}, 'acme/web', 'main', 0, 1, 'Dockerfile', '', ${now}, ${now})`.execute(partial.db);
      }
      await sql`insert into deployments (id, project_id, status, source, created_at) values ('d-old', 'p-a', 'running', 'git', ${now})`.execute(partial.db);
      await partial.close();
      const full = await createStore(old.url);
      try {
        const rows = (await full.repos.gitConnections.ofProjects(['p-a', 'p-b'])).sort((a, b) => (a.project_id < b.project_id ? -1 : 1));
        expect(rows).toHaveLength(2);
        for (const r of rows) {
          expect(r.webhook_id).toMatch(/^[0-9a-f]{32}$/);
          expect(r.webhook_secret).toBeNull();
        }
        expect(rows[0]?.webhook_id).not.toBe(rows[1]?.webhook_id);
        const d = await full.db.selectFrom('deployments').select('require_head').where('id', '=', 'd-old').executeTakeFirstOrThrow();
        expect(d.require_head).toBe(0);
        // One URL names one connection: the store refuses a second row with the same webhook id.
        const dup = await sql`update git_connections set webhook_id = ${rows[0]?.webhook_id ?? ''} where project_id = 'p-b'`.execute(full.db).then(() => null, (e: unknown) => e);
        expect(isUniqueViolation(dup)).toBe(true);
      } finally {
        await full.close();
      }
    } finally {
      await old.drop();
    }
  });

  it('takes users that predate address verification as verified, and memberships and invitations that predate consent as active and not e-mailed', async () => {
    const old = await freshDatabase(kind);
    try {
      const partial = await createStore(old.url, { upTo: '2026-11-30T000000-uptime' });
      await sql`insert into users (id, email, name, created_at) values ('u-old', 'old@example.com', 'Old', ${now})`.execute(partial.db);
      await sql`insert into workspaces (id, name, slug, settings, created_at, updated_at) values ('w-old', 'Old', 'old', '{}', ${now}, ${now})`.execute(partial.db);
      await sql`insert into members (workspace_id, user_id, role, joined_at) values ('w-old', 'u-old', 'owner', ${now})`.execute(partial.db);
      await sql`insert into invitations (id, workspace_id, email, role, token_hash, status, invited_by, expires_at, created_at) values ('i-old', 'w-old', 'x@example.com', 'member', 'h', 'pending', 'u-old', ${now}, ${now})`.execute(partial.db);
      await partial.close();
      const full = await createStore(old.url);
      try {
        expect((await full.repos.users.byId('u-old'))?.verified_at).toBe(now);
        expect(await full.repos.members.find('w-old', 'u-old')).toMatchObject({ role: 'owner', status: 'active' });
        expect((await full.repos.members.access('w-old', 'u-old'))?.role).toBe('owner');
        expect((await full.db.selectFrom('invitations').select('emailed').where('id', '=', 'i-old').executeTakeFirstOrThrow()).emailed).toBe(0);
      } finally {
        await full.close();
      }
    } finally {
      await old.drop();
    }
  });

  it('keeps the instance id the migrations made', async () => {
    const first = await store.repos.meta.instanceId();
    expect(first).not.toBe('');
    const again = await createStore(database.url);
    try {
      expect(await again.repos.meta.instanceId()).toBe(first);
    } finally {
      await again.close();
    }
  });

  it('answers ping, and fails it once closed', async () => {
    await expect(store.ping()).resolves.toBeUndefined();
    const other = await createStore(database.url);
    await other.close();
    await expect(other.ping()).rejects.toThrow();
  });
});
