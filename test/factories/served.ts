// Helpers for tests that run the built `slipway serve` as a child process with the Docker engine
// (crash, standby, tls): the API called with the bootstrap key, the router probed by Host header,
// and the installation's engine objects removed afterwards.
import { existsSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import Docker from 'dockerode';
import { DockerRuntime } from '../../src/adapters/runtime/docker/docker.runtime.js';
import { createStore, instanceId } from '../../src/store/db.js';

export interface Envelope<T> {
  success?: boolean;
  data?: T;
  error?: string;
}

/** `call(method, path, body?)` against `api` with the key `key()` gives at call time. */
export function apiClient(api: () => string, key: () => string) {
  return async function call<T>(method: string, path: string, body?: unknown): Promise<{ status: number; body: Envelope<T> }> {
    const headers: Record<string, string> = { 'x-api-key': key() };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(api() + path, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    return { status: res.status, body: (await res.json()) as Envelope<T> };
  };
}

/** GET / through the router with a Host header, on a fresh connection; status 0 when the connection fails. */
export function probeRouter(port: number, host: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path: '/', headers: { host }, agent: false, timeout: 5_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => {
        resolve({ status: res.statusCode ?? 0, body });
      });
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', (err) => {
      resolve({ status: 0, body: err.message });
    });
    req.end();
  });
}

/**
 * Calls `probe` one call after another, `everyMs` apart, until `during` settles (either way);
 * then resolves with every answer, or rejects as `during` did.
 */
export async function probeDuring<T, R>(probe: () => Promise<T>, everyMs: number, during: () => Promise<R>): Promise<{ answers: T[]; result: R }> {
  const answers: T[] = [];
  const probing = { on: true };
  const prober = (async () => {
    while (probing.on) {
      answers.push(await probe());
      await new Promise((r) => setTimeout(r, everyMs));
    }
  })();
  try {
    return { answers, result: await during() };
  } finally {
    probing.on = false;
    await prober;
  }
}

/**
 * Removes what the installation in `dataDir` (SQLite, or the PostgreSQL store at `databaseUrl`)
 * made on the engine: everything labelled with its instance id, and its `ws-default` network
 * (which carries the workspace's id).
 */
export async function purgeInstallation(dataDir: string, databaseUrl?: string): Promise<void> {
  const file = join(dataDir, 'slipway.db');
  if (databaseUrl === undefined && !existsSync(file)) return;
  const store = await createStore(databaseUrl ?? file);
  const id = await instanceId(store);
  const workspace = await store.db.selectFrom('workspaces').select('id').where('slug', '=', 'default').executeTakeFirst();
  await store.close();
  const docker = new Docker();
  await new DockerRuntime({ docker }).purge({ labels: { 'slipway.instance': id } });
  if (workspace === undefined) return;
  for (const n of await docker.listNetworks({ filters: { name: ['ws-default'], label: [`slipway.workspace=${workspace.id}`] } })) {
    await docker.getNetwork(n.Id).remove().catch(() => undefined);
  }
}
