// Issue 9, item 6: a push webhook deploys its commit only while that commit is the head of the
// pushed branch. A replayed or overtaken delivery (an old commit, validly signed) fails before
// anything is built, and the project keeps serving what it serves; a member's explicit deploy
// of an older commit still builds it. Real Git (git http-backend) and Docker Engine: run under
// `flock /tmp/slipway-docker.lock`.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Deployment } from '../../src/modules/deployments/deployments.schema.js';
import { sign } from '../../src/modules/webhooks/github-protocol.js';
import { startDeployFixture, viaRouter, type DeployFixture } from '../factories/engine.js';
import { ensureBaseImage } from '../factories/images.js';
import { STORE_KINDS } from '../factories/stores.js';
import { settledDeployment } from '../factories/deployments.js';

const site = (base: string, text: string) => ({
  Dockerfile: `FROM ${base}\nCOPY index.html /www/index.html\nCMD ["sh", "-c", "exec httpd -f -p $PORT -h /www"]\n`,
  'index.html': text,
});

describe.each(STORE_KINDS)('push webhooks deploy only the head of the branch, store %s', (kind) => {
  let fx: DeployFixture;
  let base: string;
  let hook = '';
  let secret = '';
  const shas: string[] = [];
  const projectPath = () => `/api/workspaces/${fx.w.slug}/projects/site`;
  const host = () => `site-${fx.w.slug}.apps.test`;

  const settled = (id: string) => settledDeployment<Deployment>(fx.s, fx.w.member.key, projectPath(), id, 120_000);

  /** A push delivery for `after`, as GitHub signs it with the connection's secret. */
  async function push(after: string): Promise<string> {
    const body = Buffer.from(
      JSON.stringify({
        ref: 'refs/heads/main',
        after,
        deleted: false,
        repository: { full_name: 'acme/site' },
        head_commit: { id: after, message: 'pushed', timestamp: new Date().toISOString() },
      }),
    );
    const r = await fx.s.request<{ deployments: string[] }>('POST', hook, {
      raw: body,
      headers: { 'content-type': 'application/json', 'x-github-event': 'push', 'x-github-delivery': randomUUID(), 'x-hub-signature-256': sign(secret, body) },
    });
    expect(r.status, r.text).toBe(202);
    const id = r.body.data?.deployments[0];
    if (id === undefined) throw new Error(r.text);
    return id;
  }

  beforeAll(async () => {
    base = await ensureBaseImage();
    fx = await startDeployFixture(kind, 'acme/site');
    shas.push(await fx.repo.commit('first', site(base, 'first\n')));
    shas.push(await fx.repo.commit('second', site(base, 'second\n')));
    const { s, w } = fx;
    expect((await s.request('POST', `/api/workspaces/${w.slug}/projects`, { key: w.member.key, body: { name: 'site', port: 8080, cpu: '0.25', ram: '0.125' } })).status).toBe(201);
    const git = await s.request<{ webhook_url: string; webhook_secret: string }>('POST', `${projectPath()}/git`, { key: w.member.key, body: { repo_full_name: 'acme/site' } });
    expect(git.status, git.text).toBe(201);
    hook = git.body.data?.webhook_url ?? '';
    secret = git.body.data?.webhook_secret ?? '';
  }, 120_000);

  afterAll(async () => {
    await fx.close();
  }, 60_000);

  it('builds and serves a push of the head commit', async () => {
    const d = await settled(await push(shas[1] ?? ''));
    expect(d, d.error ?? '').toMatchObject({ status: 'running', commit_sha: shas[1] });
    expect((await viaRouter(fx.engine.routerPort, host())).body).toBe('second\n');
  });

  it('fails a push of an older commit before building anything, and keeps serving the head', async () => {
    const old = shas[0] ?? '';
    const d = await settled(await push(old));
    expect(d).toMatchObject({
      status: 'failed',
      image: null,
      commit_sha: old,
      error: `${old.slice(0, 12)} is no longer the head of main (now ${(shas[1] ?? '').slice(0, 12)}); the newer push deploys it.`,
    });
    expect((await viaRouter(fx.engine.routerPort, host())).body).toBe('second\n');
  });

  it('still deploys an older commit a member names explicitly', async () => {
    const old = shas[0] ?? '';
    const r = await fx.s.request<Deployment>('POST', `${projectPath()}/deploy`, { key: fx.w.member.key, body: { commit_sha: old } });
    expect(r.status, r.text).toBe(202);
    const d = await settled(r.body.data?.id ?? '');
    expect(d, d.error ?? '').toMatchObject({ status: 'running', commit_sha: old });
    expect((await viaRouter(fx.engine.routerPort, host())).body).toBe('first\n');
  });
});
