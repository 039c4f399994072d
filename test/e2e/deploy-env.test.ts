// Issue 9, item 5: a value the engine refuses (a NUL byte) stored before the API refused it must
// fail a deploy with a clear error naming the variable, never "internal error", and the secret
// must reach neither the logs nor the deployment record nor its build log. Uses Docker Engine:
// run under `flock /tmp/slipway-docker.lock`.
import { randomBytes } from 'node:crypto';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OrchestratorOptions } from '../../src/modules/deployments/engine/orchestrator.js';
import { DockerRuntime } from '../../src/adapters/runtime/docker/docker.runtime.js';
import type { Deployment } from '../../src/modules/deployments/deployments.schema.js';
import { startDeployFixture, viaRouter, type DeployFixture } from '../factories/engine.js';
import { ensureBaseImage } from '../factories/images.js';
import { STORE_KINDS } from '../factories/stores.js';
import { deployAndSettle } from '../factories/deployments.js';

const app = (base: string) => ({
  Dockerfile: `FROM ${base}\nCMD ["sh", "-c", "mkdir -p /www && printf '%s' \\"$SECRET_TOKEN\\" > /www/index.html && exec httpd -f -p $PORT -h /www"]\n`,
});

/** Everything an error logged through pino would show: message, stack and causes. */
function rendered(value: unknown, seen = new Set<unknown>()): string {
  if (typeof value !== 'object' || value === null) return String(value);
  if (seen.has(value)) return '';
  seen.add(value);
  const parts = value instanceof Error ? [value.message, value.stack ?? '', rendered(value.cause, seen)] : [];
  for (const v of Object.values(value)) parts.push(rendered(v, seen));
  return parts.join('\n');
}

describe.each(STORE_KINDS)('a deploy with an env value the engine refuses, store %s', (kind) => {
  let fx: DeployFixture;
  let base: string;
  const engineLog: string[] = [];
  const log: OrchestratorOptions['log'] = {
    info: (obj, msg) => engineLog.push(`${msg} ${rendered(obj)}`),
    warn: (obj, msg) => engineLog.push(`${msg} ${rendered(obj)}`),
    error: (obj, msg) => engineLog.push(`${msg} ${rendered(obj)}`),
  };
  const secret = `s3cr3t-${randomBytes(12).toString('hex')}`;
  const head = secret.slice(0, 12);
  const tail = `tail-${randomBytes(8).toString('hex')}`;
  const poisoned = `${secret}\0${tail}`;
  const projectPath = () => `/api/workspaces/${fx.w.slug}/projects/hello`;

  const deploy = () => deployAndSettle<Deployment>(fx.s, fx.w.member.key, projectPath(), 120_000);

  beforeAll(async () => {
    base = await ensureBaseImage();
    fx = await startDeployFixture(kind, 'acme/hello', { engine: { log } });
    await fx.repo.commit('app', app(base));
    const { s, w } = fx;
    expect((await s.request('POST', `/api/workspaces/${w.slug}/projects`, { key: w.member.key, body: { name: 'hello', port: 8080, cpu: '0.25', ram: '0.125' } })).status).toBe(201);
    expect((await s.request('POST', `${projectPath()}/git`, { key: w.member.key, body: { repo_full_name: 'acme/hello' } })).status).toBe(201);
  }, 120_000);

  afterAll(async () => {
    await fx.close();
  }, 60_000);

  it('fails the deploy with a sentence naming the variable, and the secret is nowhere: logs, record, build log', async () => {
    const { s, w } = fx;
    const project = await s.store.db.selectFrom('projects').select('id').where('workspace_id', '=', w.id).where('slug', '=', 'hello').executeTakeFirstOrThrow();
    // as stored before the API refused NUL bytes: straight into the store, sealed like any secret
    const now = new Date().toISOString();
    await s.store.db
      .insertInto('env_vars')
      .values({ id: s.deps.ids.id(), project_id: project.id, key: 'SECRET_TOKEN', value: s.deps.secrets.seal(poisoned, `env:${project.id}:SECRET_TOKEN`), is_secret: 1, created_at: now, updated_at: now })
      .execute();

    const d = await deploy();
    expect(d.status).toBe('failed');
    expect(d.error).toBe('The value of the variable "SECRET_TOKEN" must not contain a NUL byte (U+0000): a container\'s environment cannot carry it. Give it a new value; no container was started with it.');

    const buildLog = (await s.logStore.query(project.id, { deploymentId: d.id, stream: 'build', direction: 'asc', limit: 1000 })).entries.map((l) => l.message);
    expect(buildLog.at(-1)).toBe(`[failed] ${d.error ?? ''}`);
    const records = await s.store.db.selectFrom('deployments').selectAll().where('project_id', '=', project.id).execute();
    for (const text of [s.logs.join('\n'), engineLog.join('\n'), buildLog.join('\n'), JSON.stringify(records)]) {
      expect(text).not.toContain(head);
      expect(text).not.toContain(tail);
    }
    // the variable is named, so it can be fixed through the API; then the deploy goes through
    const vars = await s.request<{ id: string; key: string }[]>('GET', `${projectPath()}/env`, { key: w.member.key });
    const v = vars.body.data?.find((x) => x.key === 'SECRET_TOKEN');
    expect((await s.request('PUT', `${projectPath()}/env/${v?.id ?? ''}`, { key: w.member.key, body: { value: 'fixed-value' } })).status).toBe(200);
    const again = await deploy();
    expect(again, again.error ?? '').toMatchObject({ status: 'running', error: null });
    expect(await viaRouter(fx.engine.routerPort, `hello-${w.slug}.apps.test`)).toEqual({ status: 200, body: 'fixed-value' });
  }, 120_000);

  it("scrubs the engine's own refusal, which quotes KEY=value, from the driver's error", async () => {
    // the driver's guard, for a container spec that bypasses the store's checks
    const runtime = new DockerRuntime({ docker: new Docker() });
    const instance = `scrub-${randomBytes(4).toString('hex')}`;
    const network = `ws-${instance}`;
    await runtime.ensureNetwork({ name: network, workspace: instance, labels: { 'slipway.test.scrub': instance } });
    try {
      const failure = await runtime
        .run({
          name: instance,
          image: base,
          command: ['true'],
          env: { SECRET_TOKEN: poisoned, OTHER: 'plain-value-here' },
          owner: { workspace: instance, project: instance, deployment: instance },
          labels: { 'slipway.test.scrub': instance },
          cpu: 0.25,
          memoryBytes: 32 * 1024 ** 2,
          network,
          restart: { kind: 'never' },
        })
        .then(
          () => null,
          (err: unknown) => err,
        );
      expect(failure).toBeInstanceOf(Error);
      const text = rendered(failure);
      // runc's sentence, with the value taken out
      expect(text).toMatch(/environment variable value can't contain null.*SECRET_TOKEN=\[redacted\]/);
      expect(text).not.toContain(head);
      expect(text).not.toContain(tail);
      expect(text).not.toContain('plain-value-here');
      expect(await runtime.inspect(instance)).toBeNull();
    } finally {
      await runtime.purge({ labels: { 'slipway.test.scrub': instance } });
    }
  }, 60_000);
});
